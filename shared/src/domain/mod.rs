//! Pure rules, time passed in, no network: board configuration, periods and calendars, leagues,
//! scoring, rank-change notifications, the tie-break encoding, ids, decay, board distributions,
//! the guard's fields, lists that page, the rounds of a move between layouts and the periods
//! an admin action reaches.

pub mod catch_up;
pub mod config;
pub mod correction;
pub mod decay;
pub mod distribution;
pub mod effects;
pub mod guard;
pub mod ids;
pub mod journal;
pub mod league;
pub mod message;
pub mod notify;
pub mod paging;
pub mod period;
pub mod reach;
pub mod rescale;
pub mod scores;
pub mod scoring;
pub mod sign_in;
pub mod statement;
pub mod tiebreak;
pub mod void;
