//! Damage found after open trusted a segment. A clean shutdown (or a recovery point past a
//! segment) lets `Log::open` take a segment's indexes and end without scanning it, as Kafka's
//! `LogLoader` does. When a walk at open (the leader-epoch rebuild, the producer-state rebuild,
//! an index lookup) then meets damage in such a segment, that trust was misplaced: the segment
//! goes through the same full recovery an unclean start gives it (cut at the first bad batch,
//! indexes rebuilt), the segments after a cut are dropped (offsets must stay contiguous), the
//! cut is made durable and the walk runs again. Nothing before the damage is lost, and the open
//! is never refused for it.

use std::io;

use super::segment::{Damage, Segment};
use super::{Log, Recovery};

impl Log {
    /// Runs `walk` over the log, repairing the segments it finds damaged (see the module
    /// comment), and then records the recovery point and the epoch cache of the repaired log.
    /// For a read-only pass at open, before anything is appended (`Partition::open`'s
    /// producer-state rebuild).
    pub async fn repairing<T>(
        &mut self,
        recovery: &mut Recovery,
        now_ms: i64,
        walk: impl FnMut(&Log) -> io::Result<T>,
    ) -> io::Result<T> {
        let (out, repaired) = self.repair_walk(recovery, now_ms, walk).await?;
        if repaired {
            // A later start must not trust the checkpoint's old recovery point, which lies
            // past the cut: whatever is appended after the cut would be taken unscanned.
            self.checkpoint().write().await?;
        }
        Ok(out)
    }

    /// [`Log::repairing`] without the checkpoint (open writes it once the epochs are loaded).
    /// Returns the walk's result and whether any segment was repaired.
    pub(super) async fn repair_walk<T>(
        &mut self,
        recovery: &mut Recovery,
        now_ms: i64,
        mut walk: impl FnMut(&Log) -> io::Result<T>,
    ) -> io::Result<(T, bool)> {
        let mut repaired = false;
        // Bounded: each repair fully recovers one segment, which a walk then finds sound, and
        // only ever removes segments after it.
        for _ in 0..=self.segments.len() {
            let damage = match walk(self) {
                Ok(out) => return Ok((out, repaired)),
                Err(e) => match Damage::of(&e) {
                    Some(damage) => damage.clone(),
                    None => return Err(e),
                },
            };
            self.repair(&damage, recovery, now_ms).await?;
            repaired = true;
        }
        Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{}: damage remains after repairing every segment",
                self.dir.display()
            ),
        ))
    }

    /// Sends the segment `damage` names through full recovery and makes the result durable.
    async fn repair(
        &mut self,
        damage: &Damage,
        recovery: &mut Recovery,
        now_ms: i64,
    ) -> io::Result<()> {
        let base = damage.segment;
        let Some(old) = self.segments.remove(&base) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("damage reported in a segment the log does not have: {damage}"),
            ));
        };
        tracing::warn!(dir = %self.dir.display(), segment = base, position = damage.position,
            reason = %damage.reason, "damage in a segment trusted at open; recovering it");
        let gaps = old.has_gaps();
        drop(old);
        let interval = self.config.index_interval_bytes;
        let (segment, stop) = Segment::open(
            self.disk.as_ref(),
            &self.dir,
            base,
            interval,
            true,
            gaps,
            now_ms,
        )?;
        recovery.segments_scanned += 1;
        let next = self.segments.range(base + 1..).next().map(|(&b, _)| b);
        // The full scan may end elsewhere than the trusted end did (a wrong index entry), so
        // the next segment must still follow on.
        let follows = next.is_none_or(|next| {
            segment.next_offset() == next || (gaps && segment.next_offset() < next)
        });
        if let Some(stop) = &stop {
            recovery.truncated_at = Some((base, stop.position, stop.reason.clone()));
        }
        let files = segment.files();
        self.insert_segment(base, segment);
        for file in files {
            file.sync().await?;
        }
        if stop.is_some() || !follows {
            let later: Vec<i64> = self.segments.range(base + 1..).map(|(&b, _)| b).collect();
            for b in later {
                self.segments.remove(&b);
                Segment::remove_files(self.disk.as_ref(), &self.dir, b)?;
                self.dir_changes += 1;
                recovery.segments_dropped += 1;
            }
        }
        // A stored log start past the new end restarts the log there (offsets below a durable
        // start are never served again), as at open.
        let start = self.start_offset;
        self.apply_stored_start_offset(Some(start), now_ms)?;
        self.disk.sync_dir(&self.dir).await?;
        self.dir_changes_synced = self.dir_changes;
        let end = self.end_offset();
        self.recovery_point = self.recovery_point.min(end).max(self.first_base());
        recovery.checkpointed = recovery.checkpointed.min(end);
        self.cleaner.first_dirty = self.cleaner.first_dirty.map(|d| d.min(end));
        let changed = self.epochs.truncate_from_end(end);
        self.epochs_changed(changed);
        self.check_invariants();
        Ok(())
    }
}
