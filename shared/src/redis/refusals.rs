//! Replies that refuse a board as restoring (`BOARD_RESTORING`, docs/journal.md#fence), seen by
//! the store's connection whatever sent the command.

use redis::Value;

/// A board found restoring, by any script or command, may have been moved by a switch (or a
/// restore) this container's probe predates, its old guards freed: every write after it probes
/// its layout again, rather than be refused on the stale probe until it expires (found by the
/// simulation: a ban, whose script is not sent through `run_script`, was refused on the board's
/// old one slot after a restore had recorded its shards).
pub(super) fn forget_if_restoring<T: RefusesRestoring>(
    layouts: &super::layout::Layouts,
    answer: redis::RedisResult<T>,
) -> redis::RedisResult<T> {
    let restoring = match &answer {
        Err(e) => e.code() == Some(BOARD_RESTORING),
        Ok(reply) => reply.restoring(),
    };
    if restoring {
        layouts.forget_all();
    }
    answer
}

const BOARD_RESTORING: &str = "BOARD_RESTORING";

/// A reply (a command's, or a pipeline's) holding a script's refusal of a board restoring: an
/// error reply is a value until the caller reads it.
pub(super) trait RefusesRestoring {
    fn restoring(&self) -> bool;
}

impl RefusesRestoring for Value {
    fn restoring(&self) -> bool {
        match self {
            Value::ServerError(e) => e.code() == BOARD_RESTORING,
            // A transaction's replies, in its EXEC's.
            Value::Array(replies) => replies.iter().any(|reply| matches!(reply, Value::ServerError(e) if e.code() == BOARD_RESTORING)),
            _ => false,
        }
    }
}

impl RefusesRestoring for Vec<Value> {
    fn restoring(&self) -> bool {
        self.iter().any(Value::restoring)
    }
}
