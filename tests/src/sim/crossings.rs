//! The model's rank-change notifications (docs/notifications.md), from whole rankings and
//! nothing the implementation records: the crossings one write makes on a watched board are the
//! differences between every user's place before it and after it. Shares no code with `shared/`.
//!
//! Ties are not passes: a tie (the same score reached in the same second) is led by who reached
//! it first, whatever Redis's order of equal scores (by user id) says; the model knows who did
//! (`Model::arcade_standings` orders each tie by arrival), so a climber reaching a standing
//! others hold is placed below them, and passes them only when it leaves the tie upward.

/// A board best first: (user, score, when it was reached).
pub type Standing = Vec<(String, i64, i64)>;

/// One notification as the model states it: a user's crossing on a period's board, and who
/// passed them.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Crossing {
    pub period_id: String,
    pub user: String,
    pub kind: &'static str,
    pub by: Option<String>,
}

/// The crossings of a write of `mover` on the top `top` of `period_id`'s board, from its
/// standings before and after, each best first with its ties in arrival order.
pub fn expected(period_id: &str, top: usize, before: &Standing, after: &Standing, mover: &str, banned: bool) -> Vec<Crossing> {
    let names = |list: &Standing| list.iter().map(|(u, _, _)| u.clone()).collect::<Vec<_>>();
    crossings(&Write { period_id, top, before: &names(before), after: &names(after), mover, banned })
}

/// One write of `mover` on the top `top` of `period_id`'s board: its places before and after,
/// names best first.
#[derive(Clone, Copy)]
struct Write<'a> {
    period_id: &'a str,
    top: usize,
    before: &'a [String],
    after: &'a [String],
    mover: &'a str,
    banned: bool,
}

/// The crossings of one write (a ban when `banned`: the banned user is told nothing).
fn crossings(write: &Write<'_>) -> Vec<Crossing> {
    let Write { period_id, top, before, after, mover, banned } = *write;
    let place = |list: &[String], user: &str| list.iter().position(|u| u == user);
    let (mover_before, mover_after) = (place(before, mover), place(after, mover));
    let mut users: Vec<&String> = before.iter().chain(after).collect();
    users.sort();
    users.dedup();
    let mut out = Vec::new();
    for user in users {
        if banned && user == mover {
            continue;
        }
        let (b, a) = (place(before, user), place(after, user));
        let inside = |r: Option<usize>| r.is_some_and(|r| r < top);
        let passed = user != mover
            && b.is_some_and(|b| mover_before.is_none_or(|mb| mb > b))
            && a.is_some_and(|a| mover_after.is_some_and(|ma| ma < a));
        let by = passed.then(|| mover.to_owned());
        let mut push = |kind, by: Option<String>| out.push(Crossing { period_id: period_id.to_owned(), user: user.clone(), kind, by });
        if !inside(b) && inside(a) {
            push("entered_top", None);
        }
        if inside(b) && !inside(a) {
            push("left_top", by.clone());
        }
        if a == Some(0) && b != Some(0) {
            push("took_first", None);
        }
        if b == Some(0) && a != Some(0) {
            push("lost_first", by.clone());
        }
        if passed && inside(b) && inside(a) && b != Some(0) {
            push("overtaken", by.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(list: &[(&str, i64, i64)]) -> Standing {
        list.iter().map(|&(u, s, t)| (u.to_owned(), s, t)).collect()
    }

    fn kinds(list: &[Crossing]) -> Vec<(String, &'static str)> {
        let mut out: Vec<_> = list.iter().map(|c| (c.user.clone(), c.kind)).collect();
        out.sort();
        out
    }

    #[test]
    fn a_tie_is_no_pass_and_leaving_it_upward_is() {
        // a reaches 10 first; b reaches 10 in the same second: after a (arrival order).
        let one = s(&[("a", 10, 5)]);
        let tied = s(&[("a", 10, 5), ("b", 10, 5)]);
        assert_eq!(kinds(&expected("d", 3, &one, &tied, "b", false)), [("b".to_owned(), "entered_top")]);
        let ahead = s(&[("b", 12, 5), ("a", 10, 5)]);
        let passed = expected("d", 3, &tied, &ahead, "b", false);
        assert_eq!(kinds(&passed), [("a".to_owned(), "lost_first"), ("b".to_owned(), "took_first")]);
        assert!(passed.iter().any(|c| c.kind == "lost_first" && c.by.as_deref() == Some("b")));
    }

    #[test]
    fn a_ban_moves_those_below_up() {
        let before = s(&[("a", 9, 1), ("b", 8, 1), ("c", 7, 1), ("d", 6, 1)]);
        let after = s(&[("b", 8, 1), ("c", 7, 1), ("d", 6, 1)]);
        assert_eq!(kinds(&expected("d", 3, &before, &after, "a", true)), [("b".to_owned(), "took_first"), ("d".to_owned(), "entered_top")]);
    }
}
