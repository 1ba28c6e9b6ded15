//! The fields of a board's guard hash, which every write checks before it changes anything:
//! a banned user, a period closed for archiving, a season whose board was created or emptied; and
//! how many voids each user's points had. The
//! Lua scripts get the prefixes from here (see `redis::scripts::compose`).

use crate::domain::period::Period;

pub const BAN: &str = "ban|";
pub const CLOSED: &str = "closed|";
pub const LIVE: &str = "live|";
/// Set by a season's journaled release (`release_season.lua`): the season's frozen board and
/// statements are freed, so a restore that replays its writes deletes them again.
pub const RELEASED: &str = "released|";
pub const EMPTIED: &str = "emptied|";
pub const VOIDS: &str = "voids|";
/// Set while a restore of the board runs (docs/journal.md#fence): journaled writes are refused.
pub const FENCE: &str = "fence";
/// The value of `FENCE` a move between layouts puts up (docs/scaling.md#changing-shards): writes
/// are refused as by any fence, reads go on from the layout being moved from, whose keys the
/// move leaves as they are until its switch. Every other fencer (a loss, a restore, a rollback)
/// writes its own value over it, and reads are refused again.
pub const MOVING: &str = "moving";
/// Set once the board's journal is known to hold nothing Redis lacks: by the drain when the
/// journal holds no object of the board yet (a new board), and by a restore when it completes.
/// A guard without it (a whole-board loss, a FLUSHALL) refuses journaled writes until a
/// restore completes, so no write is decided against history Redis lost.
pub const BORN: &str = "born";
/// Set with `BORN` on the guards of a layout a move is due to take a board to, judged new while
/// the board's data is in another layout (docs/scaling.md#changing-shards), to that layout's
/// record: born, it is not a new board (a write finding the board's layout record missing never
/// records it), and a restore finds where the data is. Removed by the move's switch.
pub const TARGET: &str = "target";
/// Prefix of a period's record in the guard: "kept|<kind>:<id>" holds the absolute expiry (ms,
/// the functions' clock; -1: none) of the period's sorted set, written by the journaled write that
/// created it and removed by the one that emptied it. A set missing before its expiry was lost
/// while the guard survived (docs/journal.md#losses).
pub const KEPT: &str = "kept|";
/// A recurring tournament's guard: the end (Unix ms) of the last ended instance whose record
/// (`closed|`; its release removed the others) was forgotten (`prune_instances.lua`, docs/tournaments.md#the-end); the
/// next prune goes on after it.
pub const PRUNED: &str = "pruned";
/// Prefix of the records of the marker buckets journaled writes created (docs/journal.md#losses):
/// "marks|<group>|<day mod 3>" holds "<day>|<earliest expiry, ms>|" and a bit a bucket shard of
/// that group (128 of them), in hex (prelude_markers.lua). A bucket they record that a write finds not held was lost
/// while the guard survived. A move's switch drops them from the new layout's guards (their
/// lines were recorded for the old layout's buckets).
pub const MARKS: &str = "marks|";
/// Set with `FENCE` by the write that found a loss the guard survived: the drain counts the
/// board as lost (`BoardsLost`) until a restore completes.
pub const LOST: &str = "lost";
/// The last journal entry Redis is known to hold the effects of: raised by the drain's trim in
/// the same call, and by a restore that completes. A snapshot brings back the value it was
/// taken with, so a journal in S3 holding entries after it says Redis is older than its journal
/// (docs/journal.md#rollbacks).
pub const DRAINED: &str = "drained";
/// Set by the drain's trim to the forms of effects it reads (docs/journal.md#effects): `1`
/// compact text (the release before), `PACKED` that and the packed form; the board's journaled
/// writes record their effects so from then on. Before it (a new board, a guard lost or
/// restored, a deploy part-way from a release that reads only JSON) they record JSON, which
/// every release reads.
pub const COMPACT: &str = "compact";
/// `COMPACT`'s value from a drain that reads the packed form (this release's), once
/// `PACKED_AFTER_MS` have passed since its first trim of the board (`2:<ms>` until then: writes
/// record compact text meanwhile).
pub const PACKED: &str = "2";
/// How long after this release's first trim of a board its writes go on recording compact
/// text: a drain run of the release before, begun before the deploy and still reading, ends
/// within its function's timeout (15 minutes) and reads no packed entry.
pub const PACKED_AFTER_MS: i64 = 16 * 60 * 1000;
/// Set with `FENCE` and `LOST` when Redis was found older than the board's journal: the last
/// entry whose effects the snapshot holds. A restore replays the journal's entries after it onto
/// the keys as they are.
pub const ROLLBACK: &str = "rollback";
/// A copy of a one-slot board's scale record (`Keys::board_scale`, docs/boards.md#score-boards),
/// written beside it by the layout probe: a bad `DEL`, or an eviction an operator allowed, can
/// take the record alone (read once a probe, while every write reads the guard). A record found
/// missing beside its copy is recorded again from it, so no deploy takes the board's scores for
/// the default scale's (`redis::layout`).
pub const SCALE: &str = "scale";
/// Set when a runtime board is deleted (docs/runtime-boards.md#deleting): every write is
/// refused (409 `board_ended`) while its end is archived and its keys freed.
pub const ENDED: &str = "ended";
/// Set on a deleted tournament's guard while its end is done: the players its last instance had,
/// read before its keys are freed, until its tombstone (the same field) keeps them. The guard is
/// in the board's slot and the tombstone in the catalog's, so no one call writes both.
pub const PLAYERS: &str = "players";

/// Whether a period set found missing was lost, its guard's `KEPT` record holding `expiry`
/// (ms on the functions' clock, negative: none) at `now_ms`: before the expiry it was lost, after
/// it expired. As prelude_read.lua's `read_fence` judges it.
pub fn kept_lost(expiry: i64, now_ms: i64) -> bool {
    expiry < 0 || now_ms < expiry
}

/// Set while `user_id` is banned from the board.
pub fn ban_field(user_id: &str) -> String {
    format!("{BAN}{user_id}")
}

/// Set once `period` is closed to events (frozen for archiving).
pub fn closed_field(period: &Period) -> String {
    format!("{CLOSED}{}:{}", period.kind.as_str(), period.id)
}

/// The field a live read of `period` asks (`closed_field`): a season's, which the archive closes
/// (docs/archival.md#live-routes); other periods' live sets are never renamed under a read.
pub fn read_closed_field(period: &Period) -> Option<String> {
    (period.kind == crate::domain::period::PeriodKind::Season).then(|| closed_field(period))
}

/// Set once `period`'s frozen board and statements are released (seasons only).
pub fn released_field(period: &Period) -> String {
    format!("{RELEASED}{}:{}", period.kind.as_str(), period.id)
}

/// The period a `closed|<kind>:<id>` field closes: its kind's name and its id, as
/// `closed_field` wrote them.
pub fn closed_period(field: &str) -> Option<(&str, &str)> {
    field.strip_prefix(CLOSED)?.split_once(':')
}

/// The period a `released|<kind>:<id>` field names: its kind's name and its id.
pub fn released_period(field: &str) -> Option<(&str, &str)> {
    field.strip_prefix(RELEASED)?.split_once(':')
}

/// Set by the write scripts when `period`'s board is created (seasons only), so the archive
/// can tell a lost board from an empty season.
pub fn live_field(period: &Period) -> String {
    format!("{LIVE}{}:{}", period.kind.as_str(), period.id)
}

/// Set by the write scripts when a take-back, correction, ban or void empties `period`'s board
/// (seasons only): the archive then archives the season as empty on purpose, not as lost.
pub fn emptied_field(period: &Period) -> String {
    format!("{EMPTIED}{}:{}", period.kind.as_str(), period.id)
}

/// How many voids the user's points on the board have had: a void decided on a count that
/// changed since (another void landed meanwhile) is decided again.
pub fn voids_field(user_id: &str) -> String {
    format!("{VOIDS}{user_id}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::period::PeriodKind;

    #[test]
    fn fields_name_the_user_or_the_period_kind_and_id() {
        let season = Period::containing(PeriodKind::Season, "2026-10-15T00:00:00Z".parse().unwrap(), chrono_tz::Asia::Shanghai);
        assert_eq!(ban_field("u1"), "ban|u1");
        assert_eq!(closed_field(&season), "closed|season:2026-10");
        assert_eq!(closed_period(&closed_field(&season)), Some(("season", "2026-10")));
        assert_eq!(closed_period("ban|u1"), None);
        assert_eq!(released_period(&released_field(&season)), Some(("season", "2026-10")));
        assert_eq!(live_field(&season), "live|season:2026-10");
        assert_eq!(voids_field("u1"), "voids|u1");
    }
}
