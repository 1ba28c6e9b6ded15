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
//! | a running season was seen with members | `ARCHIVE#<board>#<season>` | `SEEN` | – | – |
//! | a season's distribution (a histogram per bucket count) | `ARCHIVE#<board>#<season>` | `DISTRIBUTION` | – | – |
//! | a shard's checkpoint | `ARCHIVE#<board>#<season>` | `SHARD#<total>#<index>` | – | – |
//!
//! Each access pattern is one Query: a season's top by rank (`pk`, `sk BETWEEN` two ranks), a
//! user's standing in a season (`gsi1`, both keys equal), a user's history (`gsi1`, `gsi1pk`).
//! Board names, season ids and user ids never contain `#` (ids are allow-listed), so the
//! separators are unambiguous.
//!
//! `schema` holds the table's definition, `items` the item layout, `queries` every read and
//! write on it.

mod items;
mod queries;
mod schema;

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::{DisplayErrorContext, SdkError};
use aws_sdk_dynamodb::types::{AttributeValue, WriteRequest};

pub use items::{ArchivedEntry, CompletedSeason, MAX_SHARDS, Shard, entry_item, put_request};
pub use schema::{GSI1, GSI1_PK, GSI1_SK, PK, SK, cloudformation_properties};

/// The environment variable naming the table (docs/configuration.md).
pub const TABLE_ENV: &str = "STANDINGS_TABLE";
/// The most items one BatchWriteItem takes.
pub const MAX_BATCH_WRITE: usize = 25;

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

/// Where the archive job's BatchWriteItem calls go. Narrow on purpose: tests wrap it to inject
/// crashes and unprocessed items on top of the real DynamoDB path.
pub trait ArchiveSink: Send + Sync {
    /// One BatchWriteItem of at most [`MAX_BATCH_WRITE`] requests; answers the requests
    /// DynamoDB left unprocessed (to be retried by the caller).
    fn batch_write(&self, requests: Vec<WriteRequest>) -> impl Future<Output = Result<Vec<WriteRequest>, TableError>> + Send;
}

type Item = HashMap<String, AttributeValue>;

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
        Self::new(Client::new(&crate::runtime::aws::sdk_config(5, attempt_timeout).await), name)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn client(&self) -> &Client {
        &self.client
    }
}

impl ArchiveSink for SeasonTable {
    async fn batch_write(&self, requests: Vec<WriteRequest>) -> Result<Vec<WriteRequest>, TableError> {
        let output = self.client.batch_write_item().request_items(&self.name, requests).send().await?;
        Ok(output.unprocessed_items().and_then(|items| items.get(&self.name)).cloned().unwrap_or_default())
    }
}
