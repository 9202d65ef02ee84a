//! TEMPORARY SHIM (repl-follower): the seam repl-leader lands for real. Dropped when main has it.

use super::{Partition, Role};
use crate::replica::isr::FetchRefused;

impl Partition {
    /// Leader side of a follower's Fetch at `fetch_offset`.
    pub fn follower_fetched(
        &mut self,
        _replica: i32,
        fetch_offset: i64,
        _broker_epoch: i64,
        _now_ms: i64,
    ) -> Result<(), FetchRefused> {
        if self.role != Role::Leader {
            return Err(FetchRefused::NotReplica);
        }
        if fetch_offset > self.log.end_offset() {
            return Err(FetchRefused::PastLogEnd {
                fetch_offset,
                log_end: self.log.end_offset(),
            });
        }
        Ok(())
    }
}
