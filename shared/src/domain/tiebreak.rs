//! The exact "first to reach the score ranks higher" composite.
//!
//! A board stores `points * 2^31 + (2^31 - 1 - (reached_at - EPOCH))` as the sorted-set
//! score. Both parts are integers and the sum stays below 2^53, so a double (Redis scores,
//! Lua numbers) holds it exactly: higher points always win, and for equal points the earlier
//! `reached_at` (whole seconds) has the larger composite. Members that reach the same points in
//! the same second are ordered by Redis itself (reverse byte order of the member id).
//!
//! Bounds (documented in the README):
//! - points: `0..=MAX_POINTS` (4,194,303)
//! - reached_at: `EPOCH..=EPOCH + 2^31 - 1`, i.e. 2020-01-01T00:00:00Z ..= 2088-01-19T03:14:07Z
//!
//! Anything outside is refused with `out_of_range`, never rounded. The Lua scripts use the same
//! constants (`TIME_SPAN` below); a unit test checks the script text against them.

use chrono::{DateTime, Utc};

/// 2020-01-01T00:00:00Z.
pub const EPOCH_SECS: i64 = 1_577_836_800;
/// The bits a double (a Redis score, a Lua number) holds exactly: a composite's value bits and
/// time bits share them. The one place the layout is decided.
pub const EXACT_BITS: u32 = 53;
pub const MAX_POINTS: i64 = (1 << 22) - 1;
/// Number of distinct seconds the time part can hold (2^31): what the points leave.
pub const TIME_SPAN: i64 = time_span_for(MAX_POINTS);
/// The largest score a score board takes (2^30 - 1), unless it declares a smaller `max_score`.
pub const MAX_SCORE: i64 = (1 << 30) - 1;

/// Distinct time parts of a composite whose values reach `max_value`: the exact bits the
/// values leave (2^31 at `MAX_POINTS`, 2^23 at `MAX_SCORE`).
pub const fn time_span_for(max_value: i64) -> i64 {
    let value = if max_value < 1 { 1 } else { max_value };
    let value_bits = 64 - value.leading_zeros();
    1 << (EXACT_BITS - value_bits)
}
pub const LAST_SECS: i64 = EPOCH_SECS + TIME_SPAN - 1;

/// How one board period packs a score and the time it was reached into one exact double:
/// `value * span + (span - 1 - (reached_at - origin) / step)`, where `value` is the score,
/// or `max_value - score` on a board where lower is better, so every board reads "highest
/// composite first" whatever its order. Rule boards use [`Scale::POINTS`] (the constants
/// above); score boards (`domain::scores`) trade time bits for a wider score range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scale {
    /// Distinct time parts.
    pub span: i64,
    /// The largest score (and value).
    pub max_value: i64,
    /// Lower scores rank higher.
    pub ascending: bool,
    /// Unix time of the largest time part.
    pub origin: i64,
    /// Seconds per time part.
    pub step: i64,
}

impl Scale {
    /// Rule boards: points in `0..=MAX_POINTS`, whole seconds from 2020 to 2088.
    pub const POINTS: Scale = Scale { span: TIME_SPAN, max_value: MAX_POINTS, ascending: false, origin: EPOCH_SECS, step: 1 };

    /// The stored value of a score (higher is better).
    pub fn value(&self, score: i64) -> i64 {
        if self.ascending { self.max_value - score } else { score }
    }

    /// The score of a stored value (the same flip, its own inverse).
    pub fn score(&self, value: i64) -> i64 {
        self.value(value)
    }

    pub fn time_part(&self, at: DateTime<Utc>) -> Result<i64, RangeError> {
        let ticks = (at.timestamp() - self.origin).div_euclid(self.step);
        if !(0..self.span).contains(&ticks) {
            return Err(RangeError::Time);
        }
        Ok(self.span - 1 - ticks)
    }

    pub fn encode(&self, score: i64, reached_at: DateTime<Utc>) -> Result<f64, RangeError> {
        if !(0..=self.max_value).contains(&score) {
            return Err(RangeError::Points);
        }
        // Exact: every scale keeps (max_value + 1) * span <= 2^53.
        Ok((self.value(score) * self.span + self.time_part(reached_at)?) as f64)
    }

    /// The whole score of a stored composite (what the API returns).
    pub fn score_of(&self, composite: f64) -> i64 {
        self.score((composite / self.span as f64).floor() as i64)
    }

    /// Score and reached-at time (to the scale's step) of a stored composite.
    pub fn decode(&self, composite: f64) -> Result<(i64, DateTime<Utc>), RangeError> {
        if !(composite.is_finite() && composite >= 0.0 && composite < (1u64 << EXACT_BITS) as f64 && composite.fract() == 0.0) {
            return Err(RangeError::Points);
        }
        let composite = composite as i64;
        let value = composite / self.span;
        if value > self.max_value {
            return Err(RangeError::Points);
        }
        let secs = self.origin + (self.span - 1 - composite % self.span) * self.step;
        Ok((self.score(value), DateTime::from_timestamp(secs, 0).ok_or(RangeError::Time)?))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RangeError {
    #[error("points must be within 0..={MAX_POINTS}")]
    Points,
    #[error("time must be between 2020-01-01T00:00:00Z and 2088-01-19T03:14:07Z")]
    Time,
}

/// The time part for points reached at `at` on a rule board: larger for earlier times.
pub fn time_part(at: DateTime<Utc>) -> Result<i64, RangeError> {
    Scale::POINTS.time_part(at)
}

pub fn encode(points: i64, reached_at: DateTime<Utc>) -> Result<f64, RangeError> {
    Scale::POINTS.encode(points, reached_at)
}

/// Whole points of a rule board's composite.
pub fn points_of(composite: f64) -> i64 {
    Scale::POINTS.score_of(composite)
}

pub fn decode(composite: f64) -> Result<(i64, DateTime<Utc>), RangeError> {
    Scale::POINTS.decode(composite)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn at(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(secs, 0).unwrap()
    }

    #[test]
    fn the_top_of_the_range_is_exactly_representable() {
        let max = encode(MAX_POINTS, at(EPOCH_SECS)).unwrap();
        assert_eq!(max, ((1u64 << 53) - 1) as f64);
        assert_eq!(decode(max).unwrap(), (MAX_POINTS, at(EPOCH_SECS)));
        // One second apart at the top of the range still orders, and still round-trips.
        let earlier = encode(MAX_POINTS, at(LAST_SECS - 1)).unwrap();
        let later = encode(MAX_POINTS, at(LAST_SECS)).unwrap();
        assert!(earlier > later);
        assert_eq!(earlier - later, 1.0);
    }

    #[test]
    fn out_of_range_is_refused_not_rounded() {
        assert_eq!(encode(MAX_POINTS + 1, at(EPOCH_SECS)), Err(RangeError::Points));
        assert_eq!(encode(-1, at(EPOCH_SECS)), Err(RangeError::Points));
        assert_eq!(encode(0, at(EPOCH_SECS - 1)), Err(RangeError::Time));
        assert_eq!(encode(0, at(LAST_SECS + 1)), Err(RangeError::Time));
        assert_eq!(decode(f64::NAN), Err(RangeError::Points));
        assert_eq!(decode(0.5), Err(RangeError::Points));
        assert_eq!(decode((1u64 << 53) as f64), Err(RangeError::Points));
    }

    #[test]
    fn the_seed_formula_loses_what_this_keeps() {
        // Seed 002's `score + 1 - ts/1e13` cannot tell two milliseconds apart at large scores.
        let seed = |score: f64, ms: f64| score + 1.0 - ms / 1e13;
        assert_eq!(seed(4_000_000.0, 1_708_746_590_000.0), seed(4_000_000.0, 1_708_746_590_001.0));
        let a = encode(4_000_000, at(1_708_746_590)).unwrap();
        let b = encode(4_000_000, at(1_708_746_591)).unwrap();
        assert!(a > b);
    }

    fn points() -> impl Strategy<Value = i64> {
        prop_oneof![0..=MAX_POINTS, Just(0), Just(MAX_POINTS), (MAX_POINTS - 10)..=MAX_POINTS]
    }

    fn secs() -> impl Strategy<Value = i64> {
        prop_oneof![EPOCH_SECS..=LAST_SECS, Just(EPOCH_SECS), Just(LAST_SECS), (LAST_SECS - 10)..=LAST_SECS]
    }

    proptest! {
        #[test]
        fn round_trips_over_the_whole_range(p in points(), s in secs()) {
            let composite = encode(p, at(s)).unwrap();
            prop_assert_eq!(decode(composite).unwrap(), (p, at(s)));
            prop_assert_eq!(points_of(composite), p);
        }

        #[test]
        fn orders_by_points_then_earliest(p1 in points(), s1 in secs(), p2 in points(), s2 in secs()) {
            let c1 = encode(p1, at(s1)).unwrap();
            let c2 = encode(p2, at(s2)).unwrap();
            let expected = p1.cmp(&p2).then(s2.cmp(&s1));
            prop_assert_eq!(c1.partial_cmp(&c2).unwrap(), expected);
        }
    }
}
