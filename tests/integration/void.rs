//! Voids (docs/journal.md#void) through the `void` function, reading the journal from moto S3
//! (through the real SDK) and Redis: against a model of the board, exactly once per `void_id`,
//! audited and itemised in statements, and refused — with nothing written — on bad input.

use std::collections::{BTreeSet, HashMap};

use axum::http::{Method, StatusCode};
use chrono::{DateTime, Duration, Utc};
use journal::S3Objects;
use serde_json::{Value, json};
use standings::domain::config::Config;
use standings::domain::period::{Period, PeriodKind};
use standings_tests::journal::{call, new_bucket, s3};
use standings_tests::{ADMIN, TestApp, WRITER, spawn_journaled};

const LIKE: i64 = 2;
const CAP: i64 = 11;
const WIN: i64 = 3;

fn forum() -> Config {
    Config::parse(&format!(
        "[[boards]]\nname = \"forum\"\nkind = \"cumulative\"\ntimezone = \"UTC\"\nperiods = [\"day\", \"all\"]\ntop = 10\nstatements = true\n\
         rules = [{{ action = \"like\", points = {LIKE}, scope = \"user_target_day\", reversible = true, daily_cap = {CAP} }}, \
         {{ action = \"win\", points = {WIN}, scope = \"none\" }}]\n\
         [[boards]]\nname = \"game\"\nkind = \"scores\"\nkeep = \"best\"\norder = \"desc\"\ntimezone = \"UTC\"\nperiods = [\"all\"]\ntop = 10\n"
    ))
    .unwrap()
}

fn far() -> DateTime<Utc> {
    Utc::now() + Duration::minutes(5)
}

/// The board as its rules say, written without the code's help: each user's day ledger (what
/// a like gave, and when), the day's cap counters, and wins.
#[derive(Default)]
struct Model {
    likes: HashMap<(String, String, String), (i64, DateTime<Utc>)>,
    capped: HashMap<(String, String), i64>,
    wins: Vec<(String, DateTime<Utc>, bool)>,
}

fn day_of(at: DateTime<Utc>) -> String {
    Period::containing(PeriodKind::Day, at, chrono_tz::UTC).id
}

impl Model {
    fn like(&mut self, user: &str, target: &str, at: DateTime<Utc>, active: bool) {
        let key = (user.to_owned(), day_of(at), target.to_owned());
        let used = self.capped.entry((user.to_owned(), day_of(at))).or_default();
        if active && !self.likes.contains_key(&key) {
            let given = LIKE.min(CAP - *used);
            if given > 0 {
                *used += given;
                self.likes.insert(key, (given, at));
            }
        } else if !active && let Some((given, _)) = self.likes.remove(&key) {
            *used -= given;
        }
    }

    fn void(&mut self, user: &str, from: DateTime<Utc>, to: DateTime<Utc>) {
        self.likes.retain(|(who, ..), (_, at)| !(who == user && from <= *at && *at < to));
        for (who, at, voided) in &mut self.wins {
            *voided |= who == user && from <= *at && *at < to;
        }
    }

    fn score(&self, user: &str, period: &Period) -> i64 {
        let within = |at: &DateTime<Utc>| period.kind == PeriodKind::All || day_of(*at) == period.id;
        let likes: i64 = self.likes.iter().filter(|((who, ..), (_, at))| who == user && within(at)).map(|(_, (given, _))| given).sum();
        let wins = self.wins.iter().filter(|(who, at, voided)| who == user && !voided && within(at)).count() as i64;
        likes + wins * WIN
    }
}

async fn assert_matches(app: &TestApp, model: &Model, days: &BTreeSet<String>, context: &str) {
    for user in ["ann", "bob"] {
        let periods = days.iter().map(|day| Period::named(PeriodKind::Day, day, chrono_tz::UTC).unwrap()).chain([Period::containing(
            PeriodKind::All,
            Utc::now(),
            chrono_tz::UTC,
        )]);
        for period in periods {
            let expected = model.score(user, &period);
            let held = app.points("forum", period.clone(), user).await.unwrap_or(0);
            assert_eq!(held, expected, "{context}: {user} on {} {}", period.kind.as_str(), period.id);
        }
    }
}

async fn void(router: &axum::Router, user: &str, body: Value) -> (StatusCode, Value) {
    call(router, Method::POST, &format!("/v1/admin/boards/forum/users/{user}/void"), &body, ADMIN).await
}

#[tokio::test]
async fn a_void_takes_exactly_what_the_model_says_from_every_period_part_drained_part_not() {
    for seed in 1..=8u64 {
        let app = spawn_journaled(forum()).await;
        let client = s3().await;
        let bucket = new_bucket(&client).await;
        let router = app.void_router(&client, Some(&bucket), 30);
        let drainer = app.drainer(S3Objects::new(client.clone(), &bucket), Default::default());
        let drain = || drainer.drain(far());
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut model = Model::default();
        let mut days = BTreeSet::new();
        // About a day of writes ending now, so the day boards cross midnight (UTC) now and then.
        let start = Utc::now() - Duration::hours(20);
        let mut now = start;
        let send = async |model: &mut Model, days: &mut BTreeSet<String>, rng: &mut fastrand::Rng, now: DateTime<Utc>, id: String| {
            app.set_now(now);
            days.insert(day_of(now));
            let user = if rng.bool() { "ann" } else { "bob" };
            let event = if rng.u8(..4) == 0 {
                model.wins.push((user.to_owned(), now, false));
                json!({"event_id": id, "user_id": user, "action": "win"})
            } else {
                let (target, active) = (format!("post-{}", rng.u8(..4)), rng.u8(..3) != 0);
                model.like(user, &target, now, active);
                json!({"event_id": id, "user_id": user, "action": "like", "target": target, "active": active})
            };
            let (status, reply) = app.event(event).await;
            assert_eq!(status, StatusCode::OK, "{reply}");
        };
        for step in 0..40 {
            now += Duration::minutes(rng.i64(5..50));
            send(&mut model, &mut days, &mut rng, now, format!("e-{step}")).await;
            if step % 15 == 14 {
                assert!(drain().await.boards.iter().all(|board| board.error.is_none()));
            }
        }
        assert!(app.journal_len("forum").await > 0, "part of the journal is still in Redis");
        let from = start + Duration::minutes(rng.i64(0..600));
        // Up to now: writes could still land in the range (the void checks the journal did not
        // move on while it decided).
        let to = now + Duration::minutes(1);
        let (status, receipt) = void(&router, "ann", json!({"void_id": "v-1", "from": from, "to": to, "reason": "vote ring"})).await;
        assert_eq!(status, StatusCode::OK, "{receipt}");
        model.void("ann", from, to);
        assert_matches(&app, &model, &days, &format!("seed {seed}, after the void")).await;

        // Writes after it: a take-back of a voided like takes nothing (the void deleted its
        // ledger entry); a second void of the same range takes nothing more.
        for step in 40..50 {
            now += Duration::minutes(rng.i64(1..5));
            send(&mut model, &mut days, &mut rng, now, format!("e-{step}")).await;
        }
        for target in 0..4 {
            now += Duration::minutes(1);
            app.set_now(now);
            days.insert(day_of(now));
            let target = format!("post-{target}");
            model.like("ann", &target, now, false);
            let event =
                json!({"event_id": format!("back-{target}"), "user_id": "ann", "action": "like", "target": target, "active": false});
            assert_eq!(app.event(event).await.0, StatusCode::OK);
        }
        assert!(drain().await.boards.iter().all(|board| board.error.is_none()));
        let (status, again) = void(&router, "ann", json!({"void_id": "v-2", "from": from, "to": to, "reason": "vote ring"})).await;
        assert_eq!(status, StatusCode::OK, "{again}");
        assert!(again["periods"].as_array().unwrap().iter().all(|period| period["delta"] == 0), "{again}");
        model.void("ann", from, to);
        assert_matches(&app, &model, &days, &format!("seed {seed}, after more writes and a second void")).await;
    }
}

#[tokio::test]
async fn a_void_is_exactly_once_audited_itemised_and_bad_input_writes_nothing() {
    let app = spawn_journaled(forum()).await;
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let router = app.void_router(&client, Some(&bucket), 30);
    let start = Utc::now() - Duration::hours(2);
    for (i, target) in ["a", "b", "c"].iter().enumerate() {
        app.set_now(start + Duration::minutes(10 * i as i64));
        let (status, reply) = app.event(json!({"event_id": format!("l-{i}"), "user_id": "ann", "action": "like", "target": target})).await;
        assert_eq!(status, StatusCode::OK, "{reply}");
    }
    app.set_now(Utc::now());
    let body = json!({"void_id": "v-1", "from": start, "to": start + Duration::minutes(15), "reason": "bot"});
    let (status, first) = void(&router, "ann", body.clone()).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    assert_eq!((first["kind"].as_str(), first["void_id"].as_str(), first["duplicate"].as_bool()), (Some("void"), Some("v-1"), Some(false)));
    assert_eq!(first["periods"].as_array().unwrap().iter().map(|p| p["delta"].as_i64().unwrap()).collect::<Vec<_>>(), [-4, -4], "{first}");
    assert_eq!(app.points("forum", Period::containing(PeriodKind::All, Utc::now(), chrono_tz::UTC), "ann").await, Some(LIKE));
    let (status, retry) = void(&router, "ann", body.clone()).await;
    assert_eq!((status, retry["duplicate"].as_bool(), &retry["periods"]), (StatusCode::OK, Some(true), &first["periods"]));
    assert_eq!(
        app.points("forum", Period::containing(PeriodKind::All, Utc::now(), chrono_tz::UTC), "ann").await,
        Some(LIKE),
        "a retry takes nothing more"
    );

    // Audited, and itemised in the statement, which still adds up.
    let (_, audit) = app.call(Method::GET, "/v1/admin/audit?board=forum", "", ADMIN).await;
    assert_eq!((audit["entries"][0]["kind"].as_str(), audit["entries"][0]["reason"].as_str()), (Some("void"), Some("bot")), "{audit}");
    let (_, statement) = app.get("/v1/boards/forum/users/ann/statement?period=all").await;
    let lines = statement["lines"].as_array().unwrap();
    assert!(lines.iter().any(|line| line["kind"] == "void" && line["void_id"] == "v-1" && line["points"] == -4), "{statement}");
    assert_eq!(statement["score"], LIKE, "{statement}");
    assert!(statement["unexplained"].is_null(), "{statement}");

    // Refused, with nothing written.
    let before = app.keyspace().await;
    let refused = |body: Value| body.as_object().unwrap().clone();
    let mut other = refused(body.clone());
    other.insert("reason".into(), json!("another reason"));
    let (now, from) = (app.now(), app.now() - Duration::hours(1));
    let cases: Vec<(&str, &str, Value, StatusCode, &str)> = vec![
        ("forum", "ann", Value::Object(other), StatusCode::CONFLICT, "idempotency_conflict"),
        ("nope", "ann", json!({"void_id": "v-3", "from": from, "to": now, "reason": "x"}), StatusCode::NOT_FOUND, "unknown_board"),
        ("forum", "ann", json!({"void_id": "v-3", "from": now, "to": now, "reason": "x"}), StatusCode::BAD_REQUEST, "malformed"),
        (
            "forum",
            "ann",
            json!({"void_id": "v-3", "from": now - Duration::days(31), "to": now, "reason": "x"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "range_too_old",
        ),
        ("forum", "ann", json!({"void_id": "v 3", "from": from, "to": now, "reason": "x"}), StatusCode::BAD_REQUEST, "invalid_id"),
        ("forum", "a}b", json!({"void_id": "v-3", "from": from, "to": now, "reason": "x"}), StatusCode::BAD_REQUEST, "invalid_id"),
        ("forum", "ann", json!({"void_id": "v-3", "from": from, "to": now, "reason": ""}), StatusCode::BAD_REQUEST, "malformed"),
        ("forum", "ann", json!({"void_id": "v-3", "from": "yesterday", "to": now, "reason": "x"}), StatusCode::BAD_REQUEST, "malformed"),
        (
            "game",
            "ann",
            json!({"void_id": "v-3", "from": from, "to": now, "reason": "x"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "not_a_points_board",
        ),
    ];
    for (board, user, body, status, code) in cases {
        let (got, reply) = call(&router, Method::POST, &format!("/v1/admin/boards/{board}/users/{user}/void"), &body, ADMIN).await;
        assert_eq!((got, reply["error"]["code"].as_str()), (status, Some(code)), "{board}/{user} {body}: {reply}");
    }
    let body = json!({"void_id": "v-4", "from": from, "to": now, "reason": "x"});
    let (status, _) = call(&router, Method::POST, "/v1/admin/boards/forum/users/ann/void", &body, WRITER).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "a writer is not an admin");
    let off = app.void_router(&client, None, 30);
    let (status, reply) = call(&off, Method::POST, "/v1/admin/boards/forum/users/ann/void", &body, ADMIN).await;
    assert_eq!((status, reply["error"]["code"].as_str()), (StatusCode::CONFLICT, Some("journal_off")));
    assert_eq!(app.keyspace().await, before, "a refused void writes nothing");
}
