//! Season archives: freezing a finished season in Redis (`freeze`), the DynamoDB table that
//! keeps it (`table`) and the job that copies one into the other (`job`); the last two need the
//! cargo feature `dynamodb`.

pub mod freeze;
#[cfg(feature = "dynamodb")]
pub mod job;
#[cfg(feature = "dynamodb")]
pub mod table;
