//! Voids in the model (docs/journal.md#void): an admin takes away, from the forum's live
//! periods, what one user's events in `[from, to)` earned and still hold. Written from the docs:
//! each give keeps what it still contributes to each period it landed in; a take-back ends its
//! give, a ban empties what it removed, a correction's lowering takes from the oldest gives
//! first, and a void takes what is left of the gives in its window (never more than a period
//! holds), setting their likes' ledger entries to nothing (the like stays counted that day).

use super::{Expect, Model, refused};

/// A give of the forum's, while it still contributes something.
#[derive(Debug, Clone)]
pub(super) struct Give {
    user: String,
    /// When it counts (its event's time, whole seconds).
    time: i64,
    /// The like's ledger entry (day, target); `None` for a comment.
    entry: Option<(String, String)>,
    /// What it still contributes, per period it landed in ("day:…", "season:…", "all").
    left: Vec<(String, i64)>,
}

impl Model {
    /// A give of `points` applied to `periods` (called by `event`).
    pub(super) fn gave(&mut self, user: &str, time: i64, entry: Option<(String, String)>, periods: &[String], points: i64) {
        let left = periods.iter().map(|period| (period.clone(), points)).collect();
        self.gives.push(Give { user: user.to_owned(), time, entry, left });
    }

    /// An applied take-back of the like on `entry`, which changed each period by `taken`: its
    /// give contributes nothing more. Where it took more than that give still held (a lowering
    /// took from it first), the points came from the user's other gives: the oldest hold that
    /// much less (docs/journal.md#void).
    pub(super) fn took_back(&mut self, user: &str, entry: &(String, String), taken: &[(String, i64)]) {
        let Some(at) = self.gives.iter().position(|give| give.user == user && give.entry.as_ref() == Some(entry)) else { return };
        let give = self.gives.remove(at);
        for (period, change) in taken {
            let held = give.left.iter().find(|(landed, _)| landed == period).map_or(0, |(_, left)| *left);
            if -change > held {
                self.lowered(user, period, Some(-change - held));
            }
        }
    }

    /// `period` lowered for `user` by `by` points (`None`: emptied), oldest gives first.
    pub(super) fn lowered(&mut self, user: &str, period: &str, by: Option<i64>) {
        let mut by = by.unwrap_or(i64::MAX);
        for give in self.gives.iter_mut().filter(|give| give.user == user) {
            for (landed, left) in &mut give.left {
                if landed == period && by > 0 {
                    let taken = (*left).min(by);
                    *left -= taken;
                    by -= taken;
                }
            }
        }
    }

    /// `POST …/users/{user}/void` `{from, to}` at `now`: each live period's change (the forum's
    /// periods, archived seasons left out), in the model's period order; or the refusal.
    pub fn void(&mut self, user: &str, from: i64, to: i64) -> Result<Vec<(String, i64)>, Expect> {
        if self.banned.contains(user) {
            return Err(refused(422, "user_banned"));
        }
        let voided = |give: &Give| give.user == user && from <= give.time && give.time < to;
        let mut amounts: Vec<(String, i64)> = Vec::new();
        for give in self.gives.iter().filter(|give| voided(give)) {
            for (period, left) in &give.left {
                match amounts.iter_mut().find(|(p, _)| p == period) {
                    Some((_, amount)) => *amount += left,
                    None => amounts.push((period.clone(), *left)),
                }
            }
        }
        let mut changes = Vec::new();
        for (period, amount) in amounts {
            let frozen = period.strip_prefix("season:").is_some_and(|season| self.archived.contains_key(season));
            if amount <= 0 || frozen {
                continue;
            }
            let members = self.forum.entry(period.clone()).or_default();
            let (held, reached) = members.get(user).copied().unwrap_or((0, 0));
            let taken = amount.min(held);
            if held - taken > 0 {
                members.insert(user.to_owned(), (held - taken, reached));
            } else {
                members.remove(user);
            }
            changes.push((period, -taken));
        }
        for give in self.gives.iter().filter(|give| voided(give)) {
            if let Some((day, target)) = &give.entry
                && let Some(given) = self.likes.get_mut(&(user.to_owned(), day.clone())).and_then(|ledger| ledger.get_mut(target))
            {
                *given = 0;
            }
        }
        self.gives.retain(|give| !voided(give));
        changes.sort();
        Ok(changes)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Expect, Model};

    #[test]
    fn a_void_takes_what_its_gives_still_hold_oldest_lowered_first_and_keeps_their_likes_counted() {
        let mut m = Model::default();
        let t = 1_795_312_800;
        m.event("l1", "l1", "ann", "like", "a", true, t, t);
        m.event("c1", "c1", "ann", "comment", "", true, t + 1, t + 1);
        m.event("c2", "c2", "ann", "comment", "", true, t + 20, t + 20);
        // 8 points; the correction lowers the like (2) then the first comment (1 of 3).
        assert_eq!(m.correct("k1", "ann", -3, t + 30), Expect::Took { delta: -3, reason: None });
        let day = format!("day:{}", super::super::day_of(t));
        let season = format!("season:{}", super::super::season_of(t));
        let took = m.void("ann", t, t + 10).unwrap();
        assert_eq!(took, vec![("all".to_owned(), -2), (day.clone(), -2), (season, -2)]);
        assert_eq!(m.forum_top("all"), [("ann".to_owned(), 3)]);
        assert_eq!(m.void("ann", t, t + 10).unwrap(), vec![], "nothing left to take");
        // The voided like stays counted that day; its take-back takes nothing.
        assert_eq!(
            m.event("l2", "l2", "ann", "like", "a", true, t + 40, t + 40),
            Expect::Took { delta: 0, reason: Some("already_counted".into()) }
        );
        assert_eq!(m.event("l3", "l3", "ann", "like", "a", false, t + 41, t + 41), Expect::Took { delta: 0, reason: None });
        m.ban("ann", t + 50);
        assert_eq!(m.void("ann", t, t + 60), Err(Expect::Refused { status: 422, code: "user_banned".into() }));
        m.unban("ann");
        assert_eq!(m.void("ann", t, t + 60).unwrap(), vec![], "the ban emptied what the gives held");
    }

    #[test]
    fn a_take_back_of_more_than_its_give_still_held_takes_the_rest_from_the_oldest_others() {
        let mut m = Model::default();
        let t = 1_795_312_800;
        m.event("l1", "l1", "bob", "like", "a", true, t, t);
        m.event("c1", "c1", "bob", "comment", "", true, t + 10, t + 10);
        // The correction takes the like's 2; the like's take-back then takes 2 of the comment's.
        m.correct("k1", "bob", -2, t + 20);
        m.event("l2", "l2", "bob", "like", "a", false, t + 30, t + 30);
        m.event("c2", "c2", "bob", "comment", "", true, t + 40, t + 40);
        assert_eq!(m.forum_top("all"), [("bob".to_owned(), 4)]);
        // The first comment holds 1 of the 4: the rest is the second's, never voided here.
        let took = m.void("bob", t + 5, t + 15).unwrap();
        assert_eq!(took.iter().find(|(p, _)| p == "all"), Some(&("all".to_owned(), -1)));
        assert_eq!(m.forum_top("all"), [("bob".to_owned(), 3)]);
    }
}
