//! New boards told from lost ones (docs/journal.md#fence). A board's guard says `born` once its
//! journal is known to hold nothing Redis lacks; without it every journaled write is refused, so
//! a loss is seen without any key the loss removed. Only the journal bucket knows whether a board
//! without `born` is new (it holds nothing of it) or lost (it does): the drain asks it each run,
//! and the functions that take journaled writes ask it at their start (`at_start`), so a new
//! deployment's boards take their first write at once, with no drain first.

use futures::future::join_all;

use crate::archive::objects::{ObjectError, Witness, board_objects, layouts_objects};
use crate::domain::config::Config;
use crate::redis::error::StoreError;
use crate::redis::keys::{CATALOG_JOURNAL, Keys, journal_board};
use crate::redis::restore::birth::{Role, role};
use crate::redis::restore::{self, Birth};
use crate::redis::store::Store;

#[derive(Debug, thiserror::Error)]
pub enum BirthError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Objects(#[from] ObjectError),
}

/// Judges journal `name` (a board, one of its shards, the catalog's): marked born when neither the
/// bucket (asked first) nor Redis (in the mark's own step, mark_born.lua) holds a sign of its
/// history. A drain that stores the board's first entries between the two found them in its
/// stream, which the mark then sees.
pub async fn judge<W: Witness>(store: &Store, keys: &Keys, name: &str, witness: &W) -> Result<Birth, BirthError> {
    let board = keys.board(name);
    let mut conn = store.write_connection().await?;
    if restore::born(&mut conn, &board).await? {
        return Ok(Birth::Born);
    }
    if witness.holds_any(&board_objects(keys.prefix(), name)).await? {
        return Ok(Birth::History);
    }
    // A move's target is born as one; a layout of shards with no record is new only if the
    // journal holds nothing of the board in any layout: else its record was lost, and only a
    // restore knows where its data is (docs/scaling.md#changing-shards).
    let target = match role(&mut conn, keys, name).await? {
        Role::Data => None,
        Role::Target(data) => Some(data),
        Role::Unrecorded => {
            let owner = journal_board(name);
            let prefix = keys.prefix();
            if witness.holds_any(&board_objects(prefix, owner)).await? || witness.holds_any(&layouts_objects(prefix, owner)).await? {
                return Ok(Birth::History);
            }
            None
        }
    };
    Ok(restore::mark_new(&mut conn, &board, target.as_deref()).await?)
}

/// The journals a function's start judges: the catalog's and, for each declared board, those the
/// drain stores (the layout its data is in and the one a move takes it to), never a layout a move
/// left behind, whose guards it removed. Runtime boards are born when defined.
async fn declared<W: Witness>(config: &Config, keys: &Keys, store: &Store, witness: &W) -> Vec<String> {
    let layouts = join_all(config.boards().iter().map(|board| async move {
        let mut conn = store.connection().await?;
        super::generations::drained(store, &mut conn, keys, board, witness).await
    }))
    .await;
    let mut names = vec![CATALOG_JOURNAL.to_owned()];
    for (board, journals) in config.boards().iter().zip(layouts) {
        match journals {
            Ok(journals) => names.extend(journals),
            Err(error) => {
                tracing::warn!(board = board.name, error = %error, "layout unread at start: the drain's next run judges the board")
            }
        }
    }
    names
}

/// At a function's start, on a journaled deployment: every declared board (and the runtime
/// boards' catalog) not born yet is judged, side by side, so a new deployment takes its first
/// writes at once. A layout probe and one `HEXISTS` a journal when all are born (every start but
/// the first); a failure leaves the board to the drain's next run. What each unborn one was found.
pub async fn at_start<W: Witness>(config: &Config, keys: &Keys, store: &Store, witness: &W) -> Vec<(String, Result<Birth, BirthError>)> {
    if !keys.journal_on() {
        return Vec::new();
    }
    let names = declared(config, keys, store, witness).await;
    let judged = join_all(names.iter().map(|name| judge(store, keys, name, witness))).await;
    let mut found = Vec::new();
    for (name, birth) in names.into_iter().zip(judged) {
        match &birth {
            Ok(Birth::Born) => continue,
            Ok(Birth::New) => tracing::info!(board = name, "a new board: its first writes go ahead"),
            Ok(Birth::History) => {
                tracing::error!(board = name, "the board's data was lost: its writes are refused until it is restored from the journal")
            }
            Err(error) => tracing::warn!(board = name, error = %error, "not judged at start: the drain's next run judges it"),
        }
        found.push((name, birth));
    }
    found
}

/// `at_start` with the journal bucket of the environment (`archive::probe`): nothing without one.
#[cfg(feature = "journal-probe")]
pub async fn at_start_from_env(config: &Config, keys: &Keys, store: &Store) {
    if let Some(probe) = crate::archive::probe::JournalProbe::from_env() {
        at_start(config, keys, store, &probe).await;
    }
}
