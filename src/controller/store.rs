//! Durable metadata: every [`MetadataRecord`] is one record (JSON value) in the metadata log
//! `__cluster_metadata-0`, fsynced before the change takes effect, and replayed at start.
//!
//! A commit is one batch, confirmed by the recovery-point checkpoint written after its fsync.
//! Commits are serialised and a failed one is truncated away before the next starts, so at most
//! the last batch of the log can lie past the checkpoint: that batch was never confirmed (the
//! broker crashed, or a failed commit's rollback did not reach the disk) and is dropped at start.
//! When a rollback fails outright, the log holds a batch the image does not have: the store
//! then refuses every further write, and does not mark the log clean, until a restart drops it.

use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use super::image::{MetadataImage, MetadataRecord};
use crate::io::Disk;
use crate::log::batch::{self, BatchBuilder};
use crate::log::{Log, LogConfig};

pub const METADATA_DIR: &str = "__cluster_metadata-0";

/// Bytes read from the metadata log per step while replaying it.
const REPLAY_CHUNK: usize = 1 << 20;

/// The committed metadata records a node applied, in order: `(offset, raw value)`. Shared
/// between the writer (the store, or the quorum driver) and readers that must not wait for the
/// writer's lock (`Broker::committed_metadata`). It holds the same bytes as the metadata log.
#[derive(Clone, Default)]
pub struct AppliedRecords {
    inner: Arc<Mutex<AppliedInner>>,
}

#[derive(Default)]
struct AppliedInner {
    records: Vec<(u64, Bytes)>,
    /// The offset after the last committed entry (records and control batches alike).
    end: u64,
}

impl AppliedRecords {
    /// Records a committed record. Offsets strictly increase.
    pub fn push(&self, offset: u64, value: Bytes) {
        let mut inner = self.inner.lock().unwrap();
        assert!(
            offset >= inner.end,
            "committed metadata goes back: {offset} < {}",
            inner.end
        );
        inner.records.push((offset, value));
        inner.end = offset + 1;
    }

    /// Everything below `end` is committed (control batches carry no record to push).
    pub fn advance_to(&self, end: u64) {
        let mut inner = self.inner.lock().unwrap();
        inner.end = inner.end.max(end);
    }

    pub fn end(&self) -> u64 {
        self.inner.lock().unwrap().end
    }

    /// At most `max` records from offset `from`.
    pub fn read(&self, from: u64, max: usize) -> Vec<(u64, Bytes)> {
        let inner = self.inner.lock().unwrap();
        let start = inner.records.partition_point(|(o, _)| *o < from);
        inner.records[start..].iter().take(max).cloned().collect()
    }
}

pub struct MetadataStore {
    log: Log,
    image: MetadataImage,
    applied: AppliedRecords,
    /// Why the store no longer writes: a failed commit could not be rolled back.
    read_only: Option<String>,
}

impl MetadataStore {
    /// Opens the metadata log under `log_dir` and replays it into an image.
    pub async fn open(
        disk: Arc<dyn Disk>,
        log_dir: &Path,
        now_ms: i64,
    ) -> io::Result<MetadataStore> {
        let dir = log_dir.join(METADATA_DIR);
        let (log, recovery) = Log::open(disk.clone(), &dir, LogConfig::default(), now_ms).await?;
        // Every commit is fsynced and checkpointed: a recovery that had to guess (damaged
        // checkpoint) could silently forget acknowledged topics, so refuse to start instead.
        if recovery.checkpoint_damaged {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{}: the recovery-point checkpoint is damaged; the metadata log cannot be trusted",
                    dir.display()
                ),
            ));
        }
        let mut log = log;
        drop_unconfirmed_tail(&mut log, recovery.checkpointed, disk.as_ref(), &dir, now_ms).await?;
        let mut image = MetadataImage::default();
        let applied = AppliedRecords::default();
        let mut offset = log.start_offset();
        let end = log.end_offset();
        while offset < end {
            let data = log.read(offset, REPLAY_CHUNK, end).map_err(|e| match e {
                crate::log::ReadError::Io(e) => e,
                other => io::Error::other(format!("{other:?}")),
            })?;
            if data.is_empty() {
                break;
            }
            for item in batch::iter(&data) {
                let (at, header) =
                    item.map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                let bytes = &data[at..at + header.total_len()];
                let records = batch::records(bytes, &header)
                    .ok_or_else(|| {
                        io::Error::new(io::ErrorKind::InvalidData, "compressed metadata")
                    })?
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                for record in records {
                    let value = record.value.unwrap_or_default();
                    let parsed: MetadataRecord = serde_json::from_slice(value).map_err(|e| {
                        io::Error::new(
                            io::ErrorKind::InvalidData,
                            format!("metadata record at offset {}: {e}", record.offset),
                        )
                    })?;
                    image.apply(record.offset, &parsed);
                    applied.push(record.offset as u64, Bytes::copy_from_slice(value));
                }
                offset = header.next_offset();
            }
        }
        applied.advance_to(log.end_offset() as u64);
        Ok(MetadataStore {
            log,
            image,
            applied,
            read_only: None,
        })
    }

    /// Why the store refuses writes, if it does (see the module doc).
    pub fn read_only(&self) -> Option<&str> {
        self.read_only.as_deref()
    }

    fn refuse_writes(&self) -> io::Result<()> {
        match &self.read_only {
            None => Ok(()),
            Some(reason) => Err(io::Error::other(format!(
                "the metadata store is read-only ({reason}); restart the broker to repair it"
            ))),
        }
    }

    pub fn image(&self) -> &MetadataImage {
        &self.image
    }

    /// The records this store committed, shared.
    pub fn applied(&self) -> AppliedRecords {
        self.applied.clone()
    }

    /// Appends the records as one batch, fsyncs, then applies them.
    pub async fn commit(&mut self, records: &[MetadataRecord], now_ms: i64) -> io::Result<()> {
        self.refuse_writes()?;
        if records.is_empty() {
            return Ok(());
        }
        let mut builder = BatchBuilder::new(now_ms);
        let mut values = Vec::with_capacity(records.len());
        for record in records {
            let json = serde_json::to_vec(record).map_err(io::Error::other)?;
            builder.push(None, Some(&json), now_ms);
            values.push(Bytes::from(json));
        }
        let mut bytes = builder.finish(-1, -1, -1);
        let mut header = batch::check(&bytes).expect("a batch we just built is valid");
        let before = self.log.end_offset();
        let written = async {
            self.log
                .append(&mut bytes, std::slice::from_mut(&mut header), now_ms)?;
            let plan = self.log.flush_plan();
            #[cfg(madsim)]
            let skip = crate::config::planted::active(crate::config::PlantedBug::MetadataNotSynced);
            #[cfg(not(madsim))]
            let skip = false;
            if !skip {
                Log::sync_files(&plan).await?;
            }
            self.log.flushed(&plan, now_ms);
            // With the checkpoint at the end, a restart verifies (rather than cuts) this data:
            // damage to fsynced metadata stops the broker instead of silently dropping topics.
            self.log.checkpoint().write().await?;
            Ok::<_, io::Error>(())
        }
        .await;
        if let Err(e) = written {
            // Not applied, so not kept: a restart must not resurrect a change that failed. The
            // checkpoint still confirms only `before`, so should this truncation not reach the
            // disk, the next start drops the batch (`drop_unconfirmed_tail`).
            if let Err(rollback) = self.log.truncate_to(before) {
                let reason = format!(
                    "a failed commit ({e}) could not be rolled back from offset {before}: {rollback}"
                );
                tracing::error!(%reason, "metadata store is now read-only");
                self.read_only = Some(reason);
            }
            return Err(e);
        }
        assert_eq!(self.log.recovery_point(), self.log.end_offset());
        for (i, record) in records.iter().enumerate() {
            self.image.apply(before + i as i64, record);
        }
        for (i, value) in values.into_iter().enumerate() {
            self.applied.push(before as u64 + i as u64, value);
        }
        Ok(())
    }

    /// Flushes and marks the log clean, unless it holds a batch that was never confirmed: a
    /// clean close would confirm it.
    pub async fn close(&mut self, now_ms: i64) -> io::Result<()> {
        self.refuse_writes()?;
        self.log.close(now_ms).await
    }
}

/// Drops the batch past the checkpointed recovery point, if there is one (see the module doc),
/// and makes that durable before anything is written after it. More than one batch there is not
/// something a commit can leave behind, so it stops the start instead of guessing.
async fn drop_unconfirmed_tail(
    log: &mut Log,
    confirmed: i64,
    disk: &dyn Disk,
    dir: &Path,
    now_ms: i64,
) -> io::Result<()> {
    if confirmed == log.end_offset() {
        return Ok(());
    }
    assert!(confirmed < log.end_offset());
    let mut tail = Vec::new();
    log.scan_headers(confirmed, |h| tail.push((h.base_offset, h.next_offset())))?;
    let single = tail.len() == 1 && tail[0] == (confirmed, log.end_offset());
    if !single {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{}: {} batches past the recovery point {confirmed} (log end {}); a commit \
                 leaves at most one, so the metadata log cannot be trusted",
                dir.display(),
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
    use std::sync::atomic::{AtomicBool, Ordering};

    use uuid::Uuid;

    use super::*;
    use crate::io::memdisk::{block_on, MemDisk};
    use crate::io::{BoxFuture, File, OpenMode};

    /// A `MemDisk` whose fsyncs and truncations fail while `failing` is set: a commit that fails
    /// at its fsync and then cannot be rolled back.
    #[derive(Clone)]
    struct FlakyDisk {
        inner: MemDisk,
        failing: Arc<AtomicBool>,
    }

    struct FlakyFile {
        inner: Arc<dyn File>,
        failing: Arc<AtomicBool>,
    }

    fn injected() -> io::Error {
        io::Error::other("injected failure")
    }

    impl File for FlakyFile {
        fn len(&self) -> io::Result<u64> {
            self.inner.len()
        }
        fn read_at(&self, pos: u64, buf: &mut [u8]) -> io::Result<usize> {
            self.inner.read_at(pos, buf)
        }
        fn write_at(&self, pos: u64, data: &[u8]) -> io::Result<()> {
            self.inner.write_at(pos, data)
        }
        fn set_len(&self, len: u64) -> io::Result<()> {
            if self.failing.load(Ordering::SeqCst) {
                return Err(injected());
            }
            self.inner.set_len(len)
        }
        fn sync(&self) -> BoxFuture<'static, io::Result<()>> {
            if self.failing.load(Ordering::SeqCst) {
                return Box::pin(async { Err(injected()) });
            }
            self.inner.sync()
        }
    }

    impl Disk for FlakyDisk {
        fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn File>> {
            Ok(Arc::new(FlakyFile {
                inner: self.inner.open(path, mode)?,
                failing: self.failing.clone(),
            }))
        }
        fn create_dir_all(&self, path: &Path) -> io::Result<()> {
            self.inner.create_dir_all(path)
        }
        fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
            self.inner.list_dir(path)
        }
        fn exists(&self, path: &Path) -> bool {
            self.inner.exists(path)
        }
        fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
            self.inner.rename(from, to)
        }
        fn remove_file(&self, path: &Path) -> io::Result<()> {
            self.inner.remove_file(path)
        }
        fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
            self.inner.remove_dir_all(path)
        }
        fn sync_dir(&self, path: &Path) -> BoxFuture<'static, io::Result<()>> {
            self.inner.sync_dir(path)
        }
    }

    fn topic(name: &str, id: u64) -> MetadataRecord {
        MetadataRecord::topic(name, Uuid::from_u64_pair(0, id), BTreeMap::new())
    }

    fn open(disk: Arc<dyn Disk>) -> io::Result<MetadataStore> {
        block_on(MetadataStore::open(disk, Path::new("/data"), 0))
    }

    fn names(store: &MetadataStore) -> Vec<String> {
        store.image().topics().map(|t| t.name.clone()).collect()
    }

    #[test]
    fn failed_rollback_makes_the_store_read_only_and_a_restart_drops_the_batch() {
        let mem = MemDisk::new(1);
        let disk = FlakyDisk {
            inner: mem.clone(),
            failing: Arc::new(AtomicBool::new(false)),
        };
        let mut store = open(Arc::new(disk.clone())).unwrap();
        block_on(store.commit(&[topic("a", 1)], 0)).unwrap();
        disk.failing.store(true, Ordering::SeqCst);
        assert!(block_on(store.commit(&[topic("b", 2)], 0)).is_err());
        assert!(store.read_only().is_some());
        disk.failing.store(false, Ordering::SeqCst);
        // The batch for "b" is still in the log: nothing more may be written after it, and a
        // clean close would confirm it.
        let e = block_on(store.commit(&[topic("b", 3)], 0)).unwrap_err();
        assert!(e.to_string().contains("read-only"), "{e}");
        assert!(block_on(store.close(0)).is_err());
        assert_eq!(names(&store), ["a"]);
        drop(store);
        mem.process_crash();
        // The unconfirmed batch is dropped at start: "b" was never created...
        let mut store = open(Arc::new(mem.clone())).unwrap();
        assert_eq!(names(&store), ["a"]);
        assert!(store.read_only().is_none());
        // ...so creating it again is no second creation: every later start replays cleanly.
        block_on(store.commit(&[topic("b", 3)], 0)).unwrap();
        block_on(store.close(0)).unwrap();
        drop(store);
        mem.process_crash();
        let store = open(Arc::new(mem.clone())).unwrap();
        assert_eq!(names(&store), ["a", "b"]);
        assert_eq!(
            store.image().topic("b").unwrap().id,
            Uuid::from_u64_pair(0, 3)
        );
    }

    #[test]
    fn applied_records_list_every_committed_record_in_order_across_restarts() {
        let mem = MemDisk::new(4);
        let mut store = open(Arc::new(mem.clone())).unwrap();
        block_on(store.commit(&[topic("a", 1), topic("b", 2)], 0)).unwrap();
        block_on(store.commit(&[topic("c", 3)], 0)).unwrap();
        let applied = store.applied();
        assert_eq!(applied.end(), 3);
        let offsets: Vec<u64> = applied.read(1, 10).iter().map(|(o, _)| *o).collect();
        assert_eq!(offsets, [1, 2]);
        let before = applied.read(0, 10);
        block_on(store.close(0)).unwrap();
        drop(store);
        mem.process_crash();
        let store = open(Arc::new(mem.clone())).unwrap();
        assert_eq!(store.applied().read(0, 10), before);
        assert_eq!(store.applied().read(0, 1).len(), 1);
        let first: MetadataRecord = serde_json::from_slice(&before[0].1).unwrap();
        assert_eq!(first, topic("a", 1));
    }

    #[test]
    fn a_commit_interrupted_before_its_checkpoint_is_dropped() {
        let mem = MemDisk::new(2);
        let mut store = open(Arc::new(mem.clone())).unwrap();
        block_on(store.commit(&[topic("a", 1)], 0)).unwrap();
        let checkpoint = Path::new("/data/__cluster_metadata-0/recovery-point");
        let before = mem.file_contents(checkpoint).unwrap();
        block_on(store.commit(&[topic("b", 2)], 0)).unwrap();
        // As if the broker died after the fsync but before the checkpoint of "b".
        block_on(crate::io::write_file_atomic(&mem, checkpoint, &before)).unwrap();
        drop(store);
        mem.process_crash();
        let store = open(Arc::new(mem.clone())).unwrap();
        assert_eq!(names(&store), ["a"]);
    }

    #[test]
    fn more_than_one_unconfirmed_batch_stops_the_start() {
        let mem = MemDisk::new(3);
        let mut store = open(Arc::new(mem.clone())).unwrap();
        let checkpoint = Path::new("/data/__cluster_metadata-0/recovery-point");
        block_on(store.commit(&[topic("a", 1)], 0)).unwrap();
        let before = mem.file_contents(checkpoint).unwrap();
        block_on(store.commit(&[topic("b", 2)], 0)).unwrap();
        block_on(store.commit(&[topic("c", 3)], 0)).unwrap();
        block_on(crate::io::write_file_atomic(&mem, checkpoint, &before)).unwrap();
        drop(store);
        mem.process_crash();
        let e = open(Arc::new(mem.clone())).err().expect("refused");
        assert!(
            e.to_string().contains("2 batches past the recovery point"),
            "{e}"
        );
    }
}
