//! The simulation's model: what Standings must hold and answer, as plain Rust data written from
//! the docs (docs/api.md, docs/boards.md, docs/concepts.md, docs/queue.md), sharing no code with
//! `shared/` — no rule, tie-break, period or key of the implementation is called here. Times are
//! whole Unix seconds; days are UTC dates (both simulated boards are in UTC).
//!
//! `forum` (a rule board, day, season and all-time periods, its seasons archived):
//! `comment` gives 3 points, every time; `like` gives 2 once per user, target and day, can be
//! taken back, at most 6 points a day. A season is a UTC calendar month (docs/archival.md);
//! an archive run takes each season 30 minutes past its end into the archive, whole.
//! `arcade` (a score board, day period): keeps each player's best score, highest first.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use chrono::DateTime;

mod arcade;
pub mod boards;
mod cup;
pub mod cups;
mod voids;

/// How long after a first delivery's day a retry is still recognised: that day and the next.
const MARKER_DAYS: i64 = 1;
/// A queue message that names no time counts when SQS took it, within this grace.
pub const GRACE_SECS: i64 = 15 * 60;
const COMMENT: i64 = 3;
const LIKE: i64 = 2;
const LIKE_CAP: i64 = 6;

/// "2026-11-22": the UTC date of `t`.
pub fn day_of(t: i64) -> String {
    DateTime::from_timestamp(t, 0).expect("a time in range").format("%Y-%m-%d").to_string()
}

/// "2026-11": the season (UTC month) of `t`.
pub fn season_of(t: i64) -> String {
    DateTime::from_timestamp(t, 0).expect("a time in range").format("%Y-%m").to_string()
}

/// When `season` ("2026-11") ends: the first second of the next month.
fn season_end(season: &str) -> i64 {
    let (year, month) = season.split_once('-').expect("YYYY-MM");
    let (year, month): (i32, u32) = (year.parse().expect("a year"), month.parse().expect("a month"));
    let (year, month) = if month == 12 { (year + 1, 1) } else { (year, month + 1) };
    chrono::NaiveDate::from_ymd_opt(year, month, 1).expect("a date").and_hms_opt(0, 0, 0).expect("midnight").and_utc().timestamp()
}

/// How long past its end a season waits for late events before an archive run takes it.
const ARCHIVE_GRACE_SECS: i64 = 30 * 60;
/// How long a season's live board lives past its end (docs/concepts.md).
const SEASON_BOARD_LIFE_SECS: i64 = 90 * 86_400;

pub fn day_number(t: i64) -> i64 {
    t.div_euclid(86_400)
}

/// The days a write could still land in at `now` (from the late-event grace ago to a minute
/// ahead): those a ban or a removal reaches.
fn live_days(now: i64) -> Vec<i64> {
    let mut days: Vec<i64> = [now - GRACE_SECS, now, now + 60].into_iter().map(day_number).collect();
    days.dedup();
    days
}

/// What a write should answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    /// 200, first delivery: the change it made (largest of any period), its reason when it
    /// changed nothing.
    Took {
        delta: i64,
        reason: Option<String>,
    },
    /// 200, a retry: the first delivery's answer.
    Duplicate {
        delta: i64,
        reason: Option<String>,
    },
    Refused {
        status: u16,
        code: String,
    },
}

/// A member's standing in one period: points and when they were reached.
type Members = HashMap<String, (i64, i64)>;

#[derive(Default, Clone)]
pub struct Model {
    /// "day:2026-11-22" / "all" -> members.
    forum: BTreeMap<String, Members>,
    /// "day:2026-11-22" -> members (kept score, when it was kept).
    arcade: BTreeMap<String, Members>,
    /// `guild` (a rule board sharded over four slots, its seasons archived): `post` gives 1
    /// point. All-time, then each live season ("2026-11") and each archived one.
    guild: Members,
    guild_seasons: BTreeMap<String, Members>,
    guild_archived: BTreeMap<String, Vec<(String, i64)>>,
    /// (user, day) -> target -> points a like gave.
    likes: HashMap<(String, String), HashMap<String, i64>>,
    /// (user, day) -> like points given that day (the cap's counter).
    cap_used: HashMap<(String, String), i64>,
    banned: HashSet<String>,
    /// event id -> (payload, day number of the first delivery, first answer).
    markers: HashMap<String, (String, i64, Expect)>,
    corrections: HashMap<String, (String, i64)>,
    /// Archived forum seasons: their final standings, best first.
    archived: BTreeMap<String, Vec<(String, i64)>>,
    /// user -> the day numbers they signed in (`sign_ins`).
    pub(super) signed: HashMap<String, BTreeSet<i64>>,
    /// sign-in id -> (first delivery, its answer).
    pub(super) sign_in_ids: HashMap<String, (i64, super::sign_ins::SignedIn)>,
    /// The arcade's daily league.
    pub(super) ladder: super::ladder::Ladder,
    /// Arcade correction id -> its payload.
    fixes: HashMap<String, String>,
    /// (arcade period, user) -> when the user reached their entry there, as a count of entries
    /// reached: who leads a tie (docs/notifications.md).
    arrived: HashMap<(String, String), u64>,
    arrivals: u64,
    /// The forum's gives that still contribute, in the order they were applied (`voids`).
    gives: Vec<voids::Give>,
    /// The tournaments (`cups`).
    pub(super) cups: cups::Cups,
    /// The runtime score boards (`rb0`, `rb1`).
    pub(super) boards: boards::Boards,
}

/// An admin's correction of a score board: the entry removed from every live period, or the
/// kept score of the current one set (docs/moderation.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fix {
    Remove,
    Set(i64),
}

fn refused(status: u16, code: &str) -> Expect {
    Expect::Refused { status, code: code.to_owned() }
}

impl Model {
    /// The marker of `id` seen at `now`: the first answer as a duplicate, a conflict, or
    /// nothing (never seen, or seen too long ago to be remembered).
    fn seen(&self, id: &str, payload: &str, now: i64) -> Option<Expect> {
        let (first, day, answer) = self.markers.get(id)?;
        if day_number(now) - day > MARKER_DAYS {
            return None;
        }
        if first != payload {
            return Some(refused(409, "idempotency_conflict"));
        }
        Some(match answer.clone() {
            Expect::Took { delta, reason } => Expect::Duplicate { delta, reason },
            other => other,
        })
    }

    /// A forum event (`comment`, or `like` given or taken back), delivered at `now`, happening
    /// at `at` (`now` over HTTP; when SQS took it, for an untimed queue message).
    #[allow(clippy::too_many_arguments)]
    pub fn event(&mut self, id: &str, payload: &str, user: &str, action: &str, target: &str, give: bool, now: i64, at: i64) -> Expect {
        if let Some(seen) = self.seen(id, payload, now) {
            return seen;
        }
        if self.banned.contains(user) {
            return refused(422, "user_banned");
        }
        if self.archived.contains_key(&season_of(at)) {
            return refused(422, "period_closed");
        }
        let day = day_of(at);
        let ledger_key = (user.to_owned(), day.clone());
        let (mut delta, mut reason) = (0, None);
        match (action, give) {
            ("comment", _) => delta = COMMENT,
            (_, true) => {
                if self.likes.get(&ledger_key).is_some_and(|l| l.contains_key(target)) {
                    reason = Some("already_counted".to_owned());
                } else {
                    let used = self.cap_used.get(&ledger_key).copied().unwrap_or(0);
                    delta = LIKE.min((LIKE_CAP - used).max(0));
                    if delta == 0 {
                        reason = Some("daily_cap".to_owned());
                    }
                }
            }
            (_, false) => match self.likes.get(&ledger_key).and_then(|l| l.get(target)) {
                Some(&given) => delta = -given,
                None => reason = Some("nothing_to_take_back".to_owned()),
            },
        }
        let mut largest: i64 = 0;
        if delta != 0 {
            let periods = [format!("day:{day}"), format!("season:{}", season_of(at)), "all".to_owned()];
            let entry = (action == "like").then(|| (day.clone(), target.to_owned()));
            if delta > 0 {
                self.gave(user, at, entry.clone(), &periods, delta);
            }
            let mut changes = Vec::new();
            if action == "like" {
                let ledger = self.likes.entry(ledger_key.clone()).or_default();
                if give {
                    ledger.insert(target.to_owned(), delta);
                } else {
                    ledger.remove(target);
                }
                *self.cap_used.entry(ledger_key).or_default() += delta;
            }
            for period in periods {
                let members = self.forum.entry(period.clone()).or_default();
                let (held, reached) = members.get(user).copied().unwrap_or((0, 0));
                let points = (held + delta).max(0);
                changes.push((period, points - held));
                // A give reached the total when it happened, never earlier than the total it
                // adds to; a take-back keeps the time (they held at least that much since).
                let reached = if give { reached.max(at) } else { reached };
                if (points - held).abs() > largest.abs() {
                    largest = points - held;
                }
                if points > 0 {
                    members.insert(user.to_owned(), (points, reached));
                } else {
                    members.remove(user);
                }
            }
            if let (true, Some(entry)) = (delta < 0, &entry) {
                self.took_back(user, entry, &changes);
            }
        }
        let answer = Expect::Took { delta: largest, reason };
        self.markers.insert(id.to_owned(), (payload.to_owned(), day_number(now), answer.clone()));
        answer
    }

    /// Whether the forum holds points the model applied, live or archived: a board without any
    /// may come back from a loss as new (nothing to take it for lost by).
    pub fn forum_has_points(&self) -> bool {
        self.forum.values().any(|members| !members.is_empty()) || !self.archived.is_empty()
    }

    pub fn is_banned(&self, user: &str) -> bool {
        self.banned.contains(user)
    }

    /// `points` given to `user` on the forum's `periods` at `now` (a sign-in's).
    pub(super) fn give_forum(&mut self, user: &str, periods: &[String], points: i64, now: i64) {
        for period in periods {
            let members = self.forum.entry(period.clone()).or_default();
            let (held, reached) = members.get(user).copied().unwrap_or((0, 0));
            members.insert(user.to_owned(), (held + points, reached.max(now)));
        }
    }

    /// A post to the guild at `now`.
    pub fn post(&mut self, id: &str, payload: &str, user: &str, now: i64) -> Expect {
        if let Some(seen) = self.seen(id, payload, now) {
            return seen;
        }
        if self.banned.contains(user) {
            return refused(422, "user_banned");
        }
        for members in [&mut self.guild, self.guild_seasons.entry(season_of(now)).or_default()] {
            let (points, reached) = members.get(user).copied().unwrap_or((0, 0));
            members.insert(user.to_owned(), (points + 1, reached.max(now)));
        }
        let answer = Expect::Took { delta: 1, reason: None };
        self.markers.insert(id.to_owned(), (payload.to_owned(), day_number(now), answer.clone()));
        answer
    }

    pub fn guild_points(&self, user: &str) -> i64 {
        self.guild.get(user).map_or(0, |&(points, _)| points)
    }

    pub fn guild_top(&self) -> Vec<(String, i64)> {
        ranked(Some(&self.guild))
    }

    /// A guild season's standings, live or archived, best first.
    pub fn guild_season_top(&self, season: &str) -> Vec<(String, i64)> {
        match self.guild_archived.get(season) {
            Some(standings) => standings.clone(),
            None => ranked(self.guild_seasons.get(season)),
        }
    }

    pub fn banned(&self) -> &HashSet<String> {
        &self.banned
    }

    /// A ban: the user leaves every period a write could still land in, and writes nothing more.
    pub fn ban(&mut self, user: &str, now: i64) {
        self.banned.insert(user.to_owned());
        self.cups.ban(user);
        self.boards.ban(user);
        self.ladder.ban(user, &live_days(now));
        for at in [now - GRACE_SECS, now, now + 60] {
            let period = format!("day:{}", day_of(at));
            if let Some(members) = self.arcade.get_mut(&period) {
                members.remove(user);
            }
            if self.forum.get_mut(&period).is_some_and(|members| members.remove(user).is_some()) {
                self.lowered(user, &period, None);
            }
            let season = format!("season:{}", season_of(at));
            if self.forum.get_mut(&season).is_some_and(|members| members.remove(user).is_some()) {
                self.lowered(user, &season, None);
            }
            if let Some(members) = self.guild_seasons.get_mut(&season_of(at)) {
                members.remove(user);
            }
        }
        if self.forum.get_mut("all").is_some_and(|members| members.remove(user).is_some()) {
            self.lowered(user, "all", None);
        }
        self.guild.remove(user);
    }

    pub fn unban(&mut self, user: &str) {
        self.banned.remove(user);
    }

    /// An admin correction of `delta` points to the forum's current periods.
    pub fn correct(&mut self, id: &str, user: &str, delta: i64, now: i64) -> Expect {
        if let Some(first) = self.corrections.get(id) {
            let same = *first == (user.to_owned(), delta);
            return if same { Expect::Duplicate { delta, reason: None } } else { refused(409, "idempotency_conflict") };
        }
        if self.banned.contains(user) {
            return refused(422, "user_banned");
        }
        let periods = [format!("day:{}", day_of(now)), format!("season:{}", season_of(now)), "all".to_owned()];
        let held: Vec<(i64, i64)> =
            periods.iter().map(|p| self.forum.get(p).and_then(|m| m.get(user)).copied().unwrap_or((0, 0))).collect();
        if held.iter().any(|(points, _)| points + delta < 0) {
            return refused(422, "out_of_range");
        }
        for (period, (points, reached)) in periods.into_iter().zip(held) {
            if delta < 0 {
                self.lowered(user, &period, Some(-delta));
            }
            let members = self.forum.entry(period).or_default();
            let reached = if delta > 0 { now } else { reached };
            if points + delta > 0 {
                members.insert(user.to_owned(), (points + delta, reached));
            } else {
                members.remove(user);
            }
        }
        self.corrections.insert(id.to_owned(), (user.to_owned(), delta));
        Expect::Took { delta, reason: None }
    }

    /// A forum period best first: (user, points). Equal points rank by who reached them first,
    /// then (the same second) by user id, highest first (Redis's order of equal scores).
    pub fn forum_top(&self, period: &str) -> Vec<(String, i64)> {
        ranked(self.forum.get(period))
    }

    /// A forum season's standings, live or archived, best first.
    pub fn season_top(&self, season: &str) -> Vec<(String, i64)> {
        match self.archived.get(season) {
            Some(archived) => archived.clone(),
            None => ranked(self.forum.get(&format!("season:{season}"))),
        }
    }

    pub fn is_archived(&self, season: &str) -> bool {
        self.archived.contains_key(season)
    }

    /// Every season a write or the clock reached since `start`, oldest first.
    pub fn seasons(&self, start: i64, now: i64) -> Vec<String> {
        let mut seasons = vec![season_of(start)];
        while season_end(seasons.last().expect("one")) <= now {
            let next = season_of(season_end(seasons.last().expect("one")));
            seasons.push(next);
        }
        seasons
    }

    /// Seasons due for the archive at `now` (30 minutes past their end) and not archived yet,
    /// back to those whose live board could still exist (90 days past their end): the ones
    /// before `start` nobody played, archived empty.
    pub fn due(&self, start: i64, now: i64) -> Vec<String> {
        self.seasons(start.min(now - SEASON_BOARD_LIFE_SECS), now)
            .into_iter()
            .filter(|s| season_end(s) + SEASON_BOARD_LIFE_SECS > now)
            .filter(|s| season_end(s) + ARCHIVE_GRACE_SECS <= now && !self.archived.contains_key(s))
            .collect()
    }

    /// An archive run at `now`: every due season goes into the archive whole. (On a lost
    /// journaled board a run archives nothing: docs/archival.md.)
    pub fn archive(&mut self, start: i64, now: i64) {
        for season in self.due(start, now) {
            let standings = self.season_top(&season);
            self.forum.remove(&format!("season:{season}"));
            self.archived.insert(season.clone(), standings);
            let standings = self.guild_season_top(&season);
            self.guild_seasons.remove(&season);
            self.guild_archived.insert(season, standings);
        }
    }
}

/// Best first: more points, then reached earlier, then (equal in both) the greater user id, as
/// Redis orders equal scores.
fn standing(members: &Members) -> Vec<(String, i64, i64)> {
    let mut list: Vec<(String, i64, i64)> = members.iter().map(|(u, &(p, t))| (u.clone(), p, t)).collect();
    list.sort_by(|a, b| b.1.cmp(&a.1).then(a.2.cmp(&b.2)).then(b.0.cmp(&a.0)));
    list
}

fn ranked(members: Option<&Members>) -> Vec<(String, i64)> {
    members.map(standing).unwrap_or_default().into_iter().map(|(u, p, _)| (u, p)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_like_is_capped_taken_back_once_and_an_older_message_never_redates_a_total() {
        let mut m = Model::default();
        let t = 1_795_312_800;
        for (i, target) in ["a", "b", "c", "d"].iter().enumerate() {
            m.event(&format!("l{i}"), target, "ann", "like", target, true, t, t);
        }
        assert_eq!(m.forum_top("all"), [("ann".to_owned(), 6)]);
        assert_eq!(
            m.event("t1", "x", "ann", "like", "d", false, t, t),
            Expect::Took { delta: 0, reason: Some("nothing_to_take_back".into()) }
        );
        assert_eq!(m.event("t2", "y", "ann", "like", "a", false, t, t), Expect::Took { delta: -2, reason: None });
        m.event("c1", "c1", "bob", "comment", "", true, t + 30, t + 30);
        m.event("c2", "c2", "bob", "comment", "", true, t + 31, t + 10);
        m.event("c3", "c3", "cid", "comment", "", true, t + 31, t + 20);
        m.event("c4", "c4", "cid", "comment", "", true, t + 31, t + 20);
        assert_eq!(m.forum_top("all")[..2], [("cid".to_owned(), 6), ("bob".to_owned(), 6)]);
    }
}
