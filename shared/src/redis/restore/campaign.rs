//! A restore's campaign (docs/journal.md#restore): the invocations that take a restore to
//! `complete`, each going on from the last. A journal completed earlier in the campaign is not
//! read again while its board still takes writes (born, no fence, no loss found): each
//! invocation's time goes to the journals still to do, so a restore longer than one invocation
//! finishes. It ends when an invocation completes everything (the next restore reads every
//! journal again), or five minutes after its last invocation stopped.

use std::collections::HashSet;

use crate::domain::guard;
use crate::redis::error::StoreError;
use crate::redis::keys::{BoardKeys, Keys};
use crate::redis::store::Connection;

/// A campaign left this long after its last invocation stopped (or its last journal completed)
/// is over: longer than the pause between a caller's invocations, short enough that a loss no
/// write has seen yet is not skipped by a restore meant as a new one.
const CAMPAIGN_MS: u64 = 5 * 60 * 1000;

pub struct Campaign {
    key: String,
    done: HashSet<String>,
}

impl Campaign {
    /// The campaign of restores of `scope`, kept another `CAMPAIGN_MS`.
    pub async fn load(conn: &mut Connection, keys: &Keys, scope: &str) -> Result<Self, StoreError> {
        let key = keys.restore_campaign(scope);
        let (done, _): (Vec<String>, ()) = redis::pipe().hkeys(&key).pexpire(&key, CAMPAIGN_MS as i64).query_async(conn).await?;
        Ok(Self { key, done: done.into_iter().collect() })
    }

    /// Whether journal `name` (its keys `keys`; `guarded`: a board's, not profiles') was completed
    /// earlier in the campaign and its board has taken writes since without a loss being found.
    pub async fn done(&self, conn: &mut Connection, keys: &BoardKeys, name: &str, guarded: bool) -> Result<bool, StoreError> {
        if !self.done.contains(name) {
            return Ok(false);
        }
        if !guarded {
            return Ok(true);
        }
        let (born, fence, lost): (Option<String>, Option<String>, Option<String>) =
            redis::cmd("HMGET").arg(keys.guard()).arg(guard::BORN).arg(guard::FENCE).arg(guard::LOST).query_async(conn).await?;
        Ok(born.is_some() && fence.is_none() && lost.is_none())
    }

    /// Journal `name` completed.
    pub async fn completed(&mut self, conn: &mut Connection, name: &str) -> Result<(), StoreError> {
        let () = redis::pipe().hset(&self.key, name, 1).pexpire(&self.key, CAMPAIGN_MS as i64).query_async(conn).await?;
        self.done.insert(name.to_owned());
        Ok(())
    }

    /// An invocation stopped with journals left: the campaign kept another `CAMPAIGN_MS`.
    pub async fn keep(&self, conn: &mut Connection) -> Result<(), StoreError> {
        let () = redis::cmd("PEXPIRE").arg(&self.key).arg(CAMPAIGN_MS).query_async(conn).await?;
        Ok(())
    }

    /// Everything completed in one invocation: the next restore is a campaign of its own.
    pub async fn end(self, conn: &mut Connection) -> Result<(), StoreError> {
        let () = redis::cmd("DEL").arg(&self.key).query_async(conn).await?;
        Ok(())
    }
}
