//! The journal's record of a write (docs/journal.md): what was asked, as the route took it, and
//! when. The write scripts append it to the board's journal stream in the same call as the
//! write, with what the write did; the `journal` function drains the streams to S3 as JSON lines
//! (`Line`). Admin writes (bans, unbans, corrections) record their audit entry instead, which
//! has the same `kind`, `at` and `user_id`.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::scores::Submission;
use super::scoring::Event;
use super::sign_in::SignInRequest;

/// The write commands a journaled write records as its effects (prelude.lua `redis.call`), the
/// only ones a restore applies: each is deterministic on the key it names, so applying a key's
/// recorded commands in order from where the key began gives the key the write left.
pub const EFFECT_COMMANDS: &[&str] = &[
    "ZADD",
    "ZREM",
    "ZINCRBY",
    "ZREMRANGEBYSCORE",
    "ZREMRANGEBYRANK",
    "HSET",
    "HDEL",
    "HINCRBY",
    "HSETNX",
    "SET",
    "DEL",
    "UNLINK",
    "BITFIELD",
    "SETBIT",
    "LPUSH",
    "LTRIM",
    "SADD",
    "SREM",
    "INCR",
    "INCRBY",
];

/// Set (true) on a void's entry a reshard moved to a new layout: its `through` names the old
/// layout's journal, whose ids the moved lines no longer have (docs/journal.md#void).
pub const RESHARDED: &str = "resharded";

/// Marks a recorded argument that is not printable ASCII: the rest is its bytes in hex.
const BINARY_ARG: char = '\u{1}';

/// What one journaled write did (`x` of its stream entry, `effects` of its line): its write
/// commands as they ran, keys named relative to the board's (`:<rest>`), and each key it wrote
/// with the key's absolute expiry after the write (ms; -1 none, -2 the write left no key).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Effects {
    pub commands: Vec<Command>,
    pub expiries: Vec<(String, i64)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    pub name: String,
    /// Relative to the board's keys.
    pub key: String,
    pub args: Vec<Vec<u8>>,
}

impl Effects {
    /// Reads a line's `effects`; refuses a command outside `EFFECT_COMMANDS` and a key outside
    /// the board's (so a line can never write another board's keys).
    pub fn parse(value: &Value) -> Result<Self, String> {
        let parts = value.as_array().filter(|parts| parts.len() == 2).ok_or("effects: not [commands, expiries]")?;
        // Lua's cjson writes an empty list as {}.
        fn list(value: &Value) -> Result<&[Value], String> {
            match value {
                Value::Array(items) => Ok(items.as_slice()),
                Value::Object(map) if map.is_empty() => Ok(&[]),
                _ => Err("effects: not a list".into()),
            }
        }
        let mut commands = Vec::new();
        for command in list(&parts[0])? {
            let words = command.as_array().filter(|w| w.len() >= 2).ok_or("effects: a command without a key")?;
            let text = |word: &Value| word.as_str().map(str::to_owned).ok_or_else(|| "effects: a word that is not text".to_string());
            let name = text(&words[0])?;
            if !EFFECT_COMMANDS.contains(&name.as_str()) {
                return Err(format!("effects: {name:?} is not a recorded write"));
            }
            let key = relative_key(&text(&words[1])?)?;
            let args: Vec<Vec<u8>> =
                words[2..].iter().map(|word| text(word).and_then(|word| decode_arg(&word))).collect::<Result<_, _>>()?;
            check_args(&name, &args)?;
            commands.push(Command { name, key, args });
        }
        let flat = list(&parts[1])?;
        let mut expiries = Vec::new();
        for pair in flat.chunks(2) {
            let [key, at] = pair else { return Err("effects: an expiry without its key".into()) };
            let key = relative_key(key.as_str().ok_or("effects: an expiry's key is not text")?)?;
            expiries.push((key, at.as_i64().ok_or("effects: an expiry that is not whole ms")?));
        }
        Ok(Self { commands, expiries })
    }
}

impl Effects {
    /// The recorded form `parse` reads (`[commands, expiries]`), as prelude_effects.lua writes it.
    pub fn to_value(&self) -> Value {
        let commands: Vec<Value> = self
            .commands
            .iter()
            .map(|command| {
                let words = [command.name.clone(), command.key.clone()].into_iter().chain(command.args.iter().map(|arg| encode_arg(arg)));
                Value::Array(words.map(Value::String).collect())
            })
            .collect();
        let expiries: Vec<Value> = self.expiries.iter().flat_map(|(key, at)| [Value::String(key.clone()), Value::from(*at)]).collect();
        Value::Array(vec![Value::Array(commands), Value::Array(expiries)])
    }
}

/// `decode_arg`'s inverse: printable ASCII as it is, anything else `BINARY_ARG` and hex.
fn encode_arg(arg: &[u8]) -> String {
    if arg.iter().all(|b| (0x20..0x7f).contains(b)) && arg.first() != Some(&(BINARY_ARG as u8)) {
        return String::from_utf8_lossy(arg).into_owned();
    }
    std::iter::once(BINARY_ARG.to_string()).chain(arg.iter().map(|b| format!("{b:02x}"))).collect()
}

/// Refuses the argument shapes Redis would refuse once the restore's call has begun writing
/// (a score that is no number, a count that is no integer, a field without its value): a
/// call that fails part-way keeps its first writes.
fn check_args(name: &str, args: &[Vec<u8>]) -> Result<(), String> {
    let text = |arg: &Vec<u8>| String::from_utf8_lossy(arg).into_owned();
    let float = |arg: &Vec<u8>| matches!(text(arg).as_str(), "inf" | "+inf" | "-inf") || text(arg).parse::<f64>().is_ok_and(f64::is_finite);
    let integer = |arg: &Vec<u8>| text(arg).parse::<i64>().is_ok();
    // A score range bound: a float or ±inf, exclusive with a leading '('.
    let bound = |arg: &Vec<u8>| {
        let text = text(arg);
        let value = text.strip_prefix('(').unwrap_or(&text).to_owned();
        float(&value.into_bytes())
    };
    let ok = match name {
        "ZADD" => {
            let flags: Vec<String> =
                args.iter().map(text).take_while(|arg| matches!(arg.as_str(), "NX" | "XX" | "GT" | "LT" | "CH")).collect();
            let pairs = &args[flags.len()..];
            let exclusive = |a: &str, b: &str| flags.iter().any(|f| f == a) && flags.iter().any(|f| f == b);
            !exclusive("NX", "XX")
                && !exclusive("NX", "GT")
                && !exclusive("NX", "LT")
                && !exclusive("GT", "LT")
                && !pairs.is_empty()
                && pairs.len().is_multiple_of(2)
                && pairs.chunks(2).all(|pair| float(&pair[0]))
        }
        "ZINCRBY" => args.len() == 2 && float(&args[0]),
        "HINCRBY" => args.len() == 2 && integer(&args[1]),
        "INCRBY" => args.len() == 1 && integer(&args[0]),
        "INCR" | "DEL" | "UNLINK" => args.is_empty(),
        "HSET" => !args.is_empty() && args.len().is_multiple_of(2),
        "HSETNX" => args.len() == 2,
        "ZREM" | "HDEL" | "SADD" | "SREM" | "LPUSH" => !args.is_empty(),
        "ZREMRANGEBYRANK" | "LTRIM" => args.len() == 2 && args.iter().all(integer),
        "ZREMRANGEBYSCORE" => args.len() == 2 && args.iter().all(bound),
        "SETBIT" => args.len() == 2 && text(&args[0]).parse::<u32>().is_ok() && matches!(text(&args[1]).as_str(), "0" | "1"),
        // A value, then options (EX/PX/KEEPTTL/NX/XX…) Redis checks; recorded as the script ran it.
        "SET" => !args.is_empty(),
        // BITFIELD's subcommands are checked by Redis; recorded only as the scripts write them.
        _ => true,
    };
    if ok { Ok(()) } else { Err(format!("effects: {name} with arguments Redis would refuse")) }
}

fn relative_key(key: &str) -> Result<String, String> {
    if key.starts_with(':') { Ok(key.to_owned()) } else { Err(format!("effects: key {key:?} is not one of the board's")) }
}

fn decode_arg(word: &str) -> Result<Vec<u8>, String> {
    let Some(hex) = word.strip_prefix(BINARY_ARG) else { return Ok(word.as_bytes().to_vec()) };
    if hex.len() % 2 != 0 {
        return Err("effects: odd hex".into());
    }
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).map_err(|_| "effects: bad hex".to_string())).collect()
}

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
/// settling of its shard's records, a season's release): their effects are applied as they are,
/// never decided again.
pub const RECORD_KINDS: [&str; 2] = ["reshard", "season_release"];

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

    /// The line with the effects its stream entry recorded (`x`; "" or unreadable: none).
    pub fn with_effects(mut self, effects: &str) -> Self {
        self.effects = (!effects.is_empty()).then(|| serde_json::from_str(effects).ok()).flatten();
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
    fn effects_redis_would_refuse_are_refused_before_they_are_sent() {
        let parse = |commands: serde_json::Value| Effects::parse(&serde_json::json!([commands, []]));
        assert!(parse(serde_json::json!([["ZADD", ":z", "12.5", "ann"], ["HINCRBY", ":s", "n", "-3"], ["INCR", ":c"]])).is_ok());
        assert!(parse(serde_json::json!([["ZADD", ":z", "GT", "CH", "7", "ann"]])).is_ok());
        for bad in [
            serde_json::json!([["ZADD", ":z", "seven", "ann"]]),
            serde_json::json!([["ZADD", ":z", "7"]]),
            serde_json::json!([["ZINCRBY", ":z", "nan", "ann"]]),
            serde_json::json!([["HINCRBY", ":s", "n", "1.5"]]),
            serde_json::json!([["HSET", ":h", "field"]]),
            serde_json::json!([["INCRBY", ":c"]]),
        ] {
            assert!(parse(bad.clone()).is_err(), "{bad}");
        }
    }

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
    fn effects_read_commands_binary_words_and_expiries_and_refuse_other_keys_and_commands() {
        let value = serde_json::json!([
            [["HSET", ":evt:1:2", "\u{1}00ff41", "a1"], ["ZADD", ":z:all:all", "30000", "ann"]],
            [":evt:1:2", 5, ":z:all:all", -1]
        ]);
        let effects = Effects::parse(&value).unwrap();
        assert_eq!(effects.commands[0].args, vec![vec![0, 0xff, 0x41], b"a1".to_vec()]);
        assert_eq!(effects.commands[1].key, ":z:all:all");
        assert_eq!(effects.expiries, vec![(":evt:1:2".to_owned(), 5), (":z:all:all".to_owned(), -1)]);
        assert_eq!(Effects::parse(&serde_json::json!([{}, {}])).unwrap(), Effects::default());
        // What a line records is read back as it was written.
        let written = Effects {
            commands: vec![Command { name: "ZADD".into(), key: ":z:all:all".into(), args: vec![b"12".to_vec(), vec![0, 255, b'a']] }],
            expiries: vec![(":z:all:all".into(), -1)],
        };
        assert_eq!(Effects::parse(&written.to_value()).unwrap(), written);
        assert!(Effects::parse(&serde_json::json!([[["FLUSHALL", ":x"]], []])).is_err());
        assert!(Effects::parse(&serde_json::json!([[["DEL", "other:{b}:z"]], []])).is_err());
        assert!(Effects::parse(&serde_json::json!([[["DEL", "!other:{b}:z"]], []])).is_err());
        assert!(Effects::parse(&serde_json::json!([[["SET", ":k", "\u{1}0"]], []])).is_err());
    }

    #[test]
    fn the_next_stream_id_follows() {
        assert_eq!(next_stream_id("5-0").as_deref(), Some("5-1"));
        assert_eq!(next_stream_id(&format!("5-{}", u64::MAX)).as_deref(), Some("6-0"));
        assert_eq!(next_stream_id("x"), None);
    }
}
