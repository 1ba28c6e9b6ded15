//! The item layout: how a member's final standing, a season's completion and a shard's
//! checkpoint are keyed and encoded (see the table in `table`'s docs).

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{AttributeValue, PutRequest, WriteRequest};
use chrono::{DateTime, SecondsFormat, Utc};

use super::schema::{GSI1_PK, GSI1_SK, PK, SK};
use super::{Item, TableError};
use crate::archive::freeze::Standing;
use crate::domain::distribution::Histogram;

/// Ranks are zero-padded so that string order is rank order.
const RANK_DIGITS: usize = 10;
pub(super) const STATUS_SK: &str = "STATUS";
pub(super) const DISTRIBUTION_SK: &str = "DISTRIBUTION";
/// A running season's record that a scheduled run saw its board with members.
pub(super) const SEEN_SK: &str = "SEEN";
/// The attributes an [`ArchivedEntry`] is read from (`rank` and `total` are reserved words).
pub(super) const ENTRY_PROJECTION: &str = "board, season, #rank, user_id, points, reached_at, #total";

/// One slice of a season's pages (job sharding): shard `index` of `total` archives
/// pages `index`, `index + total`, `index + 2·total`, …
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Shard {
    pub index: u32,
    pub total: u32,
}

impl Shard {
    /// The whole season in one shard.
    pub const WHOLE: Shard = Shard { index: 0, total: 1 };
}

/// Most shards a season's archive job can be split into.
pub const MAX_SHARDS: u32 = 100;

/// A member's archived standing in one season.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchivedEntry {
    pub board: String,
    pub season: String,
    pub rank: u64,
    pub user_id: String,
    pub points: i64,
    pub reached_at: DateTime<Utc>,
    /// Members in the season.
    pub total: u64,
}

/// A season whose archive is complete and verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompletedSeason {
    pub total: u64,
    pub completed_at: DateTime<Utc>,
    /// A tournament instance's prizes (JSON), as they were when it ended: its results are
    /// priced from them, whatever edits came after (docs/tournaments.md#live-edits).
    pub prizes: Option<String>,
}

pub(super) fn season_pk(board: &str, season: &str) -> String {
    format!("SEASON#{board}#{season}")
}

pub(super) fn rank_sk(rank: u64) -> String {
    format!("RANK#{rank:0RANK_DIGITS$}")
}

pub(super) fn user_pk(user_id: &str) -> String {
    format!("USER#{user_id}")
}

pub(super) fn user_season_sk(board: &str, season: &str) -> String {
    format!("{board}#{season}")
}

pub(super) fn archive_pk(board: &str, season: &str) -> String {
    format!("ARCHIVE#{board}#{season}")
}

pub(super) fn shard_prefix(shard_total: u32) -> String {
    format!("SHARD#{shard_total}#")
}

pub(super) fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

pub(super) fn n(value: impl ToString) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

pub(super) fn numbers<T: ToString>(values: impl IntoIterator<Item = T>) -> AttributeValue {
    AttributeValue::L(values.into_iter().map(n).collect())
}

pub(super) fn time(at: DateTime<Utc>) -> AttributeValue {
    s(at.to_rfc3339_opts(SecondsFormat::Secs, true))
}

pub(super) fn get_s<'a>(item: &'a Item, name: &str) -> Result<&'a str, TableError> {
    match item.get(name) {
        Some(AttributeValue::S(value)) => Ok(value),
        _ => Err(TableError::Item(format!("missing string attribute {name}"))),
    }
}

pub(super) fn get_n<T: std::str::FromStr>(item: &Item, name: &str) -> Result<T, TableError> {
    match item.get(name) {
        Some(AttributeValue::N(value)) => value.parse().map_err(|_| TableError::Item(format!("attribute {name} is not a valid number"))),
        _ => Err(TableError::Item(format!("missing number attribute {name}"))),
    }
}

pub(super) fn get_time(item: &Item, name: &str) -> Result<DateTime<Utc>, TableError> {
    DateTime::parse_from_rfc3339(get_s(item, name)?)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|_| TableError::Item(format!("attribute {name} is not an RFC 3339 time")))
}

/// The item holding `standing` in `board`'s `season` of `total` members.
pub fn entry_item(board: &str, season: &str, total: u64, standing: &Standing) -> Item {
    HashMap::from([
        (PK.to_owned(), s(season_pk(board, season))),
        (SK.to_owned(), s(rank_sk(standing.rank))),
        (GSI1_PK.to_owned(), s(user_pk(&standing.user_id))),
        (GSI1_SK.to_owned(), s(user_season_sk(board, season))),
        ("board".to_owned(), s(board)),
        ("season".to_owned(), s(season)),
        ("rank".to_owned(), n(standing.rank)),
        ("user_id".to_owned(), s(&standing.user_id)),
        ("points".to_owned(), n(standing.points)),
        ("reached_at".to_owned(), time(standing.reached_at)),
        ("total".to_owned(), n(total)),
    ])
}

pub(super) fn parse_entry(item: &Item) -> Result<ArchivedEntry, TableError> {
    Ok(ArchivedEntry {
        board: get_s(item, "board")?.to_owned(),
        season: get_s(item, "season")?.to_owned(),
        rank: get_n(item, "rank")?,
        user_id: get_s(item, "user_id")?.to_owned(),
        points: get_n(item, "points")?,
        reached_at: get_time(item, "reached_at")?,
        total: get_n(item, "total")?,
    })
}

/// A put of one item, as BatchWriteItem takes it.
pub fn put_request(item: Item) -> WriteRequest {
    let put = PutRequest::builder().set_item(Some(item)).build().expect("a put request with its item is complete");
    WriteRequest::builder().put_request(put).build()
}

/// A histogram from the distribution item as read for one bucket count (its `widths` and
/// `counts` projected to that count's one element).
pub(super) fn parse_histogram(item: &Item) -> Result<Histogram, TableError> {
    let list = |name: &str| match item.get(name) {
        Some(AttributeValue::L(values)) => Ok(values.as_slice()),
        _ => Err(TableError::Item(format!("missing list attribute {name}"))),
    };
    let number = |value: &AttributeValue| match value {
        AttributeValue::N(text) => text.parse::<i64>().map_err(|_| TableError::Item(format!("{text:?} is not a whole number"))),
        _ => Err(TableError::Item("a distribution list holds numbers".into())),
    };
    let width = list("widths")?.first().ok_or_else(|| TableError::Item("no width for that bucket count".into()))?;
    let counts = match list("counts")?.first() {
        Some(AttributeValue::L(counts)) => counts.iter().map(|c| number(c).map(|c| c as u64)).collect::<Result<_, _>>()?,
        _ => return Err(TableError::Item("no counts for that bucket count".into())),
    };
    Ok(Histogram {
        total: get_n(item, "total")?,
        lowest: get_n(item, "lowest")?,
        highest: get_n(item, "highest")?,
        width: number(width)?,
        counts,
        cutoffs: list("cutoffs")?.iter().map(number).collect::<Result<_, _>>()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_keys_sort_as_ranks() {
        let mut keys: Vec<String> = [10, 9, 1_000_000, 2, 100].into_iter().map(rank_sk).collect();
        keys.sort();
        assert_eq!(keys, ["RANK#0000000002", "RANK#0000000009", "RANK#0000000010", "RANK#0000000100", "RANK#0001000000"]);
    }

    #[test]
    fn an_entry_round_trips_through_its_item() {
        let standing =
            Standing { rank: 7, user_id: "user:7@x".into(), points: 4_194_303, reached_at: "2026-10-31T15:59:59Z".parse().unwrap() };
        let item = entry_item("points", "2026-10", 25_001, &standing);
        assert_eq!(get_s(&item, PK).unwrap(), "SEASON#points#2026-10");
        assert_eq!(get_s(&item, GSI1_PK).unwrap(), "USER#user:7@x");
        // What a Query projecting ENTRY_PROJECTION returns is enough to read the entry back.
        let projected: Item = ENTRY_PROJECTION
            .split(", ")
            .map(|name| name.trim_start_matches('#'))
            .map(|name| (name.to_owned(), item[name].clone()))
            .collect();
        let entry = parse_entry(&projected).unwrap();
        assert_eq!(
            (entry.rank, entry.user_id.as_str(), entry.points, entry.reached_at, entry.total),
            (7, "user:7@x", 4_194_303, standing.reached_at, 25_001)
        );
    }
}
