//! The keys of a write script's call, each named once: the packed blocks of `apply_event`,
//! `submit_score` and the league's keys refer to them by index.

use std::collections::HashMap;

use crate::redis::store::ScriptCall;

/// The script's keys, each once: `KEYS[1]` the guard, the others named by index in ARGV.
pub(super) struct KeyList(HashMap<String, usize>);

impl KeyList {
    pub(super) fn new(call: &mut ScriptCall<'_>, guard: String) -> Self {
        call.key(&guard);
        Self(HashMap::from([(guard, 1)]))
    }

    /// The 1-based index of `key` in the call's keys, added if new.
    pub(super) fn add(&mut self, call: &mut ScriptCall<'_>, key: String) -> usize {
        let next = self.0.len() + 1;
        *self.0.entry(key).or_insert_with_key(|key| {
            call.key(key);
            next
        })
    }
}
