//! Tournaments in the model, written from docs/tournaments.md: cups open from their creation
//! for a window, one-off or recurring (an instance every hour or every midnight on a zone's
//! clock, `cup`), with three seats, two attempts a player in each instance, a join required or
//! taken by a first score, each player's best score kept (ties by who reached it first, to the
//! second); an admin's early end cuts the open instance and freezes it, a deletion cuts it and
//! every one after; the archive's run stores every instance that ended, rank for rank with the
//! prize it ended with, and its top is then those results. A ban takes the user off every
//! instance not frozen and frees their seat there; an admin's correction reaches only the
//! instance open (docs/tournaments.md).

use std::collections::{BTreeMap, BTreeSet, HashMap};

pub use super::cup::{Cup, Run, Schedule, Window, best_first};

use super::{MARKER_DAYS, day_number};

pub const SEATS: usize = 3;
pub const ATTEMPTS: u32 = 2;

/// What a tournament route should answer: a status with a code for a refusal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// A join taken, or the player already in: the instance's size.
    Joined {
        size: usize,
    },
    /// A first submission: whether it changed the kept score, the kept score, its rank and the
    /// attempts left.
    Played {
        applied: bool,
        score: i64,
        rank: usize,
        entries_left: u32,
    },
    /// A retry of an applied submission: its first decision.
    Again {
        applied: bool,
    },
    Refused {
        status: u16,
        code: String,
    },
}

fn refused(status: u16, code: &str) -> Answer {
    Answer::Refused { status, code: code.to_owned() }
}

/// The prize of `rank` in table `table` of every simulated cup (0 as defined, 1 as a live edit
/// replaces it, which prizes four ranks): with its note, more than a function's catalog holds
/// (`DETAILS_HELD_BYTES`), so every read and end showing them reads the definition.
pub fn prize(table: u8, rank: usize) -> Option<serde_json::Value> {
    let note = |c: &str| c.repeat(600);
    match (table, rank) {
        (0, 1) => Some(serde_json::json!({"gems": 3, "note": note("g")})),
        (0, 2..=3) => Some(serde_json::json!({"gems": 1, "note": note("s")})),
        // Table 0 prizes ranks 1 to 3 only (its rank 4 fell through to table 1's before:
        // the model priced a fourth place the definition never did).
        (1, 1..=4) => Some(serde_json::json!({"coins": 5 - rank, "note": note("c")})),
        _ => None,
    }
}

/// The prizes field of table `table` (`prize`), as a definition sends it.
pub fn prizes(table: u8) -> serde_json::Value {
    match table {
        0 => serde_json::json!([{"ranks": [1, 1], "reward": prize(0, 1)}, {"ranks": [2, 3], "reward": prize(0, 2)}]),
        _ => {
            serde_json::Value::Array((1..=4).map(|rank| serde_json::json!({"ranks": [rank, rank], "reward": prize(table, rank)})).collect())
        }
    }
}

/// What a live edit changes beside the end and the title (docs/tournaments.md#live-edits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CupEdit {
    /// The prizes replaced (table 1): the open instance runs for them.
    Prizes,
    /// `max_size` set to this: a raise takes more players, a lower one is refused.
    Seats(u8),
    /// A description set.
    Description,
    /// Metadata set, or removed with `null` when there is some.
    Metadata,
}

/// A score submission: its id, its payload as sent, its player and score.
pub struct Play<'a> {
    pub event: &'a str,
    pub payload: &'a str,
    pub user: &'a str,
    pub score: i64,
}

#[derive(Debug, Clone, Default)]
pub struct Cups {
    pub cups: BTreeMap<String, Cup>,
}

/// How a cup is defined: its window, its schedule (or its one instance's name), whether a
/// join is required.
pub struct Defined<'a> {
    pub definition: &'a str,
    pub join_required: bool,
    pub window: (i64, i64),
    pub schedule: Option<Schedule>,
    pub single: String,
}

impl Cups {
    /// `PUT /v1/admin/tournaments/{id}` at `now`: 200 the same again (not deleted), 400 a
    /// window leaving no instance open now or later, 409 `board_exists` another or once
    /// deleted, 201 created.
    pub fn put(&mut self, id: &str, defined: Defined<'_>, now: i64) -> u16 {
        let Defined { definition, join_required, window: (start, end), schedule, single } = defined;
        if self.cups.get(id).is_some_and(|cup| cup.definition == definition && cup.deleted.is_none()) {
            return 200;
        }
        let cup = Cup {
            definition: definition.to_owned(),
            join_required,
            start,
            end,
            defined: now,
            schedule,
            single,
            deleted: None,
            closed: BTreeMap::new(),
            seats: SEATS,
            prizes_changed: None,
            runs: BTreeMap::new(),
            grants: HashMap::new(),
            retired: false,
            markers: HashMap::new(),
        };
        // A window leaving no instance to run is refused before the name is looked at.
        if cup.over(now) {
            return 400;
        }
        if self.cups.contains_key(id) {
            return 409;
        }
        self.cups.insert(id.to_owned(), cup);
        201
    }

    pub fn join(&mut self, id: &str, user: &str, banned: bool, now: i64) -> Answer {
        let Some(cup) = self.cups.get_mut(id) else { return refused(404, "unknown_tournament") };
        let Some(open) = cup.open_at(now) else { return refused(409, "tournament_closed") };
        if banned {
            return refused(422, "user_banned");
        }
        let seats = cup.seats;
        let run = cup.runs.entry(open.id).or_default();
        if !run.seated.contains(user) {
            if run.seated.len() >= seats {
                return refused(409, "tournament_full");
            }
            run.seated.insert(user.to_owned());
        }
        Answer::Joined { size: run.seated.len() }
    }

    /// A score submitted to cup `id`.
    pub fn play(&mut self, id: &str, play: Play<'_>, banned: bool, now: i64) -> Answer {
        let Play { event, payload, user, score } = play;
        let Some(cup) = self.cups.get_mut(id) else { return refused(404, "unknown_tournament") };
        if let Some((first, day, applied)) = cup.markers.get(event)
            && day_number(now) - day <= MARKER_DAYS
        {
            return if first == payload { Answer::Again { applied: *applied } } else { refused(409, "idempotency_conflict") };
        }
        let Some(open) = cup.open_at(now) else { return refused(409, "tournament_closed") };
        if banned {
            return refused(422, "user_banned");
        }
        let (seats, join_required) = (cup.seats, cup.join_required);
        let run = cup.runs.entry(open.id).or_default();
        let seated = run.seated.contains(user);
        if !seated && join_required {
            return refused(403, "not_joined");
        }
        if !seated && run.seated.len() >= seats {
            return refused(409, "tournament_full");
        }
        let used = run.entries.get(user).copied().unwrap_or(0);
        let allowed = ATTEMPTS + run.granted.get(user).copied().unwrap_or(0);
        if used >= allowed {
            return refused(422, "entry_limit");
        }
        run.seated.insert(user.to_owned());
        run.entries.insert(user.to_owned(), used + 1);
        let applied = run.board.get(user).is_none_or(|&(kept, _)| score > kept);
        if applied {
            run.board.insert(user.to_owned(), (score, now));
        }
        let ranking = run.ranking();
        cup.markers.insert(event.to_owned(), (payload.to_owned(), day_number(now), applied));
        let rank = ranking.iter().position(|(u, _)| u == user).expect("a player who scored is ranked") + 1;
        Answer::Played { applied, score: ranking[rank - 1].1, rank, entries_left: allowed - used - 1 }
    }

    /// `POST …/end` at `now`: 202 with the instance's end, or a refusal. Again (no instance open,
    /// the last one ended early): the same answer.
    pub fn end(&mut self, id: &str, now: i64) -> Result<i64, Answer> {
        let Some(cup) = self.cups.get_mut(id).filter(|cup| !cup.retired) else { return Err(refused(404, "unknown_tournament")) };
        if let Some(open) = cup.open_at(now) {
            cup.closed.insert(open.id, now);
            return Ok(now);
        }
        match cup.last_before(now).filter(|last| cup.closed.contains_key(&last.id)) {
            Some(last) => Ok(last.end),
            None => Err(refused(409, "tournament_closed")),
        }
    }

    /// `DELETE …` at `now`: 202 (the same again), the open instance ended at the deletion.
    pub fn delete(&mut self, id: &str, now: i64) -> Result<(), Answer> {
        if self.cups.get(id).is_some_and(|cup| cup.open_at(now).is_some() && cup.deleted.is_none()) {
            self.end(id, now)?;
        }
        let cup = self.cups.get_mut(id).filter(|cup| !cup.retired).ok_or(refused(404, "unknown_tournament"))?;
        cup.deleted.get_or_insert(now);
        Ok(())
    }

    /// The archive's run finished deleted cup `id`'s end; an error when the model says it could
    /// not have (not deleted, or an instance that ran by then not stored).
    pub fn retire(&mut self, id: &str) -> Result<(), String> {
        let cup = self.cups.get_mut(id).ok_or_else(|| format!("{id}'s end done: no such cup"))?;
        let pending: Vec<&String> = cup.runs.iter().filter(|(_, run)| run.results.is_none()).map(|(id, _)| id).collect();
        if cup.deleted.is_none() || !pending.is_empty() {
            return Err(format!("{id}'s end done while deleted {:?} with {pending:?} not stored", cup.deleted));
        }
        cup.retired = true;
        cup.markers.clear();
        Ok(())
    }

    /// An admin's correction setting `user`'s score in cup `id` at `now`: 200 in the open
    /// instance (seat and attempts untouched), 422 `period_closed` when none is open (ended, on
    /// time or early, or not open yet), 422 `user_banned` for a banned user while open. `None`: a
    /// cup never defined or deleted, whose answer the model does not say.
    pub fn correct(&mut self, id: &str, user: &str, score: i64, banned: bool, now: i64) -> Option<(u16, &'static str)> {
        let cup = self.cups.get_mut(id).filter(|cup| cup.deleted.is_none())?;
        let Some(open) = cup.open_at(now).filter(|open| !cup.frozen(&open.id)) else { return Some((422, "period_closed")) };
        if banned {
            return Some((422, "user_banned"));
        }
        let run = cup.runs.entry(open.id).or_default();
        // As correct_score.lua keeps it: a better score is reached now, a worse or equal one
        // keeps when the held one was reached.
        let reached = match run.board.get(user) {
            Some(&(held, at)) if score <= held => at,
            _ => now,
        };
        run.board.insert(user.to_owned(), (score, reached));
        Some((200, ""))
    }

    /// A ban: off every instance's board not frozen (its results not stored yet, not ended
    /// early), and out of its seat there; attempts stay.
    pub fn ban(&mut self, user: &str) {
        for cup in self.cups.values_mut().filter(|cup| cup.deleted.is_none()) {
            let frozen: BTreeSet<String> = cup.runs.keys().filter(|id| cup.frozen(id)).cloned().collect();
            for (_, run) in cup.runs.iter_mut().filter(|(id, _)| !frozen.contains(*id)) {
                run.board.remove(user);
                // Their seat is freed with their score: another player may take it.
                run.seated.remove(user);
            }
        }
    }

    /// `PATCH /v1/admin/tournaments/{id}` moving the end to `end` at `now` (docs/tournaments.md#live-edits):
    /// 200 while an instance is open or to come (the definition becomes `edited`), 409
    /// `tournament_closed` once none is, or deleted; 400 for an end not after now, a shortened
    /// one within a minute, a move of an open instance's end within its last minute, or a
    /// one-off's window past the 2^23 one-second time parts its scores are kept in; 404 for a
    /// cup never defined or retired.
    pub fn edit(&mut self, id: &str, (end, more): (i64, Option<CupEdit>), edited: &str, now: i64) -> (u16, &'static str) {
        let Some(cup) = self.cups.get_mut(id).filter(|cup| !cup.retired) else { return (404, "unknown_tournament") };
        if cup.deleted.is_some() || cup.over(now) {
            return (409, "tournament_closed");
        }
        let mut after = cup.clone();
        after.end = end;
        let open_end = |cup: &Cup| cup.open_at(now).map(|open| open.end);
        let moves_closing = open_end(cup).is_some_and(|ends| ends < now + 60 && open_end(&after) != Some(ends));
        let too_wide = cup.schedule.is_none() && end - cup.start > 1 << 23;
        if end <= now || (end < cup.end && end < now + 60) || moves_closing || too_wide {
            return (400, "invalid_tournament");
        }
        match more {
            Some(CupEdit::Seats(seats)) if usize::from(seats) < cup.seats => return (400, "invalid_tournament"),
            Some(CupEdit::Seats(seats)) => cup.seats = usize::from(seats),
            Some(CupEdit::Prizes) => _ = cup.prizes_changed.get_or_insert(now),
            _ => {}
        }
        cup.end = end;
        cup.definition = edited.to_owned();
        (200, "")
    }

    /// `POST /v1/admin/tournaments/{id}/attempts` granting `add` attempts to `user` at `now`,
    /// with grant id `grant` and `payload`: the attempts left after it, or a refusal.
    pub fn grant(
        &mut self,
        id: &str,
        user: &str,
        add: u32,
        (grant, payload): (&str, &str),
        banned: bool,
        now: i64,
    ) -> Result<(u32, bool), Answer> {
        // A retired cup is still in the catalog (its results are read by it): closed.
        let Some(cup) = self.cups.get_mut(id) else { return Err(refused(404, "unknown_tournament")) };
        let Some(open) = cup.open_at(now) else { return Err(refused(409, "tournament_closed")) };
        if let Some((first, instance, left)) = cup.grants.get(grant) {
            return if first == payload && *instance == open.id { Ok((*left, true)) } else { Err(refused(409, "grant_conflict")) };
        }
        if banned {
            return Err(refused(422, "user_banned"));
        }
        let run = cup.runs.entry(open.id.clone()).or_default();
        let granted = run.granted.entry(user.to_owned()).or_default();
        *granted += add;
        let left = (ATTEMPTS + *granted).saturating_sub(run.entries.get(user).copied().unwrap_or(0));
        cup.grants.insert(grant.to_owned(), (payload.to_owned(), open.id, left));
        Ok((left, false))
    }

    /// The archive's run at `now`: every instance that ended is stored as it stands, with the
    /// prizes it ended with.
    pub fn archive(&mut self, now: i64) {
        for cup in self.cups.values_mut() {
            let ended: Vec<(String, i64)> = cup
                .runs
                .keys()
                .filter_map(|id| cup.instance_named(id))
                .filter(|window| window.end <= now)
                .map(|window| (window.id, window.end))
                .collect();
            for (id, end) in ended {
                let table = cup.table(end);
                let run = cup.runs.get_mut(&id).expect("a run the history touched");
                if run.results.is_none() {
                    run.results = Some((run.ranking(), table));
                }
            }
        }
    }
}
