//! A move's switch recorded in S3 as well as in Redis (docs/scaling.md#changing-shards): a store
//! restored from a snapshot taken before a switch records the layout the board moved from, whose
//! journal ends at the switch; the writes since are in the new layout's. S3's newest record says
//! where the data is, and the restore brings the board back there, the older layout freed.

use crate::archive::objects::{Objects, journal_objects, parse_lines, read_text, switch_name, switch_of, switches_of};
use crate::domain::journal::stream_order;
use crate::redis::error::StoreError;
use crate::redis::keys::{Keys, Layout, journal_board, journal_generation, journal_shards};
use crate::redis::layout;
use crate::redis::restore::older::{self, OlderWrites};
use crate::redis::store::{Connection, Store};

use super::error::RestoreError;

/// A switch S3 records: the layout's shards and generation, and the scale recorded with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Switch {
    /// When it was recorded (ms).
    pub at: i64,
    pub shards: u32,
    pub generation: u32,
    pub max_score: Option<i64>,
}

/// Records the switch of `target` (before Redis's record names it: a switch recorded in Redis
/// is always in S3), at Redis's clock (the one its journal's ids are in).
pub(super) async fn record<O: Objects>(
    conn: &mut Connection,
    objects: &O,
    keys: &Keys,
    target: &Layout,
    max_score: Option<i64>,
) -> Result<(), RestoreError> {
    let text = layout::text(target.shards(), target.generation());
    let at = crate::redis::restore::Clock::read(conn).await?.now_ms();
    let name = switch_name(keys.prefix(), target.board(), at, &text, max_score);
    objects.put_new(&name, Vec::new()).await?;
    Ok(())
}

/// The newest switch of `board` S3 records (`None`: none since switches were recorded).
pub(super) async fn last<O: Objects>(objects: &O, keys: &Keys, board: &str) -> Result<Option<Switch>, RestoreError> {
    let listed = objects.list(&switches_of(keys.prefix(), board)).await?;
    newest(listed.iter().map(String::as_str))
}

fn newest<'a>(names: impl Iterator<Item = &'a str>) -> Result<Option<Switch>, RestoreError> {
    let Some((at, text, max_score)) = names.filter_map(switch_of).max_by_key(|(at, ..)| *at) else { return Ok(None) };
    let (shards, generation) = layout::parse(text)?;
    Ok(Some(Switch { at, shards, generation, max_score }))
}

/// The layout `board`'s data is in as the store says (`birth::held`).
async fn held(conn: &mut Connection, keys: &Keys, board: &str) -> Result<Option<Layout>, RestoreError> {
    let held = crate::redis::restore::birth::held(conn, keys, board).await?;
    Ok(held.map(|(shards, generation)| keys.layout_at(board, shards, generation)))
}

fn same(layout: &Layout, switch: &Switch) -> bool {
    (layout.shards(), layout.generation()) == (switch.shards, switch.generation)
}

/// What the drain's check found (`fence_older`).
#[derive(Debug, Default)]
pub(super) struct Older {
    /// Boards fenced now.
    pub fenced: Vec<String>,
    /// Journals of a held layout older than its board's last switch that hold a write since it:
    /// not drained (those writes wait in the stream to be decided again where the board switched
    /// to, `restore::older_writes`).
    pub held_back: Vec<String>,
    /// Boards whose check failed (their layout or journal unread): not drained this run.
    pub unread: Vec<String>,
}

/// The drain's check, once a run (two listings of every board's switches): each board in `boards`
/// whose layout as the store holds it is not its last switch's (a store older than that switch)
/// has that layout's shards fenced as lost (503 `board_restoring`, counted in `BoardsLost`) until
/// a restore brings it back where S3 says. The stores are read before S3 is listed: a switch is
/// in S3 before Redis records it, so a switch between the two is seen in both. A listing that
/// fails is this call's error (no board can be told); a board's own failure is that board's.
async fn fence_older<O: Objects>(conn: &mut Connection, objects: &O, keys: &Keys, boards: &[&str]) -> Result<Older, RestoreError> {
    let all = format!("journal/_switches/prefix={}/", keys.prefix());
    // Only a board that ever switched can be older than its last switch: a store of many boards
    // reads the few that moved (a board's first switch after this listing is checked next run).
    let ever = objects.list(&all).await?;
    let moved: Vec<&str> =
        boards.iter().copied().filter(|board| ever.iter().any(|name| name.starts_with(&switches_of(keys.prefix(), board)))).collect();
    let mut older = Older::default();
    let mut layouts = Vec::new();
    for board in moved {
        match held(conn, keys, board).await {
            Ok(held) => layouts.push((board, held)),
            Err(error) => {
                tracing::warn!(board, error = %error, "the board's layout unread: not drained this run");
                older.unread.push(board.to_owned());
            }
        }
    }
    let listed = objects.list(&all).await?;
    for (board, held) in layouts {
        let folder = switches_of(keys.prefix(), board);
        let switch = newest(listed.iter().filter(|name| name.starts_with(&folder)).map(String::as_str));
        let checked = match (switch, held) {
            (Ok(Some(switch)), Some(held)) if !same(&held, &switch) => fence_held(conn, (objects, keys), held, switch.at).await,
            (Err(error), _) => Err(error),
            _ => continue,
        };
        match checked {
            Ok((fenced, journals, kept)) => {
                if fenced {
                    older.fenced.push(board.to_owned());
                }
                older.held_back.extend(journals);
                if let Err(error) = kept {
                    tracing::warn!(board, error = %error, "the older store's writes not kept in S3: not drained this run");
                    older.unread.push(board.to_owned());
                }
            }
            Err(error) => {
                tracing::warn!(board, error = %error, "the board's check against its last switch failed: not drained this run");
                older.unread.push(board.to_owned());
            }
        }
    }
    Ok(older)
}

/// `fence_older` for a drain run, each board fenced now logged; `None` when it could not tell.
pub(super) async fn fence_older_run<O: Objects>(store: &Store, objects: &O, keys: &Keys, boards: &[&str]) -> Option<Older> {
    let mut conn = store.write_connection().await.ok()?;
    match fence_older(&mut conn, objects, keys, boards).await {
        Ok(older) => {
            for board in &older.fenced {
                tracing::error!(board, "the board's Redis is older than its last move: fenced until restored");
            }
            Some(older)
        }
        Err(error) => {
            tracing::warn!(error = %error, "the boards' last moves unread: no board is drained this run");
            None
        }
    }
}

/// Fences `held` (older than the switch at `at_ms`), then names its journals holding a write
/// since the switch: read after the fence, so none takes one unseen in between, and kept in S3
/// (`older_kept`: until decided, they are in no object). A move's own switch (S3 first, then
/// Redis) leaves the old layout's, all from before it, to drain as any other. Whether it was
/// fenced now, those journals, and whether they were kept.
async fn fence_held<O: Objects>(
    conn: &mut Connection,
    (objects, keys): (&O, &Keys),
    held: Layout,
    at_ms: i64,
) -> Result<(bool, Vec<String>, Result<(), RestoreError>), RestoreError> {
    let fenced = crate::redis::restore::birth::fence_older(conn, &held).await?;
    let mut journals = Vec::new();
    for (shard, journal) in held.all().iter().zip(held.journals()) {
        let newest = crate::redis::journal::newest_id(conn, shard).await?;
        if newest.as_deref().and_then(stream_order).is_some_and(|(ms, _)| ms as i64 > at_ms) {
            journals.push(journal);
        }
    }
    let kept = Box::pin(super::older_kept::keep(conn, objects, keys, &OlderWrites { layout: held, at_ms }, &journals)).await;
    Ok((fenced, journals, kept.map_err(RestoreError::from)))
}

/// Before a restore brings back journal `name` of a sharded layout (or a later generation, or
/// the one slot a switch took the board back to): its layout recorded, so a function configured otherwise refuses the board's writes instead of
/// recording its own over the data coming back. Unless one is recorded; over a record of another
/// layout only when S3's newest switch names this one (a store older than that switch,
/// `generations::configured`): that layout's keys are freed first, then the switch's layout and
/// scale recorded.
pub(super) async fn record_restored<O: Objects>(conn: &mut Connection, objects: &O, keys: &Keys, name: &str) -> Result<(), RestoreError> {
    let (board, shards, generation) = (journal_board(name), journal_shards(name), journal_generation(name));
    let recorded = layout::read(conn, keys, board).await?;
    // The one slot needs no record, unless the store records another layout: older than the
    // board's move back to its one slot (found by the simulation: the old layout's record stayed,
    // and reads and writes went to its fenced shards after the restore completed).
    if shards == 1 && generation == 0 && recorded.is_none() {
        return Ok(());
    }
    let restored = keys.layout_at(board, shards, generation);
    let older = match held(conn, keys, board).await? {
        Some(held) if (held.shards(), held.generation()) == (shards, generation) => return Ok(()),
        held => held,
    };
    let switch = last(objects, keys, board).await?.filter(|switch| same(&restored, switch));
    match (older, switch) {
        (Some(old), Some(switch)) => {
            // Fenced first (as the drain does), so no write lands in its streams after they are
            // read and kept.
            crate::redis::restore::birth::fence_older(conn, &old).await?;
            let kept = writes_since(conn, objects, keys, &old, switch.at).await?;
            tracing::warn!(board, held = %layout::text(old.shards(), old.generation()), switched = %layout::text(shards, generation),
                kept_journals = kept.len(), "the store is older than the board's last switch: restored in the layout it switched to");
            if !kept.is_empty() {
                let older = OlderWrites { layout: old.clone(), at_ms: switch.at };
                // In S3 first (the drain kept them if it fenced the store): from the record on,
                // the layout's other keys go.
                let journals: Vec<String> =
                    old.all().iter().zip(old.journals()).filter(|(shard, _)| kept.contains(&shard.journal())).map(|(_, j)| j).collect();
                Box::pin(super::older_kept::keep(conn, objects, keys, &older, &journals)).await?;
                if let Some(held) = older::record(conn, keys, &older).await? {
                    return Err(RestoreError::Invalid(format!(
                        "board {board:?}: the writes layout {} took before its fence are still to be decided again; layout {} holds more",
                        layout::text(held.layout.shards(), held.layout.generation()),
                        layout::text(old.shards(), old.generation())
                    )));
                }
            }
            free(conn, keys, &old, &kept).await?;
            layout::record(conn, keys, board, (shards, generation), switch.max_score).await?;
        }
        _ if recorded.is_none() => layout::record_if_absent(conn, keys, board, shards, generation).await?,
        _ => {}
    }
    Ok(())
}

/// The journals of `old` whose streams hold a line written after the switch at `at_ms`: writes the
/// older store took before the drain fenced it, acknowledged, kept to be decided again in the
/// layout switched to (`restore::older_writes`). Refuses when S3 holds such a line (a drain
/// stored them as the older layout's history): not decided again from there.
async fn writes_since<O: Objects>(
    conn: &mut Connection,
    objects: &O,
    keys: &Keys,
    old: &Layout,
    at_ms: i64,
) -> Result<Vec<String>, RestoreError> {
    let after = |id: &str| stream_order(id).is_some_and(|(ms, _)| ms as i64 > at_ms);
    let mut kept = Vec::new();
    for (shard, journal) in old.all().iter().zip(old.journals()) {
        if crate::redis::journal::newest_id(conn, shard).await?.is_some_and(|id| after(&id)) {
            kept.push(shard.journal());
        }
        if let Some(last) = journal_objects(objects, keys.prefix(), &journal).await?.last() {
            let text = read_text(objects, last).await.map_err(|e| RestoreError::Unreadable(last.clone(), e.to_string()))?;
            if let Some(id) = parse_lines(last, &text).filter_map(Result::ok).last().map(|line| line.id).filter(|id| after(id)) {
                return Err(RestoreError::Invalid(format!(
                    "board {:?}: the store was older than its switch to another layout and its writes before the fence were \
                     stored in S3 ({journal} holds {id}): not decided again from there; left as it is",
                    old.board()
                )));
            }
        }
    }
    Ok(kept)
}

/// Frees `layout`'s keys, its guards first, all sent together (one slot each): a container whose
/// probe of the layout predates the record finds the board's guard gone and reads the recorded
/// layout (`Reader::on_layout`). The board's records (its layout, a score board's scale) stay:
/// they are the board's, not a layout's.
/// `keep`: journals left in place (`writes_since`).
pub(super) async fn free(conn: &mut Connection, keys: &Keys, layout: &Layout, keep: &[String]) -> Result<(), RestoreError> {
    let unlinks = layout.all().into_iter().map(|shard| {
        let mut conn = conn.clone();
        async move { redis::cmd("UNLINK").arg(shard.guard()).query_async::<()>(&mut conn).await }
    });
    futures::future::try_join_all(unlinks).await.map_err(StoreError::from)?;
    let records = [keys.board_layout(layout.board()), keys.board_scale(layout.board()), keys.board_older_writes(layout.board())];
    for shard in layout.all() {
        let old: Vec<String> = conn
            .scan_slot_of(&shard.guard(), &shard.pattern_all())
            .await?
            .into_iter()
            .filter(|key| !records.contains(key) && !keep.contains(key))
            .collect();
        for chunk in old.chunks(500) {
            let _: () = redis::cmd("UNLINK").arg(chunk).query_async(conn).await.map_err(StoreError::from)?;
        }
    }
    Ok(())
}
