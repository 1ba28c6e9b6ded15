//! Display data lives beside the boards, never in them (seed 004: members are stable ids;
//! a nickname change must not create a second member).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::keys::Keys;
use crate::store::{Store, StoreError};

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
        if let Some(url) = &self.avatar_url {
            if !(url.starts_with("https://") || url.starts_with("http://")) {
                return Err(ProfileError { field: "avatar_url", problem: "must be an http(s) URL" });
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
pub async fn put_profile(store: &Store, keys: &Keys, user_id: &str, profile: &Profile) -> Result<(), StoreError> {
    let key = keys.profile(user_id);
    let fields = profile.fields();
    let mut pipe = redis::pipe();
    pipe.atomic().del(&key).ignore();
    if !fields.is_empty() {
        pipe.hset_multiple(&key, &fields).ignore();
    }
    let mut conn = store.connection().await?;
    let () = pipe.query_async(&mut conn).await?;
    Ok(())
}

pub async fn get_profile(store: &Store, keys: &Keys, user_id: &str) -> Result<Option<Profile>, StoreError> {
    Ok(get_many(store, keys, &[user_id]).await?.pop().flatten())
}

/// Profiles of many users in one pipelined round trip (split per node on a cluster, where
/// the hashes live in other slots). A user without a profile gets `None`.
pub async fn get_many(store: &Store, keys: &Keys, user_ids: &[&str]) -> Result<Vec<Option<Profile>>, StoreError> {
    if user_ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut pipe = redis::pipe();
    for user_id in user_ids {
        pipe.hgetall(keys.profile(user_id));
    }
    let mut conn = store.connection().await?;
    let hashes: Vec<HashMap<String, String>> = pipe.query_async(&mut conn).await?;
    Ok(hashes.into_iter().map(Profile::from_fields).collect())
}
