//! The writes a store older than the board's last switch took in the layout it held, before the
//! drain fenced it (docs/journal.md#rollbacks): their journals were kept when the restore freed
//! that layout (`switches::record_restored`, `redis::restore::older`); once every journal of
//! the board is restored and takes writes again, each is decided again in the layout switched
//! to, as `redecide` does a rolled-back board's window.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::{BoardRestore, RestoreError, Restorer, Status, TAIL_PAGE};
use crate::archive::objects::Objects;
use crate::domain::config::Config;
use crate::domain::journal::{Line, stream_order};
use crate::redis::keys::{BoardKeys, Layout};
use crate::redis::restore::{self, older};
use crate::redis::{journal, layout};
use crate::services::journal::older_kept;
use crate::services::replay::{ReplayError, Replayed, Replayer};

impl<O: Objects> Restorer<O> {
    /// Decides again, in order of their ids over every kept journal, the older layout's writes
    /// after the switch, each taken out of its journal once decided (killed between the two, the
    /// next attempt finds its marker: a duplicate, journaled once), then the kept journals and
    /// their record go; counted in `report` (the board's last journal's), which says
    /// `in_progress` until then. Nothing while a shard of the board is not serving (the restore
    /// of the last one decides them; the drain counts the board lost meanwhile), nor beside
    /// another restore deciding them (the older layout's first shard's lock). Past `deadline`,
    /// once one write is decided.
    pub(super) async fn older_writes(
        &self,
        board: &str,
        config: &Config,
        report: &mut BoardRestore,
        deadline: DateTime<Utc>,
        kept: &[String],
    ) -> Result<(), RestoreError> {
        let mut conn = self.store.write_connection().await?;
        // The record, and the writes kept in S3 (their streams, and the record with them, taken
        // by a loss of every key; or a loss of a stream alone): read again under the lock.
        let recorded = older::read(&mut conn, &self.keys, board).await?;
        let candidate =
            older_kept::kept(kept, &self.keys, board).into_iter().find(|k| recorded.as_ref().is_none_or(|r| r.at_ms == k.at_ms));
        let held = match (&recorded, &candidate) {
            (Some(recorded), _) => recorded.layout.clone(),
            (None, Some(kept)) => older_kept::layout(&self.keys, board, &kept.journals)?,
            (None, None) => return Ok(()),
        };
        let Some((shards, generation)) = layout::read(&mut conn, &self.keys, board).await? else { return Ok(()) };
        let now = self.keys.layout_at(board, shards, generation);
        for shard in now.all() {
            if !restore::serving(&mut conn, &shard).await? {
                return Ok(());
            }
        }
        let lock = held.shard(0);
        let token = format!("{:016x}", fastrand::u64(..));
        if !restore::lock(&mut conn, &lock, &token, self.lease_ms).await? {
            return Err(RestoreError::Running(board.to_owned()));
        }
        let renewer = restore::LockRenewer::start(conn.clone(), lock.clone(), token.clone(), self.lease_ms);
        let decided = self.older_locked(board, config, report, deadline, &now).await;
        drop(renewer);
        if let Err(error) = restore::unlock(&mut conn, &lock, &token).await {
            tracing::warn!(board, error = %error, "the older writes' lock is left to its lease");
        }
        decided
    }

    /// `older_writes` under the lock: whether any were still to decide is read again (another
    /// invocation may have decided them meanwhile), and they are done with before the lock goes.
    async fn older_locked(
        &self,
        board: &str,
        config: &Config,
        report: &mut BoardRestore,
        deadline: DateTime<Utc>,
        now: &Layout,
    ) -> Result<(), RestoreError> {
        let mut conn = self.store.write_connection().await?;
        let recorded = older::read(&mut conn, &self.keys, board).await?;
        let listed = older_kept::listing_of(&self.objects, &self.keys, board).await?;
        let kept = older_kept::kept(&listed, &self.keys, board);
        let pending = older_kept::pending(&mut conn, &self.objects, &self.keys, kept, recorded.as_ref()).await?;
        let older = match (pending, recorded) {
            (Some(kept), _) => older_kept::bring_back(&mut conn, &self.objects, &self.keys, board, &kept).await?,
            (None, Some(recorded)) => recorded,
            (None, None) => return Ok(()),
        };
        report.status = Status::InProgress;
        if self.decide_older(board, config, &older, report, deadline).await? {
            older_kept::decided(&mut conn, &self.objects, &self.keys, &older, (now, Utc::now())).await?;
            older::done(&mut conn, &self.keys, &older).await?;
            report.status = Status::Complete;
        }
        Ok(())
    }

    /// Whether every one was decided (false: stopped at the deadline).
    async fn decide_older(
        &self,
        board: &str,
        config: &Config,
        older: &older::OlderWrites,
        report: &mut BoardRestore,
        deadline: DateTime<Utc>,
    ) -> Result<bool, RestoreError> {
        let mut conn = self.store.write_connection().await?;
        let mut lines: Vec<(Line, BoardKeys)> = Vec::new();
        for (shard, name) in older.layout.all().into_iter().zip(older.layout.journals()) {
            let mut cursor = Some(format!("{}-{}", older.at_ms, u64::MAX));
            loop {
                let page = journal::after(&mut conn, &shard, &name, cursor.as_deref(), TAIL_PAGE).await?;
                let Some(last) = page.last() else { break };
                cursor = Some(last.id.clone());
                lines.extend(page.into_iter().map(|line| (line, shard.clone())));
            }
        }
        lines.sort_by_key(|(line, _)| stream_order(&line.id));
        let decider = Replayer::deciding(Arc::new(config.clone()), self.keys.clone(), self.store.clone());
        for (index, (line, shard)) in lines.iter().enumerate() {
            if index > 0 && Utc::now() >= deadline {
                return Ok(false);
            }
            report.replayed += 1;
            // A job's record (a season's release) names the older layout's keys: not a write to
            // decide again.
            let decided = if line.is_record() {
                Replayed::Refused("a record of the older layout, not decided again".into())
            } else {
                match decider.replay(board, line).await {
                    Ok(decided) => decided,
                    Err(ReplayError::Malformed { problem, .. }) => Replayed::Refused(problem),
                    Err(ReplayError::Store(error)) => return Err(error.into()),
                }
            };
            tracing::info!(board, id = %line.id, decided = ?decided, "a write the older store took before its fence, decided again");
            report.count(&line.id, decided);
            journal::remove(&mut conn, shard, &line.id).await?;
        }
        Ok(true)
    }
}
