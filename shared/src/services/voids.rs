//! Voids (docs/journal.md#void): `POST /v1/admin/boards/{board}/users/{user_id}/void` takes away
//! the points a user's events in `[from, to)` earned, on every live period of one board — found
//! in the journal (S3, and what the drain has not stored yet), decided by `domain::void`, applied
//! by one atomic script per board with its audit entry, once per `void_id`, and journaled with
//! the points it took per period, so a restore replays it as it was.

use std::collections::BTreeSet;

use chrono::{DateTime, Duration, NaiveDate, SubsecRound, Utc};
use futures::{StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::moderation::{AUDIT_LOG_LEN, AuditEntry, AuditKind, Moderation, ModerationError, check_reason};
use crate::archive::objects::{Objects, ReadError, date_objects, object_order, read_lines};
use crate::domain::config::Board;
use crate::domain::ids;
use crate::domain::journal::{Line, stream_id_ms};
use crate::domain::period::{Period, PeriodKind};
use crate::domain::scoring::{self, Event};
use crate::domain::void::{Applied, LedgerEntry, Voided, Written, voided};
use crate::redis::error::StoreError;
use crate::redis::journal;
use crate::redis::keys::Layout;
use crate::redis::scripts::LEDGER_RETENTION_SECS;
use crate::redis::scripts::moderation::{self as script, AuditRecord, PointsVoid, VoidReply};
use crate::redis::scripts::{Decision, GuardRefusal, PeriodStanding, Receipt};

/// Times a void reads the journal again when a take-back or another void of the user landed
/// while it was deciding.
const ATTEMPTS: usize = 10;
/// Journal objects read at once.
const READS_AT_ONCE: usize = 8;
/// Stream entries read per page.
const STREAM_PAGE: usize = 1000;
/// The longest range one void takes (its journal is read within the route's time).
pub const MAX_RANGE_DAYS: i64 = 92;

/// `POST /v1/admin/boards/{board}/users/{user_id}/void`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct VoidRequest {
    /// Makes the void exactly-once: a retry gets the first answer, another payload a 409.
    pub void_id: String,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub reason: String,
}

/// The void's audit entry and the user's standing on each period it touched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VoidReceipt {
    #[serde(flatten)]
    pub entry: AuditEntry,
    pub duplicate: bool,
    pub periods: Vec<PeriodStanding>,
}

/// What a void was decided on: the count of the user's voids (read first) and the journal's
/// last entry read.
#[derive(Debug, Clone, Copy)]
pub struct Decided<'a> {
    pub seen: i64,
    pub through: &'a str,
}

/// What a void takes, as its journal entry records it (`periods`, `entries`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct Recorded {
    pub periods: Vec<VoidedPoints>,
    /// The day ledger entries deleted: `[day, "action|target"]`.
    pub entries: Vec<(String, String)>,
}

/// What a void takes from one period.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct VoidedPoints {
    pub period: String,
    pub period_id: String,
    pub points: i64,
}

/// The void route's work: the journal bucket it reads and how long that keeps objects.
pub struct Voids<O> {
    moderation: Moderation,
    objects: Option<O>,
    retention: Duration,
}

impl<O: Objects> Voids<O> {
    /// `objects`: the journal bucket (`None`: the journal is off, and so are voids);
    /// `retention_days`: how long it keeps objects (a range older than that is refused).
    pub fn new(moderation: Moderation, objects: Option<O>, retention_days: i64) -> Self {
        Self { moderation, objects, retention: Duration::days(retention_days) }
    }

    pub async fn void(
        &self,
        board_name: &str,
        user_id: &str,
        request: &VoidRequest,
        actor: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<VoidReceipt, ModerationError> {
        let board = self.moderation.user_board(board_name)?;
        ids::validate_id("user_id", user_id)?;
        validate(request)?;
        if board.scores.is_some() {
            return Err(ModerationError::NotPoints(board.name.clone()));
        }
        if request.from < now - self.retention {
            return Err(ModerationError::RangeTooOld(self.retention.num_days()));
        }
        if request.to - request.from > Duration::days(MAX_RANGE_DAYS) {
            return Err(ModerationError::RangeTooLong(MAX_RANGE_DAYS));
        }
        let objects = self.objects.as_ref().filter(|_| self.moderation.keys.journal_on()).ok_or(ModerationError::JournalOff)?;
        // The journal keeps times to the millisecond: the range as it compares, as it is
        // fingerprinted and journaled (a later void reads it back).
        let request = &VoidRequest { from: request.from.trunc_subsecs(3), to: request.to.trunc_subsecs(3), ..request.clone() };
        // The store's policy first: a refused write records nothing, the layout included.
        // On the primary, like the journal: a replica's may lag behind each other.
        let mut conn = self.moderation.store.write_connection().await?;
        let layout = self.moderation.store.write_layout(&self.moderation.keys, board).await?;
        let keys = layout.of_user(user_id);
        for _ in 0..ATTEMPTS {
            // Read before the journal: a void landing after it makes this one stale.
            let seen = script::voids_seen(&mut conn, &keys, user_id).await?;
            let (written, through) = self.written(objects, &layout, board, user_id, request.from, now).await?;
            let mut voided = voided(board, &written, request.from, request.to);
            // A day ledger past its retention is gone, and with it any take-back of its gives.
            voided.entries.retain(|entry| ledger_kept(board, &entry.day, now));
            let decided = Decided { seen, through: &through };
            match self.moderation.void_points(board, user_id, request, &voided, Some(decided), actor, now).await {
                Err(ModerationError::Stale) => continue,
                done => return done,
            }
        }
        Err(ModerationError::Busy)
    }

    /// The user's writes on `board` from the day before `from` on, in the board's order, and the
    /// last entry of the journal read (of any user; `0-0`: none): a void decided now took what
    /// was written up to there.
    async fn written(
        &self,
        objects: &O,
        layout: &Layout,
        board: &Board,
        user_id: &str,
        from: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<(Vec<Written>, String), ModerationError> {
        // Redis first, then S3: an entry drained in between is read twice (and kept once), never
        // missed.
        let keys = layout.of_user(user_id);
        let mut conn = self.moderation.store.write_connection().await?;
        let mut lines: Vec<Line> = Vec::new();
        loop {
            let page = journal::after(&mut conn, &keys, &board.name, lines.last().map(|line| line.id.as_str()), STREAM_PAGE).await?;
            if page.is_empty() {
                break;
            }
            lines.extend(page);
        }
        // Stream ids are Redis's clock, event times the functions': a day either side of `from`.
        let first = (from - Duration::days(1)).date_naive();
        let dates = first.iter_days().take_while(|date| *date <= now.date_naive() + Duration::days(1));
        let prefix = self.moderation.keys.prefix();
        let mut names: Vec<((String, u64, u64), String)> = Vec::new();
        for date in dates.collect::<Vec<NaiveDate>>() {
            // The user's writes are in their shard's journal (the board's own on one shard).
            let listed =
                objects.list(&date_objects(prefix, layout.journal_of(user_id), &date.to_string())).await.map_err(journal_unavailable)?;
            names.extend(listed.into_iter().filter_map(|name| object_order(&name).map(|order| (order, name))));
        }
        names.sort();
        // The futures built first: a stream mapping a closure over borrowed names is not `Send`
        // for every lifetime, which the HTTP handler needs.
        let reads: Vec<_> = names.iter().map(|(_, name)| read_lines(objects, name)).collect();
        // Only the user's lines are kept, and the last id of each object.
        let user_lines = |lines: Vec<Line>| {
            (
                lines.iter().map(|line| order_of(&line.id)).max(),
                lines.into_iter().filter(|line| is_users(line, user_id)).collect::<Vec<_>>(),
            )
        };
        let stored: Vec<(Option<StreamOrder>, Vec<Line>)> =
            futures::stream::iter(reads).buffered(READS_AT_ONCE).map_ok(user_lines).try_collect().await.map_err(|error| match error {
                ReadError::Unavailable(error) => journal_unavailable(error),
                unreadable => ModerationError::JournalUnreadable(unreadable.to_string()),
            })?;
        let last = lines.iter().map(|line| order_of(&line.id)).chain(stored.iter().filter_map(|(last, _)| *last)).max().unwrap_or((0, 0));
        lines.extend(stored.into_iter().flat_map(|(_, lines)| lines));
        let mut seen = BTreeSet::new();
        let mut mine: Vec<((i64, u64, u8), Written)> = Vec::new();
        for line in lines {
            if !is_users(&line, user_id) || !seen.insert(line.id.clone()) {
                continue;
            }
            if let Some((writes, through)) = written_of(board, &line) {
                // A void stands where it read the journal up to, after what it read.
                let ((ms, seq), after) = through.map_or((order_of(&line.id), 0), |through| (order_of(&through), 1));
                mine.extend(writes.into_iter().map(|write| ((ms, seq, after), write)));
            }
        }
        mine.sort_by_key(|(order, _)| *order);
        Ok((mine.into_iter().map(|(_, write)| write).collect(), format!("{}-{}", last.0, last.1)))
    }
}

/// A stream id's place in the board's order of writes: its milliseconds, then its sequence.
type StreamOrder = (i64, u64);

fn order_of(id: &str) -> StreamOrder {
    (stream_id_ms(id).unwrap_or_default(), id.split_once('-').and_then(|(_, seq)| seq.parse().ok()).unwrap_or(0))
}

/// What a journal line says a user wrote, when it bears on a void: an applied event, or a void
/// with the last entry it read (`through`).
fn written_of(board: &Board, line: &Line) -> Option<(Vec<Written>, Option<String>)> {
    let mut fields = line.entry.clone();
    let kind = fields.remove("kind")?;
    let at: DateTime<Utc> = fields.remove("at")?.as_str()?.parse().ok()?;
    match kind.as_str()? {
        "event" => {
            let receipt = Receipt::parse(&line.outcome).filter(|receipt| receipt.decision == Decision::Applied)?;
            let event: Event = serde_json::from_value(Value::Object(fields)).ok()?;
            let changes = (0..board.periods.len()).map(|period| receipt.change(period)).collect();
            Some((vec![Written::Event(Applied::of(board, &event, at, changes))], None))
        }
        // A ban empties the periods its outcome names (`kind:id`, comma-separated); a
        // correction changes those of its answer.
        "ban" => Some((lowered_by_ban(&line.outcome), None)),
        "correction" => Some((lowered_by_correction(&line.outcome)?, None)),
        "void" => {
            let request: VoidRequest = serde_json::from_value(fields.remove("request")?).ok()?;
            // Moved by a reshard, its `through` names the old layout's journal: it stands at its
            // own line, where the user's moved writes keep their order.
            let moved = fields.get(crate::domain::journal::RESHARDED).and_then(Value::as_bool) == Some(true);
            let through = fields.remove("through").and_then(|through| through.as_str().map(str::to_owned)).filter(|_| !moved);
            Some((vec![Written::Void { from: request.from, to: request.to }], through))
        }
        _ => None,
    }
}

fn lowered_by_ban(outcome: &str) -> Vec<Written> {
    outcome
        .split(',')
        .filter_map(|period| period.split_once(':'))
        .map(|(kind, id)| Written::Lowered { period: kind.to_owned(), period_id: id.to_owned(), by: None })
        .collect()
}

fn lowered_by_correction(outcome: &str) -> Option<Vec<Written>> {
    let periods: Vec<Value> = serde_json::from_str(outcome).ok()?;
    let lowered: Vec<Written> = periods
        .iter()
        .filter_map(|period| {
            let (kind, id) = (period.get("period")?.as_str()?, period.get("period_id")?.as_str()?);
            let removed = period.get("removed").and_then(Value::as_bool) == Some(true);
            let delta = period.get("delta").and_then(Value::as_i64).unwrap_or(0);
            (removed || delta < 0).then(|| Written::Lowered {
                period: kind.to_owned(),
                period_id: id.to_owned(),
                by: if removed { None } else { Some(-delta) },
            })
        })
        .collect();
    Some(lowered)
}

fn is_users(line: &Line, user_id: &str) -> bool {
    line.entry.get("user_id").and_then(Value::as_str) == Some(user_id)
}

/// Whether the day ledger of `day` (a local day of `board`) is still kept at `now`.
fn ledger_kept(board: &Board, day: &str, now: DateTime<Utc>) -> bool {
    Period::named(PeriodKind::Day, day, board.timezone)
        .ok()
        .and_then(|day| day.end)
        .is_some_and(|end| end.timestamp() + LEDGER_RETENTION_SECS > now.timestamp())
}

fn journal_unavailable(error: impl std::fmt::Display) -> ModerationError {
    ModerationError::JournalUnavailable(error.to_string())
}

fn validate(request: &VoidRequest) -> Result<(), ModerationError> {
    ids::validate_id("void_id", &request.void_id)?;
    check_reason(&request.reason)?;
    if request.from >= request.to {
        return Err(ModerationError::BadPeriod("from must be before to".into()));
    }
    Ok(())
}

impl Moderation {
    /// Takes `voided`'s points from the user on `board` with the void's audit entry, atomically
    /// and once per void id; `seen`: the count of the user's voids they were decided on (refused
    /// as `Stale` if another landed since, or a take-back took a voided give). A restore's
    /// replay calls it with what the journal recorded, and no count.
    #[allow(clippy::too_many_arguments)]
    pub async fn void_points(
        &self,
        board: &Board,
        user_id: &str,
        request: &VoidRequest,
        voided: &Voided,
        decided: Option<Decided<'_>>,
        actor: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<VoidReceipt, ModerationError> {
        let entry = AuditEntry {
            reason: Some(request.reason.clone()),
            void_id: Some(request.void_id.clone()),
            ..AuditEntry::new(&board.name, AuditKind::Void, user_id, actor, now)
        };
        let entry_json = entry.json();
        let through = decided.as_ref().map(|decided| decided.through);
        let journal_entry = if self.keys.journal_on() { journal_entry(&entry, request, voided, through) } else { String::new() };
        let void = PointsVoid {
            void_id: &request.void_id,
            fingerprint: &scoring::fingerprint(&(user_id, request)),
            member: user_id,
            periods: &voided.periods,
            entries: &voided.entries,
            now,
            reason: &request.reason,
            statements: board.statements,
            voids_seen: decided.map(|decided| decided.seen),
            journal_entry: &journal_entry,
            notify: board.notify.as_ref(),
            league: board.league.as_ref(),
        };
        let mut conn = self.store.write_connection().await?;
        let audit = AuditRecord { entry: &entry_json, keep: AUDIT_LOG_LEN };
        let layout = self.store.write_layout(&self.keys, board).await?;
        match script::void_points(&mut conn, &layout.of_user(user_id), &void, audit).await? {
            VoidReply::Voided { entry, periods, duplicate } => {
                let entry = serde_json::from_str(&entry).map_err(|e| StoreError::Protocol(format!("void entry: {e}")))?;
                let mut periods = periods;
                crate::services::reads::sharded::rank_standings(&conn, &self.keys, &layout, board, user_id, &mut periods).await?;
                Ok(VoidReceipt { entry, duplicate, periods })
            }
            VoidReply::Conflict => Err(ModerationError::Conflict(request.void_id.clone())),
            VoidReply::Banned => Err(GuardRefusal::Banned { user_id: user_id.to_owned(), board: board.name.clone() })?,
            VoidReply::Stale => Err(ModerationError::Stale),
        }
    }

    /// A restore's replay of a void line: the points it took, as recorded, at its time.
    pub async fn replay_void(
        &self,
        board_name: &str,
        user_id: &str,
        request: &VoidRequest,
        recorded: &Recorded,
        actor: Option<&str>,
        at: DateTime<Utc>,
    ) -> Result<VoidReceipt, ModerationError> {
        let board = self.user_board(board_name)?;
        let periods = recorded
            .periods
            .iter()
            .map(|voided| {
                let kind = board.period_kind(&voided.period).ok_or_else(|| ModerationError::BadPeriod(voided.period.clone()))?;
                let period =
                    Period::named(kind, &voided.period_id, board.timezone).map_err(|e| ModerationError::BadPeriod(e.to_string()))?;
                Ok((period, voided.points))
            })
            .collect::<Result<Vec<_>, ModerationError>>()?;
        let entries = recorded.entries.iter().map(|(day, field)| LedgerEntry { day: day.clone(), field: field.clone() }).collect();
        self.void_points(board, user_id, request, &Voided { periods, entries }, None, actor, at).await
    }
}

/// A void's journal entry: its audit entry, the request, and what it takes (`Recorded`).
fn journal_entry(entry: &AuditEntry, request: &VoidRequest, voided: &Voided, through: Option<&str>) -> String {
    let mut json = serde_json::to_value(entry).expect("an audit entry always serializes");
    json["request"] = serde_json::to_value(request).expect("a void request always serializes");
    let recorded = Recorded {
        periods: voided
            .periods
            .iter()
            .map(|(period, points)| VoidedPoints { period: period.kind.as_str().to_owned(), period_id: period.id.clone(), points: *points })
            .collect(),
        entries: voided.entries.iter().map(|entry| (entry.day.clone(), entry.field.clone())).collect(),
    };
    json["periods"] = serde_json::to_value(recorded.periods).expect("voided points always serialize");
    json["entries"] = serde_json::to_value(recorded.entries).expect("ledger entries always serialize");
    if let Some(through) = through {
        json["through"] = Value::String(through.to_owned());
    }
    json.to_string()
}
