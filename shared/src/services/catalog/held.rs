//! What a function holds of the catalog: each runtime board parsed once, shared by every
//! config built since, and parsed again only when its texts change.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{ended_at, retired_board, runtime_board};
use crate::domain::config::Board;
use crate::redis::scripts::catalog::Live;

/// One runtime board as the catalog holds it: the board served (`None`: its definition does not
/// validate, or a tombstone keeps none), ending once its end is recorded, kept across reloads
/// until the log names it again, and shared with every config built since. The texts are not
/// kept: a board the log names is parsed again.
pub(super) struct Entry {
    pub(super) served: Option<Arc<Board>>,
    /// A hash of the texts it was parsed from: a whole read parses again only what differs.
    parsed_from: u64,
}

fn fingerprint(definition: Option<&str>, ending: Option<&str>) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (definition, ending).hash(&mut hasher);
    hasher.finish()
}

impl Entry {
    pub(super) fn new(name: &str, definition: Option<&str>, ending: Option<&str>) -> Self {
        let parsed = match (definition, ending) {
            // Large prizes and metadata left out: what shows them reads them (`whole_tournament`).
            (Some(text), _) => runtime_board(name, text).map(|mut board| {
                if let Some(light) = board.tournament.as_ref().and_then(|tournament| tournament.without_details()) {
                    board.tournament = Some(Arc::new(light));
                }
                board
            }),
            (None, Some(why)) => retired_board(name, why),
            (None, None) => None,
        };
        let served = parsed.map(|mut board| {
            if let Some(why) = ending {
                board.ending = true;
                if let (Some(at), Some(tournament)) = (ended_at(why), board.tournament.as_mut()) {
                    Arc::make_mut(tournament).deleted = Some(at);
                }
            }
            Arc::new(board)
        });
        Self { served, parsed_from: fingerprint(definition, ending) }
    }
}

/// Every runtime board of the catalog as of one version, by name.
pub(super) type Held = BTreeMap<String, Arc<Entry>>;

/// The catalog's live boards read whole, as entries (tombstones left out: `Catalog::naming`),
/// sharing those of `before` read from the same texts: what did not change is neither parsed
/// again nor freed and held twice.
pub(super) fn held_of(live: Live, before: Option<&Held>) -> Held {
    live.boards
        .into_iter()
        .map(|(name, definition, why)| {
            let same = before
                .and_then(|before| before.get(&name))
                .filter(|entry| entry.parsed_from == fingerprint(Some(&definition), why.as_deref()));
            let entry = same.cloned().unwrap_or_else(|| Arc::new(Entry::new(&name, Some(&definition), why.as_deref())));
            (name, entry)
        })
        .collect()
}

/// `held` after `changed`: only the boards the log names are parsed again. A board whose
/// definition went (its end done) leaves: its tombstone is read by name (`Catalog::naming`).
pub(super) fn held_after(held: &Held, changed: Vec<(String, Option<String>, Option<String>)>) -> Held {
    let mut after = held.clone();
    for (name, definition, ending) in changed {
        match definition {
            None => after.remove(&name),
            Some(definition) => after.insert(name.clone(), Arc::new(Entry::new(&name, Some(&definition), ending.as_deref()))),
        };
    }
    after
}
