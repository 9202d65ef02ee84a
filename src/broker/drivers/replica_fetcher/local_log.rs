//! What a follower's steps do to its local partition, each checked under the partition's lock
//! against the position the core decided on: reading positions, appending the leader's batches
//! (and following its high watermark), truncating durably, starting over at the leader's log
//! start. Results go back to the core as
//! [`StepResult`]s; the driver's bookkeeping is asserted here (an append never shrinks the log,
//! a truncation never lengthens it, the high watermark stays within the log).

use std::sync::Arc;

use crate::broker::replication_events::ReplicationEvent;
use crate::broker::{shared::Broker, state::PartitionHandle};
use crate::replica::fetcher::{Position, StepResult, ToRead};
use crate::replica::partition::{FollowerAppendError, Role, TruncateError};

type Key = (String, i32);

/// File (planted `truncate-to-hw-on-restart` only) standing in for Kafka's
/// `replication-offset-checkpoint`: the follower's high watermark, for its next start.
const HW_CHECKPOINT: &str = "replication-offset-checkpoint";

/// Where each partition to read stands, read under its lock. A partition not (yet) a follower
/// at the fetcher's epoch, or with a truncation not yet durable, is left out this round.
pub(super) async fn positions(broker: &Broker, list: &[ToRead]) -> Vec<Position> {
    let mut out = Vec::with_capacity(list.len());
    for r in list {
        let key = &r.key;
        let Some(handle) = broker
            .partition(&key.0, key.1)
            .filter(|h| h.topic_id == r.topic_id)
        else {
            continue;
        };
        if r.truncate_to_hw_first {
            // Planted: the pre-KIP-101 follower cuts its log to its high watermark when it
            // starts following (on restart, to the one it checkpointed).
            let target = planted_checkpointed_hw(broker, &handle, key);
            truncate(broker, &handle, r.leader_epoch, None, target).await;
        }
        if durable_fetches(broker) {
            // Durable mode: the fetch offset tells the leader what is held here durably, so
            // what an earlier append left unsynced (its flush failed) is synced first.
            let (durable, end) = {
                let p = handle.lock();
                (p.durable_log_end(), p.log_end_offset())
            };
            if durable < end && broker.flush_partition(&handle, end).await.is_err() {
                continue;
            }
        }
        let Some(p) = handle.lock_open() else {
            continue;
        };
        if durable_fetches(broker) && p.durable_log_end() < p.log_end_offset() {
            continue;
        }
        if p.role() != Role::Follower
            || p.leader_epoch() != r.leader_epoch
            || p.pending_truncation().is_some()
        {
            continue;
        }
        out.push(Position {
            topic: key.0.clone(),
            topic_id: r.topic_id,
            partition: key.1,
            leader_epoch: r.leader_epoch,
            fetch_offset: p.log_end_offset(),
            last_fetched_epoch: p.log().latest_epoch(),
            log_start_offset: p.log_start_offset(),
        });
    }
    out
}

/// The partition's handle if it is still open under the position's topic id.
pub(super) fn handle_at(broker: &Broker, pos: &Position) -> Option<Arc<PartitionHandle>> {
    broker
        .partition(&pos.topic, pos.partition)
        .filter(|h| h.topic_id == pos.topic_id)
}

/// Whether the partition is still a follower at `leader_epoch` whose log ends at `end`, no
/// truncation pending: where the core's step found it.
fn follows_at(p: &crate::replica::Partition, leader_epoch: i32, end: i64) -> bool {
    p.role() == Role::Follower
        && p.leader_epoch() == leader_epoch
        && p.log_end_offset() == end
        && p.pending_truncation().is_none()
}

/// Whether the partition is still where `pos` says (a follower at that epoch, same log end).
pub(super) fn at_position(p: &crate::replica::Partition, pos: &Position) -> bool {
    follows_at(p, pos.leader_epoch, pos.fetch_offset)
}

/// Whether the first batch of `records` holds `offset` or ends past it.
fn first_batch_reaches(records: &[u8], offset: i64) -> bool {
    crate::log::batch::iter(records)
        .next()
        .and_then(|b| b.ok())
        .is_some_and(|(_, h)| h.last_offset() >= offset)
}

/// Appends the leader's batches and follows its high watermark.
pub(super) async fn append(
    broker: &Broker,
    handle: &PartitionHandle,
    pos: &Position,
    records: &[u8],
    leader_high_watermark: i64,
) -> StepResult {
    /// What the append needs before it is tried again.
    enum Next {
        Appended,
        GapMarker(crate::log::cleaner::CleanerCheckpoint, std::path::PathBuf),
        StartAt(i64),
    }
    let mut appended_to = None;
    // Where the log must end for the batches to go on it: the fetch offset, or a restarted
    // log's start.
    let mut expected_end = pos.fetch_offset;
    // Three tries at most: once more after the log was made to accept offset gaps, once more
    // after an empty log restarted at the first batch's base.
    for _ in 0..3 {
        let next = {
            let Some(mut p) = handle.lock_open() else {
                return StepResult::Stale;
            };
            if !follows_at(&p, pos.leader_epoch, expected_end) {
                return StepResult::Stale;
            }
            match p.append_as_follower(records, broker.io.clock.wall_ms()) {
                Ok(done) => {
                    appended_to = done.map(|a| a.last_offset + 1);
                    p.follow_high_watermark(leader_high_watermark);
                    // The driver's bookkeeping: the log only grew from the fetch offset (or
                    // from a restart below it, by the batch that straddles it), and the high
                    // watermark followed no further than it.
                    assert!(
                        p.log_end_offset() >= pos.fetch_offset,
                        "an append shrank the log"
                    );
                    assert!(p.high_watermark() <= p.log_end_offset());
                    #[cfg(any(madsim, test))]
                    if crate::planted!(broker.config, TruncateToHwOnRestart) {
                        planted_note_hw(broker, &p);
                    }
                    Next::Appended
                }
                Err(FollowerAppendError::NeedsGapMarker) => {
                    Next::GapMarker(p.log().gap_marker(), p.log().dir().to_path_buf())
                }
                // A log restarted at the leader's log start, inside the batch the leader
                // serves whole: the empty log starts again at that batch's base.
                Err(FollowerAppendError::NotAtLogEnd { expected, found })
                    if found < expected
                        && p.log_start_offset() == expected
                        && first_batch_reaches(records, expected) =>
                {
                    Next::StartAt(found)
                }
                Err(FollowerAppendError::Storage(e)) => {
                    drop(p);
                    broker.handle_storage_failed(handle, "a follower append", &e);
                    return StepResult::Failed;
                }
                Err(e) => {
                    tracing::warn!(topic = %pos.topic, partition = pos.partition, error = %e,
                        "the leader's batches were refused");
                    return StepResult::Failed;
                }
            }
        };
        match next {
            Next::Appended => break,
            Next::GapMarker(marker, dir) => {
                // The first gap (a compacted leader): recovery must accept gaps before any
                // gapped batch can be on disk.
                let _gate = handle.flush_gate.lock().await;
                if let Err(e) = marker.write(broker.io.disk.as_ref(), &dir).await {
                    broker.handle_storage_failed(handle, "the follower's gap marker", &e);
                    return StepResult::Failed;
                }
                match handle.lock_open() {
                    Some(mut p) => p.log_mut().allow_gaps(),
                    None => return StepResult::Stale,
                }
            }
            Next::StartAt(base) => {
                match restart_at(broker, handle, pos.leader_epoch, expected_end, base).await {
                    StepResult::Done => expected_end = base,
                    other => return other,
                }
            }
        }
    }
    if let Some(end) = appended_to {
        if durable_fetches(broker) {
            // Durable mode: the next fetch offset (which the leader counts towards its high
            // watermark) covers only what is fsynced here.
            if let Err(e) = broker.flush_partition(handle, end).await {
                tracing::warn!(topic = %pos.topic, partition = pos.partition, error = %e,
                    "follower flush failed");
                return StepResult::Failed;
            }
        }
    }
    StepResult::Done
}

/// Moves the follower's log start to the leader's `leader_log_start` (capped at its high
/// watermark), durably first, as DeleteRecords does at the leader: records deleted there are
/// never served here again, not after a leader change, a kill -9 or a power loss. The next
/// fetch reports the new start, which the leader's low watermark waits for.
pub(super) async fn adopt_log_start(
    broker: &Broker,
    handle: &PartitionHandle,
    leader_log_start: i64,
) -> StepResult {
    // The gate DeleteRecords and a partition's deletion take: the file is never written into
    // a deleted (or re-created) partition's directory.
    let _gate = handle.log_start_gate.lock().await;
    let write = match handle.lock_open() {
        Some(p) => match p.follower_log_start_plan(leader_log_start) {
            Some(write) => write,
            None => return StepResult::Done,
        },
        None => return StepResult::Stale,
    };
    if let Err(e) = write.write().await {
        broker.handle_storage_failed(handle, "a follower's log start write", &e);
        return StepResult::Failed;
    }
    let Some(mut p) = handle.lock_open() else {
        return StepResult::Stale;
    };
    // Meanwhile the high watermark may have gone down (a truncation at a new epoch): the
    // start in memory then waits for the next answer (a restart opens the log at the durable
    // one, which the leader had already deleted below).
    if write.offset() > p.high_watermark() {
        return StepResult::Stale;
    }
    if let Err(e) = p.advance_log_start(write.offset()) {
        tracing::warn!(topic = p.topic(), partition = p.index(), error = %e,
            "could not delete segments below the follower's log start");
    }
    tracing::debug!(
        topic = p.topic(),
        partition = p.index(),
        log_start_offset = p.log_start_offset(),
        "follower adopted the leader's log start"
    );
    StepResult::Done
}

/// Cuts the log to `to` if it is still a follower at `leader_epoch` ending at `from` (`None`:
/// the planted cut, unchecked), and makes the cut durable (under the flush gate, so no
/// checkpoint of the old state lands after it) before anything is appended again.
pub(super) async fn truncate(
    broker: &Broker,
    handle: &PartitionHandle,
    leader_epoch: i32,
    expected_end: Option<i64>,
    to: i64,
) -> StepResult {
    let _gate = handle.flush_gate.lock().await;
    let (plan, from) = {
        let Some(mut p) = handle.lock_open() else {
            return StepResult::Stale;
        };
        let from = p.log_end_offset();
        if expected_end.is_some_and(|end| !follows_at(&p, leader_epoch, end)) {
            return StepResult::Stale;
        }
        tracing::info!(
            topic = p.topic(),
            partition = p.index(),
            from,
            to,
            "log diverges from the leader's; truncating"
        );
        match p.truncate_to(to) {
            Ok(Some(plan)) => (plan, from),
            Ok(None) => return StepResult::Done,
            Err(TruncateError::Storage(e)) => {
                drop(p);
                broker.handle_storage_failed(handle, "a follower truncation", &e);
                return StepResult::Failed;
            }
            Err(e) => {
                tracing::warn!(topic = p.topic(), partition = p.index(), to, error = %e,
                    "truncation refused");
                return StepResult::Failed;
            }
        }
    };
    if let Err(e) = plan.make_durable().await {
        broker.handle_storage_failed(handle, "a follower truncation", &e);
        return StepResult::Failed;
    }
    {
        let mut p = handle.lock();
        p.truncation_durable(&plan, broker.io.clock.wall_ms());
        // The driver's bookkeeping: a truncation never lengthens the log.
        assert!(
            p.log_end_offset() <= from,
            "a truncation lengthened the log"
        );
    }
    broker.replication_events.emit(|| {
        let p = handle.lock();
        ReplicationEvent::Truncated {
            topic: p.topic().to_string(),
            partition: p.index(),
            leader_epoch,
            from,
            to,
        }
    });
    StepResult::Done
}

/// Empties the log and starts it at the leader's log start `at` (Kafka's
/// `truncateFullyAndStartAt`) if it is still a follower at `leader_epoch` whose log ends at
/// `from`: the new start durable first (a crash after it reopens the log there, empty), then
/// the segments go, and the directory is synced before anything is appended. Under both gates:
/// no checkpoint of the old log (flush gate), no DeleteRecords or deletion write of the start
/// (log-start gate) in between.
pub(super) async fn restart_at(
    broker: &Broker,
    handle: &PartitionHandle,
    leader_epoch: i32,
    from: i64,
    at: i64,
) -> StepResult {
    let _gate = handle.flush_gate.lock().await;
    let _start_gate = handle.log_start_gate.lock().await;
    let still_behind = |p: &crate::replica::Partition| follows_at(p, leader_epoch, from);
    let write = {
        let Some(p) = handle.lock_open() else {
            return StepResult::Stale;
        };
        if !still_behind(&p) {
            return StepResult::Stale;
        }
        match p.restart_plan(at) {
            Ok(write) => write,
            Err(e) => {
                tracing::warn!(topic = p.topic(), partition = p.index(), at, error = %e,
                    "restart at the leader's log start refused");
                return StepResult::Stale;
            }
        }
    };
    if let Err(e) = write.write().await {
        broker.handle_storage_failed(handle, "a follower's restart at the leader's log start", &e);
        return StepResult::Failed;
    }
    // Decided under the lock, carried out after it (no guard lives across an `.await`).
    let restarted = match handle.lock_open() {
        None => return StepResult::Stale,
        // Its role moved while the start was written (the gates do not hold off a role
        // change).
        Some(p) if !still_behind(&p) => Err(p.log().start_offset_write(p.log_start_offset())),
        Some(mut p) => match p.restart_at(at, broker.io.clock.wall_ms()) {
            Ok(plan) => Ok(plan),
            Err(TruncateError::Storage(e)) => {
                drop(p);
                broker.handle_storage_failed(
                    handle,
                    "a follower's restart at the leader's log start",
                    &e,
                );
                return StepResult::Failed;
            }
            Err(e) => {
                tracing::warn!(topic = p.topic(), partition = p.index(), at, error = %e,
                    "restart at the leader's log start refused");
                Err(p.log().start_offset_write(p.log_start_offset()))
            }
        },
    };
    let plan = match restarted {
        Ok(plan) => plan,
        // Not restarted: the durable start goes back to where the log starts.
        Err(undo) => {
            if let Err(e) = undo.write().await {
                broker.handle_storage_failed(handle, "a follower's log start write", &e);
                return StepResult::Failed;
            }
            return StepResult::Stale;
        }
    };
    if let Err(e) = plan.make_durable().await {
        broker.handle_storage_failed(handle, "a follower's restart at the leader's log start", &e);
        return StepResult::Failed;
    }
    let mut p = handle.lock();
    p.truncation_durable(&plan, broker.io.clock.wall_ms());
    assert_eq!(
        p.log_end_offset(),
        at,
        "a restarted log ends where it starts"
    );
    StepResult::Done
}

/// Planted `truncate-to-hw-on-restart`: the high watermark this follower checkpointed (none:
/// no cut), capped at its log end.
fn planted_checkpointed_hw(broker: &Broker, handle: &PartitionHandle, key: &Key) -> i64 {
    let end = handle.lock().log_end_offset();
    let path = broker.partition_dir(&key.0, key.1).join(HW_CHECKPOINT);
    let stored = crate::io::read_file(broker.io.disk.as_ref(), &path)
        .ok()
        .and_then(|raw| String::from_utf8(raw).ok())
        .and_then(|s| s.trim().parse::<i64>().ok());
    stored.unwrap_or(end).min(end)
}

/// Planted `truncate-to-hw-on-restart`: checkpoints the follower's high watermark (page cache
/// only, as Kafka's periodic checkpoint lags the truth).
#[cfg(any(madsim, test))]
fn planted_note_hw(broker: &Broker, p: &crate::replica::Partition) {
    let path = p.log().dir().join(HW_CHECKPOINT);
    let text = p.high_watermark().to_string();
    let written = broker
        .io
        .disk
        .open(&path, crate::io::OpenMode::Create)
        .and_then(|f| {
            f.set_len(0)?;
            f.write_at(0, text.as_bytes())
        });
    if let Err(e) = written {
        tracing::debug!(error = %e, "planted HW checkpoint not written");
    }
}

/// Durable mode (`weir.fsync.before.ack`): a follower's fetch offset covers only what it has
/// fsynced. Planted `follower-fetch-before-fsync`: it fetches on before the fsync.
fn durable_fetches(broker: &Broker) -> bool {
    #[cfg(any(madsim, test))]
    if crate::planted!(broker.config, FollowerFetchBeforeFsync) {
        return false;
    }
    broker.config.fsync_before_ack
}
