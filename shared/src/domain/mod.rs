//! Pure rules, time passed in, no network: board configuration, periods and calendars,
//! scoring, the tie-break encoding, ids and decay.

pub mod config;
pub mod decay;
pub mod ids;
pub mod period;
pub mod scoring;
pub mod tiebreak;
