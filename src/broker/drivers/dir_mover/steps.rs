//! The mover's actions carried out: open the future log, copy, flush and swap, abandon. Each
//! result goes back to the core.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use uuid::Uuid;

use super::recovery::{future_name, parse_future_name, MOVED_IN};
use super::state::FutureView;
use crate::broker::partition_metadata::write_topic_id;
use crate::broker::shared::Broker;
use crate::broker::state::{Lifecycle, PartitionHandle};
use crate::io::write_file_atomic;
use crate::log::batch::{self, BatchHeader};
use crate::log::Log;
use crate::replica::dir_move::{Action, Key};
use crate::replica::fetcher::divergence_cut;

/// A future log the task owns.
pub(super) struct Future {
    key: Key,
    dest: Uuid,
    log: Log,
}

pub(super) async fn perform(broker: &Broker, futures: &mut BTreeMap<u64, Future>, action: Action) {
    match action {
        Action::OpenFuture { id, key, dest } => open(broker, futures, id, key, dest).await,
        Action::Copy { id, key, max_bytes } => copy(broker, futures, id, &key, max_bytes).await,
        Action::FlushAndSwap { id, key } => flush_and_swap(broker, futures, id, &key).await,
        Action::Abandon { id, key, dest } => abandon(broker, futures, id, &key, dest),
    }
}

fn now(broker: &Broker) -> std::time::Duration {
    broker.io.clock.monotonic()
}

/// The move cannot go on: the core deletes its future.
fn cancel(broker: &Broker, id: u64) {
    let actions = broker.dir_moves.core.lock().unwrap().cancel(id);
    broker.dir_moves.enqueue(actions);
}

fn retry(broker: &Broker, id: u64) {
    broker.dir_moves.core.lock().unwrap().retry(now(broker), id);
}

/// An I/O error on a future log: its directory goes offline (as any failed write does), and
/// every move into it ends.
fn dest_failed(broker: &Broker, dest: Uuid, what: &str, e: &io::Error) {
    broker.dir_storage_failed(dest, what, e);
    let ids = broker.dir_moves.core.lock().unwrap().ids_into(dest);
    for id in ids {
        cancel(broker, id);
    }
}

fn publish(broker: &Broker, f: &Future) {
    broker.dir_moves.futures.lock().unwrap().insert(
        f.key.clone(),
        FutureView {
            dest: f.dest,
            size: f.log.size_bytes(),
            end: f.log.end_offset(),
        },
    );
}

fn unpublish(broker: &Broker, key: &Key) {
    broker.dir_moves.futures.lock().unwrap().remove(key);
}

/// The open partition `key`, if it is still `Open`.
fn open_handle(broker: &Broker, key: &Key) -> Option<Arc<PartitionHandle>> {
    let handle = broker.partition(&key.0, key.1)?;
    let open = handle.lock_with_lifecycle().1 == Lifecycle::Open;
    open.then_some(handle)
}

/// The future directory of `key` already in `root` (a restart mid-move), if any.
fn existing_future(broker: &Broker, root: &Path, key: &Key) -> Option<PathBuf> {
    let names = broker.io.disk.list_dir(root).ok()?;
    names
        .into_iter()
        .find(|n| parse_future_name(n).is_some_and(|k| &k == key))
        .map(|n| root.join(n))
}

async fn open(broker: &Broker, futures: &mut BTreeMap<u64, Future>, id: u64, key: Key, dest: Uuid) {
    if broker.dir_moves.core.lock().unwrap().move_of(&key) != Some((id, dest)) {
        return; // replaced or cancelled before it ran
    }
    let Some(root) = broker.dirs.online_path_of(dest) else {
        cancel(broker, id);
        return;
    };
    let Some(handle) = open_handle(broker, &key) else {
        // Not hosted here any more (or shutting down).
        cancel(broker, id);
        return;
    };
    if broker.dirs.is_offline(&key.0, key.1) {
        cancel(broker, id);
        return;
    }
    let path = existing_future(broker, &root, &key).unwrap_or_else(|| {
        let unique = Uuid::from_u64_pair(broker.io.rng.next_u64(), broker.io.rng.next_u64());
        root.join(future_name(&key, unique))
    });
    let (config, gaps, start) = {
        let p = handle.lock();
        (
            p.log().config().clone(),
            p.log().gaps_allowed(),
            p.log_start_offset(),
        )
    };
    let opened = async {
        let (mut log, _) = Log::open(
            broker.io.disk.clone(),
            &path,
            config,
            broker.io.clock.wall_ms(),
        )
        .await?;
        write_topic_id(&broker.io, &path, handle.topic_id).await?;
        if gaps && !log.gaps_allowed() {
            log.gap_marker()
                .write(broker.io.disk.as_ref(), &path)
                .await?;
            log.allow_gaps();
        }
        if log.end_offset() < start || log.start_offset() > start {
            // Retention or DeleteRecords went past what it holds (or it is a stray): afresh.
            log.restart_at(start, broker.io.clock.wall_ms()).await?;
        }
        io::Result::Ok(log)
    }
    .await;
    match opened {
        Ok(log) => {
            tracing::info!(topic = key.0, partition = key.1, dir = %path.display(),
                from = log.end_offset(), "moving a replica to another log directory");
            let f = Future { key, dest, log };
            publish(broker, &f);
            broker
                .dir_moves
                .core
                .lock()
                .unwrap()
                .opened(now(broker), id, f.log.end_offset());
            futures.insert(id, f);
        }
        Err(e) => dest_failed(broker, dest, "opening a future log", &e),
    }
}

/// What one copy step found under the partition lock.
enum Found {
    /// Batches from the future's end on, and the current log's end.
    Records(bytes::Bytes, i64),
    /// The future diverges from the current log (a truncation here): cut it back.
    Cut(i64, i64),
    /// The future is below the current log start (retention, DeleteRecords): afresh.
    Restart(i64, i64),
}

async fn copy(
    broker: &Broker,
    futures: &mut BTreeMap<u64, Future>,
    id: u64,
    key: &Key,
    max_bytes: usize,
) {
    let Some(f) = futures.get_mut(&id) else {
        return;
    };
    let Some(handle) = open_handle(broker, key) else {
        cancel(broker, id);
        return;
    };
    if broker.dirs.online_path_of(f.dest).is_none() || broker.dirs.is_offline(&key.0, key.1) {
        cancel(broker, id);
        return;
    }
    let found = {
        let p = handle.lock();
        let log = p.log();
        let (start, end) = (log.start_offset(), log.end_offset());
        let future_end = f.log.end_offset();
        let epoch = f.log.latest_epoch();
        let mut cut = future_end.min(end);
        let mut restart = future_end < start;
        if epoch >= 0 {
            let here = log.end_offset_for_epoch(epoch);
            if here.is_undefined() {
                restart = true;
            } else {
                let own = f.log.end_offset_for_epoch(here.epoch);
                cut = cut.min(divergence_cut(here, own, future_end));
            }
        }
        if restart || cut < f.log.start_offset() {
            Found::Restart(start, end)
        } else if cut < future_end {
            Found::Cut(cut, end)
        } else {
            match log.read(future_end, max_bytes, end) {
                Ok(data) => Found::Records(data, end),
                Err(e) => {
                    drop(p);
                    tracing::debug!(topic = key.0, partition = key.1, error = ?e,
                        "the current log could not be read for a move; trying again");
                    retry(broker, id);
                    return;
                }
            }
        }
    };
    let wall = broker.io.clock.wall_ms();
    let (bytes, current_end) = match found {
        Found::Restart(start, end) => {
            if let Err(e) = f.log.restart_at(start, wall).await {
                let dest = f.dest;
                dest_failed(broker, dest, "restarting a future log", &e);
                return;
            }
            (0, end)
        }
        Found::Cut(to, end) => {
            if let Err(e) = f.log.truncate_to(to) {
                let dest = f.dest;
                dest_failed(broker, dest, "truncating a future log", &e);
                return;
            }
            (0, end)
        }
        Found::Records(data, end) => match append(broker, f, &data).await {
            Ok(()) => (data.len() as u64, end),
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                // Not the destination's fault: the current log changed under the read.
                tracing::warn!(topic = key.0, partition = key.1, error = %e,
                    "a replica move's copy step failed; trying again");
                retry(broker, id);
                return;
            }
            Err(e) => {
                let dest = f.dest;
                dest_failed(broker, dest, "appending to a future log", &e);
                return;
            }
        },
    };
    publish(broker, f);
    let actions = broker.dir_moves.core.lock().unwrap().copied(
        now(broker),
        id,
        bytes,
        f.log.end_offset(),
        current_end,
    );
    broker.dir_moves.enqueue(actions);
}

/// Appends batches read from the current log at their own offsets (gaps allowed first, as a
/// follower of a compacted leader does).
async fn append(broker: &Broker, f: &mut Future, data: &[u8]) -> io::Result<()> {
    let mut headers: Vec<BatchHeader> = Vec::new();
    for item in batch::iter(data) {
        let (_, header) =
            item.map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{e:?}")))?;
        headers.push(header);
    }
    // Batches the future already holds (the current log's cleaner rewrote a batch it had
    // copied, moving its base) are skipped; one straddling the future's end replaces the
    // future's tail from its base on.
    let end = f.log.end_offset();
    let skip = headers.iter().take_while(|h| h.last_offset() < end).count();
    let skipped: usize = headers[..skip].iter().map(|h| h.total_len()).sum();
    let headers = &headers[skip..];
    let Some(first) = headers.first() else {
        return Ok(());
    };
    if first.base_offset < end {
        if first.base_offset < f.log.start_offset() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "a copied batch starts before the future's log start",
            ));
        }
        f.log.truncate_to(first.base_offset)?;
    }
    let data = &data[skipped..];
    let mut expected = f.log.end_offset();
    let mut gapped = false;
    for h in headers {
        gapped |= h.base_offset != expected;
        expected = h.next_offset();
    }
    if gapped && !f.log.gaps_allowed() {
        f.log
            .gap_marker()
            .write(broker.io.disk.as_ref(), f.log.dir())
            .await?;
        f.log.allow_gaps();
    }
    let mut owned = data.to_vec();
    f.log
        .append_at_offsets(&mut owned, headers, broker.io.clock.wall_ms())?;
    Ok(())
}

/// The swap's outcome under the partition lock.
enum Verdict {
    Swapped(Log, Uuid),
    NotYet(Future),
    Gone(Future),
    Failed(Future, io::Error),
}

async fn flush_and_swap(broker: &Broker, futures: &mut BTreeMap<u64, Future>, id: u64, key: &Key) {
    let Some(mut f) = futures.remove(&id) else {
        return;
    };
    let Some(handle) = open_handle(broker, key) else {
        futures.insert(id, f);
        cancel(broker, id);
        return;
    };
    let Some(root) = broker.dirs.online_path_of(f.dest) else {
        futures.insert(id, f);
        cancel(broker, id);
        return;
    };
    // Durable first, with the log start the current log has (DeleteRecords) and the marker
    // that names this log the newer one should the swap's renames be cut by a crash.
    let prepared = async {
        let start = handle.lock().log_start_offset();
        if start > f.log.start_offset() && start <= f.log.end_offset() {
            f.log.start_offset_write(start).write().await?;
            f.log.advance_start_offset(start)?;
        }
        let plan = f.log.flush_plan();
        Log::sync_files(&plan).await?;
        f.log.flushed(&plan, broker.io.clock.wall_ms());
        f.log.checkpoint().write().await?;
        write_file_atomic(broker.io.disk.as_ref(), &f.log.dir().join(MOVED_IN), b"").await
    }
    .await;
    if let Err(e) = prepared {
        let dest = f.dest;
        futures.insert(id, f);
        dest_failed(broker, dest, "flushing a future log", &e);
        return;
    }
    let target = root.join(format!("{}-{}", key.0, key.1));
    let future_dir = f.log.dir().to_path_buf();
    // No flush, checkpoint, truncation or DeleteRecords of the current log comes between the
    // check and the swap, nor works on the old log after it.
    let gate = handle.flush_gate.lock().await;
    let start_gate = handle.log_start_gate.lock().await;
    let verdict = {
        let (mut p, lifecycle) = handle.lock_with_lifecycle();
        if lifecycle != Lifecycle::Open {
            Verdict::Gone(f)
        } else if !p.can_replace_log(&f.log) && !copy_tail(&p, &mut f, broker.io.clock.wall_ms()) {
            Verdict::NotYet(f)
        } else {
            match broker.io.disk.rename(&future_dir, &target) {
                Err(e) => Verdict::Failed(f, e),
                Ok(()) => {
                    let Future { mut log, dest, .. } = f;
                    log.set_dir(&target);
                    let old = p.replace_log(log);
                    broker.dirs.replace(&key.0, key.1, dest);
                    Verdict::Swapped(old, dest)
                }
            }
        }
    };
    let (old, dest) = match verdict {
        Verdict::Swapped(old, dest) => (old, dest),
        Verdict::NotYet(f) => {
            drop((start_gate, gate));
            futures.insert(id, f);
            broker
                .dir_moves
                .core
                .lock()
                .unwrap()
                .not_swapped(now(broker), id);
            return;
        }
        Verdict::Gone(f) => {
            drop((start_gate, gate));
            futures.insert(id, f);
            cancel(broker, id);
            return;
        }
        Verdict::Failed(f, e) => {
            drop((start_gate, gate));
            let dest = f.dest;
            futures.insert(id, f);
            dest_failed(broker, dest, "renaming a future log", &e);
            return;
        }
    };
    // The rename is durable before anything appended to the new log can be acknowledged as
    // durable (flushes wait for the gate).
    if let Err(e) = broker.io.disk.sync_dir(&root).await {
        broker.dir_storage_failed(dest, "syncing a moved replica's directory", &e);
    }
    drop((start_gate, gate));
    unpublish(broker, key);
    broker.dir_moves.core.lock().unwrap().swapped(id);
    tracing::info!(topic = key.0, partition = key.1, from = %old.dir().display(),
        to = %target.display(), "replica moved to another log directory");
    remove_old(broker, old, &target).await;
    // Its producer-state snapshot in the new directory (else the next open rebuilds it).
    if let Err(e) = broker.checkpoint_partition(&handle, false).await {
        tracing::warn!(error = %e, "checkpoint after a replica move failed");
    }
}

/// Under the partition lock, with appends held: copies what the current log gained since the
/// last copy step (a producer's latest batches) so the swap need not race them; `true` when
/// the future may then replace the log. Nothing when that tail needs a gap marker (written
/// outside the lock) or the future is not the current log's prefix.
fn copy_tail(p: &crate::replica::Partition, f: &mut Future, now_ms: i64) -> bool {
    /// A tail longer than this waits for the next copy step.
    const MAX_TAIL: usize = 1 << 20;
    let log = p.log();
    let future_end = f.log.end_offset();
    let epoch = f.log.latest_epoch();
    let prefix = future_end <= log.end_offset()
        && f.log.start_offset() == log.start_offset()
        && (epoch < 0 || {
            let here = log.end_offset_for_epoch(epoch);
            here.epoch == epoch && here.end_offset >= future_end
        });
    if !prefix {
        return false;
    }
    let Ok(data) = log.read(future_end, MAX_TAIL, log.end_offset()) else {
        return false;
    };
    let mut headers = Vec::new();
    let mut expected = future_end;
    for item in batch::iter(&data) {
        let Ok((_, h)) = item else { return false };
        if h.base_offset != expected {
            return false;
        }
        expected = h.next_offset();
        headers.push(h);
    }
    if expected != log.end_offset() {
        return false; // more than one read holds
    }
    if !headers.is_empty() {
        let mut owned = data.to_vec();
        if f.log
            .append_at_offsets(&mut owned, &headers, now_ms)
            .is_err()
        {
            return false;
        }
    }
    p.can_replace_log(&f.log)
}

/// Deletes the old log: renamed `-delete` first (so a restart never takes it for the replica),
/// then removed; the marker in the new one goes last.
async fn remove_old(broker: &Broker, old: Log, target: &Path) {
    let old_dir = old.dir().to_path_buf();
    drop(old);
    let disk = broker.io.disk.as_ref();
    let unique = Uuid::from_u64_pair(broker.io.rng.next_u64(), broker.io.rng.next_u64());
    let doomed = old_dir.with_file_name(format!(
        "{}.{}-delete",
        old_dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        unique.simple()
    ));
    let removed = async {
        disk.rename(&old_dir, &doomed)?;
        if let Some(parent) = old_dir.parent() {
            disk.sync_dir(parent).await?;
        }
        disk.remove_dir_all(&doomed)?;
        disk.remove_file(&target.join(MOVED_IN))?;
        disk.sync_dir(target).await
    }
    .await;
    if let Err(e) = removed {
        // The old directory is offline, or something is left for the next start to remove.
        tracing::warn!(dir = %old_dir.display(), error = %e, "could not remove a moved replica's old log");
    }
}

fn abandon(broker: &Broker, futures: &mut BTreeMap<u64, Future>, id: u64, key: &Key, dest: Uuid) {
    unpublish(broker, key);
    let Some(f) = futures.remove(&id) else {
        return;
    };
    let dir = f.log.dir().to_path_buf();
    drop(f);
    if broker.dirs.online_path_of(dest).is_some() {
        if let Err(e) = broker.io.disk.remove_dir_all(&dir) {
            tracing::warn!(dir = %dir.display(), error = %e, "could not remove an abandoned future log");
        }
    }
    tracing::info!(topic = key.0, partition = key.1, "replica move abandoned");
}
