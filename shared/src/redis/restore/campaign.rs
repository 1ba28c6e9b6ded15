//! A restore's campaign (docs/journal.md#restore): the invocations that take one restore to
//! `complete`, each passing on the token the one before answered. A journal completed earlier
//! in the campaign is not read again while its board still takes writes (born, no fence, no
//! loss found): each invocation's time goes to the journals still to do, so a restore longer
//! than one invocation finishes. A restore asked without a token is a campaign of its own, which
//! reads every journal: nothing completed by an abandoned one is taken for restored.

use std::collections::HashSet;

use crate::domain::guard;
use crate::redis::error::StoreError;
use crate::redis::keys::{BoardKeys, Keys};
use crate::redis::store::Connection;

/// A campaign's record is kept this long after its last invocation stopped (or its last
/// journal completed): a token older than that starts over.
const CAMPAIGN_MS: u64 = 60 * 60 * 1000;
/// A token's hex digits.
const TOKEN_DIGITS: usize = 16;

pub struct Campaign {
    token: String,
    key: String,
    done: HashSet<String>,
}

impl Campaign {
    /// The campaign of restores of `scope` (`*`, or the board or journal asked for) that `token`
    /// names (a new one when `None`, or when its record has gone). A token that is not one this
    /// module made is refused (`None`): it never reaches a key's name.
    pub async fn load(conn: &mut Connection, keys: &Keys, scope: &str, token: Option<&str>) -> Result<Option<Self>, StoreError> {
        let Some(token) = token else {
            let token = format!("{:0width$x}", fastrand::u64(..), width = TOKEN_DIGITS);
            let key = keys.restore_campaign(scope, &token);
            return Ok(Some(Self { token, key, done: HashSet::new() }));
        };
        if token.len() != TOKEN_DIGITS || !token.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
            return Ok(None);
        }
        let key = keys.restore_campaign(scope, token);
        let (done, _): (Vec<String>, ()) = redis::pipe().hkeys(&key).pexpire(&key, CAMPAIGN_MS as i64).query_async(conn).await?;
        Ok(Some(Self { token: token.to_owned(), key, done: done.into_iter().collect() }))
    }

    /// What the next invocation passes on to go on with this campaign.
    pub fn token(&self) -> &str {
        &self.token
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

    /// Everything completed in one invocation: the record goes.
    pub async fn end(self, conn: &mut Connection) -> Result<(), StoreError> {
        let () = redis::cmd("DEL").arg(&self.key).query_async(conn).await?;
        Ok(())
    }
}
