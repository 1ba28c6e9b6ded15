//! Decaying ("hot") boards, the pure part: which hourly bucket an instant falls in, which
//! buckets make up a window and with what weights, when a scale board's next run is due, and
//! how scores are rounded for the API. Every function takes the time; nothing touches Redis.
//!
//! Buckets are whole local hours of the board's timezone. A local hour is always 3600 s long
//! (DST moves the clock by whole hours, and half-hour zones keep their offset within an hour),
//! so a window is `window_hours` consecutive 3600-second intervals ending with the current one.

use chrono::{DateTime, Duration, Timelike, Utc};
use chrono_tz::Tz;

use crate::domain::config::{Decay, Weights};

/// Largest `delta` one heat event may add. Bucket sums stay integers far below 2^53, so
/// weighted sums are exact up to the weights' own rounding.
pub const MAX_HEAT_DELTA: i64 = 10_000;

/// Scores are doubles (weighted sums); the API rounds them to this many decimal places.
pub const SCORE_DECIMALS: i32 = 3;

/// A scale board drops members whose score has decayed below this (a thousandth of the
/// smallest heat), so items heated once do not stay in the set forever.
pub const SCALE_PRUNE_BELOW: f64 = 1e-3;

const HOUR: Duration = Duration::hours(1);

/// How a window board weighs a bucket by its age.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Curve {
    /// Seed 004: `1.0, 1 - step, 1 - 2·step, …`.
    Linear { step: f64 },
    /// Halves every `half_life_hours`.
    Exponential { half_life_hours: f64 },
}

impl Curve {
    /// The curve a validated `Decay::Window` describes (validation guarantees the parameter
    /// its `weights` needs is present).
    pub fn of(weights: Weights, linear_step: Option<f64>, half_life_hours: Option<f64>) -> Self {
        match weights {
            Weights::Linear => Curve::Linear { step: linear_step.expect("validated: linear weights have a step") },
            Weights::Exponential => {
                Curve::Exponential { half_life_hours: half_life_hours.expect("validated: exponential weights have a half-life") }
            }
        }
    }

    /// Weight of the bucket `age` whole hours before the current one (age 0 weighs 1).
    pub fn weight(self, age: u32) -> f64 {
        match self {
            Curve::Linear { step } => 1.0 - f64::from(age) * step,
            Curve::Exponential { half_life_hours } => 0.5_f64.powf(f64::from(age) / half_life_hours),
        }
    }

    /// Weights of a whole window, newest bucket first.
    pub fn weights(self, window_hours: u32) -> Vec<f64> {
        (0..window_hours).map(|age| self.weight(age)).collect()
    }
}

/// How one decaying board decays, resolved from its configuration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DecayPlan {
    Window { window_hours: u32, curve: Curve, synthesized_ttl_secs: u64 },
    Scale { factor: f64, every_minutes: u32 },
}

impl From<&Decay> for DecayPlan {
    fn from(decay: &Decay) -> Self {
        match *decay {
            Decay::Window { window_hours, weights, linear_step, half_life_hours, synthesized_ttl_secs } => {
                DecayPlan::Window { window_hours, curve: Curve::of(weights, linear_step, half_life_hours), synthesized_ttl_secs }
            }
            Decay::Scale { factor, every_minutes } => DecayPlan::Scale { factor, every_minutes },
        }
    }
}

/// First instant of the local hour (in `tz`) that contains `at`.
pub fn hour_start(at: DateTime<Utc>, tz: Tz) -> DateTime<Utc> {
    let local = at.with_timezone(&tz);
    let into_hour =
        Duration::seconds(i64::from(local.minute() * 60 + local.second())) + Duration::nanoseconds(i64::from(local.nanosecond()));
    at - into_hour
}

/// Start of every bucket in the window that ends with the hour containing `at`, newest first.
pub fn window_buckets(at: DateTime<Utc>, tz: Tz, window_hours: u32) -> Vec<DateTime<Utc>> {
    let newest = hour_start(at, tz);
    (0..window_hours).map(|age| newest - HOUR * age as i32).collect()
}

/// When a bucket's key expires: one hour after it has left the window.
pub fn bucket_expires_at(start: DateTime<Utc>, window_hours: u32) -> i64 {
    (start + HOUR * (window_hours as i32 + 1)).timestamp()
}

/// The minute a scheduled run stands for (EventBridge delivers a minute's run with that
/// minute's time; seconds are dropped).
pub fn minute_of(at: DateTime<Utc>) -> DateTime<Utc> {
    slot_of(at, 60)
}

/// The start of the `span_secs` long slot holding `at`, aligned to the Unix epoch. In whole
/// seconds, not `duration_trunc`'s nanoseconds, which end in 1677 and 2262: every instant a
/// payload can name has one (a scheduled `time` of 1600 panicked the hotness function).
fn slot_of(at: DateTime<Utc>, span_secs: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(at.timestamp().div_euclid(span_secs) * span_secs, 0).unwrap_or(DateTime::<Utc>::MIN_UTC)
}

/// Start of the scale period containing `at`: periods are `every_minutes` long, aligned to
/// the Unix epoch (so hourly scaling happens on the UTC hour).
pub fn scale_slot(at: DateTime<Utc>, every_minutes: u32) -> DateTime<Utc> {
    slot_of(at, i64::from(every_minutes.max(1)) * 60)
}

/// A score as the API shows it.
pub fn round_score(score: f64) -> f64 {
    let scale = 10_f64.powi(SCORE_DECIMALS);
    (score * scale).round() / scale
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::config::MAX_SCALE_MINUTES;
    use chrono_tz::{America::New_York, Asia::Kathmandu, Asia::Kolkata, Asia::Shanghai};
    use proptest::prelude::*;

    fn utc(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn linear_weights_are_the_seeds_one_minus_four_percent_per_hour() {
        let weights = Curve::Linear { step: 0.04 }.weights(24);
        assert_eq!(weights.len(), 24);
        for (age, expected) in [(0, 1.0), (1, 0.96), (2, 0.92), (10, 0.6), (23, 0.08)] {
            assert!((weights[age] - expected).abs() < 1e-12, "age {age}: {}", weights[age]);
        }
    }

    #[test]
    fn exponential_weights_halve_every_half_life() {
        let curve = Curve::Exponential { half_life_hours: 6.0 };
        assert_eq!(curve.weight(0), 1.0);
        assert_eq!(curve.weight(6), 0.5);
        assert_eq!(curve.weight(12), 0.25);
        assert!((curve.weight(3) - std::f64::consts::FRAC_1_SQRT_2).abs() < 1e-15);
    }

    #[test]
    fn the_default_board_resolves_to_24_linear_hours() {
        let config = crate::domain::config::Config::default_boards();
        let plan = DecayPlan::from(config.board("hot-videos").unwrap().decay.as_ref().unwrap());
        assert_eq!(plan, DecayPlan::Window { window_hours: 24, curve: Curve::Linear { step: 0.04 }, synthesized_ttl_secs: 300 });
    }

    #[test]
    fn buckets_are_local_hours() {
        assert_eq!(hour_start(utc("2026-11-22T10:59:59+08:00"), Shanghai), utc("2026-11-22T10:00:00+08:00"));
        assert_eq!(hour_start(utc("2026-11-22T11:00:00+08:00"), Shanghai), utc("2026-11-22T11:00:00+08:00"));
        // Half- and quarter-hour zones: local hours start at :30 / :15 UTC.
        assert_eq!(hour_start(utc("2026-11-22T05:10:00Z"), Kolkata), utc("2026-11-22T04:30:00Z"));
        assert_eq!(hour_start(utc("2026-11-22T05:10:00Z"), Kathmandu), utc("2026-11-22T04:15:00Z"));
    }

    #[test]
    fn a_window_is_consecutive_hours_even_across_a_dst_change() {
        // New York fell back at 2026-11-01 02:00 EDT: local 01:00-02:00 happened twice.
        let buckets = window_buckets(utc("2026-11-01T07:30:00Z"), New_York, 4);
        let expected: Vec<_> =
            ["2026-11-01T07:00:00Z", "2026-11-01T06:00:00Z", "2026-11-01T05:00:00Z", "2026-11-01T04:00:00Z"].map(utc).into();
        assert_eq!(buckets, expected);
    }

    #[test]
    fn buckets_expire_an_hour_after_leaving_the_window() {
        let start = utc("2026-11-22T10:00:00+08:00");
        assert_eq!(bucket_expires_at(start, 24), utc("2026-11-23T11:00:00+08:00").timestamp());
    }

    #[test]
    fn runs_are_keyed_by_minute_and_scale_periods_by_their_start() {
        assert_eq!(minute_of(utc("2026-11-22T10:05:59.9Z")), utc("2026-11-22T10:05:00Z"));
        assert_eq!(scale_slot(utc("2026-11-22T10:59:00Z"), 60), utc("2026-11-22T10:00:00Z"));
        assert_eq!(scale_slot(utc("2026-11-22T10:59:00Z"), 15), utc("2026-11-22T10:45:00Z"));
        // Outside the nanosecond range `duration_trunc` works in: a slot, not a panic.
        assert_eq!(minute_of(utc("1600-01-01T00:00:59.5Z")), utc("1600-01-01T00:00:00Z"));
        assert_eq!(minute_of(utc("2300-01-01T00:01:00Z")), utc("2300-01-01T00:01:00Z"));
        assert_eq!(scale_slot(utc("2026-11-22T10:59:00Z"), MAX_SCALE_MINUTES), utc("2026-02-12T00:00:00Z"));
        assert_eq!(scale_slot(utc("2026-11-22T10:59:00Z"), u32::MAX), utc("1970-01-01T00:00:00Z"));
        assert_eq!(minute_of(DateTime::<Utc>::MIN_UTC), DateTime::<Utc>::MIN_UTC);
        assert!(minute_of(DateTime::<Utc>::MAX_UTC) <= DateTime::<Utc>::MAX_UTC);
    }

    #[test]
    fn scores_round_to_three_decimals() {
        assert_eq!(round_score(1.96), 1.96);
        assert_eq!(round_score(0.1 + 0.2), 0.3);
        assert_eq!(round_score(2.0 / 3.0), 0.667);
    }

    fn any_tz() -> impl Strategy<Value = Tz> {
        prop::sample::select(vec![Shanghai, Kolkata, Kathmandu, New_York, chrono_tz::Australia::Adelaide, chrono_tz::UTC])
    }

    proptest! {
        #[test]
        fn every_instant_is_in_the_newest_bucket_of_its_window(secs in 1_577_836_800i64..2_500_000_000, tz in any_tz(), hours in 1u32..=168) {
            let at = DateTime::from_timestamp(secs, 0).unwrap();
            let buckets = window_buckets(at, tz, hours);
            prop_assert_eq!(buckets.len(), hours as usize);
            prop_assert!(buckets[0] <= at && at < buckets[0] + HOUR);
            prop_assert_eq!(buckets[0].with_timezone(&tz).minute(), 0);
            for pair in buckets.windows(2) {
                prop_assert_eq!(pair[0] - pair[1], HOUR);
            }
        }

        #[test]
        fn weights_fall_with_age_and_stay_positive(step in 0.001f64..0.04, half_life in 0.5f64..48.0, hours in 2u32..=24) {
            for curve in [Curve::Linear { step }, Curve::Exponential { half_life_hours: half_life }] {
                let weights = curve.weights(hours);
                prop_assert_eq!(weights[0], 1.0);
                prop_assert!(weights.windows(2).all(|w| w[1] < w[0] && w[1] > 0.0));
            }
        }
    }
}
