//! The model's rank-change notifications (docs/notifications.md), from whole rankings and
//! nothing the implementation records: the crossings one write makes on a watched board are the
//! differences between every user's place before it and after it. Shares no code with `shared/`.
//!
//! Ties are not passes: a climber that reaches a standing others hold (the same score reached in
//! the same second) is placed below them whatever Redis's order of equal scores says (reaching
//! them passes none of them). Who leads a tie is who reached it first, which only the history
//! says; `either` states a climb out of a tie both ways (from the tie's top and from its
//! bottom): the crossings both agree on must be sent, the others may be (issue 56's "ties × the
//! pass that follows" is open: docs/testing.md).

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

/// The crossings of a write that must be sent, and those that may be: a climb out of a tie
/// stated from the tie's top (Redis's order) and from its bottom.
pub fn either(
    period_id: &str,
    top: usize,
    before: &Standing,
    after: &Standing,
    mover: &str,
    banned: bool,
) -> (Vec<Crossing>, Vec<Crossing>) {
    let readings = tie_orders(before, after, mover)
        .into_iter()
        .map(|(b, a)| crossings(&Write { period_id, top, before: &b, after: &a, mover, banned }))
        .collect();
    must_and_may(readings)
}

/// Several readings of one write: the crossings all of them state must be sent, the others
/// may be.
pub fn must_and_may(readings: Vec<Vec<Crossing>>) -> (Vec<Crossing>, Vec<Crossing>) {
    let must: Vec<Crossing> = readings[0].iter().filter(|c| readings.iter().all(|r| r.contains(c))).cloned().collect();
    let mut may: Vec<Crossing> = readings.into_iter().flatten().filter(|c| !must.contains(c)).collect();
    may.sort();
    may.dedup();
    (must, may)
}

/// The two readings of a write's places, names best first before and after: a climber is
/// placed below the users holding its very standing after (a tie is no pass), and before it is
/// placed where Redis's order put it, or (the second reading) at the bottom of its tie.
pub fn tie_orders(before: &Standing, after: &Standing, mover: &str) -> [(Vec<String>, Vec<String>); 2] {
    let standing = |list: &Standing| list.iter().find(|(u, _, _)| u == mover).map(|&(_, s, t)| (s, t));
    // Higher scores rank first, then earlier times.
    let climbed = match (standing(before), standing(after)) {
        (_, None) => false,
        (None, Some(_)) => true,
        (Some((s0, t0)), Some((s1, t1))) => s1 > s0 || (s1 == s0 && t1 < t0),
    };
    let names = |list: &Standing| list.iter().map(|(u, _, _)| u.clone()).collect::<Vec<_>>();
    let after = if climbed { below_its_ties(after, mover) } else { names(after) };
    let bottom = if climbed { below_its_ties(before, mover) } else { names(before) };
    [(names(before), after.clone()), (bottom, after)]
}

/// One write of `mover` on the top `top` of `period_id`'s board: its places before and after,
/// names best first (`tie_orders`).
#[derive(Clone, Copy)]
struct Write<'a> {
    period_id: &'a str,
    top: usize,
    before: &'a [String],
    after: &'a [String],
    mover: &'a str,
    banned: bool,
}

/// `list` with `mover` moved to the end of the run of users holding its very standing.
fn below_its_ties(list: &Standing, mover: &str) -> Vec<String> {
    let mut names: Vec<String> = list.iter().map(|(u, _, _)| u.clone()).collect();
    if let Some(at) = list.iter().position(|(u, _, _)| u == mover) {
        let (_, score, time) = list[at];
        let last = list.iter().rposition(|&(_, s, t)| s == score && t == time).expect("the mover holds it");
        let name = names.remove(at);
        names.insert(last, name);
    }
    names
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
    fn a_tie_is_no_pass_and_leaving_it_upward_may_be() {
        // a reaches 10 first; b reaches 10 in the same second (Redis puts b above by id).
        let one = s(&[("a", 10, 5)]);
        let tied = s(&[("b", 10, 5), ("a", 10, 5)]);
        let (must, may) = either("d", 3, &one, &tied, "b", false);
        assert_eq!((kinds(&must), may), (vec![("b".to_owned(), "entered_top")], vec![]));
        let ahead = s(&[("b", 12, 5), ("a", 10, 5)]);
        let (must, may) = either("d", 3, &tied, &ahead, "b", false);
        assert!(must.is_empty());
        assert_eq!(kinds(&may), [("a".to_owned(), "lost_first"), ("b".to_owned(), "took_first")]);
        assert!(may.iter().any(|c| c.kind == "lost_first" && c.by.as_deref() == Some("b")));
    }

    #[test]
    fn a_ban_moves_those_below_up() {
        let before = s(&[("a", 9, 1), ("b", 8, 1), ("c", 7, 1), ("d", 6, 1)]);
        let after = s(&[("b", 8, 1), ("c", 7, 1), ("d", 6, 1)]);
        assert_eq!(kinds(&either("d", 3, &before, &after, "a", true).0), [("b".to_owned(), "took_first"), ("d".to_owned(), "entered_top")]);
    }
}
