//! A restore's runs of lines on their way to Redis (`restore_lines.lua`): at most `IN_FLIGHT`
//! sent and not answered, each applied only where the one before it left the checkpoint.

use tokio::sync::oneshot;

use super::{IN_FLIGHT, Progress, RestoreError, Restorer};
use crate::archive::objects::Objects;
use crate::redis::error::StoreError;
use crate::redis::restore::{self, Applied};

impl<O: Objects> Restorer<O> {
    /// Sends the run gathered so far, once fewer than `IN_FLIGHT` are under way; the next run
    /// is gathered while Redis applies them.
    pub(super) async fn flush(&self, progress: &mut Progress<'_>) -> Result<(), RestoreError> {
        if progress.run.lines() == 0 {
            return Ok(());
        }
        while progress.in_flight.len() >= IN_FLIGHT {
            self.landed_one(progress).await?;
        }
        let run = std::mem::take(&mut progress.run);
        let from = progress.sent.replace(run.through().to_owned());
        let (mut conn, keys, token, lease_ms) = (progress.conn.clone(), progress.keys.clone(), progress.token.to_owned(), self.lease_ms);
        let (applied, answer) = oneshot::channel();
        let before = progress.last_applied.replace(answer);
        progress.in_flight.push_back(tokio::spawn(async move {
            let mut landed = restore::apply(&mut conn, &keys, &token, lease_ms, from.as_deref(), &run).await;
            // Sent from two tasks, the two runs may reach Redis in either order: one that came
            // before the run it follows goes again once that one is applied.
            if matches!(landed, Ok(Applied::OutOfOrder))
                && let Some(before) = before
                && before.await == Ok(true)
            {
                landed = restore::apply(&mut conn, &keys, &token, lease_ms, from.as_deref(), &run).await;
            }
            let _ = applied.send(matches!(landed, Ok(Applied::Applied)));
            landed
        }));
        Ok(())
    }

    /// Waits for every run sent: the first error, or the lock found another's.
    pub(super) async fn landed(&self, progress: &mut Progress<'_>) -> Result<(), RestoreError> {
        let mut first = Ok(());
        while !progress.in_flight.is_empty() {
            let landed = self.landed_one(progress).await;
            if first.is_ok() {
                first = landed;
            }
        }
        first
    }

    async fn landed_one(&self, progress: &mut Progress<'_>) -> Result<(), RestoreError> {
        let Some(call) = progress.in_flight.pop_front() else { return Ok(()) };
        match call.await.map_err(|e| StoreError::Protocol(format!("restore call: {e}")))?? {
            Applied::Applied => Ok(()),
            Applied::LockLost => Err(RestoreError::Running(progress.report.board.clone())),
            // The call before it failed (its error is the one reported), or another restore
            // moved the checkpoint meanwhile.
            Applied::OutOfOrder => Err(RestoreError::Running(progress.report.board.clone())),
        }
    }
}
