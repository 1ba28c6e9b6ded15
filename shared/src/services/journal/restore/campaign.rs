//! One invocation's share of a restore's campaign (`redis::restore::Campaign`): the journals an
//! earlier invocation completed passed over, and each board's older writes once its journals
//! are all complete.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::{BoardRestore, RestoreError, RestoreReport, Restorer, Status};
use crate::archive::objects::Objects;
use crate::domain::config::Config;
use crate::redis::keys::{CATALOG_JOURNAL, is_profile_journal, journal_board};
use crate::redis::restore::Campaign;
use crate::services::catalog::boards_now;
use crate::services::journal::marks::Marks;
use crate::services::journal::older_kept;

impl<O: Objects> Restorer<O> {
    /// `restore`, going on with the restore whose invocation answered `campaign`: every call
    /// makes progress, so calling again with the campaign each answers until `complete`
    /// finishes; a journal completed earlier in the campaign is not read again while its board
    /// takes writes (`Campaign`).
    pub async fn resume(
        &self,
        board: Option<&str>,
        campaign: Option<&str>,
        deadline: DateTime<Utc>,
    ) -> Result<RestoreReport, RestoreError> {
        // A board asked for is known before it names the campaign's record (the boards read
        // once: `restore_some` restores by them).
        let mut boards = None;
        if let Some(name) = board.filter(|name| !is_profile_journal(name) && *name != CATALOG_JOURNAL) {
            let now = boards_now(&self.config, &self.keys, &self.store).await?;
            now.board(journal_board(name)).ok_or_else(|| RestoreError::UnknownBoard(name.to_owned()))?;
            boards = Some(Arc::new(now));
        }
        let passed_on = campaign.is_some();
        let mut campaign = Campaign::load(&mut self.store.write_connection().await?, &self.keys, board.unwrap_or("*"), campaign)
            .await?
            .ok_or_else(|| RestoreError::Invalid("campaign: not a token a restore answers (16 hex digits)".into()))?;
        let reports = match self.restore_some(board, boards, &mut campaign, deadline).await {
            Ok(reports) => reports,
            // A campaign no answer named cannot go on: its records go (best effort), where one
            // passed on stays for the caller to go on with.
            Err(error) => {
                if !passed_on && let Ok(mut conn) = self.store.write_connection().await {
                    let _ = campaign.end(&mut conn).await;
                }
                return Err(error);
            }
        };
        let status = if reports.iter().all(|r| r.status == Status::Complete) { Status::Complete } else { Status::InProgress };
        let token = match status {
            Status::Complete => {
                campaign.end(&mut self.store.write_connection().await?).await?;
                None
            }
            Status::InProgress => Some(campaign.token().to_owned()),
        };
        Ok(RestoreReport { status, boards: reports, campaign: token })
    }

    /// `restore_board`, unless the campaign completed journal `name` before (`worked`: set when
    /// it is restored now), recorded in it once complete.
    pub(super) async fn restore_in(
        &self,
        campaign: &mut Campaign,
        worked: &mut bool,
        name: &str,
        config: &Config,
        deadline: DateTime<Utc>,
        marks: &Marks,
    ) -> Result<BoardRestore, RestoreError> {
        let mut conn = self.store.write_connection().await?;
        if campaign.done(&mut conn, name, !is_profile_journal(name)).await? {
            return Ok(BoardRestore::done_before(name));
        }
        *worked = true;
        let report = self.restore_board(name, config, deadline, marks).await?;
        if report.status == Status::Complete {
            campaign.completed(&mut conn, name).await?;
        }
        Ok(report)
    }

    /// Each board whose journals are all complete: the writes an older store took before its
    /// fence decided again (`older_writes`), counted in its last journal's report.
    pub(super) async fn older_writes_of(
        &self,
        reports: &mut [BoardRestore],
        config: &Config,
        deadline: DateTime<Utc>,
    ) -> Result<(), RestoreError> {
        let boards = reports.iter().map(|r| r.board.as_str()).filter(|name| !is_profile_journal(name) && *name != CATALOG_JOURNAL);
        let mut boards: Vec<String> = boards.map(|name| journal_board(name).to_owned()).collect();
        boards.dedup();
        // Writes kept in S3 (`older_kept`), listed once, when a board is whole to decide them.
        let mut kept = None;
        for board in boards {
            let mine = |r: &&mut BoardRestore| !is_profile_journal(&r.board) && journal_board(&r.board) == board;
            if reports.iter_mut().filter(mine).any(|r| r.status != Status::Complete) {
                continue;
            }
            if let Some(last) = reports.iter_mut().filter(mine).last() {
                if kept.is_none() {
                    kept = Some(older_kept::listing(&self.objects, &self.keys).await?);
                }
                // Boxed: a cold path whose future would otherwise be laid out inside every
                // restore's (the journal function's future outgrew the compiler's depth limit).
                Box::pin(self.older_writes(&board, config, last, deadline, kept.as_deref().unwrap_or_default())).await?;
            }
        }
        Ok(())
    }
}
