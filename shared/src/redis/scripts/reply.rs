//! The first value of every write script's reply, parsed in one place.

use crate::redis::error::StoreError;

/// What a write script answered. Each wrapper maps the statuses its script can give onto its
/// own reply type; any other is a protocol error (`Status::unexpected`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    /// Applied now.
    New,
    /// The id was seen with the same payload: nothing changed, the first answer stands.
    Duplicate,
    /// The id was seen with another payload.
    Conflict,
    /// A run for an earlier time than one already done (hot boards).
    Stale,
    OutOfRange,
    Banned,
    PeriodClosed,
    RateLimited,
    /// A take-back sent to wait for its give found nothing to take back yet.
    Deferred,
    /// The refusal the caller sent for a first delivery outside the event window.
    OutsideWindow,
    Seat(super::SeatRefusal),
}

impl Status {
    /// `outside_window`: the code of the refusal the call carried for a first delivery, if any.
    pub(crate) fn parse(script: &str, status: &str, outside_window: Option<&str>) -> Result<Self, StoreError> {
        Ok(match status {
            "new" => Self::New,
            "duplicate" => Self::Duplicate,
            "conflict" => Self::Conflict,
            "stale" => Self::Stale,
            "out_of_range" => Self::OutOfRange,
            "banned" => Self::Banned,
            "period_closed" => Self::PeriodClosed,
            "rate_limited" => Self::RateLimited,
            "deferred" => Self::Deferred,
            "not_joined" => Self::Seat(super::SeatRefusal::NotJoined),
            "tournament_full" => Self::Seat(super::SeatRefusal::Full),
            "entry_limit" => Self::Seat(super::SeatRefusal::EntryLimit),
            other if Some(other) == outside_window => Self::OutsideWindow,
            other => return Err(StoreError::Protocol(format!("{script} status {other:?}"))),
        })
    }

    /// A status the script is not supposed to give.
    pub(crate) fn unexpected(self, script: &str) -> StoreError {
        StoreError::Protocol(format!("{script} status {self:?}"))
    }
}
