//! The simulation's operations and faults, and a history of them generated from a seed. A
//! history is plain data (serialised into tests/sim/regressions.txt), so a regression replays
//! the same steps whatever later changes make the generator produce.

use super::model::cups::CupEdit;
use serde::{Deserialize, Serialize};

/// Users are `u0`..`u5`: few enough that writes meet on the same members.
pub const USERS: u8 = 6;
/// Tournaments are `cup0`..`cup2`.
pub const CUPS: u8 = 3;
/// Runtime boards are `rb0`, `rb1`.
pub const BOARDS: u8 = 2;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    /// `POST /v1/events`: a comment, or a like given or taken back.
    Event {
        id: u32,
        user: u8,
        like: bool,
        target: u8,
        give: bool,
    },
    /// The `back`-th most recent event sent over HTTP, sent again byte for byte.
    Retry {
        back: u8,
    },
    /// The `back`-th most recent event's id with another payload.
    Conflict {
        back: u8,
    },
    /// Comments of `users` sent at the same instant by as many clients.
    Burst {
        first_id: u32,
        users: Vec<u8>,
    },
    /// `POST /v1/events:batch`: forum events applied in order in one request; an item that
    /// `repeat`s is the item before it again (the same id and payload).
    Batch {
        first_id: u32,
        items: Vec<BatchItem>,
    },
    /// One SQS batch to the `queue` function, in this order: each message a comment or a like
    /// given, untimed, taken by SQS `ago` seconds before the batch runs; `again`: the same
    /// batch delivered a second time.
    Queue {
        first_id: u32,
        messages: Vec<QueueMessage>,
        again: bool,
    },
    /// `writes` posts of `user` to the sharded guild while `reads` reads of their neighbourhood
    /// run beside them.
    Race {
        first_id: u32,
        user: u8,
        writes: u8,
        reads: u8,
    },
    /// `POST /v1/sign-ins` of `user` for today on the forum; sent twice when `again`.
    SignIn {
        id: u32,
        user: u8,
        again: bool,
    },
    /// `POST /v1/boards/arcade/scores`.
    Score {
        id: u32,
        user: u8,
        score: u32,
    },
    /// An admin's correction of the arcade: `user`'s entry removed from every live day, or
    /// (`remove` false) their kept score of today set to `score`.
    FixScore {
        id: u32,
        user: u8,
        remove: bool,
        score: u32,
    },
    Ban {
        user: u8,
    },
    /// Fault: a ban whose first script call reaches Redis while its reply is lost with the
    /// connection (standalone: a proxy in front of Redis; the cluster pass sends a plain ban).
    DroppedBan {
        user: u8,
    },
    Unban {
        user: u8,
    },
    /// Fault: a correction whose first script reply is lost with its connection (standalone:
    /// a proxy in front of Redis; the cluster pass sends a plain correction).
    DroppedCorrect {
        id: u32,
        user: u8,
        delta: i8,
    },
    /// An admin correction of the forum's current periods.
    Correct {
        id: u32,
        user: u8,
        delta: i8,
    },
    /// `POST /v1/admin/boards/forum/users/{user}/void` of the events in `[now - back, now -
    /// back + span)`; sent twice when `again`.
    Void {
        id: u32,
        user: u8,
        back: u32,
        span: u32,
        again: bool,
    },
    /// The clock moves on.
    Advance {
        secs: u32,
    },
    /// The journal's drain (and the notifications' drain beside it).
    Drain,
    /// Fault: a drain whose event bus refuses some entries of its calls (`pick` seeds which).
    BusFaults {
        pick: u64,
    },
    /// An operator's close of the arcade's league day `back` days before today (the archive
    /// function's `{"league": …}`), left out when that day is past the league's look-back.
    CloseLeague {
        back: u8,
    },
    /// Fault: S3 failing a share of calls (`pick` seeds which; some puts stored, then failed as
    /// a lost reply): a drain, then a restore attempt, through it.
    S3Faults {
        pick: u64,
    },
    /// A restore of every board, to completion; with a drain run each time it lists the
    /// journal's objects, when `drain_at_list` (a drain on its schedule meeting a restore).
    Restore {
        #[serde(default)]
        drain_at_list: bool,
        /// In invocations that each stop at once (their deadline past), each passing on the
        /// campaign the one before answered (docs/journal.md#restore).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        in_steps: bool,
    },
    /// Fault: a restore whose lock's reply is lost with the connection (standalone: a proxy in
    /// front of Redis; the cluster pass sends a plain restore).
    DroppedRestoreLock,
    /// A restore killed after `yields` of the runtime's turns, before it completed.
    KilledRestore {
        yields: u8,
    },
    /// Fault: a subset of the forum's keys deleted (`pick` seeds which) with its guard when
    /// `guard`; without it, a subset of its period sets (the losses found while the guard
    /// survives, docs/journal.md#losses), and some of the score board's period sets (its guard
    /// kept). The journal's stream stays (its loss is `LoseAll`, after a drain: the tail is the
    /// recovery point).
    Lose {
        pick: u64,
        guard: bool,
        /// Some of both boards' marker buckets too (each board's guard kept): a retry of an
        /// event whose bucket is gone must fence the board, never apply again.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        markers: bool,
    },
    /// Fault: every key of the deployment deleted (a FLUSHALL of its prefix), right after a drain.
    LoseAll,
    /// Fault: the runtime boards' catalog change log deleted alone (a bad `DEL`): warm functions
    /// read the whole catalog at their next change and serve what they served.
    LoseCatalogLog,
    /// The guild moved to `shards` slots (a deploy with the new count, then the journal
    /// function's reshard): in invocations stopped by their deadline after each run when
    /// `steps`, with a post to the guild refused between two of them.
    Reshard {
        shards: u8,
        steps: bool,
        /// Fault: the first invocation killed after this many of the runtime's turns (the
        /// operator invokes it again until `complete`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        killed: Option<u8>,
        /// Fault: every key of the deployment deleted right after the switch, before any drain
        /// (everything else drained before the move, and nothing written during it): the new
        /// layout's history is in its streams, and must be in S3 already.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        lost: bool,
        /// Fault: a drain each time the move lists the guild's objects (the drain on its
        /// schedule storing and trimming the old layout's streams under the move).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        drained: bool,
        /// Fault: the guild's layout record lost alone once the new deploy's start judged the
        /// layout it moves to, before the move (docs/scaling.md#changing-shards).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        unrecorded: bool,
        /// Fault: an archive run cut off between the guild's shards (last month's season frozen
        /// in one, not in the others), then another shard's set of it lost while its guard
        /// survived: the move stops (`board_restoring`) until a restore, then carries the season
        /// whole, for the archive's next run to archive as the model says.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        half_frozen: bool,
    },
    /// An operator deploys the arcade with another `max_score` and runs the journal function's
    /// reshard: refused (the arcade runs a league, docs/boards.md#changing-max_score) before it
    /// fences or writes anything; the old deploy goes on.
    Rescale,
    /// The journal function's verify of every board (its daily schedule).
    Verify,
    /// The archive function's scheduled run (every forum season 30 minutes past its end).
    Archive,
    /// Fault: the archive's scheduled run (seasons, tournaments' and boards' ends, league days)
    /// on the deployment as the faults before left it, a partial loss not restored first: each
    /// job refuses a board it finds lost or archives it whole; then a restore and the next run.
    ArchiveUnrestored,
    /// Fault: every key of the deployment deleted after a drain, then the archive's scheduled
    /// run meets the loss (it must refuse, writing and archiving nothing); then a restore and
    /// the next run.
    ArchiveLost,
    /// Fault: a statement field under `user`'s next comment holds no number, so the write fails
    /// part-way; then the field is repaired and the comment retried.
    Corrupt {
        id: u32,
        user: u8,
    },
    /// `PUT /v1/admin/tournaments/cup{cup}`: a cup whose window starts `back` hours before now
    /// and lasts `hours` (refused when no instance of it is open or to come), a join required
    /// when `join`; `again`: the definition the cup was created with, sent again. Cup 2 recurs,
    /// odd cups run a yearly `cron`, the others are one-offs (`World::definition`).
    Cup {
        cup: u8,
        join: bool,
        hours: u8,
        again: bool,
        #[serde(default, skip_serializing_if = "is_zero")]
        back: u8,
    },
    /// `POST /v1/tournaments/cup{cup}/join`.
    Join {
        cup: u8,
        user: u8,
    },
    /// `POST /v1/tournaments/cup{cup}/scores`; sent twice when `again`.
    Play {
        id: u32,
        cup: u8,
        user: u8,
        score: u32,
        again: bool,
    },
    /// Fault: the archive's scheduled run on a season table (DynamoDB) failing a share of calls
    /// (`pick` seeds which), then the next run.
    TableFaults {
        pick: u64,
    },
    /// Fault: comments of `users` in flight at once while Redis is killed (after `yields` of the
    /// runtime's turns) and started again on its append-only file; each client sends its write
    /// again until answered (standalone; the cluster pass sends them without the fault).
    Restart {
        first_id: u32,
        users: Vec<u8>,
        yields: u8,
    },
    /// `PUT /v1/admin/boards/rb{board}`: a score board keeping each player's best score, or
    /// their latest when `latest` (another definition for a name: 409).
    RuntimeBoard {
        board: u8,
        latest: bool,
    },
    /// `POST /v1/boards/rb{board}/scores`; sent twice when `again`.
    Submit {
        id: u32,
        board: u8,
        user: u8,
        score: u32,
        again: bool,
    },
    /// `DELETE /v1/admin/boards/rb{board}`.
    DeleteBoard {
        board: u8,
    },
    /// Fault: Redis started again on an older copy of its files, after comments of `users` were
    /// acknowledged and drained (standalone; the cluster pass sends the comments alone).
    Rollback {
        first_id: u32,
        users: Vec<u8>,
        /// The guild moved to this many slots between the copy and the rollback, and a post to
        /// it after the switch: the copy records the layout it moved from.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        moved: Option<u8>,
    },
    /// `POST /v1/admin/boards/cup{cup}/users/{user}/corrections` setting the user's score.
    CorrectCup {
        cup: u8,
        user: u8,
        score: u32,
    },
    /// `PATCH /v1/admin/tournaments/cup{cup}`: its end moved to `minutes` from now (before
    /// now: refused), its title too when `title`.
    EditCup {
        cup: u8,
        minutes: i16,
        title: bool,
        /// Another field edited with them (prizes, seats, description, metadata).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        more: Option<CupEdit>,
    },
    /// `POST /v1/admin/tournaments/cup{cup}/attempts`: `add` attempts for the user, grant id
    /// `g{grant}`; then the same again (`Some(true)`) or the id with another payload.
    GrantCup {
        cup: u8,
        user: u8,
        add: u8,
        grant: u32,
        again: Option<bool>,
    },
    /// An admin's early end of the cup (`POST …/end`), or its deletion (`DELETE`) when `delete`.
    EndCup {
        cup: u8,
        delete: bool,
    },
    /// Fault: the function's map of which primary holds each slot gone stale (a failover, a
    /// slot moved): every slot taken for one node's, so the next reads of the guild's shards
    /// go to the wrong node first (docs/scaling.md#reads).
    StaleNodes,
    /// Fault: Redis's script cache emptied (a failover to a replica that never ran the scripts,
    /// a restart, `SCRIPT FLUSH`; every node of a cluster): each script's next call answers
    /// NOSCRIPT, is loaded and sent again, and nothing a write or a read answers changes.
    FlushScripts,
    /// A function's start (a deploy, a scale-out): the boards not born judged against the journal
    /// bucket (docs/journal.md#fence); a board lost with its history is never taken for new.
    Start,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchItem {
    pub user: u8,
    pub like: bool,
    pub target: u8,
    pub give: bool,
    pub repeat: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueMessage {
    pub user: u8,
    pub like: Option<u8>,
    pub ago: u16,
}

/// A history of `len` operations from `seed`.
pub fn generate(seed: u64, len: usize) -> Vec<Op> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut next_id = 0u32;
    let mut id = |n: u32| {
        next_id += n;
        next_id - n
    };
    let mut ops = Vec::with_capacity(len);
    while ops.len() < len {
        let user = rng.u8(..USERS);
        let op = match rng.u32(..138) {
            0..=3 => {
                let items: Vec<BatchItem> = (0..rng.u8(1..12))
                    .map(|_| BatchItem {
                        user: rng.u8(..USERS),
                        like: rng.bool(),
                        target: rng.u8(..5),
                        give: rng.u8(..4) > 0,
                        repeat: rng.u8(..5) == 0,
                    })
                    .collect();
                Op::Batch { first_id: id(items.len() as u32), items }
            }
            4..=21 => Op::Event { id: id(1), user, like: rng.bool(), target: rng.u8(..5), give: rng.u8(..4) > 0 },
            22..=23 => Op::SignIn { id: id(1), user, again: rng.u8(..4) == 0 },
            24 => Op::BusFaults { pick: rng.u64(..) },
            25 => Op::S3Faults { pick: rng.u64(..) },
            26..=31 => Op::Retry { back: rng.u8(..8) },
            32..=33 => Op::Conflict { back: rng.u8(..8) },
            34..=38 => {
                let users: Vec<u8> = (0..rng.u8(2..6)).map(|_| rng.u8(..USERS)).collect();
                Op::Burst { first_id: id(users.len() as u32), users }
            }
            39..=46 => {
                let messages: Vec<QueueMessage> = (0..rng.u8(1..6))
                    .map(|_| QueueMessage { user: rng.u8(..USERS), like: rng.bool().then(|| rng.u8(..5)), ago: rng.u16(..600) })
                    .collect();
                Op::Queue { first_id: id(messages.len() as u32), messages, again: rng.u8(..4) == 0 }
            }
            47..=53 => {
                // Half from a few common scores, so players meet on the same one in one second.
                let score = if rng.bool() { rng.u32(..30) } else { 10 + 2 * rng.u32(..3) };
                Op::Score { id: id(1), user, score }
            }
            54 => Op::CloseLeague { back: rng.u8(..3) },
            55 => Op::FixScore { id: id(1), user, remove: rng.bool(), score: 10 + 2 * rng.u32(..3) },
            56..=59 => {
                let writes = rng.u8(1..6);
                Op::Race { first_id: id(u32::from(writes)), user, writes, reads: rng.u8(1..6) }
            }
            60..=61 => Op::Ban { user },
            62..=64 => Op::Unban { user },
            65 => Op::DroppedBan { user },
            66..=67 => Op::Correct { id: id(1), user, delta: rng.i8(-4..6) },
            68 => Op::DroppedCorrect { id: id(1), user, delta: rng.i8(-4..6) },
            // Up to nine days: most histories cross a month's end, so seasons end and archive.
            69 => {
                let windows = [1, 7, 60, 900, 3_600, 6 * 3_600, 86_400, 3 * 86_400];
                let back = windows[rng.usize(..windows.len())];
                Op::Void { id: id(1), user, back, span: windows[rng.usize(..windows.len())].min(back + 60), again: rng.u8(..4) == 0 }
            }
            70..=80 => Op::Advance { secs: [1, 1, 7, 60, 900, 3_600, 6 * 3_600, 3 * 86_400, 9 * 86_400][rng.usize(..9)] },
            81..=82 => Op::Drain,
            83 => Op::Verify,
            84..=85 => [Op::Archive, Op::ArchiveUnrestored, Op::ArchiveLost][rng.usize(..3)].clone(),
            86..=87 => Op::Restore { drain_at_list: rng.bool(), in_steps: rng.bool() },
            88 => Op::DroppedRestoreLock,
            89 => Op::KilledRestore { yields: rng.u8(..8) },
            90..=94 => Op::Lose { pick: rng.u64(..), guard: rng.u8(..4) == 0, markers: rng.bool() },
            95 => Op::LoseAll,
            96..=97 => Op::Reshard {
                shards: [1, 2, 3, 4, 8][rng.usize(..5)],
                steps: rng.bool(),
                killed: rng.bool().then(|| rng.u8(..60)),
                lost: rng.u8(..3) == 0,
                drained: rng.bool(),
                unrecorded: rng.u8(..4) == 0,
                half_frozen: rng.u8(..3) == 0,
            },
            98 => Op::Corrupt { id: id(1), user },
            99 => Op::Rescale,
            100..=101 => Op::Cup {
                cup: rng.u8(..CUPS),
                join: rng.bool(),
                hours: [1, 3, 30][rng.usize(..3)],
                again: rng.u8(..3) == 0,
                back: [0, 0, 0, 2, 40][rng.usize(..5)],
            },
            102..=104 => Op::Join { cup: rng.u8(..CUPS), user },
            105..=108 => Op::Play { id: id(1), cup: rng.u8(..CUPS), user, score: 10 + 2 * rng.u32(..4), again: rng.u8(..5) == 0 },
            109 => Op::EndCup { cup: rng.u8(..CUPS), delete: rng.u8(..3) == 0 },
            110 => Op::TableFaults { pick: rng.u64(..) },
            111 => {
                let users: Vec<u8> = (0..rng.u8(2..6)).map(|_| rng.u8(..USERS)).collect();
                Op::Restart { first_id: id(users.len() as u32), users, yields: rng.u8(..200) }
            }
            112 => Op::RuntimeBoard { board: rng.u8(..BOARDS), latest: rng.u8(..4) == 0 },
            113..=116 => Op::Submit { id: id(1), board: rng.u8(..BOARDS), user, score: 10 + 2 * rng.u32(..4), again: rng.u8(..5) == 0 },
            117 => Op::DeleteBoard { board: rng.u8(..BOARDS) },
            118 => Op::CorrectCup { cup: rng.u8(..CUPS), user, score: 10 + 2 * rng.u32(..4) },
            119 => {
                let more =
                    [None, Some(CupEdit::Prizes), Some(CupEdit::Seats(rng.u8(2..6))), Some(CupEdit::Description), Some(CupEdit::Metadata)]
                        [rng.usize(..5)];
                Op::EditCup { cup: rng.u8(..CUPS), minutes: [-30, 0, 30, 120, 600][rng.usize(..5)], title: rng.bool(), more }
            }
            120 => {
                let again = [None, None, Some(true), Some(false)][rng.usize(..4)];
                Op::GrantCup { cup: rng.u8(..CUPS), user, add: rng.u8(1..3), grant: id(1), again }
            }
            121 => Op::LoseCatalogLog,
            122 => {
                let users: Vec<u8> = (0..rng.u8(1..5)).map(|_| rng.u8(..USERS)).collect();
                let moved = (rng.u8(..3) == 0).then(|| [1, 2, 3, 4, 8][rng.usize(..5)]);
                Op::Rollback { first_id: id(users.len() as u32 + 1), users, moved }
            }
            // The recurring cup played more than the others: its instances change within hours.
            124..=125 => Op::Cup { cup: 2, join: rng.bool(), hours: [1, 3, 30][rng.usize(..3)], again: rng.u8(..3) == 0, back: 0 },
            126..=130 => Op::Play { id: id(1), cup: 2, user, score: 10 + 2 * rng.u32(..4), again: rng.u8(..5) == 0 },
            131..=132 => Op::Join { cup: 2, user },
            133 => Op::CorrectCup { cup: 2, user, score: 10 + 2 * rng.u32(..4) },
            134 => Op::GrantCup { cup: 2, user, add: rng.u8(1..3), grant: id(1), again: None },
            135 => Op::EditCup { cup: 2, minutes: [-30, 0, 30, 120, 600][rng.usize(..5)], title: false, more: Some(CupEdit::Prizes) },
            136 => Op::StaleNodes,
            137 => Op::FlushScripts,
            _ => Op::Start,
        };
        ops.push(op);
    }
    ops
}

fn is_zero(n: &u8) -> bool {
    *n == 0
}
