//! Pure rules, time passed in, no network: board configuration, periods and calendars,
//! scoring, the tie-break encoding, ids, decay and the guard's fields.

pub mod config;
pub mod decay;
pub mod guard;
pub mod ids;
pub mod period;
pub mod scoring;
pub mod sign_in;
pub mod tiebreak;
