//! What a command prints: a readable table of an answer's rows (or its fields), or the answer
//! as JSON with `--json`; progress on stderr (a bar on a terminal, a line every few seconds
//! otherwise).

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::jobs::{Progress, Rates};

/// The rows an answer is a list of (`entries`, `results`, `boards`, …), if it is one.
const ROW_FIELDS: [&str; 8] = ["entries", "results", "boards", "tournaments", "leagues", "rows", "neighbours", "items"];

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

/// One line of progress: boards done of all, lines (or entries) and their rate, and for a
/// restore the journal read of its size (in bytes: its lines are counted only as they are
/// read) with the time left at the rate so far.
pub fn progress_line(job: &str, progress: Progress, rates: Rates) -> String {
    let mut text = format!(
        "{job}: invocation {}, boards {}/{}, {} lines at {:.0}/s",
        progress.invocations, progress.boards_done, progress.boards, progress.units, rates.units
    );
    if progress.journal_bytes > 0 {
        let read = progress.journal_bytes - progress.left_bytes.min(progress.journal_bytes);
        let percent = read * 100 / progress.journal_bytes;
        text.push_str(&format!(", journal {} of {} ({percent}%)", bytes(read), bytes(progress.journal_bytes)));
        if let Some(eta) = progress.eta_secs(rates.bytes).filter(|_| progress.left_bytes > 0) {
            text.push_str(&format!(", ETA {}", duration(eta)));
        }
    }
    text
}

/// How far a job has come, 0 to 1: the journal read of its size when it is known (a
/// restore), else the boards done of all; `None` before anything is known.
pub fn fraction(progress: Progress) -> Option<f64> {
    if progress.journal_bytes > 0 {
        let read = progress.journal_bytes - progress.left_bytes.min(progress.journal_bytes);
        Some(read as f64 / progress.journal_bytes as f64)
    } else if progress.boards > 0 {
        Some(progress.boards_done.min(progress.boards) as f64 / progress.boards as f64)
    } else {
        None
    }
}

/// A bar `width` characters wide between brackets, filled to `fraction` (rounded down, so a bar
/// is full only when the job is).
pub fn bar(fraction: f64, width: usize) -> String {
    let filled = ((fraction.clamp(0.0, 1.0) * width as f64).floor() as usize).min(width);
    format!("[{}{}]", "#".repeat(filled), "-".repeat(width - filled))
}

fn bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 30 => format!("{:.1} GiB", n as f64 / (1u64 << 30) as f64),
        n if n >= 1 << 20 => format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64),
        n if n >= 1 << 10 => format!("{:.1} KiB", n as f64 / 1024.0),
        n => format!("{n} B"),
    }
}

fn duration(secs: u64) -> String {
    match secs {
        s if s >= 3600 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        s if s >= 60 => format!("{}m{:02}s", s / 60, s % 60),
        s => format!("{s}s"),
    }
}

/// Progress of a job on stderr: redrawn in place on a terminal, a line every `every` otherwise
/// (and the last one at the end), each with the time since the command started.
pub struct Reporter {
    job: &'static str,
    terminal: bool,
    every: Duration,
    started: Instant,
    last: Option<Instant>,
    unprinted: Option<String>,
}

impl Reporter {
    pub fn new(job: &'static str) -> Self {
        let terminal = std::io::stderr().is_terminal();
        Self { job, terminal, every: Duration::from_secs(5), started: Instant::now(), last: None, unprinted: None }
    }

    pub fn report(&mut self, progress: Progress, rates: Rates) {
        let text = format!("{} [{}]", progress_line(self.job, progress, rates), duration(self.started.elapsed().as_secs()));
        if self.terminal {
            // A bar on a terminal, before the numbers; piped, the lines stay plain.
            let bar = fraction(progress).map(|f| format!("{} ", bar(f, 24))).unwrap_or_default();
            eprint!("\r\x1b[2K{bar}{text}");
        } else if self.last.is_none_or(|last| last.elapsed() >= self.every) {
            eprintln!("{text}");
            (self.last, self.unprinted) = (Some(Instant::now()), None);
        } else {
            self.unprinted = Some(text);
        }
    }

    pub fn finish(&mut self) {
        if self.terminal {
            eprintln!();
        } else if let Some(text) = self.unprinted.take() {
            eprintln!("{text}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_bar_fills_with_the_journal_read_else_the_boards_done_and_is_full_only_when_done() {
        assert_eq!(bar(0.0, 10), "[----------]");
        assert_eq!(bar(0.44, 10), "[####------]");
        assert_eq!(bar(0.999, 10), "[#########-]", "not full before the end");
        assert_eq!(bar(1.0, 10), "[##########]");
        assert_eq!(bar(1.7, 10), "[##########]");
        let restore = Progress { boards_done: 4, boards: 5, journal_bytes: 1_000, left_bytes: 250, ..Progress::default() };
        assert_eq!(fraction(restore), Some(0.75), "a restore: the journal read, not the boards");
        let reshard = Progress { boards_done: 1, boards: 4, ..Progress::default() };
        assert_eq!(fraction(reshard), Some(0.25));
        assert_eq!(fraction(Progress::default()), None, "nothing known: no bar");
    }

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
    fn a_restores_progress_shows_the_journal_read_and_the_time_left() {
        let progress = Progress {
            invocations: 3,
            boards_done: 1,
            boards: 2,
            units: 1200,
            journal_bytes: 4 << 20,
            left_bytes: 1 << 20,
            read_bytes: 3 << 20,
        };
        assert_eq!(
            progress_line("restore", progress, Rates { units: 400.0, bytes: 8192.0 }),
            "restore: invocation 3, boards 1/2, 1200 lines at 400/s, journal 3.0 MiB of 4.0 MiB (75%), ETA 2m08s"
        );
        let reshard = Progress { invocations: 1, boards: 1, units: 50, ..Progress::default() };
        assert_eq!(
            progress_line("reshard", reshard, Rates { units: 50.0, bytes: 0.0 }),
            "reshard: invocation 1, boards 0/1, 50 lines at 50/s"
        );
    }

    #[test]
    fn an_empty_list_says_none() {
        assert_eq!(readable(&json!({"entries": []})), "entries:\n  (none)\n");
    }
}
