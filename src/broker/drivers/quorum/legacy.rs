//! The upgrade of a metadata log written by a single-node Weir from before it ran as a quorum
//! of one: its batches carry no raft epoch (`partitionLeaderEpoch` −1) and each commit was
//! confirmed by the log's recovery-point checkpoint. Such a log cannot be the raft log as it
//! is, so on the first start as a quorum it is folded into a snapshot at its end (epoch 0) and
//! the log restarts there, empty; the quorum's first leader then appends after it.
//!
//! The fold applies the old store's rules first: a damaged checkpoint refuses the start (a
//! recovery that had to guess could forget acknowledged topics), and the one batch a commit
//! may leave past the checkpoint was never confirmed and is dropped. It is safe to interrupt
//! at any point: the snapshot is written atomically, and the log restart writes the new log
//! start durably before it deletes a segment. A crash before that redoes the fold from the
//! same log (the same bytes); one after it leaves no epoch-less batch at or past the log
//! start, so the next start finds nothing to do.

use std::io;
use std::path::Path;
use std::sync::Arc;

use super::applied::METADATA_DIR;
use super::raft_log::QUORUM_STATE;
use super::snapshot_file;
use crate::controller::image::{MetadataImage, MetadataRecord};
use crate::io::Disk;
use crate::log::batch;
use crate::log::{Log, LogConfig};
use crate::raft::OffsetAndEpoch;

/// Bytes read from the old log per step while replaying it.
const REPLAY_CHUNK: usize = 1 << 20;

/// What [`migrate`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Migration {
    /// No epoch-less batch: a quorum's log already (or no log at all).
    NotNeeded,
    /// The old log (`records` records, ending at `end`) is now the snapshot at `end`.
    Folded { end: u64, records: u64 },
}

fn invalid(dir: &Path, msg: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{}: {msg}", dir.display()),
    )
}

/// Folds a single-node metadata log under `log_dir` into a snapshot (see the module doc).
/// Runs before the quorum's log is opened.
pub async fn migrate(disk: Arc<dyn Disk>, log_dir: &Path, now_ms: i64) -> io::Result<Migration> {
    let dir = log_dir.join(METADATA_DIR);
    // `quorum-state` is written by the quorum only, after any upgrade: the log is its own.
    if !disk.exists(&dir) || disk.exists(&dir.join(QUORUM_STATE)) {
        return Ok(Migration::NotNeeded);
    }
    let (mut log, recovery) = Log::open(disk.clone(), &dir, LogConfig::default(), now_ms).await?;
    let (mut without, mut with) = (0u64, 0u64);
    log.scan_headers(log.start_offset(), |h| {
        if h.partition_leader_epoch < 0 {
            without += 1;
        } else {
            with += 1;
        }
    })?;
    if without == 0 {
        // Recovered (if it had to be) and closed again, so the quorum's open finds it clean.
        log.close(now_ms).await?;
        return Ok(Migration::NotNeeded);
    }
    if with > 0 {
        return Err(invalid(
            &dir,
            format!(
                "{without} batches without a raft epoch and {with} with one: neither a \
                 single-node metadata log nor a quorum's"
            ),
        ));
    }
    tracing::info!(dir = %dir.display(), batches = without,
        "upgrading a single-node metadata log: folding it into a snapshot");
    if recovery.checkpoint_damaged {
        return Err(invalid(
            &dir,
            "the recovery-point checkpoint is damaged; the metadata log cannot be trusted",
        ));
    }
    drop_unconfirmed_tail(&mut log, recovery.checkpointed, disk.as_ref(), &dir, now_ms).await?;
    let (image, records) = replay(&log, &dir)?;
    let end = log.end_offset() as u64;
    assert!(
        image.applied() as u64 <= end,
        "the image is applied past the log"
    );
    let id = OffsetAndEpoch {
        offset: end,
        epoch: 0,
    };
    snapshot_file::write(disk.as_ref(), &dir, id, &image.to_snapshot()).await?;
    // The new log start is durable before any old segment goes (`Log::restart_at`).
    log.restart_at(end as i64, now_ms).await?;
    log.close(now_ms).await?;
    tracing::info!(snapshot = %snapshot_file::file_name(id), records,
        "single-node metadata log upgraded");
    Ok(Migration::Folded { end, records })
}

/// The image the old log's records make, and how many there are. A record this version
/// cannot read stops the upgrade: guessing would lose metadata for good.
fn replay(log: &Log, dir: &Path) -> io::Result<(MetadataImage, u64)> {
    let mut image = MetadataImage::default();
    let mut count = 0;
    let mut offset = log.start_offset();
    let end = log.end_offset();
    while offset < end {
        let data = log.read(offset, REPLAY_CHUNK, end).map_err(|e| match e {
            crate::log::ReadError::Io(e) => e,
            other => invalid(dir, format!("{other:?}")),
        })?;
        if data.is_empty() {
            break;
        }
        for item in batch::iter(&data) {
            let (at, header) = item.map_err(|e| invalid(dir, format!("{e:?}")))?;
            let bytes = &data[at..at + header.total_len()];
            let records = batch::records(bytes, &header)
                .ok_or_else(|| invalid(dir, "a compressed metadata batch"))?
                .map_err(|e| invalid(dir, format!("{e:?}")))?;
            for record in records {
                let value = record.value.unwrap_or_default();
                let parsed: MetadataRecord = serde_json::from_slice(value).map_err(|e| {
                    invalid(
                        dir,
                        format!("metadata record at offset {}: {e}", record.offset),
                    )
                })?;
                image.apply(record.offset, &parsed);
                count += 1;
            }
            offset = header.next_offset();
        }
    }
    Ok((image, count))
}

/// Drops the batch past the checkpointed recovery point, if there is one, durably. More than
/// one batch there is not something a commit of the old store could leave behind, so it
/// stops the start instead of guessing.
async fn drop_unconfirmed_tail(
    log: &mut Log,
    confirmed: i64,
    disk: &dyn Disk,
    dir: &Path,
    now_ms: i64,
) -> io::Result<()> {
    if confirmed >= log.end_offset() {
        return Ok(());
    }
    let mut tail = Vec::new();
    log.scan_headers(confirmed, |h| tail.push((h.base_offset, h.next_offset())))?;
    if tail.len() != 1 || tail[0] != (confirmed, log.end_offset()) {
        return Err(invalid(
            dir,
            format!(
                "{} batches past the recovery point {confirmed} (log end {}); a commit \
                 leaves at most one, so the metadata log cannot be trusted",
                tail.len(),
                log.end_offset()
            ),
        ));
    }
    tracing::warn!(dir = %dir.display(), offset = confirmed,
        "dropping a metadata batch whose commit was never confirmed");
    log.truncate_to(confirmed)?;
    let plan = log.flush_plan();
    Log::sync_files(&plan).await?;
    log.flushed(&plan, now_ms);
    disk.sync_dir(dir).await?;
    assert_eq!(log.end_offset(), confirmed);
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicU64, Ordering};

    use uuid::Uuid;

    use super::*;
    use crate::broker::quorum::raft_log::RaftLog;
    use crate::io::memdisk::{block_on, Crash, MemDisk};
    use crate::io::{BoxFuture, File, OpenMode};
    use crate::log::batch::BatchBuilder;
    use crate::raft::{LogState, Raft, RaftConfig};

    const DATA: &str = "/data";

    fn topic(name: &str, id: u64) -> MetadataRecord {
        let configs = BTreeMap::from([("retention.ms".to_string(), id.to_string())]);
        MetadataRecord::topic(name, Uuid::from_u64_pair(0, id), configs)
    }

    /// Writes commits as the single-node store did: one epoch-less batch each, fsynced, then
    /// confirmed by the recovery-point checkpoint. Returns the image they make.
    fn write_old_log(
        disk: &MemDisk,
        commits: &[Vec<MetadataRecord>],
        close: bool,
    ) -> MetadataImage {
        let dir = Path::new(DATA).join(METADATA_DIR);
        let (mut log, _) = block_on(Log::open(
            Arc::new(disk.clone()),
            &dir,
            LogConfig::default(),
            0,
        ))
        .unwrap();
        let mut image = MetadataImage::default();
        for records in commits {
            let mut builder = BatchBuilder::new(0);
            for r in records {
                builder.push(None, Some(&serde_json::to_vec(r).unwrap()), 0);
            }
            let mut bytes = builder.finish(-1, -1, -1);
            let mut header = batch::check(&bytes).unwrap();
            let base = log.end_offset();
            log.append(&mut bytes, std::slice::from_mut(&mut header), 0)
                .unwrap();
            let plan = log.flush_plan();
            block_on(Log::sync_files(&plan)).unwrap();
            log.flushed(&plan, 0);
            block_on(log.checkpoint().write()).unwrap();
            for (i, r) in records.iter().enumerate() {
                image.apply(base + i as i64, r);
            }
        }
        if close {
            block_on(log.close(0)).unwrap();
        }
        image
    }

    fn commits() -> Vec<Vec<MetadataRecord>> {
        vec![
            vec![topic("a", 1), topic("b", 2)],
            vec![MetadataRecord::TopicConfig {
                name: "a".into(),
                changes: BTreeMap::from([("retention.ms".to_string(), Some("5".to_string()))]),
            }],
            vec![topic("c", 3)],
        ]
    }

    fn migrate_on(disk: Arc<dyn Disk>) -> io::Result<Migration> {
        block_on(migrate(disk, Path::new(DATA), 0))
    }

    /// Opens the quorum's log as the driver does, and a sole voter's core on it.
    fn open_quorum(disk: &MemDisk) -> (RaftLog, LogState, MetadataImage) {
        let (log, state, loaded) =
            block_on(RaftLog::open(Arc::new(disk.clone()), Path::new(DATA), 0)).unwrap();
        let cfg = RaftConfig::new(1, [1].into_iter().collect());
        Raft::new(cfg, None, state.clone(), 0, 1).expect("the core accepts the upgraded log");
        let image = loaded.map(|l| l.image).unwrap_or_default();
        (log, state, image)
    }

    #[test]
    fn a_single_node_log_becomes_the_snapshot_the_quorum_starts_from() {
        for close in [true, false] {
            let mem = MemDisk::new(1);
            let image = write_old_log(&mem, &commits(), close);
            if !close {
                mem.process_crash();
            }
            // The old log is no raft log: the quorum refuses it as it is.
            let e = block_on(RaftLog::open(Arc::new(mem.clone()), Path::new(DATA), 0))
                .err()
                .expect("refused");
            assert!(e.to_string().contains("no raft epoch"), "{e}");
            let done = migrate_on(Arc::new(mem.clone())).unwrap();
            assert_eq!(done, Migration::Folded { end: 4, records: 4 });
            let (log, state, loaded) = open_quorum(&mem);
            assert_eq!(loaded, image);
            assert_eq!(loaded.topic("a").unwrap().configs["retention.ms"], "5");
            assert_eq!((log.start_offset(), state.end_offset), (4, 4));
            let id = OffsetAndEpoch {
                offset: 4,
                epoch: 0,
            };
            assert_eq!(state.earliest_snapshot.map(|s| s.id), Some(id));
            assert_eq!(state.latest_snapshot.map(|s| s.id), Some(id));
            assert!(state.epochs.is_empty());
            drop(log);
            // Done once: later starts (after a power loss too) find nothing to fold.
            mem.power_loss();
            assert_eq!(
                migrate_on(Arc::new(mem.clone())).unwrap(),
                Migration::NotNeeded
            );
            assert_eq!(open_quorum(&mem).2, image);
        }
    }

    #[test]
    fn the_old_stores_rules_apply_an_unconfirmed_tail_goes_a_damaged_checkpoint_stops() {
        let mem = MemDisk::new(2);
        let checkpoint = Path::new(DATA).join(METADATA_DIR).join("recovery-point");
        let first = write_old_log(&mem, &commits()[..1], false);
        let before = mem.file_contents(&checkpoint).unwrap();
        let dir = Path::new(DATA).join(METADATA_DIR);
        // "c" fsynced but its checkpoint never written: that commit was never confirmed.
        let (mut log, _) = block_on(Log::open(
            Arc::new(mem.clone()),
            &dir,
            LogConfig::default(),
            0,
        ))
        .unwrap();
        let mut builder = BatchBuilder::new(0);
        builder.push(None, Some(&serde_json::to_vec(&topic("c", 3)).unwrap()), 0);
        let mut bytes = builder.finish(-1, -1, -1);
        let mut header = batch::check(&bytes).unwrap();
        log.append(&mut bytes, std::slice::from_mut(&mut header), 0)
            .unwrap();
        let plan = log.flush_plan();
        block_on(Log::sync_files(&plan)).unwrap();
        drop(log);
        block_on(crate::io::write_file_atomic(&mem, &checkpoint, &before)).unwrap();
        mem.process_crash();
        let done = migrate_on(Arc::new(mem.clone())).unwrap();
        assert_eq!(done, Migration::Folded { end: 2, records: 2 });
        assert_eq!(open_quorum(&mem).2, first);

        let mem = MemDisk::new(3);
        write_old_log(&mem, &commits(), false);
        mem.process_crash();
        mem.flip_bit(&checkpoint, 0, 0).unwrap();
        let e = migrate_on(Arc::new(mem.clone())).expect_err("refused");
        assert!(e.to_string().contains("checkpoint is damaged"), "{e}");
    }

    /// A `MemDisk` that crashes (power loss, then every call fails) at its `at`-th change:
    /// a write, a length change, an fsync, a rename, a removal or a directory fsync.
    #[derive(Clone)]
    struct CrashAt {
        inner: MemDisk,
        changes: Arc<AtomicU64>,
        at: u64,
    }

    impl CrashAt {
        fn change(&self) {
            if self.changes.fetch_add(1, Ordering::SeqCst) + 1 == self.at {
                self.inner.freeze(Crash::PowerLoss);
            }
        }
    }

    struct CrashAtFile {
        inner: Arc<dyn File>,
        disk: CrashAt,
    }

    impl File for CrashAtFile {
        fn len(&self) -> io::Result<u64> {
            self.inner.len()
        }
        fn read_at(&self, pos: u64, buf: &mut [u8]) -> io::Result<usize> {
            self.inner.read_at(pos, buf)
        }
        fn write_at(&self, pos: u64, data: &[u8]) -> io::Result<()> {
            self.disk.change();
            self.inner.write_at(pos, data)
        }
        fn set_len(&self, len: u64) -> io::Result<()> {
            self.disk.change();
            self.inner.set_len(len)
        }
        fn sync(&self) -> BoxFuture<'static, io::Result<()>> {
            self.disk.change();
            self.inner.sync()
        }
    }

    impl Disk for CrashAt {
        fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn File>> {
            Ok(Arc::new(CrashAtFile {
                inner: self.inner.open(path, mode)?,
                disk: self.clone(),
            }))
        }
        fn create_dir_all(&self, path: &Path) -> io::Result<()> {
            self.change();
            self.inner.create_dir_all(path)
        }
        fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
            self.inner.list_dir(path)
        }
        fn exists(&self, path: &Path) -> bool {
            self.inner.exists(path)
        }
        fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
            self.change();
            self.inner.rename(from, to)
        }
        fn remove_file(&self, path: &Path) -> io::Result<()> {
            self.change();
            self.inner.remove_file(path)
        }
        fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
            self.change();
            self.inner.remove_dir_all(path)
        }
        fn sync_dir(&self, path: &Path) -> BoxFuture<'static, io::Result<()>> {
            self.change();
            self.inner.sync_dir(path)
        }
    }

    #[test]
    fn a_crash_at_any_step_of_the_upgrade_leaves_it_to_redo_or_done() {
        let mut crashed = 0;
        for at in 1.. {
            let mem = MemDisk::new(at);
            let image = write_old_log(&mem, &commits(), at % 2 == 0);
            let disk = CrashAt {
                inner: mem.clone(),
                changes: Arc::new(AtomicU64::new(0)),
                at,
            };
            let result = migrate_on(Arc::new(disk.clone()));
            if !mem.is_frozen() {
                // Past the last change: every crash point was tried.
                assert_eq!(result.unwrap(), Migration::Folded { end: 4, records: 4 });
                break;
            }
            crashed += 1;
            assert!(result.is_err(), "a frozen disk fails the upgrade");
            mem.thaw();
            // The next start redoes the fold or finds it done; either way the same metadata.
            migrate_on(Arc::new(mem.clone())).unwrap();
            let (_, state, loaded) = open_quorum(&mem);
            assert_eq!(loaded, image, "crash at change {at}");
            assert_eq!(state.end_offset, 4, "crash at change {at}");
            assert_eq!(
                migrate_on(Arc::new(mem.clone())).unwrap(),
                Migration::NotNeeded
            );
        }
        assert!(crashed > 5, "only {crashed} crash points");
    }
}
