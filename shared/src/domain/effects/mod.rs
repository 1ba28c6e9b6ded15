//! What a journaled write did (docs/journal.md#effects): its write commands as they ran and
//! each written key's expiry after it, as the scripts record them in the stream (compact text,
//! prelude_effects.lua) and as a journal line in S3 carries them (JSON): the only thing a
//! restore applies.

use serde_json::Value;

mod packed;

pub use packed::PACKED;

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
        // Compact text that did not read, kept as why (`Line::with_effects`).
        if let Value::String(problem) = value {
            return Err(problem.clone());
        }
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

/// The separators of the stream's compact form (prelude_effects.lua): between a command's words,
/// between commands, and before the expiries. No recorded word holds one: each is printable
/// ASCII or `BINARY_ARG` and hex.
const WORD: char = '\u{2}';
const COMMAND: char = '\u{3}';
const EXPIRIES: char = '\u{4}';

impl Effects {
    /// Reads the compact text prelude_effects.lua records: commands (words joined by `WORD`,
    /// a key named in full the first time and then by its 1-based place among the keys named),
    /// `EXPIRIES`, then each named key's expiry in that order. Refuses what `parse` refuses.
    pub fn parse_compact(recorded: &str) -> Result<Self, String> {
        let (commands_text, expiries_text) = recorded.split_once(EXPIRIES).ok_or("effects: no expiries")?;
        let mut named: Vec<String> = Vec::new();
        let mut commands = Vec::new();
        for text in commands_text.split(COMMAND).filter(|text| !text.is_empty()) {
            let mut words = text.split(WORD);
            let name = words.next().unwrap_or_default().to_owned();
            if !EFFECT_COMMANDS.contains(&name.as_str()) {
                return Err(format!("effects: {name:?} is not a recorded write"));
            }
            let key_word = words.next().ok_or("effects: a command without a key")?;
            let key = match key_word.parse::<usize>() {
                Ok(place) => named.get(place.wrapping_sub(1)).cloned().ok_or("effects: a key named by a place no key has")?,
                Err(_) => {
                    let key = String::from_utf8(decode_arg(key_word)?).map_err(|_| "effects: a key that is not text")?;
                    let key = relative_key(&key)?;
                    named.push(key.clone());
                    key
                }
            };
            let args: Vec<Vec<u8>> = words.map(decode_arg).collect::<Result<_, _>>()?;
            check_args(&name, &args)?;
            commands.push(Command { name, key, args });
        }
        let at: Vec<&str> = if expiries_text.is_empty() { Vec::new() } else { expiries_text.split(WORD).collect() };
        if at.len() != named.len() {
            return Err("effects: not one expiry a key".into());
        }
        let expiries = named
            .into_iter()
            .zip(at)
            .map(|(key, at)| at.parse::<i64>().map(|at| (key, at)).map_err(|_| "effects: an expiry that is not whole ms".to_string()))
            .collect::<Result<_, _>>()?;
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
    fn the_compact_form_reads_as_the_json_one() {
        let compact =
            "HSET\u{2}:evt:1:2\u{2}\u{1}00ff41\u{2}a1\u{3}ZADD\u{2}:z:all:all\u{2}30000\u{2}ann\u{3}HSET\u{2}1\u{2}#\u{2}1\u{4}5\u{2}-1";
        let json = serde_json::json!([
            [["HSET", ":evt:1:2", "\u{1}00ff41", "a1"], ["ZADD", ":z:all:all", "30000", "ann"], ["HSET", ":evt:1:2", "#", "1"]],
            [":evt:1:2", 5, ":z:all:all", -1]
        ]);
        assert_eq!(Effects::parse_compact(compact).unwrap(), Effects::parse(&json).unwrap());
        assert_eq!(Effects::parse_compact("\u{4}").unwrap(), Effects::default());
        // An empty last word is a word.
        let empty = Effects::parse_compact("HSET\u{2}:h\u{2}f\u{2}\u{4}-1").unwrap();
        assert_eq!(empty.commands[0].args, vec![b"f".to_vec(), Vec::new()]);
        for bad in [
            "HSET\u{2}:h\u{2}f\u{2}v",             // no expiries
            "HSET\u{2}:h\u{2}f\u{2}v\u{4}",        // a key without its expiry
            "HSET\u{2}:h\u{2}f\u{2}v\u{4}1\u{2}2", // an expiry without its key
            "HSET\u{2}2\u{2}f\u{2}v\u{4}",         // a place no key has
            "HSET\u{2}0\u{2}f\u{2}v\u{4}",
            "FLUSHALL\u{2}:h\u{4}-1",
            "DEL\u{2}other:{b}:z\u{4}-1",
            "HSET\u{2}:h\u{2}f\u{4}-1", // a field without its value
            "HSET\u{2}:h\u{2}f\u{2}v\u{4}soon",
        ] {
            assert!(Effects::parse_compact(bad).is_err(), "{bad:?}");
        }
    }
}
