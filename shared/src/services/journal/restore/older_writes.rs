//! The writes a store older than the board's last switch took in the layout it held, before the
//! drain fenced it (docs/journal.md#rollbacks): their journals were kept when the restore freed
//! that layout (`switches::record_restored`); once the layout switched to takes writes again,
//! every shard of it restored, each is decided again there, as `redecide` does a rolled-back
//! board's window.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::{Progress, RestoreError, Restorer, Status, TAIL_PAGE};
use crate::archive::objects::Objects;
use crate::domain::config::Config;
use crate::domain::journal::{Line, stream_order};
use crate::redis::error::StoreError;
use crate::redis::keys::{BoardKeys, journal_board};
use crate::redis::{journal, layout, restore};
use crate::services::replay::{ReplayError, Replayed, Replayer};

impl<O: Objects> Restorer<O> {
    /// Decides again, in order of their ids over every kept journal, the older layout's writes
    /// after the board's last switch, each taken out of its journal once decided (killed
    /// between the two, the next attempt finds its marker: a duplicate, journaled once); then
    /// the kept journals and their record go. Nothing while a shard of the layout switched to is
    /// still fenced: the restore of the last one does it.
    pub(super) async fn older_writes(
        &self,
        name: &str,
        config: &Config,
        progress: &mut Progress<'_>,
        deadline: DateTime<Utc>,
    ) -> Result<(), RestoreError> {
        let board = journal_board(name);
        let conn = &mut *progress.conn;
        let record: Option<String> =
            redis::cmd("GET").arg(self.keys.board_older_writes(board)).query_async(conn).await.map_err(StoreError::from)?;
        let Some(record) = record else { return Ok(()) };
        let Some((shards, generation)) = layout::read(conn, &self.keys, board).await? else { return Ok(()) };
        for shard in self.keys.layout_at(board, shards, generation).all() {
            if !restore::serving(conn, &shard).await? {
                return Ok(());
            }
        }
        let Some(switch) = super::super::switches::last(&self.objects, &self.keys, board).await? else { return Ok(()) };
        let (shards, generation) = layout::parse(&record)?;
        let old = self.keys.layout_at(board, shards, generation);
        let mut lines: Vec<(Line, BoardKeys)> = Vec::new();
        for (shard, journal_name) in old.all().into_iter().zip(old.journals()) {
            let mut cursor = Some(format!("{}-{}", switch.at, u64::MAX));
            loop {
                let page = journal::after(conn, &shard, &journal_name, cursor.as_deref(), TAIL_PAGE).await?;
                let Some(last) = page.last() else { break };
                cursor = Some(last.id.clone());
                lines.extend(page.into_iter().map(|line| (line, shard.clone())));
            }
        }
        lines.sort_by_key(|(line, _)| stream_order(&line.id));
        let decider = Replayer::deciding(Arc::new(config.clone()), self.keys.clone(), self.store.clone());
        // Past the deadline, one write decided at least: the journal's own lines read before
        // it are no progress on these (read again by the next invocation).
        for (decided, (line, shard)) in lines.iter().enumerate() {
            if decided > 0 && Utc::now() >= deadline {
                progress.report.status = Status::InProgress;
                return Ok(());
            }
            progress.report.replayed += 1;
            let decided = match decider.replay(board, line).await {
                Ok(decided) => decided,
                Err(ReplayError::Malformed { problem, .. }) => Replayed::Refused(problem),
                Err(ReplayError::Store(error)) => return Err(error.into()),
            };
            tracing::info!(board, id = %line.id, decided = ?decided, "a write the older store took before its fence, decided again");
            progress.report.count(&line.id, decided);
            journal::remove(progress.conn, shard, &line.id).await?;
        }
        let conn = &mut *progress.conn;
        for shard in old.all() {
            let _: () = redis::cmd("UNLINK").arg(shard.journal()).query_async(conn).await.map_err(StoreError::from)?;
        }
        let _: () = redis::cmd("DEL").arg(self.keys.board_older_writes(board)).query_async(conn).await.map_err(StoreError::from)?;
        Ok(())
    }
}
