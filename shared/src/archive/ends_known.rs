//! What a warm archive function knows of its tournaments' watermarks
//! (docs/tournaments.md#the-end).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};

/// Each tournament's watermark as this function last read or moved it (`None`: none yet),
/// shared by the archive jobs it builds as its catalog changes: a run reads the table's only for
/// a tournament with an instance ended after it, so one whose last instance ended years ago (or
/// whose first has not) costs no read a minute once a warm function has read it.
#[derive(Clone, Default)]
pub struct EndsKnown(Arc<Mutex<HashMap<String, Option<DateTime<Utc>>>>>);

impl EndsKnown {
    pub(super) fn get(&self, tournament: &str) -> Option<Option<DateTime<Utc>>> {
        self.0.lock().expect("ends known poisoned").get(tournament).copied()
    }

    pub(super) fn set(&self, tournament: &str, through: Option<DateTime<Utc>>) {
        self.0.lock().expect("ends known poisoned").insert(tournament.to_owned(), through);
    }
}
