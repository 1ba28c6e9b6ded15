//! Display data lives beside the boards, never in them (members are stable ids;
//! a nickname change must not create a second member).

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use futures::future::try_join_all;
use redis::cluster_routing::Slot;
use serde::{Deserialize, Serialize};

use crate::domain::journal::{Entry, Stamp};
use crate::redis::error::StoreError;
use crate::redis::journal;
use crate::redis::keys::Keys;
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

    fn fields(&self) -> Vec<(&'static str, &str)> {
        [("nickname", &self.nickname), ("avatar_url", &self.avatar_url), ("title", &self.title)]
            .into_iter()
            .filter_map(|(name, value)| value.as_deref().map(|v| (name, v)))
            .collect()
    }
}

/// Replaces a user's profile atomically (MULTI: DEL + HSET on one key).
/// Replaces the user's profile. With the journal on, the change is journaled first (profiles
/// are outside every board's slot, so not in the same call): an acknowledged change is always in
/// the journal; one that failed after its entry may still be restored (a replace: the client's
/// retry settles it).
pub async fn put_profile(store: &Store, keys: &Keys, user_id: &str, profile: &Profile, now: DateTime<Utc>) -> Result<(), StoreError> {
    if keys.journal_on() {
        let profile_json = serde_json::to_value(profile).expect("a profile always serializes");
        let entry = Entry::Profile { at: Stamp(now), user_id, profile: profile_json }.json();
        journal::append(&mut store.write_connection().await?, &keys.profiles_journal(), &entry, "").await?;
    }
    let key = keys.profile(user_id);
    let fields = profile.fields();
    let mut pipe = redis::pipe();
    pipe.atomic().del(&key).ignore();
    if !fields.is_empty() {
        pipe.hset_multiple(&key, &fields).ignore();
    }
    let mut conn = store.write_connection().await?;
    let () = pipe.query_async(&mut conn).await?;
    Ok(())
}

pub async fn get_profile(store: &Store, keys: &Keys, user_id: &str) -> Result<Option<Profile>, StoreError> {
    Ok(get_many(store, keys, &[user_id]).await?.pop().flatten())
}

/// Profiles of many users in one pipelined round trip. On a cluster each user's profile is in
/// a slot of its own and a pipeline may only address one slot, so there is one pipeline per
/// slot, all sent at once (multiplexed on the per-node connections). A user without a profile
/// gets `None`.
pub async fn get_many(store: &Store, keys: &Keys, user_ids: &[&str]) -> Result<Vec<Option<Profile>>, StoreError> {
    let profile_keys: Vec<String> = user_ids.iter().map(|user_id| keys.profile(user_id)).collect();
    let mut groups: HashMap<Option<Slot>, Vec<usize>> = HashMap::new();
    for (index, key) in profile_keys.iter().enumerate() {
        groups.entry(store.is_cluster().then(|| Slot::for_key(key))).or_default().push(index);
    }
    let conn = store.connection().await?;
    let replies = try_join_all(groups.values().map(|indices| {
        let mut pipe = redis::pipe();
        for &index in indices {
            pipe.hgetall(&profile_keys[index]);
        }
        let mut conn = conn.clone();
        async move { pipe.query_async::<Vec<HashMap<String, String>>>(&mut conn).await }
    }))
    .await?;
    let mut profiles = vec![None; user_ids.len()];
    for (indices, hashes) in groups.values().zip(replies) {
        for (&index, fields) in indices.iter().zip(hashes) {
            profiles[index] = Profile::from_fields(fields);
        }
    }
    Ok(profiles)
}
