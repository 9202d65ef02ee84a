//! The local partitions' logs on disk: opening them (and removing data not hosted here),
//! group-commit fsyncs, checkpoints, the periodic upkeep (flushes, retention, producer expiry,
//! checkpoints), and what a failed write does (its log directory goes offline).

use std::collections::BTreeMap;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use uuid::Uuid;

use crate::broker::delayed;
use crate::broker::drivers::dir_mover::recovery;
use crate::broker::drivers::quorum::applied::METADATA_DIR;
use crate::broker::partition_metadata::{read_topic_id, write_topic_id};
use crate::broker::shared::Broker;
use crate::broker::state::{Lifecycle, PartitionHandle};
use crate::io::write_file_atomic;
use crate::log::Log;
use crate::replica::Partition;

impl Broker {
    /// Opens every partition the metadata knows; removes directories of deleted topics.
    pub(super) async fn open_partitions(&self) -> io::Result<()> {
        // Serialised with the quorum's applier, which reconciles after each commit.
        let _gate = self.reconcile_gate.lock().await;
        let image = self.image();
        let known: BTreeMap<String, Uuid> = image
            .partitions_hosted_on(self.config.node_id)
            .filter_map(|((id, p), _)| {
                image
                    .topic_by_id(id)
                    .map(|t| (format!("{}-{p}", t.name), id))
            })
            .collect();
        // Moves a crash interrupted: finished or resumed below.
        let hosted = known.keys().cloned().collect();
        let resume = self.recover_moves(&hosted)?;
        for log_dir in self.dirs.online_paths() {
            for name in self.io.disk.list_dir(&log_dir)? {
                let dir = log_dir.join(&name);
                if name == METADATA_DIR
                    || known.contains_key(&name)
                    || recovery::parse_future_name(&name).is_some()
                {
                    continue;
                }
                // A directory whose topic id is not in the metadata belongs to a deleted topic
                // (the delete crashed before removing it); one of a known topic that is not
                // placed here any more, to a replica that moved away. Anything else is left
                // alone.
                if read_topic_id(&self.io, &dir).is_some() {
                    tracing::info!(dir = %dir.display(), "removing data of a partition not hosted here");
                    self.io.disk.remove_dir_all(&dir)?;
                }
            }
        }
        self.reconcile().await?;
        for ((topic, index), dest) in resume {
            self.request_dir_move(&topic, index, dest);
        }
        Ok(())
    }

    pub(super) async fn open_partition(&self, topic: &str, id: Uuid, index: i32) -> io::Result<()> {
        let dir = self.partition_dir(topic, index);
        if self.dirs.is_offline(topic, index) {
            // Its directory failed: it stays closed until a restart (the controller knows).
            return Ok(());
        }
        match read_topic_id(&self.io, &dir) {
            Some(existing) if existing != id => {
                // Same name, other topic (re-created after a delete that did not finish).
                tracing::warn!(dir = %dir.display(), "removing stale data of an earlier topic with this name");
                self.io.disk.remove_dir_all(&dir)?;
            }
            _ => {}
        }
        let config = self
            .topic_config(topic)
            .unwrap_or_else(|| self.topic_defaults());
        let now = self.io.clock.wall_ms();
        let started = self.io.clock.monotonic();
        #[allow(unused_mut)]
        let mut options = crate::replica::partition::OpenOptions::default();
        #[cfg(any(madsim, test))]
        {
            options.planted = crate::config::planted::Planted::new(self.config.planted_bug);
        }
        let (mut partition, recovery) = Partition::open(
            self.io.disk.clone(),
            &dir,
            topic,
            index,
            config,
            options,
            now,
        )
        .await?;
        let took = self.io.clock.monotonic().saturating_sub(started);
        self.metrics.log_opened(took, !recovery.clean);
        partition.set_durable_reads(self.config.fsync_before_ack);
        let replicated = self
            .image()
            .partition(id, index)
            .is_some_and(|p| p.replicas.len() > 1);
        if replicated {
            // Its log end is not what was committed (see `forget_high_watermark`).
            partition.forget_high_watermark();
        }
        // Rebuilt state (from a snapshot or the log) may name producers long idle.
        let expired = partition.expire_producers(now, self.config.producer_id_expiration_ms);
        if expired > 0 {
            tracing::debug!(topic, partition = index, expired, "expired idle producers");
        }
        #[cfg(any(madsim, test))]
        if crate::planted!(self.config, NoReadCrc) {
            partition.log_mut().set_verify_reads(false);
        }
        write_topic_id(&self.io, &dir, id).await?;
        if !recovery.clean && (recovery.truncated_at.is_some() || recovery.segments_dropped > 0) {
            tracing::warn!(
                topic,
                partition = index,
                ?recovery,
                "recovered partition after unclean shutdown"
            );
        }
        let handle = Arc::new(PartitionHandle::new(partition, id, &self.wait_budget));
        self.partitions
            .write()
            .unwrap()
            .insert((topic.to_string(), index), handle);
        Ok(())
    }

    /// fsyncs a partition up to `up_to`. Concurrent callers share one fsync (group commit).
    pub(super) async fn flush_partition(
        &self,
        handle: &PartitionHandle,
        up_to: i64,
    ) -> io::Result<()> {
        if handle.lock().log().recovery_point() >= up_to {
            return Ok(());
        }
        let _gate = handle.flush_gate.lock().await;
        let (plan, key) = {
            let (partition, lifecycle) = handle.lock_with_lifecycle();
            // A deleted partition's data is gone with its topic: nothing left to make durable.
            if lifecycle == Lifecycle::Deleted || partition.log().recovery_point() >= up_to {
                return Ok(());
            }
            let key = (partition.topic().to_string(), partition.index());
            (partition.log().flush_plan(), key)
        };
        // Checked under the gate: a flush queued behind the one that failed must not run, or
        // its fsync could "succeed" over pages the failure dropped.
        self.check_partition_online(&key.0, key.1)?;
        if crate::planted!(self.config, RecoveryPointBeforeFsync) {
            handle.lock().flushed(&plan, self.io.clock.wall_ms());
        }
        let started = self.io.clock.monotonic();
        let synced = Log::sync_files(&plan).await;
        self.metrics
            .fsync(self.io.clock.monotonic().saturating_sub(started));
        if let Err(e) = synced {
            // Still under the gate, so no later flush of this partition runs first.
            self.partition_storage_failed(&key.0, key.1, "fsync of a partition", &e);
            return Err(e);
        }
        // In durable mode this moves the high watermark, which completes this partition's
        // waiting acks=all produces and wakes its long polls (through the guard).
        handle.lock().flushed(&plan, self.io.clock.wall_ms());
        Ok(())
    }

    /// A failed fsync (or a failed write of durable bookkeeping): the log directory goes
    /// offline for good (see `health`).
    pub(super) fn storage_failed(&self, what: &str, e: &io::Error) {
        if crate::planted!(self.config, ServeAfterFsyncError) {
            return;
        }
        self.health.fail(format!("{what} failed: {e}"));
        // Every partition's waits end at once: produces with the storage error, long polls
        // re-read and answer it.
        for handle in self.all_partitions() {
            handle.waiters.close(delayed::Closed::Offline);
        }
    }

    /// An I/O error on `topic`-`index`'s files: its log directory goes offline for good, and
    /// with it only the partitions placed there (`log_dirs`); the broker as a whole once every
    /// directory has failed.
    pub(super) fn partition_storage_failed(
        &self,
        topic: &str,
        index: i32,
        what: &str,
        e: &io::Error,
    ) {
        if crate::planted!(self.config, ServeAfterFsyncError) {
            return;
        }
        let reason = format!("{what} failed: {e}");
        let Some(failed) = self.dirs.fail_dir_of(topic, index, reason.clone()) else {
            if !self.dirs.is_offline(topic, index) {
                // Not placed in any directory (cannot happen for an open partition).
                self.storage_failed(what, e);
            }
            return;
        };
        self.dir_went_offline(failed, what, e, &reason);
    }

    /// An I/O error in the log directory `id` outside any replica's files (a future log of an
    /// intra-broker move): the directory goes offline as for a replica's error.
    pub(super) fn dir_storage_failed(&self, id: Uuid, what: &str, e: &io::Error) {
        if crate::planted!(self.config, ServeAfterFsyncError) {
            return;
        }
        let reason = format!("{what} failed: {e}");
        if let Some(failed) = self.dirs.fail_dir(id, reason.clone()) {
            self.dir_went_offline(failed, what, e, &reason);
        }
    }

    fn dir_went_offline(
        &self,
        failed: crate::broker::log_dirs::Failed,
        what: &str,
        e: &io::Error,
        reason: &str,
    ) {
        if failed.all_offline {
            self.storage_failed(what, e);
            return;
        }
        tracing::error!(dir = %failed.path.display(), %reason, partitions = failed.partitions.len(),
            "log directory is offline: its partitions are not served until a restart; the \
             other directories keep serving");
        for (t, i) in &failed.partitions {
            if let Some(handle) = self.partition(t, *i) {
                handle.waiters.close(delayed::Closed::Offline);
            }
            self.stop_following(t, *i);
        }
    }

    /// [`Broker::partition_storage_failed`] for the partition behind `handle` (not locked by
    /// the caller).
    pub(super) fn handle_storage_failed(
        &self,
        handle: &PartitionHandle,
        what: &str,
        e: &io::Error,
    ) {
        let (topic, index) = {
            let p = handle.lock();
            (p.topic().to_string(), p.index())
        };
        self.partition_storage_failed(&topic, index, what, e);
    }

    /// Writes a partition's producer-state snapshot and recovery point; with `clean` (after a
    /// final flush) also the clean-shutdown marker.
    /// Skips a deleted partition. Holds the flush gate, so a delete cannot remove the directory
    /// (and a new topic of the same name take it) while the files are written.
    pub(super) async fn checkpoint_partition(
        &self,
        handle: &PartitionHandle,
        clean: bool,
    ) -> io::Result<()> {
        self.check_online()?;
        let _gate = handle.flush_gate.lock().await;
        let (checkpoint, (snapshot_path, snapshot), key) = {
            let (p, lifecycle) = handle.lock_with_lifecycle();
            if lifecycle == Lifecycle::Deleted {
                return Ok(());
            }
            let key = (p.topic().to_string(), p.index());
            self.check_partition_online(&key.0, key.1)?;
            assert!(
                !clean || lifecycle == Lifecycle::Stopping,
                "a clean close stops appends first"
            );
            (p.log().checkpoint(), p.producer_snapshot(), key)
        };
        let written = async {
            write_file_atomic(self.io.disk.as_ref(), &snapshot_path, &snapshot).await?;
            if clean {
                checkpoint.write_clean().await
            } else {
                checkpoint.write().await
            }
        }
        .await;
        if let Err(e) = &written {
            self.partition_storage_failed(&key.0, key.1, "a checkpoint", e);
        }
        written
    }
}

/// Periodic work: retention, time-based flushes, recovery-point checkpoints.
pub(super) async fn background_loop(broker: Arc<Broker>) {
    let mut shutdown = broker.shutdown_signal();
    let tick = Duration::from_millis(
        broker
            .config
            .log_flush_scheduler_interval_ms
            .clamp(10, 1000),
    );
    let retention_every =
        Duration::from_millis(broker.config.log_retention_check_interval_ms.max(10));
    let mut since_retention = Duration::ZERO;
    let mut since_checkpoint = Duration::ZERO;
    let mut since_expiry = Duration::ZERO;
    let expiry_every = Duration::from_millis(
        broker
            .config
            .producer_id_expiration_check_interval_ms
            .max(10),
    );
    let checkpoint_every = Duration::from_millis(
        broker
            .config
            .log_flush_offset_checkpoint_interval_ms
            .max(10),
    );
    loop {
        tokio::select! {
            biased;
            _ = broker.io.clock.sleep(tick) => {}
            _ = shutdown.changed() => return,
        }
        if *shutdown.borrow() {
            return;
        }
        if broker.is_storage_offline() {
            // Nothing is written to an offline directory; the process waits to be restarted.
            continue;
        }
        broker.reconcile_if_behind().await;
        since_retention += tick;
        since_checkpoint += tick;
        since_expiry += tick;
        let now = broker.io.clock.wall_ms();
        for handle in broker.online_partitions() {
            let (due, end) = {
                let p = handle.lock();
                let c = p.config();
                (
                    p.log().flush_due(c.flush_messages, c.flush_ms, now),
                    p.log().end_offset(),
                )
            };
            if due {
                if let Err(e) = broker.flush_partition(&handle, end).await {
                    tracing::error!(error = %e, "scheduled flush failed");
                }
            }
        }
        if since_retention >= retention_every {
            since_retention = Duration::ZERO;
            for handle in broker.online_partitions() {
                let (mut p, lifecycle) = handle.lock_with_lifecycle();
                // A deleted partition's directory may already hold a new topic's segments.
                if lifecycle == Lifecycle::Deleted {
                    continue;
                }
                match p.apply_retention(now) {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(
                        topic = p.topic(),
                        partition = p.index(),
                        segments = n,
                        "retention deleted segments"
                    ),
                    Err(e) => tracing::error!(error = %e, "retention failed"),
                }
            }
        }
        if since_expiry >= expiry_every {
            since_expiry = Duration::ZERO;
            let expiration_ms = broker.config.producer_id_expiration_ms;
            for handle in broker.online_partitions() {
                let mut p = handle.lock();
                let expired = p.expire_producers(now, expiration_ms);
                if expired > 0 {
                    tracing::debug!(
                        topic = p.topic(),
                        partition = p.index(),
                        expired,
                        "expired idle producers (producer.id.expiration.ms)"
                    );
                }
            }
        }
        if since_checkpoint >= checkpoint_every {
            since_checkpoint = Duration::ZERO;
            for handle in broker.online_partitions() {
                if let Err(e) = broker.checkpoint_partition(&handle, false).await {
                    tracing::warn!(error = %e, "partition checkpoint failed");
                }
            }
        }
    }
}
