//! Season archives: freezing a finished season in Redis (`freeze`), the DynamoDB table that
//! keeps it (`table`), the job that copies one into the other (`job`) and when it runs
//! (`schedule`); `table` and `job` need the cargo feature `dynamodb`.

pub mod freeze;
#[cfg(feature = "dynamodb")]
pub mod job;
pub mod schedule;
#[cfg(feature = "dynamodb")]
pub mod table;
