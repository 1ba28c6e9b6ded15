//! infra/template.yaml against the code. The template is read as CloudFormation reads it (short
//! tags such as `!Ref` in their long form) and compared with:
//! - each API function's `routes()`: every route is an HttpApi event of that function and every
//!   event a route, except the events the function lists under `Metadata.x-standings-pending`
//!   (routes of the SPEC landing from other branches), tolerated only while unrouted;
//! - the scope each route needs, the OpenAPI document and the local router in Cargo.toml;
//! - the environment the code reads (the Redis URL from Secrets Manager, never plain text);
//! - the schedules' events (parsed and run as the functions parse them), least-privilege
//!   policies, log retention and the alarms on what the functions emit.
//!
//! `cfn-lint` and `sam validate --lint` check the template itself (scripts/test.sh).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use aws_lambda_events::eventbridge::EventBridgeEvent;
use serde_json::{Map, Value, json};
use standings::http::{ADMIN_SCOPE, WRITE_SCOPE};

use crate::openapi::{Operation, described, document, operations};

const TEMPLATE: &str = include_str!("../../infra/template.yaml");
const WORKSPACE_MANIFEST: &str = include_str!("../../Cargo.toml");

const INGEST: &str = "IngestFunction";
const QUERY: &str = "QueryFunction";
const SEASONS: &str = "SeasonsFunction";
const VOID: &str = "VoidFunction";
const HOTNESS: &str = "HotnessFunction";
const ARCHIVE: &str = "ArchiveFunction";

/// Variables the template sets for code that lands from another branch: tolerated only while
/// no code reads them, so an entry must go when that code lands. None are pending now.
const PENDING_VARIABLES: [&str; 0] = [];

/// A YAML node in CloudFormation's long form: `!Ref x` is `{"Ref": x}`, `!Sub s` is `{"Fn::Sub": s}`.
fn long_form(node: serde_norway::Value) -> Value {
    use serde_norway::Value as Yaml;
    match node {
        Yaml::Null => Value::Null,
        Yaml::Bool(b) => Value::Bool(b),
        Yaml::Number(n) => serde_json::to_value(n).expect("a YAML number is a JSON number"),
        Yaml::String(s) => Value::String(s),
        Yaml::Sequence(items) => Value::Array(items.into_iter().map(long_form).collect()),
        Yaml::Mapping(entries) => Value::Object(
            entries
                .into_iter()
                .map(|(key, value)| (key.as_str().expect("template keys are strings").to_owned(), long_form(value)))
                .collect(),
        ),
        Yaml::Tagged(tagged) => {
            let tag = tagged.tag.to_string();
            let function = tag.trim_start_matches('!');
            let name = if function == "Ref" { function.to_owned() } else { format!("Fn::{function}") };
            json!({ name: long_form(tagged.value) })
        }
    }
}

fn template() -> Value {
    long_form(serde_norway::from_str(TEMPLATE).expect("infra/template.yaml is YAML"))
}

fn resource<'a>(template: &'a Value, name: &str) -> &'a Value {
    let resource = &template["Resources"][name];
    assert!(resource.is_object(), "infra/template.yaml has no resource {name}");
    resource
}

fn resources_of_type<'a>(template: &'a Value, kind: &str) -> Vec<(&'a String, &'a Value)> {
    template["Resources"].as_object().unwrap().iter().filter(|(_, r)| r["Type"] == kind).collect()
}

fn reference(name: &str) -> Value {
    json!({ "Ref": name })
}

/// One HttpApi event of a function.
struct Route {
    event: String,
    operation: Operation,
    auth: Value,
    pending: bool,
}

fn http_routes(template: &Value, function: &str) -> Vec<Route> {
    let function = resource(template, function);
    let pending: Vec<&str> = function["Metadata"]["x-standings-pending"]
        .as_array()
        .map(|names| names.iter().map(|n| n.as_str().unwrap()).collect())
        .unwrap_or_default();
    let events = function["Properties"]["Events"].as_object().cloned().unwrap_or_default();
    for name in &pending {
        assert!(events.contains_key(*name), "x-standings-pending names {name}, which is no event of the function");
    }
    events
        .into_iter()
        .filter(|(_, event)| event["Type"] == "HttpApi")
        .map(|(name, event)| {
            let properties = &event["Properties"];
            assert_eq!(properties["ApiId"], reference("HttpApi"), "{name} belongs to the stack's API");
            Route {
                pending: pending.contains(&name.as_str()),
                operation: (properties["Method"].as_str().unwrap().to_lowercase(), properties["Path"].as_str().unwrap().to_owned()),
                auth: properties["Auth"].clone(),
                event: name,
            }
        })
        .collect()
}

fn api_functions() -> [(&'static str, Vec<Operation>); 4] {
    [
        (INGEST, operations(ingest::routes().listed())),
        (QUERY, operations(query::routes().listed())),
        (SEASONS, operations(seasons::routes().listed())),
        (VOID, operations(void::routes().listed())),
    ]
}

#[test]
fn each_function_routes_exactly_its_events_in_the_template() {
    let template = template();
    for (function, routed) in api_functions() {
        let routed: BTreeSet<Operation> = routed.into_iter().collect();
        let events = http_routes(&template, function);
        let ready: BTreeSet<Operation> = events.iter().filter(|r| !r.pending).map(|r| r.operation.clone()).collect();
        let pending: BTreeSet<Operation> = events.iter().filter(|r| r.pending).map(|r| r.operation.clone()).collect();
        assert_eq!(ready.len() + pending.len(), events.len(), "{function}: an operation is declared twice");

        let missing: Vec<_> = routed.iter().filter(|op| !ready.contains(*op) && !pending.contains(*op)).collect();
        assert!(missing.is_empty(), "routed by {function} but no event of it in infra/template.yaml: {missing:?}");
        let landed: Vec<_> = events.iter().filter(|r| r.pending && routed.contains(&r.operation)).map(|r| &r.event).collect();
        assert!(landed.is_empty(), "routed now: drop {landed:?} from {function}'s Metadata.x-standings-pending");
        let unrouted: Vec<_> = ready.difference(&routed).collect();
        assert!(
            unrouted.is_empty(),
            "events of {function} it does not route (mark them x-standings-pending until they land): {unrouted:?}"
        );
    }
    for (name, function) in resources_of_type(&template, "AWS::Serverless::Function") {
        if ![INGEST, QUERY, SEASONS, VOID].contains(&name.as_str()) {
            let events = function["Properties"]["Events"].as_object().cloned().unwrap_or_default();
            assert!(events.values().all(|e| e["Type"] != "HttpApi"), "{name} is not an API function");
        }
    }
}

/// Write routes let `standings/write` or `standings/admin` through (the function's own check
/// counts admin as write), admin routes only `standings/admin`, read routes need no token.
#[test]
fn routes_need_the_scope_their_function_checks() {
    let template = template();
    assert_eq!(resource(&template, "HttpApi")["Properties"]["Auth"]["DefaultAuthorizer"], "Jwt", "fail closed");
    for route in [INGEST, VOID].iter().flat_map(|f| http_routes(&template, f)) {
        let scopes = if route.operation.1.starts_with("/v1/admin/") { json!([ADMIN_SCOPE]) } else { json!([WRITE_SCOPE, ADMIN_SCOPE]) };
        assert_eq!(route.auth, json!({"Authorizer": "Jwt", "AuthorizationScopes": scopes}), "{}", route.event);
    }
    for route in [QUERY, SEASONS].iter().flat_map(|f| http_routes(&template, f)) {
        assert_eq!(route.auth, json!({"Authorizer": "NONE"}), "{} is open", route.event);
    }
}

/// The template, the OpenAPI document and the SPEC's pending routes move together.
#[test]
fn the_template_and_the_openapi_document_declare_the_same_operations() {
    let template = template();
    let routes: Vec<Route> = [INGEST, QUERY, SEASONS, VOID].iter().flat_map(|f| http_routes(&template, f)).collect();
    let (ready, pending) = described(&document());
    let declared: BTreeSet<Operation> = routes.iter().map(|r| r.operation.clone()).collect();
    assert_eq!(declared, ready.union(&pending).cloned().collect(), "operations of the template vs the OpenAPI document");
    let template_pending: BTreeSet<Operation> = routes.iter().filter(|r| r.pending).map(|r| r.operation.clone()).collect();
    assert_eq!(template_pending, pending, "pending in the template vs x-standings-pending in the OpenAPI document");
}

/// `cargo lambda watch` sends each path and method to the function API Gateway would.
#[test]
fn the_local_router_matches_the_template() {
    let template = template();
    let mut deployed = BTreeSet::new();
    for function in [INGEST, QUERY, SEASONS, VOID] {
        let binary = resource(&template, function)["Metadata"]["BuildProperties"]["Binary"].as_str().unwrap().to_owned();
        deployed.extend(http_routes(&template, function).into_iter().map(|r| (r.operation, binary.clone())));
    }
    let manifest: toml::Table = WORKSPACE_MANIFEST.parse().expect("Cargo.toml is TOML");
    let router =
        manifest["workspace"]["metadata"]["lambda"]["watch"]["router"].as_table().expect("a [workspace.metadata.lambda.watch.router]");
    let mut local = BTreeSet::new();
    for (path, targets) in router {
        for target in targets.as_array().expect("each path lists {method, function}") {
            let method = target["method"].as_str().unwrap().to_lowercase();
            local.insert(((method, path.clone()), target["function"].as_str().unwrap().to_owned()));
        }
    }
    assert_eq!(local, deployed, "Cargo.toml's [workspace.metadata.lambda.watch.router] vs infra/template.yaml");
}

/// Every `*.rs` file under `dir`.
fn rust_sources(dir: &Path, into: &mut String) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_sources(&path, into);
        } else if path.extension().is_some_and(|e| e == "rs") {
            into.push_str(&std::fs::read_to_string(&path).unwrap());
        }
    }
}

/// The environment variables of a function's `Properties` (or of `Globals.Function`).
fn environment(properties: &Value) -> Map<String, Value> {
    properties["Environment"]["Variables"].as_object().cloned().unwrap_or_default()
}

/// Every variable the template sets is one the code reads (a variable no code reads, like the
/// old `REDIS_SSM_PARAMETER`, configures nothing), and the Redis URL comes from Secrets Manager.
#[test]
fn the_template_sets_only_variables_the_code_reads_and_no_plain_redis_url() {
    let template = template();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut code = String::new();
    rust_sources(&root.join("shared/src"), &mut code);
    for function in std::fs::read_dir(root.join("functions")).unwrap() {
        rust_sources(&function.unwrap().path().join("src"), &mut code);
    }

    let globals = template["Globals"]["Function"].clone();
    let mut variables = environment(&globals);
    for (_, function) in resources_of_type(&template, "AWS::Serverless::Function") {
        variables.extend(environment(&function["Properties"]));
    }
    for (name, value) in &variables {
        let read = code.contains(&format!("\"{name}\""));
        if PENDING_VARIABLES.contains(&name.as_str()) {
            assert!(!read, "the code reads {name} now: drop it from PENDING_VARIABLES");
        } else {
            assert!(read, "infra/template.yaml sets {name}, which no code under shared/ or functions/ reads");
        }
        assert!(!value.as_str().is_some_and(|v| v.contains("redis")), "{name} holds a Redis address in plain text");
    }
    assert!(environment(&globals).get("REDIS_URL").is_none(), "the password is not in the functions' configuration");
    assert_eq!(
        environment(&globals)[standings::runtime::secrets::SECRET_VAR],
        reference("RedisUrlSecretArn"),
        "read at start from the secret"
    );
    assert_eq!(globals["Layers"], json!([reference("SecretsExtensionLayerArn")]), "through the Parameters and Secrets extension");
    assert_eq!(environment(&resource(&template, INGEST)["Properties"])["STANDINGS_AUTH"], "jwt");
}

/// The scheduled event `function`'s schedule sends, the context attributes filled in as
/// EventBridge Scheduler fills them.
fn scheduled_input(template: &Value, function: &str, scheduled_time: &str) -> (Value, Value) {
    let events = resource(template, function)["Properties"]["Events"].as_object().unwrap();
    // The schedule of scheduled events (`archive`'s other, `{"runtime": {}}`, is tested on its own).
    let scheduled = json!({"Fn::FindInMap": ["ScheduledEvent", "Input", "Json"]});
    let schedules: Vec<&Value> = events.values().filter(|event| event["Properties"]["Input"] == scheduled).collect();
    let [schedule] = <[&Value; 1]>::try_from(schedules).expect("one event: the schedule");
    assert_eq!(schedule["Type"], "ScheduleV2", "{function}: an EventBridge Scheduler schedule");
    let properties = schedule["Properties"].clone();
    assert_eq!(properties["Input"], json!({"Fn::FindInMap": ["ScheduledEvent", "Input", "Json"]}));
    let input = template["Mappings"]["ScheduledEvent"]["Input"]["Json"].as_str().unwrap();
    let delivered = input
        .replace("<aws.scheduler.scheduled-time>", scheduled_time)
        .replace("<aws.scheduler.execution-id>", "d32c5kddcf5bb8c3")
        .replace("<aws.scheduler.schedule-arn>", "arn:aws:scheduler:us-east-1:123456789012:schedule/default/s");
    (properties, serde_json::from_str(&delivered).expect("the scheduled input is JSON"))
}

/// Scheduler's input parses as the EventBridge event `hotness` takes, and a run keyed by its
/// scheduled time (not the delivery time) synthesizes that minute.
#[tokio::test]
async fn the_hotness_schedule_runs_every_minute_keyed_by_the_scheduled_time() {
    let template = template();
    let (schedule, input) = scheduled_input(&template, HOTNESS, "2026-11-22T02:07:00Z");
    assert_eq!(schedule["ScheduleExpression"], "rate(1 minute)");
    let event: EventBridgeEvent = serde_json::from_value(input).expect("hotness parses the scheduled input");
    assert_eq!(event.detail_type, "Scheduled Event");

    let app = standings_tests::spawn_ingest().await;
    app.set_now(standings_tests::at("2026-11-22T02:07:40Z"));
    let summary = app.hotness().run(event).await.expect("the run succeeds");
    assert_eq!(summary.minute, standings_tests::at("2026-11-22T02:07:00Z"));
    assert_eq!(summary.boards.iter().map(|b| b.board.as_str()).collect::<Vec<_>>(), ["hot-videos"]);
}

/// The archive runs every hour of every day (each run archives whatever ended and is not
/// complete, in any board's timezone), with the same scheduled event (`detail-type` tells it
/// from a manual `{board, season}` request); an alarm watches the metric it emits.
#[test]
fn the_archive_schedule_keeps_retrying_and_an_alarm_watches_what_is_overdue() {
    let template = template();
    let (schedule, input) = scheduled_input(&template, ARCHIVE, "2026-12-01T00:45:00+08:00");
    assert_eq!(schedule["ScheduleExpression"], "rate(1 hour)");
    assert!(input["detail-type"].is_string());
    serde_json::from_value::<EventBridgeEvent>(input).expect("an EventBridge event");
    // Deleted runtime boards are ended every minute (docs/runtime-boards.md#deleting).
    let runtime = &resource(&template, ARCHIVE)["Properties"]["Events"]["EveryMinuteRuntime"]["Properties"];
    assert_eq!((&runtime["ScheduleExpression"], &runtime["Input"]), (&json!("rate(1 minute)"), &json!("{\"runtime\": {}}")));
    let overdue = &resource(&template, "ArchiveOverdueAlarm")["Properties"];
    assert_eq!(overdue["Namespace"], standings::runtime::metrics::NAMESPACE);
    assert_eq!(overdue["MetricName"], standings::archive::job::SEASONS_OVERDUE);
    assert_eq!(overdue["Dimensions"], json!([{"Name": "Function", "Value": standings::archive::job::FUNCTION}]));
    assert_eq!(overdue["TreatMissingData"], "breaching", "no run is no datapoint");
    let leagues = &resource(&template, "LeaguesOverdueAlarm")["Properties"];
    assert_eq!(leagues["MetricName"], archive::LEAGUES_OVERDUE);
    assert_eq!((&leagues["Namespace"], &leagues["Dimensions"]), (&overdue["Namespace"], &overdue["Dimensions"]));
    assert_eq!(leagues["TreatMissingData"], "breaching");
}

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
/// dead-letter queue; only `journal` (and `void`, reading) touch S3, only the journal's objects; no wildcard actions; every function may read the Redis URL secret (once,
/// at start) and nothing else beyond logs and VPC access.
#[test]
fn each_function_gets_only_the_permissions_it_uses() {
    let template = template();
    const SECRET: &str = "secretsmanager:GetSecretValue";
    let allowed: BTreeMap<&str, &[&str]> = BTreeMap::from([
        (INGEST, &[SECRET][..]),
        (HOTNESS, &[SECRET][..]),
        (QUERY, &[SECRET][..]),
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
        ("QueueFunction", &[SECRET, "sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:SendMessage"][..]),
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
