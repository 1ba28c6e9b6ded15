//! Board configuration: parsed from TOML (embedded default or `STANDINGS_CONFIG`) and
//! validated once at start, with errors that name the offending field.

mod runtime;
pub mod tournament;
mod validate;

pub use runtime::{
    CLOSED, Definition, KEPT_DEFINITION, MAX_DEFINITION_BYTES, MAX_RULES, MAX_RUNTIME_BOARDS, PRIOR_PRIZES, SCALE_SECS, kept_board,
    tombstone,
};

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use chrono_tz::Tz;
use serde::Deserialize;

use crate::domain::ids;
use crate::domain::league::{League, RawLeague};
use crate::domain::notify::{Notify, RawNotify};
use crate::domain::period::PeriodKind;
use validate::{invalid, validate_board};

/// The configuration shipped with the project (docs/boards.md).
pub const DEFAULT_CONFIG: &str = include_str!("../../../boards.toml");

/// Upper bound for a single rule's points; keeps every sum far inside the composite range.
pub const MAX_RULE_POINTS: i64 = 100_000;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read board configuration {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("board configuration is not valid TOML: {0}")]
    Syntax(String),
    #[error("board definition is not valid: {0}")]
    Definition(String),
    #[error("board configuration: {field}: {problem}")]
    Invalid { field: String, problem: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BoardKind {
    Cumulative,
    Decaying,
    /// Clients submit scores; the board keeps the best, the latest or the sum (`domain::scores`).
    Scores,
}

/// Which earlier award makes an event a repeat that earns nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    UserTargetDay,
    UserTarget,
    Target,
    None,
}

impl Scope {
    pub fn needs_target(self) -> bool {
        !matches!(self, Scope::None)
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    pub action: String,
    pub points: i64,
    #[serde(default)]
    pub reversible: bool,
    pub scope: Scope,
    #[serde(default)]
    pub daily_cap: Option<i64>,
    /// When set, the event itself carries `points` in `1..=max_points`; `points` above is
    /// then only the default used when the event omits it.
    #[serde(default)]
    pub max_points: Option<i64>,
    /// At most `max` events of this action per user in any `per_secs` sliding window.
    #[serde(default)]
    pub rate_limit: Option<RateLimit>,
}

/// A board's rules, sorted by action: a slice the size of its rules. (A `BTreeMap` allocates a
/// node of eleven entries for a single rule, ~1.2 KB a board: 12 MB of a function's catalog
/// over 10,000 runtime boards, `tournament-list` in BENCHMARKS.md.)
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rules(Box<[Rule]>);

impl Rules {
    /// `rules` by action; `Err(j)`: rule `j` names an action an earlier one names.
    pub fn new(mut rules: Vec<Rule>) -> Result<Self, usize> {
        let mut seen = HashSet::new();
        if let Some(again) = rules.iter().position(|rule| !seen.insert(rule.action.as_str())) {
            return Err(again);
        }
        rules.sort_by(|a, b| a.action.cmp(&b.action));
        Ok(Self(rules.into_boxed_slice()))
    }

    pub fn get(&self, action: &str) -> Option<&Rule> {
        self.0.binary_search_by(|rule| rule.action.as_str().cmp(action)).ok().map(|i| &self.0[i])
    }

    /// Every rule, by action.
    pub fn values(&self) -> impl Iterator<Item = &Rule> {
        self.0.iter()
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|rule| rule.action.as_str())
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Which submission a score board keeps (`domain::scores`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Keep {
    Best,
    Latest,
    Sum,
}

impl Keep {
    pub fn as_str(self) -> &'static str {
        match self {
            Keep::Best => "best",
            Keep::Latest => "latest",
            Keep::Sum => "sum",
        }
    }
}

/// Which end of a board is the top.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Order {
    /// Higher is better (points, kills).
    #[default]
    Desc,
    /// Lower is better (lap times, strokes).
    Asc,
}

/// A per-user rate limit of one action on one board (`rate_limit = { max = 10, per_secs = 60 }`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimit {
    pub max: u32,
    pub per_secs: u32,
}

/// Bounds of a rate limit: the window's log holds at most `max` entries per user and action.
pub const MAX_RATE_LIMIT: u32 = 10_000;
pub const MAX_RATE_WINDOW_SECS: u32 = 86_400;

#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct SignIn {
    pub points: i64,
    /// `[consecutive_days, bonus]` pairs: the bonus is given on the day the streak is exactly
    /// that long.
    #[serde(default)]
    pub streak_bonuses: Vec<(u32, i64)>,
}

impl SignIn {
    /// The bonus for a streak of exactly `days`.
    pub fn bonus(&self, days: u32) -> i64 {
        self.streak_bonuses.iter().find(|(at, _)| *at == days).map_or(0, |(_, bonus)| *bonus)
    }
}

/// Longest streak a bonus can be configured for (ten years).
pub const MAX_BONUS_STREAK: u32 = 3660;

#[derive(Debug, Clone, Copy, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Weights {
    Linear,
    Exponential,
}

#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(tag = "mode", rename_all = "snake_case", deny_unknown_fields)]
pub enum Decay {
    /// Hourly buckets merged with weights falling with age (sliding window).
    Window {
        window_hours: u32,
        weights: Weights,
        #[serde(default)]
        linear_step: Option<f64>,
        #[serde(default)]
        half_life_hours: Option<f64>,
        #[serde(default = "default_synthesized_ttl")]
        synthesized_ttl_secs: u64,
    },
    /// One key whose scores are multiplied by `factor` every `every_minutes` (scaling).
    Scale { factor: f64, every_minutes: u32 },
}

/// The longest `every_minutes` a scale board may declare: 366 days.
pub const MAX_SCALE_MINUTES: u32 = 366 * 24 * 60;

fn default_synthesized_ttl() -> u64 {
    300
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBoard {
    name: String,
    kind: BoardKind,
    timezone: String,
    #[serde(default)]
    periods: Vec<PeriodKind>,
    top: u32,
    #[serde(default)]
    archive: bool,
    #[serde(default)]
    rules: Vec<Rule>,
    #[serde(default)]
    sign_in: Option<SignIn>,
    #[serde(default)]
    decay: Option<Decay>,
    #[serde(default)]
    wait_replicas: Option<u32>,
    #[serde(default)]
    keep: Option<Keep>,
    #[serde(default)]
    order: Option<Order>,
    #[serde(default)]
    rate_limit: Option<RateLimit>,
    #[serde(default)]
    max_score: Option<i64>,
    #[serde(default)]
    statements: bool,
    /// The first day of the board's weeks (`monday` unless set).
    #[serde(default)]
    week_start: Option<String>,
    #[serde(default)]
    league: Option<RawLeague>,
    #[serde(default)]
    notify: Option<RawNotify>,
    #[serde(default)]
    shards: Option<u32>,
}

/// What a score board keeps, which end is the top, and its per-user submission limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScoreRules {
    pub keep: Keep,
    pub order: Order,
    pub rate_limit: Option<RateLimit>,
    /// The largest score the board takes (`max_score`, default `scores::MAX_SCORE`): the fewer
    /// bits scores need, the more the composite leaves to tie-breaking time (`scores::scale`).
    pub max_score: i64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    boards: Vec<RawBoard>,
}

#[derive(Debug, Clone)]
pub struct Board {
    pub name: String,
    pub kind: BoardKind,
    pub timezone: Tz,
    pub periods: Vec<PeriodKind>,
    pub top: u32,
    pub archive: bool,
    pub rules: Rules,
    pub sign_in: Option<SignIn>,
    pub decay: Option<Decay>,
    /// Replicas that must acknowledge each write before it is answered (`WAIT`); `None`:
    /// the deployment's `REDIS_WAIT_REPLICAS`.
    pub wait_replicas: Option<u32>,
    /// Set on score boards (kind `scores`) only.
    pub scores: Option<ScoreRules>,
    /// Keep, per user and period, the counters that explain a score (opt-in: about 180 bytes
    /// per user and period; see `domain::statement`).
    pub statements: bool,
    /// Weekly (or other) cohorts in tiers (`domain::league`, docs/leagues.md).
    pub league: Option<League>,
    /// Rank-change notifications (`domain::notify`, docs/notifications.md).
    pub notify: Option<Notify>,
    /// How many slots the board's entries are spread over, each user's in one (docs/scaling.md);
    /// 1: the board lives in one slot.
    pub shards: u32,
    /// Created at runtime (`PUT /v1/admin/boards/{board}`, docs/runtime-boards.md), not declared
    /// in the configuration file.
    pub runtime: bool,
    /// A runtime board being deleted: reads go on, writes are refused (its guard says so), and
    /// no event is fanned out to it nor any ban made on it.
    pub ending: bool,
    /// The tournament this score board runs (docs/tournaments.md): its window, joins, entry
    /// limit and prizes; each instance is a period of the board.
    pub tournament: Option<std::sync::Arc<tournament::Tournament>>,
}

impl Board {
    pub fn rule(&self, action: &str) -> Option<&Rule> {
        self.rules.get(action)
    }

    /// The board's period called `name` (`day`, `week`, …): its week starts on the board's day.
    pub fn period_kind(&self, name: &str) -> Option<PeriodKind> {
        self.periods.iter().copied().find(|kind| kind.as_str() == name)
    }
}

/// The most shards a board may be spread over (`shards`, docs/scaling.md).
pub const MAX_SHARDS: u32 = 64;

#[derive(Debug, Clone)]
pub struct Config {
    /// Shared: a catalog reload keeps every board it did not parse again as it was.
    boards: Vec<Arc<Board>>,
    /// Board name -> its place in `boards`: a lookup costs the same beside 10,000 runtime boards.
    by_name: HashMap<String, usize>,
    /// Action -> the places in `boards` of the boards with a rule for it, in configuration order
    /// (an event's fan-out looks at those alone).
    by_action: HashMap<String, Vec<usize>>,
    /// The places in `boards` in name order: a page of a list starts where its cursor is.
    by_order: Vec<usize>,
}

impl Config {
    /// The embedded default, or the file named by `STANDINGS_CONFIG`.
    pub fn from_env() -> Result<Self, ConfigError> {
        match std::env::var("STANDINGS_CONFIG") {
            Ok(path) if !path.is_empty() => {
                let text = std::fs::read_to_string(&path).map_err(|source| ConfigError::Read { path, source })?;
                Self::parse(&text)
            }
            _ => Self::parse(DEFAULT_CONFIG),
        }
    }

    pub fn default_boards() -> Self {
        Self::parse(DEFAULT_CONFIG).expect("the embedded board configuration is valid")
    }

    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| ConfigError::Syntax(e.to_string()))?;
        let mut names = HashSet::new();
        let mut boards = Vec::with_capacity(raw.boards.len());
        for (i, raw_board) in raw.boards.into_iter().enumerate() {
            let board = validate_board(&format!("boards[{i}]"), raw_board)?;
            if !names.insert(board.name.clone()) {
                return Err(invalid(format!("boards[{i}].name"), format!("duplicate board {:?}", board.name)));
            }
            boards.push(board);
        }
        if boards.is_empty() {
            return Err(invalid("boards", "at least one board is required"));
        }
        if let Some(second) = boards.iter().enumerate().filter(|(_, b)| b.sign_in.is_some()).nth(1) {
            return Err(invalid(format!("boards[{}].sign_in", second.0), "only one board can take sign-ins"));
        }
        Ok(Self::indexed(boards.into_iter().map(Arc::new).collect()))
    }

    fn indexed(boards: Vec<Arc<Board>>) -> Self {
        let by_name = boards.iter().enumerate().map(|(i, board)| (board.name.clone(), i)).collect();
        let mut by_action: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, board) in boards.iter().enumerate() {
            for action in board.rules.keys() {
                by_action.entry(action.to_owned()).or_default().push(i);
            }
        }
        let mut by_order: Vec<usize> = (0..boards.len()).collect();
        by_order.sort_by(|&a, &b| boards[a].name.cmp(&boards[b].name));
        Self { boards, by_name, by_action, by_order }
    }

    /// This configuration with the runtime boards `extra` after the declared ones (a runtime
    /// board never shares a declared board's name: `Definition::parse` refuses it).
    pub fn with_runtime<B: Into<Arc<Board>>>(&self, extra: impl IntoIterator<Item = B>) -> Self {
        let mut boards = self.boards.clone();
        boards.extend(extra.into_iter().map(Into::into).filter(|board| self.board(&board.name).is_none()));
        Self::indexed(boards)
    }

    /// This configuration with `board` in place of the board of its name (a board read at
    /// the scale its scores are held at: `scores::held_at`).
    pub fn with_board(&self, board: Board) -> Self {
        let board = Arc::new(board);
        Self::indexed(self.boards.iter().map(|b| if b.name == board.name { board.clone() } else { b.clone() }).collect())
    }

    pub fn boards(&self) -> &[Arc<Board>] {
        &self.boards
    }

    /// The boards named after `cursor` (all without one), in name order.
    pub fn boards_after(&self, cursor: Option<&str>) -> impl Iterator<Item = &Board> {
        let from = cursor.map_or(0, |cursor| self.by_order.partition_point(|&i| self.boards[i].name.as_str() <= cursor));
        self.by_order[from..].iter().map(|&i| &*self.boards[i])
    }

    pub fn board(&self, name: &str) -> Option<&Board> {
        self.by_name.get(name).map(|&i| &*self.boards[i])
    }

    /// The board that takes sign-ins (at most one has a `sign_in` section).
    pub fn sign_in_board(&self) -> Option<&Board> {
        self.boards.iter().map(|b| &**b).find(|b| b.sign_in.is_some())
    }

    /// Every board that scores `action`, in configuration order (the event fan-out).
    pub fn boards_for_action<'a>(&'a self, action: &str) -> impl Iterator<Item = (&'a Board, &'a Rule)> {
        let places = self.by_action.get(action).map_or(&[][..], Vec::as_slice);
        places.iter().map(|&i| &*self.boards[i]).filter(|b| !b.ending).filter_map(move |b| b.rule(action).map(|r| (b, r)))
    }
}

#[cfg(test)]
mod tests;
