//! A tournament's definition (`PUT /v1/admin/tournaments/{id}`): every field checked, each
//! error naming it.

use chrono::{DateTime, Duration, Utc};
use serde::Deserialize;
use serde_json::Value;

use super::{Prize, Reset, Tournament};
use crate::domain::config::{Keep, Order};
use crate::domain::ids;
use crate::domain::period::{Cron, FIRST_DATE, LAST_DATE};

pub const MAX_TITLE_CHARS: usize = 100;
const MAX_DESCRIPTION_CHARS: usize = 1_000;
/// The most players one instance takes (`max_size`).
pub const MAX_SIZE: u32 = 1_000_000;
pub const MAX_PRIZES: usize = 100;
/// The largest `metadata` (and each prize's `reward`), as JSON text.
pub const MAX_METADATA_BYTES: usize = 4_096;
/// Windows end within ten years of their start: the composite's time part has room for it.
const MAX_WINDOW_DAYS: i64 = 3_650;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct TournamentError {
    pub field: String,
    pub problem: String,
}

fn invalid(field: impl Into<String>, problem: impl Into<String>) -> TournamentError {
    TournamentError { field: field.into(), problem: problem.into() }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    title: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    category: Option<String>,
    keep: Keep,
    #[serde(default)]
    order: Order,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    #[serde(default)]
    reset: Option<Reset>,
    #[serde(default)]
    cron: Option<String>,
    #[serde(default)]
    timezone: Option<String>,
    #[serde(default)]
    duration_secs: Option<i64>,
    #[serde(default)]
    max_size: Option<u32>,
    #[serde(default)]
    max_entries: Option<u32>,
    join_required: bool,
    #[serde(default)]
    prizes: Vec<Prize>,
    #[serde(default)]
    metadata: Option<Value>,
}

/// The longest a reset period lasts: its nominal length, plus the hours a clock change adds
/// (a 25-hour day where the clocks go back). An instance never outlives its own period (it ends
/// at the period's end at the latest), so one of this length covers every period whole, in any
/// timezone; the extra hours change no time bit of the scale (`Tournament::max_score`).
/// A cron schedule's instances are held to a month's, the longest reset's (the board's scale
/// keeps every second of an instance).
fn reset_length(reset: Option<Reset>) -> Duration {
    let nominal = match reset {
        Some(Reset::Day) => Duration::days(1),
        Some(Reset::Week) => Duration::weeks(1),
        Some(Reset::Month) | None => Duration::days(31),
    };
    nominal + Duration::hours(3)
}

fn text(field: &str, value: &str, max: usize) -> Result<(), TournamentError> {
    let chars = value.chars().count();
    if value.trim().is_empty() || chars > max || value.chars().any(char::is_control) {
        return Err(invalid(field, format!("must be 1-{max} characters, not blank, no control characters")));
    }
    Ok(())
}

fn small_json(field: &str, value: &Value) -> Result<(), TournamentError> {
    if value.to_string().len() > MAX_METADATA_BYTES {
        return Err(invalid(field, format!("must be at most {MAX_METADATA_BYTES} bytes of JSON")));
    }
    Ok(())
}

impl Tournament {
    /// The tournament `id` defined by `body`; errors name the body's field.
    pub fn parse(id: &str, body: &Value) -> Result<Self, TournamentError> {
        if ids::validate_board_name(id).is_err() || id.len() > 30 {
            return Err(invalid("tournament_id", "must be 1-30 characters of a-z, 0-9 and '-'"));
        }
        let raw: Raw = serde_path_to_error::deserialize(body).map_err(|error| {
            let field = error.path().to_string();
            let problem = error.into_inner().to_string();
            invalid(if field == "." { "body".to_owned() } else { field }, problem)
        })?;
        text("title", &raw.title, MAX_TITLE_CHARS)?;
        if let Some(description) = &raw.description {
            text("description", description, MAX_DESCRIPTION_CHARS)?;
        }
        if let Some(category) = &raw.category
            && ids::validate_board_name(category).is_err()
        {
            return Err(invalid("category", "must be 1-32 characters of a-z, 0-9 and '-'"));
        }
        let (first, last) =
            (FIRST_DATE.and_hms_opt(0, 0, 0).expect("midnight").and_utc(), LAST_DATE.and_hms_opt(0, 0, 0).expect("midnight").and_utc());
        if raw.start < first || raw.end > last {
            return Err(invalid(if raw.start < first { "start" } else { "end" }, format!("must be within {FIRST_DATE}..{LAST_DATE}")));
        }
        if raw.end <= raw.start {
            return Err(invalid("end", "must be after start"));
        }
        if raw.end - raw.start > Duration::days(MAX_WINDOW_DAYS) {
            return Err(invalid("end", format!("must be within {MAX_WINDOW_DAYS} days of start")));
        }
        let cron = match (&raw.cron, raw.reset) {
            (Some(_), Some(_)) => return Err(invalid("cron", "a tournament has one schedule: reset or cron, not both")),
            (Some(text), None) => Some(Cron::parse(text).map_err(|error| invalid("cron", error.to_string()))?),
            (None, _) => None,
        };
        let recurring = raw.reset.is_some() || cron.is_some();
        let duration = match (recurring, raw.duration_secs) {
            (false, None) => None,
            (false, Some(_)) => return Err(invalid("duration_secs", "only a recurring tournament (reset or cron) has a duration")),
            (true, None) => return Err(invalid("duration_secs", "a recurring tournament (reset or cron) needs one")),
            (true, Some(secs)) => {
                let longest = reset_length(raw.reset);
                if !(1..=longest.num_seconds()).contains(&secs) {
                    let schedule = if cron.is_some() { "a cron schedule" } else { "this reset" };
                    return Err(invalid("duration_secs", format!("must be within 1..={} for {schedule}", longest.num_seconds())));
                }
                Some(Duration::seconds(secs))
            }
        };
        let timezone = match &raw.timezone {
            None => chrono_tz::UTC,
            Some(name) => name
                .parse::<chrono_tz::Tz>()
                .map_err(|_| invalid("timezone", "an IANA timezone name (Europe/Paris, America/New_York, UTC)"))?,
        };
        if raw.max_size.is_some_and(|size| !(1..=MAX_SIZE).contains(&size)) {
            return Err(invalid("max_size", format!("must be within 1..={MAX_SIZE}")));
        }
        if raw.max_entries == Some(0) {
            return Err(invalid("max_entries", "must be at least 1"));
        }
        if raw.prizes.len() > MAX_PRIZES {
            return Err(invalid("prizes", format!("at most {MAX_PRIZES}")));
        }
        for (i, prize) in raw.prizes.iter().enumerate() {
            let [from, to] = prize.ranks;
            if from < 1 || to < from {
                return Err(invalid(format!("prizes[{i}].ranks"), "must be [from, to] with 1 <= from <= to"));
            }
            if let Some(j) = raw.prizes[..i].iter().position(|other| other.ranks[0] <= to && from <= other.ranks[1]) {
                return Err(invalid(format!("prizes[{i}].ranks"), format!("overlaps prizes[{j}]")));
            }
            small_json(&format!("prizes[{i}].reward"), &prize.reward)?;
        }
        if let Some(metadata) = &raw.metadata {
            small_json("metadata", metadata)?;
        }
        Ok(Self {
            id: id.to_owned(),
            title: raw.title,
            description: raw.description,
            category: raw.category,
            keep: raw.keep,
            order: raw.order,
            start: raw.start,
            end: raw.end,
            reset: raw.reset,
            cron,
            timezone,
            duration,
            max_size: raw.max_size,
            max_entries: raw.max_entries,
            join_required: raw.join_required,
            prizes: raw.prizes,
            metadata: raw.metadata,
            closed: std::collections::BTreeMap::new(),
            deleted: None,
            retired: false,
            players_kept: None,
            defined: None,
            scale_window: None,
            prior_prizes: Vec::new(),
            details_held: true,
        })
    }
}
