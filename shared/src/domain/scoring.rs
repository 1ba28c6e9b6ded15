//! Scoring: what one event means for each board it feeds. Pure; time is passed in.
//!
//! The plan says how many points, which ledger remembers the award (the rule's idempotency
//! scope), which cap applies, which periods the event lands in (by `occurred_at` in the
//! board's timezone) and the tie-break time (the server's `now`, never `occurred_at`: a client
//! cannot claim to have got somewhere first). The store applies a plan atomically.
//!
//! Two refusals depend on the store and are left to the script: an `occurred_at` outside the
//! event window refuses only an event id not seen before (a retry is a duplicate whenever it
//! arrives), and a take-back on a board whose rule is not reversible refuses that board only.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::domain::config::{Board, Config, Rule, Scope};
use crate::domain::ids::{self, IdError};
use crate::domain::period::{EventTimeError, EventWindow, Period, PeriodKind};
use crate::domain::tiebreak::{self, RangeError};

/// A scored event as the API receives it (`POST /v1/events`), before validation.
/// `occurred_at` is RFC 3339 with any offset; unknown fields are refused (typos such as
/// `occured_at` would otherwise be silently ignored).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Event {
    pub event_id: String,
    pub user_id: String,
    pub action: String,
    #[serde(default)]
    pub target: Option<String>,
    #[serde(default = "active_by_default")]
    pub active: bool,
    #[serde(default)]
    pub occurred_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub points: Option<i64>,
}

fn active_by_default() -> bool {
    true
}

/// Why an event is refused before anything is written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error(transparent)]
    InvalidId(#[from] IdError),
    #[error("no board scores the action {0:?}")]
    UnknownAction(String),
    #[error("action {0:?} needs a target")]
    MissingTarget(String),
    #[error("action {0:?} cannot be taken back (active:false)")]
    NotReversible(String),
    #[error("action {0:?} has fixed points; do not send points")]
    PointsNotAllowed(String),
    #[error("points for {action:?} must be 1..={max}")]
    PointsOutOfRange { action: String, max: i64 },
    #[error(transparent)]
    EventTime(#[from] EventTimeError),
    #[error(transparent)]
    OutOfRange(#[from] RangeError),
}

impl Refusal {
    /// The error code clients see for this refusal.
    pub fn code(&self) -> &'static str {
        match self {
            Refusal::InvalidId(_) => "invalid_id",
            Refusal::MissingTarget(_) => "malformed",
            Refusal::UnknownAction(_) => "unknown_action",
            Refusal::NotReversible(_) => "not_reversible",
            Refusal::PointsNotAllowed(_) => "points_not_allowed",
            Refusal::PointsOutOfRange { .. } | Refusal::OutOfRange(_) => "out_of_range",
            Refusal::EventTime(time) => time.code(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Give,
    TakeBack,
}

/// Which ledger remembers an award, by the rule's scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ledger {
    Day,
    Lifetime,
    Target,
    /// Nothing is remembered beyond the event id.
    None,
}

/// One board's share of an event.
#[derive(Debug, Clone)]
pub struct BoardPlan<'a> {
    pub board: &'a Board,
    pub rule: &'a Rule,
    /// Why this board refuses the event whatever the store holds (a take-back of an action
    /// this board's rule does not let take back); the other boards still apply it.
    pub refused: Option<Refusal>,
    pub mode: Mode,
    pub points: i64,
    pub ledger: Ledger,
    /// The ledger entry, e.g. `praise|article-7` (stored under its digest); empty when
    /// `ledger` is `None`.
    pub ledger_field: String,
    /// Cap counter field in the day ledger and its limit.
    pub cap: Option<(String, i64)>,
    /// The local day the event happened on (ledgers and caps are per day).
    pub day: Period,
    pub periods: Vec<Period>,
    /// Time part of the composite for a score reached now (the server's clock).
    pub time_part: i64,
    /// The rule's per-user rate limit, measured on the server's clock (a client's
    /// `occurred_at` cannot move it).
    pub rate_limit: Option<RateWindow>,
}

/// A rate limit as the script applies it: at most `max` events in the `window_ms`
/// milliseconds up to `now_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateWindow {
    pub max: u32,
    pub window_ms: i64,
    pub now_ms: i64,
}

/// Everything one event does, validated.
#[derive(Debug, Clone)]
pub struct EventPlan<'a> {
    pub fingerprint: String,
    /// Refuses the event unless its id was already applied (then it is a duplicate).
    pub first_delivery: Option<EventTimeError>,
    pub boards: Vec<BoardPlan<'a>>,
}

impl Event {
    /// A digest of everything the client said about the event. A retry may omit
    /// `occurred_at` and get the server's clock, so what is hashed is what was sent.
    pub fn fingerprint(&self) -> String {
        fingerprint(self)
    }

    fn validate_ids(&self) -> Result<(), IdError> {
        ids::validate_id("event_id", &self.event_id)?;
        ids::validate_id("user_id", &self.user_id)?;
        ids::validate_action(&self.action)?;
        self.target.as_deref().map(ids::validate_target).transpose()?;
        Ok(())
    }
}

/// A digest of a payload, stored in its event marker to tell a retry from a conflict.
pub fn fingerprint(payload: &impl Serialize) -> String {
    let canonical = serde_json::to_vec(payload).expect("payloads always serialize");
    let digest = Sha256::digest(&canonical);
    digest[..16].iter().map(|b| format!("{b:02x}")).collect()
}

pub fn plan_event<'a>(config: &'a Config, event: &Event, now: DateTime<Utc>, window: &EventWindow) -> Result<EventPlan<'a>, Refusal> {
    event.validate_ids().map_err(|e| match e {
        // An action that is not even well-formed cannot be one any board scores.
        IdError::Forbidden { field: "action", .. } | IdError::TooLong { field: "action", .. } => {
            Refusal::UnknownAction(ids::loggable(&event.action).into_owned())
        }
        other => Refusal::InvalidId(other),
    })?;
    let occurred_at = event.occurred_at.unwrap_or(now);
    let first_delivery = window.check(occurred_at, now).err();
    // An event outside the window is only ever answered from its marker (a duplicate reports
    // the member's standing in the periods it landed in); it is never written.
    let time_part = tiebreak::time_part(now)?;
    let boards = config
        .boards_for_action(&event.action)
        .map(|(board, rule)| plan_board(board, rule, event, occurred_at, time_part, now))
        .collect::<Result<Vec<_>, _>>()?;
    if boards.is_empty() {
        return Err(Refusal::UnknownAction(event.action.clone()));
    }
    if let Some(refusal) = boards.iter().try_fold(None, |first, b| b.refused.as_ref().map(|r| first.or(Some(r)))).flatten() {
        // Every board refuses: the event is refused as a whole, and nothing is written.
        return Err(refusal.clone());
    }
    Ok(EventPlan { fingerprint: event.fingerprint(), first_delivery, boards })
}

fn plan_board<'a>(
    board: &'a Board,
    rule: &'a Rule,
    event: &Event,
    occurred_at: DateTime<Utc>,
    time_part: i64,
    now: DateTime<Utc>,
) -> Result<BoardPlan<'a>, Refusal> {
    let mode = if event.active { Mode::Give } else { Mode::TakeBack };
    let refused = (mode == Mode::TakeBack && !rule.reversible).then(|| Refusal::NotReversible(rule.action.clone()));
    let points = match (event.points, rule.max_points) {
        (None, _) => rule.points,
        (Some(_), None) => return Err(Refusal::PointsNotAllowed(rule.action.clone())),
        (Some(p), Some(max)) if (1..=max).contains(&p) => p,
        (Some(_), Some(max)) => return Err(Refusal::PointsOutOfRange { action: rule.action.clone(), max }),
    };
    let ledger_field = match (rule.scope.needs_target(), event.target.as_deref()) {
        (false, _) => String::new(),
        (true, Some(target)) => format!("{}|{target}", rule.action),
        (true, None) => return Err(Refusal::MissingTarget(rule.action.clone())),
    };
    let ledger = match rule.scope {
        Scope::UserTargetDay => Ledger::Day,
        Scope::UserTarget => Ledger::Lifetime,
        Scope::Target => Ledger::Target,
        Scope::None => Ledger::None,
    };
    Ok(BoardPlan {
        board,
        rule,
        refused,
        mode,
        points,
        ledger,
        ledger_field,
        cap: rule.daily_cap.map(|cap| (format!("cap|{}", rule.action), cap)),
        day: Period::containing(PeriodKind::Day, occurred_at, board.timezone),
        periods: board.periods.iter().map(|&kind| Period::containing(kind, occurred_at, board.timezone)).collect(),
        time_part,
        rate_limit: rule.rate_limit.map(|limit| RateWindow {
            max: limit.max,
            window_ms: i64::from(limit.per_secs) * 1000,
            now_ms: now.timestamp_millis(),
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Duration;

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-22T10:00:00Z").unwrap().with_timezone(&Utc)
    }

    fn event(action: &str, target: Option<&str>) -> Event {
        Event {
            event_id: "e1".into(),
            user_id: "u1".into(),
            action: action.into(),
            target: target.map(Into::into),
            active: true,
            occurred_at: None,
            points: None,
        }
    }

    fn plan(e: &Event) -> Result<EventPlan<'static>, Refusal> {
        static CONFIG: std::sync::LazyLock<Config> = std::sync::LazyLock::new(Config::default_boards);
        plan_event(&CONFIG, e, now(), &EventWindow::default())
    }

    #[test]
    fn a_praise_is_two_points_once_per_article_per_day_on_day_and_month() {
        let p = plan(&event("praise", Some("article-7"))).unwrap();
        let [b] = p.boards.as_slice() else { panic!("one board") };
        assert_eq!((b.board.name.as_str(), b.points, b.mode, b.ledger), ("activity", 2, Mode::Give, Ledger::Day));
        assert_eq!(b.ledger_field, "praise|article-7");
        assert_eq!(b.day.id, "2026-11-22");
        let ids: Vec<_> = b.periods.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids, ["2026-11-22", "2026-11"]);
    }

    #[test]
    fn scopes_pick_their_ledger_and_caps_their_counter() {
        assert_eq!(plan(&event("publish", Some("a1"))).unwrap().boards[0].ledger, Ledger::Lifetime);
        assert_eq!(plan(&event("invite", Some("bob"))).unwrap().boards[0].ledger, Ledger::Target);
        let learning = plan(&event("learning", None)).unwrap();
        assert_eq!(learning.boards[0].ledger, Ledger::None);
        assert_eq!(learning.boards[0].cap, Some(("cap|learning".into(), 50)));
        assert_eq!(learning.boards[0].rate_limit, None, "the default boards have no rate limits");
    }

    #[test]
    fn rate_limits_run_on_the_server_clock() {
        let config = game("rate_limit = { max = 3, per_secs = 60 }");
        let mut e = event("win", None);
        e.occurred_at = Some(now() - Duration::minutes(10));
        let plan = plan_event(&config, &e, now(), &EventWindow::default()).unwrap();
        assert_eq!(plan.boards[0].rate_limit, Some(RateWindow { max: 3, window_ms: 60_000, now_ms: now().timestamp_millis() }));
    }

    #[test]
    fn refusals_have_their_own_reasons() {
        assert_eq!(plan(&event("teleport", None)).unwrap_err(), Refusal::UnknownAction("teleport".into()));
        assert_eq!(plan(&event("praise", None)).unwrap_err(), Refusal::MissingTarget("praise".into()));
        let mut e = event("publish", Some("a1"));
        e.active = false;
        assert_eq!(plan(&e).unwrap_err(), Refusal::NotReversible("publish".into()));
        let mut e = event("praise", Some("a1"));
        e.points = Some(5);
        assert_eq!(plan(&e).unwrap_err(), Refusal::PointsNotAllowed("praise".into()));
        let mut e = event("praise", Some("a1"));
        e.user_id = "u{1}".into();
        assert!(matches!(plan(&e).unwrap_err(), Refusal::InvalidId(IdError::Forbidden { field: "user_id", .. })));
    }

    /// One all-time board, `game`, scoring `win` by `rule` (the rest of a TOML inline table).
    fn game(rule: &str) -> Config {
        Config::parse(&format!(
            "[[boards]]\nname = \"game\"\nkind = \"cumulative\"\ntimezone = \"UTC\"\nperiods = [\"all\"]\ntop = 10\nrules = [{{ action = \"win\", points = 1, scope = \"none\", {rule} }}]"
        ))
        .unwrap()
    }

    #[test]
    fn the_window_refuses_only_first_deliveries_and_never_moves_reached_at() {
        let mut e = event("praise", Some("a1"));
        e.occurred_at = Some(now() - Duration::minutes(16));
        let late = plan(&e).unwrap();
        assert_eq!(late.first_delivery, Some(EventTimeError::TooLate(900)));
        assert_eq!(late.boards[0].day.id, "2026-11-22", "named for now: never written");
        e.occurred_at = Some(now() + Duration::minutes(2));
        assert_eq!(plan(&e).unwrap().first_delivery, Some(EventTimeError::InFuture(60)));
        // Inside the window, occurred_at picks the period; reached-at is always the server's now.
        e.occurred_at = Some(DateTime::parse_from_rfc3339("2026-11-21T23:50:00+08:00").unwrap().to_utc());
        let server_now = e.occurred_at.unwrap() + Duration::minutes(14);
        let config = Config::default_boards();
        let late_by_14 = plan_event(&config, &e, server_now, &EventWindow::default()).unwrap();
        assert_eq!(late_by_14.first_delivery, None);
        assert_eq!(late_by_14.boards[0].day.id, "2026-11-21");
        assert_eq!(late_by_14.boards[0].time_part, tiebreak::time_part(server_now).unwrap());
    }

    #[test]
    fn a_take_back_refuses_only_the_boards_that_cannot_take_back() {
        let config = Config::parse(
            "[[boards]]\nname = \"a\"\nkind = \"cumulative\"\ntimezone = \"UTC\"\nperiods = [\"all\"]\ntop = 10\nrules = [{ action = \"win\", points = 1, scope = \"user_target_day\", reversible = true }]\n\
             [[boards]]\nname = \"b\"\nkind = \"cumulative\"\ntimezone = \"UTC\"\nperiods = [\"all\"]\ntop = 10\nrules = [{ action = \"win\", points = 1, scope = \"user_target_day\" }]",
        )
        .unwrap();
        let mut e = event("win", Some("t"));
        e.active = false;
        let plan = plan_event(&config, &e, now(), &EventWindow::default()).unwrap();
        let refused: Vec<_> = plan.boards.iter().map(|b| b.refused.clone()).collect();
        assert_eq!(refused, [None, Some(Refusal::NotReversible("win".into()))]);
    }

    #[test]
    fn variable_points_stay_within_the_rule() {
        let config = game("max_points = 500");
        let mut e = event("win", None);
        e.points = Some(500);
        assert_eq!(plan_event(&config, &e, now(), &EventWindow::default()).unwrap().boards[0].points, 500);
        for bad in [0, -1, 501] {
            e.points = Some(bad);
            assert_eq!(
                plan_event(&config, &e, now(), &EventWindow::default()).unwrap_err(),
                Refusal::PointsOutOfRange { action: "win".into(), max: 500 }
            );
        }
    }

    #[test]
    fn the_fingerprint_covers_the_payload_not_the_clock() {
        let a = event("praise", Some("a1"));
        let mut b = a.clone();
        assert_eq!(a.fingerprint(), b.fingerprint());
        b.target = Some("a2".into());
        assert_ne!(a.fingerprint(), b.fingerprint());
        let mut c = a.clone();
        c.active = false;
        assert_ne!(a.fingerprint(), c.fingerprint());
    }
}
