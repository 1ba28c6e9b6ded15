//! The Redis adapter: the connection (`store`), every key (`keys`) and every Lua script with
//! its typed wrapper (`scripts`).

pub mod batch;
pub mod catalog;
pub mod error;
pub mod journal;
pub mod keys;
pub mod layout;
pub(crate) mod layout_signs;
pub mod node_map;
pub mod nodes;
pub mod notices;
pub mod period_sets;
pub mod probe;
mod refusals;
pub mod restore;
pub mod scan;
pub mod scripts;
pub mod settings;
pub mod sharded;
pub mod sharded_window;
pub mod store;
