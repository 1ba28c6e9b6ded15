//! A marker's receipt: what an event did, as its marker keeps it (apply_event.lua writes it, a
//! duplicate is answered from it).

/// What an event did, as its marker keeps it. The `code` of each variant is the receipt's
/// first character (the script gets them from `compose`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Applied,
    AlreadyCounted,
    DailyCap,
    NothingToTakeBack,
}

impl Decision {
    pub(super) const ALL: [Decision; 4] = [Decision::Applied, Decision::AlreadyCounted, Decision::DailyCap, Decision::NothingToTakeBack];

    pub(super) const fn code(self) -> char {
        match self {
            Decision::Applied => 'a',
            Decision::AlreadyCounted => 'c',
            Decision::DailyCap => 'd',
            Decision::NothingToTakeBack => 't',
        }
    }

    /// The `reason` clients see when nothing was applied.
    pub const fn reason(self) -> Option<&'static str> {
        match self {
            Decision::Applied => None,
            Decision::AlreadyCounted => Some("already_counted"),
            Decision::DailyCap => Some("daily_cap"),
            Decision::NothingToTakeBack => Some("nothing_to_take_back"),
        }
    }

    pub(super) const fn lua_name(self) -> &'static str {
        match self {
            Decision::Applied => "RECEIPT_APPLIED",
            Decision::AlreadyCounted => "RECEIPT_ALREADY_COUNTED",
            Decision::DailyCap => "RECEIPT_DAILY_CAP",
            Decision::NothingToTakeBack => "RECEIPT_NOTHING_TO_TAKE_BACK",
        }
    }
}

/// A marker's receipt: `<code>[<delta>][,<capped>][;<change of period 1>,…][@<minute>]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    pub decision: Decision,
    /// The largest change of any period.
    pub delta: i64,
    pub capped: i64,
    /// Each period's change, when one differs from `delta` (a take-back a period could not
    /// take in full).
    pub changes: Option<Vec<i64>>,
}

impl Receipt {
    pub fn parse(text: &str) -> Option<Self> {
        let mut chars = text.chars();
        let code = chars.next()?;
        let decision = Decision::ALL.into_iter().find(|d| d.code() == code)?;
        let rest = chars.as_str();
        let (head, changes) = match rest.split_once(';') {
            Some((head, list)) => (head, Some(list.split(',').map(|n| n.parse().ok()).collect::<Option<Vec<i64>>>()?)),
            None => (rest, None),
        };
        let (delta, capped) = head.split_once(',').unwrap_or((head, ""));
        let number = |text: &str| {
            if text.is_empty() { Some(0) } else { text.parse().ok() }
        };
        Some(Self { decision, delta: number(delta)?, capped: number(capped)?, changes })
    }

    /// The change to the `period`th period of the event's board.
    pub fn change(&self, period: usize) -> i64 {
        match &self.changes {
            Some(changes) => changes.get(period).copied().unwrap_or(0),
            None => self.delta,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receipts_parse_every_shape_the_script_writes() {
        let parse = |text| Receipt::parse(text).unwrap();
        let receipt = |decision, delta, capped, changes| Receipt { decision, delta, capped, changes };
        assert_eq!(parse("a3"), receipt(Decision::Applied, 3, 0, None));
        assert_eq!(parse("a2,8"), receipt(Decision::Applied, 2, 8, None));
        assert_eq!(parse("d,10"), receipt(Decision::DailyCap, 0, 10, None));
        assert_eq!(parse("c"), receipt(Decision::AlreadyCounted, 0, 0, None));
        assert_eq!(parse("a-3;-3,-1"), receipt(Decision::Applied, -3, 0, Some(vec![-3, -1])));
        for bad in ["", "x3", "a3;", "a;1,x", "ab", "a3@1"] {
            assert_eq!(Receipt::parse(bad), None, "{bad:?}");
        }
        assert_eq!(parse("a-3;-3,-1").change(1), -1);
        assert_eq!(parse("a3").change(1), 3);
    }
}
