//! Changing a board's `shards` with live data (docs/scaling.md#changing-shards): a deploy with
//! the new count writes and reads where the data is (tests/integration/online_reshard.rs: writes
//! during the move); the
//! journal function's `reshard` moves it (part drained to S3, part still in the streams), in
//! invocations stopped by their deadline again and again, every read of either deploy as before
//! after each of them (reads go on while it moves); afterwards every read equals the
//! board's before, retries are duplicates, bans hold, the old layout is gone, and a restore
//! after the whole deployment is lost brings the moved board back from the new layout's journal.

use std::sync::{Arc, Mutex};

use axum::http::{Method, StatusCode};
use chrono::{Duration, Utc};
use journal::{Jobs, Restorer, S3Objects, Status};
use serde_json::{Value, json};
use standings::domain::config::Config;
use standings_tests::journal::{new_bucket, s3, spawn_journaled_on};
use standings_tests::{ADMIN, TestApp, spawn_journaled};

pub(crate) fn far() -> chrono::DateTime<Utc> {
    Utc::now() + Duration::minutes(5)
}

pub(crate) fn game(shards: u32) -> Config {
    Config::parse(&format!(
        "[[boards]]\nname = \"game\"\nkind = \"scores\"\nkeep = \"sum\"\ntimezone = \"UTC\"\nperiods = [\"day\", \"all\"]\ntop = 10\nstatements = true\nshards = {shards}\n"
    ))
    .unwrap()
}

pub(crate) async fn submit(app: &TestApp, id: &str, user: &str, score: i64) -> (StatusCode, Value) {
    app.set_now(Utc::now());
    app.post("/v1/boards/game/scores", &json!({"event_id": id, "user_id": user, "score": score})).await
}

/// Every read of the board, with the ranks of a list of users.
pub(crate) async fn reads(app: &TestApp) -> Vec<Value> {
    let mut reads = Vec::new();
    for path in [
        "top?period=all&limit=50",
        "top?period=day&rank_mode=competition&offset=2&limit=5",
        "users/u7?period=all&around=3",
        "users/u12/statement?period=all",
        "distribution?period=all&buckets=5",
    ] {
        let (status, body) = app.get(&format!("/v1/boards/game/{path}")).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
        reads.push(body);
    }
    let ids: Vec<String> = (0..30).map(|u| format!("u{u}")).collect();
    let (_, ranks) = app.call_query(Method::POST, "/v1/boards/game/ranks", json!({"user_ids": ids, "period": "all"}).to_string()).await;
    reads.push(ranks);
    reads
}

/// Reshards with every invocation past its deadline (each moves a run and stops), until done;
/// after each invocation, and after the switch, every read of each deploy in `readers` (the old
/// configuration's and the new one's) equals `before`: reads go on for the whole move.
async fn reshard_in_steps(jobs: &Jobs<S3Objects>, readers: &[&TestApp], before: &[Value]) -> Value {
    for step in 0..200 {
        let report = jobs
            .run(json!({"reshard": {"board": "game"}}), Utc::now() - Duration::seconds(1))
            .await
            .unwrap_or_else(|e| panic!("step {step}: {e:?}"));
        for (which, reader) in readers.iter().enumerate() {
            assert_eq!(reads(reader).await, before, "step {step} ({}), deploy {which}: reads as before", report["status"]);
        }
        if report["status"] == "complete" {
            return report;
        }
    }
    panic!("the reshard did not finish in 200 invocations");
}

async fn keys_of(app: &TestApp, tag_start: &str) -> Vec<String> {
    app.written_keys().await.into_iter().filter(|key| key.contains(tag_start)).collect()
}

#[tokio::test]
async fn a_board_moved_from_one_shard_to_eight_then_to_three_reads_as_before() {
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let metrics = || Arc::new(Mutex::new(Vec::new()));
    let one = spawn_journaled(game(1)).await;
    for i in 0..40 {
        let (status, body) = submit(&one, &format!("s{i}"), &format!("u{}", i % 23), 1 + i % 7).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let correction = json!({"correction_id": "c1", "delta": 5, "reason": "r", "period": "all", "period_id": "all"});
    assert_eq!(
        one.call(Method::POST, "/v1/admin/boards/game/users/u12/corrections", correction.to_string(), ADMIN).await.0,
        StatusCode::OK
    );
    assert_eq!(one.call(Method::POST, "/v1/admin/users/u3/ban", "{}", ADMIN).await.0, StatusCode::OK);
    // Part of the history in S3, the rest still in the board's stream.
    one.journal_jobs(&client, &bucket, metrics()).run(json!({"drain": {}}), far()).await.expect("a drain");
    for i in (40..55).filter(|i| i % 23 != 3) {
        assert_eq!(submit(&one, &format!("s{i}"), &format!("u{}", i % 23), 2).await.0, StatusCode::OK);
    }
    let before = reads(&one).await;

    // Deployed with 8: writes and reads where the data is (the one slot) until moved.
    let eight = spawn_journaled_on(game(8), one.keys.clone()).await;
    eight.set_now(one.now());
    assert_eq!(reads(&eight).await, before);
    let (status, body) = submit(&eight, "n0", "u1", 1).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let before = reads(&one).await;
    assert_eq!(reads(&eight).await, before);
    let jobs = eight.journal_jobs(&client, &bucket, metrics());
    let report = reshard_in_steps(&jobs, &[&one, &eight], &before).await;
    assert_eq!((report["from"].as_u64(), report["to"].as_u64()), (Some(1), Some(8)), "{report}");
    assert_eq!(reads(&eight).await, before, "every read as before the move");
    assert!(keys_of(&eight, "{game}").await.iter().all(|key| key.ends_with(":layout")), "the old layout's keys are freed");
    let (status, retry) = submit(&eight, "s5", "u5", 6).await;
    assert_eq!((status, retry["duplicate"].as_bool()), (StatusCode::OK, Some(true)), "a retry is a duplicate: {retry}");
    let (status, banned) = submit(&eight, "b1", "u3", 1).await;
    assert_eq!((status, banned["error"]["code"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("user_banned")), "{banned}");
    assert_eq!(submit(&eight, "n1", "u1", 4).await.0, StatusCode::OK, "writes resume");

    // From 8 to 3, again in steps.
    let three = spawn_journaled_on(game(3), one.keys.clone()).await;
    assert_eq!(submit(&three, "n2", "u2", 1).await.0, StatusCode::OK, "the new deploy writes where the data is");
    let before = reads(&eight).await;
    let jobs = three.journal_jobs(&client, &bucket, metrics());
    let report = reshard_in_steps(&jobs, &[&eight, &three], &before).await;
    assert_eq!((report["from"].as_u64(), report["to"].as_u64()), (Some(8), Some(3)), "{report}");
    assert_eq!(reads(&three).await, before);
    for shard in three.keys.layout("game", 8).all() {
        let tag = shard.guard().split('{').nth(1).unwrap().split('}').next().unwrap().to_owned();
        assert!(keys_of(&three, &format!("{{{tag}}}")).await.is_empty(), "shard {tag} of the old layout is freed");
    }
    assert_eq!(jobs.run(json!({"reshard": {"board": "game"}}), far()).await.unwrap()["moved"], 0, "done: nothing more to move");

    // Redis lost: the new layout's journal holds the whole history.
    jobs.run(json!({"drain": {}}), far()).await.expect("a drain");
    three.lose_written_keys().await;
    let restorer = Restorer::new(three.config.clone(), three.keys.clone(), three.store.clone(), S3Objects::new(client.clone(), &bucket));
    let restored = restorer.restore(Some("game"), far()).await.expect("the restore runs");
    assert_eq!(restored.status, Status::Complete, "{restored:?}");
    assert_eq!(reads(&three).await, before, "restored from the new layout's journal alone");
}

#[tokio::test]
async fn a_reshard_refuses_a_new_layout_that_already_holds_boards() {
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let one = spawn_journaled(game(1)).await;
    assert_eq!(submit(&one, "s1", "u1", 3).await.0, StatusCode::OK);
    // Something left in the new layout (a layout the board had before, say).
    let four = spawn_journaled_on(game(4), one.keys.clone()).await;
    let stray = four.keys.layout("game", 4).shard(2).relative(":z:all:all");
    assert_eq!(submit(&four, "s2", "u2", 3).await.0, StatusCode::OK, "the new deploy writes where the data is");
    let _: () = redis::cmd("ZADD").arg(&stray).arg(1).arg("x").query_async(&mut four.redis.clone()).await.unwrap();
    let error = four.journal_jobs(&client, &bucket, Arc::default()).run(json!({"reshard": {"board": "game"}}), far()).await.unwrap_err();
    assert!(error.to_string().contains("already holds"), "{error}");
    assert_eq!(error.code(), "bad_request");
}

/// A move that recorded the new layout and died before the rest of its switch: the next
/// invocation finishes it (the new shards born and unfenced, the old layout freed).
#[tokio::test]
async fn a_move_stopped_after_recording_its_layout_is_finished_by_the_next_invocation() {
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let one = spawn_journaled(game(1)).await;
    for i in 0..6 {
        assert_eq!(submit(&one, &format!("s{i}"), &format!("u{i}"), 2 + i).await.0, StatusCode::OK);
    }
    let four = spawn_journaled_on(game(4), one.keys.clone()).await;
    let jobs = four.journal_jobs(&client, &bucket, Arc::default());
    assert_eq!(jobs.run(json!({"reshard": {"board": "game"}}), far()).await.unwrap()["status"], "complete");
    four.set_now(one.now());
    let before = reads(&four).await;
    // The state of a move killed right after it recorded the layout: its checkpoints and
    // claims, the new shards fenced and not born yet, an old key left.
    let mut conn = four.redis.clone();
    for shard in four.keys.layout("game", 4).all() {
        let _: () = redis::cmd("HSET").arg(shard.reshard_checkpoint()).arg("from").arg(1).query_async(&mut conn).await.unwrap();
        let _: () = redis::cmd("HSET").arg(shard.restore_claims()).arg(shard.guard()).arg("1").query_async(&mut conn).await.unwrap();
        let _: () = redis::cmd("HSET").arg(shard.guard()).arg("fence").arg(1).query_async(&mut conn).await.unwrap();
    }
    let leftover = one.keys.board("game").relative(":z:all:all");
    let _: () = redis::cmd("ZADD").arg(&leftover).arg(1).arg("ghost").query_async(&mut conn).await.unwrap();
    assert_eq!(submit(&four, "late", "u1", 9).await.0, StatusCode::SERVICE_UNAVAILABLE, "fenced");

    let report = jobs.run(json!({"reshard": {"board": "game"}}), far()).await.unwrap();
    assert_eq!(report["status"], "complete", "{report}");
    assert!(keys_of(&four, "{game}").await.iter().all(|key| key.ends_with(":layout")), "the old layout is freed");
    assert!(four.written_keys().await.iter().all(|key| !key.ends_with(":reshard")), "no checkpoint left");
    four.set_now(one.now());
    assert_eq!(reads(&four).await, before);
    assert_eq!(submit(&four, "late", "u1", 9).await.0, StatusCode::OK, "writes resume");
}

/// A score board declaring `max_score` (as the shipped `high-scores` does) keeps its recorded
/// scale through a move: the free step leaves it with the layout, so the board answers as before
/// (issue 58: it answered every read and write with 503 `board_scale_changed`).
#[tokio::test]
async fn a_score_board_with_a_max_score_keeps_its_scale_through_a_move() {
    let scaled = |shards: u32| {
        Config::parse(&format!(
            "[[boards]]\nname = \"game\"\nkind = \"scores\"\nkeep = \"best\"\ntimezone = \"UTC\"\nperiods = [\"all\"]\ntop = 10\nmax_score = 1000000\nshards = {shards}\n"
        ))
        .unwrap()
    };
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let one = spawn_journaled(scaled(1)).await;
    for i in 0..8 {
        assert_eq!(submit(&one, &format!("s{i}"), &format!("u{i}"), 1000 * (i + 1)).await.0, StatusCode::OK);
    }
    let (_, before) = one.get("/v1/boards/game/top?period=all&limit=10").await;
    let four = spawn_journaled_on(scaled(4), one.keys.clone()).await;
    let report = four.journal_jobs(&client, &bucket, Arc::default()).run(json!({"reshard": {"board": "game"}}), far()).await.unwrap();
    assert_eq!(report["status"], "complete", "{report}");
    let scale: Option<i64> = redis::cmd("GET").arg(four.keys.board_scale("game")).query_async(&mut four.redis.clone()).await.unwrap();
    assert_eq!(scale, Some(1_000_000), "the recorded scale stays with the board");
    let (status, after) = four.get("/v1/boards/game/top?period=all&limit=10").await;
    assert_eq!((status, after["entries"].clone()), (StatusCode::OK, before["entries"].clone()), "{after}");
    assert_eq!(submit(&four, "s9", "u9", 999_999).await.0, StatusCode::OK, "writes resume");
}

/// The guard's record of each period set (`kept|`), by which a lost set fences the board, made
/// to say what the new layout holds: the moved lines' records were written for the old one.
/// Here a ban empties the sets of the shard that later merges into one holding others (its
/// line records the set gone), so the merged shard recorded none of its sets, and a set lost
/// afterwards was taken as new: the write went on against missing history. A restore from the
/// new layout's journal ends with the same records.
#[tokio::test]
async fn a_merged_shard_records_every_set_it_holds_through_a_restore_and_a_loss_fences_it() {
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let two = spawn_journaled(game(2)).await;
    let on = |shard: usize| (0..).map(|u| format!("u{u}")).find(|user| two.keys.layout("game", 2).shard_of(user) == shard).unwrap();
    let (kept, banned) = (on(0), on(1));
    assert_eq!(submit(&two, "s1", &kept, 3).await.0, StatusCode::OK);
    assert_eq!(submit(&two, "s2", &banned, 5).await.0, StatusCode::OK);
    assert_eq!(two.call(Method::POST, &format!("/v1/admin/users/{banned}/ban"), "{}", ADMIN).await.0, StatusCode::OK);
    let one = spawn_journaled_on(game(1), two.keys.clone()).await;
    let jobs = one.journal_jobs(&client, &bucket, Arc::default());
    assert_eq!(jobs.run(json!({"reshard": {"board": "game"}}), far()).await.unwrap()["status"], "complete");
    let shard = one.keys.board("game");
    let mut conn = one.redis.clone();
    let mut sets: Vec<String> = one.written_keys().await.into_iter().filter(|key| key.starts_with(&shard.relative(":z:"))).collect();
    sets.sort();
    assert_eq!(sets.len(), 2, "the day's and all time's sets: {sets:?}");
    assert_eq!(kept_records(&mut conn, &shard).await, sets, "every set the merged shard holds is recorded");

    // Lost right after the switch, before any drain: the move stored its lines, the switch's
    // own (the settled records) included.
    one.lose_written_keys().await;
    let restorer = Restorer::new(one.config.clone(), one.keys.clone(), one.store.clone(), S3Objects::new(client.clone(), &bucket));
    assert_eq!(restorer.restore(Some("game"), far()).await.expect("the restore runs").status, Status::Complete);
    assert_eq!(kept_records(&mut conn, &shard).await, sets, "the restore brings the records back as the move left them");

    let _: () = redis::cmd("DEL").arg(shard.relative(":z:all:all")).query_async(&mut conn).await.unwrap();
    let (status, body) = submit(&one, "s3", &kept, 1).await;
    assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::SERVICE_UNAVAILABLE, Some("board_restoring")), "{body}");
}

/// The period sets the guard of `shard` records, sorted.
async fn kept_records(conn: &mut standings::redis::store::Connection, shard: &standings::redis::keys::BoardKeys) -> Vec<String> {
    let fields: Vec<String> = redis::cmd("HKEYS").arg(shard.guard()).query_async(conn).await.unwrap();
    let mut sets: Vec<String> = fields.iter().filter_map(|field| shard.kept_set(field)).collect();
    sets.sort();
    sets
}

/// A switch resumed after it finished some of the new shards: those take writes already and
/// are left as they are (settled again, a set one lost since would lose its record; finished
/// again, the fence that loss put up would be lifted, and writes decided against the lost set).
#[tokio::test]
async fn a_resumed_switch_leaves_the_shards_it_finished_as_they_are() {
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let one = spawn_journaled(game(1)).await;
    for i in 0..8 {
        assert_eq!(submit(&one, &format!("s{i}"), &format!("u{i}"), 2 + i).await.0, StatusCode::OK);
    }
    let four = spawn_journaled_on(game(4), one.keys.clone()).await;
    let jobs = four.journal_jobs(&client, &bucket, Arc::default());
    assert_eq!(jobs.run(json!({"reshard": {"board": "game"}}), far()).await.unwrap()["status"], "complete");
    // A switch killed once it finished shard 0: the others still claimed and fenced.
    let shards = four.keys.layout("game", 4).all();
    let mut conn = four.redis.clone();
    for (i, shard) in shards.iter().enumerate() {
        let _: () = redis::cmd("HSET").arg(shard.reshard_checkpoint()).arg("from").arg(1).query_async(&mut conn).await.unwrap();
        if i > 0 {
            let _: () = redis::cmd("HSET").arg(shard.restore_claims()).arg(shard.guard()).arg("1").query_async(&mut conn).await.unwrap();
            let _: () = redis::cmd("HSET").arg(shard.guard()).arg("fence").arg(1).query_async(&mut conn).await.unwrap();
        }
    }
    // Shard 0 loses its all-time set; its next write finds the loss and fences it.
    let user = (0..8).map(|u| format!("u{u}")).find(|user| four.keys.layout("game", 4).shard_of(user) == 0).expect("a user on shard 0");
    let _: () = redis::cmd("DEL").arg(shards[0].relative(":z:all:all")).query_async(&mut conn).await.unwrap();
    let (status, body) = submit(&four, "late", &user, 50).await;
    assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::SERVICE_UNAVAILABLE, Some("board_restoring")), "{body}");

    assert_eq!(jobs.run(json!({"reshard": {"board": "game"}}), far()).await.unwrap()["status"], "complete");
    let fields: Vec<String> = redis::cmd("HKEYS").arg(shards[0].guard()).query_async(&mut conn).await.unwrap();
    for field in ["fence", "lost", "kept|all:all"] {
        assert!(fields.iter().any(|f| f == field), "shard 0 keeps {field}: {fields:?}");
    }
    let (status, body) = submit(&four, "late", &user, 50).await;
    assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::SERVICE_UNAVAILABLE, Some("board_restoring")), "{body}");
    for shard in &shards[1..] {
        let claimed: bool = redis::cmd("EXISTS").arg(shard.restore_claims()).query_async(&mut conn).await.unwrap();
        assert!(!claimed, "the others are finished");
    }
}

/// A void moved by a reshard stands where it stood among the user's writes: its `through` names
/// the old layout's journal, whose ids the moved lines no longer have (they are appended anew),
/// so read as it was it put the void before every moved write, and a second void of the same
/// window took again what the first took, from points earned outside it (found by review).
#[tokio::test]
async fn a_void_of_a_window_already_voided_takes_nothing_after_a_reshard() {
    let posts = |shards: u32| {
        Config::parse(&format!(
            "[[boards]]\nname = \"posts\"\nkind = \"cumulative\"\ntimezone = \"UTC\"\nperiods = [\"all\"]\ntop = 10\nshards = {shards}\n\
             rules = [{{ action = \"post\", points = 1, scope = \"none\" }}]\n"
        ))
        .unwrap()
    };
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let one = spawn_journaled(posts(1)).await;
    let start = Utc::now() - Duration::hours(1);
    let post = async |app: &TestApp, id: &str, minute: i64| {
        app.set_now(start + Duration::minutes(minute));
        let (status, body) = app.event(json!({"event_id": id, "user_id": "u1", "action": "post"})).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    };
    let void = async |app: &TestApp, id: &str| {
        app.set_now(start + Duration::minutes(30));
        let router = app.void_router(&client, Some(&bucket), 30);
        let body = json!({"void_id": id, "from": start, "to": start + Duration::minutes(10), "reason": "spam"});
        let (status, reply) =
            standings_tests::journal::call(&router, Method::POST, "/v1/admin/boards/posts/users/u1/void", &body, ADMIN).await;
        assert_eq!(status, StatusCode::OK, "{reply}");
        reply["periods"].as_array().unwrap().iter().map(|p| p["delta"].as_i64().unwrap()).sum::<i64>()
    };
    post(&one, "p1", 5).await;
    assert_eq!(void(&one, "v1").await, -1, "the first void takes the post in its window");
    post(&one, "p2", 20).await;
    let two = spawn_journaled_on(posts(2), one.keys.clone()).await;
    let report = two.journal_jobs(&client, &bucket, Arc::default()).run(json!({"reshard": {"board": "posts"}}), far()).await.unwrap();
    assert_eq!(report["status"], "complete", "{report}");
    assert_eq!(void(&two, "v2").await, 0, "the window was voided: the later post is not taken");
    let (_, read) = two.get("/v1/boards/posts/users/u1?period=all").await;
    assert_eq!(read["score"], 1, "{read}");
}

/// The journal's bucket, counting each object read (`get`) by name.
struct Counted(S3Objects, Arc<Mutex<std::collections::HashMap<String, usize>>>);

impl journal::Objects for Counted {
    async fn put_new(&self, key: &str, body: Vec<u8>) -> Result<journal::Put, journal::ObjectError> {
        self.0.put_new(key, body).await
    }

    async fn get(&self, key: &str) -> Result<Vec<u8>, journal::ObjectError> {
        *self.1.lock().unwrap().entry(key.to_owned()).or_default() += 1;
        self.0.get(key).await
    }

    async fn list(&self, prefix: &str) -> Result<Vec<String>, journal::ObjectError> {
        self.0.list(prefix).await
    }
}

/// Issue 58, "streaming": a move reads one object at a time and its check stops at the deadline
/// and goes on. Before, every invocation read every object of the old layout into memory,
/// resumes included, and the check ran whole. A resumed move reads the objects again from the
/// first (their lines up to the last one moved skipped): objects may overlap after a rollback,
/// and skipping one whose successor starts before that line lost its later lines
/// (`reshard_recovery::a_move_resumed_over_overlapping_objects_moves_every_line_once`).
#[tokio::test]
async fn a_move_resumed_in_many_invocations_reads_each_object_and_moves_each_line_once() {
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let one = spawn_journaled(game(1)).await;
    let jobs = one.journal_jobs(&client, &bucket, Arc::default());
    // Six drained objects of five lines each.
    for object in 0..6 {
        for i in 0..5 {
            assert_eq!(submit(&one, &format!("s{object}-{i}"), &format!("u{i}"), 1 + object).await.0, StatusCode::OK);
        }
        jobs.run(json!({"drain": {}}), far()).await.expect("a drain");
    }
    let before = reads(&one).await;
    let two = spawn_journaled_on(game(2), one.keys.clone()).await;
    let reads_of = Arc::new(Mutex::new(std::collections::HashMap::new()));
    let resharder = journal::Resharder::new(
        two.config.clone(),
        two.keys.clone(),
        two.store.clone(),
        Counted(S3Objects::new(client.clone(), &bucket), reads_of.clone()),
    );
    let (mut invocations, mut checking) = (0, 0);
    // Every invocation past its deadline: each moves a line and stops, then each checks a period.
    loop {
        let report = resharder.reshard("game", Utc::now() - Duration::seconds(1)).await.unwrap();
        checking += usize::from(report.periods_checked > 0);
        if report.status == Status::Complete {
            break;
        }
        invocations += 1;
        assert!(invocations < 100, "the move ends");
    }
    assert_eq!(checking, 2, "the check too stops at the deadline and goes on where it stopped: a period an invocation");
    two.set_now(Utc::now());
    assert_eq!(reads(&two).await, before, "every read as before the move");
    let reads_of = reads_of.lock().unwrap().clone();
    let mut names: Vec<&String> = reads_of.keys().collect();
    names.sort_by_key(|name| standings::archive::objects::object_order(name));
    assert_eq!(names.len(), 6, "{reads_of:?}");
    assert!(invocations >= 25, "{invocations} invocations");
}

/// The verify step, paged: a new layout holding a member twice (in a shard not its user's) and
/// missing another holds as many members as the old one, every one at its old composite, and is
/// still refused (the board stays fenced, nothing switched).
#[tokio::test]
async fn a_new_layout_holding_a_member_twice_is_refused() {
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let one = spawn_journaled(game(1)).await;
    for i in 0..6 {
        assert_eq!(submit(&one, &format!("s{i}"), &format!("u{i}"), 1 + i).await.0, StatusCode::OK);
    }
    let two = spawn_journaled_on(game(2), one.keys.clone()).await;
    let jobs = two.journal_jobs(&client, &bucket, Arc::default());
    // Past its deadline, the invocation that moves the last line checks one period and stops.
    let past = || Utc::now() - Duration::seconds(1);
    loop {
        let report = jobs.run(json!({"reshard": {"board": "game"}}), past()).await.unwrap();
        assert_ne!(report["status"], "complete", "the check stops at its deadline: {report}");
        if report["periods_checked"].as_u64() > Some(0) {
            break;
        }
    }
    // The period not checked yet: u0's entry copied into the other shard, another user's dropped.
    let layout = two.keys.layout("game", 2);
    let day: Vec<String> = two.written_keys().await.into_iter().filter(|key| key.contains("{game:") && key.contains(":z:day:")).collect();
    let relative = layout.shard(0).relative_of(&day[0]).or_else(|| layout.shard(1).relative_of(&day[0])).unwrap().to_owned();
    let home = layout.shard_of("u0");
    let (own, other) = (layout.shard(home).relative(&relative), layout.shard(1 - home).relative(&relative));
    let mut conn = two.redis.clone();
    let composite: f64 = redis::cmd("ZSCORE").arg(&own).arg("u0").query_async(&mut conn).await.unwrap();
    let dropped = (1..6).map(|i| format!("u{i}")).find(|user| layout.shard_of(user) == 1 - home).unwrap();
    let kept: f64 = redis::cmd("ZSCORE").arg(&other).arg(&dropped).query_async(&mut conn).await.unwrap();
    let _: () = redis::cmd("ZREM").arg(&other).arg(&dropped).query_async(&mut conn).await.unwrap();
    let _: () = redis::cmd("ZADD").arg(&other).arg(composite).arg("u0").query_async(&mut conn).await.unwrap();
    let error = jobs.run(json!({"reshard": {"board": "game"}}), far()).await.unwrap_err();
    assert!(format!("{error:?}").contains("outside its user's shard"), "{error:?}");
    assert_eq!(submit(&two, "n1", "u1", 1).await.0, StatusCode::SERVICE_UNAVAILABLE, "not switched: writes still refused");
    // Repaired by hand, run again: a failed check is not resumed, every period is compared again.
    let _: () = redis::cmd("ZREM").arg(&other).arg("u0").query_async(&mut conn).await.unwrap();
    let _: () = redis::cmd("ZADD").arg(&other).arg(kept).arg(&dropped).query_async(&mut conn).await.unwrap();
    let report = jobs.run(json!({"reshard": {"board": "game"}}), far()).await.unwrap();
    assert_eq!((report["status"].as_str(), report["periods_checked"].as_u64()), (Some("complete"), Some(2)), "{report}");
}

/// A loss fenced while the board moves (a rollback the drain found, a lost set a write found)
/// stops the move at its next invocation, the fence left as it is: the board is restored first,
/// as a move that would start so is refused (its switch would free that fence with the old
/// layout).
#[tokio::test]
async fn a_loss_fenced_while_the_board_moves_stops_the_move() {
    let client = s3().await;
    let bucket = new_bucket(&client).await;
    let one = spawn_journaled(game(1)).await;
    for i in 0..12 {
        assert_eq!(submit(&one, &format!("f{i}"), &format!("u{i}"), 3).await.0, StatusCode::OK);
    }
    let eight = spawn_journaled_on(game(8), one.keys.clone()).await;
    let jobs = eight.journal_jobs(&client, &bucket, Arc::new(Mutex::new(Vec::new())));
    let past = || Utc::now() - Duration::seconds(1);
    let first = jobs.run(json!({"reshard": {"board": "game"}}), past()).await.unwrap();
    assert_eq!(first["status"], "in_progress", "{first}");
    let guard = one.keys.layout("game", 1).shard(0).guard();
    let mut conn = one.redis.clone();
    let () = redis::cmd("HSET").arg(&guard).arg("fence").arg(1).arg("lost").arg(1).query_async(&mut conn).await.unwrap();
    let refused = jobs.run(json!({"reshard": {"board": "game"}}), past()).await.unwrap_err();
    assert!(format!("{refused:?}").contains("lost or fenced while it moved"), "{refused:?}");
    let fence: Option<String> = redis::cmd("HGET").arg(&guard).arg("fence").query_async(&mut conn).await.unwrap();
    assert_eq!(fence.as_deref(), Some("1"), "the loss's fence stays");
    let (status, body) = one.get("/v1/boards/game/top?period=all").await;
    assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::SERVICE_UNAVAILABLE, Some("board_restoring")), "{body}");
}
