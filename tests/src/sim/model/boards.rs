//! Runtime boards in the model, written from docs/runtime-boards.md: score boards (`all`
//! period, best or latest score kept) created by an admin's PUT (the same definition again is
//! a 200, another one or a name once deleted a 409), written to until deleted (from then on
//! every write is a 409 `board_ended` and bans skip it), read until the archive's run finished
//! their end (the name then unknown to reads). A creation carries the bans made before it.

use std::collections::{BTreeMap, HashMap};

use super::{Expect, MARKER_DAYS, day_number, refused};

#[derive(Debug, Clone)]
pub struct Board {
    /// The definition as sent (JSON).
    pub definition: String,
    /// `keep = "latest"`: every submission replaces the kept score (else the best is kept).
    latest: bool,
    pub deleted: bool,
    /// Deleted and its end done by the archive's run.
    pub retired: bool,
    /// user -> (kept score, when it was kept).
    board: HashMap<String, (i64, i64)>,
    /// event id -> (payload, day number of the first delivery, its answer).
    markers: HashMap<String, (String, i64, Expect)>,
}

/// docs/boards.md: an all-time score board at the default `max_score` tells who reached an
/// equal score first to 256-second steps counted from 2020-01-01T00:00:00Z.
const ALL_TIME_STEP_SECS: i64 = 256;
const STEPS_FROM: i64 = 1_577_836_800;

impl Board {
    /// Best first: a higher score, then who kept it first to the 256-second step, then (the
    /// same step) the greater id.
    pub fn ranking(&self) -> Vec<(String, i64)> {
        let stepped =
            self.board.iter().map(|(user, &(score, at))| (user.clone(), (score, (at - STEPS_FROM).div_euclid(ALL_TIME_STEP_SECS))));
        super::cups::best_first(&stepped.collect())
    }
}

/// A score submission: its id, its payload as sent, its player and score.
pub struct Submission<'a> {
    pub id: &'a str,
    pub payload: &'a str,
    pub user: &'a str,
    pub score: i64,
}

#[derive(Debug, Clone, Default)]
pub struct Boards {
    pub boards: BTreeMap<String, Board>,
}

impl Boards {
    /// `PUT /v1/admin/boards/{name}`: 201, 200 (this very definition, not deleted) or 409.
    pub fn put(&mut self, name: &str, definition: &str, latest: bool) -> u16 {
        match self.boards.get(name) {
            Some(board) if board.definition == definition && !board.deleted => 200,
            Some(_) => 409,
            None => {
                let board = Board {
                    definition: definition.to_owned(),
                    latest,
                    deleted: false,
                    retired: false,
                    board: HashMap::new(),
                    markers: HashMap::new(),
                };
                self.boards.insert(name.to_owned(), board);
                201
            }
        }
    }

    /// `POST /v1/boards/{name}/scores` at `now`.
    pub fn submit(&mut self, name: &str, submission: Submission<'_>, banned: bool, now: i64) -> Expect {
        let Submission { id, payload, user, score } = submission;
        let Some(board) = self.boards.get_mut(name) else { return refused(404, "unknown_board") };
        if board.deleted {
            return refused(409, "board_ended");
        }
        if let Some((first, day, answer)) = board.markers.get(id)
            && day_number(now) - day <= MARKER_DAYS
        {
            if first != payload {
                return refused(409, "idempotency_conflict");
            }
            return match answer.clone() {
                Expect::Took { delta, reason } => Expect::Duplicate { delta, reason },
                other => other,
            };
        }
        if banned {
            return refused(422, "user_banned");
        }
        let applied = board.latest || board.board.get(user).is_none_or(|&(kept, _)| score > kept);
        // An equal score changes nothing, `latest` too: the member keeps the time they first
        // reached it (docs/boards.md, "Changed, per period").
        if applied && board.board.get(user).is_none_or(|&(kept, _)| kept != score) {
            board.board.insert(user.to_owned(), (score, now));
        }
        let answer = Expect::Took { delta: i64::from(applied), reason: (!applied).then(|| "not_better".to_owned()) };
        board.markers.insert(id.to_owned(), (payload.to_owned(), day_number(now), answer.clone()));
        answer
    }

    /// `DELETE /v1/admin/boards/{name}`: 202 (the same again), 404 for a name never created or
    /// whose end is done (its definition forgotten).
    pub fn delete(&mut self, name: &str) -> u16 {
        match self.boards.get_mut(name).filter(|board| !board.retired) {
            Some(board) => {
                board.deleted = true;
                202
            }
            None => 404,
        }
    }

    /// The archive's run finished deleted board `name`'s end; an error when the model says it
    /// could not have.
    pub fn retire(&mut self, name: &str) -> Result<(), String> {
        let board = self.boards.get_mut(name).ok_or_else(|| format!("{name}'s end done: no such board"))?;
        if !board.deleted {
            return Err(format!("{name}'s end done while not deleted"));
        }
        board.retired = true;
        Ok(())
    }

    /// A ban: off every board not deleted.
    pub fn ban(&mut self, user: &str) {
        for board in self.boards.values_mut().filter(|board| !board.deleted) {
            board.board.remove(user);
        }
    }
}
