//! Generated submissions to a score board in each of the six keep × order pairs (and two with a
//! declared `max_score`), on day, week, month, season and all-time periods, through the real router and `submit_score.lua`, compared answer by
//! answer (status, duplicate, applied, and each period's score, rank, changed and reason) and
//! board by board with a model written from the documented rules (docs/boards.md#score-boards,
//! docs/concepts.md#how-long-exactly-once-lasts), not from the code: scores up to the limit
//! and sums past it, scores outside the range either side, retries inside and past the marker
//! window, on other days.

use std::collections::HashMap;

use chrono::Duration;
use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, TestCaseError, TestRunner};
use serde_json::{Value, json};
use standings::domain::config::Config;
use standings_tests::{TestApp, at, spawn_ingest_with};

/// 2^30 - 1, the documented largest score of a board that declares no `max_score`.
const LIMIT: i64 = 1_073_741_823;
/// A declared `max_score` that makes all-time ties exact to the second (docs/boards.md).
const SMALL_LIMIT: i64 = 4_194_303;
/// 2020-01-01T00:00:00Z: all-time ties count 256-second steps from it.
const EPOCH: i64 = 1_577_836_800;

#[derive(Debug, Clone)]
struct Op {
    id: u8,
    user: u8,
    score: i64,
    /// Seconds the clock moves before the submission.
    advance: i64,
}

fn ops(limit: i64) -> impl Strategy<Value = Vec<Op>> {
    // Mostly small scores (ties), some at the limit, a few just outside the range either side.
    let score = prop_oneof![8 => 0i64..8, 2 => (limit - 3)..=limit, 2 => 0..=limit, 1 => (limit + 1)..=(limit + 2), 1 => -2i64..0];
    let advance = prop_oneof![6 => 0i64..400, 1 => Just(23 * 3600), 1 => Just(26 * 3600), 1 => Just(47 * 3600), 1 => Just(50 * 3600)];
    prop::collection::vec((0u8..10, 0u8..4, score, advance).prop_map(|(id, user, score, advance)| Op { id, user, score, advance }), 1..30)
}

/// One period's entries: user → (score, tie key: smaller reached first).
type Entries = HashMap<String, (i64, i64)>;

/// What a submission first answered, as a retry must answer it again.
#[derive(Clone)]
struct First {
    user: String,
    score: i64,
    day: i64,
    periods: Vec<String>,
    applied: bool,
    changed: Vec<(bool, bool)>,
}

struct Model {
    keep: &'static str,
    ascending: bool,
    /// The board's largest score, and the seconds one all-time tie step spans.
    limit: i64,
    all_time_step: i64,
    boards: HashMap<String, Entries>,
    seen: HashMap<String, First>,
}

impl Model {
    fn better(&self, a: i64, b: i64) -> bool {
        if self.ascending { a < b } else { a > b }
    }

    /// Period ids of a moment (UTC board): its day, its ISO week, its month, its season (a
    /// month), all-time.
    fn periods(ts: i64) -> Vec<String> {
        let day = chrono::DateTime::from_timestamp(ts, 0).unwrap().date_naive();
        let month = day.format("%Y-%m");
        let week = day.format("%G-W%V");
        vec![format!("day:{day}"), format!("week:{week}"), format!("month:{month}"), format!("season:{month}"), "all:all".to_owned()]
    }

    /// Ties: seconds from the period's start on day, month and season boards; steps of 256 s
    /// from 2020 on all-time ones (1 s with a small `max_score`).
    fn tie_key(&self, period: &str, ts: i64) -> i64 {
        if period == "all:all" { (ts - EPOCH) / self.all_time_step } else { ts }
    }

    /// Members of a period, best first: better score, then reached first, then (within one
    /// tie step) Redis's order, the greater user id first.
    fn ranking(&self, period: &str) -> Vec<(String, i64)> {
        let mut rows: Vec<(String, (i64, i64))> =
            self.boards.get(period).map(|e| e.iter().map(|(u, v)| (u.clone(), *v)).collect()).unwrap_or_default();
        rows.sort_by(|(ua, (sa, ta)), (ub, (sb, tb))| {
            let by_score = if self.ascending { sa.cmp(sb) } else { sb.cmp(sa) };
            by_score.then(ta.cmp(tb)).then(ub.cmp(ua))
        });
        rows.into_iter().map(|(u, (s, _))| (u, s)).collect()
    }

    fn standing(&self, period: &str, user: &str) -> Value {
        let ranking = self.ranking(period);
        match ranking.iter().position(|(u, _)| u == user) {
            Some(i) => json!({"score": ranking[i].1, "rank": i + 1}),
            None => json!({"score": null, "rank": null}),
        }
    }

    /// One period of an answer: the standing now, whether the write changed it, and why not.
    fn answer_row(&self, period: &str, user: &str, changed: bool, overflow: bool) -> Value {
        let mut row = self.standing(period, user);
        row["changed"] = json!(changed);
        if overflow {
            row["reason"] = json!("out_of_range");
        }
        row
    }

    /// The answer `submit` must give at `ts`, and the model moved on.
    fn submit(&mut self, op: &Op, ts: i64) -> (u16, Value) {
        let (id, user) = (format!("e{}", op.id), format!("u{}", op.user));
        // A score outside the board's range is refused as it comes, whatever its id did.
        if !(0..=self.limit).contains(&op.score) {
            return (422, json!({"code": "out_of_range"}));
        }
        let today = ts.div_euclid(86_400);
        if let Some(first) = self.seen.get(&id).filter(|first| (today - first.day).abs() <= 1).cloned() {
            if (first.user.as_str(), first.score) != (user.as_str(), op.score) {
                return (409, json!({"code": "idempotency_conflict"}));
            }
            let periods: Vec<Value> = first
                .periods
                .iter()
                .zip(&first.changed)
                .map(|(p, &(changed, overflow))| self.answer_row(p, &user, changed, overflow))
                .collect();
            return (200, json!({"duplicate": true, "applied": first.applied, "periods": periods}));
        }
        let periods = Self::periods(ts);
        let mut outcome = Vec::new();
        for period in &periods {
            let held = self.boards.get(period).and_then(|e| e.get(&user)).map(|(s, _)| *s);
            let new = match (self.keep, held) {
                ("best", Some(h)) => {
                    if self.better(op.score, h) {
                        op.score
                    } else {
                        h
                    }
                }
                ("sum", Some(h)) => h + op.score,
                _ => op.score,
            };
            let overflow = new > self.limit;
            outcome.push((!overflow && Some(new) != held, overflow, new));
        }
        if outcome.iter().all(|(_, overflow, _)| *overflow) {
            return (422, json!({"code": "out_of_range"}));
        }
        for (period, &(changed, _, new)) in periods.iter().zip(&outcome) {
            if changed {
                let key = self.tie_key(period, ts);
                self.boards.entry(period.clone()).or_default().insert(user.clone(), (new, key));
            }
        }
        let any_changed = outcome.iter().any(|(changed, ..)| *changed);
        let applied = self.keep != "best" || any_changed;
        let changed: Vec<(bool, bool)> = outcome.iter().map(|&(c, o, _)| (c, o)).collect();
        self.seen.insert(
            id,
            First { user: user.clone(), score: op.score, day: today, periods: periods.clone(), applied, changed: changed.clone() },
        );
        let rows: Vec<Value> =
            periods.iter().zip(&changed).map(|(p, &(changed, overflow))| self.answer_row(p, &user, changed, overflow)).collect();
        (200, json!({"duplicate": false, "applied": applied, "periods": rows}))
    }
}

/// The parts of an answer the model speaks for.
fn observed(status: u16, body: &Value) -> Value {
    if status != 200 {
        return json!({"code": body["error"]["code"]});
    }
    let periods: Vec<Value> = body["periods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let mut row = json!({"score": p["score"], "rank": p["rank"], "changed": p["changed"]});
            if !p["reason"].is_null() {
                row["reason"] = p["reason"].clone();
            }
            row
        })
        .collect();
    json!({"duplicate": body["duplicate"], "applied": body["applied"], "periods": periods})
}

async fn run_case(keep: &'static str, ascending: bool, limit: i64, ops: &[Op]) -> Result<(), TestCaseError> {
    let order = if ascending { "asc" } else { "desc" };
    let declared = if limit == LIMIT { String::new() } else { format!("max_score = {limit}\n") };
    let config = Config::parse(&format!(
        "[[boards]]\nname = \"game\"\nkind = \"scores\"\nkeep = \"{keep}\"\norder = \"{order}\"\ntimezone = \"UTC\"\nperiods = [\"day\", \"week\", \"month\", \"season\", \"all\"]\ntop = 10\n{declared}"
    ))
    .unwrap();
    let app: TestApp = spawn_ingest_with(config).await;
    app.set_now(at("2026-11-22T08:00:00Z"));
    let all_time_step = if limit == LIMIT { 256 } else { 1 };
    let mut model = Model { keep, ascending, limit, all_time_step, boards: HashMap::new(), seen: HashMap::new() };
    for (step, op) in ops.iter().enumerate() {
        app.set_now(app.now() + Duration::seconds(op.advance));
        let body = json!({"event_id": format!("e{}", op.id), "user_id": format!("u{}", op.user), "score": op.score});
        let (status, reply) = app.post("/v1/boards/game/scores", &body).await;
        let (want_status, want) = model.submit(op, app.now().timestamp());
        prop_assert_eq!(status.as_u16(), want_status, "{} {} step {} {:?}: {}", keep, order, step, op, reply);
        prop_assert_eq!(observed(want_status, &reply), want, "{} {} step {} {:?}", keep, order, step, op);
    }
    // Every board the submissions touched, in the model's order.
    for period in model.boards.keys() {
        let (kind, id) = period.split_once(':').unwrap();
        let at_date = if kind == "all" {
            app.now().date_naive().to_string()
        } else if kind == "month" || kind == "season" {
            format!("{id}-01")
        } else if kind == "week" {
            let (year, week) = id.split_once("-W").unwrap();
            chrono::NaiveDate::from_isoywd_opt(year.parse().unwrap(), week.parse().unwrap(), chrono::Weekday::Mon).unwrap().to_string()
        } else {
            id.to_owned()
        };
        let (_, top) = app.get(&format!("/v1/boards/game/top?period={kind}&at={at_date}&limit=10")).await;
        let got: Vec<(String, i64)> = top["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e["user_id"].as_str().unwrap().to_owned(), e["score"].as_i64().unwrap()))
            .collect();
        prop_assert_eq!(got, model.ranking(period), "{} {} {}", keep, order, period);
    }
    Ok(())
}

#[test]
fn generated_submissions_match_the_model_in_all_six_keep_and_order_pairs() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let pairs = [("best", false), ("best", true), ("latest", false), ("latest", true), ("sum", false), ("sum", true)];
    let cases = std::env::var("STANDINGS_MODEL_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(16);
    // Each pair at the default range, and `best` and `sum` with a declared `max_score`.
    let runs = pairs.iter().map(|&(keep, asc)| (keep, asc, LIMIT)).chain([("best", false, SMALL_LIMIT), ("sum", true, SMALL_LIMIT)]);
    for (keep, ascending, limit) in runs {
        TestRunner::new(RunnerConfig { cases, ..RunnerConfig::default() })
            .run(&ops(limit), |ops| runtime.block_on(run_case(keep, ascending, limit, &ops)))
            .unwrap_or_else(|failure| panic!("{keep} {} (max {limit}): {failure}", if ascending { "asc" } else { "desc" }));
    }
}
