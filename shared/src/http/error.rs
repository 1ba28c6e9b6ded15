//! The one place where errors become status codes and JSON bodies with our error shape:
//! `ApiError`, its constructors, and a `From` for every service error.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::domain::config::ConfigError;
use crate::domain::correction::ChangeError;
use crate::domain::ids::IdError;
use crate::domain::period::DateError;
use crate::domain::scores::SubmissionRefusal;
use crate::domain::scoring::Refusal;
use crate::redis::error::StoreError;
use crate::redis::scripts::{GuardRefusal, SeatRefusal};
use crate::services::hot::HotError;
use crate::services::ingestion::{BatchRefusal, IngestError};
use crate::services::moderation::ModerationError;
use crate::services::profiles::ProfileError;
use crate::services::reads::rules::ReadError;
use crate::services::runtime_boards::DefineError;
use crate::services::scores::{ScoreBatchRefusal, ScoreError};
use crate::services::sign_ins::SignInError;
use crate::services::tournaments::PlayError;

/// The `error` object of every error body.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ErrorDetail {
    pub code: &'static str,
    pub message: String,
}

/// `{"error":{"code","message"}}` with its status, and a `Retry-After` header when set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    /// Seconds the client should wait before retrying (503, 429).
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self { status, code, message: message.into(), retry_after: None }
    }

    pub fn with_retry_after(self, seconds: u64) -> Self {
        Self { retry_after: Some(seconds), ..self }
    }

    pub fn malformed(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "malformed", message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, "too_large", message)
    }

    /// The store could not answer. The cause is logged here and never sent to the client.
    pub fn unavailable(cause: &dyn std::error::Error) -> Self {
        tracing::error!(error = %cause, "store unavailable");
        Self::store_unreachable()
    }

    /// The store could not answer, its cause logged where it was seen.
    pub fn store_unreachable() -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "store_unavailable", "the leaderboard store is unavailable; retry shortly")
            .with_retry_after(1)
    }

    /// Something Standings itself got wrong: logged where it was seen, never detailed to the
    /// client, never worth a retry.
    pub fn internal() -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "an internal error occurred; it has been logged")
    }

    pub fn detail(self) -> ErrorDetail {
        ErrorDetail { code: self.code, message: self.message }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, retry_after) = (self.status, self.retry_after);
        let mut response = (status, Json(json!({"error": self.detail()}))).into_response();
        if let Some(seconds) = retry_after {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

/// Status and code of a refused event: the one table mapping refusals to HTTP.
pub fn refusal_status(refusal: &Refusal) -> (StatusCode, &'static str) {
    let status = match refusal {
        Refusal::InvalidId(_) | Refusal::MissingTarget(_) => StatusCode::BAD_REQUEST,
        Refusal::UnknownAction(_)
        | Refusal::NotReversible(_)
        | Refusal::PointsNotAllowed(_)
        | Refusal::PointsOutOfRange { .. }
        | Refusal::OutOfRange(_)
        | Refusal::EventTime(_) => StatusCode::UNPROCESSABLE_ENTITY,
    };
    (status, refusal.code())
}

/// Status and code of a failed event.
pub fn ingest_status(error: &IngestError) -> (StatusCode, &'static str) {
    let status = match error {
        IngestError::Refused(refusal) => return refusal_status(refusal),
        IngestError::Conflict(_) | IngestError::TakeBackDeferred(_) => StatusCode::CONFLICT,
        IngestError::ScoreOutOfRange(_) | IngestError::Banned(..) | IngestError::PeriodClosed { .. } => StatusCode::UNPROCESSABLE_ENTITY,
        IngestError::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
        IngestError::Store(store) => return store_status(store),
    };
    (status, error.code())
}

impl From<Refusal> for ApiError {
    fn from(refusal: Refusal) -> Self {
        let (status, code) = refusal_status(&refusal);
        Self::new(status, code, refusal.to_string())
    }
}

impl From<HotError> for ApiError {
    fn from(error: HotError) -> Self {
        let unprocessable = |code| Self::new(StatusCode::UNPROCESSABLE_ENTITY, code, error.to_string());
        match &error {
            HotError::UnknownBoard(_) => Self::new(StatusCode::NOT_FOUND, "unknown_board", error.to_string()),
            HotError::InvalidId(_) => Self::new(StatusCode::BAD_REQUEST, "invalid_id", error.to_string()),
            HotError::LimitOutOfRange => Self::new(StatusCode::BAD_REQUEST, "out_of_range", error.to_string()),
            HotError::DeltaOutOfRange(_) => unprocessable("out_of_range"),
            HotError::EventTime(time) => unprocessable(time.code()),
            HotError::Conflict(_) => Self::new(StatusCode::CONFLICT, "idempotency_conflict", error.to_string()),
            HotError::Store(store) => Self::store(store),
        }
    }
}

impl From<BatchRefusal> for ApiError {
    fn from(refusal: BatchRefusal) -> Self {
        let message = refusal.to_string();
        Self { message, ..refusal.refusal.into() }
    }
}

impl From<IngestError> for ApiError {
    fn from(error: IngestError) -> Self {
        match error {
            IngestError::Store(store) => store.into(),
            other => {
                let (status, code) = ingest_status(&other);
                let error = Self::new(status, code, other.to_string());
                match other {
                    IngestError::RateLimited { retry_after_secs, .. } => error.with_retry_after(retry_after_secs),
                    _ => error,
                }
            }
        }
    }
}

impl From<ScoreBatchRefusal> for ApiError {
    fn from(refusal: ScoreBatchRefusal) -> Self {
        let message = refusal.to_string();
        Self { message, ..refusal.error.into() }
    }
}

/// Status and code of a refused score submission (the one table for single and batch).
pub fn score_status(error: &ScoreError) -> (StatusCode, &'static str) {
    match error {
        ScoreError::UnknownBoard(_) => (StatusCode::NOT_FOUND, "unknown_board"),
        ScoreError::Refused(SubmissionRefusal::InvalidId(_)) => (StatusCode::BAD_REQUEST, "invalid_id"),
        ScoreError::Refused(SubmissionRefusal::OutOfRange(_)) | ScoreError::SumOutOfRange(_) => {
            (StatusCode::UNPROCESSABLE_ENTITY, "out_of_range")
        }
        ScoreError::EventTime(time) => (StatusCode::UNPROCESSABLE_ENTITY, time.code()),
        ScoreError::Conflict(_) => (StatusCode::CONFLICT, "idempotency_conflict"),
        ScoreError::Banned(..) => (StatusCode::UNPROCESSABLE_ENTITY, "user_banned"),
        ScoreError::PeriodClosed { .. } => (StatusCode::UNPROCESSABLE_ENTITY, "period_closed"),
        ScoreError::RateLimited { .. } => (StatusCode::TOO_MANY_REQUESTS, "rate_limited"),
        ScoreError::Seat(SeatRefusal::NotJoined) => (StatusCode::FORBIDDEN, "not_joined"),
        ScoreError::Seat(SeatRefusal::Full) => (StatusCode::CONFLICT, "tournament_full"),
        ScoreError::Seat(SeatRefusal::EntryLimit) => (StatusCode::UNPROCESSABLE_ENTITY, "entry_limit"),
        ScoreError::Store(store) => store_status(store),
    }
}

impl From<ScoreError> for ApiError {
    fn from(error: ScoreError) -> Self {
        match &error {
            ScoreError::Store(store) => Self::store(store),
            ScoreError::RateLimited { retry_after_secs, .. } => {
                let retry_after = *retry_after_secs;
                Self::new(StatusCode::TOO_MANY_REQUESTS, "rate_limited", error.to_string()).with_retry_after(retry_after)
            }
            other => {
                let (status, code) = score_status(other);
                Self::new(status, code, error.to_string())
            }
        }
    }
}

impl From<&GuardRefusal> for ApiError {
    fn from(refusal: &GuardRefusal) -> Self {
        let code = match refusal {
            GuardRefusal::Banned { .. } => "user_banned",
            GuardRefusal::PeriodClosed { .. } => "period_closed",
        };
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, code, refusal.to_string())
    }
}

impl From<SignInError> for ApiError {
    fn from(error: SignInError) -> Self {
        let (status, code) = match &error {
            SignInError::NotConfigured => (StatusCode::NOT_FOUND, "not_found"),
            SignInError::InvalidId(_) => (StatusCode::BAD_REQUEST, "invalid_id"),
            SignInError::BadMonth(_) => (StatusCode::BAD_REQUEST, "malformed"),
            SignInError::Date(refusal) => (StatusCode::UNPROCESSABLE_ENTITY, refusal.code()),
            SignInError::OutOfRange(_) | SignInError::ScoreOutOfRange(_) => (StatusCode::UNPROCESSABLE_ENTITY, "out_of_range"),
            SignInError::Conflict(_) => (StatusCode::CONFLICT, "idempotency_conflict"),
            SignInError::Guard(refusal) => return refusal.into(),
            SignInError::Store(store) => return Self::store(store),
        };
        Self::new(status, code, error.to_string())
    }
}

impl From<ModerationError> for ApiError {
    fn from(error: ModerationError) -> Self {
        let (status, code) = match &error {
            ModerationError::UnknownBoard(_) => (StatusCode::NOT_FOUND, "unknown_board"),
            ModerationError::InvalidId(_) => (StatusCode::BAD_REQUEST, "invalid_id"),
            ModerationError::BadReason | ModerationError::BadPeriod(_) => (StatusCode::BAD_REQUEST, "malformed"),
            ModerationError::Conflict(_) => (StatusCode::CONFLICT, "idempotency_conflict"),
            ModerationError::BadLimit => (StatusCode::BAD_REQUEST, "out_of_range"),
            ModerationError::Change(ChangeError::NotOne | ChangeError::PointsBoard) => (StatusCode::BAD_REQUEST, "malformed"),
            ModerationError::Change(ChangeError::NotASum(_)) => (StatusCode::UNPROCESSABLE_ENTITY, "not_a_sum"),
            ModerationError::Change(ChangeError::DeltaOutOfRange(_) | ChangeError::SetOutOfRange(_))
            | ModerationError::Time(_)
            | ModerationError::ScoreOutOfRange(_) => (StatusCode::UNPROCESSABLE_ENTITY, "out_of_range"),
            ModerationError::NotPoints(_) => (StatusCode::UNPROCESSABLE_ENTITY, "not_a_points_board"),
            ModerationError::RangeTooOld(_) => (StatusCode::UNPROCESSABLE_ENTITY, "range_too_old"),
            ModerationError::RangeTooLong(_) => (StatusCode::UNPROCESSABLE_ENTITY, "range_too_long"),
            ModerationError::JournalOff => (StatusCode::CONFLICT, "journal_off"),
            ModerationError::JournalUnavailable(_) | ModerationError::JournalUnreadable(_) => {
                // What S3 said stays in the log.
                tracing::error!(%error, "void: the journal could not be read");
                let unreadable = matches!(error, ModerationError::JournalUnreadable(_));
                return if unreadable {
                    Self::new(StatusCode::INTERNAL_SERVER_ERROR, "journal_unreadable", "the journal could not be read")
                } else {
                    Self::new(StatusCode::SERVICE_UNAVAILABLE, "journal_unavailable", "the journal bucket is unreachable; retry later")
                        .with_retry_after(5)
                };
            }
            ModerationError::Stale | ModerationError::Busy => {
                return Self::new(StatusCode::SERVICE_UNAVAILABLE, "busy", ModerationError::Busy.to_string()).with_retry_after(1);
            }
            ModerationError::Guard(refusal) => return refusal.into(),
            ModerationError::Store(store) => return Self::store(store),
        };
        Self::new(status, code, error.to_string())
    }
}

/// True on a cluster where only one node is full: the write it refused changed nothing, but
/// other boards of the same request (on other nodes) may have applied it.
pub const STORE_FULL: &str = "the leaderboard store is out of memory on at least one node; retry later with the same ids: \
    whatever was already applied is answered as a duplicate, never applied twice";

/// Seconds a client waits before retrying a write to a board being restored.
pub const RESTORING_RETRY_SECS: u64 = 30;
/// A move's last step (`board_resharding`) takes seconds.
pub const RESHARDING_RETRY_SECS: u64 = 1;

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        Self::store(&error)
    }
}

/// Status and code of a store failure (see `ApiError::store`, which also logs it).
pub fn store_status(error: &StoreError) -> (StatusCode, &'static str) {
    if error.is_resharding() {
        (StatusCode::SERVICE_UNAVAILABLE, "board_resharding")
    } else if error.is_restoring() {
        (StatusCode::SERVICE_UNAVAILABLE, "board_restoring")
    } else if error.is_ended() {
        (StatusCode::CONFLICT, "board_ended")
    } else if error.is_programming_error() {
        (StatusCode::INTERNAL_SERVER_ERROR, "internal")
    } else if error.is_out_of_memory() {
        (StatusCode::SERVICE_UNAVAILABLE, "store_full")
    } else if matches!(error, StoreError::EvictingPolicy(_)) {
        (StatusCode::SERVICE_UNAVAILABLE, "store_misconfigured")
    } else if matches!(error, StoreError::Rescaled { .. }) {
        (StatusCode::SERVICE_UNAVAILABLE, "board_scale_changed")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "store_unavailable")
    }
}

impl ApiError {
    /// The one answer for every store failure: a programming error, full, misconfigured, or
    /// unavailable.
    pub fn store(error: &StoreError) -> Self {
        if error.is_resharding() {
            tracing::warn!("refused: the board is taking its last step to another layout");
            let message = "this board is taking the last step of its move to another layout (docs/scaling.md#changing-shards); \
                writes resume within seconds; retry (writes with the same ids); reads answer meanwhile";
            return Self::new(StatusCode::SERVICE_UNAVAILABLE, "board_resharding", message).with_retry_after(RESHARDING_RETRY_SECS);
        }
        if error.is_restoring() {
            tracing::warn!("refused: the board is being restored from its journal");
            let message = "this board is being restored from its journal; reads and writes resume when the restore completes; \
                retry later (writes with the same ids)";
            return Self::new(StatusCode::SERVICE_UNAVAILABLE, "board_restoring", message).with_retry_after(RESTORING_RETRY_SECS);
        }
        if error.is_ended() {
            return Self::new(StatusCode::CONFLICT, "board_ended", "this board has ended (it is being deleted): it takes no more writes");
        }
        if error.is_programming_error() {
            tracing::error!(error = %error, "store programming error");
            return Self::internal();
        }
        if error.is_out_of_memory() {
            tracing::error!(error = %error, "store out of memory");
            // Memory is freed by expiring keys or by an operator, not within a second.
            return Self::new(StatusCode::SERVICE_UNAVAILABLE, "store_full", STORE_FULL).with_retry_after(5);
        }
        if let StoreError::Rescaled { board, recorded, configured } = &error {
            tracing::warn!(board, recorded, configured, "a write waits: the board's scores are laid out for another max_score");
            let message = format!(
                "board {board:?} holds scores laid out for max_score {recorded} but is configured with {configured}; \
                 this request waits until a reshard re-encodes the board or the configuration says {recorded} \
                 again (docs/boards.md#changing-max_score); scores that fit {recorded} are written at it meanwhile"
            );
            return Self::new(StatusCode::SERVICE_UNAVAILABLE, "board_scale_changed", &message).with_retry_after(60);
        }
        if let StoreError::SeasonClosed { .. } = &error {
            return Self::new(StatusCode::GONE, "period_closed", error.to_string());
        }
        if let StoreError::EvictingPolicy(policy) = &error {
            tracing::error!(maxmemory_policy = %policy, "writes refused: the store may evict keys");
            let message = "the leaderboard store is configured to evict keys under memory pressure, which could lose \
                scores and double-count retries; writes are refused until its maxmemory-policy is noeviction";
            return Self::new(StatusCode::SERVICE_UNAVAILABLE, "store_misconfigured", message).with_retry_after(60);
        }
        Self::unavailable(error)
    }
}

#[cfg(feature = "dynamodb")]
impl From<crate::archive::table::TableError> for ApiError {
    fn from(error: crate::archive::table::TableError) -> Self {
        Self::unavailable(&error)
    }
}

impl From<IdError> for ApiError {
    fn from(error: IdError) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_id", error.to_string())
    }
}

impl From<ReadError> for ApiError {
    fn from(error: ReadError) -> Self {
        let (status, code) = match &error {
            ReadError::UnknownBoard(_) | ReadError::HotBoard(_) | ReadError::NotArchived(_) => (StatusCode::NOT_FOUND, "unknown_board"),
            ReadError::UnknownPeriod { .. } => (StatusCode::BAD_REQUEST, "unknown_period"),
            ReadError::NoLeague(_) => (StatusCode::NOT_FOUND, "no_league"),
            ReadError::UnknownTier { .. } => (StatusCode::BAD_REQUEST, "unknown_tier"),
            ReadError::BadDate(DateError::Malformed | DateError::NotScheduled)
            | ReadError::BadRankMode
            | ReadError::BadCursor(_)
            | ReadError::NoUsers
            | ReadError::BadSeason(_) => (StatusCode::BAD_REQUEST, "malformed"),
            ReadError::BadDate(DateError::OutOfRange) | ReadError::OutOfRange { .. } => (StatusCode::BAD_REQUEST, "out_of_range"),
            ReadError::TooManyUsers => (StatusCode::PAYLOAD_TOO_LARGE, "too_large"),
            ReadError::InvalidId { .. } => (StatusCode::BAD_REQUEST, "invalid_id"),
            ReadError::ArchiveNotConfigured => (StatusCode::NOT_FOUND, "archive_not_configured"),
            ReadError::SeasonNotArchived { .. } => (StatusCode::NOT_FOUND, "season_not_archived"),
            ReadError::DistributionNotArchived { .. } => (StatusCode::NOT_FOUND, "distribution_not_archived"),
            ReadError::StatementGone { .. } => (StatusCode::GONE, "period_closed"),
            ReadError::Store(store) => return Self::store(store),
            #[cfg(feature = "dynamodb")]
            ReadError::Table(table) => return Self::unavailable(table),
        };
        Self::new(status, code, error.to_string())
    }
}

impl From<DefineError> for ApiError {
    fn from(error: DefineError) -> Self {
        let (status, code) = match &error {
            DefineError::Invalid(ConfigError::Invalid { field, problem }) => {
                return Self::new(StatusCode::BAD_REQUEST, "invalid_board", format!("{field}: {problem}"));
            }
            DefineError::Invalid(_) => (StatusCode::BAD_REQUEST, "invalid_board"),
            DefineError::Exists(_) | DefineError::Declared(_) => (StatusCode::CONFLICT, "board_exists"),
            DefineError::Full(_) => (StatusCode::UNPROCESSABLE_ENTITY, "board_limit"),
            DefineError::Unknown(_) => (StatusCode::NOT_FOUND, "unknown_board"),
            DefineError::Tournament(_) => (StatusCode::CONFLICT, "is_tournament"),
            DefineError::Store(store) => return Self::store(store),
        };
        Self::new(status, code, error.to_string())
    }
}

impl From<PlayError> for ApiError {
    fn from(error: PlayError) -> Self {
        let (status, code) = match error {
            PlayError::Score(score) => return score.into(),
            PlayError::Define(define) => return define.into(),
            // A function whose catalog still holds a deleted tournament: Redis refuses the write
            // as the board's end, which for a tournament is its close (docs/tournaments.md).
            PlayError::Store(store) if store.is_ended() => {
                return Self::new(StatusCode::CONFLICT, "tournament_closed", "this tournament has ended (it is being deleted)");
            }
            PlayError::Store(store) => return Self::store(&store),
            PlayError::Invalid(invalid) => return Self::new(StatusCode::BAD_REQUEST, "invalid_tournament", invalid.to_string()),
            PlayError::Unknown(_) => (StatusCode::NOT_FOUND, "unknown_tournament"),
            PlayError::UnknownInstance { .. } => (StatusCode::NOT_FOUND, "unknown_instance"),
            PlayError::InvalidId(_) => (StatusCode::BAD_REQUEST, "invalid_id"),
            PlayError::Closed(_) => (StatusCode::CONFLICT, "tournament_closed"),
            PlayError::Full { .. } => (StatusCode::CONFLICT, "tournament_full"),
            PlayError::GrantConflict(_) => (StatusCode::CONFLICT, "grant_conflict"),
            PlayError::Banned(..) => (StatusCode::UNPROCESSABLE_ENTITY, "user_banned"),
            PlayError::NoResults { .. } => (StatusCode::NOT_FOUND, "results_pending"),
            PlayError::Archive(why) => {
                tracing::error!(error = %why, "the results table failed");
                return Self::new(StatusCode::SERVICE_UNAVAILABLE, "store_unavailable", "the results table is unavailable; retry later")
                    .with_retry_after(5);
            }
        };
        Self::new(status, code, error.to_string())
    }
}

impl From<ProfileError> for ApiError {
    fn from(error: ProfileError) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "malformed", error.to_string())
    }
}
