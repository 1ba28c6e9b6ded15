//! The writes a rolled-back store took before its fence (docs/journal.md#rollbacks), decided
//! again once the board is rebuilt from S3.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::{Progress, RestoreError, Restorer, Status, TAIL_PAGE};
use crate::archive::objects::Objects;
use crate::domain::config::Config;
use crate::redis::journal;
use crate::redis::keys::journal_board;
use crate::redis::restore::rollback;
use crate::services::replay::{ReplayError, Replayed, Replayer};

impl<O: Objects> Restorer<O> {
    /// Feeds the records among the stream's lines after `from` through `end` (the writes among
    /// them are left to `redecide`): true when it stopped at the deadline, the checkpoint on the
    /// last record fed, where the next invocation goes on.
    pub(super) async fn records_after(
        &self,
        name: &str,
        progress: &mut Progress<'_>,
        from: Option<String>,
        end: &str,
        deadline: DateTime<Utc>,
    ) -> Result<bool, RestoreError> {
        let mut cursor = from;
        loop {
            let page = journal::after_until(progress.conn, progress.keys, name, cursor.as_deref(), end, TAIL_PAGE).await?;
            let Some(last) = page.last() else { return Ok(false) };
            let last = last.id.clone();
            for line in page.iter().filter(|line| line.is_record()) {
                if self.stop(progress, deadline).await? {
                    return Ok(true);
                }
                self.feed(name, progress, line).await?;
            }
            cursor = Some(last);
        }
    }

    /// The writes a rolled-back store took before its fence, decided against the snapshot: once
    /// the board is rebuilt from S3 and takes writes again, each is decided again in order, as a
    /// live write at its own time on the boards as they are now (`config`: runtime ones too; a
    /// shard's write on its board, routed to the user's shard), which journals its new decision
    /// (a retry of a write the journal holds is a duplicate, and journals nothing); then it is
    /// taken out of the stream. Killed between the two, the next attempt finds the write's
    /// marker: a duplicate, journaled once. Until the last, the drain leaves the board.
    pub(super) async fn redecide(
        &self,
        name: &str,
        config: &Config,
        progress: &mut Progress<'_>,
        (after, through): &(String, String),
        deadline: DateTime<Utc>,
    ) -> Result<(), RestoreError> {
        let decider = Replayer::deciding(Arc::new(config.clone()), self.keys.clone(), self.store.clone());
        let mut cursor = after.clone();
        loop {
            let page = journal::after_until(progress.conn, progress.keys, name, Some(&cursor), through, TAIL_PAGE).await?;
            let Some(last) = page.last() else { break };
            let last = last.id.clone();
            for line in &page {
                if progress.report.replayed > 0 && Utc::now() >= deadline {
                    progress.report.status = Status::InProgress;
                    return Ok(());
                }
                // Records: applied by their effects with the rebuild (`records_after`).
                if line.is_record() {
                    continue;
                }
                progress.report.replayed += 1;
                let decided = match decider.replay(journal_board(name), line).await {
                    Ok(decided) => decided,
                    Err(ReplayError::Malformed { problem, .. }) => Replayed::Refused(problem),
                    Err(ReplayError::Store(error)) => return Err(error.into()),
                };
                progress.report.count(&line.id, decided);
                progress.report.passed(&line.id);
                journal::remove(progress.conn, progress.keys, &line.id).await?;
            }
            cursor = last;
        }
        rollback::redecided(progress.conn, progress.keys).await?;
        progress.report.status = Status::Complete;
        Ok(())
    }
}
