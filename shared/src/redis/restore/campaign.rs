//! A restore's campaign (docs/journal.md#restore): the invocations that take one restore to
//! `complete`, each passing on the token the one before answered. A journal completed earlier
//! in the campaign is not read again while its board still takes writes (born, no fence, no
//! loss found): each invocation's time goes to the journals still to do, so a restore longer
//! than one invocation finishes. A restore asked without a token is a campaign of its own, which
//! reads every journal: nothing completed by an abandoned one is taken for restored.

use std::collections::HashSet;

use crate::redis::error::StoreError;
use crate::redis::keys::Keys;
use crate::redis::store::Connection;

/// A campaign's records are kept this long after its last journal completed or its last
/// invocation began: a token older than that starts over.
const CAMPAIGN_MS: u64 = 60 * 60 * 1000;
/// A token's hex digits.
const TOKEN_DIGITS: usize = 16;

pub struct Campaign {
    keys: Keys,
    token: String,
    /// The journals it completed (hash: journal -> 1, in the catalog's slot): which marks to
    /// remove at its end. Each journal's own mark (`BoardKeys::restore_done`, in its slot) says
    /// it is done.
    key: String,
    done: HashSet<String>,
}

impl Campaign {
    /// The campaign of restores of `scope` (`*`, or the board or journal asked for) that `token`
    /// names (a new one when `None`, or when its records have gone). A token that is not of the
    /// shape this module makes is refused (`None`): no other string reaches a key's name.
    pub async fn load(conn: &mut Connection, keys: &Keys, scope: &str, token: Option<&str>) -> Result<Option<Self>, StoreError> {
        let Some(token) = token else {
            let token = format!("{:0width$x}", fastrand::u64(..), width = TOKEN_DIGITS);
            let key = keys.restore_campaign(scope, &token);
            return Ok(Some(Self { keys: keys.clone(), token, key, done: HashSet::new() }));
        };
        if token.len() != TOKEN_DIGITS || !token.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
            return Ok(None);
        }
        let key = keys.restore_campaign(scope, token);
        let (done, _): (Vec<String>, ()) = redis::pipe().hkeys(&key).pexpire(&key, CAMPAIGN_MS as i64).query_async(conn).await?;
        // Its marks kept as long as its record: a campaign longer than their life would read its
        // first journals again.
        for name in &done {
            let () = redis::cmd("PEXPIRE").arg(keys.board(name).restore_done()).arg(CAMPAIGN_MS).query_async(conn).await?;
        }
        Ok(Some(Self { keys: keys.clone(), token: token.to_owned(), key, done: done.into_iter().collect() }))
    }

    /// What the next invocation passes on to go on with this campaign.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// Whether journal `name` (`guarded`: a board's, not profiles') was completed earlier in the
    /// campaign, its mark is still there (its slot not lost since) and its board has taken
    /// writes since without a loss being found (`super::serving`).
    pub async fn done(&self, conn: &mut Connection, name: &str, guarded: bool) -> Result<bool, StoreError> {
        if !self.done.contains(name) {
            return Ok(false);
        }
        let keys = self.keys.board(name);
        let mark: Option<String> = redis::cmd("GET").arg(keys.restore_done()).query_async(conn).await?;
        if mark.as_deref() != Some(self.token.as_str()) {
            return Ok(false);
        }
        Ok(!guarded || super::serving(conn, &keys).await?)
    }

    /// Journal `name` completed: its mark, then the campaign's record of it.
    pub async fn completed(&mut self, conn: &mut Connection, name: &str) -> Result<(), StoreError> {
        let () = redis::cmd("SET")
            .arg(self.keys.board(name).restore_done())
            .arg(&self.token)
            .arg("PX")
            .arg(CAMPAIGN_MS)
            .query_async(conn)
            .await?;
        let () = redis::pipe().hset(&self.key, name, 1).pexpire(&self.key, CAMPAIGN_MS as i64).query_async(conn).await?;
        self.done.insert(name.to_owned());
        Ok(())
    }

    /// Everything completed: the marks, then the record, go (the next restore reads every
    /// journal again).
    pub async fn end(self, conn: &mut Connection) -> Result<(), StoreError> {
        for name in &self.done {
            let () = redis::cmd("DEL").arg(self.keys.board(name).restore_done()).query_async(conn).await?;
        }
        let () = redis::cmd("DEL").arg(&self.key).query_async(conn).await?;
        Ok(())
    }
}
