//! Boards created at runtime (docs/runtime-boards.md): `PUT`, `GET` and `DELETE
//! /v1/admin/boards/{board}`, and the end of a deleted board (its writes refused at once, its
//! last season archived where it archives, its keys freed, its definition forgotten), each step
//! safe to run again.

use std::sync::Arc;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;
use serde_json::{Value, json};

use crate::domain::config::{Board, Config, ConfigError, Definition, KEPT_DEFINITION, MAX_RUNTIME_BOARDS, tombstone};
use crate::domain::guard::PLAYERS;
use crate::domain::journal::{Entry, Stamp};
use crate::redis::catalog::{self, mark_ended, unmark_ended};
use crate::redis::error::StoreError;
use crate::redis::keys::{BoardKeys, Keys};
use crate::redis::restore;
use crate::redis::scripts::catalog::{Change, Defined, define, live};
use crate::redis::store::{Connection, Store};
use crate::services::catalog::{deleted_as_recorded, ended_at};

/// `STANDINGS_MAX_RUNTIME_BOARDS`: how many runtime boards the deployment holds (default
/// `MAX_RUNTIME_BOARDS`).
pub fn limit_from_env() -> u32 {
    std::env::var("STANDINGS_MAX_RUNTIME_BOARDS").ok().and_then(|s| s.parse().ok()).unwrap_or(MAX_RUNTIME_BOARDS)
}

#[derive(Debug, thiserror::Error)]
pub enum DefineError {
    #[error(transparent)]
    Invalid(#[from] ConfigError),
    #[error("board {0:?} exists with another definition (or has ended): runtime boards are not redefined")]
    Exists(String),
    #[error("board {0:?} is declared in the configuration file")]
    Declared(String),
    #[error("the deployment holds its most runtime boards ({0}): delete one first")]
    Full(u32),
    #[error("no runtime board {0:?}")]
    Unknown(String),
    #[error(
        "{0:?} is a tournament's board: a tournament is deleted through DELETE /v1/admin/tournaments/{{id}}, its open instance ended through POST /v1/admin/tournaments/{{id}}/end"
    )]
    Tournament(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A runtime board as the admin routes answer it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BoardDefinition {
    pub board: String,
    /// `active`, or `ending` once deleted (its writes refused until its end is done).
    pub state: &'static str,
    pub definition: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended: Option<Value>,
}

/// A board deleted and not finished yet: its definition and why and when it ended.
#[derive(Debug, Clone)]
pub struct Ending {
    pub board: Board,
    pub at: DateTime<Utc>,
}

pub struct RuntimeBoards {
    declared: Arc<Config>,
    keys: Keys,
    store: Store,
    limit: u32,
    /// Whether `index_retired` was done by this process (it stays done: journaled, restored).
    indexed: Arc<std::sync::atomic::AtomicBool>,
}

impl RuntimeBoards {
    pub fn new(declared: Arc<Config>, keys: Keys, store: Store, limit: u32) -> Self {
        Self { declared, keys, store, limit, indexed: Arc::default() }
    }

    /// Creates `name` from `body`: true when created, false when this very definition was there.
    pub async fn put(&self, name: &str, body: &Value, now: DateTime<Utc>) -> Result<(bool, BoardDefinition), DefineError> {
        self.create(name, Definition::parse(name, body)?, now).await
    }

    /// Creates `name` from a checked `definition` (a board's, or a tournament's).
    pub async fn create(&self, name: &str, definition: Definition, now: DateTime<Utc>) -> Result<(bool, BoardDefinition), DefineError> {
        if self.declared.board(name).is_some() {
            return Err(DefineError::Declared(name.to_owned()));
        }
        let stored: Value = serde_json::from_str(&definition.text).expect("a definition is JSON");
        let entry = self.entry(name, "put", &stored, now);
        let mut conn = self.store.write_connection().await?;
        // A name that already holds a board's state (a board once declared, since removed from
        // the file) is not a new board: its data and journal are not this definition's.
        let keys = self.keys.board(name);
        let held: u32 = redis::cmd("EXISTS")
            .arg(keys.guard())
            .arg(self.keys.board_layout(name))
            .query_async(&mut conn)
            .await
            .map_err(StoreError::from)?;
        let defined: bool = redis::cmd("HEXISTS")
            .arg(self.keys.catalog().definitions())
            .arg(name)
            .query_async(&mut conn)
            .await
            .map_err(StoreError::from)?;
        if held > 0 && !defined {
            return Err(DefineError::Exists(name.to_owned()));
        }
        let change = Change::Put { definition: &definition.text, limit: self.limit };
        let created = match define(&mut conn, &self.keys, name, change, &entry, self.store.replica_wait()).await? {
            Defined::Created => true,
            Defined::Same => false,
            Defined::Full => return Err(DefineError::Full(self.limit)),
            _ => return Err(DefineError::Exists(name.to_owned())),
        };
        if created && self.keys.journal_on() {
            // Nothing of a new name is in the journal (an ended name is never defined again):
            // its first writes need not wait for the drain to say so.
            for shard in self.shards(&definition.board) {
                restore::mark_born(&mut conn, &shard).await?;
            }
        }
        Ok((created, BoardDefinition { board: name.to_owned(), state: "active", definition: stored, ended: None }))
    }

    pub async fn get(&self, name: &str) -> Result<BoardDefinition, DefineError> {
        let mut conn = self.store.connection().await?;
        let record = catalog::record(&mut conn, &self.keys, name).await?;
        let Some(text) = &record.definition else {
            // A lost catalog holds no definition: the name is not unknown, it is being restored.
            if self.keys.journal_on() && !record.born {
                return Err(StoreError::Restoring.into());
            }
            return Err(DefineError::Unknown(name.to_owned()));
        };
        let ended = record.ending.as_deref().and_then(|why| serde_json::from_str(why).ok());
        let state = if ended.is_some() { "ending" } else { "active" };
        let definition = serde_json::from_str(text).map_err(|e| StoreError::Protocol(format!("a stored definition: {e}")))?;
        Ok(BoardDefinition { board: name.to_owned(), state, definition, ended })
    }

    /// Deletes `name`: its writes are refused from this call on; the rest of its end is
    /// `finish`'s. Again on an ending board: the same answer.
    pub async fn end(&self, name: &str, reason: Option<&str>, now: DateTime<Utc>) -> Result<BoardDefinition, DefineError> {
        if let Ok(defined) = self.get(name).await
            && Definition::stored(&defined.definition.to_string()).is_ok_and(|board| board.tournament.is_some())
        {
            return Err(DefineError::Tournament(name.to_owned()));
        }
        self.end_any(name, reason, now).await
    }

    /// `end` of any runtime board, a tournament's included (`DELETE /v1/admin/tournaments/{id}`).
    pub async fn end_any(&self, name: &str, reason: Option<&str>, now: DateTime<Utc>) -> Result<BoardDefinition, DefineError> {
        let board = Definition::stored(&self.get(name).await?.definition.to_string())?;
        let why = json!({"reason": reason, "at": now.to_rfc3339_opts(SecondsFormat::Millis, true)});
        let entry = self.entry(name, "end", &why, now);
        let mut conn = self.store.write_connection().await?;
        // Refused in Redis first, whatever a function's catalog still says; then recorded (a
        // call stopped in between is finished by the next, the same way). An end the catalog
        // surely refused (being restored, or the board gone) takes its new marks back: its
        // answer wrote nothing. Any other failure may have recorded the end: the marks stay.
        if self.keys.journal_on() {
            catalog::restoring(catalog::guard_state(&self.keys.catalog().guard()).query_async(&mut conn).await.map_err(StoreError::from)?)?;
        }
        let marked = mark_ended(&mut conn, &self.guards(&board), self.keys.journal_on()).await?;
        let defined = define(&mut conn, &self.keys, name, Change::End { why: &why.to_string() }, &entry, self.store.replica_wait()).await;
        let refused = matches!(&defined, Ok(Defined::Unknown)) || defined.as_ref().is_err_and(StoreError::is_restoring);
        if refused && let Err(error) = unmark_ended(&mut conn, &marked).await {
            tracing::error!(board = %name, error = %error, "an end the catalog refused kept its marks: the next delete finishes it");
        }
        if defined? == Defined::Unknown {
            return Err(DefineError::Unknown(name.to_owned()));
        }
        self.get(name).await
    }

    /// Every board deleted whose end is not done yet.
    pub async fn ending(&self) -> Result<Vec<Ending>, DefineError> {
        let mut conn = self.store.connection().await?;
        let live = live(&mut conn, &self.keys).await?;
        let mut ending = Vec::new();
        for (name, text, why) in &live.boards {
            let Some(why) = why else { continue };
            let at = ended_at(why).ok_or_else(|| StoreError::Protocol(format!("board {name:?} ended without a time")))?;
            match Definition::stored(text) {
                // A tournament ends at its deletion (`Tournament::deleted`).
                Ok(board) => ending.push(Ending { board: deleted_as_recorded(board, Some(why)), at }),
                Err(error) => tracing::error!(board = %name, error = %error, "a deleted board's definition no longer validates: not ended"),
            }
        }
        Ok(ending)
    }

    /// The last steps of a deleted board's end, once its archive (if any) is done: writes
    /// refused again (a guard lost since), every key but the guards freed (they keep refusing
    /// a function whose catalog is a few seconds old), the definition forgotten.
    /// False (nothing freed) while a journal stream of the board holds lines the drain has
    /// not stored yet: the board's history is kept whole.
    pub async fn finish(&self, board: &Board, now: DateTime<Utc>) -> Result<bool, DefineError> {
        let mut conn = self.store.write_connection().await?;
        let shards = self.shards(board);
        mark_ended(&mut conn, &self.guards(board), false).await?;
        if self.keys.journal_on() {
            for shard in &shards {
                let undrained: u64 = redis::cmd("XLEN").arg(shard.journal()).query_async(&mut conn).await.map_err(StoreError::from)?;
                if undrained > 0 {
                    return Ok(false);
                }
            }
        }
        let players = self.players_shown(&mut conn, board, now).await?;
        let mut all = shards.clone();
        all.push(self.keys.board(&board.name));
        let guards: Vec<String> = all.iter().map(BoardKeys::guard).collect();
        for guard in &guards {
            forget_records(&mut conn, guard).await?;
        }
        for keys in &all {
            free(&mut conn, keys, &guards).await?;
        }
        // Why and when it ended, with what its history reads of the definition: its archived
        // seasons and results stay readable.
        let record = catalog::record(&mut conn, &self.keys, &board.name).await?;
        let mut retired: Value = record.ending.as_deref().and_then(|why| serde_json::from_str(why).ok()).unwrap_or(Value::Null);
        if let (Some(why), Some(text)) = (retired.as_object_mut(), record.definition.as_deref()) {
            why.insert(KEPT_DEFINITION.into(), tombstone(serde_json::from_str(text).unwrap_or(Value::Null)));
            if let Some(players) = players {
                why.insert(PLAYERS.into(), players.into());
            }
        }
        let retired = if retired.is_object() { retired.to_string() } else { String::new() };
        let entry = self.entry(&board.name, "remove", &Value::Null, now);
        let change = Change::Remove { retired: &retired, tournament: board.tournament.is_some() };
        define(&mut conn, &self.keys, &board.name, change, &entry, self.store.replica_wait()).await?;
        // Kept by the tombstone now (a run stopped before this leaves the field: read by nothing).
        if players.is_some() {
            let guard = self.keys.board(&board.name).guard();
            let _: () = redis::cmd("HDEL").arg(guard).arg(PLAYERS).query_async(&mut conn).await.map_err(StoreError::from)?;
        }
        Ok(true)
    }

    /// The players of the instance a deleted tournament shows (its last), read before its keys
    /// are freed: its tombstone keeps them for the list of ended tournaments. As
    /// `Tournaments::size` counts them: the size kept at its release, else its set's. Kept in
    /// the board's guard, which outlives the keys, until the tombstone holds them: a run that
    /// stopped after freeing the keys finds them there.
    async fn players_shown(&self, conn: &mut Connection, board: &Board, now: DateTime<Utc>) -> Result<Option<u64>, StoreError> {
        let Some(tournament) = board.tournament.as_deref() else { return Ok(None) };
        let Some(period) = tournament.shown_at(now).and_then(|instance| tournament.period_named(&instance.id).ok()) else {
            return Ok(None);
        };
        let keys = self.keys.board(&board.name);
        let (noted, players, kept): (Option<u64>, u64, Option<u64>) =
            redis::pipe().hget(keys.guard(), PLAYERS).scard(keys.players(&period)).get(keys.final_size(&period)).query_async(conn).await?;
        if let Some(noted) = noted {
            return Ok(Some(noted));
        }
        let players = kept.unwrap_or(players);
        let _: () = redis::cmd("HSET").arg(keys.guard()).arg(PLAYERS).arg(players).query_async(conn).await?;
        Ok(Some(players))
    }

    /// Lists the tournaments whose deletion was done by a release before the list of retired
    /// ones (their tombstones), once; journaled. The archive's every-minute step asks until it
    /// has been done in this process (one call, which writes nothing once done), then no more.
    pub async fn index_retired(&self, now: DateTime<Utc>) -> Result<(), DefineError> {
        use std::sync::atomic::Ordering;
        if self.indexed.load(Ordering::Relaxed) {
            return Ok(());
        }
        let mut conn = self.store.write_connection().await?;
        let entry = self.entry(crate::redis::keys::CATALOG_JOURNAL, "index", &Value::Null, now);
        define(&mut conn, &self.keys, "", Change::Index, &entry, self.store.replica_wait()).await?;
        self.indexed.store(true, Ordering::Relaxed);
        Ok(())
    }

    fn shards(&self, board: &Board) -> Vec<BoardKeys> {
        self.keys.layout(&board.name, board.shards).all()
    }

    fn guards(&self, board: &Board) -> Vec<String> {
        self.shards(board).iter().map(BoardKeys::guard).collect()
    }

    fn entry(&self, board: &str, change: &str, definition: &Value, now: DateTime<Utc>) -> String {
        if !self.keys.journal_on() {
            return String::new();
        }
        Entry::Definition { at: Stamp(now), board, change, definition: definition.clone() }.json()
    }
}

/// Removes the guard's records of the period sets it holds (`kept|…`): freed with the rest, the
/// sets are gone on purpose, and a read that met a record without its set would take the board
/// for lost (503 `board_restoring`) for good. Before the sets go, so no read sees one without
/// the other.
async fn forget_records(conn: &mut Connection, guard: &str) -> Result<(), StoreError> {
    use crate::domain::guard::{CLOSED, KEPT, PRUNED, RELEASED};
    let fields: Vec<String> = redis::cmd("HKEYS").arg(guard).query_async(conn).await?;
    let kept: Vec<&String> =
        fields.iter().filter(|field| [KEPT, CLOSED, RELEASED].iter().any(|p| field.starts_with(p)) || *field == PRUNED).collect();
    if !kept.is_empty() {
        let _: () = redis::cmd("HDEL").arg(guard).arg(kept).query_async(conn).await?;
    }
    Ok(())
}

/// Unlinks every key of `keys`' slot and pattern but `kept`.
async fn free(conn: &mut Connection, keys: &BoardKeys, kept: &[String]) -> Result<(), StoreError> {
    let found: Vec<String> =
        conn.scan_slot_of(&keys.guard(), &keys.pattern_all()).await?.into_iter().filter(|key| !kept.contains(key)).collect();
    for chunk in found.chunks(500) {
        let _: () = redis::cmd("UNLINK").arg(chunk).query_async(conn).await?;
    }
    Ok(())
}

/// Where a deleted board's end stands after a run (`finish_ended`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EndReport {
    pub board: String,
    /// `done` (keys freed, definition forgotten), `archiving` (its season's archive goes on
    /// next run), `draining` (its journal still holds lines the drain has not stored), `failed`.
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub season: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[cfg(feature = "dynamodb")]
impl RuntimeBoards {
    /// Ends every deleted board, each as far as it goes before `deadline`: its season archived
    /// first where it archives (`archiver` must know the board: built on the boards as of now),
    /// then `finish`. One board's failure is reported, never holds the others up.
    pub async fn finish_ended<S: crate::archive::table::ArchiveSink>(
        &self,
        archiver: &crate::archive::job::Archiver<S>,
        now: DateTime<Utc>,
        deadline: DateTime<Utc>,
    ) -> Result<Vec<EndReport>, DefineError> {
        use crate::archive::job::Status;
        use crate::archive::schedule::unarchived_candidates;
        use crate::domain::period::{Period, PeriodKind};
        if let Err(error) = self.index_retired(now).await {
            tracing::error!(error = %error, "the tournaments deleted by earlier releases could not be listed yet");
        }
        let mut reports = Vec::new();
        for Ending { board, at } in self.ending().await? {
            let mut report = EndReport { board: board.name.clone(), status: "done", season: None, error: None };
            // Every season not archived yet (one that ended within the grace, one a run failed
            // on), oldest first, then the one the deletion fell in: its keys go next.
            // A tournament's instances are ended by the tournaments' step of the run, before this.
            let seasons: Vec<Period> = if board.tournament.is_none() && board.archive && board.periods.contains(&PeriodKind::Season) {
                let mut seasons = unarchived_candidates(&board, at, chrono::Duration::zero());
                seasons.push(Period::containing(PeriodKind::Season, at, board.timezone));
                seasons.dedup_by(|a, b| a.id == b.id);
                seasons
            } else {
                Vec::new()
            };
            let ended = async {
                // Again, before its seasons are frozen: a guard lost since the deletion refuses anew.
                let mut conn = self.store.write_connection().await?;
                mark_ended(&mut conn, &self.guards(&board), false).await?;
                Ok::<_, DefineError>(())
            };
            if let Err(error) = ended.await {
                (report.status, report.error) = ("failed", Some(error.to_string()));
            }
            for season in &seasons {
                if report.status != "done" {
                    break;
                }
                report.season = Some(season.id.clone());
                match archiver.archive_ended(&board.name, &season.id, deadline).await {
                    Ok(archived) if matches!(archived.status, Status::Complete | Status::AlreadyComplete) => {}
                    Ok(_) => report.status = "archiving",
                    Err(error) => {
                        tracing::error!(board = %board.name, season = %season.id, error = %error, "a deleted board's season could not be archived");
                        (report.status, report.error) = ("failed", Some(error.to_string()));
                    }
                }
            }
            if report.status == "done"
                && let Some(tournament) = board.tournament.as_deref()
            {
                match archiver.tournament_finished(tournament).await {
                    Ok(true) => {}
                    Ok(false) => report.status = "archiving",
                    Err(error) => (report.status, report.error) = ("failed", Some(error.to_string())),
                }
            }
            if report.status == "done" {
                match self.finish(&board, now).await {
                    Ok(true) => tracing::info!(board = %board.name, "deleted board ended: keys freed, definition forgotten"),
                    Ok(false) => report.status = "draining",
                    Err(error) => (report.status, report.error) = ("failed", Some(error.to_string())),
                }
            }
            reports.push(report);
        }
        Ok(reports)
    }
}
