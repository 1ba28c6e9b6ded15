//! Season archives: freezing a finished season in Redis (`freeze`), the DynamoDB table that
//! keeps it (`table`), the job that copies one into the other (`job`) and when it runs
//! (`schedule`); `table` and `job` need the cargo feature `dynamodb`. The journal's objects
//! (`objects`: names, order, lines) and its S3 bucket (`s3`, cargo feature `s3`; `probe`, cargo
//! feature `journal-probe`, asks it only whether it holds a board); the event bus
//! rank-change notifications go to (`bus`; EventBridge with cargo feature `eventbridge`).

pub mod bus;
#[cfg(feature = "dynamodb")]
pub mod ends_known;
#[cfg(feature = "dynamodb")]
pub mod error;
pub mod freeze;
#[cfg(feature = "dynamodb")]
pub mod job;
pub mod objects;
#[cfg(feature = "journal-probe")]
pub mod probe;
#[cfg(feature = "s3")]
pub mod s3;
pub mod schedule;
#[cfg(feature = "dynamodb")]
pub mod table;
#[cfg(feature = "dynamodb")]
pub mod tournament_end;
#[cfg(feature = "dynamodb")]
pub mod tournament_prune;
