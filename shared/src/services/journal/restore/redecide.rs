//! The writes a rolled-back store took before its fence (docs/journal.md#rollbacks), decided
//! again once the board is rebuilt from S3.

use chrono::{DateTime, Utc};

use super::{Progress, RestoreError, Restorer, Status, TAIL_PAGE};
use crate::archive::objects::Objects;
use crate::redis::journal;
use crate::redis::restore::rollback;
use crate::services::replay::{ReplayError, Replayed};

impl<O: Objects> Restorer<O> {
    /// The writes a rolled-back store took before its fence (docs/journal.md#rollbacks), decided
    /// against the snapshot: once the board is rebuilt from S3 and takes writes again, each is
    /// decided again in order, as a live write at its own time that journals its new decision
    /// (a retry of a write the journal holds is a duplicate, and journals nothing), then taken
    /// out of the stream. Killed between the two, the next attempt finds the write's marker: a
    /// duplicate, journaled once. Until the last, the drain leaves the board.
    pub(super) async fn redecide(
        &self,
        name: &str,
        progress: &mut Progress<'_>,
        (after, through): &(String, String),
        deadline: DateTime<Utc>,
    ) -> Result<(), RestoreError> {
        loop {
            let page = journal::after_until(progress.conn, progress.keys, name, Some(after), through, TAIL_PAGE).await?;
            if page.is_empty() {
                break;
            }
            for line in &page {
                if progress.report.replayed > 0 && Utc::now() >= deadline {
                    progress.report.status = Status::InProgress;
                    return Ok(());
                }
                progress.report.replayed += 1;
                let decided = match self.decider.replay(name, line).await {
                    Ok(decided) => decided,
                    Err(ReplayError::Malformed { problem, .. }) => Replayed::Refused(problem),
                    Err(ReplayError::Store(error)) => return Err(error.into()),
                };
                progress.report.count(&line.id, decided);
                progress.report.passed(&line.id);
                journal::remove(progress.conn, progress.keys, &line.id).await?;
            }
        }
        rollback::redecided(progress.conn, progress.keys).await?;
        progress.report.status = Status::Complete;
        Ok(())
    }
}
