//! Live reads of a season the archive has closed (docs/archival.md#live-routes): the archive's
//! freeze renames a season's set to the frozen one and records `closed|season:<id>` in the
//! guard in one script, shard by shard, and the release frees the frozen set later. A live read
//! of it after the freeze would answer an empty board, or on a board spread over shards the
//! shards not frozen yet; it answers `SeasonClosed` (410 `period_closed`) instead.

use futures::future::try_join_all;

use super::Reader;
use crate::domain::config::Board;
use crate::domain::guard;
use crate::domain::period::{Period, PeriodKind};
use crate::redis::error::StoreError;
use crate::redis::keys::Layout;

impl Reader {
    /// After a read of `period` on `layout`: `SeasonClosed` when any shard's guard says the
    /// archive closed it. Asked after the read, so a freeze between the two is seen: a read that
    /// passes this check was made before any shard's freeze (each records its close with its
    /// rename). Only an archived board's seasons that have ended on the function's clock are
    /// asked: the season running now is never closed by the archive, and costs no round trip.
    pub(super) async fn refuse_closed(&self, board: &Board, layout: &Layout, period: &Period) -> Result<(), StoreError> {
        let ended = period.end.is_some_and(|end| end <= (self.clock)());
        if self.frozen || !board.archive || period.kind != PeriodKind::Season || !ended {
            return Ok(());
        }
        let field = guard::closed_field(period);
        let conn = self.store.connection().await?;
        let asked = layout.all().into_iter().map(|keys| {
            let (mut conn, field) = (conn.clone(), field.clone());
            async move { redis::cmd("HEXISTS").arg(keys.guard()).arg(field).query_async::<bool>(&mut conn).await }
        });
        if try_join_all(asked).await?.contains(&true) {
            return Err(StoreError::SeasonClosed { board: board.name.clone(), season: period.id.clone() });
        }
        Ok(())
    }
}
