//! New boards told from lost ones (docs/journal.md#fence). A board's guard says `born` once its
//! journal is known to hold nothing Redis lacks; without it every journaled write is refused, so
//! a loss is seen without any key the loss removed. Only the journal bucket knows whether a board
//! without `born` is new (it holds nothing of it) or lost (it does): the drain asks it each run,
//! and the functions that take journaled writes ask it at their start (`at_start`), so a new
//! deployment's boards take their first write at once, with no drain first.

use chrono::Utc;
use futures::future::join_all;
use redis::aio::ConnectionLike;

use crate::archive::objects::{ObjectError, Witness, board_objects, layouts_objects, switches_of};
use crate::domain::config::Config;
use crate::domain::guard;
use crate::domain::scores::{MAX_SCORE, configured_scale};
use crate::redis::error::StoreError;
use crate::redis::keys::{BoardKeys, CATALOG_JOURNAL, Keys, journal_board, journal_generation, journal_shards};
use crate::redis::layout;
use crate::redis::layout_signs::holds_periods;
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
pub async fn judge<W: Witness>(config: &Config, store: &Store, keys: &Keys, name: &str, witness: &W) -> Result<Birth, BirthError> {
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
    let (target, unrecorded) = match role(&mut conn, keys, name).await? {
        Role::Data => (None, false),
        Role::Target(data) => (Some(data), false),
        // A move's switch counts too: a board moved before its first drain holds its lines in
        // the new layout's streams only, and the record that named it was what was lost (found by
        // the simulation: the configured layout judged new took writes the restore then hid).
        Role::Unrecorded => {
            let owner = journal_board(name);
            let prefix = keys.prefix();
            let folders = [board_objects(prefix, owner), layouts_objects(prefix, owner), switches_of(prefix, owner)];
            for folder in &folders {
                if witness.holds_any(folder).await? {
                    return Ok(Birth::History);
                }
            }
            (None, true)
        }
    };
    let birth = restore::mark_new(&mut conn, &board, target.as_deref()).await?;
    if unrecorded && birth == Birth::New {
        record_birth(&mut conn, config, keys, name, &board).await?;
    }
    Ok(birth)
}

/// A new board's sharded layout is recorded as it is born: left to its first write, two
/// deployments configured with other counts each found the board unrecorded and marked their
/// own layout new; the first write recorded one, and with that record lost the other took
/// writes as a new board's while the first held the board's history (found by the simulation).
/// Its scale with it unless the default, as a first write records them; a scale recorded
/// already (a one-slot board's) stands. A shard born while another deployment's layout was
/// recorded first is that layout's move target from now on. Nothing is recorded while the one
/// slot holds the board's guard or a current period's set: data there, which the probe finds
/// (`redis::layout`), such as a board written with the journal off. Marked first, recorded
/// after: a start stopped between the two leaves the layout born unrecorded, as before
/// (docs/scaling.md#changing-shards).
pub async fn record_birth(
    conn: &mut (impl ConnectionLike + Send),
    config: &Config,
    keys: &Keys,
    name: &str,
    shard: &BoardKeys,
) -> Result<(), StoreError> {
    let (owner, shards, generation) = (journal_board(name), journal_shards(name), journal_generation(name));
    let Some(board) = config.board(owner).filter(|_| shards > 1) else { return Ok(()) };
    let one_slot = keys.board(owner);
    let guarded: bool = redis::cmd("EXISTS").arg(one_slot.guard()).query_async(conn).await?;
    if guarded || holds_periods(conn, &one_slot, board, Utc::now()).await? {
        return Ok(());
    }
    let own = layout::text(shards, generation);
    let mut both = redis::cmd("MSETNX");
    both.arg(keys.board_layout(owner)).arg(&own);
    if let Some(max_score) = configured_scale(board).filter(|max| *max != MAX_SCORE) {
        both.arg(keys.board_scale(owner)).arg(max_score);
    }
    let set: bool = both.query_async(conn).await?;
    // Not set: the layout recorded already (its text answered), or a scale alone (the layout set now).
    let recorded = match set {
        true => None,
        false => redis::cmd("SET").arg(keys.board_layout(owner)).arg(&own).arg("NX").arg("GET").query_async(conn).await?,
    };
    if let Some(recorded) = recorded.filter(|recorded: &String| *recorded != own) {
        let _: () = redis::cmd("HSET").arg(shard.guard()).arg(guard::TARGET).arg(recorded).query_async(conn).await?;
    }
    Ok(())
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
    let judged = join_all(names.iter().map(|name| judge(config, store, keys, name, witness))).await;
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
