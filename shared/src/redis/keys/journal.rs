//! A board's keys for its journal, its restore and its notices: the bookkeeping beside its
//! state (docs/journal.md, docs/notifications.md).

use super::BoardKeys;

/// What a board key holds of a period's composites (`BoardKeys::composites_in`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holds {
    /// A sorted set of members at their composites.
    Scores,
    /// A hash of members at `<composite>|<n>` (and `#`, a count).
    Arrivals,
    /// Members `<cohort>|<composite>|<user>` (prelude_league.lua `order_entry`).
    CohortOrder,
}

impl BoardKeys {
    /// Whether `relative` (a key relative to a board's, as a line's effects name it) is one of
    /// its period sets.
    pub fn is_period_set(relative: &str) -> bool {
        relative.starts_with(":z:")
    }

    /// What a key relative to the board's (`relative`) holds of one period's composites: its
    /// sorted set (live or frozen) or its arrivals (`<composite>|<n>` values), with the
    /// period's kind and id; `None` for a key that holds none. A league's cohort order holds
    /// composites too (`league_order`): `Some((Holds::CohortOrder, "", period id))`.
    pub fn composites_in(relative: &str) -> Option<(Holds, &str, &str)> {
        if let Some(period) = relative.strip_prefix(":lg:o:") {
            return Some((Holds::CohortOrder, "", period));
        }
        let (holds, rest) = [(":z:", Holds::Scores), (":frozen:", Holds::Scores), (":arrivals:", Holds::Arrivals)]
            .into_iter()
            .find_map(|(stem, holds)| relative.strip_prefix(stem).map(|rest| (holds, rest)))?;
        let (kind, id) = rest.split_once(':')?;
        Some((holds, kind, id))
    }

    /// The board's journal: a stream of every applied write, drained to S3 (docs/journal.md).
    /// Its key whether or not the journal is on (the scripts take it either way, see
    /// `journaled`).
    pub fn journal(&self) -> String {
        format!("{}:journal", self.base)
    }

    /// Where a restore of this board from the journal stands (a hash: the object and line to
    /// go on from, or `done` for a day once it completed).
    pub fn restore_checkpoint(&self) -> String {
        format!("{}:restore", self.base)
    }

    /// A restore's record of which keys it restores (claimed) and which it found intact.
    pub fn restore_claims(&self) -> String {
        format!("{}:restore-claims", self.base)
    }

    /// The window of writes a rolled-back store took before its fence, to decide again
    /// (`<after>|<through>`, docs/journal.md#rollbacks): a key of its own, so a rebuild and a
    /// guard lost meanwhile keep it.
    pub fn restore_redecide(&self) -> String {
        format!("{}:restore-redecide", self.base)
    }

    /// Held by the one restore of this board running (a string with a lease).
    pub fn restore_lock(&self) -> String {
        format!("{}:restore-lock", self.base)
    }

    /// The board's rank moves not yet delivered (a stream beside the journal, drained by the same
    /// function to EventBridge; docs/notifications.md).
    pub fn notices(&self) -> String {
        format!("{}:notices", self.base)
    }

    /// What the notification drain has counted of the board's notices (hash: `delivered`, the
    /// entries it trimmed after sending; `dropped`, the drops it reported).
    pub fn notices_count(&self) -> String {
        format!("{}:notices-count", self.base)
    }

    /// Users' crossings held back by a quiet time, or refused by the bus (hash: user ->
    /// windows, JSON).
    pub fn notices_quiet(&self) -> String {
        format!("{}:notices-quiet", self.base)
    }

    /// Held by the one drain of this board's notices running (a string with a lease): two at
    /// once would each replace the other's held windows.
    pub fn notices_lock(&self) -> String {
        format!("{}:notices-lock", self.base)
    }

    /// The restore campaign that completed this journal (a string: its token; a
    /// `redis::restore::Campaign`): in the journal's own slot, so a loss of the slot takes it.
    pub fn restore_done(&self) -> String {
        format!("{}:restore-done", self.base)
    }

    /// The board's scale record (`Keys::board_scale`; docs/boards.md#score-boards), in its one
    /// slot: a shard's keys name one that is never written.
    pub fn scale_record(&self) -> String {
        self.relative(":scale")
    }

    /// The board's layout record (`Keys::board_layout`), in its one slot likewise.
    pub fn layout_record(&self) -> String {
        self.relative(":layout")
    }

    /// The layout a store older than the board's last switch wrote to before its fence, whose
    /// journal streams the restore kept for those writes to be decided again in the layout
    /// switched to (docs/journal.md#rollbacks; a string, `redis::layout`'s text), in its one
    /// slot like the layout record.
    pub fn older_writes_record(&self) -> String {
        self.relative(":older-writes")
    }

    /// Whether a rebuild of the board from its journal keeps `key` (docs/journal.md#rollbacks):
    /// the journal, the restore's own records and the notices, none of them the board's state;
    /// its recorded layout and scale (`Keys::layout`, `Keys::scale`) and a reshard's checkpoint,
    /// which the journal does not bring back; and its frozen seasons (a freeze is not journaled).
    pub fn kept_by_rebuild(&self, key: &str) -> bool {
        let kept = [
            self.journal(),
            self.restore_checkpoint(),
            self.restore_claims(),
            self.restore_lock(),
            self.restore_redecide(),
            self.notices(),
            self.notices_count(),
            self.notices_quiet(),
            self.notices_lock(),
            self.reshard_checkpoint(),
            self.layout_record(),
            self.scale_record(),
            self.older_writes_record(),
        ];
        kept.contains(&key.to_owned()) || key.starts_with(&self.relative(":frozen:"))
    }
}
