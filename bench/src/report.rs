//! Timings and their percentiles, and the Markdown report with its targets.

use std::fmt;
use std::time::Duration;

/// Repeated timings of one method.
pub struct Measurement {
    pub method: String,
    pub samples: Vec<Duration>,
}

impl Measurement {
    pub fn new(method: impl Into<String>) -> Self {
        Self { method: method.into(), samples: Vec::new() }
    }

    fn sorted(&self) -> Vec<Duration> {
        let mut sorted = self.samples.clone();
        sorted.sort();
        sorted
    }

    pub fn median(&self) -> Duration {
        let sorted = self.sorted();
        match sorted.len() {
            0 => Duration::ZERO,
            n if n % 2 == 1 => sorted[n / 2],
            n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2,
        }
    }

    /// Nearest-rank percentile (`99.0`: the smallest sample at least 99 % of samples do not exceed).
    pub fn percentile(&self, percent: f64) -> Duration {
        let sorted = self.sorted();
        let rank = ((percent / 100.0) * sorted.len() as f64).ceil() as usize;
        sorted.get(rank.max(1) - 1).copied().unwrap_or_default()
    }

    pub fn min(&self) -> Duration {
        self.samples.iter().min().copied().unwrap_or_default()
    }

    pub fn max(&self) -> Duration {
        self.samples.iter().max().copied().unwrap_or_default()
    }
}

/// `1234567` → `1,234,567`.
pub fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// `a / b` of two durations.
pub fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64()
}

pub fn ms(duration: Duration) -> String {
    format!("{:.1} ms", duration.as_secs_f64() * 1000.0)
}

pub fn micros(duration: Duration) -> String {
    format!("{:.0} µs", duration.as_secs_f64() * 1e6)
}

/// A Markdown table: the first column is left-aligned, the others right-aligned.
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&str]) -> Self {
        Self { header: header.iter().map(|h| (*h).to_owned()).collect(), rows: Vec::new() }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The table with one more column, one value per row.
    pub fn with_column(mut self, header: &str, values: Vec<String>) -> Self {
        self.header.push(header.to_owned());
        for (row, value) in self.rows.iter_mut().zip(values) {
            row.push(value);
        }
        self
    }

    /// Median, min and max of each method's runs.
    pub fn timings(measurements: &[&Measurement]) -> Self {
        let mut table = Self::new(&["method", "runs", "median", "min", "max"]);
        for m in measurements {
            table.row(vec![m.method.clone(), m.samples.len().to_string(), ms(m.median()), ms(m.min()), ms(m.max())]);
        }
        table
    }

    /// p50 and p99 latencies of each method.
    pub fn latencies(measurements: &[&Measurement]) -> Self {
        let mut table = Self::new(&["method", "samples", "p50", "p99", "max"]);
        for m in measurements {
            table.row(vec![m.method.clone(), m.samples.len().to_string(), micros(m.median()), micros(m.percentile(99.0)), micros(m.max())]);
        }
        table
    }
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "| {} |", self.header.join(" | "))?;
        let rules: Vec<&str> = (0..self.header.len()).map(|i| if i == 0 { "---" } else { "--:" }).collect();
        writeln!(f, "|{}|", rules.join("|"))?;
        for row in &self.rows {
            writeln!(f, "| {} |", row.join(" | "))?;
        }
        Ok(())
    }
}

/// One target of issue 9, judged on this run.
pub struct Target {
    pub row: String,
    pub goal: String,
    pub measured: String,
    pub met: bool,
}

impl Target {
    /// `measured ≥ bound` times the baseline.
    pub fn at_least(row: impl Into<String>, baseline: &str, measured: f64, bound: f64) -> Self {
        Self { row: row.into(), goal: format!("≥ {bound}× {baseline}"), measured: format!("{measured:.2}×"), met: measured >= bound }
    }

    /// `measured ≤ bound` times the baseline.
    pub fn at_most(row: impl Into<String>, baseline: &str, measured: f64, bound: f64) -> Self {
        Self { row: row.into(), goal: format!("≤ {bound}× {baseline}"), measured: format!("{measured:.2}×"), met: measured <= bound }
    }

    pub fn verdict(&self) -> &'static str {
        if self.met { "met" } else { "**missed**" }
    }
}

/// Every target of a run, in one table.
pub fn target_table<'a>(targets: impl Iterator<Item = &'a Target>) -> Table {
    let mut table = Table::new(&["row", "target", "measured", "verdict"]);
    for t in targets {
        table.row(vec![t.row.clone(), t.goal.clone(), t.measured.clone(), t.verdict().to_owned()]);
    }
    table
}

/// One scenario's results, printed as a Markdown section.
pub struct Report {
    pub title: String,
    /// What ran: sizes, clients, samples (one paragraph).
    pub setup: String,
    pub tables: Vec<Table>,
    /// Lines under the tables: ratios, counts, what was checked.
    pub notes: Vec<String>,
    pub targets: Vec<Target>,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "### {}\n\n{}\n", self.title, self.setup)?;
        for table in &self.tables {
            writeln!(f, "{table}")?;
        }
        for note in &self.notes {
            writeln!(f, "{note}\n")?;
        }
        if !self.targets.is_empty() {
            writeln!(f, "{}", target_table(self.targets.iter()))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_of_an_even_count_is_the_mean_of_the_middle_two() {
        let mut m = Measurement::new("m");
        m.samples = [5, 1, 3, 9].map(Duration::from_millis).into();
        assert_eq!(m.median(), Duration::from_millis(4));
        m.samples.push(Duration::from_millis(7));
        assert_eq!(m.median(), Duration::from_millis(5));
    }

    #[test]
    fn the_99th_percentile_is_the_nearest_rank() {
        let mut m = Measurement::new("m");
        m.samples = (1..=200).rev().map(Duration::from_millis).collect();
        assert_eq!(m.percentile(99.0), Duration::from_millis(198));
        assert_eq!(m.percentile(100.0), Duration::from_millis(200));
        m.samples.truncate(1);
        assert_eq!(m.percentile(99.0), Duration::from_millis(200));
    }

    #[test]
    fn counts_are_grouped_by_thousands() {
        assert_eq!(grouped(10_000_000), "10,000,000");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1_000), "1,000");
    }

    #[test]
    fn targets_say_whether_they_were_met() {
        assert!(Target::at_least("ingest", "raw", 0.5, 0.5).met);
        assert!(!Target::at_most("memory", "bare ZSET", 2.01, 2.0).met);
        assert_eq!(Target::at_most("top", "raw", 1.234, 2.0).measured, "1.23×");
    }
}
