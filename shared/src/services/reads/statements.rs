//! A member's statement (`GET /v1/boards/{board}/users/{user_id}/statement`): their score and
//! the counters that explain it, from one snapshot of the user's shard.

use std::collections::BTreeMap;

use super::Reader;
use crate::domain::config::Board;
use crate::domain::guard;
use crate::domain::period::Period;
use crate::domain::scores;
use crate::domain::statement::{self, Statement};
use crate::redis::catalog;
use crate::redis::error::StoreError;
use crate::redis::keys::Layout;
use crate::services::reads::rules::ReadError;

/// A statement's snapshot: the period's `closed` field, the guard's `pruned` mark, its fence and
/// record of the period set with whether the set exists (`catalog::kept_state`), the member's
/// composite, the counters.
type Snapshot = (bool, Option<String>, redis::Value, redis::Value, Option<f64>, BTreeMap<String, String>);
/// A statement's read: whether its period is closed, the member's composite, the counters, the
/// `max_score` the composite is held at (`Layout::held_scale`).
type StatementRead = (bool, Option<f64>, BTreeMap<String, String>, Option<i64>);

impl Reader {
    /// The member's score and its statement counters, from one snapshot (one `MULTI`, every
    /// key in the board's slot), explained. A period frozen for archiving has no live board to
    /// explain (its statements are released with it): `StatementGone`.
    pub async fn statement(&self, board: &Board, period: &Period, user_id: &str) -> Result<Statement, ReadError> {
        let (closed, composite, fields, held) = self.on_layout(board, period, |layout| self.statement_on(layout, period, user_id)).await?;
        if closed {
            return Err(ReadError::StatementGone { board: board.name.clone(), period: period.kind.as_str(), period_id: period.id.clone() });
        }
        let score = composite.map(|c| scores::scale_held(board, period, held).score_of(c));
        Ok(statement::explain(board, score, &fields))
    }

    /// Whether `period` is closed, the member's composite and statement counters, from one
    /// snapshot of `layout`. A period set the guard records and Redis lost (docs/journal.md#losses)
    /// answers `board_restoring`, as every read of it does: its counters survived the set and would
    /// explain a score that is gone.
    async fn statement_on(&self, layout: Layout, period: &Period, user_id: &str) -> Result<StatementRead, StoreError> {
        let mut conn = self.store.connection().await?;
        let keys = layout.of_user(user_id);
        let set = keys.period(period);
        let [state, exists] = catalog::kept_state(&keys.guard(), &keys.kept_field(&set).unwrap_or_default(), &set);
        let (closed, pruned, state, exists, composite, fields): Snapshot = redis::pipe()
            .atomic()
            .hexists(keys.guard(), guard::closed_field(period))
            .hget(keys.guard(), guard::PRUNED)
            .add_command(state)
            .add_command(exists)
            .zscore(&set, user_id)
            .hgetall(keys.statement(user_id, period))
            .query_async(&mut conn)
            .await
            .map_err(StoreError::from)?;
        if self.keys.journal_on() {
            catalog::lost_for_reads(state, exists, (self.clock)().timestamp_millis())?;
        }
        // A recurring tournament's instance whose record the archive forgot (its `pruned` mark,
        // the end of the last one forgotten: tournament_prune.rs) is as closed as it was.
        let forgotten =
            pruned.and_then(|ms| ms.parse::<i64>().ok()).zip(period.start).is_some_and(|(pruned, start)| start.timestamp_millis() < pruned);
        Ok((closed || forgotten, composite, fields, layout.held_scale()))
    }
}
