//! The boards a function serves (docs/runtime-boards.md): the declared ones and the runtime
//! ones, reloaded when the catalog's version moves. The version is asked at most once per
//! `refresh` (default 5 s, `STANDINGS_CATALOG_REFRESH_SECS`), so a write on a warm function
//! costs no round trip for it, and a board created anywhere is served everywhere within
//! `refresh` plus one request. Whatever the function builds from the boards (its services) is
//! built once per version and shared.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::domain::config::{Board, Config, Definition};
use crate::redis::catalog;
use crate::redis::error::StoreError;
use crate::redis::keys::Keys;
use crate::redis::store::Store;

/// How long a function serves the boards it knows before asking whether they changed.
pub const DEFAULT_REFRESH: Duration = Duration::from_secs(5);

/// `STANDINGS_CATALOG_REFRESH_SECS` (0: ask before every request).
pub fn refresh_from_env() -> Duration {
    std::env::var("STANDINGS_CATALOG_REFRESH_SECS").ok().and_then(|s| s.parse().ok()).map_or(DEFAULT_REFRESH, Duration::from_secs)
}

/// The declared boards and the runtime ones the catalog holds now: for the jobs that run once
/// a minute or by hand (drain, restore, verify, archive), which read it on every run.
pub async fn boards_now(declared: &Config, keys: &Keys, store: &Store) -> Result<Config, StoreError> {
    let mut conn = store.connection().await?;
    let loaded = catalog::load(&mut conn, keys).await?;
    Ok(declared.with_runtime(runtime_boards(&loaded.definitions).into_iter().map(|board| deleted_as_recorded(board, &loaded.ending))))
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

/// A deleted tournament ends when it was deleted (`Tournament::deleted`, from its record in
/// the catalog's `ending` hash): the instance open then ends then, and none opens after it.
pub(crate) fn deleted_as_recorded(mut board: Board, ending: &std::collections::BTreeMap<String, String>) -> Board {
    if let (Some(at), Some(tournament)) = (ending.get(&board.name).and_then(|why| ended_at(why)), board.tournament.as_mut()) {
        Arc::make_mut(tournament).deleted = Some(at);
    }
    board
}

/// The boards of stored definitions; one that no longer validates is logged and left out.
fn runtime_boards(definitions: &std::collections::BTreeMap<String, String>) -> Vec<Board> {
    definitions
        .iter()
        .filter_map(|(name, text)| match Definition::stored(text) {
            Ok(board) if board.name == *name => Some(board),
            Ok(_) => None,
            Err(error) => {
                tracing::error!(board = %name, error = %error, "a runtime board's definition no longer validates: not served");
                None
            }
        })
        .collect()
}

/// Runtime boards whose end is done, from the definition their tombstone keeps: ending for
/// good (no write, no fan-out, not listed), their archived seasons still read by name.
fn retired_boards(loaded: &catalog::Catalog) -> impl Iterator<Item = Board> + '_ {
    loaded.ending.iter().filter(|(name, _)| !loaded.definitions.contains_key(*name)).filter_map(|(name, why)| {
        let why: serde_json::Value = serde_json::from_str(why).ok()?;
        let mut board = Definition::stored(&why.get("definition")?.to_string()).ok().filter(|board| board.name == *name)?;
        board.ending = true;
        let mut board = deleted_as_recorded(board, &loaded.ending);
        if let Some(tournament) = board.tournament.as_mut() {
            Arc::make_mut(tournament).retired = true;
        }
        Some(board)
    })
}

type Build<T> = Box<dyn Fn(Arc<Config>) -> T + Send + Sync>;

struct Cached<T> {
    checked: Instant,
    version: Option<u64>,
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
}

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
        }
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
            let (version, born) = catalog::version(&mut conn, &self.keys).await?;
            // A lost catalog (no version while the journal says it had one) keeps the boards
            // this function knew until it is restored; their own guards refuse their writes.
            let lost = version.is_none() && held.version.is_some() && self.keys.journal_on() && !born;
            if version == held.version || lost {
                let fresh = Arc::new(Cached { checked, version: held.version, config: held.config.clone(), built: held.built.clone() });
                return Ok(self.keep(fresh));
            }
        }
        let loaded = catalog::load(&mut conn, &self.keys).await?;
        let runtime = runtime_boards(&loaded.definitions).into_iter().map(|mut board| {
            board.ending = loaded.ending.contains_key(&board.name);
            deleted_as_recorded(board, &loaded.ending)
        });
        let runtime: Vec<Board> = runtime.chain(retired_boards(&loaded)).collect();
        let config = Arc::new(self.declared.with_runtime(runtime));
        let built = Arc::new((self.build)(config.clone()));
        Ok(self.keep(Arc::new(Cached { checked, version: loaded.version, config, built })))
    }

    /// Caches `fresh`, unless a request that read a newer version meanwhile cached that: a
    /// slow read never puts an older catalog back.
    fn keep(&self, fresh: Arc<Cached<T>>) -> Arc<Cached<T>> {
        let mut cached = self.cached.lock().expect("catalog cache poisoned");
        match cached.as_ref() {
            Some(newer) if newer.version > fresh.version => newer.clone(),
            _ => {
                *cached = Some(fresh.clone());
                fresh
            }
        }
    }
}
