//! What every scenario shares: the Redis connection, a key prefix of its own, repeated
//! timings with their median, and a Markdown report.

use std::fmt;
use std::future::Future;
use std::time::{Duration, Instant};

use standings::keys::Keys;
use standings::store::{Connection, RedisSettings, Store};

pub type BenchError = Box<dyn std::error::Error + Send + Sync>;

pub struct Bench {
    pub store: Store,
    /// Keys of this run; scenarios delete what they write.
    pub keys: Keys,
    pub repetitions: usize,
}

impl Bench {
    pub fn connect(repetitions: usize) -> Result<Self, BenchError> {
        let url = std::env::var("REDIS_URL").map_err(|_| "REDIS_URL is not set: run scripts/bench.sh, which starts redis-server")?;
        let mut settings = RedisSettings::standalone(&url);
        // A single command over millions of entries takes seconds, not the API's 2 s budget.
        settings.response_timeout = Duration::from_secs(120);
        let keys = Keys::new(&format!("bench-{}", std::process::id()))?;
        Ok(Self { store: Store::connect(&settings)?, keys, repetitions })
    }

    pub async fn connection(&self) -> Result<Connection, BenchError> {
        Ok(self.store.connection().await?)
    }
}

/// Wall-clock time of one awaited operation, as seen by the client (one round trip included).
pub async fn time<T, E>(operation: impl Future<Output = Result<T, E>>) -> Result<(Duration, T), E> {
    let started = Instant::now();
    let value = operation.await?;
    Ok((started.elapsed(), value))
}

/// Repeated timings of one method.
pub struct Measurement {
    pub method: String,
    pub samples: Vec<Duration>,
}

impl Measurement {
    pub fn new(method: impl Into<String>) -> Self {
        Self { method: method.into(), samples: Vec::new() }
    }

    pub fn median(&self) -> Duration {
        let mut sorted = self.samples.clone();
        sorted.sort();
        match sorted.len() {
            0 => Duration::ZERO,
            n if n % 2 == 1 => sorted[n / 2],
            n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2,
        }
    }
}

/// One scenario's results, printed as a Markdown section.
pub struct Report {
    pub title: String,
    pub measurements: Vec<Measurement>,
    /// Extra lines under the table (ratios, what was checked).
    pub notes: Vec<String>,
}

fn ms(duration: Duration) -> String {
    format!("{:.1} ms", duration.as_secs_f64() * 1000.0)
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "### {}\n", self.title)?;
        writeln!(f, "| method | runs | median | min | max |")?;
        writeln!(f, "|--------|-----:|-------:|----:|----:|")?;
        for m in &self.measurements {
            let min = m.samples.iter().min().copied().unwrap_or_default();
            let max = m.samples.iter().max().copied().unwrap_or_default();
            writeln!(f, "| {} | {} | {} | {} | {} |", m.method, m.samples.len(), ms(m.median()), ms(min), ms(max))?;
        }
        for note in &self.notes {
            writeln!(f, "\n{note}")?;
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
}
