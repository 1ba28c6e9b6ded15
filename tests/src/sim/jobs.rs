//! The journal function's jobs in the simulation: drains, restores (some meeting a drain),
//! restores killed part-way.

use std::sync::Arc;

use chrono::{Duration, Utc};
use journal::{RestoreReport, Restorer, S3Objects, Status};

use super::faults::DrainOnList;
use super::world::{World, far};

impl World {
    pub(super) async fn drain(&mut self) -> Result<(), String> {
        let objects = S3Objects::new(self.s3.clone(), &self.bucket);
        let report = self.app.drainer(objects, Arc::default()).with_notifier(self.notifier()).drain(far()).await;
        match report.boards.iter().find(|b| b.error.is_some()) {
            Some(board) => Err(format!("drain: {board:?}")),
            // Minutes to spare: what `standings drain` takes for the end of the journal.
            None if !report.complete => Err(format!("drain: a run with minutes to spare says its deadline stopped it: {report:?}")),
            None => self.check_notices(true).await,
        }
    }

    /// A function's start (docs/journal.md#fence): each declared board (and the catalog) not born
    /// is judged against the bucket. One the model holds lost with its history stays refused (the
    /// reads after every step check the rest: a lost board taken for new would answer them).
    pub(super) async fn function_start(&mut self) -> Result<(), String> {
        let objects = S3Objects::new(self.s3.clone(), &self.bucket);
        let found = standings::services::journal::births::at_start(&self.app.config, &self.app.keys, &self.app.store, &objects).await;
        for (name, birth) in found {
            let board = standings::redis::keys::journal_board(&name).to_owned();
            match birth {
                Err(error) => return Err(format!("a function's start: {name}: {error}")),
                // A forum whose guard a loss took before any point was applied may start new.
                Ok(standings::redis::restore::Birth::New) if board == "forum" && self.forum_lost && self.model.forum_has_points() => {
                    return Err(format!("a function's start took {name}, lost with its history, for a new board"));
                }
                Ok(_) => {}
            }
        }
        Ok(())
    }

    /// The journal's verify: every board replayed from its journal equals Redis (a deployment a
    /// fault left lost is restored first, as the alarm's runbook says).
    pub(super) async fn verify(&mut self) -> Result<(), String> {
        if self.forum_lost || self.others_lost {
            self.restore(false).await?;
        }
        let jobs = self.app.journal_jobs(&self.s3, &self.bucket, Arc::default());
        let report = jobs.run(serde_json::json!({"verify": {}}), far()).await.map_err(|e| format!("verify: {e:?}"))?;
        if report["mismatches"] != 0 {
            return Err(format!("verify: the journal disagrees with Redis: {report}"));
        }
        Ok(())
    }

    pub(super) fn restorer(&self, lease_ms: Option<u64>) -> Restorer<S3Objects> {
        let objects = S3Objects::new(self.s3.clone(), &self.bucket);
        let restorer = Restorer::new(self.app.config.clone(), self.app.keys.clone(), self.app.store.clone(), objects);
        match lease_ms {
            Some(ms) => restorer.with_lease_ms(ms),
            None => restorer,
        }
    }

    pub(super) async fn restore(&mut self, drain_at_list: bool) -> Result<(), String> {
        self.restore_in(drain_at_list, false).await
    }

    /// A restore of every board to completion; `in_steps`: in invocations that each stop at once,
    /// each passing on the campaign the one before answered.
    pub(super) async fn restore_in(&mut self, drain_at_list: bool, in_steps: bool) -> Result<(), String> {
        let mut last = None;
        let mut campaign: Option<String> = None;
        for _ in 0..400 {
            let deadline = if in_steps { chrono::Utc::now() } else { far() };
            let attempt = if drain_at_list {
                let objects = S3Objects::new(self.s3.clone(), &self.bucket);
                let drainer = self.app.drainer(S3Objects::new(self.s3.clone(), &self.bucket), Arc::default());
                // A listing as slow as a large journal's: longer than the restore's lease (50 ms
                // here), which must hold whatever the restore is doing.
                let objects = super::faults::DrainOnList {
                    pause: std::time::Duration::from_millis(200),
                    ..DrainOnList::new(objects, Some(drainer), "forum")
                };
                let restorer = Restorer::new(self.app.config.clone(), self.app.keys.clone(), self.app.store.clone(), objects);
                restorer.with_lease_ms(50).resume(None, campaign.as_deref(), deadline).await
            } else {
                self.restorer(Some(50)).resume(None, campaign.as_deref(), deadline).await
            };
            if let Ok(report) = &attempt {
                byte_fields(report)?;
            }
            match attempt {
                Ok(report) if report.status == Status::Complete => {
                    self.lost_everywhere(false);
                    return Ok(());
                }
                Ok(report) => {
                    campaign.clone_from(&report.campaign);
                    last = Some(report.boards.into_iter().filter(|b| b.status != Status::Complete).collect::<Vec<_>>());
                }
                // A killed restore's lease runs out within 50 ms.
                Err(error) if error.code() == "restore_running" => tokio::time::sleep(std::time::Duration::from_millis(25)).await,
                Err(error) => return Err(format!("restore: {error}")),
            }
        }
        Err(format!("restore: never completed ({last:?})"))
    }

    /// A restore whose lock's reply is lost with the connection (standalone: the proxy), on the
    /// restore's own lease: the store sends it again, and the restore must go on, not find its
    /// own lock and answer `restore_running` for the lease's two minutes.
    pub(super) async fn dropped_restore_lock(&mut self) -> Result<(), String> {
        let Some(proxy) = &self.proxy else { return self.restore(false).await };
        // The first board's lock the restore takes, whichever board that is.
        let lock = self.app.keys.board("forum").restore_lock();
        let dropped = proxy.dropped();
        proxy.drop_next_reply_to(lock.rsplit(':').next().unwrap_or_default().as_bytes());
        let attempt = self.restorer(None).restore(None, far()).await;
        proxy.disarm();
        if let Ok(report) = &attempt {
            byte_fields(report)?;
        }
        if proxy.dropped() != dropped + 1 {
            return Err("a restore whose lock's reply was to be lost: no reply was".into());
        }
        match attempt {
            Ok(report) if report.status == Status::Complete => {
                self.lost_everywhere(false);
                Ok(())
            }
            Ok(report) => Err(format!("a restore whose lock's reply was lost: {report:?}")),
            Err(error) => Err(format!("a restore whose lock's reply was lost: {error}")),
        }
    }

    /// Fault: a drain, then a restore attempt, through an S3 failing a share of calls. The
    /// drain may fail (its tail stays in Redis for the next) or store an object twice (a put
    /// whose reply was lost); the restore may fail part-way (the fence up until one completes).
    /// Nothing acknowledged may be lost, nor applied twice: later reads, drains, restores and
    /// verifies check it.
    pub(super) async fn failing_s3(&mut self, pick: u64) -> Result<(), String> {
        let (s3, bucket) = (self.s3.clone(), self.bucket.clone());
        let failing = |seed: u64| super::faults::FailingObjects {
            inner: S3Objects::new(s3.clone(), &bucket),
            rng: std::sync::Mutex::new(fastrand::Rng::with_seed(seed)),
        };
        self.app.drainer(failing(pick), Arc::default()).with_notifier(self.notifier()).drain(far()).await;
        self.check_notices(false).await?;
        // Its own failures: not the drain's call for call.
        let restorer = Restorer::new(self.app.config.clone(), self.app.keys.clone(), self.app.store.clone(), failing(pick ^ 1));
        let attempt = restorer.with_lease_ms(50).restore(None, far()).await;
        if let Ok(report) = &attempt {
            byte_fields(report)?;
        }
        match attempt {
            Ok(report) if report.status == Status::Complete => self.lost_everywhere(false),
            Ok(_) => self.lost_everywhere(true),
            Err(error) if matches!(error.code(), "journal_unavailable" | "restore_running") => self.lost_everywhere(true),
            Err(error) => return Err(format!("a restore on a failing S3: {error}")),
        }
        Ok(())
    }

    pub(super) async fn killed_restore(&mut self, yields: u8) {
        let restorer = Arc::new(self.restorer(Some(50)));
        let task = tokio::spawn(async move { restorer.restore(None, Utc::now() - Duration::seconds(1)).await });
        for _ in 0..yields {
            tokio::task::yield_now().await;
        }
        task.abort();
        let _ = task.await;
        // Part-way: the fence may be up on any board until a restore completes.
        self.lost_everywhere(true);
    }
}

/// A restore's progress in bytes (what the operator's command shows): no more read or left than
/// the board's journal holds, and nothing left of a board complete.
fn byte_fields(report: &RestoreReport) -> Result<(), String> {
    for board in &report.boards {
        let complete_and_left = board.status == Status::Complete && board.left_bytes != 0;
        if board.read_bytes > board.journal_bytes || board.left_bytes > board.journal_bytes || complete_and_left {
            return Err(format!("a restore's progress in bytes: {board:?}"));
        }
    }
    Ok(())
}
