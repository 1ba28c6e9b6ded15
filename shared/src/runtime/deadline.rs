//! An invocation's deadline. Lambda sends it with each invocation (the context's `deadline`,
//! `Lambda-Runtime-Deadline-Ms`), always ahead when the invocation starts. Local emulators send
//! none (0) or one long past: `cargo lambda watch` 1.9 sends 600000, ten minutes past the epoch.
//! A function then runs on the timeout its template gives it, as it would in Lambda: the local
//! run behaves as the deployed stack (a queue batch has its 30 s to dead-letter poison).

use chrono::{DateTime, Duration, Utc};

/// The deadline of an invocation that started at `now`: the runtime's, or `timeout` from now
/// when the runtime's is none or already past.
pub fn invocation_deadline(deadline_ms: u64, now: DateTime<Utc>, timeout: Duration) -> DateTime<Utc> {
    i64::try_from(deadline_ms).ok().and_then(DateTime::from_timestamp_millis).filter(|&deadline| deadline > now).unwrap_or(now + timeout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lambdas_deadline_is_kept_and_an_emulators_becomes_the_templates_timeout() {
        let now = DateTime::parse_from_rfc3339("2026-11-30T10:00:00Z").unwrap().to_utc();
        let lambdas = now + Duration::seconds(29);
        assert_eq!(invocation_deadline(lambdas.timestamp_millis() as u64, now, Duration::seconds(30)), lambdas);
        assert_eq!(invocation_deadline(0, now, Duration::seconds(30)), now + Duration::seconds(30), "none sent");
        assert_eq!(invocation_deadline(600_000, now, Duration::seconds(30)), now + Duration::seconds(30), "cargo lambda watch's");
        assert_eq!(invocation_deadline(u64::MAX, now, Duration::seconds(30)), now + Duration::seconds(30), "no instant at all");
    }
}
