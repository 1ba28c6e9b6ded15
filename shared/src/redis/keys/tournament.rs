//! The keys of a tournament's instance (docs/tournaments.md), beside its board's period in the
//! board's slot: the submitting script reads and writes them in the same call as the score.

use super::BoardKeys;
use crate::domain::period::Period;

impl BoardKeys {
    /// The players of one instance (a set; its size is the instance's `size`).
    pub fn players(&self, period: &Period) -> String {
        format!("{}:players:{}:{}", self.base, period.kind.as_str(), period.id)
    }

    /// How many players an instance had when its seats were freed (a string; its `size` from
    /// then on).
    pub fn final_size(&self, period: &Period) -> String {
        format!("{}:size:{}:{}", self.base, period.kind.as_str(), period.id)
    }

    /// The submissions each player made in one instance (a hash: user -> count).
    pub fn entries(&self, period: &Period) -> String {
        format!("{}:entries:{}:{}", self.base, period.kind.as_str(), period.id)
    }
}
