//! What a void takes away (docs/journal.md#void): of one user's events on one board whose time
//! (`occurred_at`, or when applied) is in `[from, to)`, the points each give still contributes
//! now, in each period it landed in: not taken back since, not voided before, not removed by a
//! ban (which empties the periods it names) or a correction (a removal empties a period; a
//! lowering takes from the oldest contributions first). A take-back earns nothing, so voiding
//! one gives nothing back; points earned outside the window are never taken. Pure: the user's
//! journal, in the board's order of writes, passed in.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use crate::domain::config::{Board, Scope};
use crate::domain::period::{Period, PeriodKind};
use crate::domain::scoring::Event;

/// One of the user's writes on the board, as the journal has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Written {
    Event(Applied),
    /// An earlier void of the gives in `[from, to)` written before it.
    Void {
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    },
    /// A ban or correction that lowered one period (kind name and id) by `by` points, or
    /// removed all the user held there (`None`).
    Lowered {
        period: String,
        period_id: String,
        by: Option<i64>,
    },
}

/// An entry of a user's day ledger: the board's local day and `action|target`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct LedgerEntry {
    pub day: String,
    pub field: String,
}

/// What a void takes: points per period, and the ledger entries of the gives it voids, which
/// it sets to 0 so that a later take-back of one takes nothing (not their points twice).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Voided {
    /// In the board's period order, then period id; only periods with points to take.
    pub periods: Vec<(Period, i64)>,
    pub entries: Vec<LedgerEntry>,
}

/// An applied event: what it changed in each of the board's periods it landed in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// When it counts: its `occurred_at`, or when it was applied. Picks its periods.
    pub time: DateTime<Utc>,
    /// True for a give, false for a take-back.
    pub give: bool,
    /// The day ledger's entry it gives to or takes back from; `None` when nothing can take it
    /// back.
    pub entry: Option<LedgerEntry>,
    /// Its change to each of the board's periods, in the order of the board's `periods`.
    pub changes: Vec<i64>,
}

/// What a void of `[from, to)` takes.
pub fn voided(board: &Board, written: &[Written], from: DateTime<Utc>, to: DateTime<Utc>) -> Voided {
    // What each give still contributes to each of the board's periods, by position in
    // `written`; the give standing on each ledger entry.
    let mut left: BTreeMap<usize, Vec<i64>> = BTreeMap::new();
    let mut on_entry: BTreeMap<&LedgerEntry, usize> = BTreeMap::new();
    for (index, write) in written.iter().enumerate() {
        match write {
            Written::Event(event) if event.give && event.changes.iter().any(|&change| change > 0) => {
                left.insert(index, event.changes.iter().map(|&change| change.max(0)).collect());
                if let Some(entry) = &event.entry {
                    on_entry.insert(entry, index);
                }
            }
            // An applied take-back ends its give whatever its periods still held (it deleted the
            // ledger entry even where it could take nothing). What it took beyond what its give
            // still held (a lowering took from that give first) came from the others: they hold
            // that much less, oldest first.
            Written::Event(event) if !event.give => {
                let Some(given) = event.entry.as_ref().and_then(|entry| on_entry.remove(entry)) else { continue };
                let held = left.remove(&given).unwrap_or_default();
                for (order, &change) in event.changes.iter().enumerate() {
                    let beyond = -change - held.get(order).copied().unwrap_or(0);
                    if beyond > 0 {
                        let period_id = Period::containing(board.periods[order], event.time, board.timezone).id;
                        lower(board, written, &mut left, order, &period_id, beyond);
                    }
                }
            }
            Written::Event(_) => {}
            Written::Void { from, to } => left.retain(|&given, _| !in_range(&written[given], *from, *to)),
            Written::Lowered { period, period_id, by } => {
                let Some(order) = board.periods.iter().position(|kind| kind.as_str() == period) else { continue };
                lower(board, written, &mut left, order, period_id, by.unwrap_or(i64::MAX));
            }
        }
    }
    let mut amounts: BTreeMap<(usize, String), (Period, i64)> = BTreeMap::new();
    let mut entries = Vec::new();
    for (index, contributions) in left {
        let Written::Event(event) = &written[index] else { continue };
        if !in_range(&written[index], from, to) {
            continue;
        }
        entries.extend(event.entry.clone());
        for ((order, &kind), &change) in board.periods.iter().enumerate().zip(&contributions) {
            if change > 0 {
                let period = Period::containing(kind, event.time, board.timezone);
                amounts.entry((order, period.id.clone())).or_insert((period, 0)).1 += change;
            }
        }
    }
    entries.sort();
    Voided { periods: amounts.into_values().collect(), entries }
}

/// Lowers what the gives still contribute to the board's `order`-th period, the one of id
/// `period_id`, by `by` points, oldest first (`left` is in the order of writes).
fn lower(board: &Board, written: &[Written], left: &mut BTreeMap<usize, Vec<i64>>, order: usize, period_id: &str, mut by: i64) {
    for (&given, contributions) in left.iter_mut() {
        if by <= 0 {
            break;
        }
        let Written::Event(event) = &written[given] else { continue };
        if Period::containing(board.periods[order], event.time, board.timezone).id != period_id {
            continue;
        }
        let taken = contributions[order].min(by);
        contributions[order] -= taken;
        by -= taken;
    }
}

fn in_range(write: &Written, from: DateTime<Utc>, to: DateTime<Utc>) -> bool {
    matches!(write, Written::Event(event) if from <= event.time && event.time < to)
}

impl Applied {
    /// `event` as applied at `at` with `changes` (its receipt's, per period).
    pub fn of(board: &Board, event: &Event, at: DateTime<Utc>, changes: Vec<i64>) -> Self {
        let time = event.occurred_at.unwrap_or(at);
        Self { time, give: event.active, entry: ledger_entry(board, event, time), changes }
    }
}

/// The ledger entry an event gives to or takes back from: only a per-day rule's can be taken
/// back (config validation), so only those are named.
fn ledger_entry(board: &Board, event: &Event, time: DateTime<Utc>) -> Option<LedgerEntry> {
    let rule = board.rule(&event.action)?;
    let target = event.target.as_deref()?;
    (rule.scope == Scope::UserTargetDay).then(|| LedgerEntry {
        day: Period::containing(PeriodKind::Day, time, board.timezone).id,
        field: format!("{}|{target}", event.action),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::config::Config;

    fn board() -> Config {
        Config::parse(
            "[[boards]]\nname = \"p\"\nkind = \"cumulative\"\ntimezone = \"UTC\"\nperiods = [\"day\", \"all\"]\ntop = 10\n\
             rules = [{ action = \"like\", points = 2, scope = \"user_target_day\", reversible = true }]",
        )
        .unwrap()
    }

    fn at(hour: u32) -> DateTime<Utc> {
        format!("2026-11-22T{hour:02}:00:00Z").parse().unwrap()
    }

    fn event(hour: u32, give: bool, target: &str, change: i64) -> Written {
        let entry = LedgerEntry { day: "2026-11-22".into(), field: format!("like|{target}") };
        Written::Event(Applied { time: at(hour), give, entry: Some(entry), changes: vec![change, change] })
    }

    fn removed(written: &[Written], from: u32, to: u32) -> Vec<(String, i64)> {
        let config = board();
        voided(&config.boards()[0], written, at(from), at(to)).periods.into_iter().map(|(period, points)| (period.id, points)).collect()
    }

    #[test]
    fn gives_in_range_that_still_stand_are_removed_in_every_period() {
        let written = [event(1, true, "a", 2), event(3, true, "b", 2), event(5, true, "c", 2)];
        assert_eq!(removed(&written, 2, 6), vec![("2026-11-22".into(), 4), ("all".into(), 4)]);
        let config = board();
        let entries = voided(&config.boards()[0], &written, at(2), at(6)).entries;
        assert_eq!(entries.iter().map(|entry| entry.field.as_str()).collect::<Vec<_>>(), ["like|b", "like|c"]);
        assert_eq!(removed(&written, 6, 7), vec![]);
    }

    #[test]
    fn a_give_taken_back_or_voided_before_has_nothing_left_and_a_take_back_gives_nothing_back() {
        let written = [event(1, true, "a", 2), event(3, true, "b", 2), event(4, false, "a", -2), event(8, false, "b", -2)];
        assert_eq!(removed(&written, 0, 9), vec![]);
        let written = [event(3, true, "b", 2), Written::Void { from: at(2), to: at(4) }, event(5, true, "c", 2)];
        assert_eq!(removed(&written, 0, 9), vec![("2026-11-22".into(), 2), ("all".into(), 2)]);
        // A take-back that found its periods empty (a correction took the points) still ends
        // its give.
        let written = [event(1, true, "a", 2), event(2, false, "a", 0)];
        assert_eq!(removed(&written, 0, 9), vec![]);
        // A ban emptied the periods: what was earned in the window before it contributes
        // nothing now; what was earned after it is outside the window.
        let lowered = |id: &str, by: Option<i64>| Written::Lowered {
            period: if id == "all" { "all" } else { "day" }.into(),
            period_id: id.into(),
            by,
        };
        let written = [event(1, true, "a", 2), lowered("2026-11-22", None), lowered("all", None), event(3, true, "b", 2)];
        assert_eq!(removed(&written, 0, 2), vec![]);
        assert_eq!(removed(&written, 0, 9), vec![("2026-11-22".into(), 2), ("all".into(), 2)]);
        // A correction lowering one period takes the oldest contributions first.
        let written = [event(1, true, "a", 2), event(2, true, "b", 2), lowered("all", Some(3))];
        assert_eq!(removed(&written, 0, 9), vec![("2026-11-22".into(), 4), ("all".into(), 1)]);
        assert_eq!(removed(&written, 2, 9), vec![("2026-11-22".into(), 2), ("all".into(), 1)]);
        // Given again after its take-back: the second give stands.
        let written = [event(1, true, "a", 2), event(2, false, "a", -2), event(3, true, "a", 2)];
        assert_eq!(removed(&written, 0, 9), vec![("2026-11-22".into(), 2), ("all".into(), 2)]);
    }

    #[test]
    fn a_take_back_of_more_than_its_give_still_held_took_the_rest_from_the_others_oldest_first() {
        let lowered = |by| Written::Lowered { period: "all".into(), period_id: "all".into(), by: Some(by) };
        // All time: a 2, b 2, lowered by 2 (from a), a taken back (2 taken, from b then), c 2:
        // the 2 held now are c's, so a void of b's hour takes nothing there (it took c's).
        let written = [event(1, true, "a", 2), event(2, true, "b", 2), lowered(2), event(3, false, "a", -2), event(4, true, "c", 2)];
        assert_eq!(removed(&written, 2, 3), vec![("2026-11-22".into(), 2)]);
        assert_eq!(removed(&written, 0, 9), vec![("2026-11-22".into(), 4), ("all".into(), 2)]);
        // A take-back that took less (its periods held less) takes less from the others.
        let written = [event(1, true, "a", 2), event(2, true, "b", 2), lowered(3), event(3, false, "a", -1)];
        assert_eq!(removed(&written, 2, 3), vec![("2026-11-22".into(), 2)]);
    }
}
