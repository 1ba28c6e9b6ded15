//! Admin safety valves: bans, audited score corrections, and
//! the audit log. Each board's share is one atomic script; which periods it touches is
//! computed here, from the injected time.

use std::collections::BTreeSet;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use futures::future::join_all;
use redis::AsyncCommands;
use serde::Serialize;

use crate::domain::config::{Board, BoardKind, Config};
use crate::domain::correction::ChangeError;
use crate::domain::ids::{self, IdError};
use crate::domain::journal::{Entry, Stamp};
use crate::domain::period::{EventWindow, Period};
use crate::domain::reach::{ban_periods, ended_instances};
use crate::domain::tiebreak::RangeError;
use crate::redis::catalog;
use crate::redis::error::StoreError;
use crate::redis::keys::{BoardKeys, Keys};
use crate::redis::scripts::GuardRefusal;
use crate::redis::scripts::catalog::{BanRecord, banned_users, record_bans};
use crate::redis::scripts::moderation::{self as script, AuditRecord, Ban};
use crate::redis::store::{Connection, Store};

pub use super::audit::{AuditEntry, AuditKind};

/// Entries each board's audit log keeps (older ones are trimmed).
pub const AUDIT_LOG_LEN: usize = 10_000;
/// `GET /v1/admin/audit?limit=`: default and largest page.
pub const DEFAULT_AUDIT_PAGE: usize = 50;
pub const MAX_AUDIT_PAGE: usize = 1_000;
/// Longest correction reason, in characters.
pub const MAX_REASON_CHARS: usize = 200;

/// An admin's reason (a correction's, a void's): 1 to `MAX_REASON_CHARS` characters, not blank,
/// no control characters.
pub fn check_reason(reason: &str) -> Result<(), ModerationError> {
    let chars = reason.chars().count();
    if reason.trim().is_empty() || chars > MAX_REASON_CHARS || reason.chars().any(char::is_control) {
        return Err(ModerationError::BadReason);
    }
    Ok(())
}

/// The actor of a ban carried onto a board defined after it (`Moderation::carry_bans`).
pub const CARRIED_BY: &str = "standings:ban-carried";

#[derive(Debug, thiserror::Error)]
pub enum ModerationError {
    #[error("no points or score board named {0:?}")]
    UnknownBoard(String),
    #[error(transparent)]
    InvalidId(#[from] IdError),
    #[error(transparent)]
    Change(#[from] ChangeError),
    #[error("reason must be 1..={MAX_REASON_CHARS} characters without control characters")]
    BadReason,
    #[error("limit must be 1..={MAX_AUDIT_PAGE}")]
    BadLimit,
    #[error(transparent)]
    Time(#[from] RangeError),
    #[error("the correction would take the score on board {0:?} out of its range")]
    ScoreOutOfRange(String),
    #[error("correction {0:?} was already made with a different payload")]
    Conflict(String),
    #[error("{0}")]
    BadPeriod(String),
    #[error("board {0:?} keeps scores, not points: voids take back points events earned; correct scores with a correction")]
    NotPoints(String),
    #[error("from is older than the {0} days the journal keeps")]
    RangeTooOld(i64),
    #[error("a void takes at most {0} days at once; void a longer range in pieces")]
    RangeTooLong(i64),
    #[error("the journal is off (STANDINGS_JOURNAL_BUCKET is not set): nothing to void from")]
    JournalOff,
    #[error("the journal bucket: {0}")]
    JournalUnavailable(String),
    #[error("the journal: {0}")]
    JournalUnreadable(String),
    /// A take-back or another void landed while a void was decided.
    #[error("the user's points changed while the void was decided")]
    Stale,
    #[error("the user's points kept changing while the void was decided; retry it")]
    Busy,
    #[error(transparent)]
    Guard(#[from] GuardRefusal),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A period a user was removed from by a ban.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RemovedFrom {
    pub board: String,
    pub period: &'static str,
    pub period_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BanReceipt {
    pub user_id: String,
    pub banned: bool,
    /// Every board the ban (or unban) now applies to.
    pub boards: Vec<String>,
    /// The live periods the user was on, and is no longer.
    pub removed: Vec<RemovedFrom>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditPage {
    pub board: String,
    /// Newest first.
    pub entries: Vec<AuditEntry>,
}

#[derive(Clone)]
pub struct Moderation {
    config: Arc<Config>,
    pub(super) keys: Keys,
    pub(super) store: Store,
    pub(super) window: EventWindow,
}

impl Moderation {
    pub fn new(config: Arc<Config>, keys: Keys, store: Store) -> Self {
        Self { config, keys, store, window: EventWindow::default() }
    }

    /// Boards whose members are users (decaying boards rank items).
    fn user_boards(&self) -> impl Iterator<Item = &Board> {
        self.config.boards().iter().map(|b| &**b).filter(|b| b.kind != BoardKind::Decaying)
    }

    /// A board of users (points or scores): what bans, corrections and the audit act on.
    pub(super) fn user_board(&self, name: &str) -> Result<&Board, ModerationError> {
        self.user_boards().find(|b| b.name == name).ok_or_else(|| ModerationError::UnknownBoard(name.to_owned()))
    }

    /// Bans `user_id` from every user board: one atomic script per board (all boards
    /// concurrently) guards the user out and removes them from the board's live periods.
    /// Banning twice is harmless; if a board fails (503), retrying completes the ban.
    pub async fn ban(&self, user_id: &str, actor: Option<&str>, now: DateTime<Utc>) -> Result<BanReceipt, ModerationError> {
        self.set_ban(user_id, true, actor, now, None).await
    }

    /// Lifts the ban on every user board. Scores removed by the ban are not restored.
    pub async fn unban(&self, user_id: &str, actor: Option<&str>, now: DateTime<Utc>) -> Result<BanReceipt, ModerationError> {
        self.set_ban(user_id, false, actor, now, None).await
    }

    /// Records a ban (or an unban) of `user_id` in the deployment's banned users, before it
    /// reaches (leaves) the boards: a board defined from then on carries it (`carry_bans`). The
    /// caller then applies it to every board as of a catalog read after this call.
    pub async fn record(&self, user_id: &str, banned: bool, now: DateTime<Utc>) -> Result<(), ModerationError> {
        ids::validate_id("user_id", user_id)?;
        // Seeded first: a seed after this change would read the boards before it reached them.
        self.banned_users(now).await?;
        let change = if banned { BanRecord::Ban } else { BanRecord::Unban };
        self.record_bans(change, &[user_id.to_owned()], now).await?;
        Ok(())
    }

    async fn record_bans(&self, change: BanRecord, users: &[String], now: DateTime<Utc>) -> Result<Vec<String>, ModerationError> {
        let name = match change {
            BanRecord::Ban => "ban",
            BanRecord::Unban => "unban",
            BanRecord::Seed => "seed",
        };
        let entry = if self.keys.journal_on() && !self.keys.replays() {
            Entry::Bans { at: Stamp(now), change: name, users }.json()
        } else {
            String::new()
        };
        let mut conn = self.store.write_connection().await?;
        let wait = self.store.replica_wait();
        Ok(record_bans(&mut conn, &self.keys, change, users, now.timestamp_millis(), &entry, wait).await?)
    }

    /// The deployment's banned users; the first read records the bans made before the record
    /// existed (found on every board's guard, once).
    async fn banned_users(&self, now: DateTime<Utc>) -> Result<BTreeSet<String>, ModerationError> {
        // The primary's: a replica behind it could miss a ban recorded a moment ago.
        let mut conn = self.store.write_connection().await?;
        let (users, seeded) = banned_users(&mut conn, &self.keys).await?;
        if seeded {
            return Ok(users.into_iter().collect());
        }
        // Whether a guard was read, and one of them intact (none read: no board of users).
        let (mut found, mut read, mut intact) = (BTreeSet::new(), false, false);
        // A board being deleted keeps its guard's bans for good (an unban skips it).
        for board in self.user_boards().filter(|b| !b.ending) {
            // A sharded board keeps each user's ban in the user's shard.
            for keys in self.store.held_layout(&self.keys, board).await?.all() {
                let fields: Vec<String> = conn.hkeys(keys.guard()).await.map_err(StoreError::from)?;
                read = true;
                // A lost board's guard (or one under restore) holds part of its bans at most;
                // every ban is on every board, so the others say it.
                if self.keys.journal_on()
                    && (!fields.iter().any(|f| f == crate::domain::guard::BORN) || fields.iter().any(|f| f == crate::domain::guard::FENCE))
                {
                    // A move's switch may have freed the layout this container probed: the
                    // retry reads the layout again (as a script's refusal does, redis/refusals.rs).
                    self.store.forget_layout(&self.keys, &board.name);
                    continue;
                }
                intact = true;
                found.extend(fields.into_iter().filter_map(|f| f.strip_prefix(crate::domain::guard::BAN).map(str::to_owned)));
            }
        }
        if read && !intact {
            return Err(StoreError::Restoring.into());
        }
        let found: Vec<String> = found.into_iter().collect();
        self.record_bans(BanRecord::Seed, &found, now).await?;
        let (users, _) = banned_users(&mut conn, &self.keys).await?;
        Ok(users.into_iter().collect())
    }

    /// The deployment's bans carried onto `board`, defined after them (a runtime board, a
    /// tournament): every user in the deployment's record and not banned here is banned here,
    /// as a ban of this board alone (journaled and audited as the ban it is, by `CARRIED_BY`).
    /// Nothing is carried twice, so the definition sent again finishes a carry stopped part-way;
    /// a user whose unban was recorded while the carry ran is unbanned here again. The users
    /// carried.
    pub async fn carry_bans(&self, board: &str, now: DateTime<Utc>) -> Result<Vec<String>, ModerationError> {
        let target = self.user_board(board)?;
        let banned = self.banned_users(now).await?;
        let mut conn = self.store.write_connection().await?;
        let mut held = BTreeSet::new();
        for keys in self.store.held_layout(&self.keys, target).await?.all() {
            let fields: Vec<String> = conn.hkeys(keys.guard()).await.map_err(StoreError::from)?;
            held.extend(fields.into_iter().filter_map(|f| f.strip_prefix(crate::domain::guard::BAN).map(str::to_owned)));
        }
        let carried: Vec<String> = banned.difference(&held).cloned().collect();
        for user in &carried {
            self.set_ban(user, true, Some(CARRIED_BY), now, Some(board)).await?;
        }
        let (still, seeded) = banned_users(&mut conn, &self.keys).await?;
        if !seeded {
            // The record went meanwhile (a loss): what it says now is not who is banned.
            return Err(StoreError::Restoring.into());
        }
        for user in carried.iter().filter(|user| !still.contains(user)) {
            self.set_ban(user, false, Some(CARRIED_BY), now, Some(board)).await?;
        }
        Ok(carried)
    }

    /// A ban (or unban) of `user_id` on one board only: a restore's replay of the board's journal,
    /// where a ban is journaled once per board.
    pub async fn set_ban_on(
        &self,
        board: &str,
        user_id: &str,
        banned: bool,
        actor: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<BanReceipt, ModerationError> {
        self.user_board(board)?;
        self.set_ban(user_id, banned, actor, now, Some(board)).await
    }

    async fn set_ban(
        &self,
        user_id: &str,
        banned: bool,
        actor: Option<&str>,
        now: DateTime<Utc>,
        only: Option<&str>,
    ) -> Result<BanReceipt, ModerationError> {
        ids::validate_id("user_id", user_id)?;
        let kind = if banned { AuditKind::Ban } else { AuditKind::Unban };
        let conn = self.store.write_connection().await?;
        let boards: Vec<(&Board, Vec<Period>)> = self
            .user_boards()
            // A runtime board being deleted takes no ban (docs/runtime-boards.md#deleting).
            .filter(|b| !b.ending)
            .filter(|board| only.is_none_or(|name| board.name == name))
            .map(|board| (board, if banned { ban_periods(board, now, &self.window) } else { Vec::new() }))
            .collect();
        let replies = join_all(boards.iter().map(|(board, live)| {
            let (mut conn, keys, store) = (conn.clone(), self.keys.clone(), self.store.clone());
            let entry = AuditEntry::new(&board.name, kind, user_id, actor, now).json();
            async move {
                // Where the user's data is: the recorded layout (a changed `shards` does not hold a ban
                // back; a reshard's fence does, 503, until the move is done).
                let keys = store.written_layout(&keys, board).await?.of_user(user_id);
                // A tournament's ended instances the archive has not frozen yet where the user
                // holds a score or a seat (read first: one frozen meanwhile is left alone by the
                // script all the same).
                let seats = board.tournament.is_some();
                let ended = match banned && seats {
                    true => script::holding(&mut conn, &keys, user_id, &ended_instances(board, now, &self.window, live)).await?,
                    false => Vec::new(),
                };
                let reach: Vec<Period> = live.iter().cloned().chain(ended).collect();
                let action = match banned {
                    true => {
                        let (league, notify) = (board.league.as_ref(), board.notify.as_ref());
                        Ban::Ban { live: &reach, statements: board.statements, league, notify, now, seats }
                    }
                    false => Ban::Unban,
                };
                let removed = script::ban(&mut conn, &keys, user_id, action, AuditRecord { entry: &entry, keep: AUDIT_LOG_LEN }).await?;
                Ok::<_, StoreError>(removed.into_iter().cloned().collect::<Vec<Period>>())
            }
        }))
        .await;
        let mut removed = Vec::new();
        for ((board, _), reply) in boards.iter().zip(replies) {
            removed.extend(reply?.into_iter().map(|period| RemovedFrom {
                board: board.name.clone(),
                period: period.kind.as_str(),
                period_id: period.id,
            }));
        }
        let boards = boards.iter().map(|(board, _)| board.name.clone()).collect();
        Ok(BanReceipt { user_id: user_id.to_owned(), banned, boards, removed })
    }

    /// The newest `limit` entries of a board's audit log (default 50, at most 1,000).
    pub async fn audit(&self, board_name: &str, limit: Option<usize>) -> Result<AuditPage, ModerationError> {
        let board = self.user_board(board_name)?;
        let limit = limit.unwrap_or(DEFAULT_AUDIT_PAGE);
        if !(1..=MAX_AUDIT_PAGE).contains(&limit) {
            return Err(ModerationError::BadLimit);
        }
        let conn = self.store.connection().await?;
        let journaled = self.keys.journal_on();
        // A sharded board keeps a log per shard (each user's actions in their shard): merged.
        // Each read with its guard's fence, as every read of a journaled board: a log a loss
        // left empty or a restore has not finished is no answer (docs/journal.md#fence).
        // On the layout read again when a move's switch freed the one this container probed.
        let logs = self
            .store
            .on_read_layout(&self.keys, board, |layout| {
                let conn = conn.clone();
                async move {
                    futures::future::try_join_all(layout.all().into_iter().map(|keys| audit_log(conn.clone(), keys, journaled, limit)))
                        .await
                }
            })
            .await?;
        let mut entries: Vec<AuditEntry> = logs
            .iter()
            .flatten()
            .map(|entry| serde_json::from_str(entry).map_err(|e| StoreError::Protocol(format!("audit entry: {e}"))))
            .collect::<Result<_, _>>()?;
        if logs.len() > 1 {
            entries.sort_by_key(|entry| std::cmp::Reverse(entry.at));
            entries.truncate(limit);
        }
        Ok(AuditPage { board: board.name.clone(), entries })
    }
}

/// One shard's newest `limit` audit entries; on a journaled deployment in one `MULTI` with its
/// guard's fence (`catalog::restoring_for_reads`).
async fn audit_log(mut conn: Connection, keys: BoardKeys, journaled: bool, limit: usize) -> Result<Vec<String>, StoreError> {
    let mut pipe = redis::pipe();
    pipe.atomic();
    if journaled {
        pipe.add_command(catalog::guard_state(&keys.guard()));
    }
    pipe.lrange(keys.audit(), 0, limit as isize - 1);
    let mut replies: Vec<redis::Value> = pipe.query_async(&mut conn).await?;
    if replies.len() != 1 + usize::from(journaled) {
        return Err(StoreError::Protocol(format!("audit log: {} replies", replies.len())));
    }
    if journaled {
        catalog::restoring_for_reads(replies.remove(0))?;
    }
    let log = replies.remove(0);
    redis::from_redis_value::<Vec<String>>(log).map_err(|e| StoreError::Protocol(format!("audit log: {e}")))
}
