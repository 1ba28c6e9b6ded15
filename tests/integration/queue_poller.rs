//! `scripts/queue_poller.py`, the local stand-in for the SQS event source mapping: a function
//! error hands the whole batch back (as Lambda does), never reads as a batch that all applied;
//! otherwise exactly the `batchItemFailures` are handed back.

use std::process::Command;

fn handed_back(function_error: &str, answer: &str, ids: &[&str]) -> String {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/queue_poller.py");
    let output =
        Command::new("python3").arg(script).arg("handed-back").arg(function_error).arg(answer).args(ids).output().expect("python3 runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

#[test]
fn a_function_error_hands_the_whole_batch_back() {
    let ids = ["m1", "m2", "m3"];
    let error = r#"{"errorType":"&alloc::boxed::Box<dyn core::error::Error>","errorMessage":"store unavailable"}"#;
    assert_eq!(handed_back("Unhandled", error, &ids), "m1 m2 m3", "the header");
    assert_eq!(handed_back("", error, &ids), "m1 m2 m3", "an error object as the body");
    assert_eq!(handed_back("", r#"{"batchItemFailures":[{"itemIdentifier":"m2"}]}"#, &ids), "m2");
    assert_eq!(handed_back("", r#"{"batchItemFailures":[]}"#, &ids), "");
}
