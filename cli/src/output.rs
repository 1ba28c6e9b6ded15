//! What a command prints: a readable table of an answer's rows (or its fields), or the answer
//! as JSON with `--json`; progress on stderr (a bar on a terminal, a line every few seconds
//! otherwise).

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::jobs::Progress;

/// The rows an answer is a list of (`entries`, `results`, `boards`, …), if it is one.
const ROW_FIELDS: [&str; 7] = ["entries", "results", "boards", "tournaments", "rows", "neighbours", "items"];

const LEADING: [&str; 6] = ["rank", "user_id", "board", "tournament_id", "status", "score"];

/// `answer` as text: its rows as a table, then its other fields as `name: value` lines.
pub fn readable(answer: &Value) -> String {
    let Some(object) = answer.as_object() else {
        return answer.as_array().map_or_else(|| scalar(answer), |rows| table(rows));
    };
    let mut out = String::new();
    for (name, value) in object {
        if ROW_FIELDS.contains(&name.as_str()) && value.is_array() {
            continue;
        }
        out.push_str(&format!("{name}: {}\n", scalar(value)));
    }
    for name in ROW_FIELDS {
        if let Some(rows) = object.get(name).and_then(Value::as_array) {
            out.push_str(&format!("{name}:\n{}", table(rows)));
        }
    }
    out
}

fn scalar(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

/// Rows of objects as aligned columns (their keys in first-seen order).
fn table(rows: &[Value]) -> String {
    if rows.is_empty() {
        return "  (none)\n".into();
    }
    // The columns a reader looks for first, then the others as the rows name them.
    let mut columns: Vec<String> =
        LEADING.iter().filter(|c| rows.iter().any(|row| row.get(**c).is_some())).map(|c| (*c).to_owned()).collect();
    for row in rows {
        for key in row.as_object().into_iter().flat_map(|o| o.keys()) {
            if !columns.contains(key) {
                columns.push(key.clone());
            }
        }
    }
    if columns.is_empty() {
        return rows.iter().map(|row| format!("  {}\n", scalar(row))).collect();
    }
    let cells: Vec<Vec<String>> = rows.iter().map(|row| columns.iter().map(|c| scalar(&row[c.as_str()])).collect()).collect();
    let widths: Vec<usize> =
        columns.iter().enumerate().map(|(i, c)| cells.iter().map(|r| r[i].chars().count()).chain([c.len()]).max().unwrap_or(0)).collect();
    let line = |values: Vec<&str>| {
        let padded: Vec<String> = values.iter().zip(&widths).map(|(v, w)| format!("{v:<w$}")).collect();
        format!("  {}\n", padded.join("  ").trim_end())
    };
    let mut out = line(columns.iter().map(String::as_str).collect());
    for row in &cells {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

/// Progress of a job on stderr: redrawn in place on a terminal, a line every `every` otherwise.
pub struct Reporter {
    job: &'static str,
    terminal: bool,
    every: Duration,
    last: Option<Instant>,
}

impl Reporter {
    pub fn new(job: &'static str) -> Self {
        Self { job, terminal: std::io::stderr().is_terminal(), every: Duration::from_secs(5), last: None }
    }

    pub fn report(&mut self, progress: Progress, rate: f64) {
        let text = format!(
            "{}: invocation {}, boards {}/{}, {} lines at {:.0}/s",
            self.job, progress.invocations, progress.boards_done, progress.boards, progress.units, rate
        );
        if self.terminal {
            eprint!("\r\x1b[2K{text}");
        } else if self.last.is_none_or(|last| last.elapsed() >= self.every) {
            eprintln!("{text}");
            self.last = Some(Instant::now());
        }
    }

    pub fn finish(&self) {
        if self.terminal {
            eprintln!();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rows_become_aligned_columns_and_other_fields_lines() {
        let answer =
            json!({"status": "complete", "boards": [{"board": "points", "applied": 12}, {"board": "b", "applied": 3, "refused": 1}]});
        assert_eq!(
            readable(&answer),
            "status: complete\nboards:\n  board   applied  refused\n  points  12       -\n  b       3        1\n"
        );
    }

    #[test]
    fn an_empty_list_says_none() {
        assert_eq!(readable(&json!({"entries": []})), "entries:\n  (none)\n");
    }
}
