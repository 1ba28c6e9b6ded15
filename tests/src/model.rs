//! A plain-Rust model of the scoring semantics, for the model-based test
//! (tests/integration/model.rs): what every board should hold, and what every answer should
//! say, after any sequence of events, retries, bans and corrections on an injected clock.
//!
//! It knows the rules the way the README states them, nothing of Lua or Redis: rules and
//! scopes, per-day ledgers, daily caps, sliding-window rate limits, take-backs (never below
//! zero, reversible boards only), bans, idempotent corrections, the event window (checked only
//! for ids not seen before), fan-out across boards, periods chosen by `occurred_at`, and
//! "first to reach" by the server's clock (a give is reached now, a decrease keeps the time).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use chrono::{DateTime, Duration, Utc};
use standings::domain::config::{Config, Scope};
use standings::domain::period::{Period, PeriodKind};

pub const GRACE_SECS: i64 = 15 * 60;
pub const MAX_FUTURE_SECS: i64 = 60;

/// The model's two boards: `win` feeds both (2 points on `alpha`, reversible and capped at 6 a
/// day; 3 on `beta`, not reversible and at most 2 per user per 10 minutes); `solo` feeds only
/// `alpha`, `lock` only `beta` (once per target on the whole board), `once` only `alpha` (once
/// per user and target, ever).
pub fn config() -> Config {
    Config::parse(
        r#"
[[boards]]
name = "alpha"
kind = "cumulative"
timezone = "UTC"
periods = ["day", "all"]
top = 10
rules = [
  { action = "win", points = 2, scope = "user_target_day", reversible = true, daily_cap = 6 },
  { action = "solo", points = 1, scope = "none" },
  { action = "once", points = 5, scope = "user_target" },
]

[[boards]]
name = "beta"
kind = "cumulative"
timezone = "UTC"
periods = ["all"]
top = 10
rules = [
  { action = "win", points = 3, scope = "user_target_day", rate_limit = { max = 2, per_secs = 600 } },
  { action = "lock", points = 4, scope = "target" },
]
"#,
    )
    .expect("the model's configuration is valid")
}

/// An event as sent: everything its fingerprint covers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SentEvent {
    pub event_id: String,
    pub user: String,
    pub action: String,
    pub target: String,
    pub active: bool,
    pub occurred_at: Option<DateTime<Utc>>,
}

/// What one board answered for an event (the parts the test compares).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoardAnswer {
    pub board: String,
    pub applied: bool,
    pub delta: i64,
    pub reason: Option<String>,
}

/// The answer to a request: a status, and for a 200 on an event, whether it was a duplicate
/// and what each board did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Event { duplicate: bool, boards: Vec<BoardAnswer> },
    Refused { status: u16, code: String },
    Ok,
}

/// A member's standing: whole points and when they were reached (seconds).
pub type Standing = (i64, i64);
/// A period's members best first: (member, points, reached-at).
pub type Ranked = Vec<(String, i64, i64)>;

#[derive(Default)]
struct BoardState {
    /// period key ("day:2026-11-22", "all:all") -> member -> standing
    periods: BTreeMap<String, BTreeMap<String, Standing>>,
    /// (user, day) -> field -> points given; also holds "cap|<action>" counters
    day_ledgers: HashMap<(String, String), HashMap<String, i64>>,
    lifetime: HashMap<String, HashMap<String, i64>>,
    targets: HashMap<String, i64>,
    rate_logs: HashMap<(String, String), Vec<i64>>,
    banned: BTreeSet<String>,
    /// event id -> (payload, first answer)
    markers: HashMap<String, (SentEvent, BoardAnswer)>,
    corrections: HashMap<String, (String, i64)>,
}

pub struct Model {
    config: Config,
    boards: BTreeMap<String, BoardState>,
}

impl Default for Model {
    fn default() -> Self {
        Self::new()
    }
}

enum BoardStep {
    Took { duplicate: bool, answer: BoardAnswer },
    Refused { status: u16, code: &'static str },
}

impl Model {
    pub fn new() -> Self {
        let config = config();
        let boards = config.boards().iter().map(|b| (b.name.clone(), BoardState::default())).collect();
        Self { config, boards }
    }

    /// `POST /v1/events` at `now`.
    pub fn event(&mut self, event: &SentEvent, now: DateTime<Utc>) -> Answer {
        let occurred_at = event.occurred_at.unwrap_or(now);
        let outside = if occurred_at < now - Duration::seconds(GRACE_SECS) {
            Some("too_late")
        } else if occurred_at > now + Duration::seconds(MAX_FUTURE_SECS) {
            Some("in_future")
        } else {
            None
        };
        let lands_at = if outside.is_some() { now } else { occurred_at };
        let feeding: Vec<_> =
            self.config.boards_for_action(&event.action).map(|(b, r)| (b.name.clone(), r.clone(), b.periods.clone())).collect();
        if !event.active && feeding.iter().all(|(_, rule, _)| !rule.reversible) {
            return Answer::Refused { status: 422, code: "not_reversible".into() };
        }
        let mut steps = Vec::new();
        for (name, rule, kinds) in feeding {
            let state = self.boards.get_mut(&name).expect("a configured board");
            steps.push((name.clone(), board_step(state, &name, &rule, &kinds, event, outside, lands_at, now)));
        }
        if let Some((_, BoardStep::Refused { status, code })) =
            steps.iter().find(|_| steps.iter().all(|(_, s)| matches!(s, BoardStep::Refused { .. })))
        {
            return Answer::Refused { status: *status, code: (*code).into() };
        }
        let mut duplicate = true;
        let boards = steps
            .into_iter()
            .map(|(board, step)| match step {
                BoardStep::Took { duplicate: seen, answer } => {
                    duplicate &= seen;
                    answer
                }
                BoardStep::Refused { code, .. } => BoardAnswer { board, applied: false, delta: 0, reason: Some(code.into()) },
            })
            .collect();
        Answer::Event { duplicate, boards }
    }

    /// `POST /v1/admin/users/{user}/ban`: guarded out of every board, removed from the periods
    /// an event could still land in.
    pub fn ban(&mut self, user: &str, now: DateTime<Utc>) -> Answer {
        for board in self.config.boards() {
            let state = self.boards.get_mut(&board.name).expect("a configured board");
            state.banned.insert(user.to_owned());
            for at in [now - Duration::seconds(GRACE_SECS), now, now + Duration::seconds(MAX_FUTURE_SECS)] {
                for &kind in &board.periods {
                    if let Some(members) = state.periods.get_mut(&period_key(kind, at)) {
                        members.remove(user);
                    }
                }
            }
        }
        Answer::Ok
    }

    pub fn unban(&mut self, user: &str) -> Answer {
        for state in self.boards.values_mut() {
            state.banned.remove(user);
        }
        Answer::Ok
    }

    /// `POST /v1/admin/boards/{board}/users/{user}/corrections` on the current periods.
    pub fn correct(&mut self, board: &str, user: &str, delta: i64, correction_id: &str, now: DateTime<Utc>) -> Answer {
        let kinds = self.config.board(board).expect("a configured board").periods.clone();
        let state = self.boards.get_mut(board).expect("a configured board");
        if let Some(first) = state.corrections.get(correction_id) {
            return if *first == (user.to_owned(), delta) {
                Answer::Ok
            } else {
                Answer::Refused { status: 409, code: "idempotency_conflict".into() }
            };
        }
        if state.banned.contains(user) {
            return Answer::Refused { status: 422, code: "user_banned".into() };
        }
        let keys: Vec<String> = kinds.iter().map(|&kind| period_key(kind, now)).collect();
        let held: Vec<Standing> = keys.iter().map(|key| standing(state, key, user)).collect();
        if held.iter().any(|(points, _)| points + delta < 0) {
            return Answer::Refused { status: 422, code: "out_of_range".into() };
        }
        for (key, (points, reached)) in keys.iter().zip(held) {
            let reached = if delta > 0 { now.timestamp() } else { reached };
            set(state, key, user, points + delta, reached);
        }
        state.corrections.insert(correction_id.to_owned(), (user.to_owned(), delta));
        Answer::Ok
    }

    /// Every period of `board` the model holds, each best first: (member, points, reached-at).
    pub fn boards(&self) -> BTreeMap<(String, String), Ranked> {
        let mut out = BTreeMap::new();
        for (board, state) in &self.boards {
            for (key, members) in &state.periods {
                let mut ranked: Vec<_> = members.iter().map(|(m, &(p, t))| (m.clone(), p, t)).collect();
                // Redis orders equal composites by member, highest first (ZREVRANGE).
                ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.2.cmp(&b.2)).then(b.0.cmp(&a.0)));
                out.insert((board.clone(), key.clone()), ranked);
            }
        }
        out
    }
}

/// "day:2026-11-22", "all:all": a period of a UTC board.
pub fn period_key(kind: PeriodKind, at: DateTime<Utc>) -> String {
    let period = Period::containing(kind, at, chrono_tz::UTC);
    format!("{}:{}", kind.as_str(), period.id)
}

fn standing(state: &BoardState, key: &str, user: &str) -> Standing {
    state.periods.get(key).and_then(|m| m.get(user)).copied().unwrap_or((0, 0))
}

fn set(state: &mut BoardState, key: &str, user: &str, points: i64, reached: i64) {
    let members = state.periods.entry(key.to_owned()).or_default();
    if points > 0 {
        members.insert(user.to_owned(), (points, reached));
    } else {
        members.remove(user);
    }
}

#[allow(clippy::too_many_arguments)]
fn board_step(
    state: &mut BoardState,
    board: &str,
    rule: &standings::domain::config::Rule,
    kinds: &[PeriodKind],
    event: &SentEvent,
    outside: Option<&'static str>,
    lands_at: DateTime<Utc>,
    now: DateTime<Utc>,
) -> BoardStep {
    if !event.active && !rule.reversible {
        return BoardStep::Refused { status: 422, code: "not_reversible" };
    }
    if let Some((payload, answer)) = state.markers.get(&event.event_id) {
        return if payload == event {
            BoardStep::Took { duplicate: true, answer: answer.clone() }
        } else {
            BoardStep::Refused { status: 409, code: "idempotency_conflict" }
        };
    }
    if let Some(code) = outside {
        return BoardStep::Refused { status: 422, code };
    }
    if state.banned.contains(&event.user) {
        return BoardStep::Refused { status: 422, code: "user_banned" };
    }
    let now_ms = now.timestamp_millis();
    let log_key = (event.user.clone(), rule.action.clone());
    if let Some(limit) = rule.rate_limit {
        let window = i64::from(limit.per_secs) * 1000;
        let recent = state.rate_logs.get(&log_key).map_or(0, |log| log.iter().filter(|&&t| t > now_ms - window).count());
        if recent >= limit.max as usize {
            return BoardStep::Refused { status: 429, code: "rate_limited" };
        }
    }
    let day = period_key(PeriodKind::Day, lands_at);
    let field = format!("{}|{}", rule.action, event.target);
    let ledger: Option<&mut HashMap<String, i64>> = match rule.scope {
        Scope::UserTargetDay => Some(state.day_ledgers.entry((event.user.clone(), day.clone())).or_default()),
        Scope::UserTarget => Some(state.lifetime.entry(event.user.clone()).or_default()),
        Scope::Target => Some(&mut state.targets),
        Scope::None => None,
    };
    let (mut delta, mut reason) = (0, None);
    if event.active {
        if ledger.as_ref().is_some_and(|l| l.contains_key(&field)) {
            reason = Some("already_counted".to_owned());
        } else {
            delta = rule.points;
        }
    } else {
        match ledger.as_ref().and_then(|l| l.get(&field).copied()) {
            Some(points) => delta = -points,
            None => reason = Some("nothing_to_take_back".to_owned()),
        }
    }
    if event.active
        && delta > 0
        && let Some(cap) = rule.daily_cap
    {
        let used = state
            .day_ledgers
            .get(&(event.user.clone(), day.clone()))
            .and_then(|l| l.get(&format!("cap|{}", rule.action)))
            .copied()
            .unwrap_or(0);
        let room = (cap - used).max(0);
        if room < delta {
            delta = room;
            if delta == 0 {
                reason = Some("daily_cap".to_owned());
            }
        }
    }
    let mut largest: i64 = 0;
    if delta != 0 {
        let ledger = match rule.scope {
            Scope::UserTargetDay => Some(state.day_ledgers.entry((event.user.clone(), day.clone())).or_default()),
            Scope::UserTarget => Some(state.lifetime.entry(event.user.clone()).or_default()),
            Scope::Target => Some(&mut state.targets),
            Scope::None => None,
        };
        if let Some(ledger) = ledger {
            if event.active {
                ledger.insert(field.clone(), delta);
            } else {
                ledger.remove(&field);
            }
        }
        if rule.daily_cap.is_some() {
            *state.day_ledgers.entry((event.user.clone(), day.clone())).or_default().entry(format!("cap|{}", rule.action)).or_default() +=
                delta;
        }
        for &kind in kinds {
            let key = period_key(kind, lands_at);
            let (held, reached) = standing(state, &key, &event.user);
            let points = (held + delta).max(0);
            let change = points - held;
            if change.abs() > largest.abs() {
                largest = change;
            }
            let reached = if event.active { now.timestamp() } else { reached };
            if change != 0 || points == 0 {
                set(state, &key, &event.user, points, reached);
            }
        }
    }
    let answer = BoardAnswer { board: board.to_owned(), applied: delta != 0, delta: largest, reason };
    state.markers.insert(event.event_id.clone(), (event.clone(), answer.clone()));
    if rule.rate_limit.is_some() {
        state.rate_logs.entry(log_key).or_default().push(now_ms);
    }
    BoardStep::Took { duplicate: false, answer }
}
