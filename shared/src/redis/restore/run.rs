//! A run of journal lines packed for one `restore_lines.lua` call (docs/journal.md#restore).
//!
//! Redis spends a restore's time on the calls a script makes, not on the commands' own work,
//! so a run is packed to make as few as it can while ending exactly where the lines one by one
//! would: commands on different keys touch nothing of each other, so each key's commands keep
//! their order and nothing else does; a command that Redis would end the same as one variadic
//! call is folded into the key's previous one (a board's `ZADD`s of a run become a few); a
//! command on a key whose recorded life had ended by now is dropped (it would be gone by now),
//! and the key's next write starts from nothing; and each key's expiry is the last one its
//! lines recorded, set once at the end of the call.

use std::collections::HashMap;

use crate::domain::journal::{Command, Effects};
use crate::redis::keys::BoardKeys;

/// Members (or pairs) one folded command carries at most: Redis picks a new key's encoding from
/// the number a call carries, so a call of more than its default listpack limit (128) would
/// make a set or hash that the writes one by one would not (another encoding, more memory).
const FOLDED_ELEMENTS: usize = 128;

/// A run of lines for one call: the keys they write, once each, and their commands.
#[derive(Debug, Default)]
pub struct Run {
    /// Each key's full name, and what the run does with it.
    keys: Vec<String>,
    records: Vec<KeyRecord>,
    /// Position in `keys` of each key's name relative to the board's.
    index: HashMap<String, usize>,
    commands: Vec<Packed>,
    args: usize,
    lines: usize,
    through: String,
    /// Each line's stream fields (entry, outcome, effects), when the run copies its lines to
    /// a journal (`copy`).
    pub(super) copies: Vec<[String; 3]>,
}

#[derive(Debug, Default)]
struct KeyRecord {
    /// The type the key's first command writes (`any`: a command that takes a key of any type),
    /// or none: every command the run had on it is dropped.
    family: Option<&'static str>,
    /// The last expiry the run's lines recorded for the key (ms; -1 none, -2 gone).
    expiry: Option<i64>,
    /// The key's last command in `commands`.
    last: Option<usize>,
    /// The last line that wrote the key recorded an expiry that has passed: the key was gone
    /// before any later write, which starts from nothing (a `DEL` first).
    ended: bool,
}

#[derive(Debug)]
struct Packed {
    name: String,
    key: usize,
    args: Vec<Vec<u8>>,
}

impl Run {
    /// Adds a line: `now_ms` is Redis's clock (`Clock`), against which a recorded expiry has
    /// passed.
    pub fn push(&mut self, keys: &BoardKeys, id: &str, effects: &Effects, now_ms: i64) {
        let expiry_of = |key: &str| effects.expiries.iter().find(|(k, _)| k == key).map(|(_, at)| *at);
        for command in &effects.commands {
            let expired = expiry_of(&command.key).is_some_and(|at| at >= 0 && at <= now_ms);
            let k = self.key(keys, &command.key);
            if expired {
                self.records[k].ended = true;
                continue;
            }
            if std::mem::take(&mut self.records[k].ended) {
                self.append(k, &Command { name: "DEL".into(), key: command.key.clone(), args: Vec::new() });
            }
            if !self.fold(k, command) {
                self.append(k, command);
            }
        }
        for (key, at) in &effects.expiries {
            let k = self.key(keys, key);
            self.records[k].expiry = Some(*at);
        }
        self.lines += 1;
        self.through = id.to_owned();
    }

    /// `push`, and the line's stream fields to append to the target's journal as it is applied
    /// (a reshard: the new layout journals the history it was given).
    pub fn push_copied(&mut self, keys: &BoardKeys, id: &str, effects: &Effects, now_ms: i64, fields: [String; 3]) {
        self.push(keys, id, effects, now_ms);
        self.copies.push(fields);
    }

    fn append(&mut self, k: usize, command: &Command) {
        self.records[k].family.get_or_insert(family(&command.name));
        self.records[k].last = Some(self.commands.len());
        self.args += 3 + command.args.len();
        self.commands.push(Packed { name: command.name.clone(), key: k, args: command.args.clone() });
    }

    fn key(&mut self, keys: &BoardKeys, relative: &str) -> usize {
        if let Some(&k) = self.index.get(relative) {
            return k;
        }
        self.keys.push(keys.relative(relative));
        self.records.push(KeyRecord::default());
        self.index.insert(relative.to_owned(), self.keys.len() - 1);
        self.keys.len() - 1
    }

    /// Folds `command` into its key's last command where the two as one call end the same as
    /// one after the other; false when they do not.
    fn fold(&mut self, k: usize, command: &Command) -> bool {
        let Some(last) = self.records[k].last else { return false };
        let before = &mut self.commands[last];
        let pairs = matches!(command.name.as_str(), "ZADD" | "HSET");
        let elements = (before.args.len() + command.args.len()) / if pairs { 2 } else { 1 };
        if before.name != command.name || elements > FOLDED_ELEMENTS {
            return false;
        }
        match command.name.as_str() {
            // Pairs applied in order, later ones over earlier ones: as separate calls.
            "ZADD" if !has_flags(&before.args) && !has_flags(&command.args) => {}
            "HSET" | "ZREM" | "HDEL" | "SADD" | "SREM" => {}
            // Increments of one field add up (unless the sum leaves Redis's range).
            "HINCRBY" if before.args.len() == 2 && command.args.len() == 2 && before.args[0] == command.args[0] => {
                let sum = int(&before.args[1]).zip(int(&command.args[1])).and_then(|(a, b)| a.checked_add(b));
                let Some(sum) = sum else { return false };
                before.args[1] = sum.to_string().into_bytes();
                return true;
            }
            _ => return false,
        }
        before.args.extend(command.args.iter().cloned());
        self.args += command.args.len();
        true
    }

    pub fn lines(&self) -> usize {
        self.lines
    }

    /// Arguments so far: a run is sent before it grows past what one call should carry.
    pub fn weight(&self) -> usize {
        self.args + 3 * self.keys.len()
    }

    /// The stream id of the run's last line.
    pub fn through(&self) -> &str {
        &self.through
    }

    pub(super) fn keys(&self) -> &[String] {
        &self.keys
    }

    /// The call's arguments after its first three (see restore_lines.lua).
    pub(super) fn args(&self) -> Vec<Vec<u8>> {
        let text = |n: usize| n.to_string().into_bytes();
        let mut args = Vec::with_capacity(2 + 2 * self.keys.len() + self.args);
        args.push(text(self.keys.len()));
        args.push(text(self.commands.len()));
        for record in &self.records {
            args.push(record.family.unwrap_or("-").as_bytes().to_vec());
            args.push(record.expiry.map(|at| at.to_string().into_bytes()).unwrap_or_default());
        }
        for command in &self.commands {
            args.push(text(command.args.len()));
            args.push(command.name.as_bytes().to_vec());
            args.push(text(command.key + 4));
            args.extend(command.args.iter().cloned());
        }
        args
    }
}

/// The type of key a recorded command writes (Redis's `TYPE` name), `any` for one that takes a
/// key of any type.
fn family(command: &str) -> &'static str {
    match command {
        "ZADD" | "ZREM" | "ZINCRBY" | "ZREMRANGEBYSCORE" | "ZREMRANGEBYRANK" => "zset",
        "HSET" | "HDEL" | "HINCRBY" | "HSETNX" => "hash",
        "SETBIT" | "BITFIELD" | "INCR" | "INCRBY" => "string",
        "LPUSH" | "LTRIM" => "list",
        "SADD" | "SREM" => "set",
        _ => "any",
    }
}

/// A `ZADD` whose first word is an option: folded into nothing.
fn has_flags(args: &[Vec<u8>]) -> bool {
    args.first().is_none_or(|first| ["NX", "XX", "GT", "LT", "CH", "INCR"].iter().any(|flag| first.eq_ignore_ascii_case(flag.as_bytes())))
}

fn int(arg: &[u8]) -> Option<i64> {
    std::str::from_utf8(arg).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redis::keys::Keys;

    fn command(name: &str, key: &str, args: &[&str]) -> Command {
        Command { name: name.into(), key: key.into(), args: args.iter().map(|a| a.as_bytes().to_vec()).collect() }
    }

    fn packed(run: &Run) -> Vec<String> {
        run.commands
            .iter()
            .map(|c| {
                let args: Vec<_> = c.args.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect();
                format!("{} {} {}", c.name, c.key, args.join(" "))
            })
            .collect()
    }

    #[test]
    fn commands_fold_per_key_in_order_and_only_where_redis_ends_the_same() {
        let keys = Keys::new("t").expect("a valid prefix").board("b");
        let mut run = Run::default();
        let line = |commands: Vec<Command>| Effects { commands, expiries: vec![] };
        run.push(&keys, "1-0", &line(vec![command("ZADD", ":z", &["1", "a"]), command("HINCRBY", ":h", &["f", "2"])]), 0);
        run.push(&keys, "2-0", &line(vec![command("ZADD", ":z", &["2", "b"]), command("HINCRBY", ":h", &["f", "3"])]), 0);
        run.push(&keys, "3-0", &line(vec![command("HINCRBY", ":h", &["g", "1"]), command("ZADD", ":z", &["GT", "1", "a"])]), 0);
        run.push(&keys, "4-0", &line(vec![command("HINCRBY", ":h", &["g", &i64::MAX.to_string()])]), 0);
        assert_eq!(packed(&run), ["ZADD 0 1 a 2 b", "HINCRBY 1 f 5", "HINCRBY 1 g 1", "ZADD 0 GT 1 a", "HINCRBY 1 g 9223372036854775807"]);
        assert_eq!(run.lines(), 4);
        assert_eq!(run.through(), "4-0");
    }

    #[test]
    fn a_key_whose_life_ended_starts_from_nothing_at_its_next_write() {
        let keys = Keys::new("t").expect("a valid prefix").board("b");
        let mut run = Run::default();
        let line =
            |name: &str, args: &[&str], at: i64| Effects { commands: vec![command(name, ":z", args)], expiries: vec![(":z".into(), at)] };
        run.push(&keys, "1-0", &line("ZADD", &["1", "a"], -1), 500);
        run.push(&keys, "2-0", &line("ZADD", &["2", "a"], 100), 500);
        run.push(&keys, "3-0", &line("ZADD", &["1", "b"], 900), 500);
        assert_eq!(packed(&run), ["ZADD 0 1 a", "DEL 0 ", "ZADD 0 1 b"]);
    }

    #[test]
    fn a_folded_command_carries_no_more_members_than_a_listpack_holds() {
        let keys = Keys::new("t").expect("a valid prefix").board("b");
        let mut run = Run::default();
        for i in 0..300 {
            let member = format!("m{i}");
            run.push(&keys, "1-0", &Effects { commands: vec![command("ZADD", ":z", &["1", &member])], expiries: vec![] }, 0);
        }
        let sizes: Vec<usize> = run.commands.iter().map(|c| c.args.len() / 2).collect();
        assert_eq!(sizes, [128, 128, 44]);
    }

    #[test]
    fn expired_commands_are_dropped_and_each_key_keeps_its_last_expiry() {
        let keys = Keys::new("t").expect("a valid prefix").board("b");
        let mut run = Run::default();
        let gone = Effects { commands: vec![command("HINCRBY", ":cap", &["f", "1"])], expiries: vec![(":cap".into(), 100)] };
        let live = Effects {
            commands: vec![command("HINCRBY", ":cap", &["f", "1"]), command("ZADD", ":z", &["1", "a"])],
            expiries: vec![(":cap".into(), 900), (":z".into(), -1)],
        };
        run.push(&keys, "1-0", &gone, 500);
        assert_eq!(run.records[0].family, None, "a key whose life had ended is not claimed");
        run.push(&keys, "2-0", &live, 500);
        // The cap's earlier life ended: whatever an earlier call brought back of it goes first.
        assert_eq!(packed(&run), ["DEL 0 ", "HINCRBY 0 f 1", "ZADD 1 1 a"]);
        assert_eq!((run.records[0].family, run.records[0].expiry), (Some("any"), Some(900)));
        assert_eq!((run.records[1].family, run.records[1].expiry), (Some("zset"), Some(-1)));
    }
}
