//! A live edit of a tournament (`PATCH /v1/admin/tournaments/{id}`, docs/tournaments.md#live-edits):
//! which fields change and how, decided on the stored definition at `now`.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Prize, State, Tournament, TournamentError};
use crate::domain::tiebreak::time_span_for;

/// How far ahead of now a shortened `end` must be: every function's catalog (refreshed every 5
/// s by default) knows it before it takes effect, so none lands a score, a join or a grant past
/// it, which a verify's replay would then refuse. `POST …/end` ends the open instance now.
pub const SHORTEN_NOTICE_SECS: i64 = 60;

/// How long an early end stays beside the definition once its instance's scheduled end has
/// passed: the archive (every minute) has stored and announced the instance long before, with
/// the end it had. Past it, no read needs the record (`Tournament::early_ends_done`).
pub const EARLY_END_KEPT: Duration = Duration::days(1);

/// How long replaced prizes stay beside the definition once the last instance they priced
/// ended: the archive (every minute) stores each instance's prizes with its results long
/// before, and every read of those results prices them from there. Past it, an edit leaves them
/// out, so a tournament whose prizes change every day stays bounded for years. Only those
/// after the first replaced by a release that records prizes (`PriorPrizes::recorded_after`):
/// the instances they priced all ended since, so their records exist. (An instance whose
/// results were not stored within the week, its archive failing that long, is priced from the
/// oldest replaced prizes still kept, or the prizes in force.)
pub const PRIZES_KEPT: Duration = Duration::days(7);

/// The fields an edit may name; every other one is fixed once the tournament exists.
pub const EDITABLE: [&str; 6] = ["end", "title", "description", "metadata", "max_size", "prizes"];

/// Prizes an edit replaced, kept for the instances that ended by `until` (and after the change
/// before it): an ended instance keeps the prizes it ran for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriorPrizes {
    pub until: DateTime<Utc>,
    pub prizes: Vec<Prize>,
    /// Replaced by a release whose archive records each instance's prizes with its results:
    /// every instance that ends after `until` has them recorded (an instance a release before
    /// archived has none, so the prizes pricing it are never left out).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub recorded_after: bool,
}

/// Why an edit is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    /// No instance runs from now on (or the tournament is being deleted): nothing to edit.
    #[error("the tournament has ended")]
    Closed,
    #[error(transparent)]
    Invalid(#[from] TournamentError),
}

/// A tournament's definition after an edit, with what is kept beside it.
#[derive(Debug, Clone, PartialEq)]
pub struct Edited {
    /// The definition as the operator would have sent it.
    pub body: Value,
    /// The window the board's scale was made for (`Tournament::scale_window`), in seconds.
    pub scale_secs: Option<i64>,
    /// Every set of prizes replaced so far that an ended instance ran for, oldest first.
    pub prior_prizes: Vec<PriorPrizes>,
}

fn invalid(field: &str, problem: impl Into<String>) -> EditError {
    EditError::Invalid(TournamentError { field: field.into(), problem: problem.into() })
}

impl Tournament {
    /// This tournament, defined by `body`, edited by `patch` at `now`.
    pub fn edit(&self, body: &Value, patch: &Value, now: DateTime<Utc>) -> Result<Edited, EditError> {
        let Some(changes) = patch.as_object() else { return Err(invalid("body", "an edit is a JSON object")) };
        if changes.is_empty() {
            return Err(invalid("body", format!("names nothing to change (one or more of {})", EDITABLE.join(", "))));
        }
        if let Some(fixed) = changes.keys().find(|field| !EDITABLE.contains(&field.as_str())) {
            return Err(invalid(fixed, format!("is fixed once the tournament exists (an edit changes {})", EDITABLE.join(", "))));
        }
        if self.deleted.is_some() || self.state_at(now) == State::Ended {
            return Err(EditError::Closed);
        }
        let mut edited = body.clone();
        for (field, value) in changes {
            match (field.as_str(), value) {
                ("description" | "metadata", Value::Null) => {
                    edited.as_object_mut().expect("a stored definition is an object").remove(field);
                }
                (_, Value::Null) => return Err(invalid(field, "cannot be removed")),
                _ => edited[field] = value.clone(),
            }
        }
        let after = Tournament::parse(&self.id, &edited)?;
        // Not now, nor within the notice when it shortens: only the early end freezes an
        // instance in Redis at once; a catalog change reaches warm functions within seconds.
        let earliest = now + Duration::seconds(SHORTEN_NOTICE_SECS);
        if changes.contains_key("end") && (after.end <= now || (after.end < self.end && after.end < earliest)) {
            let earliest = earliest.to_rfc3339_opts(SecondsFormat::Secs, true);
            return Err(invalid(
                "end",
                format!("must be after now, and at {earliest} or later when it shortens the window: POST …/end ends the open instance now"),
            ));
        }
        // The open instance about to end is past editing: the archive's run may be freezing it
        // on the catalog it read.
        let ends = |t: &Tournament| t.open_at(now).map(|open| open.end);
        if let Some(open_end) = ends(self).filter(|end| *end < earliest)
            && ends(&after) != Some(open_end)
        {
            let open_end = open_end.to_rfc3339_opts(SecondsFormat::Secs, true);
            return Err(invalid("end", format!("the open instance ends within a minute ({open_end}): too late to move its end")));
        }
        match (self.max_size, after.max_size) {
            (None, Some(_)) => return Err(invalid("max_size", "the tournament has no cap on players: none can be added")),
            (Some(before), after) if after.is_none_or(|after| after < before) => {
                return Err(invalid("max_size", format!("may only be raised (it is {before})")));
            }
            _ => {}
        }
        Ok(Edited { body: edited, scale_secs: self.scale_after(&after, now)?, prior_prizes: self.prizes_after(&after, now) })
    }

    /// The window the scale stays made for once `after` replaces this one: a one-off's end moves
    /// its window, but the composites already stored keep theirs, so its new window must fit the
    /// time parts of that scale (every second keeps its own).
    fn scale_after(&self, after: &Tournament, now: DateTime<Utc>) -> Result<Option<i64>, EditError> {
        let scale = self.scale_made_for();
        // Before a one-off opens (with the notice: a function whose catalog is a few seconds old
        // scores in the scale it knows) nothing is kept yet: its new window makes its own scale.
        let notice = Duration::seconds(SHORTEN_NOTICE_SECS);
        if after.window() == scale || (self.recurrence().is_none() && now + notice <= self.start) {
            return Ok(None);
        }
        let span = time_span_for(self.max_score());
        if after.window() > Duration::seconds(span) {
            let latest = (after.start + Duration::seconds(span)).to_rfc3339_opts(SecondsFormat::Secs, true);
            return Err(invalid(
                "end",
                format!("at most {latest}: the scores already kept hold the time each was reached in {span} one-second parts"),
            ));
        }
        Ok(Some(scale.num_seconds()))
    }

    /// The instances ended early whose record no read needs at `now` any more, so a definition
    /// an operator ends early every day stays bounded for years: their scheduled end passed
    /// `EARLY_END_KEPT` ago, they are not the instance a read without `instance` shows (the open
    /// one, else the last that ran), and the prizes in force at the early end are those in force
    /// at the scheduled one (an ended instance's rows carry the prizes it ended with). Without
    /// the record such an instance ran all the same, over the same scores: they were frozen at
    /// the early end.
    pub fn early_ends_done(&self, now: DateTime<Utc>) -> Vec<String> {
        let shown = self.instance_named(None, now).map(|instance| instance.id);
        // An instance's scheduled window is its own period's, cut by nothing but a deletion.
        let scheduled = Tournament { closed: BTreeMap::new(), prizes: Vec::new(), metadata: None, ..self.clone() };
        let done = |id: &str, at: DateTime<Utc>| {
            let Some(instance) = scheduled.instance_named(Some(id), now) else { return false };
            let same_prizes = !self.prior_prizes.iter().any(|prior| at <= prior.until && prior.until < instance.end);
            shown.as_deref() != Some(id) && instance.end + EARLY_END_KEPT <= now && same_prizes
        };
        self.closed.iter().filter(|(id, at)| done(id, **at)).map(|(id, _)| id.clone()).collect()
    }

    /// The prizes kept for ended instances once `after`'s replace these: the ones in force until
    /// now, when an instance ended since the last change (an instance still to end gets the new).
    /// Those `PRIZES_KEPT` past, and not pricing the instance a read without `instance` shows,
    /// are left out (their instances' results carry them).
    fn prizes_after(&self, after: &Tournament, now: DateTime<Utc>) -> Vec<PriorPrizes> {
        let mut prior = self.prior_prizes.clone();
        let since = prior.last().map(|last| last.until);
        if after.prizes != self.prizes && !self.ended_by(now, since, 1).is_empty() {
            prior.push(PriorPrizes { until: now, prizes: self.prizes.clone(), recorded_after: true });
        }
        // An entry prices the instances that ended after the one before it: only those after
        // the first `recorded_after` one are sure to have their prizes recorded.
        let Some(first_recorded) = prior.iter().position(|kept| kept.recorded_after) else { return prior };
        let shown = self.instance_named(None, now).map(|instance| instance.end);
        let mut index = 0;
        prior.retain(|kept| {
            index += 1;
            index <= first_recorded + 1 || kept.until + PRIZES_KEPT > now || shown.is_some_and(|end| end <= kept.until)
        });
        prior
    }

    /// The prizes the instance that ends (or ended) at `end` runs for: those in force when it
    /// ended.
    pub fn prizes_at(&self, end: DateTime<Utc>) -> &[Prize] {
        self.prior_prizes.iter().find(|prior| end <= prior.until).map_or(&self.prizes, |prior| &prior.prizes)
    }

    /// The reward of `rank` (1-based) in the instance that ends (or ended) at `end`, if a prize
    /// covers it.
    pub fn prize_of(&self, end: DateTime<Utc>, rank: u64) -> Option<&Value> {
        prize_in(self.prizes_at(end), rank)
    }
}

/// The reward of `rank` (1-based) among `prizes`, if one covers it.
pub fn prize_in(prizes: &[Prize], rank: u64) -> Option<&Value> {
    prizes.iter().find(|prize| prize.ranks[0] <= rank && rank <= prize.ranks[1]).map(|prize| &prize.reward)
}
