//! HTTP glue shared by the API functions (cargo feature `http`; the scheduled functions go
//! without it): the error mapping, extractors, auth, the router's finishing layers and the
//! Lambda runner.

mod auth;
mod cache;
mod error;
mod extract;
pub mod routing;
mod runner;

pub use auth::{ADMIN_SCOPE, AuthMode, Subject, WRITE_SCOPE, require_admin, require_write};
pub use cache::with_cache;
pub use error::{ApiError, ErrorDetail, STORE_FULL, ingest_status, refusal_status, score_status};
pub use extract::{JsonBody, QueryParams, page_params};
pub use runner::{finish, run_on_lambda};

/// Largest request body accepted by the API functions.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;
