//! The `SynthesisLag` metric of `hotness`, which the template's `HotBoardStaleAlarm` watches:
//! every run reports how far behind its scheduled minute it brought the boards up to date.

use std::sync::{Arc, Mutex};

use chrono::Duration;
use serde_json::Value;
use standings::runtime::metrics::{Metrics, NAMESPACE};
use standings_tests::{at, scheduled_event, spawn_ingest};

#[tokio::test]
async fn every_run_reports_its_lag_per_board_and_once_for_the_function() {
    let app = spawn_ingest().await;
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = lines.clone();
    let hotness = app.hotness_reporting_to(Metrics::with_sink(hotness::FUNCTION, Arc::new(move |line| sink.lock().unwrap().push(line))));
    let minute = at("2026-11-22T10:00:00+08:00");

    for (seconds_late, expected) in [(42_500, 42.5), (61_000, 61.0)] {
        lines.lock().unwrap().clear();
        app.set_now(minute + Duration::milliseconds(seconds_late));
        // The second delivery of the minute is a duplicate: the board is already up to date for
        // it, so the lag is reported all the same.
        hotness.run(scheduled_event(minute)).await.expect("the run succeeds");
        let reported: Vec<Value> = lines.lock().unwrap().iter().map(|line| serde_json::from_str(line).unwrap()).collect();
        let [per_board, per_function] = <[Value; 2]>::try_from(reported).expect("two lines: the one decaying board, then the roll-up");
        for line in [&per_board, &per_function] {
            assert_eq!(line[hotness::SYNTHESIS_LAG], expected);
            assert_eq!(line["Function"], hotness::FUNCTION);
            let directive = &line["_aws"]["CloudWatchMetrics"][0];
            assert_eq!(directive["Namespace"], NAMESPACE);
            assert_eq!(directive["Metrics"][0]["Unit"], "Seconds");
        }
        assert_eq!(per_board["Board"], "hot-videos");
        assert_eq!(per_board["_aws"]["CloudWatchMetrics"][0]["Dimensions"], serde_json::json!([["Function", "Board"]]));
        assert_eq!(per_function["_aws"]["CloudWatchMetrics"][0]["Dimensions"], serde_json::json!([["Function"]]));
    }
}
