//! The `queue` function (docs/queue.md) against real Redis and moto's SQS through the real SDK:
//! SQS events in the shape Lambda delivers them, a partial batch failure, the dead-letter
//! queue with reasons, a take-back that overtakes its give, an outage, and a producer nobody
//! here wrote (boto3) feeding a queue that the test drains as the event source mapping would.

use serde_json::{Value, json};
use standings::redis::settings::RedisSettings;
use standings::redis::store::Store;
use standings_tests::queue::{drain, new_queue, record, sqs, sqs_event};
use standings_tests::{ADMIN, day, season, spawn_ingest};

fn body(value: Value) -> String {
    value.to_string()
}

async fn dead_letters() -> (aws_sdk_sqs::Client, queue::DeadLetters) {
    let client = sqs().await;
    let url = new_queue(&client, "dlq").await;
    (client.clone(), queue::DeadLetters::new(client, url))
}

fn failures(response: &aws_lambda_events::sqs::SqsBatchResponse) -> Vec<&str> {
    response.batch_item_failures.iter().map(|f| f.item_identifier.as_str()).collect()
}

#[tokio::test]
async fn a_mixed_batch_applies_once_and_dead_letters_what_never_will_with_its_reason() {
    let app = spawn_ingest().await;
    let (status, ban) = app.call(axum::http::Method::POST, "/v1/admin/users/mallory/ban", "", ADMIN).await;
    assert_eq!(status, 200, "{ban}");
    let (client, dlq) = dead_letters().await;
    let dlq_url = dlq.url().to_owned();
    let queue = app.queue(dlq);
    let comment = body(json!({"event_id": "c1", "user_id": "ann", "action": "comment", "target": "a1"}));
    let records = vec![
        record("m1", &comment, 1),
        record("m2", &comment, 1),
        record("m3", &body(json!({"kind": "event", "event_id": "l1", "user_id": "bob", "action": "learning"})), 1),
        record("m4", &body(json!({"kind": "score", "board": "high-scores", "event_id": "s1", "user_id": "cy", "score": 420})), 1),
        record("m5", &body(json!({"kind": "sign_in", "event_id": "g1", "user_id": "bob"})), 1),
        record("m6", "{not json", 1),
        record("m7", &body(json!({"event_id": "x1", "user_id": "ann", "action": "levitate"})), 1),
        record("m8", &body(json!({"event_id": "c1", "user_id": "ann", "action": "praise", "target": "a1"})), 1),
        record("m9", &body(json!({"event_id": "b1", "user_id": "mallory", "action": "comment", "target": "a2"})), 1),
        record("m10", &body(json!({"kind": "score", "board": "nope", "event_id": "s2", "user_id": "cy", "score": 1})), 1),
    ];
    let response = queue.handle(sqs_event(records)).await;
    assert_eq!(failures(&response), Vec::<&str>::new(), "nothing here passes with time");

    assert_eq!(app.points("activity", day("2026-11-22"), "ann").await, Some(3), "the comment once, though delivered twice");
    assert_eq!(app.points("points", season("2026-11-22"), "bob").await, Some(11), "learning 10 and a sign-in 1");
    assert_eq!(app.points("activity", day("2026-11-22"), "mallory").await, None, "banned");
    let (_, cy) = app.get("/v1/boards/high-scores/users/cy?period=all").await;
    assert_eq!(cy["score"], 420, "{cy}");

    let mut dead = drain(&client, &dlq_url).await;
    dead.sort();
    let codes: Vec<(&str, &str)> = dead.iter().map(|(body, code, _)| (body.as_str(), code.as_str())).collect();
    let mut expected = vec![
        ("{not json", "malformed"),
        (r#"{"action":"levitate","event_id":"x1","user_id":"ann"}"#, "unknown_action"),
        (r#"{"action":"praise","event_id":"c1","target":"a1","user_id":"ann"}"#, "idempotency_conflict"),
        (r#"{"action":"comment","event_id":"b1","target":"a2","user_id":"mallory"}"#, "user_banned"),
        (r#"{"board":"nope","event_id":"s2","kind":"score","score":1,"user_id":"cy"}"#, "unknown_board"),
    ];
    expected.sort();
    assert_eq!(codes, expected);
    assert!(dead.iter().all(|(_, _, reason)| !reason.is_empty()), "every dead letter says why: {dead:?}");
}

#[tokio::test]
async fn a_take_back_that_overtakes_its_give_waits_for_it_and_nothing_is_left_applied() {
    let app = spawn_ingest().await;
    let (client, dlq) = dead_letters().await;
    let dlq_url = dlq.url().to_owned();
    let queue = app.queue(dlq);
    let take = body(json!({"event_id": "unlike-1", "user_id": "ann", "action": "praise", "target": "a1", "active": false}));
    let give = body(json!({"event_id": "like-1", "user_id": "ann", "action": "praise", "target": "a1"}));

    let response = queue.handle(sqs_event(vec![record("t", &take, 1)])).await;
    assert_eq!(failures(&response), ["t"], "handed back to wait for its give");
    assert!(app.written_keys().await.iter().all(|k| !k.contains(":evt:")), "no marker: its redelivery is a first delivery");

    let response = queue.handle(sqs_event(vec![record("g", &give, 1)])).await;
    assert_eq!(failures(&response), Vec::<&str>::new());
    assert_eq!(app.points("activity", day("2026-11-22"), "ann").await, Some(2));

    let response = queue.handle(sqs_event(vec![record("t", &take, 2)])).await;
    assert_eq!(failures(&response), Vec::<&str>::new());
    assert_eq!(app.points("activity", day("2026-11-22"), "ann").await, None, "the like was taken back");

    // A take-back whose give never comes stops waiting after TAKE_BACK_WAITS receives.
    let orphan = body(json!({"event_id": "unlike-2", "user_id": "bob", "action": "praise", "target": "a9", "active": false}));
    let response = queue.handle(sqs_event(vec![record("o", &orphan, queue::TAKE_BACK_WAITS)])).await;
    assert_eq!(failures(&response), Vec::<&str>::new(), "counted as nothing to take back");
    assert!(drain(&client, &dlq_url).await.is_empty());
}

#[tokio::test]
async fn messages_during_a_redis_outage_are_handed_back_then_apply_once() {
    let app = spawn_ingest().await;
    let (client, dlq) = dead_letters().await;
    let dlq_url = dlq.url().to_owned();
    let comment = body(json!({"event_id": "c1", "user_id": "ann", "action": "comment", "target": "a1"}));
    let score = body(json!({"kind": "score", "board": "high-scores", "event_id": "s1", "user_id": "ann", "score": 7}));
    let sign_in = body(json!({"kind": "sign_in", "event_id": "g1", "user_id": "ann"}));
    let batch = |count| sqs_event(vec![record("m1", &comment, count), record("m2", &score, count), record("m3", &sign_in, count)]);
    let unreachable = Store::connect(&RedisSettings::standalone("redis://127.0.0.1:1")).unwrap();
    let response = app.queue_on(unreachable, dlq.clone()).handle(batch(1)).await;
    assert_eq!(failures(&response), ["m1", "m2", "m3"], "every message redelivered, none dead");
    assert!(drain(&client, &dlq_url).await.is_empty());

    for count in [2, 3] {
        let response = app.queue(dlq.clone()).handle(batch(count)).await;
        assert_eq!(failures(&response), Vec::<&str>::new());
    }
    assert_eq!(app.points("activity", day("2026-11-22"), "ann").await, Some(3), "applied once over two deliveries");
    assert_eq!(app.points("points", season("2026-11-22"), "ann").await, Some(1));
    assert!(drain(&client, &dlq_url).await.is_empty());
}

/// boto3 sends a mixed load, take-backs before their gives, duplicates, poison messages; the
/// first rounds find Redis down. Boards end with exact totals, every poison message is in the
/// dead-letter queue with its reason, nothing is lost or applied twice.
#[tokio::test]
async fn a_boto3_producers_mixed_load_ends_exact_through_an_outage() {
    let app = spawn_ingest().await;
    let (client, dlq) = dead_letters().await;
    let dlq_url = dlq.url().to_owned();
    let source = standings_tests::queue::new_source_queue(&client).await;
    let mut bodies = Vec::new();
    for i in 0..30 {
        let comment =
            body(json!({"event_id": format!("c-u{i}"), "user_id": format!("u{i}"), "action": "comment", "target": format!("a{i}")}));
        bodies.push(comment.clone());
        bodies.push(comment);
    }
    for i in 0..10 {
        // The take-back first: the queue does not keep order.
        let praise = |id: &str, active: bool| {
            body(json!({"event_id": format!("{id}-u{i}"), "user_id": format!("u{i}"), "action": "praise", "target": "p", "active": active}))
        };
        bodies.push(praise("unpraise", false));
        bodies.push(praise("praise", true));
        bodies.push(body(json!({"kind": "event", "event_id": format!("l-u{i}"), "user_id": format!("u{i}"), "action": "learning"})));
    }
    for i in 10..15 {
        bodies.push(body(json!({"kind": "sign_in", "event_id": format!("g-u{i}"), "user_id": format!("u{i}")})));
    }
    for i in 20..25 {
        bodies.push(body(
            json!({"kind": "score", "board": "high-scores", "event_id": format!("s-u{i}"), "user_id": format!("u{i}"), "score": 100 + i}),
        ));
    }
    // Ids already taken over HTTP, so the queue's other payloads for them conflict whatever
    // order the queue delivers in.
    for id in ["k0", "k1"] {
        let (status, taken) = app.event(json!({"event_id": id, "user_id": "u40", "action": "page_view", "target": id})).await;
        assert_eq!(status, 200, "{taken}");
    }
    let poison = [
        "{oops".to_owned(),
        "[]".to_owned(),
        body(json!({"kind": "bonus", "event_id": "k9"})),
        body(json!({"event_id": "k0", "user_id": "u40", "action": "page_view", "target": "elsewhere"})),
        body(json!({"event_id": "k1", "user_id": "u40", "action": "comment", "target": "k1"})),
        body(json!({"event_id": "x1", "user_id": "u1", "action": "levitate"})),
    ];
    bodies.extend(poison.iter().cloned());
    standings_tests::queue::produce_with_boto3(&source, &bodies);

    let down = Store::connect(&RedisSettings::standalone("redis://127.0.0.1:1")).unwrap();
    let rounds = standings_tests::queue::run_mapping(&client, &source, |round| {
        if round < 3 { app.queue_on(down.clone(), app_dlq(&client, &dlq_url)) } else { app.queue(app_dlq(&client, &dlq_url)) }
    })
    .await;
    assert!(rounds > 3, "{rounds}");

    for i in 0..30 {
        assert_eq!(app.points("activity", day("2026-11-22"), &format!("u{i}")).await, Some(3), "u{i}: one comment, praise taken back");
    }
    for i in 0..10 {
        assert_eq!(app.points("points", season("2026-11-22"), &format!("u{i}")).await, Some(10), "u{i}");
    }
    for i in 10..15 {
        assert_eq!(app.points("points", season("2026-11-22"), &format!("u{i}")).await, Some(1), "u{i}");
    }
    for i in 20..25 {
        let (_, standing) = app.get(&format!("/v1/boards/high-scores/users/u{i}?period=all")).await;
        assert_eq!(standing["score"], 100 + i, "{standing}");
    }
    assert_eq!(app.points("activity", day("2026-11-22"), "u40").await, Some(2), "the two page views, once each");
    let mut dead: Vec<(String, String)> = drain(&client, &dlq_url).await.into_iter().map(|(body, code, _)| (body, code)).collect();
    dead.sort();
    let mut expected: Vec<(String, String)> = poison
        .iter()
        .cloned()
        .zip(["malformed", "malformed", "malformed", "idempotency_conflict", "idempotency_conflict", "unknown_action"].map(String::from))
        .collect();
    expected.sort();
    assert_eq!(dead, expected);
}

fn app_dlq(client: &aws_sdk_sqs::Client, url: &str) -> queue::DeadLetters {
    queue::DeadLetters::new(client.clone(), url)
}

/// An event two boards take, one of which rate-limits it: handed back (the other board answers
/// the redelivery as a duplicate), never acknowledged with one board's share missing.
#[tokio::test]
async fn an_event_one_of_its_boards_refuses_for_now_is_handed_back_whole() {
    let board = |name: &str, rule: &str| {
        format!(
            "[[boards]]\nname = \"{name}\"\nkind = \"cumulative\"\ntimezone = \"UTC\"\nperiods = [\"all\"]\ntop = 10\nrules = [{rule}]\n"
        )
    };
    let config = standings::domain::config::Config::parse(&format!(
        "{}{}",
        board("plays", r#"{ action = "play", points = 1, scope = "none" }"#),
        board("limited", r#"{ action = "play", points = 1, scope = "none", rate_limit = { max = 1, per_secs = 60 } }"#)
    ))
    .unwrap();
    let app = standings_tests::spawn_ingest_with(config).await;
    let (client, dlq) = dead_letters().await;
    let dlq_url = dlq.url().to_owned();
    let queue = app.queue(dlq);
    let play = |id: &str| body(json!({"event_id": id, "user_id": "ann", "action": "play"}));
    let response = queue.handle(sqs_event(vec![record("m1", &play("p1"), 1), record("m2", &play("p2"), 1)])).await;
    assert_eq!(failures(&response), ["m2"], "p2 is rate-limited on one of its boards");
    // What Lambda reads: the partial batch response's JSON, as ReportBatchItemFailures wants it.
    assert_eq!(serde_json::to_value(&response).unwrap(), json!({"batchItemFailures": [{"itemIdentifier": "m2"}]}));
    let all = || standings::domain::period::Period::containing(standings::domain::period::PeriodKind::All, app.now(), chrono_tz::UTC);
    assert_eq!(app.points("plays", all(), "ann").await, Some(2), "the unlimited board took both");
    assert_eq!(app.points("limited", all(), "ann").await, Some(1));
    assert!(drain(&client, &dlq_url).await.is_empty());
}

/// An event one board took and another refused for good (its season frozen for archiving):
/// dead-lettered with that board's reason, never acknowledged as if all had gone well.
#[tokio::test]
async fn an_event_one_of_its_boards_refuses_for_good_is_dead_lettered_naming_the_boards() {
    let config = standings::domain::config::Config::parse(
        "[[boards]]\nname = \"plays\"\nkind = \"cumulative\"\ntimezone = \"UTC\"\nperiods = [\"all\"]\ntop = 10\n\
         rules = [{ action = \"play\", points = 1, scope = \"none\" }]\n\
         [[boards]]\nname = \"seasonal\"\nkind = \"cumulative\"\ntimezone = \"UTC\"\nperiods = [\"season\"]\ntop = 10\n\
         rules = [{ action = \"play\", points = 1, scope = \"none\" }]\n",
    )
    .unwrap();
    let app = standings_tests::spawn_ingest_with(config).await;
    let frozen = standings::domain::period::Period::containing(standings::domain::period::PeriodKind::Season, app.now(), chrono_tz::UTC);
    let mut conn = app.redis.clone();
    let () = redis::cmd("HSET")
        .arg(app.keys.board("seasonal").guard())
        .arg(format!("{}season:{}", standings::domain::guard::CLOSED, frozen.id))
        .arg(1)
        .query_async(&mut conn)
        .await
        .unwrap();
    let (client, dlq) = dead_letters().await;
    let dlq_url = dlq.url().to_owned();
    let play = body(json!({"event_id": "p1", "user_id": "ann", "action": "play"}));
    let response = app.queue(dlq).handle(sqs_event(vec![record("m1", &play, 1)])).await;
    assert_eq!(failures(&response), Vec::<&str>::new());
    let dead = drain(&client, &dlq_url).await;
    assert_eq!(dead.len(), 1, "{dead:?}");
    let (dead_body, code, reason) = &dead[0];
    assert_eq!((dead_body.as_str(), code.as_str()), (play.as_str(), "period_closed"));
    assert!(reason.contains("seasonal") && reason.contains("applied on plays"), "{reason}");
}

/// A batch's sign-ins go to Redis as one script call (the sign-in board's chunk), each
/// answered as it would be alone: applied once, a redelivery a duplicate, a conflict dead.
#[tokio::test]
async fn the_sign_ins_of_a_batch_are_one_script_call_each_applied_once() {
    let app = spawn_ingest().await;
    let (client, dlq) = dead_letters().await;
    let dlq_url = dlq.url().to_owned();
    let queue = app.queue(dlq);
    let sign_in = |id: &str, user: &str| body(json!({"kind": "sign_in", "event_id": id, "user_id": user}));
    let records = vec![
        record("m1", &sign_in("s1", "ann"), 1),
        record("m2", &sign_in("s2", "bob"), 1),
        record("m3", &sign_in("s1", "ann"), 2),
        record("m4", &sign_in("s3", "ann"), 1),
        record("m5", &sign_in("s2", "cy"), 1),
    ];
    // The first call in a fresh Redis also loads the script (NOSCRIPT, SCRIPT LOAD, retry).
    assert_eq!(app.post("/v1/sign-ins", &json!({"event_id": "warm", "user_id": "warm"})).await.0, 200);
    // A cold container reads the boards' catalog once, then serves from it (docs/runtime-boards.md).
    queue.catalog.current().await.unwrap();
    let before = app.store.round_trips();
    let response = queue.handle(sqs_event(records)).await;
    assert_eq!(failures(&response), Vec::<&str>::new());
    assert_eq!(app.store.round_trips() - before, 1, "one script call for the batch's sign-ins");
    for user in ["ann", "bob"] {
        assert_eq!(app.points("points", season("2026-11-22"), user).await, Some(1), "{user} signed in once");
        let (_, calendar) = app.get(&format!("/v1/users/{user}/sign-ins")).await;
        assert_eq!(calendar["streak"], 1, "{calendar}");
    }
    assert_eq!(app.points("points", season("2026-11-22"), "cy").await, None, "s2 was bob's");
    let dead = drain(&client, &dlq_url).await;
    let codes: Vec<&str> = dead.iter().map(|(_, code, _)| code.as_str()).collect();
    assert_eq!(codes, ["idempotency_conflict"], "{dead:?}");
}

/// Messages that can never apply for the score's range or the event window are dead-lettered
/// with their reason and counted in `MessagesDeadLettered` by code; the rest applies.
#[tokio::test]
async fn out_of_range_and_too_late_messages_are_dead_lettered_and_counted() {
    let app = spawn_ingest().await;
    let (client, dlq) = dead_letters().await;
    let dlq_url = dlq.url().to_owned();
    let (queue, metrics) = app.queue_with_metrics(dlq);
    let late = (app.now() - chrono::Duration::hours(2)).to_rfc3339();
    let records = vec![
        record(
            "m1",
            &body(json!({"kind": "score", "board": "high-scores", "event_id": "s1", "user_id": "cy", "score": 2_000_000_000u64})),
            1,
        ),
        record("m2", &body(json!({"event_id": "l1", "user_id": "ann", "action": "learning", "occurred_at": late})), 1),
        record("m3", &body(json!({"event_id": "l2", "user_id": "ann", "action": "learning"})), 1),
    ];
    let response = queue.handle(sqs_event(records)).await;
    assert_eq!(failures(&response), Vec::<&str>::new());
    assert_eq!(app.points("points", season("2026-11-22"), "ann").await, Some(10), "l2 applied, l1 not");
    let (status, cy) = app.get("/v1/boards/high-scores/users/cy?period=all").await;
    assert_eq!((status.as_u16(), &cy["score"]), (200, &Value::Null), "{cy}");
    let mut codes: Vec<String> = drain(&client, &dlq_url).await.into_iter().map(|(_, code, _)| code).collect();
    codes.sort();
    assert_eq!(codes, ["out_of_range", "too_late"]);
    let mut counted: Vec<String> = metrics
        .lock()
        .unwrap()
        .iter()
        .filter(|line| line["MessagesDeadLettered"] == 1.0)
        .map(|line| line["Code"].as_str().unwrap().to_owned())
        .collect();
    counted.sort();
    assert_eq!(counted, ["out_of_range", "too_late"]);
}

/// One sign-in of a batch that Redis cannot apply (its calendar key holds another type) fails
/// alone: the ones around it apply once, and only it goes to the dead-letter queue.
#[tokio::test]
async fn a_sign_in_redis_cannot_apply_fails_alone_in_its_chunk() {
    let app = spawn_ingest().await;
    let (client, dlq) = dead_letters().await;
    let dlq_url = dlq.url().to_owned();
    let queue = app.queue(dlq);
    let calendar = app.keys.board("points").sign_ins("mallory", "2026-11");
    let () = redis::cmd("HSET").arg(&calendar).arg("not").arg("a bitmap").query_async(&mut app.redis.clone()).await.unwrap();
    let sign_in = |id: &str, user: &str| body(json!({"kind": "sign_in", "event_id": id, "user_id": user}));
    let records =
        vec![record("m1", &sign_in("s1", "ann"), 1), record("m2", &sign_in("s2", "mallory"), 1), record("m3", &sign_in("s3", "bob"), 1)];
    let response = queue.handle(sqs_event(records)).await;
    assert_eq!(failures(&response), Vec::<&str>::new(), "a programming error is not worth retrying");
    for user in ["ann", "bob"] {
        assert_eq!(app.points("points", season("2026-11-22"), user).await, Some(1), "{user} signed in once");
    }
    let dead = drain(&client, &dlq_url).await;
    let codes: Vec<(&str, &str)> = dead.iter().map(|(body, code, _)| (body.as_str(), code.as_str())).collect();
    assert_eq!(codes, [(r#"{"event_id":"s2","kind":"sign_in","user_id":"mallory"}"#, "internal")], "{dead:?}");
}
