//! Daily sign-ins, the pure part: which day a sign-in may be for, the validated plan the
//! script runs, and reading a month's bitmap (days signed, streaks). Time is passed in.

use chrono::{DateTime, Datelike, Duration, NaiveDate, Utc};
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};

use crate::domain::config::{Board, SignIn};
use crate::domain::period::{Period, PeriodKind, days_in_month, first_of_month, month_id, previous_month};

/// `POST /v1/sign-ins`. `date` is a day in the board's timezone; it defaults to today.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignInRequest {
    pub event_id: String,
    pub user_id: String,
    #[serde(default)]
    pub date: Option<NaiveDate>,
}

/// Why a sign-in's day is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DateRefusal {
    #[error("{date} is in the future (today is {today} in the board's timezone)")]
    InFuture { date: NaiveDate, today: NaiveDate },
    #[error("{date} can no longer be signed: only today ({today}), or yesterday within {grace_minutes} minutes after midnight")]
    TooLate { date: NaiveDate, today: NaiveDate, grace_minutes: i64 },
}

impl DateRefusal {
    /// The refusal's code, as the API and the script know it.
    pub fn code(&self) -> &'static str {
        match self {
            DateRefusal::InFuture { .. } => "in_future",
            DateRefusal::TooLate { .. } => "too_late",
        }
    }
}

/// Which day a sign-in is for: `requested`, or today in `tz` when absent. Only today can be
/// signed, and yesterday until `grace` after local midnight (a sign-in made at 23:59:59 that
/// arrives at 00:00:10); a later day is `InFuture`, an earlier one `TooLate`.
pub fn accepted_date(requested: Option<NaiveDate>, now: DateTime<Utc>, tz: Tz, grace: Duration) -> Result<NaiveDate, DateRefusal> {
    let today = Period::containing(PeriodKind::Day, now, tz);
    let today_date = now.with_timezone(&tz).date_naive();
    let Some(date) = requested else { return Ok(today_date) };
    let in_grace = today.start.is_some_and(|start| now < (start + grace).with_timezone(&Utc));
    if date == today_date || (Some(date) == today_date.pred_opt() && in_grace) {
        Ok(date)
    } else if date > today_date {
        Err(DateRefusal::InFuture { date, today: today_date })
    } else {
        Err(DateRefusal::TooLate { date, today: today_date, grace_minutes: grace.num_minutes() })
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
    pub first_delivery: Option<DateRefusal>,
    /// The board's periods of `date`, then of the day after (a late sign-in for yesterday may
    /// complete today's streak; that bonus belongs to today's periods).
    pub periods: Vec<Period>,
    pub next_day_periods: Vec<Period>,
    /// Seconds from `now` until the month's bitmap expires.
    pub bitmap_ttl_secs: i64,
    /// The sign-in's journal entry (`journal::Entry`), "" when the journal is off.
    pub journal_entry: String,
    /// The function's clock: every TTL the sign-in sets counts from it.
    pub now: DateTime<Utc>,
    pub time_part: i64,
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
pub fn read_calendar(user_id: &str, month: NaiveDate, this: MonthBitmap<'_>, previous: MonthBitmap<'_>, today: NaiveDate) -> Calendar {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::period::parse_month;
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
        assert!(matches!(accepted_date(Some(date("2026-11-30")), after_grace, Shanghai, grace), Err(DateRefusal::TooLate { .. })));
        assert!(matches!(accepted_date(Some(date("2026-11-29")), just_after_midnight, Shanghai, grace), Err(DateRefusal::TooLate { .. })));
        assert!(matches!(
            accepted_date(Some(date("2026-12-02")), at("2026-12-01T23:59:59+08:00"), Shanghai, grace),
            Err(DateRefusal::InFuture { .. })
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
        assert_eq!(
            read("2027-01", empty, dec, "2026-12-20"),
            Calendar { user_id: "u1".into(), month: "2027-01".into(), days: vec![], streak: 0 }
        );
    }
}
