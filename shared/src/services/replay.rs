//! A restore's replay of one journal line (docs/journal.md#restore): the write it records, asked
//! again of the same service, on the same board, at the time it was first applied (`at`), with
//! keys that journal nothing and measure TTLs from the original write (`Keys::replaying`). The
//! same writes in the same order at the same times give the same state: the same composites
//! (so the same tie order), markers, ledgers, caps, statements and calendars.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::domain::config::Config;
use crate::domain::journal::Line;
use crate::domain::scores::Submission;
use crate::domain::scoring::Event;
use crate::domain::sign_in::SignInRequest;
use crate::redis::keys::Keys;
use crate::redis::store::Store;
use crate::services::corrections::CorrectionRequest;
use crate::services::ingestion::Ingestor;
use crate::services::leagues::Leagues;
use crate::services::moderation::Moderation;
use crate::services::profiles::{Profile, put_profile};
use crate::services::scores::Scores;
use crate::services::sign_ins::SignIns;
use crate::services::tournaments::{AttemptsGrant, Play, PlayError, Tournaments};
use crate::services::voids::{Recorded, VoidRequest};

/// What replaying a line did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Replayed {
    Applied,
    /// The board already holds it (a resumed restore's last line, or a write that survived).
    Duplicate,
    /// Refused: the configuration changed since, or the line is not a write this release
    /// replays; why, for the report.
    Refused(String),
}

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("journal line {id}: {problem}")]
    Malformed { id: String, problem: String },
    /// Redis failed: the line may or may not be applied; the restore stops and resumes here.
    #[error(transparent)]
    Store(#[from] crate::redis::error::StoreError),
}

pub struct Replayer {
    /// The replay's keys (journaling nothing) and store: profiles are written directly.
    keys: Keys,
    store: Store,
    ingestor: Ingestor,
    scores: Scores,
    sign_ins: SignIns,
    moderation: Moderation,
    leagues: Leagues,
    tournaments: Tournaments,
    config: Arc<Config>,
    sign_in_board: Option<String>,
}

impl Replayer {
    /// `keys` as the live functions use them; the replayer's own journal nothing.
    pub fn new(config: Arc<Config>, keys: Keys, store: Store) -> Self {
        Self::with_keys(config, keys.replaying(), store)
    }

    /// A replayer that decides lines again as live writes, each journaling its new decision
    /// (`keys` as the live functions use them): the writes a rolled-back store took before its
    /// fence (docs/journal.md#rollbacks).
    pub fn deciding(config: Arc<Config>, keys: Keys, store: Store) -> Self {
        Self::with_keys(config, keys, store)
    }

    fn with_keys(config: Arc<Config>, keys: Keys, store: Store) -> Self {
        let sign_in_board = config.sign_in_board().map(|board| board.name.clone());
        Self {
            sign_in_board,
            ingestor: Ingestor::new(config.clone(), keys.clone(), store.clone()),
            scores: Scores::new(config.clone(), keys.clone(), store.clone()),
            sign_ins: SignIns::new(config.clone(), keys.clone(), store.clone()),
            moderation: Moderation::new(config.clone(), keys.clone(), store.clone()),
            leagues: Leagues::new(keys.clone(), store.clone()),
            tournaments: Tournaments::new(config.clone(), keys.clone(), store.clone()),
            config,
            keys,
            store,
        }
    }

    pub async fn replay(&self, board: &str, line: &Line) -> Result<Replayed, ReplayError> {
        let malformed = |problem: String| ReplayError::Malformed { id: line.id.clone(), problem };
        let mut fields = line.entry.clone();
        let kind = take_str(&mut fields, "kind").ok_or_else(|| malformed("no kind".into()))?;
        let at: DateTime<Utc> =
            take_str(&mut fields, "at").and_then(|at| at.parse().ok()).ok_or_else(|| malformed("no time (`at`)".into()))?;
        let refused = |error: &dyn std::fmt::Display| Ok(Replayed::Refused(error.to_string()));
        match kind.as_str() {
            "event" => {
                let event: Event = parse(fields).map_err(malformed)?;
                match self.ingestor.replay(board, &event, at).await {
                    Ok(receipt) => Ok(if receipt.duplicate { Replayed::Duplicate } else { Replayed::Applied }),
                    Err(crate::services::ingestion::IngestError::Store(error)) => Err(error.into()),
                    Err(error) => refused(&error),
                }
            }
            // A tournament's (docs/tournaments.md): its seat and attempts with the score, in the
            // instance its time opened.
            "score" | "join" if self.tournaments.find(board).is_ok() => {
                let played = match kind.as_str() {
                    "join" => {
                        let user = take_str(&mut fields, "user_id").ok_or_else(|| malformed("no user_id".into()))?;
                        self.tournaments.join(board, &user, at).await.map(|_| false)
                    }
                    _ => {
                        fields.remove("occurred_at");
                        fields.remove("max_score");
                        let play: Play = parse(fields).map_err(malformed)?;
                        self.tournaments.submit(board, &play, at).await.map(|receipt| receipt.duplicate)
                    }
                };
                match played {
                    Ok(duplicate) => Ok(if duplicate { Replayed::Duplicate } else { Replayed::Applied }),
                    Err(PlayError::Store(error)) => Err(error.into()),
                    Err(error) => refused(&error),
                }
            }
            // Attempts granted (docs/tournaments.md#live-edits): its audit entry is the line.
            "grant" => {
                let actor = take_str(&mut fields, "actor");
                let grant = AttemptsGrant {
                    user_id: take_str(&mut fields, "user_id").ok_or_else(|| malformed("no user_id".into()))?,
                    add: fields
                        .get("delta")
                        .and_then(Value::as_u64)
                        .and_then(|add| u32::try_from(add).ok())
                        .ok_or_else(|| malformed("no delta".into()))?,
                    reason: take_str(&mut fields, "reason").unwrap_or_default(),
                    grant_id: take_str(&mut fields, "grant_id"),
                };
                match self.tournaments.grant(board, &grant, actor.as_deref(), at).await {
                    Ok(granted) => Ok(if granted.duplicate { Replayed::Duplicate } else { Replayed::Applied }),
                    Err(PlayError::Store(error)) => Err(error.into()),
                    Err(error) => refused(&error),
                }
            }
            "release" => {
                let instance = take_str(&mut fields, "instance").ok_or_else(|| malformed("no instance".into()))?;
                match self.tournaments.release(board, &instance, at).await {
                    Ok(freed) => Ok(if freed { Replayed::Applied } else { Replayed::Duplicate }),
                    Err(PlayError::Store(error)) => Err(error.into()),
                    Err(error) => refused(&error),
                }
            }
            "score" => {
                // The scale it was written in: the replay's board has its own.
                fields.remove("max_score");
                let submission: Submission = parse(fields).map_err(malformed)?;
                match self.scores.submit(board, &submission, at).await {
                    Ok(receipt) => Ok(if receipt.duplicate { Replayed::Duplicate } else { Replayed::Applied }),
                    Err(crate::services::scores::ScoreError::Store(error)) => Err(error.into()),
                    Err(error) => refused(&error),
                }
            }
            "sign_in" => {
                let request: SignInRequest = parse(fields).map_err(malformed)?;
                if self.sign_in_board.as_deref() != Some(board) {
                    return Ok(Replayed::Refused(format!("board {board:?} takes no sign-ins now")));
                }
                match self.sign_ins.record(&request, at).await {
                    Ok(receipt) => Ok(if receipt.duplicate { Replayed::Duplicate } else { Replayed::Applied }),
                    Err(crate::services::sign_ins::SignInError::Store(error)) => Err(error.into()),
                    Err(error) => refused(&error),
                }
            }
            "correction" => {
                let user = take_str(&mut fields, "user_id").ok_or_else(|| malformed("no user_id".into()))?;
                let actor = take_str(&mut fields, "actor");
                let request: CorrectionRequest =
                    serde_json::from_value(fields.remove("request").unwrap_or_default()).map_err(|e| malformed(e.to_string()))?;
                // A made-up id is in the audit entry: the replay makes the same one.
                let made_up = take_str(&mut fields, "correction_id");
                match self.moderation.correct_as(board, &user, &request, actor.as_deref(), at, made_up).await {
                    Ok(receipt) => Ok(if receipt.duplicate { Replayed::Duplicate } else { Replayed::Applied }),
                    Err(crate::services::moderation::ModerationError::Store(error)) => Err(error.into()),
                    Err(error) => refused(&error),
                }
            }
            "ban" | "unban" => {
                let user = take_str(&mut fields, "user_id").ok_or_else(|| malformed("no user_id".into()))?;
                let actor = take_str(&mut fields, "actor");
                match self.moderation.set_ban_on(board, &user, kind == "ban", actor.as_deref(), at).await {
                    Ok(_) => Ok(Replayed::Applied),
                    Err(crate::services::moderation::ModerationError::Store(error)) => Err(error.into()),
                    Err(error) => refused(&error),
                }
            }
            "void" => {
                let user = take_str(&mut fields, "user_id").ok_or_else(|| malformed("no user_id".into()))?;
                let actor = take_str(&mut fields, "actor");
                let request: VoidRequest =
                    serde_json::from_value(fields.remove("request").unwrap_or_default()).map_err(|e| malformed(e.to_string()))?;
                let recorded: Recorded = serde_json::from_value(Value::Object(fields)).map_err(|e| malformed(e.to_string()))?;
                match self.moderation.replay_void(board, &user, &request, &recorded, actor.as_deref(), at).await {
                    Ok(receipt) => Ok(if receipt.duplicate { Replayed::Duplicate } else { Replayed::Applied }),
                    Err(crate::services::moderation::ModerationError::Store(error)) => Err(error.into()),
                    Err(error) => refused(&error),
                }
            }
            "profile" => {
                let user = take_str(&mut fields, "user_id").ok_or_else(|| malformed("no user_id".into()))?;
                let profile: Profile =
                    serde_json::from_value(fields.remove("profile").unwrap_or_default()).map_err(|e| malformed(e.to_string()))?;
                if let Err(error) = crate::domain::ids::validate_id("user_id", &user) {
                    return refused(&error);
                }
                if let Err(error) = profile.validate() {
                    return refused(&error);
                }
                put_profile(&self.store, &self.keys, &user, &profile, at).await?;
                Ok(Replayed::Applied)
            }
            "league_close" | "league_open" | "league_idle" => {
                let Some((board_config, league)) = self.config.board(board).and_then(|b| Some((b, b.league.as_ref()?))) else {
                    return Ok(Replayed::Refused(format!("board {board:?} has no league now")));
                };
                let period_id = take_str(&mut fields, "period_id").ok_or_else(|| malformed("no period_id".into()))?;
                let period = crate::domain::period::Period::named(league.period, &period_id, board_config.timezone)
                    .map_err(|e| malformed(format!("period_id: {e}")))?;
                if kind == "league_open" {
                    self.leagues.open_batch(board_config, league, &period, at).await?;
                    return Ok(Replayed::Applied);
                }
                if kind == "league_idle" {
                    if league.idle != crate::domain::league::Idle::Drop {
                        return Ok(Replayed::Refused(format!("board {board:?}'s league keeps idle players now")));
                    }
                    // Steps end where the live server's hash order ended them; the replay's
                    // server may need more, so it finishes the drop at its first line (nothing
                    // else writes the tiers before the period opens; later lines are no-ops).
                    while self.leagues.drop_idle_step(board_config, league, &period, at).await? {}
                    return Ok(Replayed::Applied);
                }
                let cohort = take_str(&mut fields, "cohort").ok_or_else(|| malformed("no cohort".into()))?;
                let (tier, n) = cohort
                    .split_once(':')
                    .and_then(|(t, n)| Some((t.parse().ok()?, n.parse().ok()?)))
                    .ok_or_else(|| malformed(format!("cohort {cohort:?}")))?;
                let closed = self.leagues.close_cohort(board_config, league, &period, tier, n, at).await?;
                Ok(if closed > 0 { Replayed::Applied } else { Replayed::Duplicate })
            }
            // Records only (a reshard's settling of its shard's records, a season's release, a
            // tournament's prune): nothing to ask again (a restore applies their effects).
            "reshard" | "season_release" | "prune" => Ok(Replayed::Duplicate),
            other => Ok(Replayed::Refused(format!("a {other:?} entry is not replayed"))),
        }
    }
}

fn take_str(fields: &mut Map<String, Value>, name: &str) -> Option<String> {
    match fields.remove(name) {
        Some(Value::String(text)) => Some(text),
        _ => None,
    }
}

fn parse<T: DeserializeOwned>(fields: Map<String, Value>) -> Result<T, String> {
    serde_json::from_value(Value::Object(fields)).map_err(|e| e.to_string())
}
