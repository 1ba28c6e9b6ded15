//! Quiet time: a user's crossings of one kind within `quiet_secs` of the first are merged into
//! one event, sent when the quiet time ends, and the last state wins. A window opened by
//! `entered_top` and last moved by `left_top` ends where it began: nothing is sent.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{CrossingKind, Detail};

/// One user's open window of one dimension (period and crossing pair).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Window {
    /// The crossing that opened it, and the user's rank before it.
    pub first: CrossingKind,
    pub rank_before: Option<u32>,
    /// The latest crossing merged in.
    pub last: Detail,
    /// When it is sent (ms, the stream's clock: the opening write's time + the quiet time).
    pub due_ms: i64,
    /// An event the bus refused (`hold_unsent`): no later crossing merges into it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub refused: bool,
}

/// Merges `detail`, written at `at_ms`, into its user's windows (`pending`: user → windows).
pub fn merge(pending: &mut BTreeMap<String, Vec<Window>>, detail: Detail, at_ms: i64, quiet_ms: i64) {
    let windows = pending.entry(detail.user_id.clone()).or_default();
    let same = |w: &&mut Window| {
        w.last.period == detail.period && w.last.period_id == detail.period_id && w.first.dimension() == detail.crossing.dimension()
    };
    match windows.iter_mut().find(|w| !w.refused && same(w) && at_ms < w.due_ms) {
        Some(window) => window.last = detail,
        None => windows.push(Window {
            first: detail.crossing,
            rank_before: detail.rank_before,
            last: detail,
            due_ms: at_ms + quiet_ms,
            refused: false,
        }),
    }
}

/// Takes the windows due by `horizon_ms` out of `pending`, as the events they send, in the
/// order they fell due (then by user).
pub fn due(pending: &mut BTreeMap<String, Vec<Window>>, horizon_ms: i64) -> Vec<Detail> {
    let mut ready = Vec::new();
    for windows in pending.values_mut() {
        let (now, later): (Vec<_>, Vec<_>) = std::mem::take(windows).into_iter().partition(|w| w.due_ms <= horizon_ms);
        *windows = later;
        ready.extend(now);
    }
    pending.retain(|_, windows| !windows.is_empty());
    ready.sort_by(|a, b| (a.due_ms, &a.last.user_id).cmp(&(b.due_ms, &b.last.user_id)));
    ready
        .into_iter()
        // A window's crossings share one dimension: `overtaken` always matches its first.
        .filter(|w| w.first == w.last.crossing)
        .map(|w| Detail { rank_before: w.rank_before, ..w.last })
        .collect()
}

/// Events a bus did not take, held in `pending` as windows due from `since_ms` (when the oldest
/// of them was written: the notification lag counts from there), a millisecond apart in the
/// order given: the next drain sends them before anything written after them, and no later
/// crossing merges into them.
pub fn hold_unsent(pending: &mut BTreeMap<String, Vec<Window>>, events: impl IntoIterator<Item = Detail>, since_ms: i64) {
    for (order, detail) in events.into_iter().enumerate() {
        let due_ms = since_ms + order as i64;
        let window = Window { first: detail.crossing, rank_before: detail.rank_before, due_ms, last: detail, refused: true };
        pending.entry(window.last.user_id.clone()).or_default().push(window);
    }
}
