//! Drives the log cleaner (`log.cleaner.enable`): one task, started with the broker, that
//! repeatedly picks the compacted partition with the dirtiest log (highest dirty ratio, a
//! `max.compaction.lag.ms` deadline first), runs one pass over it, and sleeps
//! `log.cleaner.backoff.ms` when nothing is due. `log.cleaner.threads` is accepted but one task
//! does all the work (see `CleanerSettings`).
//!
//! No partition lock is held across an await: the job is taken under the lock, the pass reads
//! and writes without it, and only the synchronous swap runs under it again. The partition's
//! flush gate is held from the intent write to the checkpoint, so a topic delete (which takes
//! the gate) never removes the directory in the middle of a swap. A pass that finds a batch it
//! cannot decode marks the partition uncleanable (skipped until restart, as Kafka does); a
//! failed write, rename or fsync takes the log directory offline like any storage failure.

use std::collections::BTreeSet;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use crate::broker::{shared::Broker, state::Lifecycle, state::PartitionHandle};
use crate::log::cleaner::{CleanJob, PassStats, Throttle};

/// At most this many passes back to back before the task yields for one scheduler tick: the
/// cleaner is background work.
const PASSES_BEFORE_YIELD: u32 = 4;

pub(crate) async fn cleaner_loop(broker: Arc<Broker>) {
    let settings = broker.config.log_cleaner.clone();
    if !settings.enable {
        return;
    }
    let clock = broker.io.clock.clone();
    let mut throttle = Throttle::new(settings.io_max_bytes_per_second, clock.monotonic());
    let mut uncleanable = BTreeSet::new();
    let mut shutdown = broker.shutdown_signal();
    let backoff = Duration::from_millis(settings.backoff_ms.max(1));
    let mut passes = 0u32;
    loop {
        let worked = !broker.is_storage_offline()
            && clean_dirtiest(&broker, &mut throttle, &mut uncleanable).await;
        passes = if worked { passes + 1 } else { 0 };
        let pause = if !worked {
            backoff
        } else if passes >= PASSES_BEFORE_YIELD {
            passes = 0;
            Duration::from_millis(10)
        } else {
            Duration::ZERO
        };
        tokio::select! {
            biased;
            _ = clock.sleep(pause) => {}
            _ = shutdown.changed() => return,
        }
        if *shutdown.borrow() {
            return;
        }
    }
}

/// A pass rewrites only fsynced data (else a power loss could take back a record that made an
/// older, durable one disposable), but by default nothing is fsynced before shutdown. So, as
/// Kafka flushes a segment when it rolls, the cleaner fsyncs a compacted partition whose closed
/// segments are not all durable yet: one fsync per roll.
async fn make_closed_segments_durable(broker: &Broker) {
    for handle in broker.all_partitions() {
        let behind = {
            let (p, lifecycle) = handle.lock_with_lifecycle();
            let log = p.log();
            (lifecycle == Lifecycle::Open
                && p.config().is_compacted()
                && log.recovery_point() < log.active_base_offset())
            .then(|| log.active_base_offset())
        };
        if let Some(up_to) = behind {
            if let Err(e) = broker.flush_partition(&handle, up_to).await {
                tracing::warn!(error = %e, "cleaner: flushing closed segments failed");
            }
        }
    }
}

/// Runs one pass over the dirtiest due partition; false when none was due.
async fn clean_dirtiest(
    broker: &Broker,
    throttle: &mut Throttle,
    uncleanable: &mut BTreeSet<(String, i32)>,
) -> bool {
    make_closed_segments_durable(broker).await;
    let now = broker.io.clock.wall_ms();
    let mut best: Option<(bool, f64, Arc<PartitionHandle>, CleanJob)> = None;
    for handle in broker.all_partitions() {
        let job = {
            let (p, lifecycle) = handle.lock_with_lifecycle();
            let name = (p.topic().to_string(), p.index());
            if lifecycle != Lifecycle::Open || uncleanable.contains(&name) {
                continue;
            }
            match p.clean_job(now) {
                Ok(job) => job,
                Err(e) => {
                    tracing::warn!(topic = p.topic(), partition = p.index(), error = %e,
                        "cannot plan a cleaner pass");
                    None
                }
            }
        };
        let Some(job) = job else { continue };
        let rank = (job.range.forced, job.range.dirty_ratio);
        if best.as_ref().is_none_or(|b| rank > (b.0, b.1)) {
            best = Some((rank.0, rank.1, handle, job));
        }
    }
    let Some((_, _, handle, job)) = best else {
        return false;
    };
    let (topic, index) = {
        let p = handle.lock();
        (p.topic().to_string(), p.index())
    };
    let map_bytes =
        usize::try_from(broker.config.log_cleaner.dedupe_buffer_size).unwrap_or(usize::MAX);
    let range = job.range;
    // A replica move may swap the log for one in another directory while the pass runs: the
    // pass's result (and its errors, from the old directory) are then void.
    let job_dir = job.dir.clone();
    let moved = || handle.lock().log().dir() != job_dir;
    let cleaned = match job
        .run(map_bytes, now, broker.io.clock.as_ref(), throttle)
        .await
    {
        Ok(Some(cleaned)) => cleaned,
        Ok(None) => {
            uncleanable.insert((topic, index));
            return false;
        }
        Err(e) if e.kind() == io::ErrorKind::InvalidData => {
            tracing::error!(topic, partition = index, error = %e,
                "log cleaner cannot read this partition; it is uncleanable until restart");
            uncleanable.insert((topic, index));
            return true;
        }
        Err(_) if moved() => return false,
        Err(e) => {
            broker.partition_storage_failed(&topic, index, "a log cleaner pass", &e);
            return false;
        }
    };
    let installed = async {
        let _gate = handle.flush_gate.lock().await;
        if handle.lock_with_lifecycle().1 != Lifecycle::Open || moved() {
            // Deleted or stopping: the directory is no longer ours to change.
            return Ok(None);
        }
        cleaned.write_intent().await?;
        let checkpoint = {
            let (mut p, lifecycle) = handle.lock_with_lifecycle();
            if lifecycle != Lifecycle::Open {
                return Ok(None);
            }
            p.install_cleaned(&cleaned)?
        };
        cleaned.commit(checkpoint).await?;
        io::Result::Ok(Some(checkpoint))
    }
    .await;
    match installed {
        Ok(Some(checkpoint)) => {
            let PassStats {
                bytes_read,
                bytes_written,
                batches_dropped,
                keys_mapped,
                map_full,
                ..
            } = cleaned.stats;
            tracing::info!(topic, partition = index, first_dirty = range.first_dirty,
                end = cleaned.end_offset, next_first_dirty = ?checkpoint.first_dirty,
                bytes_read, bytes_written, batches_dropped, keys_mapped, map_full,
                "log cleaner pass done");
            true
        }
        Ok(None) => true,
        Err(e) => {
            broker.partition_storage_failed(&topic, index, "a log cleaner swap", &e);
            false
        }
    }
}
