//! The journal's record of a write (docs/journal.md): what was asked, as the route took it, and
//! when. The write scripts append it to the board's journal stream in the same call as the
//! write, with what the write did; the `journal` function drains the streams to S3 as JSON lines
//! (`Line`). Admin writes (bans, unbans, corrections) record their audit entry instead, which
//! has the same `kind`, `at` and `user_id`.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use super::effects::{Command, EFFECT_COMMANDS, Effects};

use super::scores::Submission;
use super::scoring::Event;
use super::sign_in::SignInRequest;

/// Set (true) on a void's entry a reshard moved to a new layout: its `through` names the old
/// layout's journal, whose ids the moved lines no longer have (docs/journal.md#void).
pub const RESHARDED: &str = "resharded";

/// A write's record, as a script appends it.
#[derive(Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Entry<'a> {
    Event {
        at: Stamp,
        #[serde(flatten)]
        event: &'a Event,
    },
    Score {
        at: Stamp,
        #[serde(flatten)]
        submission: &'a Submission,
        /// The board's `max_score` when it declares one (not a tournament's): the scale the
        /// write's composites are in, which a restore records (docs/boards.md#score-boards).
        #[serde(skip_serializing_if = "Option::is_none")]
        max_score: Option<i64>,
    },
    /// The request as it came (`date` absent: the day of `at`); the day signed is in the
    /// outcome.
    SignIn {
        at: Stamp,
        #[serde(flatten)]
        request: &'a SignInRequest,
    },
    /// A profile replaced (`PUT /v1/users/{user_id}/profile`), in the profiles' journal.
    Profile { at: Stamp, user_id: &'a str, profile: serde_json::Value },
    /// A runtime board created, ended or removed (`put`, `end`, `remove`), in the catalog's
    /// journal (docs/runtime-boards.md); `definition` is the board's, or why it ends.
    Definition { at: Stamp, board: &'a str, change: &'a str, definition: serde_json::Value },
    /// The deployment's banned users changed (`ban`, `unban`, `seed`), in the catalog's
    /// journal (docs/moderation.md).
    Bans { at: Stamp, change: &'a str, users: &'a [String] },
    /// A player joined a tournament's instance (docs/tournaments.md).
    Join { at: Stamp, user_id: &'a str, instance: &'a str },
    /// A tournament's ended instance freed once its results were stored: its board, players
    /// and attempts (docs/tournaments.md#the-end).
    Release { at: Stamp, instance: &'a str },
    /// A recurring tournament's records of instances ended long ago forgotten (their `closed|`
    /// fields in the guard; docs/tournaments.md#the-end), up to the instance that ended `through`.
    /// Its effects only.
    Prune { at: Stamp, through: Stamp },
    /// A season's frozen board and statements freed once its archive was verified
    /// (docs/archival.md): `period` is `<kind>:<id>`. Its effects only (closed, its set gone).
    SeasonRelease { at: Stamp, period: &'a str },
    /// A reshard's settling of a new shard's guard (docs/scaling.md#changing-shards): the
    /// moved lines' records of period sets, written for the old layout, made to say what the
    /// shard holds. Its effects only; a later move skips it (it settles its own).
    Reshard { at: Stamp, board: &'a str, from: u32, to: u32 },
}

impl Entry<'_> {
    pub fn json(&self) -> String {
        serde_json::to_string(self).expect("a journal entry always serializes")
    }
}

/// The function's clock when it applied the write, to the millisecond (RFC 3339, UTC).
#[derive(Debug, Clone, Copy)]
pub struct Stamp(pub DateTime<Utc>);

impl Serialize for Stamp {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0.to_rfc3339_opts(SecondsFormat::Millis, true))
    }
}

/// One line of a journal object in S3: the entry's fields, then the stream entry's `id`
/// (`<ms>-<seq>`, Redis's clock; the order of the board's writes), the `board` and the
/// script's `outcome` (the receipt of an event or score, the reply of a sign-in or correction).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Line {
    pub id: String,
    pub board: String,
    pub outcome: String,
    /// What the write did (`Effects`); absent on lines of releases before 2026-11-26.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effects: Option<Value>,
    #[serde(flatten)]
    pub entry: Map<String, Value>,
}

/// Kinds of lines that record what a job did rather than a write to decide (a reshard's
/// settling of its shard's records, a season's release, a tournament's prune): their effects are applied as they are,
/// never decided again.
pub const RECORD_KINDS: [&str; 3] = ["reshard", "season_release", "prune"];

impl Line {
    /// Whether the line is one of the `RECORD_KINDS`.
    pub fn is_record(&self) -> bool {
        self.entry.get("kind").and_then(|kind| kind.as_str()).is_some_and(|kind| RECORD_KINDS.contains(&kind))
    }

    /// The line of stream entry `id` of `board`: `entry` as a script appended it (an object;
    /// anything else is kept under `entry`, never dropped).
    pub fn new(id: &str, board: &str, entry: &str, outcome: &str) -> Self {
        let mut entry = match serde_json::from_str::<Value>(entry) {
            Ok(Value::Object(map)) => map,
            _ => Map::from_iter([("entry".to_owned(), Value::String(entry.to_owned()))]),
        };
        // An audit entry names its board too: one `board` per line (the stream's).
        for own in ["id", "board", "outcome", "effects"] {
            entry.remove(own);
        }
        Self { id: id.to_owned(), board: board.to_owned(), outcome: outcome.to_owned(), effects: None, entry }
    }

    /// The line with the effects its stream entry recorded (`x`; empty: none) as a line carries
    /// them (JSON): the scripts' packed form (`Effects::parse_packed`) or compact text
    /// (`Effects::parse_compact`) read, JSON as it is. Packed or compact effects that do not
    /// read are kept as why (a string), which a restore refuses as it refuses any effects it
    /// cannot apply; JSON that does not parse is none, as it always was.
    pub fn with_effects(mut self, effects: &[u8]) -> Self {
        let read = |effects: Result<Effects, String>| Some(effects.map_or_else(Value::String, |read| read.to_value()));
        self.effects = match effects {
            [] => None,
            [super::effects::PACKED, ..] => read(Effects::parse_packed(effects)),
            [b'[', ..] => serde_json::from_slice(effects).ok(),
            compact => read(std::str::from_utf8(compact).map_err(|_| "effects: not text".to_owned()).and_then(Effects::parse_compact)),
        };
        self
    }

    /// The UTC date of the stream id's milliseconds: the object's `date=` partition.
    pub fn date(&self) -> Option<chrono::NaiveDate> {
        stream_id_ms(&self.id).and_then(DateTime::from_timestamp_millis).map(|at| at.date_naive())
    }
}

/// The milliseconds of a stream id `<ms>-<seq>`.
pub fn stream_id_ms(id: &str) -> Option<i64> {
    id.split_once('-').and_then(|(ms, _)| ms.parse().ok())
}

/// A restore's claim of every key it meets (restore_lines.lua, docs/journal.md#rollbacks): a
/// rollback's restore applies the lines after the snapshot onto the keys as the snapshot left
/// them, every one of them.
pub const CLAIM_ALL: &str = "*";

/// A stream id `<ms>-<seq>` as a pair that orders as Redis orders ids.
pub fn stream_order(id: &str) -> Option<(u64, u64)> {
    let (ms, seq) = id.split_once('-')?;
    Some((ms.parse().ok()?, seq.parse().ok()?))
}

/// The smallest stream id after `id` (`XTRIM … MINID` keeps it and everything later).
pub fn next_stream_id(id: &str) -> Option<String> {
    let (ms, seq) = id.split_once('-')?;
    let (ms, seq): (u64, u64) = (ms.parse().ok()?, seq.parse().ok()?);
    Some(match seq.checked_add(1) {
        Some(seq) => format!("{ms}-{seq}"),
        None => format!("{}-0", ms.checked_add(1)?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_entry_is_its_request_with_kind_and_time() {
        let event: Event = serde_json::from_str(r#"{"event_id":"e-1","user_id":"u1","action":"answer","target":"q9"}"#).unwrap();
        let at = "2026-11-22T10:00:00.5Z".parse().unwrap();
        let mut json: Value = serde_json::from_str(&Entry::Event { at: Stamp(at), event: &event }.json()).unwrap();
        assert_eq!(json["kind"], "event");
        assert_eq!(json["at"], "2026-11-22T10:00:00.500Z");
        assert_eq!(json["event_id"], "e-1");
        assert_eq!(json["target"], "q9");
        let fields = json.as_object_mut().unwrap();
        fields.remove("kind");
        fields.remove("at");
        let back: Event = serde_json::from_value(json).expect("the rest of an entry is its event");
        assert_eq!(back, event);
    }

    #[test]
    fn a_line_keeps_the_entry_and_names_its_date() {
        let line = Line::new("1795312800000-3", "activity", r#"{"kind":"score","user_id":"u1"}"#, "k1");
        let json: Value = serde_json::to_value(&line).unwrap();
        assert_eq!(json["kind"], "score");
        assert_eq!(json["id"], "1795312800000-3");
        assert_eq!(json["outcome"], "k1");
        assert_eq!(line.date().unwrap().to_string(), "2026-11-22");
        assert_eq!(Line::new("1-0", "b", "not json", "").entry["entry"], "not json");
        let audit = serde_json::to_string(&Line::new("1-0", "points", r#"{"kind":"ban","board":"points","user_id":"u1"}"#, "")).unwrap();
        assert_eq!(audit.matches("\"board\"").count(), 1, "{audit}");
        let back: Line = serde_json::from_str(&audit).unwrap();
        assert_eq!(back.board, "points");
    }

    #[test]
    fn the_next_stream_id_follows() {
        assert_eq!(next_stream_id("5-0").as_deref(), Some("5-1"));
        assert_eq!(next_stream_id(&format!("5-{}", u64::MAX)).as_deref(), Some("6-0"));
        assert_eq!(next_stream_id("x"), None);
    }
}
