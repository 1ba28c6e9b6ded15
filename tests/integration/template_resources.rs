//! infra/template.yaml's resources against what the functions do (see `template`): alarms and
//! their topic, throttles, least-privilege policies, logs, the journal bucket, the event bus,
//! the season table, the queue's numbers and the shadow keys' life.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::template::*;

/// Every alarm notifies the stack's topic: none can fire unheard.
#[test]
fn every_alarm_notifies_the_alarm_topic() {
    let template = template();
    assert_eq!(resource(&template, "AlarmTopic")["Type"], "AWS::SNS::Topic");
    for (name, alarm) in resources_of_type(&template, "AWS::CloudWatch::Alarm") {
        assert_eq!(alarm["Properties"]["AlarmActions"], json!([reference("AlarmTopic")]), "{name}");
    }
}

/// The API throttles every route by default, and each function has a concurrency parameter
/// (reserved when set), so reads cannot starve the writers or exhaust Redis connections.
#[test]
fn the_api_is_throttled_and_each_function_s_concurrency_can_be_reserved() {
    let template = template();
    let api = &resource(&template, "HttpApi")["Properties"]["DefaultRouteSettings"];
    assert_eq!(api["ThrottlingBurstLimit"], reference("ApiThrottlingBurstLimit"));
    assert_eq!(api["ThrottlingRateLimit"], reference("ApiThrottlingRateLimit"));
    for (name, function) in resources_of_type(&template, "AWS::Serverless::Function") {
        let parameter = format!("{}ReservedConcurrency", name.trim_end_matches("Function"));
        assert!(template["Parameters"][&parameter]["Default"].as_i64().is_some_and(|d| d > 0), "{parameter} has a default");
        let reserved = function["Properties"]["ReservedConcurrentExecutions"].to_string();
        assert!(reserved.contains(&parameter), "{name}: {reserved}");
    }
}

fn statements(function: &Value) -> Vec<Value> {
    let policies = function["Properties"]["Policies"].as_array().cloned().unwrap_or_default();
    policies.iter().flat_map(|p| p["Statement"].as_array().expect("inline statements only").clone()).collect()
}

/// Only `seasons` (reads) and `archive` touch DynamoDB, only the season table; only `queue`
/// touches SQS: what its event source mapping needs of the event queue, and sending to the
/// dead-letter queue; only `journal` (and `void`, reading) touch S3's objects, only the journal's;
/// `ingest`, `query` and `queue` list it (one key, at start: docs/journal.md#fence); no wildcard
/// actions; every function may read the Redis URL secret (once, at start) and nothing else beyond
/// logs and VPC access.
#[test]
fn each_function_gets_only_the_permissions_it_uses() {
    let template = template();
    const SECRET: &str = "secretsmanager:GetSecretValue";
    let allowed: BTreeMap<&str, &[&str]> = BTreeMap::from([
        (INGEST, &[SECRET, "s3:ListBucket"][..]),
        (HOTNESS, &[SECRET][..]),
        (QUERY, &[SECRET, "s3:ListBucket"][..]),
        (SEASONS, &[SECRET, "dynamodb:GetItem", "dynamodb:Query"][..]),
        (
            ARCHIVE,
            &[
                SECRET,
                "dynamodb:GetItem",
                "dynamodb:PutItem",
                "dynamodb:UpdateItem",
                "dynamodb:BatchWriteItem",
                "dynamodb:Query",
                "events:PutEvents",
            ][..],
        ),
        (
            "QueueFunction",
            &[SECRET, "s3:ListBucket", "sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:SendMessage"][..],
        ),
        ("JournalFunction", &[SECRET, "s3:PutObject", "s3:GetObject", "s3:ListBucket", "events:PutEvents"][..]),
        (VOID, &[SECRET, "s3:GetObject", "s3:ListBucket"][..]),
    ]);
    let functions = resources_of_type(&template, "AWS::Serverless::Function");
    assert_eq!(functions.iter().map(|(n, _)| n.as_str()).collect::<BTreeSet<_>>(), allowed.keys().copied().collect());
    for (name, function) in functions {
        let mut granted = BTreeSet::new();
        for statement in statements(function) {
            assert_eq!(statement["Effect"], "Allow");
            for action in statement["Action"].as_array().unwrap() {
                granted.insert(action.as_str().unwrap().to_owned());
            }
            let resources = match &statement["Resource"] {
                Value::Array(items) => items.clone(),
                one => vec![one.clone()],
            };
            let season_table = [json!({"Fn::GetAtt": "ArchiveTable.Arn"}), json!({"Fn::Sub": "${ArchiveTable.Arn}/index/*"})];
            let only = if statement["Action"] == json!([SECRET]) {
                vec![reference("RedisUrlSecretArn")]
            } else if statement["Action"] == json!(["events:PutEvents"]) {
                vec![json!({"Fn::GetAtt": "NotificationBus.Arn"})]
            } else if statement["Action"] == json!(["sqs:SendMessage"]) {
                vec![json!({"Fn::GetAtt": "DeadLetterQueue.Arn"})]
            } else if statement["Action"].to_string().contains("sqs:") {
                vec![json!({"Fn::GetAtt": "EventQueue.Arn"})]
            } else if statement["Action"] == json!(["s3:ListBucket"]) {
                assert_eq!(statement["Condition"], json!({"StringLike": {"s3:prefix": "journal/*"}}), "{name}");
                vec![json!({"Fn::GetAtt": "JournalBucket.Arn"})]
            } else if statement["Action"].to_string().contains("s3:") {
                vec![json!({"Fn::Sub": "${JournalBucket.Arn}/journal/*"})]
            } else {
                season_table.to_vec()
            };
            assert!(
                resources.iter().all(|r| only.contains(r)),
                "{name}: only the Redis URL secret, the season table and its indexes, the queues: {resources:?}"
            );
        }
        let expected: BTreeSet<String> = allowed[name.as_str()].iter().map(|a| a.to_string()).collect();
        assert_eq!(granted, expected, "{name}");
    }
}

/// Each function logs to its own group with the stack's retention, and has an errors alarm;
/// the stale-board alarm watches the metric `hotness` emits, under the dimensions it uses.
#[test]
fn every_function_has_retained_logs_and_an_errors_alarm() {
    let template = template();
    let alarms = resources_of_type(&template, "AWS::CloudWatch::Alarm");
    for (name, function) in resources_of_type(&template, "AWS::Serverless::Function") {
        let binary = function["Metadata"]["BuildProperties"]["Binary"].as_str().unwrap();
        assert_eq!(function["Properties"]["FunctionName"], json!({"Fn::Sub": format!("${{AWS::StackName}}-{binary}")}));
        let group = function["Properties"]["LoggingConfig"]["LogGroup"]["Ref"].as_str().expect("LoggingConfig.LogGroup");
        let group = &resource(&template, group)["Properties"];
        assert_eq!(group["LogGroupName"], json!({"Fn::Sub": format!("/aws/lambda/${{AWS::StackName}}-{binary}")}));
        assert_eq!(group["RetentionInDays"], reference("LogRetentionInDays"));
        let watched = alarms.iter().any(|(_, alarm)| {
            let p = &alarm["Properties"];
            p["Namespace"] == "AWS/Lambda"
                && p["MetricName"] == "Errors"
                && p["Dimensions"] == json!([{"Name": "FunctionName", "Value": reference(name)}])
        });
        assert!(watched, "no Errors alarm for {name}");
    }
    let stale = &resource(&template, "HotBoardStaleAlarm")["Properties"];
    assert_eq!(stale["Namespace"], standings::runtime::metrics::NAMESPACE);
    assert_eq!(stale["MetricName"], hotness::SYNTHESIS_LAG);
    assert_eq!(stale["Dimensions"], json!([{"Name": "Function", "Value": hotness::FUNCTION}]));
    assert_eq!(stale["TreatMissingData"], "breaching", "no run is no datapoint: that is the failure to catch");
}

/// The journal's bucket is private, encrypted, TLS-only, retained and expires by the
/// retention parameter; every function knows it (so every write journals itself), and the lag
/// alarm watches the metric the drain emits, firing when it goes missing too.
#[test]
fn the_journal_bucket_is_private_encrypted_and_drained_under_an_alarm() {
    let template = template();
    let bucket = resource(&template, "JournalBucket");
    assert_eq!(bucket["DeletionPolicy"], "Retain");
    let p = &bucket["Properties"];
    assert_eq!(p["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]["ServerSideEncryptionByDefault"]["SSEAlgorithm"], "AES256");
    for block in ["BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets"] {
        assert_eq!(p["PublicAccessBlockConfiguration"][block], true, "{block}");
    }
    let rules = p["LifecycleConfiguration"]["Rules"].as_array().unwrap();
    assert!(rules.iter().any(|r| r["ExpirationInDays"] == reference("JournalRetentionDays")));
    let policy = &resource(&template, "JournalBucketPolicy")["Properties"]["PolicyDocument"]["Statement"][0];
    assert_eq!((policy["Effect"].as_str(), policy["Condition"]["Bool"]["aws:SecureTransport"].as_bool()), (Some("Deny"), Some(false)));
    assert_eq!(template["Globals"]["Function"]["Environment"]["Variables"][standings::JOURNAL_BUCKET_ENV], reference("JournalBucket"));
    let lag = &resource(&template, "JournalLagAlarm")["Properties"];
    assert_eq!(lag["MetricName"], journal::LAG_METRIC);
    assert_eq!(lag["Dimensions"], json!([{"Name": "Function", "Value": journal::FUNCTION}]));
    assert_eq!(lag["TreatMissingData"], "breaching", "a drain that stopped reporting is lagging");
    let events = &resource(&template, "JournalFunction")["Properties"]["Events"];
    assert_eq!(events["EveryMinute"]["Properties"]["ScheduleExpression"], "rate(1 minute)");
    // The alarm fires within 5 minutes of the first entry left undrained past two intervals:
    // the next run (within an interval) reports its age over the threshold, in the metric's
    // period then (one more period at worst, for the period boundary), and the alarm needs
    // `DatapointsToAlarm` such periods in a row.
    let (interval, period) = (60, lag["Period"].as_i64().unwrap());
    let threshold = lag["Threshold"].as_i64().unwrap();
    let needed = lag["DatapointsToAlarm"].as_i64().unwrap_or(lag["EvaluationPeriods"].as_i64().unwrap());
    assert!(threshold <= 2 * interval, "an entry two intervals old breaches ({threshold} s)");
    assert!(threshold >= interval, "a drained minute's oldest entry does not breach ({threshold} s)");
    let worst = interval + period + needed * period;
    assert!(worst <= 300, "fires {worst} s after the entry is two intervals old, not within 5 minutes");
    let verify = &events["DailyVerify"]["Properties"];
    assert_eq!(serde_json::from_str::<Value>(verify["Input"].as_str().unwrap()).unwrap(), json!({"verify": {}}));
    let mismatch = &resource(&template, "JournalMismatchAlarm")["Properties"];
    assert_eq!(mismatch["MetricName"], journal::MISMATCH_METRIC);
    assert_eq!(mismatch["Dimensions"], json!([{"Name": "Function", "Value": journal::FUNCTION}]));
}

/// Rank-change notifications (docs/notifications.md): every function knows the bus (so boards
/// with `notify` record moves), only the journal function (rank changes) and the archive
/// function (tournaments' results, docs/tournaments.md) may put events on it, the example
/// rule delivers to a queue that lets only that rule send, and the lag alarm watches the
/// drain's metric.
#[test]
fn notifications_go_to_the_stacks_bus_with_an_example_rule_to_a_queue() {
    let template = template();
    assert_eq!(template["Globals"]["Function"]["Environment"]["Variables"][standings::EVENT_BUS_ENV], reference("NotificationBus"));
    assert_eq!(resource(&template, "NotificationBus")["Type"], "AWS::Events::EventBus");
    let puts: Vec<String> = resources_of_type(&template, "AWS::Serverless::Function")
        .into_iter()
        .filter(|(_, function)| function.to_string().contains("events:PutEvents"))
        .map(|(name, _)| name.clone())
        .collect();
    assert_eq!(puts, vec!["ArchiveFunction".to_owned(), "JournalFunction".to_owned()]);
    let rule = &resource(&template, "RankChangedToQueueRule")["Properties"];
    assert_eq!(rule["EventBusName"], reference("NotificationBus"));
    assert_eq!(
        rule["EventPattern"],
        json!({"source": [standings::domain::notify::SOURCE], "detail-type": [standings::domain::notify::DETAIL_TYPE]})
    );
    let statement = &resource(&template, "RankChangedQueuePolicy")["Properties"]["PolicyDocument"]["Statement"][0];
    assert_eq!(statement["Principal"]["Service"], "events.amazonaws.com");
    assert!(statement["Condition"]["ArnEquals"]["aws:SourceArn"].to_string().contains("RankChangedToQueueRule"));
    let lag = &resource(&template, "NotificationLagAlarm")["Properties"];
    assert_eq!(lag["MetricName"], journal::NOTICE_LAG_METRIC);
    assert_eq!(lag["Dimensions"], json!([{"Name": "Function", "Value": journal::FUNCTION}]));
    assert_eq!((lag["Threshold"].as_i64(), lag["TreatMissingData"].as_str()), (Some(300), Some("breaching")));
    let dropped = &resource(&template, "NotificationsDroppedAlarm")["Properties"];
    assert_eq!(dropped["MetricName"], journal::NOTICES_DROPPED_METRIC);
    assert_eq!(dropped["Dimensions"], json!([{"Name": "Function", "Value": journal::FUNCTION}]));
    assert_eq!((dropped["Statistic"].as_str(), dropped["Threshold"].as_i64()), (Some("Sum"), Some(0)), "one drop alarms");
}

#[test]
fn the_season_table_is_on_demand_recoverable_and_retained() {
    let template = template();
    let table = resource(&template, "ArchiveTable");
    assert_eq!(table["Type"], "AWS::DynamoDB::Table");
    assert_eq!(table["DeletionPolicy"], "Retain");
    assert_eq!(table["Properties"]["BillingMode"], "PAY_PER_REQUEST");
    assert_eq!(table["Properties"]["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"], true);
    for function in [SEASONS, ARCHIVE] {
        assert_eq!(environment(&resource(&template, function)["Properties"])["STANDINGS_TABLE"], reference("ArchiveTable"), "{function}");
    }
}

/// The queue's wiring numbers against each other (docs/queue.md): a message is invisible longer
/// than any invocation that may hold it (six function timeouts plus the longest batching
/// window, as Lambda advises); a take-back waits for its give fewer receives than the redrive
/// takes; the dead-letter queue keeps messages longer than the source queue (a redriven
/// message keeps its first enqueue time); the pollers' cap is one SQS accepts (2 or more); the
/// example rule to a queue retries, then dead-letters; a batch that fails whole is alarmed.
#[test]
fn the_queue_wiring_numbers_hold_against_each_other() {
    let template = template();
    let queue = &resource(&template, "EventQueue")["Properties"];
    let function_timeout = resource(&template, "QueueFunction")["Properties"]["Timeout"].as_i64().unwrap();
    let window_max = template["Parameters"]["QueueBatchingWindowSeconds"]["MaxValue"].as_i64().unwrap();
    let visibility = queue["VisibilityTimeout"].as_i64().unwrap();
    assert!(visibility >= 6 * function_timeout + window_max, "{visibility} s < 6 x {function_timeout} s + {window_max} s");
    let receives = queue["RedrivePolicy"]["maxReceiveCount"].as_i64().unwrap();
    assert!(i64::from(queue::TAKE_BACK_WAITS) < receives, "a take-back stops waiting before the redrive takes it");
    let dlq = &resource(&template, "DeadLetterQueue")["Properties"];
    assert!(dlq["MessageRetentionPeriod"].as_i64().unwrap() > queue["MessageRetentionPeriod"].as_i64().unwrap());
    assert_eq!(dlq["MessageRetentionPeriod"].as_i64(), Some(14 * 24 * 3600));

    let mapping = &resource(&template, "QueueMapping")["Properties"];
    assert_eq!(mapping["MaximumBatchingWindowInSeconds"], reference("QueueBatchingWindowSeconds"));
    assert_eq!(mapping["FunctionResponseTypes"], json!(["ReportBatchItemFailures"]));
    let rule = &template["Rules"]["QueueConcurrencyCapsThePollers"];
    assert_eq!(
        rule["Assertions"][0]["Assert"],
        json!({"Fn::Not": [{"Fn::Contains": [["0", "1"], {"Ref": "QueueReservedConcurrency"}]}]}),
        "MaximumConcurrency is 2 or more whenever set"
    );

    let target = &resource(&template, "RankChangedToQueueRule")["Properties"]["Targets"][0];
    assert!(target["RetryPolicy"]["MaximumRetryAttempts"].as_i64().unwrap() > 0);
    assert_eq!(target["DeadLetterConfig"]["Arn"], json!({"Fn::GetAtt": "RankChangedDeadLetterQueue.Arn"}));

    let alarm = &resource(&template, "QueueBatchesFailedAlarm")["Properties"];
    assert_eq!(alarm["MetricName"], queue::BATCHES_FAILED);
    assert_eq!(alarm["Dimensions"], json!([{"Name": "Function", "Value": queue::FUNCTION}]));
}

/// A verify or dry-run replays in one invocation of the journal function into shadow keys that
/// expire: they must outlive the longest invocation, or a long replay loses its early keys and
/// compares against a half-gone shadow.
#[test]
fn shadow_keys_outlive_the_journal_functions_longest_invocation() {
    let template = template();
    let timeout = resource(&template, "JournalFunction")["Properties"]["Timeout"].as_i64().unwrap();
    assert!(standings::redis::keys::SHADOW_TTL_SECS > timeout, "{} s <= {timeout} s", standings::redis::keys::SHADOW_TTL_SECS);
}

/// The timeout each function falls back on when the runtime sends no deadline (the local run,
/// `standings::runtime::deadline`) is the one its template gives it.
#[test]
fn each_functions_fallback_timeout_is_its_templates() {
    let template = template();
    let timeout = |function: &str| resource(&template, function)["Properties"]["Timeout"].as_i64().unwrap();
    assert_eq!(queue::TIMEOUT.num_seconds(), timeout("QueueFunction"));
    assert_eq!(archive::TIMEOUT.num_seconds(), timeout("ArchiveFunction"));
    assert_eq!(journal::TIMEOUT.num_seconds(), timeout("JournalFunction"));
}
