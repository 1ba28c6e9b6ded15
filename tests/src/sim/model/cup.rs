//! A cup's instances in the model (docs/tournaments.md#instances): which one a time falls in,
//! as it ran (cut by an early end or the deletion, none before the cup was defined), the one
//! open, the next, the last, and each one's seats, attempts and board. Computed on fixed
//! offsets (the zones the world uses have no clock changes), not through the product's periods.

use std::collections::{BTreeMap, BTreeSet, HashMap};

/// A recurring cup's schedule in a zone without clock changes: an instance opens every
/// `every` seconds on the zone's clock (its hour, or its midnight) and runs `duration` or until
/// the next opens, cut to the cup's window (docs/tournaments.md#schedules).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    pub every: i64,
    /// The zone's offset east of UTC, in seconds.
    pub offset: i64,
    pub duration: i64,
    /// Named by the local day (`reset: day`), else by the local minute it opens (`cron`).
    pub daily: bool,
}

/// One run of a cup (docs/tournaments.md#instances): its seats, attempts and board.
#[derive(Debug, Clone, Default)]
pub struct Run {
    pub seated: BTreeSet<String>,
    pub entries: HashMap<String, u32>,
    /// Attempts an admin granted each player beyond `ATTEMPTS`.
    pub granted: HashMap<String, u32>,
    /// user -> (kept score, when it was reached).
    pub board: HashMap<String, (i64, i64)>,
    /// Stored by the archive's run once the instance ended: user and score, best first, and the
    /// prize table it ended with.
    pub results: Option<(Vec<(String, i64)>, u8)>,
}

impl Run {
    /// The board best first: a higher score first, then who reached it first, then (one
    /// second) the greater user id, as a sorted set orders equal scores from the top.
    pub fn ranking(&self) -> Vec<(String, i64)> {
        best_first(&self.board)
    }

    /// What the instance's top reads: the stored results once there, else the board.
    pub fn top(&self) -> Vec<(String, i64)> {
        self.results.as_ref().map_or_else(|| self.ranking(), |(rows, _)| rows.clone())
    }
}

/// An instance's name and window `[start, end)`, in seconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    pub id: String,
    pub start: i64,
    pub end: i64,
}

#[derive(Debug, Clone)]
pub struct Cup {
    /// The definition as sent (JSON): the same again is a 200.
    pub definition: String,
    pub join_required: bool,
    /// The cup's window; `end` as defined or edited.
    pub start: i64,
    pub end: i64,
    /// When it was defined: an instance that ended before never ran.
    pub defined: i64,
    /// A recurring cup's schedule; `None`: one instance, named `single`.
    pub schedule: Option<Schedule>,
    pub single: String,
    /// When it was deleted (its open instance ended then, none opens after).
    pub deleted: Option<i64>,
    /// Instances ended early: id -> when.
    pub closed: BTreeMap<String, i64>,
    /// Seats (`max_size`): `SEATS`, raised by a live edit.
    pub seats: usize,
    /// When an edit first replaced the prizes (table 0 by table 1): instances ending after it
    /// run for table 1.
    pub prizes_changed: Option<i64>,
    /// The runs the history touched, by instance id.
    pub runs: BTreeMap<String, Run>,
    /// grant id -> (payload, its instance, the attempts left it answered).
    pub(super) grants: HashMap<String, (String, String, u32)>,
    /// Deleted, and its end done (its keys freed but the guard's, its definition forgotten):
    /// retries are refused, DELETE and the early end find nothing (404).
    pub retired: bool,
    /// event id -> (payload, day number of the first delivery, whether it was applied).
    pub(super) markers: HashMap<String, (String, i64, bool)>,
}

/// The local name of the instant `at` + `offset`, as `format` writes it.
fn local(at: i64, offset: i64, format: &str) -> String {
    chrono::DateTime::from_timestamp(at + offset, 0).expect("a time the world keeps").format(format).to_string()
}

impl Cup {
    /// The instance whose period holds `at`, as it ran (cut by an early end or the deletion),
    /// `None` outside the window or when it ended before the cup was defined.
    pub fn instance_at(&self, at: i64) -> Option<Window> {
        if at < self.start || at >= self.end {
            return None;
        }
        let mut window = match self.schedule {
            None => Window { id: self.single.clone(), start: self.start, end: self.end },
            Some(s) => {
                let opens = (at + s.offset).div_euclid(s.every) * s.every - s.offset;
                let id = local(opens, s.offset, if s.daily { "%Y-%m-%d" } else { "%Y-%m-%dT%H%M" });
                Window { id, start: opens.max(self.start), end: (opens + s.duration.min(s.every)).min(self.end) }
            }
        };
        for cut in [self.closed.get(&window.id).copied(), self.deleted].into_iter().flatten() {
            window.end = window.end.min(cut.max(window.start));
        }
        (window.end > self.defined || self.closed.contains_key(&window.id)).then_some(window)
    }

    /// The instance open at `now`.
    pub fn open_at(&self, now: i64) -> Option<Window> {
        self.instance_at(now).filter(|w| w.start <= now && now < w.end)
    }

    fn ran(&self, window: &Window) -> bool {
        window.start < window.end || self.closed.contains_key(&window.id)
    }

    /// The first instance to open after `now` (none after the deletion).
    pub fn next_after(&self, now: i64) -> Option<Window> {
        if now < self.start {
            return self.instance_at(self.start).filter(|w| w.start < w.end);
        }
        let s = self.schedule?;
        let last = self.deleted.map_or(self.end, |deleted| deleted.min(self.end));
        let mut probe = (now + s.offset).div_euclid(s.every) * s.every - s.offset + s.every;
        while probe < last {
            if let Some(window) = self.instance_at(probe).filter(|w| w.start < w.end) {
                return Some(window);
            }
            probe += s.every;
        }
        None
    }

    /// The last instance that opened by `now` and ran.
    pub fn last_before(&self, now: i64) -> Option<Window> {
        let probe = now.min(self.end - 1);
        if let Some(window) = self.instance_at(probe).filter(|w| w.start <= now && self.ran(w)) {
            return Some(window);
        }
        let s = self.schedule?;
        let opens = (probe + s.offset).div_euclid(s.every) * s.every - s.offset;
        self.instance_at(opens - 1).filter(|w| self.ran(w))
    }

    /// Which instance a read without `instance` shows: the open one, else the last that ran,
    /// else the next.
    pub fn current(&self, now: i64) -> Option<Window> {
        self.open_at(now).or_else(|| self.last_before(now)).or_else(|| self.next_after(now))
    }

    /// What the view shows: the open one, else the next, else the last.
    pub fn shown(&self, now: i64) -> Option<Window> {
        self.open_at(now).or_else(|| self.next_after(now)).or_else(|| self.last_before(now))
    }

    /// No instance open nor to come.
    pub fn over(&self, now: i64) -> bool {
        self.open_at(now).is_none() && self.next_after(now).is_none()
    }

    /// An instance's state, touched or not.
    pub fn run(&self, id: &str) -> Run {
        self.runs.get(id).cloned().unwrap_or_default()
    }

    /// Frozen: ended early, or its results stored (nothing is written to it from then on).
    pub fn frozen(&self, id: &str) -> bool {
        self.closed.contains_key(id) || self.runs.get(id).is_some_and(|run| run.results.is_some())
    }

    /// The prize table an instance ending at `end` runs for.
    pub fn table(&self, end: i64) -> u8 {
        u8::from(self.prizes_changed.is_some_and(|changed| end > changed))
    }
}

/// A score board (user -> (kept score, when it was kept)) best first: a higher score, then who
/// kept it first, then (one second) the greater user id, as a sorted set orders equal scores
/// from the top.
pub fn best_first(board: &HashMap<String, (i64, i64)>) -> Vec<(String, i64)> {
    let mut list: Vec<(&String, &(i64, i64))> = board.iter().collect();
    list.sort_by(|a, b| b.1.0.cmp(&a.1.0).then(a.1.1.cmp(&b.1.1)).then(b.0.cmp(a.0)));
    list.into_iter().map(|(user, &(score, _))| (user.clone(), score)).collect()
}

impl Cup {
    /// The instance named `id` (one the history touched), as it ran.
    pub fn instance_named(&self, id: &str) -> Option<Window> {
        match self.schedule {
            None => self.instance_at(self.start).filter(|w| w.id == id),
            Some(_) => {
                // A touched instance was open at some time in its period: probe its opening.
                let opens = self.opens_of(id)?;
                self.instance_at(opens.max(self.start)).filter(|w| w.id == id)
            }
        }
    }

    /// When a recurring cup's instance `id` opens on its schedule (UTC seconds).
    fn opens_of(&self, id: &str) -> Option<i64> {
        let s = self.schedule?;
        let local = if s.daily {
            chrono::NaiveDate::parse_from_str(id, "%Y-%m-%d").ok()?.and_hms_opt(0, 0, 0)?
        } else {
            chrono::NaiveDateTime::parse_from_str(id, "%Y-%m-%dT%H%M").ok()?
        };
        Some(local.and_utc().timestamp() - s.offset)
    }
}
