//! Display data lives beside the boards, never in them (members are stable ids;
//! a nickname change must not create a second member).

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use redis::AsyncCommands;
use serde::{Deserialize, Serialize};

use crate::domain::journal::{Entry, Stamp};
use crate::redis::batch::{self, Group};
use crate::redis::error::StoreError;
use crate::redis::keys::Keys;
use crate::redis::scripts::{self, profile::Put};
use crate::redis::store::Store;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nickname: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avatar_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct ProfileError {
    pub field: &'static str,
    pub problem: &'static str,
}

impl Profile {
    pub fn validate(&self) -> Result<(), ProfileError> {
        let text = |field, value: &Option<String>, max: usize| match value {
            Some(v) if v.chars().count() > max => Err(ProfileError { field, problem: "too long" }),
            Some(v) if v.chars().any(char::is_control) => Err(ProfileError { field, problem: "contains control characters" }),
            _ => Ok(()),
        };
        text("nickname", &self.nickname, 64)?;
        text("title", &self.title, 64)?;
        text("avatar_url", &self.avatar_url, 512)?;
        if let Some(text) = &self.avatar_url {
            // Parsed for real, as the OpenAPI document's `format: uri` promises: an absolute
            // http(s) URL with a host, stored exactly as its parse writes it back.
            let parsed = url::Url::parse(text)
                .ok()
                .filter(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some_and(|h| !h.is_empty()));
            if parsed.is_none_or(|u| u.as_str() != text) {
                return Err(ProfileError { field: "avatar_url", problem: "must be an absolute http(s) URL, ASCII (percent-encoded)" });
            }
        }
        Ok(())
    }

    fn from_fields(mut fields: HashMap<String, String>) -> Option<Self> {
        (!fields.is_empty()).then(|| Self {
            nickname: fields.remove("nickname"),
            avatar_url: fields.remove("avatar_url"),
            title: fields.remove("title"),
        })
    }

    pub(crate) fn fields(&self) -> Vec<(&'static str, &str)> {
        [("nickname", &self.nickname), ("avatar_url", &self.avatar_url), ("title", &self.title)]
            .into_iter()
            .filter_map(|(name, value)| value.as_deref().map(|v| (name, v)))
            .collect()
    }
}

/// Replaces `user_id`'s profile and journals the change, in one call (docs/journal.md#profiles).
pub async fn put_profile(store: &Store, keys: &Keys, user_id: &str, profile: &Profile, now: DateTime<Utc>) -> Result<(), StoreError> {
    let entry = if keys.journal_on() {
        let profile_json = serde_json::to_value(profile).expect("a profile always serializes");
        Entry::Profile { at: Stamp(now), user_id, profile: profile_json }.json()
    } else {
        String::new()
    };
    let mut conn = store.write_connection().await?;
    scripts::profile::put(&mut conn, keys, user_id, Put::Replace, &entry, &profile.fields()).await?;
    // A profile of the layout before shards, not moved yet, goes: a read would find it where
    // this change cleared the profile.
    let () = conn.del(keys.legacy_profile(user_id)).await?;
    Ok(())
}

/// Moves profiles of the layout before shards (a slot per user) into their shards, each move
/// journaled (docs/journal.md#profiles): a profile changed since stays as changed. A page of
/// SCAN at a time on each primary, until `deadline`, the cursors kept between runs
/// (`Keys::profiles_move_cursor`); true once every primary was scanned to its end (then
/// `profiles_moved` is set and reads stop looking for them). Run by every drain until done.
pub async fn move_legacy(store: &Store, keys: &Keys, now: DateTime<Utc>, deadline: DateTime<Utc>) -> Result<bool, StoreError> {
    let mut conn = store.write_connection().await?;
    let moved: bool = conn.exists(keys.profiles_moved()).await?;
    if moved {
        return Ok(true);
    }
    // `<prefix>:v1:{u:<user>}:profile`: the user is what stands between these two parts.
    let empty = keys.legacy_profile("");
    let Some((head, tail)) = empty.split_once('}') else { return Ok(false) };
    let tail = format!("}}{tail}");
    let pattern = keys.legacy_profile("*");
    let cursors_key = keys.profiles_move_cursor();
    let mut cursors: HashMap<String, String> = conn.hgetall(&cursors_key).await?;
    for node in conn.primaries().await? {
        let name = node.as_ref().map_or_else(|| "standalone".to_owned(), |(host, port)| format!("{host}:{port}"));
        loop {
            let mut cursor: u64 = match cursors.get(&name).map(String::as_str) {
                Some("done") => break,
                Some(at) => at.parse().unwrap_or(0),
                None => 0,
            };
            if Utc::now() >= deadline {
                return Ok(false);
            }
            let (next, found) = conn.scan_page(&node, cursor, &pattern).await?;
            for legacy in found {
                let Some(user_id) = legacy.strip_prefix(head).and_then(|rest| rest.strip_suffix(tail.as_str())) else { continue };
                if crate::domain::ids::validate_id("user_id", user_id).is_err() {
                    continue;
                }
                let fields: HashMap<String, String> = conn.hgetall(&legacy).await?;
                if let Some(profile) = Profile::from_fields(fields) {
                    let entry = if keys.journal_on() {
                        let profile_json = serde_json::to_value(&profile).expect("a profile always serializes");
                        Entry::Profile { at: Stamp(now), user_id, profile: profile_json }.json()
                    } else {
                        String::new()
                    };
                    scripts::profile::put(&mut conn, keys, user_id, Put::Move, &entry, &profile.fields()).await?;
                }
                let () = conn.del(&legacy).await?;
            }
            cursor = next;
            let at = if cursor == 0 { "done".to_owned() } else { cursor.to_string() };
            let () = conn.hset(&cursors_key, &name, &at).await?;
            cursors.insert(name.clone(), at);
        }
    }
    let () = conn.set(keys.profiles_moved(), 1).await?;
    let () = conn.del(&cursors_key).await?;
    Ok(true)
}

pub async fn get_profile(store: &Store, keys: &Keys, user_id: &str) -> Result<Option<Profile>, StoreError> {
    Ok(get_many(store, keys, &[user_id]).await?.pop().flatten())
}

/// The profiles of `user_ids`, in their order: one pipeline per profile shard's slot (per
/// node), all at once. Until the drain has moved every profile of the layout before shards
/// (`Keys::profiles_moved`, read in the same round), users without a profile in their shard
/// are looked up there in a second round.
pub async fn get_many(store: &Store, keys: &Keys, user_ids: &[&str]) -> Result<Vec<Option<Profile>>, StoreError> {
    let profile_keys: Vec<String> = user_ids.iter().map(|user_id| keys.profile(user_id)).collect();
    let (mut profiles, moved) = read_profiles(store, &profile_keys, Some(keys.profiles_moved())).await?;
    if !moved {
        let missing: Vec<usize> = (0..user_ids.len()).filter(|&i| profiles[i].is_none()).collect();
        if !missing.is_empty() {
            let legacy: Vec<String> = missing.iter().map(|&i| keys.legacy_profile(user_ids[i])).collect();
            let (found, _) = read_profiles(store, &legacy, None).await?;
            for (index, profile) in missing.into_iter().zip(found) {
                profiles[index] = profile;
            }
        }
    }
    Ok(profiles)
}

/// `HGETALL` of each key, one pipeline a node, the nodes at once (`batch::read`); with `flag`,
/// whether it exists, in the same round.
async fn read_profiles(store: &Store, profile_keys: &[String], flag: Option<String>) -> Result<(Vec<Option<Profile>>, bool), StoreError> {
    let mut groups: Vec<Group> =
        profile_keys.iter().map(|key| Group { key: key.clone(), commands: vec![redis::cmd("HGETALL").arg(key).clone()] }).collect();
    if let Some(flag) = &flag {
        groups.push(Group { key: flag.clone(), commands: vec![redis::cmd("EXISTS").arg(flag).clone()] });
    }
    let mut replies = batch::read(store, &groups).await?.into_iter().map(|mut values| values.pop().unwrap_or(redis::Value::Nil));
    let protocol = |e: redis::ParsingError| StoreError::Protocol(format!("profiles: {e}"));
    let mut profiles = Vec::with_capacity(profile_keys.len());
    for value in replies.by_ref().take(profile_keys.len()) {
        profiles.push(Profile::from_fields(redis::from_redis_value::<HashMap<String, String>>(value).map_err(protocol)?));
    }
    let flagged = match replies.next() {
        Some(value) => redis::from_redis_value::<bool>(value).map_err(protocol)?,
        None => false,
    };
    Ok((profiles, flagged))
}
