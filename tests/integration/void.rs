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
        } else if !active && self.likes.get(&key).is_some_and(|(given, _)| *given > 0) {
            *used -= self.likes.remove(&key).map_or(0, |(given, _)| given);
        }
    }

    /// A voided like stays in the day ledger with nothing given: the same like that day earns
    /// nothing again, and its take-back takes nothing.
    fn void(&mut self, user: &str, from: DateTime<Utc>, to: DateTime<Utc>) {
        for ((who, ..), (given, at)) in &mut self.likes {
            if who == user && from <= *at && *at < to {
                *given = 0;
            }
        }
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

        // Writes after it: a take-back of a voided like takes nothing, giving it again earns
        // nothing; a second void of the same range takes nothing more.
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
    // Both likes from every period they landed in (one day, or two across midnight).
    let taken = |kind: &str| {
        first["periods"].as_array().unwrap().iter().filter(|p| p["period"] == kind).map(|p| p["delta"].as_i64().unwrap()).sum::<i64>()
    };
    assert_eq!((taken("day"), taken("all")), (-4, -4), "{first}");
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
        (
            "forum",
            "ann",
            json!({"void_id": "v-3", "from": from, "to": now + Duration::days(92), "reason": "x"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "range_too_long",
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

/// The journal bucket, with a write sent the first time a void lists it: the write lands after
/// the void read Redis and before it applies.
struct TakeBackMidway {
    objects: S3Objects,
    take_back: tokio::sync::Mutex<Option<futures::future::BoxFuture<'static, ()>>>,
}

impl journal::Objects for TakeBackMidway {
    async fn put_new(&self, key: &str, body: Vec<u8>) -> Result<journal::Put, journal::ObjectError> {
        self.objects.put_new(key, body).await
    }

    async fn get(&self, key: &str) -> Result<Vec<u8>, journal::ObjectError> {
        self.objects.get(key).await
    }

    async fn list(&self, prefix: &str) -> Result<Vec<String>, journal::ObjectError> {
        if let Some(take_back) = self.take_back.lock().await.take() {
            take_back.await;
        }
        self.objects.list(prefix).await
    }
}

#[tokio::test]
async fn a_take_back_or_another_void_landing_while_a_void_decides_is_never_taken_twice() {
    let app = spawn_journaled(forum()).await;
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    // Yesterday (UTC), 11:00 to noon: the writes, the take-back and the void on one day,
    // whatever the hour the test runs at (a take-back after midnight finds nothing to take).
    let noon = (Utc::now().date_naive() - Duration::days(1)).and_hms_opt(12, 0, 0).unwrap().and_utc();
    let start = noon - Duration::hours(1);
    let events = [
        json!({"event_id": "w0", "user_id": "ann", "action": "win"}),
        json!({"event_id": "l1", "user_id": "ann", "action": "like", "target": "a"}),
        json!({"event_id": "w2", "user_id": "ann", "action": "win"}),
    ];
    for (i, event) in events.into_iter().enumerate() {
        app.set_now(start + Duration::minutes(10 * i as i64));
        assert_eq!(app.event(event).await.0, StatusCode::OK);
    }
    app.set_now(noon);
    let all = || Period::containing(PeriodKind::All, Utc::now(), chrono_tz::UTC);
    assert_eq!(app.points("forum", all(), "ann").await, Some(WIN + LIKE + WIN));
    let (router, take_back) =
        (app.router.clone(), json!({"event_id": "l1-back", "user_id": "ann", "action": "like", "target": "a", "active": false}));
    let objects = TakeBackMidway {
        objects: S3Objects::new(client.clone(), &bucket),
        take_back: tokio::sync::Mutex::new(Some(Box::pin(async move {
            let (status, reply) = call(&router, Method::POST, "/v1/events", &take_back, WRITER).await;
            assert_eq!(status, StatusCode::OK, "{reply}");
        }))),
    };
    let config = std::sync::Arc::new(forum());
    let voids = standings::services::voids::Voids::new(
        standings::services::moderation::Moderation::new(config, app.keys.clone(), app.store.clone()),
        Some(objects),
        30,
    );
    let request = |id: &str| standings::services::voids::VoidRequest {
        void_id: id.into(),
        from: start + Duration::minutes(5),
        to: noon,
        reason: "bot".into(),
    };
    // The like taken back midway is not taken again: only the second win goes.
    let receipt = voids.void("forum", "ann", &request("v-1"), None, app.now()).await.expect("the void applies");
    assert_eq!(receipt.periods.iter().map(|p| p.delta).collect::<Vec<_>>(), [-WIN, -WIN], "a day and all-time: {receipt:?}");
    assert_eq!(app.points("forum", all(), "ann").await, Some(WIN), "the first win, outside the range, stays");

    // Two more voids of the range at once, under other ids: together they take nothing more.
    let (second, third) = (request("v-2"), request("v-3"));
    let (late, also) =
        tokio::join!(voids.void("forum", "ann", &second, None, app.now()), voids.void("forum", "ann", &third, None, app.now()));
    for receipt in [late.expect("a void"), also.expect("a void")] {
        assert!(receipt.periods.iter().all(|p| p.delta == 0), "{receipt:?}");
    }
    assert_eq!(app.points("forum", all(), "ann").await, Some(WIN));
}

#[tokio::test]
async fn concurrent_voids_of_overlapping_ranges_take_each_give_once() {
    let app = spawn_journaled(forum()).await;
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let router = app.void_router(&client, Some(&bucket), 30);
    let start = Utc::now() - Duration::hours(3);
    for i in 0..12 {
        app.set_now(start + Duration::minutes(10 * i));
        assert_eq!(app.event(json!({"event_id": format!("w{i}"), "user_id": "ann", "action": "win"})).await.0, StatusCode::OK);
    }
    app.set_now(Utc::now());
    // Eight voids at once over ranges that overlap: wins 2..10 go, each once.
    let bodies: Vec<Value> = (0..8)
        .map(|i| {
            let from = start + Duration::minutes(20 + 10 * (i % 4));
            json!({"void_id": format!("v-{i}"), "from": from, "to": from.max(start + Duration::minutes(95)) + Duration::minutes(10 * (i / 4)), "reason": "ring"})
        })
        .collect();
    let answers = futures::future::join_all(bodies.iter().map(|body| void(&router, "ann", body.clone()))).await;
    let mut taken = 0;
    for (status, receipt) in answers {
        assert_eq!(status, StatusCode::OK, "{receipt}");
        taken -= receipt["periods"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["period"] == "all")
            .map(|p| p["delta"].as_i64().unwrap())
            .sum::<i64>();
    }
    assert_eq!(taken, 9 * WIN, "wins 2 to 10 (20 to 105 minutes in), each once");
    let all = Period::containing(PeriodKind::All, Utc::now(), chrono_tz::UTC);
    assert_eq!(app.points("forum", all, "ann").await, Some(3 * WIN));
}

#[tokio::test]
async fn a_give_landing_while_a_void_decides_is_left_to_the_next_void() {
    let app = spawn_journaled(forum()).await;
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let start = Utc::now() - Duration::hours(1);
    app.set_now(start);
    assert_eq!(app.event(json!({"event_id": "w0", "user_id": "ann", "action": "win"})).await.0, StatusCode::OK);
    app.set_now(start + Duration::minutes(1));
    let router = app.router.clone();
    let objects = TakeBackMidway {
        objects: S3Objects::new(client.clone(), &bucket),
        take_back: tokio::sync::Mutex::new(Some(Box::pin(async move {
            let win = json!({"event_id": "w-mid", "user_id": "ann", "action": "win"});
            assert_eq!(call(&router, Method::POST, "/v1/events", &win, WRITER).await.0, StatusCode::OK);
        }))),
    };
    let voids = standings::services::voids::Voids::new(
        standings::services::moderation::Moderation::new(std::sync::Arc::new(forum()), app.keys.clone(), app.store.clone()),
        Some(objects),
        30,
    );
    let request = |id: &str| standings::services::voids::VoidRequest {
        void_id: id.into(),
        from: start - Duration::minutes(1),
        to: start + Duration::minutes(5),
        reason: "bot".into(),
    };
    let all = || Period::containing(PeriodKind::All, Utc::now(), chrono_tz::UTC);
    // The first void read the journal before the second win landed: it takes the first.
    let first = voids.void("forum", "ann", &request("v-1"), None, app.now()).await.expect("a void");
    assert_eq!(first.periods.iter().find(|p| p.period == "all").map(|p| p.delta), Some(-WIN), "{first:?}");
    assert_eq!(app.points("forum", all(), "ann").await, Some(WIN));
    // The next void of the same range takes the one the first did not read.
    let second = voids.void("forum", "ann", &request("v-2"), None, app.now()).await.expect("a void");
    assert_eq!(second.periods.iter().find(|p| p.period == "all").map(|p| p.delta), Some(-WIN), "{second:?}");
    assert_eq!(app.points("forum", all(), "ann").await, None);
}

/// +3 at T1, a ban, an unban, +3 at T3, then a void of [T0, T2): the ban already took the T1
/// points, so the void takes nothing and the T3 points stay. A correction lowering the board
/// likewise takes from what the window's gives still contribute.
#[tokio::test]
async fn a_void_takes_only_what_its_window_still_contributes_after_bans_and_corrections() {
    let app = spawn_journaled(forum()).await;
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let router = app.void_router(&client, Some(&bucket), 30);
    let t0 = Utc::now() - Duration::hours(3);
    let all = || Period::containing(PeriodKind::All, Utc::now(), chrono_tz::UTC);
    app.set_now(t0 + Duration::minutes(10));
    assert_eq!(app.event(json!({"event_id": "w1", "user_id": "ann", "action": "win"})).await.0, StatusCode::OK);
    app.set_now(t0 + Duration::minutes(20));
    assert_eq!(app.call(Method::POST, "/v1/admin/users/ann/ban", "{}", ADMIN).await.0, StatusCode::OK);
    assert_eq!(app.call(Method::DELETE, "/v1/admin/users/ann/ban", "", ADMIN).await.0, StatusCode::OK);
    app.set_now(t0 + Duration::hours(2));
    assert_eq!(app.event(json!({"event_id": "w3", "user_id": "ann", "action": "win"})).await.0, StatusCode::OK);
    assert_eq!(app.points("forum", all(), "ann").await, Some(WIN));
    app.set_now(Utc::now());
    let body = json!({"void_id": "v1", "from": t0, "to": t0 + Duration::hours(1), "reason": "ring"});
    let (status, voided) = void(&router, "ann", body).await;
    assert_eq!(status, StatusCode::OK, "{voided}");
    assert_eq!(app.points("forum", all(), "ann").await, Some(WIN), "{voided}");

    // bob: +3 at T1, +3 at T3, a correction of -3 (the oldest first: T1's), then a void of
    // [T0, T2): nothing of the window is left to take.
    app.set_now(t0 + Duration::minutes(10));
    assert_eq!(app.event(json!({"event_id": "b1", "user_id": "bob", "action": "win"})).await.0, StatusCode::OK);
    app.set_now(t0 + Duration::hours(2));
    assert_eq!(app.event(json!({"event_id": "b3", "user_id": "bob", "action": "win"})).await.0, StatusCode::OK);
    let correction = json!({"delta": -WIN, "reason": "double count", "correction_id": "fix-b", "period": "all", "period_id": "all"});
    let (status, corrected) = app.call(Method::POST, "/v1/admin/boards/forum/users/bob/corrections", correction.to_string(), ADMIN).await;
    assert_eq!(status, StatusCode::OK, "{corrected}");
    app.set_now(Utc::now());
    let body = json!({"void_id": "v2", "from": t0, "to": t0 + Duration::hours(1), "reason": "ring"});
    let (status, voided) = void(&router, "bob", body).await;
    assert_eq!(status, StatusCode::OK, "{voided}");
    assert_eq!(app.points("forum", all(), "bob").await, Some(WIN), "{voided}");
}
