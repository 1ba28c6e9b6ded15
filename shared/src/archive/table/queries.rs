//! Every read and write the archive job and the query function make on the table: each
//! access pattern is one Query (or one conditional write).

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{AttributeValue, Select};
use chrono::{DateTime, Utc};

use crate::domain::distribution::Histogram;

use super::items::*;
use super::schema::{GSI1, PK, SK};

/// The completion record's attribute holding a tournament instance's prizes.
const PRIZES: &str = "prizes";
use super::{Item, SeasonTable, TableError};

impl SeasonTable {
    /// The season's completion record, if its archive is complete (strongly consistent).
    pub async fn completed(&self, board: &str, season: &str) -> Result<Option<CompletedSeason>, TableError> {
        self.archive_item(board, season, STATUS_SK)
            .await?
            .map(|item| {
                let prizes = item.get(PRIZES).and_then(|prizes| prizes.as_s().ok()).cloned();
                Ok(CompletedSeason { total: get_n(&item, "total")?, completed_at: get_time(&item, "completed_at")?, prizes })
            })
            .transpose()
    }

    /// Records a completed tournament instance's prizes (`prizes`, JSON) on its completion
    /// record; the first record stands.
    pub async fn record_prizes(&self, board: &str, season: &str, prizes: &str) -> Result<(), TableError> {
        let update = self
            .client
            .update_item()
            .table_name(&self.name)
            .key(PK, s(archive_pk(board, season)))
            .key(SK, s(STATUS_SK))
            .update_expression("SET #prizes = :prizes")
            .condition_expression("attribute_exists(pk) AND attribute_not_exists(#prizes)")
            .expression_attribute_names("#prizes", PRIZES)
            .expression_attribute_values(":prizes", s(prizes));
        match update.send().await {
            Err(e) if e.as_service_error().is_some_and(|e| e.is_conditional_check_failed_exception()) => Ok(()),
            other => other.map(drop).map_err(Into::into),
        }
    }

    /// Records that the season's archive is complete; a second call keeps the first record.
    pub async fn mark_complete(&self, board: &str, season: &str, total: u64, at: DateTime<Utc>) -> Result<(), TableError> {
        let attributes = [("board", s(board)), ("season", s(season)), ("total", n(total)), ("completed_at", time(at))];
        self.put_first(board, season, STATUS_SK, attributes).await
    }

    /// Records that a run saw the season's live board with members (kept outside Redis, so a
    /// flush of the whole database cannot pass for a season nobody played). The first sighting
    /// is kept.
    pub async fn record_seen(&self, board: &str, season: &str, at: DateTime<Utc>) -> Result<(), TableError> {
        self.put_first(board, season, SEEN_SK, [("seen_at", time(at))]).await
    }

    /// Whether a run ever saw the season's live board with members (strongly consistent).
    pub async fn seen(&self, board: &str, season: &str) -> Result<bool, TableError> {
        Ok(self.archive_item(board, season, SEEN_SK).await?.is_some())
    }

    /// The season's archive record `sk`, read strongly consistent.
    async fn archive_item(&self, board: &str, season: &str, sk: &str) -> Result<Option<Item>, TableError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.name)
            .key(PK, s(archive_pk(board, season)))
            .key(SK, s(sk))
            .consistent_read(true)
            .send()
            .await?;
        Ok(output.item)
    }

    /// Writes the season's archive record `sk` unless it exists: the first write is kept.
    async fn put_first<const N: usize>(
        &self,
        board: &str,
        season: &str,
        sk: &str,
        attributes: [(&str, AttributeValue); N],
    ) -> Result<(), TableError> {
        let mut put = self.client.put_item().table_name(&self.name).item(PK, s(archive_pk(board, season))).item(SK, s(sk));
        for (name, value) in attributes {
            put = put.item(name, value);
        }
        match put.condition_expression("attribute_not_exists(pk)").send().await {
            Err(e) if e.as_service_error().is_some_and(|e| e.is_conditional_check_failed_exception()) => Ok(()),
            other => other.map(drop).map_err(Into::into),
        }
    }

    /// Stores the season's histograms, `histograms[n - 1]` for `n` buckets (they share the
    /// size, the lowest and highest points and the cut-offs). Written again by a rerun before
    /// the season is complete; never after.
    pub async fn put_distribution(&self, board: &str, season: &str, histograms: &[Histogram]) -> Result<(), TableError> {
        let Some(first) = histograms.first() else {
            return Ok(());
        };
        self.client
            .put_item()
            .table_name(&self.name)
            .item(PK, s(archive_pk(board, season)))
            .item(SK, s(DISTRIBUTION_SK))
            .item("total", n(first.total))
            .item("lowest", n(first.lowest))
            .item("highest", n(first.highest))
            .item("cutoffs", numbers(&first.cutoffs))
            .item("widths", numbers(histograms.iter().map(|h| h.width)))
            .item("counts", AttributeValue::L(histograms.iter().map(|h| numbers(&h.counts)).collect()))
            .send()
            .await?;
        Ok(())
    }

    /// The season's histogram in `buckets` buckets, if its distribution was archived: one
    /// GetItem reading only that bucket count's width and counts.
    pub async fn distribution(&self, board: &str, season: &str, buckets: u64) -> Result<Option<Histogram>, TableError> {
        let index = buckets.checked_sub(1).ok_or_else(|| TableError::Item("a distribution has at least one bucket".into()))?;
        let output = self
            .client
            .get_item()
            .table_name(&self.name)
            .key(PK, s(archive_pk(board, season)))
            .key(SK, s(DISTRIBUTION_SK))
            .projection_expression(format!("#total, lowest, highest, cutoffs, widths[{index}], counts[{index}]"))
            .expression_attribute_names("#total", "total")
            .send()
            .await?;
        output.item().map(parse_histogram).transpose()
    }

    fn shard_key(&self, board: &str, season: &str, shard: Shard) -> [(&'static str, AttributeValue); 2] {
        [(PK, s(archive_pk(board, season))), (SK, s(format!("{}{}", shard_prefix(shard.total), shard.index)))]
    }

    /// The rank `shard` archives next, if it has a checkpoint (strongly consistent).
    pub async fn checkpoint(&self, board: &str, season: &str, shard: Shard) -> Result<Option<u64>, TableError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.name)
            .set_key(Some(self.shard_key(board, season, shard).into_iter().map(|(k, v)| (k.to_owned(), v)).collect()))
            .consistent_read(true)
            .send()
            .await?;
        output.item().map(|item| get_n(item, "next_rank")).transpose()
    }

    /// Moves `shard`'s checkpoint to `next_rank`, never backwards: the update is conditional on
    /// the stored rank being lower, so a late or concurrent invocation of the same shard cannot
    /// undo progress. Answers the checkpoint now stored.
    pub async fn advance_checkpoint(
        &self,
        board: &str,
        season: &str,
        shard: Shard,
        next_rank: u64,
        at: DateTime<Utc>,
    ) -> Result<u64, TableError> {
        let update = self
            .client
            .update_item()
            .table_name(&self.name)
            .set_key(Some(self.shard_key(board, season, shard).into_iter().map(|(k, v)| (k.to_owned(), v)).collect()))
            .update_expression("SET next_rank = :next, updated_at = :at")
            .condition_expression("attribute_not_exists(next_rank) OR next_rank < :next")
            .expression_attribute_values(":next", n(next_rank))
            .expression_attribute_values(":at", time(at))
            .send()
            .await;
        match update {
            Ok(_) => Ok(next_rank),
            Err(e) if e.as_service_error().is_some_and(|e| e.is_conditional_check_failed_exception()) => {
                Ok(self.checkpoint(board, season, shard).await?.unwrap_or(next_rank))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Every checkpoint of a `shard_total`-way split: shard index → next rank.
    pub async fn checkpoints(&self, board: &str, season: &str, shard_total: u32) -> Result<HashMap<u32, u64>, TableError> {
        let prefix = shard_prefix(shard_total);
        let items: Vec<Item> = self
            .client
            .query()
            .table_name(&self.name)
            .key_condition_expression("pk = :pk AND begins_with(sk, :prefix)")
            .expression_attribute_values(":pk", s(archive_pk(board, season)))
            .expression_attribute_values(":prefix", s(&prefix))
            .consistent_read(true)
            .into_paginator()
            .items()
            .send()
            .try_collect()
            .await?;
        items
            .iter()
            .map(|item| {
                let index = get_s(item, SK)?[prefix.len()..]
                    .parse()
                    .map_err(|_| TableError::Item(format!("checkpoint key {:?}", get_s(item, SK))))?;
                Ok((index, get_n(item, "next_rank")?))
            })
            .collect()
    }

    /// Entries stored for the season (a strongly consistent Query that counts, page by page).
    pub async fn count_entries(&self, board: &str, season: &str) -> Result<u64, TableError> {
        let pages = self
            .client
            .query()
            .table_name(&self.name)
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(":pk", s(season_pk(board, season)))
            .select(Select::Count)
            .consistent_read(true)
            .into_paginator()
            .send()
            .try_collect()
            .await?;
        Ok(pages.iter().map(|page| page.count() as u64).sum())
    }

    /// Ranks `first..=last` of the season, best first: one Query on the table's key.
    pub async fn ranks(&self, board: &str, season: &str, first: u64, last: u64) -> Result<Vec<ArchivedEntry>, TableError> {
        if last < first {
            return Ok(Vec::new());
        }
        let items: Vec<Item> = self
            .client
            .query()
            .table_name(&self.name)
            .key_condition_expression("pk = :pk AND sk BETWEEN :first AND :last")
            // Only what an entry holds; the keys would be most of each item's bytes.
            .projection_expression(ENTRY_PROJECTION)
            .expression_attribute_names("#rank", "rank")
            .expression_attribute_names("#total", "total")
            .expression_attribute_values(":pk", s(season_pk(board, season)))
            .expression_attribute_values(":first", s(rank_sk(first)))
            .expression_attribute_values(":last", s(rank_sk(last)))
            .into_paginator()
            .items()
            .send()
            .try_collect()
            .await?;
        items.iter().map(parse_entry).collect()
    }

    /// A user's standing in one season: one Query on the user index.
    pub async fn user_entry(&self, board: &str, season: &str, user_id: &str) -> Result<Option<ArchivedEntry>, TableError> {
        let output = self
            .client
            .query()
            .table_name(&self.name)
            .index_name(GSI1)
            .key_condition_expression("gsi1pk = :user AND gsi1sk = :season")
            .expression_attribute_values(":user", s(user_pk(user_id)))
            .expression_attribute_values(":season", s(user_season_sk(board, season)))
            .send()
            .await?;
        output.items().first().map(parse_entry).transpose()
    }

    /// A user's standings in every archived season (of `board` only, if given), newest season
    /// first within each board: one Query on the user index.
    pub async fn user_history(&self, user_id: &str, board: Option<&str>) -> Result<Vec<ArchivedEntry>, TableError> {
        let mut query = self
            .client
            .query()
            .table_name(&self.name)
            .index_name(GSI1)
            .expression_attribute_values(":user", s(user_pk(user_id)))
            .scan_index_forward(false);
        query = match board {
            Some(board) => query
                .key_condition_expression("gsi1pk = :user AND begins_with(gsi1sk, :board)")
                .expression_attribute_values(":board", s(format!("{board}#"))),
            None => query.key_condition_expression("gsi1pk = :user"),
        };
        let items: Vec<Item> = query.into_paginator().items().send().try_collect().await?;
        items.iter().map(parse_entry).collect()
    }
}
