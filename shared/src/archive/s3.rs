//! The journal bucket in S3 (cargo feature `s3`): the `Objects` the `journal` function drains
//! to and restores from, and the void route reads.

use std::time::Duration;

use aws_sdk_s3::Client;
use aws_sdk_s3::primitives::ByteStream;

use super::objects::{ObjectError, Objects, Put};

/// The journal bucket in S3 (`STANDINGS_JOURNAL_BUCKET`). Objects are created with
/// `If-None-Match: *`, which S3 refuses (412) when the name is taken.
#[derive(Clone)]
pub struct S3Objects {
    client: Client,
    bucket: String,
}

impl S3Objects {
    pub fn new(client: Client, bucket: impl Into<String>) -> Self {
        Self { client, bucket: bucket.into() }
    }

    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    pub fn client(&self) -> &Client {
        &self.client
    }
}

/// An S3 client, up to 3 attempts of 10 s each. `AWS_ENDPOINT_URL_S3` points it at a local
/// endpoint (moto_server), which is then addressed by path, not by a bucket's host name.
pub async fn s3_client() -> Client {
    let sdk = crate::runtime::aws::sdk_config(3, Duration::from_secs(10)).await;
    let local = std::env::var("AWS_ENDPOINT_URL_S3").is_ok_and(|url| !url.is_empty());
    Client::from_conf(aws_sdk_s3::config::Builder::from(&sdk).force_path_style(local).build())
}

impl Objects for S3Objects {
    async fn put_new(&self, key: &str, body: Vec<u8>) -> Result<Put, ObjectError> {
        let sent = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .content_type("application/x-ndjson")
            .if_none_match("*")
            .body(ByteStream::from(body))
            .send()
            .await;
        match sent {
            Ok(_) => Ok(Put::Created),
            Err(error) if error.raw_response().is_some_and(|r| r.status().as_u16() == 412) => Ok(Put::Exists),
            Err(error) => Err(ObjectError(aws_sdk_s3::error::DisplayErrorContext(error).to_string())),
        }
    }

    async fn get(&self, key: &str) -> Result<Vec<u8>, ObjectError> {
        let object = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
            .map_err(|e| ObjectError(aws_sdk_s3::error::DisplayErrorContext(e).to_string()))?;
        let bytes = object.body.collect().await.map_err(|e| ObjectError(e.to_string()))?;
        Ok(bytes.into_bytes().to_vec())
    }

    async fn put(&self, key: &str, body: Vec<u8>) -> Result<(), ObjectError> {
        let sent = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .content_type("application/json")
            .body(ByteStream::from(body))
            .send()
            .await;
        sent.map(|_| ()).map_err(|error| ObjectError(aws_sdk_s3::error::DisplayErrorContext(error).to_string()))
    }

    async fn list(&self, prefix: &str) -> Result<Vec<String>, ObjectError> {
        Ok(self.list_sized(prefix).await?.into_iter().map(|(name, _)| name).collect())
    }

    async fn list_sized(&self, prefix: &str) -> Result<Vec<(String, u64)>, ObjectError> {
        let mut listed = Vec::new();
        let mut pages = self.client.list_objects_v2().bucket(&self.bucket).prefix(prefix).into_paginator().send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| ObjectError(aws_sdk_s3::error::DisplayErrorContext(e).to_string()))?;
            let sized =
                |object: &aws_sdk_s3::types::Object| object.key().map(|key| (key.to_owned(), object.size().unwrap_or(0).max(0) as u64));
            listed.extend(page.contents().iter().filter_map(sized));
        }
        Ok(listed)
    }
}
