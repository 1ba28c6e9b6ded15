//! The journal's jobs (docs/journal.md), run by the `journal` function: the drain of each
//! board's journal to S3 and of its notices to the event bus, the restore of boards from the
//! journal, and the verify and rule dry-runs that replay it into shadow keys.

pub mod births;
mod closed_seasons;
mod drain;
mod drain_report;
mod error;
mod generations;
mod legacy_profiles;
mod marks;
mod notices;
mod older_kept;
mod report;
mod rescale;
mod reshard;
mod reshard_check;
mod reshard_lines;
mod reshard_start;
mod reshard_touched;
mod restore;
mod shadow;
mod stored;
mod switches;
mod windows;

pub use drain::{BoardDrain, CHUNK_ENTRIES, DRAINED_METRIC, DrainError, DrainReport, Drainer, LAG_METRIC, LOST_METRIC};
pub use marks::Marks;
pub use notices::{NOTICE_CHUNK, NOTICE_LAG_METRIC, NOTICES_DROPPED_METRIC, NOTICES_SENT_METRIC, NoticeError, Notifier};
pub use reshard::{ReshardReport, Resharder};
pub use restore::{BoardRestore, RestoreError, RestoreReport, Restorer, Status};
pub use shadow::{Checker, DryRunReport, DryRunRequest, MISMATCH_METRIC, VerifyReport};
