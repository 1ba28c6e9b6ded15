//! A faithful port of seed 001's `UserActivityRankServiceImpl.addActivityScore` (the
//! customer's Java design, `shared/seeds/001_*.txt`): the baseline the real write path is
//! compared with. Call for call, in the seed's order, each Redis command its own round trip:
//! HGET, HSET, EXPIRE, ZINCRBY ×2, and on a user's first points of the day TTL ×2 with an
//! EXPIRE for each key that has none yet.
//!
//! Only the branch that adds points is ported: the benchmarks only send new activity (the
//! take-back branch, HDEL + ZINCRBY ×2, is never taken). The seed's key helpers are not shown
//! in the post; `todayRankKey()`/`monthRankKey()` are taken as `activity_rank_<yyyyMMdd>` /
//! `activity_rank_<yyyyMM>`, beside its `activity_rank_<userId><yyyyMMdd>` ledger.

use chrono::{DateTime, Utc};
use chrono_tz::Asia::Shanghai;
use redis::AsyncCommands;
use standings::redis::store::Connection;

use crate::harness::BenchError;

const ONE_DAY_SECONDS: i64 = 24 * 3600;
const ONE_MONTH_SECONDS: i64 = 30 * ONE_DAY_SECONDS;

/// The seed's `ActivityScoreBo`: what happened (each variant one branch of its field/score
/// computation; all add points).
pub enum Activity<'a> {
    Path(&'a str),
    Praise(&'a str),
    Collect(&'a str),
    /// A comment ("rate") on an article.
    Rate(&'a str),
    PublishArticle(&'a str),
    Follow(&'a str),
}

impl Activity<'_> {
    /// The ledger field and the points, as the seed computes them.
    fn field_and_score(&self) -> (String, i64) {
        match self {
            Activity::Path(path) => (format!("path_{path}"), 1),
            Activity::Praise(article) => (format!("{article}_praise"), 2),
            Activity::Collect(article) => (format!("{article}_collect"), 2),
            Activity::Rate(article) => (format!("{article}_rate"), 3),
            Activity::PublishArticle(article) => (format!("{article}_publish"), 10),
            Activity::Follow(user) => (format!("{user}_follow"), 2),
        }
    }
}

/// The seed's keys, under a prefix of this run.
pub struct SeedKeys {
    prefix: String,
}

impl SeedKeys {
    pub fn new(prefix: &str) -> Self {
        Self { prefix: format!("{prefix}:seed001:") }
    }
}

/// `addActivityScore(userId, activityScore)`; returns the Redis commands it sent (each one
/// round trip).
pub async fn add_activity_score(
    conn: &mut Connection,
    keys: &SeedKeys,
    user_id: &str,
    activity: &Activity<'_>,
    now: DateTime<Utc>,
) -> Result<u64, BenchError> {
    let (field, score) = activity.field_and_score();
    let local = now.with_timezone(&Shanghai);
    let today_rank_key = format!("{}activity_rank_{}", keys.prefix, local.format("%Y%m%d"));
    let month_rank_key = format!("{}activity_rank_{}", keys.prefix, local.format("%Y%m"));
    let user_action_key = format!("{}activity_rank_{user_id}{}", keys.prefix, local.format("%Y%m%d"));

    let ans: Option<i64> = conn.hget(&user_action_key, &field).await?;
    let mut commands = 1;
    if ans.is_none() {
        let () = conn.hset(&user_action_key, &field, score).await?;
        let _: bool = conn.expire(&user_action_key, 31 * ONE_DAY_SECONDS).await?;
        let new_ans: f64 = conn.zincr(&today_rank_key, user_id, score).await?;
        let _: f64 = conn.zincr(&month_rank_key, user_id, score).await?;
        commands += 4;
        if new_ans <= score as f64 {
            for (key, seconds) in [(&today_rank_key, 31 * ONE_DAY_SECONDS), (&month_rank_key, 12 * ONE_MONTH_SECONDS)] {
                let ttl: i64 = conn.ttl(key).await?;
                commands += 1;
                if ttl <= 0 {
                    let _: bool = conn.expire(key, seconds).await?;
                    commands += 1;
                }
            }
        }
    }
    Ok(commands)
}
