//! Tournaments in the model, written from docs/tournaments.md: one-off cups open from their
//! creation for a window, with three seats, two attempts a player, a join required or taken by a
//! first score, each player's best score kept (ties by who reached it first, to the second);
//! an admin's early end or a deletion cuts the window and freezes the board; the archive's run
//! stores every instance that ended, rank for rank with its prize, and its top is then those
//! results. A ban takes the user off every cup not frozen (a one-off's `all` period is always
//! live, docs/moderation.md) and frees their seat there; an admin's correction reaches a cup's
//! board only while it is open (docs/tournaments.md).

use std::collections::{BTreeMap, BTreeSet, HashMap};

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

#[derive(Debug, Clone)]
pub struct Cup {
    /// The definition as sent (JSON): the same again is a 200.
    pub definition: String,
    pub join_required: bool,
    pub start: i64,
    /// The window's end, or the early end's (or the deletion's) time when that came first.
    pub end: i64,
    pub deleted: bool,
    /// Ended early: frozen at once (nothing written to it from then on).
    pub cut: bool,
    pub seated: BTreeSet<String>,
    pub entries: HashMap<String, u32>,
    /// Seats (`max_size`): `SEATS`, raised by a live edit.
    pub seats: usize,
    /// The prize table in force (`prize`): 0 as defined, 1 once an edit replaced it.
    pub prizes: u8,
    /// Attempts an admin granted each player beyond `ATTEMPTS`.
    pub granted: HashMap<String, u32>,
    /// grant id -> (payload, the attempts left it answered).
    grants: HashMap<String, (String, u32)>,
    /// user -> (kept score, when it was reached).
    pub board: HashMap<String, (i64, i64)>,
    /// Stored by the archive's run once the instance ended: user and score, best first.
    pub results: Option<Vec<(String, i64)>>,
    /// Deleted, and its end done (its keys freed but the guard's, its definition forgotten):
    /// retries are refused, DELETE and the early end find nothing (404).
    pub retired: bool,
    /// event id -> (payload, day number of the first delivery, whether it was applied).
    markers: HashMap<String, (String, i64, bool)>,
}

impl Cup {
    fn open(&self, now: i64) -> bool {
        self.start <= now && now < self.end
    }

    fn frozen(&self) -> bool {
        self.cut || self.results.is_some()
    }

    /// The board best first: a higher score first, then who reached it first, then (one
    /// second) the greater user id, as a sorted set orders equal scores from the top.
    pub fn ranking(&self) -> Vec<(String, i64)> {
        best_first(&self.board)
    }

    /// What the instance's top reads: the stored results once there, else the board.
    pub fn top(&self) -> Vec<(String, i64)> {
        self.results.clone().unwrap_or_else(|| self.ranking())
    }
}

/// A score board (user -> (kept score, when it was kept)) best first: a higher score, then who
/// kept it first, then (one second) the greater user id, as a sorted set orders equal scores
/// from the top.
pub fn best_first(board: &HashMap<String, (i64, i64)>) -> Vec<(String, i64)> {
    let mut list: Vec<(&String, &(i64, i64))> = board.iter().collect();
    list.sort_by(|a, b| b.1.0.cmp(&a.1.0).then(a.1.1.cmp(&b.1.1)).then(b.0.cmp(a.0)));
    list.into_iter().map(|(user, &(score, _))| (user.clone(), score)).collect()
}

/// The prize of `rank` in table `table` of every simulated cup (0 as defined, 1 as a live edit
/// replaces it, which prizes four ranks): with its note, more than a function's catalog holds
/// (`DETAILS_HELD_BYTES`), so every read and end showing them reads the definition.
pub fn prize(table: u8, rank: usize) -> Option<serde_json::Value> {
    let note = |c: &str| c.repeat(600);
    match (table, rank) {
        (0, 1) => Some(serde_json::json!({"gems": 3, "note": note("g")})),
        (0, 2..=3) => Some(serde_json::json!({"gems": 1, "note": note("s")})),
        (_, 1..=4) => Some(serde_json::json!({"coins": 5 - rank, "note": note("c")})),
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

impl Cups {
    /// `PUT /v1/admin/tournaments/{id}` at `now` with `definition` (`join_required`, the
    /// window `[start, end)` in seconds): 200 the same again (not deleted), 400 a window over
    /// by now (it would never run), 409 `board_exists` another or once deleted, 201 created.
    pub fn put(&mut self, id: &str, definition: &str, join_required: bool, (start, end): (i64, i64), now: i64) -> u16 {
        match self.cups.get(id) {
            Some(cup) if cup.definition == definition && !cup.deleted => 200,
            _ if end <= now => 400,
            Some(_) => 409,
            None => {
                let cup = Cup {
                    definition: definition.to_owned(),
                    join_required,
                    start,
                    end,
                    deleted: false,
                    cut: false,
                    seated: BTreeSet::new(),
                    seats: SEATS,
                    prizes: 0,
                    entries: HashMap::new(),
                    granted: HashMap::new(),
                    grants: HashMap::new(),
                    board: HashMap::new(),
                    results: None,
                    retired: false,
                    markers: HashMap::new(),
                };
                self.cups.insert(id.to_owned(), cup);
                201
            }
        }
    }

    pub fn join(&mut self, id: &str, user: &str, banned: bool, now: i64) -> Answer {
        let Some(cup) = self.cups.get_mut(id) else { return refused(404, "unknown_tournament") };
        if !cup.open(now) {
            return refused(409, "tournament_closed");
        }
        if banned {
            return refused(422, "user_banned");
        }
        if !cup.seated.contains(user) {
            if cup.seated.len() >= cup.seats {
                return refused(409, "tournament_full");
            }
            cup.seated.insert(user.to_owned());
        }
        Answer::Joined { size: cup.seated.len() }
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
        if !cup.open(now) {
            return refused(409, "tournament_closed");
        }
        if banned {
            return refused(422, "user_banned");
        }
        let seated = cup.seated.contains(user);
        if !seated && cup.join_required {
            return refused(403, "not_joined");
        }
        if !seated && cup.seated.len() >= cup.seats {
            return refused(409, "tournament_full");
        }
        let used = cup.entries.get(user).copied().unwrap_or(0);
        let allowed = ATTEMPTS + cup.granted.get(user).copied().unwrap_or(0);
        if used >= allowed {
            return refused(422, "entry_limit");
        }
        cup.seated.insert(user.to_owned());
        cup.entries.insert(user.to_owned(), used + 1);
        let applied = cup.board.get(user).is_none_or(|&(kept, _)| score > kept);
        if applied {
            cup.board.insert(user.to_owned(), (score, now));
        }
        cup.markers.insert(event.to_owned(), (payload.to_owned(), day_number(now), applied));
        let ranking = cup.ranking();
        let rank = ranking.iter().position(|(u, _)| u == user).expect("a player who scored is ranked") + 1;
        Answer::Played { applied, score: ranking[rank - 1].1, rank, entries_left: allowed - used - 1 }
    }

    /// `POST …/end` at `now`: 202 with the instance's end, or a refusal.
    pub fn end(&mut self, id: &str, now: i64) -> Result<i64, Answer> {
        let Some(cup) = self.cups.get_mut(id).filter(|cup| !cup.retired) else { return Err(refused(404, "unknown_tournament")) };
        if cup.open(now) {
            (cup.end, cup.cut) = (now, true);
        } else if !cup.cut {
            return Err(refused(409, "tournament_closed"));
        }
        Ok(cup.end)
    }

    /// `DELETE …` at `now`: 202 (the same again), the open instance ended at the deletion.
    pub fn delete(&mut self, id: &str, now: i64) -> Result<(), Answer> {
        if self.cups.get(id).is_some_and(|cup| cup.open(now)) {
            self.end(id, now)?;
        }
        let cup = self.cups.get_mut(id).filter(|cup| !cup.retired).ok_or(refused(404, "unknown_tournament"))?;
        cup.deleted = true;
        Ok(())
    }

    /// The archive's run finished deleted cup `id`'s end; an error when the model says it could
    /// not have (not deleted, or its results not stored).
    pub fn retire(&mut self, id: &str) -> Result<(), String> {
        let cup = self.cups.get_mut(id).ok_or_else(|| format!("{id}'s end done: no such cup"))?;
        if !cup.deleted || cup.results.is_none() {
            return Err(format!("{id}'s end done while deleted {} with results {:?}", cup.deleted, cup.results));
        }
        cup.retired = true;
        cup.markers.clear();
        Ok(())
    }

    /// An admin's correction setting `user`'s score in cup `id` at `now`: 200 in the open
    /// instance (seat and attempts untouched), 422 `period_closed` once it
    /// ended (on time or early), 422 `user_banned` for a banned user while open. `None`: a cup
    /// never defined or deleted, whose answer the model does not say.
    pub fn correct(&mut self, id: &str, user: &str, score: i64, banned: bool, now: i64) -> Option<(u16, &'static str)> {
        let cup = self.cups.get_mut(id).filter(|cup| !cup.deleted)?;
        if !cup.open(now) || cup.frozen() {
            return Some((422, "period_closed"));
        }
        if banned {
            return Some((422, "user_banned"));
        }
        // As correct_score.lua keeps it: a better score is reached now, a worse or equal one
        // keeps when the held one was reached.
        let reached = match cup.board.get(user) {
            Some(&(held, at)) if score <= held => at,
            _ => now,
        };
        cup.board.insert(user.to_owned(), (score, reached));
        Some((200, ""))
    }

    /// A ban: off every cup's board not frozen (its results not stored yet), and out of its
    /// seat there; attempts stay.
    pub fn ban(&mut self, user: &str) {
        for cup in self.cups.values_mut().filter(|cup| !cup.frozen() && !cup.deleted) {
            cup.board.remove(user);
            // Their seat is freed with their score: another player may take it.
            cup.seated.remove(user);
        }
    }

    /// `PATCH /v1/admin/tournaments/{id}` moving the end to `end` at `now` (docs/tournaments.md#live-edits):
    /// 200 while open (the definition becomes `edited`), 409 `tournament_closed` once over or
    /// deleted, 400 for an end not after now, or past the 2^23 one-second
    /// time parts its scores are kept in; 404 for a cup never defined or retired.
    pub fn edit(&mut self, id: &str, (end, more): (i64, Option<CupEdit>), edited: &str, now: i64) -> (u16, &'static str) {
        let Some(cup) = self.cups.get_mut(id).filter(|cup| !cup.retired) else { return (404, "unknown_tournament") };
        if cup.deleted || !cup.open(now) {
            return (409, "tournament_closed");
        }
        // A shortened end gives a minute's notice (every function's catalog knows it first).
        // Nor when the open instance ends within that minute (the archive may be ending it).
        if end <= now || (end < cup.end && end < now + 60) || (cup.end < now + 60 && end != cup.end) || end - cup.start > 1 << 23 {
            return (400, "invalid_tournament");
        }
        match more {
            Some(CupEdit::Seats(seats)) if usize::from(seats) < cup.seats => return (400, "invalid_tournament"),
            Some(CupEdit::Seats(seats)) => cup.seats = usize::from(seats),
            Some(CupEdit::Prizes) => cup.prizes = 1,
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
        if !cup.open(now) {
            return Err(refused(409, "tournament_closed"));
        }
        if let Some((first, left)) = cup.grants.get(grant) {
            return if first == payload { Ok((*left, true)) } else { Err(refused(409, "grant_conflict")) };
        }
        if banned {
            return Err(refused(422, "user_banned"));
        }
        let granted = cup.granted.entry(user.to_owned()).or_default();
        *granted += add;
        let left = (ATTEMPTS + *granted).saturating_sub(cup.entries.get(user).copied().unwrap_or(0));
        cup.grants.insert(grant.to_owned(), (payload.to_owned(), left));
        Ok((left, false))
    }

    /// The archive's run at `now`: every instance that ended is stored as it stands.
    pub fn archive(&mut self, now: i64) {
        for cup in self.cups.values_mut().filter(|cup| cup.end <= now && cup.results.is_none()) {
            cup.results = Some(cup.ranking());
        }
    }
}
