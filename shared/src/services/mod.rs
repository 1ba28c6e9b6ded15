//! What the functions call: each service combines the domain rules with the Redis adapter.

pub mod audit;
pub mod catalog;
pub mod corrections;
pub mod health;
pub mod hot;
pub mod ingestion;
pub mod journal;
pub mod leagues;
pub mod moderation;
pub mod profiles;
pub mod reads;
pub mod replay;
pub mod runtime_boards;
pub mod scores;
pub mod sign_ins;
pub mod tournaments;
pub mod voids;
