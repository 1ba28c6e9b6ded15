//! The shape of a board: buckets of equal width from its lowest to its highest points, and
//! the score it takes to be in each top share. `read_distribution.lua` reads a board's
//! [`Histogram`] in one snapshot (its header states the bucket and cut-off rules); the archive
//! keeps one per bucket count for every archived season.

use serde::Serialize;

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
    /// The lowest score still inside the top `top_percent` % of the board.
    pub score: i64,
}

impl From<Histogram> for Distribution {
    /// Each bucket's bounds from the lowest points, the width and the highest points.
    fn from(histogram: Histogram) -> Self {
        let buckets = histogram
            .counts
            .iter()
            .zip(0..)
            .map(|(&count, i)| {
                let min = histogram.lowest + i * histogram.width;
                Bucket { min, max: (min + histogram.width - 1).min(histogram.highest), count }
            })
            .collect();
        let cutoffs = CUTOFF_SHARES.iter().zip(histogram.cutoffs).map(|(&top_percent, score)| Cutoff { top_percent, score }).collect();
        Self { total: histogram.total, buckets, cutoffs }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_bucket_ends_at_the_highest_points() {
        let histogram = Histogram { total: 4, lowest: 3, highest: 9, width: 3, counts: vec![2, 1, 1], cutoffs: vec![9, 9, 9, 8, 5] };
        let distribution = Distribution::from(histogram);
        let bounds: Vec<(i64, i64)> = distribution.buckets.iter().map(|b| (b.min, b.max)).collect();
        assert_eq!(bounds, [(3, 5), (6, 8), (9, 9)]);
        assert_eq!(distribution.cutoffs.iter().map(|c| c.top_percent).collect::<Vec<_>>(), CUTOFF_SHARES);
    }
}
