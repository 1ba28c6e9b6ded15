//! The keys of the runtime boards' catalog (docs/runtime-boards.md).

use super::{BoardKeys, Keys};

/// The journal (and key tag) of runtime boards' definitions (docs/runtime-boards.md): one slot,
/// journaled, drained and restored as a board's, restored before any board. No board can be
/// named so.
pub const CATALOG_JOURNAL: &str = "_catalog";

/// The change log's member whose score is the version from which the log names every change
/// (`BoardKeys::catalog_log`): the version before the first change made with the log. No board
/// can be named so.
pub const CATALOG_LOG_FROM: &str = "#from";

/// The change log's member whose score counts the changes logged since `CATALOG_LOG_FROM`: the
/// log is whole while the two add up to the catalog's version (a change made without the log,
/// by a release from before it, breaks the sum, and the next change starts the log again).
pub const CATALOG_LOG_COUNT: &str = "#count";

impl Keys {
    /// The journals a restore's campaign (`token`, hex digits, of restores of `scope`: `*` for
    /// every board, else the board or journal asked for) completed (hash: journal -> 1;
    /// `redis::restore::Campaign`). In the catalog's slot: one key whatever the boards.
    pub fn restore_campaign(&self, scope: &str, token: &str) -> String {
        format!("{}:restore-campaign:{token}:{scope}", self.catalog().base)
    }

    /// The keys of the runtime boards' catalog (`CATALOG_JOURNAL`): its journal, guard and
    /// restore bookkeeping as a board's, and `definitions`, `ending`, `catalog_version`.
    pub fn catalog(&self) -> BoardKeys {
        self.board(CATALOG_JOURNAL)
    }
}

impl BoardKeys {
    /// Of the catalog's keys (`Keys::catalog`): runtime boards' definitions (hash: board ->
    /// definition JSON).
    pub fn definitions(&self) -> String {
        format!("{}:definitions", self.base)
    }

    /// Of the catalog's keys: runtime boards being deleted (hash: board -> why and when).
    pub fn ending(&self) -> String {
        format!("{}:ending", self.base)
    }

    /// Of the catalog's keys: the tournaments whose deletion is done (sorted set, every score 0,
    /// so in name order): `GET /v1/tournaments?state=ended` pages through it, reading each one's
    /// tombstone in `ending`.
    pub fn retired_tournaments(&self) -> String {
        format!("{}:retired", self.base)
    }

    /// Of the catalog's keys: bumped by every change of a definition (functions reload on a move).
    pub fn catalog_version(&self) -> String {
        format!("{}:version", self.base)
    }

    /// Of the catalog's keys: the change log (sorted set: board -> the version that last changed
    /// it; `CATALOG_LOG_FROM` -> where the log starts). One member a board, so it never grows
    /// past the catalog.
    pub fn catalog_log(&self) -> String {
        format!("{}:changes", self.base)
    }

    /// Of the catalog's keys: the deployment's banned users (hash: user -> when recorded, ms),
    /// what a board defined after a ban carries onto itself (docs/moderation.md).
    pub fn banned_users(&self) -> String {
        format!("{}:banned", self.base)
    }
}
