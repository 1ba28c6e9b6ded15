//! A member's statement (`GET /v1/boards/{board}/users/{user_id}/statement`): their score and
//! the counters that explain it, from one snapshot of the user's shard.

use std::collections::BTreeMap;

use super::Reader;
use crate::domain::config::Board;
use crate::domain::guard;
use crate::domain::period::Period;
use crate::domain::scores;
use crate::domain::statement::{self, Statement};
use crate::redis::error::StoreError;
use crate::redis::keys::Layout;
use crate::services::reads::rules::ReadError;

/// A guard's `born`, `fence` and `pruned`.
type GuardFence = (Option<String>, Option<String>, Option<String>);
/// A statement's read: whether its period is closed, the member's composite, the counters, the
/// `max_score` the composite is held at (`Layout::held_scale`).
type StatementRead = (bool, Option<f64>, BTreeMap<String, String>, Option<i64>);

impl Reader {
    /// The member's score and its statement counters, from one snapshot (one `MULTI`, every
    /// key in the board's slot), explained. A period frozen for archiving has no live board to
    /// explain (its statements are released with it): `StatementGone`.
    pub async fn statement(&self, board: &Board, period: &Period, user_id: &str) -> Result<Statement, ReadError> {
        let (closed, composite, fields, held) = self.on_layout(board, |layout| self.statement_on(layout, period, user_id)).await?;
        if closed {
            return Err(ReadError::StatementGone { board: board.name.clone(), period: period.kind.as_str(), period_id: period.id.clone() });
        }
        let score = composite.map(|c| scores::scale_held(board, period, held).score_of(c));
        Ok(statement::explain(board, score, &fields))
    }

    /// Whether `period` is closed, the member's composite and statement counters, from one
    /// snapshot of `layout`.
    async fn statement_on(&self, layout: Layout, period: &Period, user_id: &str) -> Result<StatementRead, StoreError> {
        let mut conn = self.store.connection().await?;
        let keys = layout.of_user(user_id);
        let (closed, fence, composite, fields): (bool, GuardFence, Option<f64>, BTreeMap<String, String>) = redis::pipe()
            .atomic()
            .hexists(keys.guard(), guard::closed_field(period))
            .cmd("HMGET")
            .arg(keys.guard())
            .arg(guard::BORN)
            .arg(guard::FENCE)
            .arg(guard::PRUNED)
            .zscore(keys.period(period), user_id)
            .hgetall(keys.statement(user_id, period))
            .query_async(&mut conn)
            .await
            .map_err(StoreError::from)?;
        if self.keys.journal_on() && (fence.0.is_none() || fence.1.is_some_and(|fence| fence != guard::MOVING)) {
            return Err(StoreError::Restoring);
        }
        // A recurring tournament's instance whose record the archive forgot (its `pruned` mark,
        // the end of the last one forgotten: tournament_prune.rs) is as closed as it was.
        let forgotten = fence
            .2
            .and_then(|ms| ms.parse::<i64>().ok())
            .zip(period.start)
            .is_some_and(|(pruned, start)| start.timestamp_millis() < pruned);
        Ok((closed || forgotten, composite, fields, layout.held_scale()))
    }
}
