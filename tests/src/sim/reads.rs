//! The reads checked after every step of the simulation, each against the model.

use axum::http::StatusCode;

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
            let expected = all.iter().position(|(u, _)| *u == user).map(|i| (i as u64 + 1, all[i].1));
            let got = read["rank"].as_u64().map(|rank| (rank, read["score"].as_i64().unwrap_or(-1)));
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
        self.check_league().await?;
        self.check_cups().await?;
        self.check_boards().await?;
        self.check_seasons().await
    }
}

impl World {
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
