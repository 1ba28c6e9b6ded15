//! The DynamoDB table of archived seasons (cargo feature `dynamodb`): its one definition — used
//! by the archive job, the query function, the tests, and checked against
//! `infra/template.yaml` — the item layout, and every read and write made on it.
//!
//! One table, string keys `pk`/`sk`, one sparse global secondary index `gsi1`:
//!
//! | item | pk | sk | gsi1pk | gsi1sk |
//! |------|----|----|--------|--------|
//! | a member's final standing | `SEASON#<board>#<season>` | `RANK#<rank, 10 digits>` | `USER#<user_id>` | `<board>#<season>` |
//! | a season's archive is complete | `ARCHIVE#<board>#<season>` | `STATUS` | – | – |
//! | a shard's checkpoint | `ARCHIVE#<board>#<season>` | `SHARD#<total>#<index>` | – | – |
//!
//! Each access pattern is one Query: a season's top by rank (`pk`, `sk BETWEEN` two ranks), a
//! user's standing in a season (`gsi1`, both keys equal), a user's history (`gsi1`, `gsi1pk`).
//! Board names, season ids and user ids never contain `#` (ids are allow-listed), so the
//! separators are unambiguous.

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::config::timeout::TimeoutConfig;
use aws_sdk_dynamodb::error::{DisplayErrorContext, SdkError};
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
    ProjectionType, PutRequest, ScalarAttributeType, Select, WriteRequest,
};
use aws_sdk_dynamodb::Client;
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{json, Value};

use crate::archive::freeze::Standing;

/// The environment variable naming the table (docs/configuration.md).
pub const TABLE_ENV: &str = "STANDINGS_TABLE";
/// The most items one BatchWriteItem takes.
pub const MAX_BATCH_WRITE: usize = 25;

pub const PK: &str = "pk";
pub const SK: &str = "sk";
pub const GSI1: &str = "gsi1";
pub const GSI1_PK: &str = "gsi1pk";
pub const GSI1_SK: &str = "gsi1sk";

/// Ranks are zero-padded so that string order is rank order.
const RANK_DIGITS: usize = 10;
const STATUS_SK: &str = "STATUS";
/// The attributes an [`ArchivedEntry`] is read from (`rank` and `total` are reserved words).
const ENTRY_PROJECTION: &str = "board, season, #rank, user_id, points, reached_at, #total";

/// A key schema: the table's own, or a global secondary index's.
struct KeySchema {
    index: Option<&'static str>,
    hash: &'static str,
    range: &'static str,
}

const TABLE_KEY: KeySchema = KeySchema { index: None, hash: PK, range: SK };
const USER_INDEX: KeySchema = KeySchema { index: Some(GSI1), hash: GSI1_PK, range: GSI1_SK };

/// The table's definition as CloudFormation `AWS::DynamoDB::Table` properties (key schema,
/// attributes, index, billing). `infra/template.yaml` must declare exactly these; a unit test
/// compares them.
pub fn cloudformation_properties() -> Value {
    let keys = |schema: &KeySchema| {
        json!([{"AttributeName": schema.hash, "KeyType": "HASH"}, {"AttributeName": schema.range, "KeyType": "RANGE"}])
    };
    let attributes: Vec<Value> = [&TABLE_KEY, &USER_INDEX]
        .iter()
        .flat_map(|schema| [schema.hash, schema.range])
        .map(|name| json!({"AttributeName": name, "AttributeType": "S"}))
        .collect();
    json!({
        "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": attributes,
        "KeySchema": keys(&TABLE_KEY),
        "GlobalSecondaryIndexes": [{
            "IndexName": USER_INDEX.index,
            "KeySchema": keys(&USER_INDEX),
            "Projection": {"ProjectionType": "ALL"},
        }],
    })
}

#[derive(Debug, thiserror::Error)]
pub enum TableError {
    #[error("{TABLE_ENV} is not set")]
    NotConfigured,
    #[error("dynamodb: {0}")]
    Request(String),
    #[error("unexpected item in the season table: {0}")]
    Item(String),
}

impl<E: std::error::Error + 'static, R: std::fmt::Debug> From<SdkError<E, R>> for TableError {
    fn from(error: SdkError<E, R>) -> Self {
        Self::Request(DisplayErrorContext(&error).to_string())
    }
}

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
}

/// Where the archive job's BatchWriteItem calls go. Narrow on purpose: tests wrap it to inject
/// crashes and unprocessed items on top of the real DynamoDB path.
pub trait ArchiveSink: Send + Sync {
    /// One BatchWriteItem of at most [`MAX_BATCH_WRITE`] requests; answers the requests
    /// DynamoDB left unprocessed (to be retried by the caller).
    fn batch_write(&self, requests: Vec<WriteRequest>) -> impl Future<Output = Result<Vec<WriteRequest>, TableError>> + Send;
}

type Item = HashMap<String, AttributeValue>;

fn season_pk(board: &str, season: &str) -> String {
    format!("SEASON#{board}#{season}")
}

fn rank_sk(rank: u64) -> String {
    format!("RANK#{rank:0RANK_DIGITS$}")
}

fn user_pk(user_id: &str) -> String {
    format!("USER#{user_id}")
}

fn user_season_sk(board: &str, season: &str) -> String {
    format!("{board}#{season}")
}

fn archive_pk(board: &str, season: &str) -> String {
    format!("ARCHIVE#{board}#{season}")
}

fn shard_prefix(shard_total: u32) -> String {
    format!("SHARD#{shard_total}#")
}

fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

fn n(value: impl ToString) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

fn time(at: DateTime<Utc>) -> AttributeValue {
    s(at.to_rfc3339_opts(SecondsFormat::Secs, true))
}

fn get_s<'a>(item: &'a Item, name: &str) -> Result<&'a str, TableError> {
    match item.get(name) {
        Some(AttributeValue::S(value)) => Ok(value),
        _ => Err(TableError::Item(format!("missing string attribute {name}"))),
    }
}

fn get_n<T: std::str::FromStr>(item: &Item, name: &str) -> Result<T, TableError> {
    match item.get(name) {
        Some(AttributeValue::N(value)) => value.parse().map_err(|_| TableError::Item(format!("attribute {name} is not a valid number"))),
        _ => Err(TableError::Item(format!("missing number attribute {name}"))),
    }
}

fn get_time(item: &Item, name: &str) -> Result<DateTime<Utc>, TableError> {
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

fn parse_entry(item: &Item) -> Result<ArchivedEntry, TableError> {
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

/// The table and a client for it; cheap to clone, one per container.
#[derive(Clone, Debug)]
pub struct SeasonTable {
    client: Client,
    name: String,
}

impl SeasonTable {
    pub fn new(client: Client, name: impl Into<String>) -> Self {
        Self { client, name: name.into() }
    }

    /// The table named by `STANDINGS_TABLE`, through the SDK's own configuration chain
    /// (credentials, region, and `AWS_ENDPOINT_URL_DYNAMODB` for a local endpoint), with
    /// standard retries of throttled and failed requests.
    pub async fn from_env() -> Result<Self, TableError> {
        let name = std::env::var(TABLE_ENV).ok().filter(|v| !v.is_empty()).ok_or(TableError::NotConfigured)?;
        Ok(Self::connect(name).await)
    }

    /// A client with up to 5 attempts per request, each cut off after 5 seconds.
    pub async fn connect(name: impl Into<String>) -> Self {
        Self::connect_with_attempt_timeout(name, Duration::from_secs(5)).await
    }

    /// As [`connect`](Self::connect), for slower endpoints (local emulators).
    pub async fn connect_with_attempt_timeout(name: impl Into<String>, attempt_timeout: Duration) -> Self {
        use aws_smithy_http_client::tls::{rustls_provider::CryptoMode, Provider};
        let https = aws_smithy_http_client::Builder::new().tls_provider(Provider::Rustls(CryptoMode::Ring)).build_https();
        let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .http_client(https)
            .retry_config(RetryConfig::standard().with_max_attempts(5))
            .timeout_config(TimeoutConfig::builder().operation_attempt_timeout(attempt_timeout).build())
            .load()
            .await;
        Self::new(Client::new(&sdk), name)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Creates the table with [`cloudformation_properties`]' schema unless it exists. For local
    /// endpoints and tests; in AWS the template creates it.
    pub async fn create_if_missing(&self) -> Result<(), TableError> {
        let key_schema = |schema: &KeySchema| {
            [(schema.hash, KeyType::Hash), (schema.range, KeyType::Range)]
                .map(|(name, kind)| KeySchemaElement::builder().attribute_name(name).key_type(kind).build().expect("complete"))
                .to_vec()
        };
        let attributes = [&TABLE_KEY, &USER_INDEX]
            .iter()
            .flat_map(|schema| [schema.hash, schema.range])
            .map(|name| {
                AttributeDefinition::builder().attribute_name(name).attribute_type(ScalarAttributeType::S).build().expect("complete")
            })
            .collect();
        let index = GlobalSecondaryIndex::builder()
            .index_name(GSI1)
            .set_key_schema(Some(key_schema(&USER_INDEX)))
            .projection(Projection::builder().projection_type(ProjectionType::All).build())
            .build()
            .expect("complete");
        let created = self
            .client
            .create_table()
            .table_name(&self.name)
            .billing_mode(BillingMode::PayPerRequest)
            .set_attribute_definitions(Some(attributes))
            .set_key_schema(Some(key_schema(&TABLE_KEY)))
            .global_secondary_indexes(index)
            .send()
            .await;
        match created {
            Err(e) if e.as_service_error().is_some_and(|e| e.is_resource_in_use_exception()) => Ok(()),
            other => other.map(drop).map_err(Into::into),
        }
    }

    /// The season's completion record, if its archive is complete (strongly consistent).
    pub async fn completed(&self, board: &str, season: &str) -> Result<Option<CompletedSeason>, TableError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.name)
            .key(PK, s(archive_pk(board, season)))
            .key(SK, s(STATUS_SK))
            .consistent_read(true)
            .send()
            .await?;
        output
            .item()
            .map(|item| Ok(CompletedSeason { total: get_n(item, "total")?, completed_at: get_time(item, "completed_at")? }))
            .transpose()
    }

    /// Records that the season's archive is complete; a second call keeps the first record.
    pub async fn mark_complete(&self, board: &str, season: &str, total: u64, at: DateTime<Utc>) -> Result<(), TableError> {
        let put = self
            .client
            .put_item()
            .table_name(&self.name)
            .item(PK, s(archive_pk(board, season)))
            .item(SK, s(STATUS_SK))
            .item("board", s(board))
            .item("season", s(season))
            .item("total", n(total))
            .item("completed_at", time(at))
            .condition_expression("attribute_not_exists(pk)")
            .send()
            .await;
        match put {
            Err(e) if e.as_service_error().is_some_and(|e| e.is_conditional_check_failed_exception()) => Ok(()),
            other => other.map(drop).map_err(Into::into),
        }
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

impl ArchiveSink for SeasonTable {
    async fn batch_write(&self, requests: Vec<WriteRequest>) -> Result<Vec<WriteRequest>, TableError> {
        let output = self.client.batch_write_item().request_items(&self.name, requests).send().await?;
        Ok(output.unprocessed_items().and_then(|items| items.get(&self.name)).cloned().unwrap_or_default())
    }
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

    /// The template's `ArchiveTable` declares exactly this module's schema.
    #[test]
    fn the_template_declares_this_table() {
        let template: serde_norway::Value = serde_norway::from_str(include_str!("../../../infra/template.yaml")).unwrap();
        let properties = &template["Resources"]["ArchiveTable"]["Properties"];
        let expected = cloudformation_properties();
        for (name, value) in expected.as_object().unwrap() {
            let declared: Value = serde_norway::from_value(properties[name.as_str()].clone()).unwrap();
            assert_eq!(&declared, value, "infra/template.yaml ArchiveTable.Properties.{name}");
        }
    }
}
