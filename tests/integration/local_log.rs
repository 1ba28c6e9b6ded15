//! `scripts/local_log.py`, the local run's terminal view: the functions' JSON lines and EMF
//! metrics (as `cargo lambda watch` prints them) become one readable line per request, one per
//! warning or error, and nothing for metrics.

use std::io::Write;
use std::process::{Command, Stdio};

fn readable(input: &str) -> String {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/local_log.py");
    let mut child = Command::new("python3").arg(script).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("python3 runs");
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success());
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn requests_become_one_line_metrics_disappear_errors_stay() {
    let request = r#"{"timestamp":"2026-11-25T16:20:01.123456Z","level":"INFO","message":"request","status":200,"millis":3,"target":"standings::http::runner","spans":[{"name":"Lambda runtime invoke","requestId":"r1"},{"name":"request","method":"POST","route":"/v1/boards/{board}/scores","board":"lap-times"}]}"#;
    let event = r#"{"timestamp":"2026-11-25T16:20:01.123Z","level":"INFO","message":"event","target":"standings::events","event_id":"e1"}"#;
    let metric = r#"{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"Standings","Dimensions":[["Function"]],"Metrics":[{"Name":"Events","Unit":"Count"}]}]},"Function":"ingest","Events":1}"#;
    let error = r#"{"timestamp":"2026-11-25T16:20:02.000Z","level":"ERROR","message":"store unavailable","error":"connection refused"}"#;
    let out = readable(&[request, event, metric, error, "INFO cargo lambda watch started"].join("\n"));
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "16:20:01 200 POST /v1/boards/{board}/scores board=lap-times 3 ms",
            r#"16:20:02 ERROR store unavailable {"error":"connection refused"}"#,
            "INFO cargo lambda watch started",
        ]
    );
}

#[test]
fn each_scheduled_job_run_gets_one_line() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/local_log.py");
    let line = |flag: &str, answer: &str| {
        let output = Command::new("python3").args([script, flag, answer]).output().expect("python3 runs");
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let out = String::from_utf8(output.stdout).unwrap();
        assert_eq!(out.lines().count(), 1, "{out}");
        out[9..].trim_end().to_owned()
    };
    let drained = r#"{"entries": 42, "notifications": 3, "lag_seconds": 1.5, "boards": []}"#;
    assert_eq!(line("--journal", drained), "journal drained: 42 entries, 3 notifications, lag 1.5 s");
    let hot = r#"{"boards": [{"board": "hot-videos", "members": 7}]}"#;
    assert_eq!(line("--hotness", hot), "hotness ran: hot-videos 7 members");
}
