//! The shape of a board: buckets of equal width from its lowest to its highest points, and
//! the score it takes to be in each top share. `read_distribution.lua` reads a board's
//! [`Histogram`] in one snapshot (its header states the bucket and cut-off rules); the archive
//! keeps one per bucket count for every archived season.

use serde::Serialize;

use crate::domain::tiebreak::Scale;

/// Most buckets of a distribution, and how many when the request names none.
pub const MAX_BUCKETS: u64 = 100;
pub const DEFAULT_BUCKETS: u64 = 10;
/// The top shares, in percent, a distribution gives the cut-off score of.
pub const CUTOFF_SHARES: [u32; 5] = [1, 5, 10, 25, 50];

/// A board's shape as read: size, lowest and highest points, the buckets' width and counts
/// (lowest bucket first), and the points at each share's cut-off rank (`CUTOFF_SHARES` order).
/// All zeros and empty for an empty board.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Histogram {
    pub total: u64,
    pub lowest: i64,
    pub highest: i64,
    pub width: i64,
    pub counts: Vec<u64>,
    pub cutoffs: Vec<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Distribution {
    pub total: u64,
    /// Lowest points first; the counts sum to `total`. Empty for an empty board.
    pub buckets: Vec<Bucket>,
    /// One per share of `CUTOFF_SHARES`; empty for an empty board.
    pub cutoffs: Vec<Cutoff>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bucket {
    pub min: i64,
    pub max: i64,
    pub count: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cutoff {
    pub top_percent: u32,
    /// The lowest score (the highest where lower is better) still inside the top
    /// `top_percent` % of the board.
    pub score: i64,
}

impl Distribution {
    /// Each bucket's bounds from the lowest value, the width and the highest value, as scores
    /// of `scale`: on a board where lower is better the histogram is read in values (higher
    /// is better), so its buckets come back reversed and each cut-off is the highest score
    /// still inside its share.
    pub fn of(histogram: Histogram, scale: &Scale) -> Self {
        let mut buckets: Vec<Bucket> = histogram
            .counts
            .iter()
            .zip(0..)
            .map(|(&count, i)| {
                let low = histogram.lowest + i * histogram.width;
                let high = (low + histogram.width - 1).min(histogram.highest);
                let (a, b) = (scale.score(low), scale.score(high));
                Bucket { min: a.min(b), max: a.max(b), count }
            })
            .collect();
        if scale.ascending {
            buckets.reverse();
        }
        let cutoffs = CUTOFF_SHARES
            .iter()
            .zip(histogram.cutoffs)
            .map(|(&top_percent, value)| Cutoff { top_percent, score: scale.score(value) })
            .collect();
        Self { total: histogram.total, buckets, cutoffs }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_bucket_ends_at_the_highest_points() {
        let histogram = Histogram { total: 4, lowest: 3, highest: 9, width: 3, counts: vec![2, 1, 1], cutoffs: vec![9, 9, 9, 8, 5] };
        let distribution = Distribution::of(histogram, &Scale::POINTS);
        let bounds: Vec<(i64, i64)> = distribution.buckets.iter().map(|b| (b.min, b.max)).collect();
        assert_eq!(bounds, [(3, 5), (6, 8), (9, 9)]);
        assert_eq!(distribution.cutoffs.iter().map(|c| c.top_percent).collect::<Vec<_>>(), CUTOFF_SHARES);
    }
}
