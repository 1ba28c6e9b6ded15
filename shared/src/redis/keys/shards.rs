//! Where a sharded board's keys live (docs/scaling.md): shard `k` of a board spread over `n`
//! has a hash tag of its own, `{<board>:<k>of<n>:<salt>}` (no two layouts share a tag), with
//! the smallest salt that puts the tag
//! in the k-th of n equal ranges of the 16,384 cluster slots. A cluster's primaries own
//! contiguous equal ranges (as `redis-cli --cluster create` assigns them), so n shards land
//! n / primaries on each primary, as evenly as the division allows. A board of one shard keeps
//! the tag it always had (`{<board>}`).
//!
//! A layout has a generation too (0 until a move re-encodes the board's scores for another
//! `max_score`, docs/boards.md#changing-max_score): generation g > 0 puts `:g<g>` in every tag
//! (`{<board>:g<g>}`, `{<board>:<k>of<n>:g<g>:<salt>}`), so the re-encoded board is new keys
//! and a new journal beside the old ones until the move switches to it.
//!
//! A user's writes all go to one shard (FNV-1a of the user id, modulo n): every key a write
//! touches (its period sets, markers, ledgers, rate logs, statements, journal, guard) is in
//! that shard's slot, so a write stays one script call. Both the salt rule and the hash are
//! part of the data's layout: changing either hides every sharded board's data.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, RwLock};

use super::{BoardKeys, Keys};

/// Redis Cluster's slot count.
pub const SLOTS: u32 = 16_384;

/// The cluster slot of a key (CRC16/XMODEM of its hash tag, or of the key when it has none).
pub fn slot(key: &str) -> u32 {
    let bytes = key.as_bytes();
    let tagged =
        key.find('{').and_then(|open| key[open + 1..].find('}').filter(|len| *len > 0).map(|len| &bytes[open + 1..open + 1 + len]));
    u32::from(crc16::State::<crc16::XMODEM>::calculate(tagged.unwrap_or(bytes))) % SLOTS
}

/// The slot ranges (first and last, inclusive) `redis-cli --cluster create` gives `primaries`
/// primaries, in order: each takes 16,384 / primaries slots, its last rounded to the nearest
/// (redis-cli.c's `clusterManagerCommandCreate`), the last primary up to slot 16,383. Where
/// those ranges do not meet the shards' equal ranges exactly (3, 5, 6, 9 or 12 primaries), a
/// shard whose tag lands within a slot of a range's edge is on the neighbouring primary
/// (docs/scaling.md#shards-and-primaries).
pub fn redis_cli_ranges(primaries: u32) -> Vec<(u32, u32)> {
    let per = f64::from(SLOTS) / f64::from(primaries.max(1));
    let (mut first, mut cursor, mut ranges) = (0u32, 0f64, Vec::new());
    for i in 0..primaries.max(1) {
        let last = (cursor + per - 1.0).round() as u32;
        let last = if last > SLOTS - 1 || i + 1 == primaries.max(1) { SLOTS - 1 } else { last };
        ranges.push((first, last));
        cursor += per;
        first = last + 1;
    }
    ranges
}

/// The shard (0..shards) holding `user_id`'s entries on a board of `shards` shards.
fn user_shard(user_id: &str, shards: u32) -> u32 {
    super::fnv1a(user_id) % shards.max(1)
}

/// The hash tags of a board's shards, computed once per board, shard count and generation.
fn tags(board: &str, shards: u32, generation: u32) -> Arc<Vec<String>> {
    type Cache = RwLock<HashMap<(String, u32, u32), Arc<Vec<String>>>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let key = (board.to_owned(), shards, generation);
    if let Some(tags) = cache.read().expect("shard tag cache").get(&key) {
        return tags.clone();
    }
    let tags = Arc::new(match (shards, generation) {
        (0 | 1, 0) => vec![board.to_owned()],
        (0 | 1, g) => vec![format!("{board}:g{g}")],
        _ => (0..shards).map(|k| tag(board, shards, k, generation)).collect(),
    });
    cache.write().expect("shard tag cache").insert(key, tags.clone());
    tags
}

/// Shard `k`'s tag: the first salt whose slot falls in the k-th equal range of the slots.
fn tag(board: &str, shards: u32, k: u32, generation: u32) -> String {
    let (low, high) = (k * SLOTS / shards, (k + 1) * SLOTS / shards);
    let stem = if generation == 0 { format!("{board}:{k}of{shards}") } else { format!("{board}:{k}of{shards}:g{generation}") };
    (0u32..)
        .map(|salt| format!("{stem}:{salt}"))
        .find(|tag| (low..high).contains(&slot(&format!("{{{tag}}}"))))
        .expect("CRC16 reaches every range")
}

/// The board journal `name` belongs to: a shard's tag starts with its board's name and a `:`,
/// which no board name holds.
pub fn journal_board(name: &str) -> &str {
    name.split(':').next().unwrap_or(name)
}

/// How many shards the layout of journal `name` has (1: a board's own journal).
pub fn journal_shards(name: &str) -> u32 {
    name.split(':').nth(1).and_then(|part| part.split_once("of")).and_then(|(_, n)| n.parse().ok()).unwrap_or(1)
}

/// The generation of the layout journal `name` belongs to (0: none named).
pub fn journal_generation(name: &str) -> u32 {
    name.split(':').skip(1).find_map(|part| part.strip_prefix('g').and_then(|g| g.parse().ok())).unwrap_or(0)
}

/// Where a board's data is, in one layout: the keys of each of its shards, the shard holding
/// each user, and each shard's journal (its own name when one, else each shard's tag: each
/// shard journals, drains, restores and verifies on its own; docs/journal.md). The one answer
/// to "where" a service is given (`Store::read_layout`, `Store::write_layout`): no service
/// computes a shard.
#[derive(Debug, Clone)]
pub struct Layout {
    keys: Keys,
    board: String,
    generation: u32,
    tags: Arc<Vec<String>>,
    /// The `max_score` its scores are held at, as read (`None`: the configured one).
    held_scale: Option<i64>,
}

impl Layout {
    /// This layout, its scores held at `max_score` (`Store::held_layout`).
    pub fn holding(mut self, max_score: Option<i64>) -> Self {
        self.held_scale = max_score;
        self
    }

    /// The `max_score` a read found the scores held at (`None`: the configured one).
    pub fn held_scale(&self) -> Option<i64> {
        self.held_scale
    }

    pub fn board(&self) -> &str {
        &self.board
    }

    /// How many shards (1: the board's own keys, in one slot).
    pub fn shards(&self) -> u32 {
        self.tags.len() as u32
    }

    /// How many moves re-encoded the board's scores before this layout (0: none).
    pub fn generation(&self) -> u32 {
        self.generation
    }

    pub fn is_sharded(&self) -> bool {
        self.tags.len() > 1
    }

    /// The shard (0..shards) holding `user_id`'s entries: every write of theirs goes there.
    pub fn shard_of(&self, user_id: &str) -> usize {
        user_shard(user_id, self.shards()) as usize
    }

    /// The keys of shard `shard`.
    pub fn shard(&self, shard: usize) -> BoardKeys {
        self.keys.board(&self.tags[shard])
    }

    /// The keys of the shard holding `user_id`'s entries.
    pub fn of_user(&self, user_id: &str) -> BoardKeys {
        self.shard(self.shard_of(user_id))
    }

    /// The keys of every shard, in shard order.
    pub fn all(&self) -> Vec<BoardKeys> {
        self.tags.iter().map(|tag| self.keys.board(tag)).collect()
    }

    /// Each shard's journal, in shard order.
    pub fn journals(&self) -> Vec<String> {
        self.tags.to_vec()
    }

    /// The journal holding `user_id`'s writes.
    pub fn journal_of(&self, user_id: &str) -> &str {
        &self.tags[self.shard_of(user_id)]
    }

    /// `items` grouped by the shard of the user each names, in shard order (shards with none
    /// left out), each group in the items' order: one call per shard keeps each user's writes
    /// in order.
    pub fn by_shard<T>(&self, items: impl IntoIterator<Item = T>, user_of: impl Fn(&T) -> &str) -> Vec<(usize, Vec<T>)> {
        let mut groups: Vec<Vec<T>> = (0..self.tags.len()).map(|_| Vec::new()).collect();
        for item in items {
            let shard = self.shard_of(user_of(&item));
            groups[shard].push(item);
        }
        groups.into_iter().enumerate().filter(|(_, items)| !items.is_empty()).collect()
    }
}

impl Keys {
    /// `board` spread over `shards` (1: the board's own keys). Which layout a board's data is
    /// in is Redis's record (`redis::layout`, through `Store::read_layout`/`write_layout`);
    /// this names one.
    pub fn layout(&self, board: &str, shards: u32) -> Layout {
        self.layout_at(board, shards, 0)
    }

    /// `layout` of generation `generation` (a board a move re-encoded).
    pub fn layout_at(&self, board: &str, shards: u32, generation: u32) -> Layout {
        Layout { keys: self.clone(), board: board.to_owned(), generation, tags: tags(board, shards, generation), held_scale: None }
    }

    /// How many shards `board`'s data is in, and their generation (a string, `<n>` or
    /// `<n>:<generation>`; `redis::layout`), beside its one-slot keys.
    pub fn board_layout(&self, board: &str) -> String {
        self.board(board).layout_record()
    }

    /// The older layout whose writes are still to be decided again (`BoardKeys::older_writes_record`).
    pub fn board_older_writes(&self, board: &str) -> String {
        self.board(board).older_writes_record()
    }

    /// A `SCAN … MATCH` glob for the period sets of every layout of `board` (its own tag
    /// `{<board>}`, a shard's `{<board>:…}`); it may match a board whose name starts
    /// `<board>:`, so a caller keeps a shard's own by its base (`redis::period_sets`).
    pub fn period_sets_glob(&self, board: &str) -> String {
        let own = self.board(board).base;
        let escaped: String =
            own.chars().flat_map(|c| if matches!(c, '*' | '?' | '[' | ']' | '\\') { vec!['\\', c] } else { vec![c] }).collect();
        format!("{}[}}:]*:z:*", escaped.trim_end_matches('}'))
    }

    /// The `max_score` `board`'s scores are laid out with (a string; `redis::layout`), beside
    /// its one-slot keys.
    pub fn board_scale(&self, board: &str) -> String {
        self.board(board).scale_record()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_period_sets_glob_matches_every_layout_of_its_board() {
        let keys = Keys::new("p").unwrap();
        assert_eq!(keys.period_sets_glob("forum"), "p:v1:{forum[}:]*:z:*");
        // Matched as Redis's glob does: `[}:]` one of the two, `*` anything.
        let glob = regex_lite_from(&keys.period_sets_glob("forum"));
        for layout in [keys.layout("forum", 1), keys.layout("forum", 12), keys.layout_at("forum", 3, 2)] {
            for shard in layout.all() {
                assert!(glob(&format!("{}all:0", shard.period_pattern().trim_end_matches('*'))), "{}", shard.period_pattern());
            }
        }
        assert!(!glob(&keys.layout("forum2", 1).all()[0].period_pattern()));
        assert!(!glob(&keys.layout("other", 4).all()[0].period_pattern()));
    }

    /// A matcher for the globs above: literal text, `*` and one `[…]` class of literal chars.
    fn regex_lite_from(glob: &str) -> impl Fn(&str) -> bool + use<> {
        fn matches(glob: &[char], text: &[char]) -> bool {
            match glob.split_first() {
                None => text.is_empty(),
                Some(('*', rest)) => (0..=text.len()).any(|skip| matches(rest, &text[skip..])),
                Some(('[', rest)) => {
                    let close = rest.iter().position(|c| *c == ']').expect("a closed class");
                    text.first().is_some_and(|c| rest[..close].contains(c)) && matches(&rest[close + 1..], &text[1..])
                }
                Some((c, rest)) => text.first() == Some(c) && matches(rest, &text[1..]),
            }
        }
        let glob: Vec<char> = glob.chars().collect();
        move |text: &str| matches(&glob, &text.chars().collect::<Vec<_>>())
    }

    #[test]
    fn slots_match_redis() {
        // Values from `CLUSTER KEYSLOT` on Redis 7.
        assert_eq!(slot("foo"), 12182);
        assert_eq!(slot("{user1000}.following"), slot("{user1000}.followers"));
        assert_eq!(slot("a{}b"), slot("a{}b"));
        assert_eq!(slot("123456789"), 0x31C3 % SLOTS);
    }

    #[test]
    fn shards_spread_one_to_each_equal_range_of_slots() {
        let keys = Keys::new("st").unwrap();
        for shards in [2, 3, 8, 12, 64] {
            let boards = keys.layout("launch", shards).all();
            for (k, shard) in boards.iter().enumerate() {
                let slot = slot(&shard.guard());
                assert!((k as u32 * SLOTS / shards..(k as u32 + 1) * SLOTS / shards).contains(&slot), "{shards}: {k} at {slot}");
            }
        }
        // One shard is the layout every board had before shards.
        assert_eq!(keys.layout("launch", 1).shard(0), keys.board("launch"));
        // The layout is data: these tags must never change.
        let guards: Vec<String> = keys.layout("launch", 3).all().iter().map(BoardKeys::guard).collect();
        assert_eq!(guards, ["st:v1:{launch:0of3:0}:guard", "st:v1:{launch:1of3:1}:guard", "st:v1:{launch:2of3:3}:guard"]);
        // No two layouts of a board share a shard's tag (a reshard moves from one to the other).
        let all: Vec<String> = (1..=64).flat_map(|n| keys.layout("launch", n).all()).map(|shard| shard.guard()).collect();
        assert_eq!(all.iter().collect::<std::collections::HashSet<_>>().len(), all.len());
    }

    /// What docs/scaling.md says of shards over primaries: with 2, 4, 8 or 16 primaries and
    /// shards a multiple of them, each primary holds exactly shards / primaries; with 3, 5, 6,
    /// 9 or 12, at most one shard more or less, and for most boards exactly that.
    #[test]
    fn shards_land_evenly_on_the_primaries_redis_cli_creates_or_one_off() {
        assert_eq!(redis_cli_ranges(3), [(0, 5460), (5461, 10922), (10923, 16383)]);
        let keys = Keys::new("st").unwrap();
        for primaries in [2, 3, 4, 5, 6, 8, 9, 12, 16] {
            let ranges = redis_cli_ranges(primaries);
            let (mut layouts, mut uneven) = (0, 0);
            for shards in (primaries..=64).step_by(primaries as usize) {
                for board in (0..40).map(|i| format!("board-{i}")) {
                    let mut held = vec![0; primaries as usize];
                    for shard in keys.layout(&board, shards).all() {
                        let slot = slot(&shard.guard());
                        held[ranges.iter().position(|(first, last)| (*first..=*last).contains(&slot)).unwrap()] += 1;
                    }
                    let each = shards / primaries;
                    layouts += 1;
                    if primaries.is_power_of_two() {
                        assert!(held.iter().all(|n| *n == each), "{board} over {shards} on {primaries}: {held:?}");
                    }
                    assert!(held.iter().all(|n| n.abs_diff(each) <= 1), "{board} over {shards} on {primaries}: {held:?}");
                    uneven += usize::from(held.iter().any(|n| *n != each));
                }
            }
            // docs/scaling.md: "under 3 % of layouts are uneven".
            assert!(uneven * 100 < layouts * 3, "{primaries} primaries: {uneven} of {layouts} layouts uneven");
        }
    }

    #[test]
    fn users_spread_over_every_shard_and_always_reach_the_same() {
        let counts = (0..1200).fold(vec![0; 12], |mut counts, i| {
            counts[user_shard(&format!("user-{i}"), 12) as usize] += 1;
            counts
        });
        assert!(counts.iter().all(|c| (60..140).contains(c)), "{counts:?}");
        assert_eq!(user_shard("u1", 12), user_shard("u1", 12));
        assert_eq!(user_shard("u1", 1), 0);
        assert_eq!(
            Keys::new("st").unwrap().layout("b", 12).journals().iter().map(|name| journal_shards(name)).collect::<Vec<_>>(),
            vec![12; 12]
        );
        assert_eq!(journal_shards("b"), 1);
    }

    #[test]
    fn a_generation_is_new_keys_and_its_journals_say_so() {
        let keys = Keys::new("st").unwrap();
        assert_eq!(keys.layout_at("b", 1, 0).shard(0), keys.board("b"));
        assert_eq!(keys.layout_at("b", 1, 2).journals(), ["b:g2"]);
        for (shards, generation) in [(1, 1), (1, 7), (4, 1), (12, 3)] {
            let layout = keys.layout_at("b", shards, generation);
            for name in layout.journals() {
                assert_eq!((journal_board(&name), journal_shards(&name), journal_generation(&name)), ("b", shards, generation));
            }
            let old: Vec<String> = keys.layout("b", shards).journals();
            assert!(layout.journals().iter().all(|name| !old.contains(name)));
            // Still one equal range of slots each.
            for (k, shard) in layout.all().iter().enumerate() {
                let slot = slot(&shard.guard());
                assert!((k as u32 * SLOTS / shards..(k as u32 + 1) * SLOTS / shards).contains(&slot));
            }
        }
        assert_eq!(journal_generation("b:3of4:12"), 0);
        assert_eq!(journal_generation("g5"), 0);
    }
}
