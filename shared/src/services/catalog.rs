//! The boards a function serves (docs/runtime-boards.md): the declared ones and the runtime
//! ones, reloaded when the catalog's version moves. The version is asked at most once per
//! `refresh` (default 5 s, `STANDINGS_CATALOG_REFRESH_SECS`), so a write on a warm function
//! costs no round trip for it, and a board created anywhere is served everywhere within
//! `refresh` plus one request. Whatever the function builds from the boards (its services) is
//! built once per version and shared.
//!
//! A warm function whose version moved reads only the boards changed since the version it holds
//! (the catalog's change log, `catalog_changes.lua`) and parses only those: the rest keep the
//! boards they parsed to. It reads the whole catalog when the log cannot say (a log younger than
//! what it holds, or lost, or short of a change made without it), and every `WHOLE_READ`,
//! changed or not (a function frozen across a loss and a restore of the catalog), beside its
//! requests rather than in one (`whole`).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use std::collections::HashMap;

use crate::domain::config::{Board, Config, Definition, kept_board};
use crate::redis::catalog;
use crate::redis::error::StoreError;
use crate::redis::keys::Keys;
use crate::redis::scripts::catalog::{Changes, changes, live};
use crate::redis::store::Store;

mod held;
mod whole;

use held::{Entry, Held, held_after, held_of};

/// How long a function serves the boards it knows before asking whether they changed.
pub const DEFAULT_REFRESH: Duration = Duration::from_secs(5);

/// The longest a warm function serves the catalog without reading it whole.
pub const WHOLE_READ: Duration = Duration::from_secs(300);

/// `STANDINGS_CATALOG_REFRESH_SECS` (0: ask before every request).
pub fn refresh_from_env() -> Duration {
    std::env::var("STANDINGS_CATALOG_REFRESH_SECS").ok().and_then(|s| s.parse().ok()).map_or(DEFAULT_REFRESH, Duration::from_secs)
}

/// The declared boards and the runtime ones the catalog holds now: for the jobs that run once
/// a minute or by hand (drain, restore, verify, archive), which read it on every run (deleted
/// boards' tombstones left out, as a function's).
pub async fn boards_now(declared: &Config, keys: &Keys, store: &Store) -> Result<Config, StoreError> {
    let mut conn = store.connection().await?;
    let live = live(&mut conn, keys).await?;
    Ok(declared.with_runtime(
        live.boards
            .iter()
            .filter_map(|(name, definition, why)| Some(deleted_as_recorded(runtime_board(name, definition)?, why.as_deref()))),
    ))
}

/// The runtime boards whose end is done (their keys freed but their guards): a restore brings
/// back their guards alone, refusing writes as before the loss.
pub async fn retired_now(keys: &Keys, store: &Store) -> Result<Vec<Board>, StoreError> {
    let mut conn = store.connection().await?;
    let loaded = catalog::load(&mut conn, keys).await?;
    Ok(retired_boards(&loaded).collect())
}

/// When a deleted board ended, from its record in the catalog's `ending` hash (`{reason, at}`).
pub(crate) fn ended_at(why: &str) -> Option<chrono::DateTime<chrono::Utc>> {
    let why: serde_json::Value = serde_json::from_str(why).ok()?;
    Some(chrono::DateTime::parse_from_rfc3339(why["at"].as_str()?).ok()?.with_timezone(&chrono::Utc))
}

/// A deleted tournament ends when it was deleted (`Tournament::deleted`, from `why`, its record
/// in the catalog's `ending` hash): the instance open then ends then, and none opens after it.
pub(crate) fn deleted_as_recorded(mut board: Board, why: Option<&str>) -> Board {
    if let (Some(at), Some(tournament)) = (why.and_then(ended_at), board.tournament.as_mut()) {
        Arc::make_mut(tournament).deleted = Some(at);
    }
    board
}

/// The board of stored definition `text` of `name`.
fn runtime_board(name: &str, text: &str) -> Option<Board> {
    match Definition::stored(text) {
        Ok(board) if board.name == name => Some(board),
        Ok(_) => None,
        Err(error) => {
            tracing::error!(board = %name, error = %error, "a runtime board's definition no longer validates: not served");
            None
        }
    }
}

/// Runtime boards whose end is done, from the definition their tombstone keeps: ending for
/// good (no write, no fan-out, not listed), their archived seasons still read by name.
fn retired_boards(loaded: &catalog::Catalog) -> impl Iterator<Item = Board> + '_ {
    loaded
        .ending
        .iter()
        .filter(|(name, _)| !loaded.definitions.contains_key(*name))
        .filter_map(|(name, why)| Some(deleted_as_recorded(retired_board(name, why)?, Some(why))))
}

/// The tournament a tombstone (`why`) stands for, deleted when it says (`None`: not a
/// tournament's, or unreadable): the list of ended tournaments shows it.
pub(crate) fn retired_tournament(name: &str, why: &str) -> Option<Board> {
    retired_board(name, why).filter(|board| board.tournament.is_some()).map(|board| deleted_as_recorded(board, Some(why)))
}

/// The board a tombstone (`why`, with the definition it kept) stands for, not yet marked deleted.
fn retired_board(name: &str, why: &str) -> Option<Board> {
    let why: serde_json::Value = serde_json::from_str(why).ok()?;
    let mut board = kept_board(&why).filter(|board| board.name == name)?;
    board.ending = true;
    if let Some(tournament) = board.tournament.as_mut() {
        let tournament = Arc::make_mut(tournament);
        tournament.retired = true;
        tournament.players_kept = why.get(crate::domain::guard::PLAYERS).and_then(serde_json::Value::as_u64);
    }
    Some(board)
}

type Build<T> = Box<dyn Fn(Arc<Config>) -> T + Send + Sync>;

impl<T> Cached<T> {
    /// The same boards, sharing what they hold.
    fn fresh_copy(&self) -> Self {
        Self {
            checked: self.checked,
            read_whole: self.read_whole,
            version: self.version,
            held: self.held.clone(),
            config: self.config.clone(),
            built: self.built.clone(),
        }
    }
}

struct Cached<T> {
    checked: Instant,
    /// When the catalog was last read whole.
    read_whole: Instant,
    version: Option<u64>,
    held: Arc<Held>,
    config: Arc<Config>,
    built: Arc<T>,
}

/// The boards, and `T` built from them, as of the catalog's last version seen.
pub struct Catalog<T> {
    declared: Arc<Config>,
    keys: Keys,
    store: Store,
    refresh: Duration,
    build: Build<T>,
    cached: Mutex<Option<Arc<Cached<T>>>>,
    /// Set by `invalidate`: every request asks the version until one checked after this.
    invalidated: Mutex<Option<Instant>>,
    /// Deleted boards read by name (`naming`).
    retired: Mutex<Retired<T>>,
    /// How often a warm function reads the catalog whole (`WHOLE_READ`), beside its requests.
    whole_read: Duration,
    whole: whole::WholeRead,
}

/// Deleted boards a function read by name, and what it built with them beside the boards it
/// serves, bounded: a function holds what its requests name, not every board ever deleted.
struct Retired<T> {
    /// Name -> its tombstone's board (`None`: it has none, as read at that instant, trusted for
    /// the refresh period; a tombstone never changes, a name is never defined again).
    boards: HashMap<String, (Option<Arc<Board>>, Instant)>,
    /// The names added (sorted, joined) -> the config they were added to, and the config and
    /// `T` with them; those for an older config are dropped when one is added.
    built: HashMap<String, Composed<T>>,
}

impl<T> Default for Retired<T> {
    fn default() -> Self {
        Self { boards: HashMap::new(), built: HashMap::new() }
    }
}

/// Deleted boards added to a config: the config they were added to, and the config and `T` with them.
type Composed<T> = (Arc<Config>, Arc<Config>, Arc<T>);

/// The most names a function remembers reading by name (with a tombstone or without).
pub const RETIRED_HELD: usize = 64;
/// The most configs it keeps with deleted boards added (each a copy of the boards' index).
pub const COMPOSED_HELD: usize = 4;

impl<T> Catalog<T> {
    pub fn new(declared: Arc<Config>, keys: Keys, store: Store, build: impl Fn(Arc<Config>) -> T + Send + Sync + 'static) -> Self {
        Self {
            declared,
            keys,
            store,
            refresh: refresh_from_env(),
            build: Box::new(build),
            cached: Mutex::new(None),
            invalidated: Mutex::new(None),
            retired: Mutex::new(Retired::default()),
            whole_read: WHOLE_READ,
            whole: whole::WholeRead::default(),
        }
    }

    pub fn with_whole_read(mut self, every: Duration) -> Self {
        self.whole_read = every;
        self
    }

    /// Waits for a whole read made beside the requests, if one is in flight (tests, the bench).
    pub async fn whole_read_settled(&self) {
        self.whole.settled().await;
    }

    pub fn with_refresh(mut self, refresh: Duration) -> Self {
        self.refresh = refresh;
        self
    }

    /// The boards declared in the configuration file (never changed at runtime).
    pub fn declared(&self) -> &Arc<Config> {
        &self.declared
    }

    /// `T` for the boards as of now (at most `refresh` old).
    pub async fn current(&self) -> Result<Arc<T>, StoreError> {
        Ok(self.snapshot().await?.built.clone())
    }

    /// Every board as of now (at most `refresh` old).
    pub async fn config(&self) -> Result<Arc<Config>, StoreError> {
        Ok(self.snapshot().await?.config.clone())
    }

    /// `T` for the boards as of now, with `board` when it is a deleted board this function does
    /// not serve (its tombstone, read by name: its archived seasons and results are read through
    /// it, its writes refused as ended, its live reads empty). One more round trip when a request
    /// names a board the function does not know, none for the boards it serves.
    pub async fn naming(&self, board: &str) -> Result<Arc<T>, StoreError> {
        Ok(self.snapshot_naming(&[board]).await?.1)
    }

    /// `naming` for every board of `boards` (a queue batch's).
    pub async fn naming_all(&self, boards: &[&str]) -> Result<Arc<T>, StoreError> {
        Ok(self.snapshot_naming(boards).await?.1)
    }

    /// Every board as of now, with `board` when it is a deleted one (see `naming`).
    pub async fn config_naming(&self, board: &str) -> Result<Arc<Config>, StoreError> {
        Ok(self.snapshot_naming(&[board]).await?.0)
    }

    async fn snapshot_naming(&self, names: &[&str]) -> Result<(Arc<Config>, Arc<T>), StoreError> {
        match self.naming_once(names, false).await? {
            Some(found) => Ok(found),
            // A name the catalog defines that the boards held lack: created since this function
            // asked, or the catalog restored since it read it lost (empty). Served at once, not a
            // 404 until the refresh: read again now.
            None => {
                self.invalidate();
                Ok(self.naming_once(names, true).await?.expect("a read after the catalog changed serves what it reads"))
            }
        }
    }

    /// `snapshot_naming` on the snapshot held; `None` when the catalog defines a name it lacks
    /// (unless `fresh`: the snapshot was just read).
    async fn naming_once(&self, names: &[&str], fresh: bool) -> Result<Option<(Arc<Config>, Arc<T>)>, StoreError> {
        let snapshot = self.snapshot().await?;
        let served = (snapshot.config.clone(), snapshot.built.clone());
        let mut unknown: Vec<&str> = names
            .iter()
            .copied()
            .filter(|name| snapshot.config.board(name).is_none() && crate::domain::ids::validate_board_name(name).is_ok())
            .collect();
        unknown.sort_unstable();
        unknown.dedup();
        let lock = || self.retired.lock().expect("retired boards poisoned");
        let (mut retired, mut unread) = (Vec::new(), Vec::new());
        for name in unknown {
            let held = lock().boards.get(name).filter(|(board, at)| board.is_some() || at.elapsed() < self.refresh).map(|(b, _)| b.clone());
            match held {
                Some(board) => retired.extend(board),
                None => unread.push(name),
            }
        }
        // The names not held, read at once (a queue batch's several in one round trip).
        if !unread.is_empty() {
            let records = catalog::records(&mut self.store.connection().await?, &self.keys, &unread).await?;
            for (name, record) in unread.into_iter().zip(records) {
                if record.definition.is_some() && !fresh {
                    return Ok(None);
                }
                let board = record.tombstone().and_then(|why| Entry::new(name, None, Some(why)).served);
                // A lost catalog holds no tombstone: "none" is not remembered then.
                if board.is_none() && self.keys.journal_on() && !record.born {
                    continue;
                }
                let mut held = lock();
                if held.boards.len() >= RETIRED_HELD {
                    held.boards.clear();
                }
                held.boards.insert(name.to_owned(), (board.clone(), Instant::now()));
                retired.extend(board);
            }
        }
        if retired.is_empty() {
            return Ok(Some(served));
        }
        retired.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        let key = retired.iter().map(|board| board.name.as_str()).collect::<Vec<_>>().join(",");
        if let Some((_, config, built)) = lock().built.get(&key).filter(|(base, ..)| Arc::ptr_eq(base, &snapshot.config)) {
            return Ok(Some((config.clone(), built.clone())));
        }
        let config = Arc::new(snapshot.config.with_runtime(retired));
        let built = Arc::new((self.build)(config.clone()));
        let mut held = lock();
        held.built.retain(|_, (base, ..)| Arc::ptr_eq(base, &snapshot.config));
        if held.built.len() >= COMPOSED_HELD {
            held.built.clear();
        }
        held.built.insert(key, (snapshot.config.clone(), config.clone(), built.clone()));
        Ok(Some((config, built)))
    }

    /// Makes every request ask the catalog's version until one has read it after this call
    /// (this function changed it, so it serves its own change at once, to all its concurrent
    /// requests). What is cached stays: a catalog found lost meanwhile keeps the boards this
    /// function knew.
    pub fn invalidate(&self) {
        *self.invalidated.lock().expect("catalog cache poisoned") = Some(Instant::now());
    }

    async fn snapshot(&self) -> Result<Arc<Cached<T>>, StoreError> {
        let held = self.cached.lock().expect("catalog cache poisoned").clone();
        let invalidated = *self.invalidated.lock().expect("catalog cache poisoned");
        if let Some(held) = &held
            && held.checked.elapsed() < self.refresh
            && invalidated.is_none_or(|at| held.checked > at)
        {
            return Ok(held.clone());
        }
        let mut conn = self.store.connection().await?;
        let checked = Instant::now();
        if let Some(held) = &held {
            // The base brought forward: what a whole read made beside earlier requests found,
            // else what this function holds.
            let (read_whole, base_version, base) = match self.whole.take() {
                Some(found) => (found.began, found.version, found.held),
                None => (held.read_whole, held.version, held.held.clone()),
            };
            let (version, born, changed) = match base_version {
                Some(version) => {
                    let Changes { version, born, complete, changed } = changes(&mut conn, &self.keys, version).await?;
                    (version, born, complete.then_some(changed))
                }
                None => {
                    let (version, born) = catalog::version(&mut conn, &self.keys).await?;
                    (version, born, None)
                }
            };
            // Started once this request's own read is answered: Redis runs the whole read's script
            // (~10,000 definitions) alone, and this request does not queue behind it.
            if read_whole.elapsed() >= self.whole_read {
                self.whole.start(&self.store, &self.keys, self.whole_read, base.clone());
            }
            // A lost catalog (no version while the journal says it had one) keeps the boards
            // this function knew until it is restored; their own guards refuse their writes.
            let lost = version.is_none() && held.version.is_some() && self.keys.journal_on() && !born;
            if lost || (version == held.version && Arc::ptr_eq(&base, &held.held)) {
                return Ok(self.keep(Arc::new(Cached { checked, ..held.fresh_copy() })));
            }
            if version == base_version {
                return Ok(self.keep(self.compose(checked, read_whole, version, base)));
            }
            if let Some(changed) = changed.filter(|_| version > base_version) {
                let after = Arc::new(held_after(&base, changed));
                return Ok(self.keep(self.compose(checked, read_whole, version, after)));
            }
        }
        let live = live(&mut conn, &self.keys).await?;
        let version = live.version;
        let before = held.as_ref().map(|held| held.held.as_ref());
        Ok(self.keep(self.compose(checked, checked, version, Arc::new(held_of(live, before)))))
    }

    /// The boards of `held` served beside the declared ones, and what the function builds.
    fn compose(&self, checked: Instant, read_whole: Instant, version: Option<u64>, held: Arc<Held>) -> Arc<Cached<T>> {
        let config = Arc::new(self.declared.with_runtime(held.values().filter_map(|entry| entry.served.clone())));
        let built = Arc::new((self.build)(config.clone()));
        Arc::new(Cached { checked, read_whole, version, held, config, built })
    }

    /// Caches `fresh`, unless a request that began its read later cached its own meanwhile: a
    /// slow read never puts an older catalog back, and a catalog that went back (restored to
    /// an older version, or rolled back) is served as it is now.
    fn keep(&self, fresh: Arc<Cached<T>>) -> Arc<Cached<T>> {
        let mut cached = self.cached.lock().expect("catalog cache poisoned");
        match cached.as_ref() {
            Some(newer) if newer.checked > fresh.checked => newer.clone(),
            _ => {
                *cached = Some(fresh.clone());
                fresh
            }
        }
    }
}
