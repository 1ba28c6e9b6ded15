//! The reads checked after every step of the simulation, each against the model.

use axum::http::StatusCode;

use serde_json::{Value, json};

use super::model::day_of;
use super::world::{World, restoring};

impl World {
    /// Every read the model can state: the forum's day and all-time tops, the arcade's day, and
    /// each user's rank on the forum's all-time board.
    pub async fn check_reads(&mut self) -> Result<(), String> {
        let today = format!("day:{}", day_of(self.app.now().timestamp()));
        let date = day_of(self.app.now().timestamp());
        let checks = [
            ("forum", format!("period=day&at={date}"), self.model.forum_top(&today), self.forum_lost),
            ("forum", "period=all".to_owned(), self.model.forum_top("all"), self.forum_lost),
            ("arcade", format!("period=day&at={date}"), self.model.arcade_top(&today), self.others_lost),
            ("guild", "period=all".to_owned(), self.model.guild_top(), self.others_lost),
        ];
        for (board, query, expected, lost) in checks {
            self.stats.reads += 1;
            let (status, top) = self.app.get(&format!("/v1/boards/{board}/top?{query}&limit=100")).await;
            if lost && restoring(status, &top) {
                continue;
            }
            let entries = top["entries"].as_array().cloned().unwrap_or_default();
            let got: Vec<(String, i64)> =
                entries.iter().map(|e| (e["user_id"].as_str().unwrap_or("?").to_owned(), e["score"].as_i64().unwrap_or(-1))).collect();
            if status != StatusCode::OK || got != expected {
                return Err(format!(
                    "{board} top {query}: expected {expected:?}, got {status} {got:?} {}",
                    if status == StatusCode::OK { String::new() } else { top.to_string() }
                ));
            }
            // Now and then the same board walked by keyset pages (`cursor`, three at a time).
            if self.stats.reads.is_multiple_of(3) {
                self.walk_by_cursor(board, &query, &expected, lost).await?;
            }
        }
        let all = self.model.forum_top("all");
        for user in 0..super::ops::USERS {
            self.stats.reads += 1;
            let user = format!("u{user}");
            let (status, read) = self.app.get(&format!("/v1/boards/forum/users/{user}?period=all&around=0")).await;
            if self.forum_lost && restoring(status, &read) {
                continue;
            }
            // The percentile: the share of the board's members with strictly fewer points.
            let percentile = |own: i64| {
                let below = all.iter().filter(|(_, points)| *points < own).count() as f64;
                (below * 10_000.0 / all.len() as f64).round() / 100.0
            };
            let expected = all.iter().position(|(u, _)| *u == user).map(|i| (i as u64 + 1, all[i].1, Some(percentile(all[i].1))));
            let got = read["rank"].as_u64().map(|rank| (rank, read["score"].as_i64().unwrap_or(-1), read["percentile"].as_f64()));
            if status != StatusCode::OK || got != expected {
                return Err(format!("forum rank of {user}: expected {expected:?}, got {status} {read}"));
            }
        }
        // The sharded guild's neighbourhoods in competition ranks: every entry's rank is one more
        // than the members with more points, whatever ties lie beyond the window (the shards
        // count them in the same call).
        let guild = self.model.guild_top();
        for (user, _) in guild.iter().step_by(3) {
            self.stats.reads += 1;
            let (status, read) = self.app.get(&format!("/v1/boards/guild/users/{user}?period=all&around=2&rank_mode=competition")).await;
            if self.others_lost && restoring(status, &read) {
                continue;
            }
            let entries = read["around"].as_array().cloned().unwrap_or_default();
            let wrong = entries.iter().find(|e| {
                let score = e["score"].as_i64().unwrap_or(-1);
                e["rank"].as_u64() != Some(1 + guild.iter().filter(|(_, points)| *points > score).count() as u64)
            });
            if status != StatusCode::OK || entries.is_empty() || wrong.is_some() {
                return Err(format!("guild competition ranks around {user}: {status} {read}"));
            }
        }
        self.check_statements().await?;
        self.check_distributions().await?;
        self.check_friends().await?;
        self.check_league().await?;
        self.check_cups().await?;
        self.check_boards().await?;
        self.check_audit().await?;
        self.check_seasons().await
    }
}

impl World {
    /// Each user's all-time statement on the forum (one slot, and today's) and the guild (shards): its score
    /// the model's, its lines summing to it, nothing unexplained (docs/api.md), whatever wrote
    /// the points (events, sign-ins, corrections, voids, bans, a restore, a move).
    async fn check_statements(&mut self) -> Result<(), String> {
        let date = day_of(self.app.now().timestamp());
        let boards = [
            ("forum", "period=all".to_owned(), self.model.forum_top("all"), self.forum_lost),
            // Today's, where the daily cap withholds likes.
            ("forum", format!("period=day&at={date}"), self.model.forum_top(&format!("day:{date}")), self.forum_lost),
            ("guild", "period=all".to_owned(), self.model.guild_top(), self.others_lost),
        ];
        for (board, query, top, lost) in boards {
            for user in 0..super::ops::USERS {
                self.stats.reads += 1;
                let user = format!("u{user}");
                let (status, read) = self.app.get(&format!("/v1/boards/{board}/users/{user}/statement?{query}")).await;
                if lost && restoring(status, &read) {
                    continue;
                }
                let score = top.iter().find(|(u, _)| *u == user).map_or(0, |(_, points)| *points);
                let lines: i64 = read["lines"].as_array().map_or(-1, |lines| lines.iter().map(|l| l["points"].as_i64().unwrap_or(0)).sum());
                if status != StatusCode::OK || read["score"].as_i64() != Some(score) || lines != score || !read["unexplained"].is_null() {
                    return Err(format!("{board} statement of {user} ({query}): expected {score} explained, got {status} {read}"));
                }
            }
        }
        Ok(())
    }

    /// The forum's (one slot) and the guild's (shards) all-time distribution, stated from the
    /// model's scores as docs/api.md defines it: ten buckets of equal width from the lowest score
    /// to the highest (the last ending at the highest), the cut-offs the scores at rank
    /// `ceil(total · p / 100)`.
    async fn check_distributions(&mut self) -> Result<(), String> {
        for (board, top, lost) in
            [("forum", self.model.forum_top("all"), self.forum_lost), ("guild", self.model.guild_top(), self.others_lost)]
        {
            self.stats.reads += 1;
            let (status, read) = self.app.get(&format!("/v1/boards/{board}/distribution?period=all&buckets=10")).await;
            if lost && restoring(status, &read) {
                continue;
            }
            let expected = distribution(&top.iter().map(|(_, points)| *points).collect::<Vec<_>>());
            let got = json!({"total": read["total"], "buckets": read["buckets"], "cutoffs": read["cutoffs"]});
            if status != StatusCode::OK || got != expected {
                return Err(format!("{board} distribution: expected {expected}, got {status} {read}"));
            }
        }
        Ok(())
    }

    /// "My friends" (`POST …/ranks`) on the forum (one slot) and the guild (shards), in
    /// competition ranks: a list with a repeat and a user never seen, answered in board order
    /// with each member's rank (1 + those with more points) and rank among the listed, the
    /// absent after them in request order.
    async fn check_friends(&mut self) -> Result<(), String> {
        let asked = ["u5", "u3", "nobody", "u0", "u1", "u3"];
        for (board, top, lost) in
            [("forum", self.model.forum_top("all"), self.forum_lost), ("guild", self.model.guild_top(), self.others_lost)]
        {
            self.stats.reads += 1;
            let body = json!({"user_ids": asked, "period": "all", "rank_mode": "competition"}).to_string();
            let (status, read) = self.app.call_query(axum::http::Method::POST, &format!("/v1/boards/{board}/ranks"), body).await;
            if lost && restoring(status, &read) {
                continue;
            }
            let points = |user: &str| top.iter().find(|(u, _)| u == user).map(|(_, p)| *p);
            let mut listed: Vec<&str> = Vec::new();
            for user in asked {
                if !listed.contains(&user) {
                    listed.push(user);
                }
            }
            let (mut present, absent): (Vec<&str>, Vec<&str>) = listed.into_iter().partition(|user| points(user).is_some());
            present.sort_by_key(|user| top.iter().position(|(u, _)| u == user));
            let expected: Vec<Value> = present
                .iter()
                .map(|user| {
                    let own = points(user).unwrap_or(0);
                    let above = |among: &mut dyn Iterator<Item = i64>| 1 + among.filter(|p| *p > own).count();
                    json!([user, above(&mut top.iter().map(|(_, p)| *p)), above(&mut present.iter().filter_map(|u| points(u))), own])
                })
                .chain(absent.iter().map(|user| json!([user, null, null])))
                .collect();
            let got: Vec<Value> = read["entries"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .iter()
                .map(|e| match e["rank"].is_null() {
                    true => json!([e["user_id"], e["rank"], e["relative_rank"]]),
                    false => json!([e["user_id"], e["rank"], e["relative_rank"], e["score"]]),
                })
                .collect();
            if status != StatusCode::OK || got != expected {
                return Err(format!("{board} ranks of friends: expected {expected:?}, got {status} {read}"));
            }
        }
        Ok(())
    }

    /// `board`'s top walked three entries a page by `next_cursor`: the pages, end to end, hold
    /// what the model says, each once.
    async fn walk_by_cursor(&mut self, board: &str, query: &str, expected: &[(String, i64)], lost: bool) -> Result<(), String> {
        let (mut got, mut cursor): (Vec<(String, i64)>, Option<String>) = (Vec::new(), None);
        for _ in 0..=expected.len() / 3 + 1 {
            let after = cursor.as_ref().map_or(String::new(), |c| format!("&cursor={c}"));
            let (status, page) = self.app.get(&format!("/v1/boards/{board}/top?{query}&limit=3{after}")).await;
            if lost && restoring(status, &page) {
                return Ok(());
            }
            if status != StatusCode::OK {
                return Err(format!("{board} top {query}{after}: {status} {page}"));
            }
            let entries = page["entries"].as_array().cloned().unwrap_or_default();
            got.extend(entries.iter().map(|e| (e["user_id"].as_str().unwrap_or("?").to_owned(), e["score"].as_i64().unwrap_or(-1))));
            match page["next_cursor"].as_str() {
                Some(next) => cursor = Some(next.to_owned()),
                None => break,
            }
        }
        if got != expected {
            return Err(format!("{board} top {query} walked by cursor: expected {expected:?}, got {got:?}"));
        }
        Ok(())
    }
}

/// A board's distribution in ten buckets, from its scores (best first), as docs/api.md states it.
fn distribution(scores: &[i64]) -> Value {
    let (Some(&highest), Some(&lowest)) = (scores.iter().max(), scores.iter().min()) else {
        return json!({"total": 0, "buckets": [], "cutoffs": []});
    };
    let width = (highest - lowest + 10) / 10;
    let mut buckets = Vec::new();
    let mut min = lowest;
    while min <= highest {
        let max = (min + width - 1).min(highest);
        let count = scores.iter().filter(|s| (min..=max).contains(*s)).count();
        buckets.push(json!({"min": min, "max": max, "count": count}));
        min += width;
    }
    let total = scores.len();
    let cutoffs: Vec<Value> =
        [1, 5, 10, 25, 50].iter().map(|p| json!({"top_percent": p, "score": scores[(total * p).div_ceil(100) - 1]})).collect();
    json!({"total": total, "buckets": buckets, "cutoffs": cutoffs})
}
