//! `GET /v1/boards/{board}/users/{user_id}/statement`: scores explained line by line from
//! the counters the real write scripts keep, checked exactly and against generated histories.

use axum::http::Method;
use chrono::Duration;
use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, TestCaseError, TestRunner};
use serde_json::{Value, json};
use standings::domain::config::Config;
use standings_tests::{ADMIN, TestApp, spawn_ingest, spawn_ingest_with};

async fn statement(app: &TestApp, board: &str, user: &str, query: &str) -> Value {
    let (status, body) = app.get(&format!("/v1/boards/{board}/users/{user}/statement?{query}")).await;
    assert_eq!(status, 200, "{body}");
    body
}

async fn correct(app: &TestApp, board: &str, user: &str, body: Value) -> (u16, Value) {
    let (status, answer) =
        app.call(Method::POST, &format!("/v1/admin/boards/{board}/users/{user}/corrections"), body.to_string(), ADMIN).await;
    (status.as_u16(), answer)
}

fn line_sum(statement: &Value) -> i64 {
    statement["lines"].as_array().unwrap().iter().map(|l| l["points"].as_i64().unwrap()).sum()
}

#[tokio::test]
async fn a_statement_itemises_actions_caps_corrections_and_sign_ins_and_sums_exactly() {
    let app = spawn_ingest().await;
    for i in 0..6 {
        assert_eq!(app.event(json!({"event_id": format!("l{i}"), "user_id": "ann", "action": "learning"})).await.0, 200);
    }
    app.event(json!({"event_id": "q1", "user_id": "ann", "action": "qa"})).await;
    app.event(json!({"event_id": "r1", "user_id": "ann", "action": "review", "target": "book-1"})).await;
    app.event(json!({"event_id": "r2", "user_id": "ann", "action": "review", "target": "book-1"})).await;
    assert_eq!(app.post("/v1/sign-ins", &json!({"event_id": "s1", "user_id": "ann"})).await.0, 200);
    assert_eq!(correct(&app, "points", "ann", json!({"correction_id": "fix-1", "delta": 7, "reason": "prize"})).await.0, 200);
    assert_eq!(correct(&app, "points", "ann", json!({"correction_id": "fix-2", "delta": -3, "reason": "copied answer"})).await.0, 200);

    let body = statement(&app, "points", "ann", "period=season").await;
    assert_eq!(
        body["lines"],
        json!([
            {"kind": "action", "action": "learning", "events": 5, "points": 50, "earned": 50, "withheld": 10, "taken_back": 0},
            {"kind": "action", "action": "qa", "events": 1, "points": 5, "earned": 5, "withheld": 0, "taken_back": 0},
            {"kind": "action", "action": "review", "events": 1, "points": 10, "earned": 10, "withheld": 0, "taken_back": 0},
            {"kind": "correction", "correction_id": "fix-1", "reason": "prize", "points": 7},
            {"kind": "correction", "correction_id": "fix-2", "reason": "copied answer", "points": -3},
            {"kind": "sign_ins", "days": 1, "points": 1},
        ]),
        "{body}"
    );
    assert_eq!(body["unexplained"], Value::Null);
    let (_, standing) = app.get("/v1/boards/points/users/ann?period=season").await;
    assert_eq!((body["score"].as_i64(), standing["score"].as_i64()), (Some(70), Some(70)));
    assert_eq!(line_sum(&body), 70);
    assert_eq!((&body["board"], &body["user_id"], &body["period"]), (&json!("points"), &json!("ann"), &json!("season")));
}

#[tokio::test]
async fn a_board_without_statements_keeps_none_and_says_why_nothing_is_itemised() {
    let app = spawn_ingest().await;
    app.event(json!({"event_id": "e1", "user_id": "bo", "action": "comment", "target": "a1"})).await;
    assert!(app.written_keys().await.iter().all(|key| !key.contains(":stmt:")), "statements are opt-in: no keys on activity");
    let body = statement(&app, "activity", "bo", "period=day").await;
    assert_eq!((&body["score"], &body["lines"]), (&json!(3), &json!([])));
    assert_eq!(body["unexplained"], json!({"points": 3, "reason": "not_kept"}));
    let nobody = statement(&app, "points", "nobody", "").await;
    assert_eq!((&nobody["score"], &nobody["lines"], &nobody["unexplained"]), (&json!(0), &json!([]), &Value::Null));
    for (path, status, code) in [
        ("/v1/boards/nope/users/bo/statement", 404, "unknown_board"),
        ("/v1/boards/points/users/b%20o/statement", 400, "invalid_id"),
        ("/v1/boards/points/users/bo/statement?period=day", 400, "unknown_period"),
        ("/v1/boards/points/users/bo/statement?at=1999-01-01", 400, "out_of_range"),
        ("/v1/boards/points/users/bo/statement?colour=red", 400, "malformed"),
    ] {
        let (actual, body) = app.get(path).await;
        assert_eq!((actual.as_u16(), body["error"]["code"].as_str()), (status, Some(code)), "{path}: {body}");
    }
}

#[tokio::test]
async fn score_boards_explain_the_kept_score_and_the_submissions_of_a_sum() {
    let app = spawn_ingest().await;
    app.post("/v1/boards/high-scores/scores", &json!({"event_id": "h1", "user_id": "cy", "score": 70})).await;
    app.post("/v1/boards/high-scores/scores", &json!({"event_id": "h2", "user_id": "cy", "score": 50})).await;
    let body = statement(&app, "high-scores", "cy", "period=all").await;
    assert_eq!((&body["lines"], &body["unexplained"]), (&json!([{"kind": "kept_score", "points": 70}]), &Value::Null));

    let config = Config::parse(
        "[[boards]]\nname = \"coins\"\nkind = \"scores\"\nkeep = \"sum\"\ntimezone = \"UTC\"\nperiods = [\"day\", \"all\"]\ntop = 10\nstatements = true\n",
    )
    .unwrap();
    let app = spawn_ingest_with(config).await;
    for (i, coins) in [5, 0, 12].into_iter().enumerate() {
        app.post("/v1/boards/coins/scores", &json!({"event_id": format!("c{i}"), "user_id": "cy", "score": coins})).await;
    }
    app.post("/v1/boards/coins/scores", &json!({"event_id": "c0", "user_id": "cy", "score": 5})).await; // a retry
    let body = statement(&app, "coins", "cy", "period=all").await;
    assert_eq!((&body["lines"], &body["unexplained"]), (&json!([{"kind": "submissions", "submissions": 3, "points": 17}]), &Value::Null));
}

/// A board with every kind of line: a reversible rule, a capped rule, sign-ins with a streak
/// bonus (a late sign-in for yesterday credits today's bonus), and corrections.
fn ledger_board() -> Config {
    Config::parse(
        r#"[[boards]]
name = "learn"
kind = "cumulative"
timezone = "UTC"
periods = ["day", "month"]
top = 10
statements = true
rules = [
  { action = "praise", points = 2, scope = "user_target_day", reversible = true },
  { action = "learning", points = 10, scope = "none", daily_cap = 30 },
]
sign_in = { points = 1, streak_bonuses = [[2, 5], [3, 9]] }
"#,
    )
    .unwrap()
}

#[derive(Debug, Clone)]
enum Op {
    Praise { target: u8, active: bool },
    Learning,
    SignIn { yesterday: bool },
    Correct(i64),
    Later(i64),
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        3 => (0u8..3, any::<bool>()).prop_map(|(target, active)| Op::Praise { target, active }),
        3 => Just(Op::Learning),
        2 => any::<bool>().prop_map(|yesterday| Op::SignIn { yesterday }),
        1 => (-6i64..8).prop_filter("a correction changes something", |d| *d != 0).prop_map(Op::Correct),
        2 => (1i64..30).prop_map(Op::Later),
    ];
    prop::collection::vec(op, 1..40)
}

/// What each period's statement must say, from the documented rules (docs/boards.md, caps,
/// take-backs, sign-ins, corrections), kept apart from the scripts' counters: per period, each
/// action's events, earned, withheld and taken back; each correction's points; sign-in days,
/// their points and bonuses; and the score.
#[derive(Default, Clone, Debug)]
struct PeriodModel {
    actions: std::collections::BTreeMap<&'static str, [i64; 4]>,
    corrections: std::collections::BTreeMap<String, i64>,
    sign_ins: (i64, i64, i64),
    score: i64,
}

#[derive(Default)]
struct StatementModel {
    periods: std::collections::HashMap<String, PeriodModel>,
    /// (day, target) → points a praise gave that day (the day ledger).
    praised: std::collections::HashMap<(chrono::NaiveDate, u8), i64>,
    /// Points `learning` gave on a day (its daily cap is 30).
    learned: std::collections::HashMap<chrono::NaiveDate, i64>,
    signed: std::collections::BTreeSet<chrono::NaiveDate>,
}

impl StatementModel {
    fn period_ids(day: chrono::NaiveDate) -> [String; 2] {
        [format!("day:{day}"), format!("month:{}", day.format("%Y-%m"))]
    }

    fn period(&mut self, id: &str) -> &mut PeriodModel {
        self.periods.entry(id.to_owned()).or_default()
    }

    /// Applies `op` at `now`; the status the API must answer.
    fn apply(&mut self, op: &Op, id: &str, now: chrono::DateTime<chrono::Utc>) -> u16 {
        let today = now.date_naive();
        let periods = Self::period_ids(today);
        match *op {
            Op::Praise { target, active: true } => {
                if let std::collections::hash_map::Entry::Vacant(slot) = self.praised.entry((today, target)) {
                    slot.insert(2);
                    for p in &periods {
                        let period = self.period(p);
                        let line = period.actions.entry("praise").or_default();
                        line[0] += 1;
                        line[1] += 2;
                        period.score += 2;
                    }
                }
                200
            }
            Op::Praise { target, active: false } => {
                // A take-back removes what the day's ledger says was given, never more than a
                // period still holds; with nothing given, nothing happens.
                if let Some(given) = self.praised.remove(&(today, target)) {
                    for p in &periods {
                        let period = self.period(p);
                        let taken = given.min(period.score);
                        if taken > 0 {
                            period.actions.entry("praise").or_default()[3] += taken;
                            period.score -= taken;
                        }
                    }
                }
                200
            }
            Op::Learning => {
                let learned = self.learned.entry(today).or_default();
                let given = 10.min(30 - *learned);
                *learned += given;
                for p in &periods {
                    let period = self.period(p);
                    let line = period.actions.entry("learning").or_default();
                    if given > 0 {
                        line[0] += 1;
                        line[1] += given;
                    }
                    line[2] += 10 - given;
                    period.score += given;
                }
                200
            }
            Op::SignIn { yesterday } => {
                let date = if yesterday { today.pred_opt().unwrap() } else { today };
                // Yesterday only during the 15 minutes after midnight.
                if yesterday && now.time() >= chrono::NaiveTime::from_hms_opt(0, 15, 0).unwrap() {
                    return 422;
                }
                if !self.signed.insert(date) {
                    return 200;
                }
                let streak = |signed: &std::collections::BTreeSet<chrono::NaiveDate>, mut day: chrono::NaiveDate| {
                    let mut n = 0;
                    while signed.contains(&day) {
                        n += 1;
                        day = day.pred_opt().unwrap();
                    }
                    n
                };
                let bonus = |n: i64| match n {
                    2 => 5,
                    3 => 9,
                    _ => 0,
                };
                let own = bonus(streak(&self.signed, date));
                for p in Self::period_ids(date) {
                    let period = self.period(&p);
                    period.sign_ins.0 += 1;
                    period.sign_ins.1 += 1;
                    period.sign_ins.2 += own;
                    period.score += 1 + own;
                }
                let next = date.succ_opt().unwrap();
                if self.signed.contains(&next) {
                    let late = bonus(streak(&self.signed, next));
                    for p in Self::period_ids(next) {
                        let period = self.period(&p);
                        period.sign_ins.2 += late;
                        period.score += late;
                    }
                }
                200
            }
            Op::Correct(delta) => {
                if periods.iter().any(|p| self.periods.get(p).map_or(0, |m| m.score) + delta < 0) {
                    return 422;
                }
                for p in &periods {
                    let period = self.period(p);
                    *period.corrections.entry(format!("c:{id}")).or_default() += delta;
                    period.score += delta;
                }
                200
            }
            Op::Later(_) => 200,
        }
    }

    /// The statement's `lines` for a period, in the API's order: actions by name, corrections
    /// by id, sign-ins, bonuses.
    fn lines(&self, period: &str) -> Value {
        let Some(model) = self.periods.get(period) else { return json!([]) };
        let mut lines = Vec::new();
        for (action, [events, earned, withheld, taken_back]) in &model.actions {
            lines.push(json!({"kind": "action", "action": action, "events": events, "points": earned - taken_back,
                "earned": earned, "withheld": withheld, "taken_back": taken_back}));
        }
        for (field, points) in &model.corrections {
            lines.push(json!({"kind": "correction", "correction_id": &field[2..], "reason": "r", "points": points}));
        }
        let (days, points, bonuses) = model.sign_ins;
        if days > 0 {
            lines.push(json!({"kind": "sign_ins", "days": days, "points": points}));
        }
        if bonuses > 0 {
            lines.push(json!({"kind": "streak_bonuses", "points": bonuses}));
        }
        Value::Array(lines)
    }
}

#[test]
fn generated_histories_are_explained_as_the_model_says() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    TestRunner::new(RunnerConfig { cases: 32, ..RunnerConfig::default() })
        .run(&ops(), |ops| {
            runtime.block_on(async {
                let app = spawn_ingest_with(ledger_board()).await;
                app.set_now(standings_tests::at("2026-11-10T00:30:00Z"));
                let mut model = StatementModel::default();
                for (n, op) in ops.iter().enumerate() {
                    let id = format!("o{n}");
                    let (status, body) = match op {
                        Op::Praise { target, active } => {
                            app.event(json!({"event_id": id, "user_id": "dee", "action": "praise", "target": format!("t{target}"), "active": active})).await
                        }
                        Op::Learning => app.event(json!({"event_id": id, "user_id": "dee", "action": "learning"})).await,
                        Op::SignIn { yesterday } => {
                            let date = (app.now() - Duration::days(i64::from(*yesterday))).date_naive().to_string();
                            app.post("/v1/sign-ins", &json!({"event_id": id, "user_id": "dee", "date": date})).await
                        }
                        Op::Correct(delta) => {
                            let (status, body) = correct(&app, "learn", "dee", json!({"correction_id": id, "delta": delta, "reason": "r"})).await;
                            (axum::http::StatusCode::from_u16(status).unwrap(), body)
                        }
                        Op::Later(hours) => {
                            app.set_now(app.now() + Duration::hours(*hours));
                            continue;
                        }
                    };
                    let expected = model.apply(op, &id, app.now());
                    prop_assert_eq!(status.as_u16(), expected, "{:?}: {}", op, body);
                }
                let today = app.now().date_naive();
                let yesterday = today.pred_opt().unwrap();
                for (query, period) in [
                    (format!("period=month&at={today}"), format!("month:{}", today.format("%Y-%m"))),
                    (format!("period=day&at={today}"), format!("day:{today}")),
                    (format!("period=day&at={yesterday}"), format!("day:{yesterday}")),
                ] {
                    let body = statement(&app, "learn", "dee", &query).await;
                    prop_assert_eq!(&body["lines"], &model.lines(&period), "{}: {}", query, body);
                    prop_assert_eq!(body["score"].as_i64(), Some(model.periods.get(&period).map_or(0, |m| m.score)), "{}", query);
                    prop_assert_eq!(&body["unexplained"], &Value::Null, "{}: {}", query, body);
                }
                Ok::<(), TestCaseError>(())
            })
        })
        .unwrap();
}

#[tokio::test]
async fn a_ban_takes_the_statement_with_the_score_so_nothing_is_left_unexplained() {
    let app = spawn_ingest().await;
    app.event(json!({"event_id": "q1", "user_id": "eve", "action": "qa"})).await;
    let (status, _) = app.call(Method::POST, "/v1/admin/users/eve/ban", "{}", ADMIN).await;
    assert_eq!(status, 200);
    assert!(app.written_keys().await.iter().all(|key| !key.contains(":stmt:")), "the ban removed the statement with the score");
    let body = statement(&app, "points", "eve", "period=season").await;
    assert_eq!((&body["score"], &body["lines"], &body["unexplained"]), (&json!(0), &json!([]), &Value::Null));
}
