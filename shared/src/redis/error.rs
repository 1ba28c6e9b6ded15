//! The Redis layer's one error type: every failure to reach, ask or trust the store.

use std::time::Duration;

use redis::RedisError;

/// Why a call to Redis failed. Mapped to HTTP in one place (`http::error`), never shown as is.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    #[error("redis: {0}")]
    Redis(#[from] RedisError),
    #[error("unexpected reply from redis: {0}")]
    Protocol(String),
    #[error("redis configuration: {0}")]
    Config(String),
    #[error("redis did not answer within {0:?}")]
    Timeout(Duration),
    #[error("only {acknowledged} of {wanted} replicas acknowledged the write in time")]
    NotReplicated { wanted: u32, acknowledged: u32 },
    /// A read found its board being restored, or lost (docs/journal.md#fence).
    #[error("the board is being restored from its journal")]
    Restoring,
    /// A score board's scores are laid out for another `max_score` than the configuration's
    /// (docs/boards.md#changing-max_score): a write that fits only the configured one (or a
    /// write that cannot be laid out at the held one, a void) waits for the move that
    /// re-encodes the board, rather than be misread.
    #[error("board {board:?} holds scores laid out for max_score {recorded}; the configuration says {configured}")]
    Rescaled { board: String, recorded: i64, configured: i64 },
    /// Writes are refused: the store may evict keys, and with them the boards, ledgers and
    /// event markers exactly-once rests on.
    #[error("the store's maxmemory-policy is {0:?}; writes need noeviction (or STANDINGS_ALLOW_EVICTING_POLICY=true)")]
    EvictingPolicy(String),
    /// A live read of a season the archive has closed (frozen, in any shard, or archived and
    /// freed; docs/archival.md#live-routes): its live set is gone or going, so it is no answer.
    /// Found by the read itself (`is_season_closed`), named by the reader.
    #[error("a season closed for archiving")]
    Closed,
    #[error("season {season} of board {board:?} is closed for archiving: it is read at /v1/boards/{board}/seasons/{season} once archived")]
    SeasonClosed { board: String, season: String },
}

impl StoreError {
    /// `Rescaled` for a write to `board` that fits its configured `max_score` but not `held`'s
    /// (the board as its scores are held, `scores::held_at`).
    pub fn rescaled(board: &crate::domain::config::Board, held: &crate::domain::config::Board) -> Self {
        let max = |board: &crate::domain::config::Board| board.scores.as_ref().map_or(0, |scores| scores.max_score);
        StoreError::Rescaled { board: board.name.clone(), recorded: max(held), configured: max(board) }
    }

    /// A failure no retry can cure: Standings asked Redis for something wrong (a key holding
    /// another type, a script that failed, a reply it cannot read, keys of several slots).
    /// Answered as an internal error and alarmed, never as a store to retry shortly.
    pub fn is_programming_error(&self) -> bool {
        use redis::ErrorKind;
        match self {
            StoreError::Protocol(_) => true,
            StoreError::Redis(e) => {
                matches!(e.code(), Some("WRONGTYPE" | "CROSSSLOT" | "NOPERM"))
                    || matches!(e.kind(), ErrorKind::UnexpectedReturnType | ErrorKind::Parse)
                    // A Lua runtime error: `ERR user_script:<line>: …` (Redis 7).
                    || (e.code() == Some("ERR") && e.detail().is_some_and(|d| d.contains("script")))
            }
            _ => false,
        }
    }

    /// The board is being restored from its journal, or lost and not restored yet
    /// (docs/journal.md#fence): a journaled write was refused with nothing written.
    pub fn is_restoring(&self) -> bool {
        matches!(self, StoreError::Restoring) || matches!(self, StoreError::Redis(e) if e.code() == Some("BOARD_RESTORING"))
    }

    /// A write found data its board's history says it holds gone and fenced the board in that
    /// call (`fence_lost`, prelude.lua): in a chunk of writes, those before it were applied.
    pub fn is_loss_found(&self) -> bool {
        matches!(self, StoreError::Redis(e) if e.code() == Some("BOARD_RESTORING") && e.detail().is_some_and(|d| d.contains(LOSS_FOUND)))
    }

    /// A move between layouts is in its last step (the `moving` fence,
    /// docs/scaling.md#changing-shards): a journaled write was refused with nothing written.
    pub fn is_resharding(&self) -> bool {
        matches!(self, StoreError::Redis(e) if e.code() == Some("BOARD_RESHARDING"))
    }

    /// The runtime board is being deleted (docs/runtime-boards.md#deleting): a write was
    /// refused with nothing written.
    pub fn is_ended(&self) -> bool {
        matches!(self, StoreError::Redis(e) if e.code() == Some("BOARD_ENDED"))
    }

    /// A read found the season it reads closed for archiving (`read_fence`, prelude_read.lua,
    /// or a sharded read's transaction): `Closed` before the reader names it.
    pub fn is_season_closed(&self) -> bool {
        matches!(self, StoreError::Closed) || matches!(self, StoreError::Redis(e) if e.code() == Some(SEASON_CLOSED))
    }

    /// Redis refused a write because it reached `maxmemory` (policy `noeviction`).
    pub fn is_out_of_memory(&self) -> bool {
        matches!(self, StoreError::Redis(e) if e.code() == Some("OOM"))
    }
}

/// The error code of a read of a season the archive has closed (`read_fence`).
pub const SEASON_CLOSED: &str = "PERIOD_CLOSED";

/// The words of `fence_lost`'s refusal (prelude.lua), which a refusal of a board fenced before
/// the call does not say.
const LOSS_FOUND: &str = "lost data its history says it holds";

#[cfg(test)]
mod tests {
    use super::LOSS_FOUND;

    #[test]
    fn a_loss_found_is_told_by_the_words_only_fence_lost_says() {
        let prelude = include_str!("scripts/prelude.lua");
        assert!(prelude.contains(&format!("'BOARD_RESTORING the board {LOSS_FOUND}")));
        let refuse = prelude.split("local function refuse_restoring").nth(1).and_then(|rest| rest.split("\nend").next()).unwrap();
        assert!(!refuse.contains(LOSS_FOUND), "a board fenced before the call says other words");
    }
}
