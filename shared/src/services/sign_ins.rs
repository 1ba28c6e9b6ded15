//! Daily sign-ins (seed 003): one bit per day per user per month, the consecutive-day streak,
//! and the sign-in points plus streak bonuses on the board with a `sign_in` section, applied
//! together in one script call. Planning and reading bitmaps is pure; time is passed in.

use std::sync::Arc;

use chrono::{DateTime, Datelike, Duration, Months, NaiveDate, Utc};
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};

use crate::domain::config::{Board, Config, SignIn};
use crate::domain::ids::{self, IdError};
use crate::redis::keys::Keys;
use crate::domain::period::{EventWindow, Period, PeriodKind};
use crate::domain::scoring::fingerprint;
use crate::redis::scripts::sign_in::{self as script, SignInOutcome, SignInReply};
use crate::redis::scripts::GuardRefusal;
use crate::redis::store::{Store, StoreError};
use crate::domain::tiebreak::{self, RangeError};

/// `POST /v1/sign-ins`. `date` is a day in the board's timezone; it defaults to today.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignInRequest {
    pub event_id: String,
    pub user_id: String,
    #[serde(default)]
    pub date: Option<NaiveDate>,
}

/// The answer to a sign-in; a duplicate delivery gets the first answer with `duplicate: true`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SignInReceipt {
    pub event_id: String,
    pub duplicate: bool,
    pub date: NaiveDate,
    #[serde(flatten)]
    pub outcome: SignInOutcome,
}

#[derive(Debug, thiserror::Error)]
pub enum SignInError {
    #[error("no board takes sign-ins")]
    NotConfigured,
    #[error(transparent)]
    InvalidId(#[from] IdError),
    #[error("month must be YYYY-MM, not {0:?}")]
    BadMonth(String),
    #[error("{date} is in the future (today is {today} in the board's timezone)")]
    InFuture { date: NaiveDate, today: NaiveDate },
    #[error("{date} can no longer be signed: only today ({today}), or yesterday within {grace_minutes} minutes after midnight")]
    TooLate { date: NaiveDate, today: NaiveDate, grace_minutes: i64 },
    #[error(transparent)]
    OutOfRange(#[from] RangeError),
    #[error("the new score on board {0:?} would exceed the supported range")]
    ScoreOutOfRange(String),
    #[error("event {0:?} was already recorded with a different payload")]
    Conflict(String),
    #[error(transparent)]
    Guard(#[from] GuardRefusal),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl SignInError {
    /// The code of a date refusal, as the script is told it.
    pub fn code(&self) -> &'static str {
        match self {
            SignInError::InFuture { .. } => "in_future",
            SignInError::TooLate { .. } => "too_late",
            _ => "",
        }
    }
}

/// Which day a sign-in is for: `requested`, or today in `tz` when absent. Only today can be
/// signed, and yesterday until `grace` after local midnight (a sign-in made at 23:59:59 that
/// arrives at 00:00:10); a later day is `InFuture`, an earlier one `TooLate`.
pub fn accepted_date(requested: Option<NaiveDate>, now: DateTime<Utc>, tz: Tz, grace: Duration) -> Result<NaiveDate, SignInError> {
    let today = Period::containing(PeriodKind::Day, now, tz);
    let today_date = now.with_timezone(&tz).date_naive();
    let Some(date) = requested else { return Ok(today_date) };
    let in_grace = today.start.is_some_and(|start| now < (start + grace).with_timezone(&Utc));
    if date == today_date || (Some(date) == today_date.pred_opt() && in_grace) {
        Ok(date)
    } else if date > today_date {
        Err(SignInError::InFuture { date, today: today_date })
    } else {
        Err(SignInError::TooLate { date, today: today_date, grace_minutes: grace.num_minutes() })
    }
}

/// A validated sign-in, ready for the script.
#[derive(Debug)]
pub struct SignInPlan<'a> {
    pub board: &'a Board,
    pub sign_in: &'a SignIn,
    pub event_id: String,
    pub user_id: String,
    pub fingerprint: String,
    /// The day to sign: the requested one, or today when the policy refuses it.
    pub date: NaiveDate,
    /// Refuses the sign-in unless its id was already recorded (then it is a duplicate,
    /// whenever it arrives): the requested date is no longer (or not yet) accepted.
    pub first_delivery: Option<SignInError>,
    /// The board's periods of `date`, then of the day after (a late sign-in for yesterday may
    /// complete today's streak; that bonus belongs to today's periods).
    pub periods: Vec<Period>,
    pub next_day_periods: Vec<Period>,
    /// Unix time at which the month's bitmap expires.
    pub bitmap_expires_at: i64,
    pub time_part: i64,
}

pub fn plan_sign_in<'a>(
    config: &'a Config,
    request: &SignInRequest,
    now: DateTime<Utc>,
    window: &EventWindow,
) -> Result<SignInPlan<'a>, SignInError> {
    ids::validate_id("event_id", &request.event_id)?;
    ids::validate_id("user_id", &request.user_id)?;
    let board = config.sign_in_board().ok_or(SignInError::NotConfigured)?;
    let sign_in = board.sign_in.as_ref().ok_or(SignInError::NotConfigured)?;
    let (date, first_delivery) = match accepted_date(request.date, now, board.timezone, window.grace) {
        Ok(date) => (date, None),
        Err(refusal) => (now.with_timezone(&board.timezone).date_naive(), Some(refusal)),
    };
    let next_day = date.succ_opt().ok_or(SignInError::OutOfRange(RangeError::Time))?;
    let periods_of = |day: NaiveDate| board.periods.iter().map(|&kind| Period::on_date(kind, day, board.timezone)).collect();
    Ok(SignInPlan {
        board,
        sign_in,
        event_id: request.event_id.clone(),
        user_id: request.user_id.clone(),
        fingerprint: fingerprint(request),
        date,
        first_delivery,
        periods: periods_of(date),
        next_day_periods: periods_of(next_day),
        bitmap_expires_at: Period::on_date(PeriodKind::Month, date, board.timezone).expires_at().unwrap_or(0),
        time_part: tiebreak::time_part(now)?,
    })
}

/// `2026-11` for any day of November 2026.
pub fn month_id(date: NaiveDate) -> String {
    date.format("%Y-%m").to_string()
}

pub fn first_of_month(date: NaiveDate) -> NaiveDate {
    date.with_day(1).expect("day 1 exists in every month")
}

pub fn days_in_month(date: NaiveDate) -> u32 {
    let first = first_of_month(date);
    let next = first + Months::new(1);
    u32::try_from((next - first).num_days()).expect("a month has 28-31 days")
}

fn previous_month(date: NaiveDate) -> NaiveDate {
    first_of_month(date) - Months::new(1)
}

/// One month of a user's sign-ins as Redis stores it (see sign_in.lua): bit d-1 is day d; the
/// big-endian u32 at bit 32 is the streak carried in from the previous month.
#[derive(Debug, Clone, Copy)]
pub struct MonthBitmap<'a> {
    bytes: &'a [u8],
}

impl<'a> MonthBitmap<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { bytes }
    }

    pub fn signed(&self, day: u32) -> bool {
        let bit = (day - 1) as usize;
        self.bytes.get(bit / 8).is_some_and(|byte| byte & (0x80 >> (bit % 8)) != 0)
    }

    fn carry(&self) -> u64 {
        let mut carry = [0u8; 4];
        for (i, byte) in carry.iter_mut().enumerate() {
            *byte = self.bytes.get(4 + i).copied().unwrap_or(0);
        }
        u64::from(u32::from_be_bytes(carry))
    }

    /// Consecutive signed days ending on `day` (0 when `day` is not signed), continued into
    /// earlier months by the carry when the run reaches day 1.
    pub fn streak_through(&self, day: u32) -> u64 {
        let run = (1..=day).rev().take_while(|&d| self.signed(d)).count() as u64;
        if run == u64::from(day) { run + self.carry() } else { run }
    }

    /// The signed days of a month of `len` days, in order.
    pub fn days(&self, len: u32) -> Vec<u32> {
        (1..=len).filter(|&d| self.signed(d)).collect()
    }
}

/// `GET /v1/users/{user_id}/sign-ins?month=YYYY-MM`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Calendar {
    pub user_id: String,
    pub month: String,
    pub days: Vec<u32>,
    pub streak: u64,
}

/// The signed days of `month` and the streak: for the current month the one still alive
/// today (ending today, or yesterday while today is not signed yet: a streak only breaks when
/// a day ends unsigned); for a past month the one that ended on its last day; 0 for a future
/// month.
pub fn read_calendar(
    user_id: &str,
    month: NaiveDate,
    this: MonthBitmap<'_>,
    previous: MonthBitmap<'_>,
    today: NaiveDate,
) -> Calendar {
    let (month, len) = (first_of_month(month), days_in_month(month));
    let streak = match month.cmp(&first_of_month(today)) {
        std::cmp::Ordering::Greater => 0,
        std::cmp::Ordering::Less => this.streak_through(len),
        std::cmp::Ordering::Equal => match today.day() {
            day if this.signed(day) => this.streak_through(day),
            1 => previous.streak_through(days_in_month(previous_month(month))),
            day => this.streak_through(day - 1),
        },
    };
    Calendar { user_id: user_id.to_owned(), month: month_id(month), days: this.days(len), streak }
}

/// `YYYY-MM` → the month's first day.
pub fn parse_month(text: &str) -> Result<NaiveDate, SignInError> {
    crate::domain::period::parse_month(text).map_err(|_| SignInError::BadMonth(text.to_owned()))
}

/// The sign-in service, shared by `ingest` (sign in) and `query` (calendar).
#[derive(Clone)]
pub struct SignIns {
    config: Arc<Config>,
    keys: Keys,
    store: Store,
    window: EventWindow,
}

impl SignIns {
    pub fn new(config: Arc<Config>, keys: Keys, store: Store) -> Self {
        Self { config, keys, store, window: EventWindow::default() }
    }

    pub async fn record(&self, request: &SignInRequest, now: DateTime<Utc>) -> Result<SignInReceipt, SignInError> {
        let mut plan = plan_sign_in(&self.config, request, now, &self.window)?;
        let board = &plan.board.name;
        let mut conn = self.store.write_connection().await?;
        let wait = self.store.replica_wait().with_replicas(plan.board.wait_replicas);
        let (duplicate, outcome) = match script::sign_in(&mut conn, &self.keys.board(board), &plan, wait).await? {
            SignInReply::New(outcome) => (false, outcome),
            SignInReply::Duplicate(outcome) => (true, outcome),
            SignInReply::Conflict => return Err(SignInError::Conflict(request.event_id.clone())),
            SignInReply::OutsideWindow => {
                return Err(plan.first_delivery.take().unwrap_or_else(|| StoreError::Protocol("sign_in: unasked window refusal".into()).into()));
            }
            SignInReply::Banned => Err(GuardRefusal::Banned { user_id: request.user_id.clone(), board: board.clone() })?,
            SignInReply::PeriodClosed(period_id) => Err(GuardRefusal::PeriodClosed { board: board.clone(), period_id })?,
            SignInReply::OutOfRange => return Err(SignInError::ScoreOutOfRange(board.clone())),
        };
        let date = outcome.date.unwrap_or(plan.date);
        Ok(SignInReceipt { event_id: request.event_id.clone(), duplicate, date, outcome })
    }

    /// A user's sign-ins in `month` (`YYYY-MM`, default: the current month in the board's
    /// timezone), read with one round trip.
    pub async fn calendar(&self, user_id: &str, month: Option<&str>, now: DateTime<Utc>) -> Result<Calendar, SignInError> {
        ids::validate_id("user_id", user_id)?;
        let board = self.config.sign_in_board().ok_or(SignInError::NotConfigured)?;
        let today = now.with_timezone(&board.timezone).date_naive();
        let month = month.map(parse_month).transpose()?.unwrap_or(first_of_month(today));
        let keys = self.keys.board(&board.name);
        let mut conn = self.store.connection().await?;
        let (this, previous): (Option<Vec<u8>>, Option<Vec<u8>>) = redis::pipe()
            .get(keys.sign_ins(user_id, &month_id(month)))
            .get(keys.sign_ins(user_id, &month_id(previous_month(month))))
            .query_async(&mut conn)
            .await
            .map_err(StoreError::from)?;
        let (this, previous) = (this.unwrap_or_default(), previous.unwrap_or_default());
        Ok(read_calendar(user_id, month, MonthBitmap::new(&this), MonthBitmap::new(&previous), today))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono_tz::Asia::Shanghai;

    fn date(s: &str) -> NaiveDate {
        NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap()
    }

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn today_and_yesterday_within_the_grace_window_can_be_signed() {
        let grace = Duration::minutes(15);
        let just_after_midnight = at("2026-12-01T00:14:59+08:00");
        assert_eq!(accepted_date(None, just_after_midnight, Shanghai, grace).unwrap(), date("2026-12-01"));
        assert_eq!(accepted_date(Some(date("2026-11-30")), just_after_midnight, Shanghai, grace).unwrap(), date("2026-11-30"));
        let after_grace = at("2026-12-01T00:15:00+08:00");
        assert!(matches!(
            accepted_date(Some(date("2026-11-30")), after_grace, Shanghai, grace),
            Err(SignInError::TooLate { .. })
        ));
        assert!(matches!(
            accepted_date(Some(date("2026-11-29")), just_after_midnight, Shanghai, grace),
            Err(SignInError::TooLate { .. })
        ));
        assert!(matches!(
            accepted_date(Some(date("2026-12-02")), at("2026-12-01T23:59:59+08:00"), Shanghai, grace),
            Err(SignInError::InFuture { .. })
        ));
        // 16:30Z is already the next day in Shanghai.
        assert_eq!(accepted_date(None, at("2026-11-30T16:30:00Z"), Shanghai, grace).unwrap(), date("2026-12-01"));
    }

    /// A bitmap as sign_in.lua writes it.
    fn bitmap(days: &[u32], carry: u32) -> Vec<u8> {
        let mut bytes = vec![0u8; 8];
        for &d in days {
            bytes[((d - 1) / 8) as usize] |= 0x80 >> ((d - 1) % 8);
        }
        bytes[4..8].copy_from_slice(&carry.to_be_bytes());
        bytes
    }

    #[test]
    fn streaks_count_back_from_a_day_and_continue_with_the_carry() {
        let bytes = bitmap(&[1, 2, 3, 5, 6, 31], 40);
        let month = MonthBitmap::new(&bytes);
        assert_eq!(month.days(31), [1, 2, 3, 5, 6, 31]);
        assert_eq!(month.streak_through(6), 2, "day 4 breaks it");
        assert_eq!(month.streak_through(3), 43, "back to day 1, then the 40 days carried in");
        assert_eq!(month.streak_through(4), 0);
        assert_eq!(month.streak_through(31), 1);
        assert!(!MonthBitmap::new(&[]).signed(1));
        assert_eq!(MonthBitmap::new(&[]).streak_through(5), 0);
    }

    #[test]
    fn the_calendar_streak_is_today_s_or_the_month_end_s() {
        let november = bitmap(&[28, 29, 30], 0);
        let december = bitmap(&[1, 2], 3);
        let (nov, dec) = (MonthBitmap::new(&november), MonthBitmap::new(&december));
        let read = |month: &str, this, previous, today: &str| read_calendar("u1", parse_month(month).unwrap(), this, previous, date(today));
        // Today (Dec 3) is not signed yet: the streak through yesterday is still alive.
        assert_eq!(read("2026-12", dec, nov, "2026-12-03").streak, 5);
        assert_eq!(read("2026-12", dec, nov, "2026-12-03").days, [1, 2]);
        // Dec 4 with Dec 3 unsigned: broken.
        assert_eq!(read("2026-12", dec, nov, "2026-12-04").streak, 0);
        // Dec 1, not signed yet: November's last days carry it.
        let empty = MonthBitmap::new(&[]);
        assert_eq!(read("2026-12", empty, nov, "2026-12-01").streak, 3);
        // A past month: the streak on its last day; a future month: nothing.
        assert_eq!(read("2026-11", nov, empty, "2026-12-20").streak, 3);
        assert_eq!(read("2027-01", empty, dec, "2026-12-20"), Calendar { user_id: "u1".into(), month: "2027-01".into(), days: vec![], streak: 0 });
    }

    #[test]
    fn months_parse_strictly() {
        assert_eq!(parse_month("2026-02").unwrap(), date("2026-02-01"));
        for bad in ["2026-2", "2026-13", "202602", "2026-02-01", "", "abcd-ef"] {
            assert!(matches!(parse_month(bad), Err(SignInError::BadMonth(_))), "{bad}");
        }
        assert_eq!(days_in_month(date("2028-02-10")), 29);
        assert_eq!(days_in_month(date("2026-12-31")), 31);
        assert_eq!(previous_month(date("2026-01-15")), date("2025-12-01"));
    }
}
