//! A move that re-encodes a board's scores (docs/boards.md#changing-max_score): each line moved
//! to the new layout carries its effects with every composite at the new `max_score`, so the
//! new layout's journal restores the board as it now is, and a frozen season or a compared set
//! is read through the same map (`domain::rescale`).

use std::borrow::Cow;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use crate::domain::config::{Board, Config};
use crate::domain::guard;
use crate::domain::journal::{Command, Effects};
use crate::domain::period::{Period, PeriodKind};
use crate::domain::rescale::Rescale;
use crate::domain::scores::{self, MAX_SCORE};
use crate::redis::keys::{BoardKeys, Holds, Keys};
use crate::redis::layout;
use crate::redis::store::Connection;

use super::error::RestoreError;

/// Why a move cannot re-encode `board`, if it cannot: a league's cohort order and a notifying
/// board's rank moves hold composites (and undelivered moves) a move does not carry yet.
pub(super) fn refusal(board: &Board) -> Option<String> {
    let feature = if board.league.is_some() {
        "runs a league (its cohorts' order holds composites)"
    } else if board.notify.is_some() {
        "sends rank-change notifications (its undelivered moves hold composites)"
    } else {
        return None;
    };
    Some(format!(
        "board {:?} {feature}: a move does not re-encode it for another max_score; configure the max_score its scores are in \
         (its scale record, or 1073741823 when it has none)",
        board.name
    ))
}

/// `board` as its scores are held (`scores::held_at`: at the `max_score` of its scale record
/// until a move re-encodes them, whatever this deploy's says): what a replay compared with the
/// live board decodes the live board at (a verify, a dry-run's `before`).
pub(super) async fn held_board<'a>(
    conn: &mut Connection,
    keys: &Keys,
    board: &'a Board,
    now: DateTime<Utc>,
) -> Result<Cow<'a, Board>, RestoreError> {
    Ok(scores::held_at(board, layout::held_scale(conn, keys, board, now).await?))
}

/// `held_board`, and `config` with it: what a verify replays the journal under.
pub(super) async fn held_config(
    conn: &mut Connection,
    keys: &Keys,
    config: &Arc<Config>,
    board: &Board,
    now: DateTime<Utc>,
) -> Result<(Arc<Config>, Board), RestoreError> {
    Ok(match held_board(conn, keys, board, now).await? {
        Cow::Owned(at) => (Arc::new(config.with_board(at.clone())), at),
        Cow::Borrowed(board) => (config.clone(), board.clone()),
    })
}

/// The period a composite-holding key names.
pub(super) fn period(board: &Board, kind: &str, id: &str) -> Result<Period, String> {
    let kind = board.period_kind(kind).or_else(|| PeriodKind::parse(kind)).ok_or_else(|| format!("unknown period kind {kind:?}"))?;
    Period::named(kind, id, board.timezone).map_err(|e| format!("period {id:?}: {e}"))
}

/// `effects` with every composite re-encoded (`Rescale::written`, the line's times `reached`);
/// a command on a composite key the move cannot re-encode refuses the line (the move stops
/// before it, nothing of it applied).
pub(super) fn effects(rescale: &Rescale, board: &Board, effects: &Effects, reached: &[DateTime<Utc>]) -> Result<Effects, String> {
    let mut commands = Vec::with_capacity(effects.commands.len());
    for command in &effects.commands {
        let Some((holds, kind, id)) = BoardKeys::composites_in(&command.key) else {
            commands.push(command.clone());
            continue;
        };
        let written = |period: &Period, arg: &[u8]| {
            let map = |composite| rescale.written(period, composite, reached);
            rescale.argument(&String::from_utf8_lossy(arg), map).map(String::into_bytes).map_err(|e| e.to_string())
        };
        let args = match (holds, command.name.as_str()) {
            (_, "DEL" | "UNLINK" | "ZREM" | "HDEL") => command.args.clone(),
            // A league's order on a board that runs none now (one that does is refused): keys
            // of past periods, which nothing reads and which expire.
            (Holds::CohortOrder, _) if board.league.is_none() => command.args.clone(),
            (Holds::Scores, "ZADD") => {
                let period = period(board, kind, id)?;
                let flags = command.args.iter().take_while(|arg| matches!(arg.as_slice(), b"NX" | b"XX" | b"GT" | b"LT" | b"CH")).count();
                let mut args = command.args.clone();
                for score in args[flags..].iter_mut().step_by(2) {
                    *score = written(&period, score)?;
                }
                args
            }
            (Holds::Arrivals, "HSET") => {
                let period = period(board, kind, id)?;
                let mut args = command.args.clone();
                for pair in args.chunks_mut(2) {
                    if let [field, value] = pair
                        && field.as_slice() != b"#"
                    {
                        *value = written(&period, value)?;
                    }
                }
                args
            }
            (Holds::Arrivals, "HINCRBY") => command.args.clone(),
            (_, name) => return Err(format!("{name} on {} cannot be re-encoded for another max_score", command.key)),
        };
        commands.push(Command { name: command.name.clone(), key: command.key.clone(), args });
    }
    Ok(Effects { commands, expiries: effects.expiries.clone() })
}

/// A moved line's entry and effects at the new scale: the entry says the `max_score` its
/// composites are in (none at the default, as a line of a board at the default).
pub(super) fn line(
    rescale: &Rescale,
    board: &Board,
    id: &str,
    entry: &mut Map<String, Value>,
    recorded: &Effects,
) -> Result<(Effects, String), RestoreError> {
    // A submission's score is reached when it happened (its clock) or when its client said;
    // another write (a correction, a take-back) keeps the time its member had, which the old
    // composite holds only to its step.
    let submitted = entry.get("kind").and_then(Value::as_str) == Some("score");
    let reached: Vec<DateTime<Utc>> =
        ["at", "occurred_at"].iter().filter(|_| submitted).filter_map(|field| entry.get(*field)?.as_str()?.parse().ok()).collect();
    let moved = effects(rescale, board, recorded, &reached).map_err(|e| RestoreError::Invalid(format!("line {id}: {e}")))?;
    if entry.contains_key("max_score") || entry.get("kind").and_then(Value::as_str) == Some("score") {
        entry.remove("max_score");
        if rescale.to_max() != MAX_SCORE {
            entry.insert("max_score".into(), rescale.to_max().into());
        }
    }
    let text = moved.to_value().to_string();
    Ok((moved, text))
}

/// What a composite of `period` held in the old layout is in the new one (the same without a
/// re-encode).
pub(super) fn composite(rescale: Option<&Rescale>, period: &Period, composite: f64) -> Result<f64, RestoreError> {
    match rescale {
        None => Ok(composite),
        Some(rescale) => rescale.composite(period, composite).map_err(|e| RestoreError::Invalid(e.to_string())),
    }
}

/// Refuses a re-encode some held score does not fit (a lower `max_score` than a score held),
/// once the board is fenced and before anything moves: the highest and the lowest composite (a
/// score is monotonic in its composite) of every period set the guards record, live (`kept|`,
/// and the current periods) or frozen (`closed|`). Bounded by the guards, not the node's keys.
pub(super) async fn fits(conn: &mut Connection, board: &Board, rescale: &Rescale, sources: &[BoardKeys]) -> Result<(), RestoreError> {
    let now = Utc::now();
    for source in sources {
        let mut sets: Vec<(String, Period)> =
            board.periods.iter().map(|kind| Period::containing(*kind, now, board.timezone)).map(|p| (source.period(&p), p)).collect();
        let mut cursor = 0u64;
        loop {
            let (next, pairs): (u64, Vec<String>) =
                redis::cmd("HSCAN").arg(source.guard()).arg(cursor).arg("COUNT").arg(1000).query_async(conn).await?;
            for field in pairs.iter().step_by(2) {
                let (frozen, named) = match (field.strip_prefix(guard::KEPT), guard::closed_period(field)) {
                    (Some(named), _) => (false, named.split_once(':')),
                    (None, named) => (true, named),
                };
                let Some((kind, id)) = named else { continue };
                let period = period(board, kind, id).map_err(RestoreError::Invalid)?;
                sets.push((if frozen { source.frozen(&period) } else { source.period(&period) }, period));
            }
            if next == 0 {
                break;
            }
            cursor = next;
        }
        for (key, period) in sets {
            let ends: [Vec<(String, f64)>; 2] = redis::pipe()
                .cmd("ZRANGE")
                .arg(&key)
                .arg(0)
                .arg(0)
                .arg("WITHSCORES")
                .cmd("ZRANGE")
                .arg(&key)
                .arg(-1)
                .arg(-1)
                .arg("WITHSCORES")
                .query_async(conn)
                .await?;
            for (_, held) in ends.iter().flatten() {
                composite(Some(rescale), &period, *held)?;
            }
        }
    }
    Ok(())
}

/// `fits` in a move's last step, the board fenced: a score above the new `max_score` written
/// while the lines moved (by a function still on a configuration that allowed it) refuses the
/// move with the fence lifted, the board going on as it is; the lines moved stay for the move
/// run again once that score is corrected.
pub(super) async fn fits_fenced(
    conn: &mut Connection,
    board: &Board,
    rescale: &Rescale,
    sources: &[BoardKeys],
) -> Result<(), RestoreError> {
    let Err(refused) = fits(conn, board, rescale, sources).await else { return Ok(()) };
    for source in sources {
        crate::redis::restore::lift_fence(conn, source, guard::MOVING).await?;
    }
    Err(refused)
}
