//! CloudWatch metrics in Embedded Metric Format: one JSON object per line on stdout, which
//! Lambda ships to CloudWatch Logs and CloudWatch turns into metrics. No client, no API call.
//!
//! Shape (documented in the README):
//! `{"_aws":{"Timestamp":<ms>,"CloudWatchMetrics":[{"Namespace":"Standings",
//!   "Dimensions":[[<dimension names>]],"Metrics":[{"Name":<name>,"Unit":<unit>}]}]},
//!   <dimension>: <value>, …, <name>: <value>}`
//!
//! Dimensions are kept low-cardinality: function, route, board (configured boards only),
//! outcome and refusal code. Never a user id, event id or item id.

use std::sync::Arc;

use serde_json::{Map, Value, json};

pub const NAMESPACE: &str = "Standings";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Count,
    Milliseconds,
    Seconds,
}

impl Unit {
    fn as_str(self) -> &'static str {
        match self {
            Unit::Count => "Count",
            Unit::Milliseconds => "Milliseconds",
            Unit::Seconds => "Seconds",
        }
    }
}

type Sink = Arc<dyn Fn(String) + Send + Sync>;

/// Where metric lines go: stdout in Lambda, a buffer in tests.
#[derive(Clone)]
pub struct Metrics {
    function: &'static str,
    sink: Sink,
}

impl Metrics {
    pub fn stdout(function: &'static str) -> Self {
        Self::with_sink(function, Arc::new(|line| println!("{line}")))
    }

    pub fn with_sink(function: &'static str, sink: Sink) -> Self {
        Self { function, sink }
    }

    /// One metric value with its dimensions (the function is always one of them).
    pub fn put(&self, name: &str, unit: Unit, value: f64, dimensions: &[(&str, &str)]) {
        let mut names: Vec<&str> = vec!["Function"];
        let mut line = Map::new();
        line.insert("Function".into(), Value::from(self.function));
        for (dimension, value) in dimensions {
            names.push(dimension);
            line.insert((*dimension).into(), Value::from(*value));
        }
        let timestamp = chrono::Utc::now().timestamp_millis();
        line.insert(
            "_aws".into(),
            json!({"Timestamp": timestamp, "CloudWatchMetrics": [{
                "Namespace": NAMESPACE,
                "Dimensions": [names],
                "Metrics": [{"Name": name, "Unit": unit.as_str()}],
            }]}),
        );
        line.insert(name.into(), Value::from(value));
        (self.sink)(Value::Object(line).to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn lines_follow_the_embedded_metric_format() {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let captured = lines.clone();
        let metrics = Metrics::with_sink("ingest", Arc::new(move |line| captured.lock().unwrap().push(line)));
        metrics.put("Events", Unit::Count, 2.0, &[("Board", "activity"), ("Outcome", "applied")]);
        let line: Value = serde_json::from_str(&lines.lock().unwrap()[0]).unwrap();
        assert_eq!(line["Events"], 2.0);
        assert_eq!(
            (line["Function"].as_str(), line["Board"].as_str(), line["Outcome"].as_str()),
            (Some("ingest"), Some("activity"), Some("applied"))
        );
        let directive = &line["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(directive["Namespace"], NAMESPACE);
        assert_eq!(directive["Dimensions"], json!([["Function", "Board", "Outcome"]]));
        assert_eq!(directive["Metrics"], json!([{"Name": "Events", "Unit": "Count"}]));
        assert!(line["_aws"]["Timestamp"].as_i64().unwrap() > 1_700_000_000_000);
    }
}
