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

use std::collections::BTreeSet;
use std::path::Path;

use aws_lambda_events::eventbridge::EventBridgeEvent;
use serde_json::{Map, Value, json};
use standings::http::{ADMIN_SCOPE, WRITE_SCOPE};

use crate::openapi::{Operation, described, document, operations};

pub(crate) const TEMPLATE: &str = include_str!("../../infra/template.yaml");
const WORKSPACE_MANIFEST: &str = include_str!("../../Cargo.toml");

pub(crate) const INGEST: &str = "IngestFunction";
pub(crate) const QUERY: &str = "QueryFunction";
pub(crate) const SEASONS: &str = "SeasonsFunction";
pub(crate) const VOID: &str = "VoidFunction";
pub(crate) const HOTNESS: &str = "HotnessFunction";
pub(crate) const ARCHIVE: &str = "ArchiveFunction";

/// Variables the template sets for code that lands from another branch: tolerated only while
/// no code reads them, so an entry must go when that code lands. None are pending now.
const PENDING_VARIABLES: [&str; 0] = [];

/// A YAML node in CloudFormation's long form: `!Ref x` is `{"Ref": x}`, `!Sub s` is `{"Fn::Sub": s}`.
pub(crate) fn long_form(node: serde_norway::Value) -> Value {
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

pub(crate) fn template() -> Value {
    long_form(serde_norway::from_str(TEMPLATE).expect("infra/template.yaml is YAML"))
}

pub(crate) fn resource<'a>(template: &'a Value, name: &str) -> &'a Value {
    let resource = &template["Resources"][name];
    assert!(resource.is_object(), "infra/template.yaml has no resource {name}");
    resource
}

pub(crate) fn resources_of_type<'a>(template: &'a Value, kind: &str) -> Vec<(&'a String, &'a Value)> {
    template["Resources"].as_object().unwrap().iter().filter(|(_, r)| r["Type"] == kind).collect()
}

pub(crate) fn reference(name: &str) -> Value {
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
pub(crate) fn environment(properties: &Value) -> Map<String, Value> {
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
