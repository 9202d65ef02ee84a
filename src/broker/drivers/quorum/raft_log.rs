//! The quorum's log adapter: raft batches in the ordinary [`Log`] of `__cluster_metadata-0`
//! (v2 batches whose `partitionLeaderEpoch` is the raft epoch), and the `quorum-state` file
//! beside it (Kafka's name and place), written atomically.
//!
//! Recovery hands the core a [`LogState`]: the epoch cache rebuilt from the batch headers and
//! the end offset. Everything recovered is durable (an unclean open of a [`Log`] fsyncs what
//! it keeps), as the core requires.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use super::applied::METADATA_DIR;
use super::batches;
use super::snapshot_file;
use crate::controller::image::MetadataImage;
use crate::io::{read_file, write_file_atomic, Disk};
use crate::log::batch;
use crate::log::{Log, LogConfig};
use crate::raft::{Batch, LogState, Offset, OffsetAndEpoch, QuorumStateRecord, SnapshotMeta};

/// What start-up recovered beyond the log: the newest valid snapshot, loaded.
pub struct LoadedSnapshot {
    pub meta: SnapshotMeta,
    pub image: MetadataImage,
}

pub const QUORUM_STATE: &str = "quorum-state";

pub struct RaftLog {
    log: Log,
    dir: PathBuf,
    disk: Arc<dyn Disk>,
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

impl RaftLog {
    /// [`RaftLog::open_with`] the default log config.
    pub async fn open(
        disk: Arc<dyn Disk>,
        log_dir: &Path,
        now_ms: i64,
    ) -> io::Result<(RaftLog, LogState, Option<LoadedSnapshot>)> {
        RaftLog::open_with(disk, log_dir, LogConfig::default(), now_ms).await
    }

    /// Opens (recovering) the metadata log under `log_dir`, loads its newest valid snapshot
    /// and rebuilds its epoch cache. `config` is the log's (the simulator's carries the bug
    /// planted in the log and in this store).
    pub async fn open_with(
        disk: Arc<dyn Disk>,
        log_dir: &Path,
        config: LogConfig,
        now_ms: i64,
    ) -> io::Result<(RaftLog, LogState, Option<LoadedSnapshot>)> {
        let dir = log_dir.join(METADATA_DIR);
        let (mut log, recovery) = Log::open(disk.clone(), &dir, config, now_ms).await?;
        if !recovery.clean {
            tracing::info!(dir = %dir.display(), ?recovery, "recovered the metadata log");
        }
        let (earliest, loaded) = load_snapshots(disk.as_ref(), &dir, &mut log, now_ms).await?;
        let mut epochs: Vec<OffsetAndEpoch> = Vec::new();
        let mut problem = None;
        log.scan_headers(log.start_offset(), |h| {
            if problem.is_some() {
                return;
            }
            let Ok(epoch) = u32::try_from(h.partition_leader_epoch) else {
                problem = Some(format!(
                    "batch at offset {} has no raft epoch (written by a single-node Weir?)",
                    h.base_offset
                ));
                return;
            };
            match epochs.last() {
                Some(last) if epoch < last.epoch => {
                    problem = Some(format!(
                        "epoch goes back from {} to {epoch} at offset {}",
                        last.epoch, h.base_offset
                    ));
                }
                Some(last) if epoch == last.epoch => {}
                _ => epochs.push(OffsetAndEpoch {
                    epoch,
                    offset: h.base_offset as u64,
                }),
            }
        })?;
        if let Some(p) = problem {
            return Err(invalid(format!("{}: {p}", dir.display())));
        }
        let state = LogState {
            epochs,
            end_offset: log.end_offset() as u64,
            earliest_snapshot: earliest,
            latest_snapshot: loaded.as_ref().map(|l| l.meta),
        };
        Ok((RaftLog { log, dir, disk }, state, loaded))
    }

    pub fn start_offset(&self) -> Offset {
        self.log.start_offset() as u64
    }

    /// Moves the log start to `offset` (a snapshot's end) durably and deletes the segments
    /// wholly below it.
    pub async fn advance_start(&mut self, offset: Offset) -> io::Result<()> {
        let offset = offset as i64;
        if offset <= self.log.start_offset() {
            return Ok(());
        }
        self.log.start_offset_write(offset).write().await?;
        let deleted = self.log.advance_start_offset(offset)?;
        tracing::info!(offset, deleted, "metadata log start moved to a snapshot");
        // Deleted segment files: their names go with the next directory sync.
        self.disk.sync_dir(&self.dir).await
    }

    /// Empties the log and restarts it at `offset` (an installed snapshot's end).
    pub async fn restart_at(&mut self, offset: Offset, now_ms: i64) -> io::Result<()> {
        self.log.restart_at(offset as i64, now_ms).await
    }

    pub fn end_offset(&self) -> Offset {
        self.log.end_offset() as u64
    }

    /// Appends batches at the log end (each must start there). Not durable until [`flush`].
    pub fn append(&mut self, batches: &[Batch], now_ms: i64) -> io::Result<()> {
        for b in batches {
            if b.base_offset != self.end_offset() {
                return Err(invalid(format!(
                    "append at {} but the log ends at {}",
                    b.base_offset,
                    self.end_offset()
                )));
            }
            let mut bytes = batches::encode(b, now_ms);
            let header = batch::check(&bytes).map_err(|e| invalid(format!("{e:?}")))?;
            if header.last_offset_delta + 1 != b.count as i32 {
                return Err(invalid(format!(
                    "a batch of {} records claims {}",
                    header.last_offset_delta + 1,
                    b.count
                )));
            }
            self.log.append(
                &mut bytes,
                std::slice::from_mut(&mut header.clone()),
                now_ms,
            )?;
        }
        Ok(())
    }

    /// Simulator and tests: whether `bug` is planted in this store (from its log's config).
    #[cfg(any(madsim, test))]
    pub fn planted(&self, bug: crate::config::PlantedBug) -> bool {
        self.log.config().planted.is(bug)
    }

    /// Writes `quorum-state` (atomically, durably) next to this log.
    pub async fn write_quorum_state(&self, record: &QuorumStateRecord) -> io::Result<()> {
        #[cfg(any(madsim, test))]
        if self.planted(crate::config::PlantedBug::QuorumVoteBeforePersist) {
            // Planted: the new state is fsynced and renamed into place, but the directory is
            // not fsynced, so the rename survives a crash (the page cache) but not always a
            // power loss: the node comes back with an older, whole `quorum-state`.
            let path = self.dir.join(QUORUM_STATE);
            let tmp = path.with_extension("tmp");
            let file = self.disk.open(&tmp, crate::io::OpenMode::Create)?;
            file.set_len(0)?;
            file.write_at(0, quorum_state_text(record).as_bytes())?;
            file.sync().await?;
            drop(file);
            return self.disk.rename(&tmp, &path);
        }
        let log_dir = self
            .dir
            .parent()
            .expect("the metadata log is under the log dir");
        write_quorum_state(self.disk.as_ref(), log_dir, record).await
    }

    /// fsyncs everything appended; returns the durable end.
    pub async fn flush(&mut self, now_ms: i64) -> io::Result<Offset> {
        let plan = self.log.flush_plan();
        // Planted: the appended records count as durable without their fsync.
        #[cfg(any(madsim, test))]
        let skip = self.planted(crate::config::PlantedBug::MetadataNotSynced);
        #[cfg(not(any(madsim, test)))]
        let skip = false;
        if !skip {
            Log::sync_files(&plan).await?;
        }
        self.log.flushed(&plan, now_ms);
        Ok(self.end_offset())
    }

    /// Removes everything at or after `offset`, durably (a truncated entry must not come back
    /// after a crash and be counted as this node's log).
    pub async fn truncate(&mut self, offset: Offset, now_ms: i64) -> io::Result<()> {
        self.log.truncate_to(offset as i64)?;
        self.flush(now_ms).await?;
        self.disk.sync_dir(&self.dir).await
    }

    /// Whole batches in `start..end`, at most about `max_bytes` (at least one batch).
    pub fn read(&self, start: Offset, end: Offset, max_bytes: usize) -> io::Result<Bytes> {
        if start >= end {
            return Ok(Bytes::new());
        }
        let data = self
            .log
            .read(start as i64, max_bytes, end as i64)
            .map_err(|e| match e {
                crate::log::ReadError::Io(e) => e,
                other => io::Error::other(format!("{other:?}")),
            })?;
        // Keep only whole batches that lie inside the range.
        let mut out = BytesMut::new();
        for item in batch::iter(&data) {
            let (at, h) = item.map_err(|e| invalid(format!("{e:?}")))?;
            if (h.base_offset as u64) < start || h.next_offset() as u64 > end {
                break;
            }
            out.extend_from_slice(&data[at..at + h.total_len()]);
        }
        Ok(out.freeze())
    }

    /// The raft batches in `start..end` (for applying committed entries).
    pub fn read_batches(&self, start: Offset, end: Offset) -> io::Result<Vec<(Batch, Bytes)>> {
        let mut out = Vec::new();
        let mut at = start;
        while at < end {
            let data = self.read(at, end, 1 << 20)?;
            if data.is_empty() {
                break;
            }
            for item in batch::iter(&data) {
                let (pos, h) = item.map_err(|e| invalid(format!("{e:?}")))?;
                let raw = data.slice(pos..pos + h.total_len());
                let b = batches::one(&raw, &h).map_err(invalid)?;
                at = b.next_offset();
                out.push((b, raw));
            }
        }
        Ok(out)
    }

    /// Flushes and marks the log clean.
    pub async fn close(&mut self, now_ms: i64) -> io::Result<()> {
        self.log.close(now_ms).await
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// Finds the newest valid snapshot and makes the log fit it: the log start must be a
/// snapshot's end (the earliest kept), and the log must reach the newest snapshot. A damaged
/// snapshot is ignored with a logged reason (and deleted), falling back to an older one.
/// Returns the snapshot at the log start and the newest, loaded.
async fn load_snapshots(
    disk: &dyn Disk,
    dir: &Path,
    log: &mut Log,
    now_ms: i64,
) -> io::Result<(Option<SnapshotMeta>, Option<LoadedSnapshot>)> {
    snapshot_file::remove_partials(disk, dir)?;
    let mut valid: Vec<SnapshotMeta> = Vec::new();
    let mut loaded = None;
    for id in snapshot_file::list(disk, dir)?.into_iter().rev() {
        let checked = snapshot_file::read(disk, dir, id).and_then(|(size, body)| {
            let image = MetadataImage::from_snapshot(&body)?;
            if image.applied() as u64 > id.offset {
                return Err(format!("its image is applied to {}", image.applied()));
            }
            Ok((size, image))
        });
        match checked {
            Ok((size, image)) => {
                let meta = SnapshotMeta { id, size };
                if loaded.is_none() {
                    loaded = Some(LoadedSnapshot { meta, image });
                }
                valid.push(meta);
            }
            Err(why) => {
                tracing::warn!(snapshot = %snapshot_file::file_name(id), %why,
                    "ignoring a damaged metadata snapshot");
                snapshot_file::delete(disk, dir, id)?;
            }
        }
    }
    let start = log.start_offset() as u64;
    let Some(latest) = loaded.as_ref().map(|l| l.meta) else {
        if start > 0 {
            // The log starts after a snapshot that is gone: what it holds cannot be applied.
            tracing::warn!(
                start,
                "no valid metadata snapshot for the log start; the metadata log restarts empty"
            );
            log.restart_at(0, now_ms).await?;
        }
        return Ok((None, None));
    };
    if latest.id.offset > log.end_offset() as u64 || latest.id.offset < start {
        // Installed but the log was not restarted yet (a crash between the two), or the
        // snapshots that bridged to the log are damaged: the log restarts at the snapshot.
        tracing::warn!(
            snapshot = latest.id.offset,
            start,
            end = log.end_offset(),
            "the metadata log does not meet its newest snapshot; it restarts there"
        );
        log.restart_at(latest.id.offset as i64, now_ms).await?;
    }
    let start = log.start_offset() as u64;
    let earliest = match valid.iter().find(|s| s.id.offset == start) {
        Some(s) => Some(*s),
        None if start == 0 => None,
        None => {
            // The snapshot at the log start is damaged: the newest covers the log below it.
            log.start_offset_write(latest.id.offset as i64)
                .write()
                .await?;
            log.advance_start_offset(latest.id.offset as i64)?;
            disk.sync_dir(dir).await?;
            Some(latest)
        }
    };
    // Snapshots below the log start's serve nothing any more.
    let floor = earliest.map_or(0, |e| e.id.offset);
    for s in valid.iter().filter(|s| s.id.offset < floor) {
        snapshot_file::delete(disk, dir, s.id)?;
    }
    Ok((earliest, loaded))
}

/// Reads `quorum-state` (Kafka's JSON: `leaderId`, `leaderEpoch`, `votedId`, -1 for none).
pub fn read_quorum_state(disk: &dyn Disk, log_dir: &Path) -> io::Result<Option<QuorumStateRecord>> {
    let path = log_dir.join(METADATA_DIR).join(QUORUM_STATE);
    if !disk.exists(&path) {
        return Ok(None);
    }
    let raw = read_file(disk, &path)?;
    let value: serde_json::Value =
        serde_json::from_slice(&raw).map_err(|e| invalid(format!("{}: {e}", path.display())))?;
    let field = |name: &str| -> io::Result<i64> {
        value
            .get(name)
            .and_then(|v| v.as_i64())
            .ok_or_else(|| invalid(format!("{}: no {name}", path.display())))
    };
    let epoch = u32::try_from(field("leaderEpoch")?)
        .map_err(|_| invalid(format!("{}: bad leaderEpoch", path.display())))?;
    let id = |v: i64| (v >= 0).then_some(v as i32);
    Ok(Some(QuorumStateRecord {
        epoch,
        voted_for: id(field("votedId")?),
        leader: id(field("leaderId")?),
    }))
}

/// Writes `quorum-state` durably (write, fsync, rename, fsync the directory).
pub async fn write_quorum_state(
    disk: &dyn Disk,
    log_dir: &Path,
    record: &QuorumStateRecord,
) -> io::Result<()> {
    let path = log_dir.join(METADATA_DIR).join(QUORUM_STATE);
    write_file_atomic(disk, &path, quorum_state_text(record).as_bytes()).await
}

/// `quorum-state` as Kafka writes it (JSON).
fn quorum_state_text(record: &QuorumStateRecord) -> String {
    serde_json::json!({
        "leaderId": record.leader.unwrap_or(-1),
        "leaderEpoch": record.epoch,
        "votedId": record.voted_for.unwrap_or(-1),
        "appliedOffset": 0,
        "currentVoters": null,
        "data_version": 0,
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::memdisk::{block_on, MemDisk};
    use crate::raft::Payload;

    fn data(count: usize) -> Payload {
        let values: Vec<Vec<u8>> = (0..count)
            .map(|i| format!("{{\"n\":{i}}}").into_bytes())
            .collect();
        let refs: Vec<&[u8]> = values.iter().map(|v| v.as_slice()).collect();
        Payload::Data(batches::data_batch(&refs, 0).into())
    }

    fn b(base: u64, epoch: u32, count: u32, payload: Payload) -> Batch {
        Batch {
            base_offset: base,
            epoch,
            count,
            payload,
        }
    }

    #[test]
    fn append_flush_recover_rebuilds_the_epoch_cache() {
        let mem = MemDisk::new(7);
        let disk: Arc<dyn Disk> = Arc::new(mem.clone());
        let dir = Path::new("/n1");
        let (mut log, state, _) = block_on(RaftLog::open(disk.clone(), dir, 0)).unwrap();
        assert_eq!(state, LogState::default());
        let lc = |leader| Payload::LeaderChange {
            leader,
            voters: vec![1, 2, 3],
        };
        log.append(&[b(0, 1, 1, lc(1)), b(1, 1, 2, data(2))], 0)
            .unwrap();
        log.append(&[b(3, 3, 1, lc(2)), b(4, 3, 3, data(3))], 0)
            .unwrap();
        assert_eq!(block_on(log.flush(0)).unwrap(), 7);
        // Appending anywhere but the end is refused.
        assert!(log.append(&[b(3, 3, 1, lc(2))], 0).is_err());
        let all = log.read_batches(0, 7).unwrap();
        assert_eq!(all.len(), 4);
        assert_eq!(all[3].0.base_offset, 4);
        assert_eq!(batches::values(&all[3].1).unwrap().len(), 3);
        // A read stops at `end` on a batch boundary.
        assert_eq!(log.read_batches(0, 4).unwrap().len(), 3);
        drop(log);
        mem.power_loss();
        let (mut log, state, _) = block_on(RaftLog::open(disk.clone(), dir, 0)).unwrap();
        assert_eq!(state.end_offset, 7);
        assert_eq!(
            state.epochs,
            vec![
                OffsetAndEpoch {
                    epoch: 1,
                    offset: 0
                },
                OffsetAndEpoch {
                    epoch: 3,
                    offset: 3
                }
            ]
        );
        block_on(log.truncate(3, 0)).unwrap();
        drop(log);
        mem.power_loss();
        let (_, state, _) = block_on(RaftLog::open(disk, dir, 0)).unwrap();
        assert_eq!(state.end_offset, 3);
        assert_eq!(state.epochs.len(), 1);
    }

    #[test]
    fn start_up_loads_the_newest_valid_snapshot_and_fits_the_log_to_it() {
        let mem = MemDisk::new(9);
        let disk: Arc<dyn Disk> = Arc::new(mem.clone());
        let dir = Path::new("/s");
        let (mut log, _, loaded) = block_on(RaftLog::open(disk.clone(), dir, 0)).unwrap();
        assert!(loaded.is_none());
        let lc = Payload::LeaderChange {
            leader: 1,
            voters: vec![1],
        };
        log.append(
            &[b(0, 1, 1, lc), b(1, 1, 2, data(2)), b(3, 1, 3, data(3))],
            0,
        )
        .unwrap();
        block_on(log.flush(0)).unwrap();
        let meta_dir = dir.join(METADATA_DIR);
        let body = MetadataImage::default().to_snapshot();
        let oe = |epoch, offset| OffsetAndEpoch { epoch, offset };
        let at3 = block_on(snapshot_file::write(&mem, &meta_dir, oe(1, 3), &body)).unwrap();
        let at6 = block_on(snapshot_file::write(&mem, &meta_dir, oe(1, 6), &body)).unwrap();
        block_on(log.advance_start(3)).unwrap();
        drop(log);
        mem.power_loss();
        let (log, state, loaded) = block_on(RaftLog::open(disk.clone(), dir, 0)).unwrap();
        assert_eq!(log.start_offset(), 3);
        assert_eq!(state.earliest_snapshot, Some(at3));
        assert_eq!(state.latest_snapshot, Some(at6));
        assert_eq!(state.epochs, vec![oe(1, 3)]);
        assert_eq!(loaded.map(|l| l.meta), Some(at6));
        drop(log);
        // A damaged newest snapshot is ignored (and deleted): the older one and the log serve.
        let file = mem
            .open(
                &meta_dir.join(snapshot_file::file_name(oe(1, 6))),
                crate::io::OpenMode::ReadWrite,
            )
            .unwrap();
        file.write_at(at6.size - 2, b"??").unwrap();
        drop(file);
        let (log, state, loaded) = block_on(RaftLog::open(disk.clone(), dir, 0)).unwrap();
        assert_eq!(state.earliest_snapshot, Some(at3));
        assert_eq!(state.latest_snapshot, Some(at3));
        assert_eq!(state.end_offset, 6);
        assert_eq!(loaded.map(|l| l.meta), Some(at3));
        assert_eq!(
            snapshot_file::list(&mem, &meta_dir).unwrap(),
            vec![oe(1, 3)]
        );
        drop(log);
        // A snapshot past the log end (installed, then a crash before the log restarted):
        // the log restarts at it.
        let at20 = block_on(snapshot_file::write(&mem, &meta_dir, oe(2, 20), &body)).unwrap();
        let (log, state, _) = block_on(RaftLog::open(disk.clone(), dir, 0)).unwrap();
        assert_eq!((log.start_offset(), state.end_offset), (20, 20));
        assert_eq!(state.earliest_snapshot, Some(at20));
        assert_eq!(state.latest_snapshot, Some(at20));
        assert!(state.epochs.is_empty());
        drop(log);
        // No valid snapshot for a log that starts past 0: the log restarts empty at 0.
        snapshot_file::delete(&mem, &meta_dir, oe(2, 20)).unwrap();
        let (log, state, loaded) = block_on(RaftLog::open(disk.clone(), dir, 0)).unwrap();
        assert!(loaded.is_none());
        assert_eq!((log.start_offset(), state.end_offset), (0, 0));
        assert_eq!(state.earliest_snapshot, None);
    }

    #[test]
    fn quorum_state_round_trips() {
        let mem = MemDisk::new(8);
        let dir = Path::new("/q");
        // Durable, or a power loss may take the directory (and the file) with it.
        block_on(crate::io::create_dir_all_durable(
            &mem,
            &dir.join(METADATA_DIR),
        ))
        .unwrap();
        assert_eq!(read_quorum_state(&mem, dir).unwrap(), None);
        let record = QuorumStateRecord {
            epoch: 5,
            voted_for: Some(2),
            leader: None,
        };
        block_on(write_quorum_state(&mem, dir, &record)).unwrap();
        mem.power_loss();
        assert_eq!(read_quorum_state(&mem, dir).unwrap(), Some(record));
    }
}
