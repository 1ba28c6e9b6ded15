//! The arcade in the model: a score board (day period) keeping each player's best score, an
//! admin's corrections of it, and who reached each entry when (a tie's order, for
//! notifications).

use std::collections::BTreeMap;

use super::{Expect, Fix, Model, day_number, day_of, live_days, ranked, refused, standing};

impl Model {
    /// A score submitted to `arcade` at `now`.
    pub fn score(&mut self, id: &str, payload: &str, user: &str, score: i64, now: i64) -> Expect {
        if let Some(seen) = self.seen(id, payload, now) {
            return seen;
        }
        if self.banned.contains(user) {
            return refused(422, "user_banned");
        }
        let period = format!("day:{}", day_of(now));
        let members = self.arcade.entry(period.clone()).or_default();
        let better = members.get(user).is_none_or(|&(kept, _)| score > kept);
        if better {
            members.insert(user.to_owned(), (score, now));
            self.arrive(&period, user);
        }
        // On the day's board now: their first write of the day joins its league.
        self.ladder.played(user, day_number(now), now * 1000);
        let answer = Expect::Took { delta: i64::from(better), reason: (!better).then(|| "not_better".to_owned()) };
        self.markers.insert(id.to_owned(), (payload.to_owned(), day_number(now), answer.clone()));
        answer
    }

    /// The arcade correction `id` of `user` at `now`.
    pub fn fix(&mut self, id: &str, payload: &str, user: &str, fix: Fix, now: i64) -> Expect {
        if let Some(first) = self.fixes.get(id) {
            return if first == payload { Expect::Duplicate { delta: 0, reason: None } } else { refused(409, "idempotency_conflict") };
        }
        if self.banned.contains(user) {
            return refused(422, "user_banned");
        }
        match fix {
            Fix::Remove => {
                for day in live_days(now) {
                    if let Some(members) = self.arcade.get_mut(&format!("day:{}", day_of(day * 86_400))) {
                        members.remove(user);
                    }
                }
            }
            Fix::Set(score) => {
                let period = format!("day:{}", day_of(now));
                let members = self.arcade.entry(period.clone()).or_default();
                // A better score counts as reached now; a worse one keeps the reached-at.
                let reached = members.get(user).filter(|&&(kept, _)| score <= kept).map_or(now, |&(_, t)| t);
                if members.insert(user.to_owned(), (score, reached)) != Some((score, reached)) {
                    self.arrive(&period, user);
                }
                self.ladder.played(user, day_number(now), now * 1000);
            }
        }
        self.fixes.insert(id.to_owned(), payload.to_owned());
        Expect::Took { delta: 0, reason: None }
    }

    /// `user` reached a new entry on the arcade's `period` now.
    fn arrive(&mut self, period: &str, user: &str) {
        self.arrivals += 1;
        self.arrived.insert((period.to_owned(), user.to_owned()), self.arrivals);
    }

    /// The arcade's day `day` (a day number) best first: (user, kept score, when it was kept).
    pub fn arcade_day(&self, day: i64) -> crate::sim::crossings::Standing {
        self.arcade.get(&format!("day:{}", day_of(day * 86_400))).map(standing).unwrap_or_default()
    }

    /// Every arcade day ("day:2026-11-22") best first, as notifications rank it: (user, kept
    /// score, when it was kept), a tie (one score, one second) in the order its users reached it.
    pub fn arcade_standings(&self) -> BTreeMap<String, Vec<(String, i64, i64)>> {
        let arrived = |period: &String, user: &String| self.arrived.get(&(period.clone(), user.clone())).copied().unwrap_or(0);
        self.arcade
            .iter()
            .map(|(period, members)| {
                let mut list = standing(members);
                list.sort_by(|a, b| b.1.cmp(&a.1).then(a.2.cmp(&b.2)).then(arrived(period, &a.0).cmp(&arrived(period, &b.0))));
                (period.clone(), list)
            })
            .collect()
    }

    /// An arcade day best first: (user, kept score).
    pub fn arcade_top(&self, period: &str) -> Vec<(String, i64)> {
        ranked(self.arcade.get(period))
    }
}
