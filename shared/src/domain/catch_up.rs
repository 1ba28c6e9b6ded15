//! The rounds of a move between layouts that runs while writes go on
//! (docs/scaling.md#changing-shards). Round 0 moves each old shard's lines up to the point its
//! journal stood at when the move started; each later round, those written during the round
//! before, up to where the journal stood when that one ended. The move fences the board for its
//! last step (the lines written during the last round) once a round ended within `round_ms` of
//! its start, or found nothing new: the last step then moves no more than that round's writes,
//! a fraction of its time when the move outpaces the writes. `MAX_ROUNDS` bounds a board whose
//! writes outpace it.

/// Rounds before the move fences the board whatever the last one took.
pub const MAX_ROUNDS: usize = 12;
/// A round that ended within this of its start is the last before the fence.
pub const ROUND_MS: i64 = 1_000;

/// One round: when it started (ms on Redis's clock) and, for each old shard, the stream id its
/// lines run up to (included).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Round {
    pub start_ms: i64,
    pub points: Vec<String>,
}

/// What follows the rounds moved so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Another round, up to these points, starting now.
    Round(Round),
    /// The last step, fenced.
    Fence,
}

/// The rounds of a move, as kept on its checkpoint: `<start ms> <id> <id>…` a round, `;` between.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rounds(pub Vec<Round>);

impl Rounds {
    pub fn parse(text: &str, shards: usize) -> Option<Self> {
        let rounds: Option<Vec<Round>> = text
            .split(';')
            .map(|round| {
                let mut parts = round.split(' ');
                let start_ms = parts.next()?.parse().ok()?;
                let points: Vec<String> = parts.map(str::to_owned).collect();
                (points.len() == shards).then_some(Round { start_ms, points })
            })
            .collect();
        rounds.filter(|rounds| !rounds.is_empty()).map(Rounds)
    }

    pub fn text(&self) -> String {
        let rounds: Vec<String> = self.0.iter().map(|round| format!("{} {}", round.start_ms, round.points.join(" "))).collect();
        rounds.join(";")
    }

    /// Old shard `shard`'s lines of round `round`: after the point of the round before (none for
    /// the first), up to this round's.
    pub fn range(&self, round: usize, shard: usize) -> (Option<&str>, &str) {
        let after = round.checked_sub(1).map(|before| self.0[before].points[shard].as_str());
        (after, self.0[round].points[shard].as_str())
    }

    /// The points the last step's lines come after.
    pub fn last(&self) -> &Round {
        self.0.last().expect("a move has a round")
    }

    /// What follows once every round is moved, at `now_ms`, each old shard's journal standing at
    /// `points` now; `round_ms` the bound of a last round (`ROUND_MS` deployed).
    pub fn next(&self, now_ms: i64, points: Vec<String>, round_ms: i64) -> Next {
        let last = self.last();
        if points == last.points || now_ms - last.start_ms <= round_ms || self.0.len() >= MAX_ROUNDS {
            Next::Fence
        } else {
            Next::Round(Round { start_ms: now_ms, points })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(start_ms: i64, points: &[&str]) -> Round {
        Round { start_ms, points: points.iter().map(|p| p.to_string()).collect() }
    }

    #[test]
    fn rounds_read_back_as_written_and_refuse_another_count_of_shards() {
        let rounds = Rounds(vec![round(10, &["1-0", "2-3"]), round(20, &["5-0", "2-3"])]);
        assert_eq!(Rounds::parse(&rounds.text(), 2), Some(rounds.clone()));
        assert_eq!(Rounds::parse(&rounds.text(), 3), None);
        assert_eq!(Rounds::parse("", 2), None);
        assert_eq!(rounds.range(0, 1), (None, "2-3"));
        assert_eq!(rounds.range(1, 0), (Some("1-0"), "5-0"));
    }

    #[test]
    fn a_long_round_with_writes_since_is_followed_by_another_and_a_short_or_idle_one_by_the_fence() {
        let rounds = Rounds(vec![round(0, &["7-0"])]);
        assert_eq!(rounds.next(5_000, vec!["9-0".into()], ROUND_MS), Next::Round(round(5_000, &["9-0"])));
        assert_eq!(rounds.next(800, vec!["9-0".into()], ROUND_MS), Next::Fence, "short");
        assert_eq!(rounds.next(5_000, vec!["7-0".into()], ROUND_MS), Next::Fence, "nothing written since");
        assert_eq!(rounds.next(5_000, vec!["9-0".into()], 0), Next::Round(round(5_000, &["9-0"])));
        let many = Rounds((0..MAX_ROUNDS as i64).map(|r| round(r, &["7-0"])).collect());
        assert_eq!(many.next(1_000_000, vec!["9-0".into()], ROUND_MS), Next::Fence, "bounded");
    }
}
