//! Lists that page (`GET /v1/tournaments`, `GET /v1/boards`): items in name order, `limit` at a
//! time. The cursor is the last name a page held, so the next page starts after it whatever was
//! defined or deleted meanwhile: a walk lists once every item that exists throughout it, and a
//! page costs the same however many items there are.

/// A page's size when the request names none.
pub const DEFAULT_LIMIT: u64 = 20;
/// The largest page a request may ask for.
pub const MAX_LIMIT: u64 = 100;

/// The items `keep` takes that are named after `cursor` (all without one), at most `limit` of
/// them in name order, and the next page's cursor (`None`: nothing is left after this page).
/// `keep` is asked only of items after the cursor, and only until the page is full: a page
/// costs the same wherever it starts.
pub fn page<T>(
    items: impl IntoIterator<Item = T>,
    name: impl Fn(&T) -> &str,
    keep: impl Fn(&T) -> bool,
    cursor: Option<&str>,
    limit: usize,
) -> (Vec<T>, Option<String>) {
    let mut all: Vec<T> = items.into_iter().collect();
    // Stable, so linear on items already in name order (runtime boards load so).
    all.sort_by(|a, b| name(a).cmp(name(b)));
    let from = cursor.map_or(0, |cursor| all.partition_point(|item| name(item) <= cursor));
    page_in_order(all.into_iter().skip(from), name, keep, limit)
}

/// `page` of items already in name order and named after the cursor (`Config::boards_after`):
/// it looks at no item before the page nor past the one after it.
pub fn page_in_order<T>(
    items: impl IntoIterator<Item = T>,
    name: impl Fn(&T) -> &str,
    keep: impl Fn(&T) -> bool,
    limit: usize,
) -> (Vec<T>, Option<String>) {
    let mut chosen: Vec<T> = items.into_iter().filter(|item| keep(item)).take(limit.saturating_add(1)).collect();
    if chosen.len() <= limit {
        return (chosen, None);
    }
    chosen.truncate(limit);
    let next = chosen.last().map(|item| name(item).to_owned());
    (chosen, next)
}

/// Two lists in name order as one, in name order; an item named in both is `second`'s (a
/// name listed from two sources read at different instants is listed once).
pub fn merged<T>(
    first: impl IntoIterator<Item = T>,
    second: impl IntoIterator<Item = T>,
    name: impl Fn(&T) -> &str,
) -> impl Iterator<Item = T> {
    let (mut first, mut second) = (first.into_iter().peekable(), second.into_iter().peekable());
    std::iter::from_fn(move || match (first.peek(), second.peek()) {
        (Some(a), Some(b)) => match name(a).cmp(name(b)) {
            std::cmp::Ordering::Less => first.next(),
            std::cmp::Ordering::Greater => second.next(),
            std::cmp::Ordering::Equal => {
                first.next();
                second.next()
            }
        },
        (Some(_), None) => first.next(),
        (None, _) => second.next(),
    })
}

/// Where a page of a live board ended (`next_cursor`, docs/api.md): its last entry's
/// composite, the largest value of the scale that composite is in, and its member,
/// `<composite>~<max_value>.<member>`. The page after holds the entries ranked after that
/// place, whatever moved above it meanwhile (a keyset, not an offset). The scale names what the
/// composite means: after a move to another `max_score` (docs/boards.md#changing-max_score)
/// the same number is another place, and the cursor is refused rather than read there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankCursor {
    pub composite: u64,
    /// `None`: a cursor from before cursors named their scale (`<composite>.<member>`), read
    /// in the board's scale as it was then.
    pub max_value: Option<i64>,
    pub member: String,
}

/// The largest composite a board stores (`tiebreak::EXACT_BITS`).
const MAX_COMPOSITE: u64 = 1 << crate::domain::tiebreak::EXACT_BITS;

impl RankCursor {
    pub fn of(composite: f64, max_value: i64, member: &str) -> Self {
        Self { composite: composite as u64, max_value: Some(max_value), member: member.to_owned() }
    }

    /// A cursor a page answered; anything else is refused with why.
    pub fn parse(text: &str) -> Result<Self, String> {
        let refused = || format!("cursor {:?} is not a next_cursor a page answered", crate::domain::ids::loggable(text));
        let digits = |part: &str, most: usize| !part.is_empty() && part.len() <= most && part.bytes().all(|b| b.is_ascii_digit());
        let (place, member) = text.split_once('.').ok_or_else(refused)?;
        let (composite, max_value) = match place.split_once('~') {
            Some((composite, max_value)) if digits(max_value, 18) => (composite, Some(max_value.parse().map_err(|_| refused())?)),
            Some(_) => return Err(refused()),
            None => (place, None),
        };
        if !digits(composite, 16) {
            return Err(refused());
        }
        let composite: u64 = composite.parse().map_err(|_| refused())?;
        if composite >= MAX_COMPOSITE || crate::domain::ids::validate_id("cursor", member).is_err() {
            return Err(refused());
        }
        Ok(Self { composite, max_value, member: member.to_owned() })
    }

    pub fn text(&self) -> String {
        match self.max_value {
            Some(max_value) => format!("{}~{max_value}.{}", self.composite, self.member),
            None => format!("{}.{}", self.composite, self.member),
        }
    }

    /// Whether this cursor's composite is a place in `scale` (one from before cursors named
    /// their scale is taken to be).
    pub fn is_in(&self, scale: &crate::domain::tiebreak::Scale) -> bool {
        self.max_value.is_none_or(|max_value| max_value == scale.max_value)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use std::collections::BTreeMap;

    use super::{RankCursor, merged, page};

    #[test]
    fn a_rank_cursor_reads_back_and_refuses_anything_else() {
        let cursor = RankCursor::of(4_503_599_627_370_495.0, 1_073_741_823, "u-7.x");
        assert_eq!(cursor.text(), "4503599627370495~1073741823.u-7.x");
        assert_eq!(RankCursor::parse(&cursor.text()), Ok(cursor));
        // One a page answered before cursors named their scale.
        let older = RankCursor::parse("12.u-7.x").unwrap();
        assert_eq!((older.composite, older.max_value, older.member.as_str()), (12, None, "u-7.x"));
        for bad in [
            "",
            "12",
            ".u1",
            "12.",
            "-1.u1",
            "1e5.u1",
            "9007199254740992.u1",
            "12.u 1",
            "12.{x}",
            "99999999999999999.u1",
            "12~.u1",
            "~5.u1",
            "12~-5.u1",
            "12~5~6.u1",
            "12~1234567890123456789.u1",
        ] {
            assert!(RankCursor::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_rank_cursor_is_a_place_in_the_scale_it_names_only() {
        use crate::domain::tiebreak::Scale;
        let points = Scale::POINTS;
        let other = Scale { max_value: 1_000_000, ..points };
        assert!(RankCursor::of(7.0, points.max_value, "u1").is_in(&points));
        assert!(!RankCursor::of(7.0, points.max_value, "u1").is_in(&other));
        assert!(RankCursor::parse("7.u1").unwrap().is_in(&other), "one that names no scale is read as before");
    }

    fn walk(names: &[String], limit: usize) -> Vec<Vec<String>> {
        let mut pages = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let (items, next) = page(names.iter().cloned(), |n: &String| n.as_str(), |_| true, cursor.as_deref(), limit);
            pages.push(items);
            match next {
                Some(next) => cursor = Some(next),
                None => return pages,
            }
        }
    }

    #[test]
    fn an_empty_list_is_one_empty_page() {
        assert_eq!(walk(&[], 20), vec![Vec::<String>::new()]);
    }

    #[test]
    fn a_list_of_exactly_one_page_has_no_next_cursor() {
        let names: Vec<String> = ["b", "a"].map(str::to_owned).to_vec();
        assert_eq!(page(names.iter().cloned(), |n: &String| n.as_str(), |_| true, None, 2), (vec!["a".to_owned(), "b".to_owned()], None));
    }

    proptest! {
        /// Model: the names as a sorted set, cut into runs of `limit`.
        #[test]
        fn a_walk_lists_every_name_once_in_order_in_full_pages(names in prop::collection::vec("[a-z]{1,4}", 0..60), limit in 1usize..8) {
            let unique: BTreeSet<String> = names.iter().cloned().collect();
            let expected: Vec<Vec<String>> = unique.iter().cloned().collect::<Vec<_>>().chunks(limit).map(<[String]>::to_vec).collect();
            let pages = walk(&unique.iter().cloned().collect::<Vec<_>>(), limit);
            if expected.is_empty() {
                prop_assert_eq!(pages, vec![Vec::<String>::new()]);
            } else {
                prop_assert_eq!(pages, expected);
            }
        }

        /// A filter: the pages hold exactly the names it keeps, in full pages, in order, given
        /// in any order.
        #[test]
        fn a_filtered_walk_lists_exactly_the_kept_names(names in prop::collection::btree_set("[a-z]{1,4}", 0..60), limit in 1usize..8) {
            let kept = |n: &String| n.len().is_multiple_of(2);
            let expected: Vec<String> = names.iter().filter(|n| kept(n)).cloned().collect();
            let shuffled: Vec<String> = names.iter().rev().cloned().collect();
            let (mut listed, mut cursor, mut pages) = (Vec::new(), None::<String>, 0);
            loop {
                let (items, next) = page(shuffled.iter().cloned(), |n: &String| n.as_str(), |n| kept(n), cursor.as_deref(), limit);
                prop_assert!(items.len() == limit || next.is_none(), "only the last page is short");
                listed.extend(items);
                pages += 1;
                match next {
                    Some(next) => cursor = Some(next),
                    None => break,
                }
            }
            prop_assert_eq!(pages, expected.len().div_ceil(limit).max(1));
            prop_assert_eq!(listed, expected);
        }

        /// Model: a map by name where the second list's items overwrite the first's.
        #[test]
        fn two_lists_merge_in_name_order_the_second_winning_a_name_in_both(
            first in prop::collection::btree_set("[a-e]{1,2}", 0..20),
            second in prop::collection::btree_set("[a-e]{1,2}", 0..20),
        ) {
            let mut model: BTreeMap<String, u8> = first.iter().map(|n| (n.clone(), 1)).collect();
            model.extend(second.iter().map(|n| (n.clone(), 2)));
            let got: Vec<(String, u8)> = merged(
                first.iter().map(|n| (n.clone(), 1)),
                second.iter().map(|n| (n.clone(), 2)),
                |item: &(String, u8)| item.0.as_str(),
            )
            .collect();
            prop_assert_eq!(got, model.into_iter().collect::<Vec<_>>());
        }

        /// Names defined or deleted between two pages: each name present before and after is
        /// listed exactly once, and the walk still ends.
        #[test]
        fn changes_between_pages_never_repeat_or_skip_a_name_that_stays(
            before in prop::collection::btree_set("[a-z]{1,3}", 0..40),
            added in prop::collection::btree_set("[a-z]{1,3}", 0..10),
            removed in prop::collection::btree_set("[a-z]{1,3}", 0..10),
            limit in 1usize..6,
        ) {
            let after: BTreeSet<String> = before.union(&added).filter(|n| !removed.contains(*n)).cloned().collect();
            let (first, next) = page(before.iter().cloned(), |n: &String| n.as_str(), |_| true, None, limit);
            let mut listed = first;
            let mut cursor = next;
            while let Some(at) = cursor {
                let (items, next) = page(after.iter().cloned(), |n: &String| n.as_str(), |_| true, Some(&at), limit);
                listed.extend(items);
                cursor = next;
            }
            for stays in before.intersection(&after) {
                prop_assert_eq!(listed.iter().filter(|n| *n == stays).count(), 1, "{} in {:?}", stays, listed);
            }
            prop_assert!(listed.windows(2).all(|w| w[0] < w[1]), "{:?}", listed);
        }
    }
}
