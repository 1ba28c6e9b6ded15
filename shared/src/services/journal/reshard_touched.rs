//! What the lines a move applies after its pre-check touched of the board's period sets
//! (docs/scaling.md#changing-shards): each set a line's recorded effects wrote, and the members
//! they named in it. The move compares every period set while writes go on (`pre_check`), then,
//! fenced, only what changed since: the members named here and those the pre-check found
//! different, in each set named here or seen by it. A set written by a command that names no
//! member (a range removed, the key deleted) is compared whole.

use std::collections::{BTreeMap, BTreeSet};

use crate::domain::journal::Effects;
use crate::redis::keys::BoardKeys;

/// Members of one period set (relative key) to compare again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Again {
    Members(BTreeSet<String>),
    /// Every member: a write that named none of those it changed.
    Whole,
}

impl Again {
    fn add(&mut self, members: impl IntoIterator<Item = String>) {
        if let Again::Members(held) = self {
            held.extend(members);
        }
    }
}

/// Period sets (relative keys) and what to compare again in each.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Touched(pub BTreeMap<String, Again>);

impl Touched {
    /// Notes what a line's effects wrote in period sets.
    pub fn note(&mut self, effects: &Effects) {
        for command in effects.commands.iter().filter(|command| BoardKeys::is_period_set(&command.key)) {
            let text = |arg: &Vec<u8>| String::from_utf8_lossy(arg).into_owned();
            let named: Option<Vec<String>> = match command.name.as_str() {
                "ZADD" => Some(zadd_members(&command.args).into_iter().map(text).collect()),
                "ZINCRBY" => command.args.get(1).map(|member| vec![text(member)]),
                "ZREM" => Some(command.args.iter().map(text).collect()),
                _ => None,
            };
            match named {
                Some(members) => self.members(&command.key, members),
                None => {
                    self.0.insert(command.key.clone(), Again::Whole);
                }
            }
        }
        // A set the write left with an expiry, or without a key, is the write's too.
        for (key, _) in effects.expiries.iter().filter(|(key, _)| BoardKeys::is_period_set(key)) {
            self.members(key, Vec::new());
        }
    }

    /// Notes `members` of set `relative` to compare again.
    pub fn members(&mut self, relative: &str, members: Vec<String>) {
        self.0.entry(relative.to_owned()).or_insert_with(|| Again::Members(BTreeSet::new())).add(members);
    }
}

/// The members of `ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member …]`'s
/// arguments (after the key).
fn zadd_members(args: &[Vec<u8>]) -> Vec<&Vec<u8>> {
    const OPTIONS: [&[u8]; 6] = [b"NX", b"XX", b"GT", b"LT", b"CH", b"INCR"];
    let first = args.iter().position(|arg| !OPTIONS.iter().any(|option| arg.eq_ignore_ascii_case(option))).unwrap_or(args.len());
    args[first..].chunks(2).filter_map(|pair| pair.get(1)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::journal::Command;

    fn command(name: &str, key: &str, args: &[&str]) -> Command {
        Command { name: name.into(), key: key.into(), args: args.iter().map(|a| a.as_bytes().to_vec()).collect() }
    }

    fn members(names: &[&str]) -> Again {
        Again::Members(names.iter().map(|n| (*n).to_owned()).collect())
    }

    #[test]
    fn each_period_set_a_line_wrote_is_noted_with_the_members_it_named() {
        let effects = Effects {
            commands: vec![
                command("ZADD", ":z:all:all", &["GT", "CH", "12.5", "ann", "3", "bob"]),
                command("ZINCRBY", ":z:week:2026-W48", &["4", "cid"]),
                command("ZREM", ":z:day:2026-12-01", &["dan", "eve"]),
                command("HSET", ":guard", &["kept|all:all", "-1"]),
                command("ZADD", ":lg:o:2026-W48", &["0", "ann"]),
            ],
            expiries: vec![(":z:month:2026-12".into(), 5), (":marker:ann".into(), 7)],
        };
        let mut touched = Touched::default();
        touched.note(&effects);
        let expected: BTreeMap<String, Again> = [
            (":z:all:all", members(&["ann", "bob"])),
            (":z:week:2026-W48", members(&["cid"])),
            (":z:day:2026-12-01", members(&["dan", "eve"])),
            (":z:month:2026-12", members(&[])),
        ]
        .into_iter()
        .map(|(key, again)| (key.to_owned(), again))
        .collect();
        assert_eq!(touched.0, expected);
    }

    #[test]
    fn a_set_written_without_naming_its_members_is_compared_whole_from_then_on() {
        let mut touched = Touched::default();
        touched.note(&Effects { commands: vec![command("ZREMRANGEBYRANK", ":z:all:all", &["0", "-11"])], expiries: vec![] });
        touched.note(&Effects { commands: vec![command("ZADD", ":z:all:all", &["1", "ann"])], expiries: vec![] });
        touched.note(&Effects { commands: vec![command("DEL", ":z:day:1", &[])], expiries: vec![] });
        assert_eq!(touched.0.get(":z:all:all"), Some(&Again::Whole));
        assert_eq!(touched.0.get(":z:day:1"), Some(&Again::Whole));
    }
}
