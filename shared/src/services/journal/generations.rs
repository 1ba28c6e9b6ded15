//! Which generation of a board's layout holds its journal (docs/boards.md#changing-max_score):
//! a move that re-encoded the board's scores wrote its history again into the next generation's
//! journals, and recorded that generation with the layout. The record is in Redis: a store that
//! lost it (the board's slot, or everything) is told by S3, whose newest generation holding
//! objects for the configured shards is the one the board was in.

use crate::archive::objects::{
    Objects, Witness, board_objects, generation_name, generations_of, journal_objects, layouts_objects, parse_lines, read_text,
};
use crate::domain::config::Board;
use crate::domain::journal::stream_order;
use crate::domain::rescale::Rescale;
use crate::redis::error::StoreError;
use crate::redis::keys::{Keys, Layout, journal_generation, journal_shards};
use crate::redis::layout;
use crate::redis::store::{Connection, Store};

use super::error::RestoreError;

/// The layout `board`'s journal is in: the one recorded, else the one its keys or S3 say.
pub(super) async fn configured<O: Objects>(conn: &mut Connection, objects: &O, keys: &Keys, board: &Board) -> Result<Layout, RestoreError> {
    // Where the data is, whatever the configuration says (a move due or under way restores the
    // layout it moves from, never the one it goes to, nor one the board had before).
    if let Some((shards, generation)) = layout::read(conn, keys, &board.name).await? {
        // A store older than the board's last switch (a snapshot taken before it) records the
        // layout it moved from, whose journal ends at the switch: S3 says where the data is.
        let last = super::switches::last(objects, keys, &board.name).await?.map(|s| (s.shards, s.generation));
        let (shards, generation) = last.unwrap_or((shards, generation));
        return Ok(keys.layout_at(&board.name, shards, generation));
    }
    // Nothing recorded: a board never moved (its data in its one slot, as `redis::layout`'s probe
    // finds it, whatever count is configured), one whose first move has not switched yet, or a
    // store that lost the record (with the one slot: the record is in its hash tag) or was
    // rolled back to before a switch. A switch leaves the new layout's journal in S3 (the move
    // stores it first), so the one slot is the data's only when the configured layout's journal
    // holds nothing there: a deploy's start marks that layout's guards born before any move.
    let (one, first) = (keys.layout(&board.name, 1), keys.layout(&board.name, board.shards));
    let stored = |layout: &Layout| {
        let folders: Vec<String> = layout.journals().iter().map(|journal| board_objects(keys.prefix(), journal)).collect();
        async move {
            Ok::<bool, RestoreError>(futures::future::try_join_all(folders.iter().map(|f| objects.holds_any(f))).await?.contains(&true))
        }
    };
    let guarded = |layout: &Layout| redis::cmd("EXISTS").arg(layout.shard(0).guard()).clone();
    // The layout S3 says the board last switched to (a store older than that switch, or the
    // record lost alone); else, a move due when the record was lost: the layout it was due to
    // take the board from, as its target's guards say (docs/scaling.md#changing-shards).
    if let Some(switch) = super::switches::last(objects, keys, &board.name).await? {
        return Ok(keys.layout_at(&board.name, switch.shards, switch.generation));
    }
    if let Some(source) = crate::redis::restore::birth::data_of_target(conn, keys, &first).await? {
        return Ok(source);
    }
    let first_stored = board.shards > 1 && stored(&first).await?;
    if board.shards > 1 && !first_stored && guarded(&one).query_async::<bool>(conn).await.map_err(StoreError::from)? {
        return Ok(one);
    }
    if guarded(&first).query_async::<bool>(conn).await.map_err(StoreError::from)? {
        return Ok(first);
    }
    // The newest generation a move switched to (recorded once its journal was whole).
    let listed = objects.list(&generations_of(keys.prefix(), &board.name)).await?;
    let generation = listed.iter().filter_map(|name| name.rsplit_once("/g")?.1.parse::<u32>().ok()).max().unwrap_or(0);
    if generation > 0 || first_stored {
        return Ok(keys.layout_at(&board.name, board.shards, generation));
    }
    // None: the one slot when its journal holds the lines (the first move due when the store
    // was lost); else the one sharded layout S3 holds lines of (a move due that never switched,
    // the board written in the layout a start of another count recorded first); else the
    // configured layout (a board lost before its first drain).
    if stored(&one).await? {
        return Ok(one);
    }
    Ok(stored_layout(objects, keys, &board.name).await?.unwrap_or(first))
}

/// The one sharded layout whose journals S3 holds objects of (`None`: none, or several).
async fn stored_layout<O: Objects>(objects: &O, keys: &Keys, board: &str) -> Result<Option<Layout>, RestoreError> {
    let listed = objects.list(&layouts_objects(keys.prefix(), board)).await?;
    let layouts: std::collections::BTreeSet<(u32, u32)> = listed
        .iter()
        .filter_map(|name| {
            let journal = name.split("/board=").nth(1)?.split('/').next()?;
            Some((journal_shards(journal), journal_generation(journal)))
        })
        .collect();
    Ok(match layouts.len() {
        1 => layouts.first().map(|&(shards, generation)| keys.layout_at(board, shards, generation)),
        _ => None,
    })
}

/// The layout `board`'s data is in, whatever scale the configuration says (a move re-encoding
/// it starts from there).
pub(super) async fn held(store: &Store, conn: &mut Connection, keys: &Keys, board: &Board) -> Result<Layout, RestoreError> {
    match store.read_layout(keys, board).await {
        // Scores held at another scale than configured: a board with no layout record then
        // holds them in its one slot (`redis::layout`).
        Err(StoreError::Rescaled { .. }) => recorded(conn, keys, board).await,
        held => Ok(held?),
    }
}

/// The layout `board`'s record names, read now (a board with none holds its data in its one
/// slot).
async fn recorded(conn: &mut Connection, keys: &Keys, board: &Board) -> Result<Layout, RestoreError> {
    let (shards, generation) = layout::read(conn, keys, &board.name).await?.unwrap_or((1, 0));
    Ok(keys.layout_at(&board.name, shards, generation))
}

/// Whether S3 holds every line of `layout`'s journals that their streams hold (the drain stores
/// them as it runs; a move waits for it before switching, so the new generation's history is
/// whole in S3 before anything names it), and once it does, the generation's record written.
pub(super) async fn recorded_whole<O: Objects>(
    conn: &mut Connection,
    objects: &O,
    keys: &Keys,
    layout: &Layout,
) -> Result<bool, RestoreError> {
    for (shard, journal) in layout.all().iter().zip(layout.journals()) {
        let Some(newest) = crate::redis::journal::newest_id(conn, shard).await? else { continue };
        let stored = journal_objects(objects, keys.prefix(), &journal).await?;
        let Some(last) = stored.last() else { return Ok(false) };
        let text = read_text(objects, last).await.map_err(|e| RestoreError::Unreadable(last.clone(), e.to_string()))?;
        let through = parse_lines(last, &text).filter_map(Result::ok).last().map(|line| line.id);
        if through.as_deref().map(stream_order) < Some(stream_order(&newest)) {
            return Ok(false);
        }
    }
    objects.put_new(&generation_name(keys.prefix(), layout.board(), layout.generation()), Vec::new()).await?;
    Ok(true)
}

/// The journals the drain stores for `board`: those of the layout its data is in and those of
/// the layout a move takes it to (its configured shards; the next generation when its scores
/// are being re-encoded), so no stream is left undrained while it moves. From the store's
/// records, probed each run (`Store::read_layout`): a scale pending is the probe's `Rescaled`.
pub(super) async fn drained<W: Witness>(
    store: &Store,
    conn: &mut Connection,
    keys: &Keys,
    board: &Board,
    witness: &W,
) -> Result<Vec<String>, RestoreError> {
    let (held, rescaled) = match store.read_layout(keys, board).await {
        Ok(held) => (held, false),
        // Read again (the probe is up to 30 s old: a move may have switched since).
        Err(StoreError::Rescaled { .. }) => {
            let held = recorded(conn, keys, board).await?;
            let scale = layout::held_scale(conn, keys, board, chrono::Utc::now()).await?;
            let due = scale.and_then(|scale| Rescale::new(board, scale)).is_some() && super::rescale::refusal(board).is_none();
            (held, due)
        }
        Err(error) => return Err(error.into()),
    };
    let mut journals = held.journals();
    if held.shards() != board.shards || rescaled {
        // Unknown this run (S3 unreadable): the layout the data is in alone, never a guess that
        // could name a layout left behind, whose objects would be taken for a loss.
        match moving_to(conn, witness, keys, board, &held, rescaled).await {
            Ok(target) => journals.extend(target.journals().into_iter().filter(|name| !held.journals().contains(name))),
            Err(error) => tracing::warn!(board = board.name, error = %error, "the layout a move takes the board to is unknown this run"),
        }
    }
    Ok(journals)
}

/// How many generations past the first candidate a move looks for one free of another time's.
const GENERATIONS_TRIED: u32 = 64;

/// The layout a move of `board` from `held` goes to (docs/scaling.md#changing-shards): its
/// configured shards in `held`'s generation (the next when its scores are re-encoded,
/// `rescaled`), or the first after it holding nothing of another time: a layout the board had
/// before keeps its journal objects, and its generation is not taken again. A generation whose
/// move from `held` has begun (its checkpoint says so) is that move's.
pub(super) async fn moving_to<W: Witness>(
    conn: &mut Connection,
    witness: &W,
    keys: &Keys,
    board: &Board,
    held: &Layout,
    rescaled: bool,
) -> Result<Layout, RestoreError> {
    let first = held.generation() + u32::from(rescaled);
    let from = layout::text(held.shards(), held.generation());
    for generation in first..first + GENERATIONS_TRIED {
        let candidate = keys.layout_at(&board.name, board.shards, generation);
        let begun: Option<String> = redis::cmd("HGET")
            .arg(candidate.shard(0).reshard_checkpoint())
            .arg("from")
            .query_async(conn)
            .await
            .map_err(StoreError::from)?;
        if begun.as_deref() == Some(from.as_str()) {
            return Ok(candidate);
        }
        if begun.is_some() {
            continue;
        }
        // Side by side: a function's start asks this while a move is due.
        let folders: Vec<String> = candidate.journals().iter().map(|journal| board_objects(keys.prefix(), journal)).collect();
        let held_any = futures::future::try_join_all(folders.iter().map(|folder| witness.holds_any(folder))).await?;
        if !held_any.contains(&true) {
            return Ok(candidate);
        }
    }
    Err(RestoreError::Invalid(format!(
        "board {:?}: every generation of its {} shards from {first} holds another time's journal: delete them",
        board.name, board.shards
    )))
}

/// Refuses a move of a board whose journal begins with a line written before effects were
/// recorded (2026-11-26): a move applies lines by their effects, and would stop at that line
/// with the board fenced. Lines are in release order, so the oldest of each journal (its first
/// object's first line, or its stream's first entry) tells.
pub(super) async fn movable<O: Objects>(conn: &mut Connection, objects: &O, keys: &Keys, layout: &Layout) -> Result<(), RestoreError> {
    for (shard, journal) in layout.all().iter().zip(layout.journals()) {
        let oldest = match journal_objects(objects, keys.prefix(), &journal).await?.first() {
            Some(first) => {
                let text = read_text(objects, first).await.map_err(|e| RestoreError::Unreadable(first.clone(), e.to_string()))?;
                parse_lines(first, &text).next().and_then(Result::ok)
            }
            None => crate::redis::journal::oldest(conn, shard, &journal, 1).await?.into_iter().next(),
        };
        if let Some(line) = oldest.filter(|line| line.effects.is_none()) {
            return Err(RestoreError::Invalid(format!(
                "board {:?}: its journal {journal} begins with a line written before 2026-11-26 ({}), whose effects were not \
                 recorded: a move cannot apply it; the board goes on as it is",
                layout.board(),
                line.id
            )));
        }
    }
    Ok(())
}
