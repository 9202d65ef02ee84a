//! Durable metadata: every [`MetadataRecord`] is one record (JSON value) in the metadata log
//! `__cluster_metadata-0`, fsynced before the change takes effect, and replayed at start.

use std::io;
use std::path::Path;
use std::sync::Arc;

use super::image::{MetadataImage, MetadataRecord};
use crate::io::Disk;
use crate::log::batch::{self, BatchBuilder};
use crate::log::{Log, LogConfig};

pub const METADATA_DIR: &str = "__cluster_metadata-0";

/// Bytes read from the metadata log per step while replaying it.
const REPLAY_CHUNK: usize = 1 << 20;

pub struct MetadataStore {
    log: Log,
    image: MetadataImage,
}

impl MetadataStore {
    /// Opens the metadata log under `log_dir` and replays it into an image.
    pub async fn open(
        disk: Arc<dyn Disk>,
        log_dir: &Path,
        now_ms: i64,
    ) -> io::Result<MetadataStore> {
        let dir = log_dir.join(METADATA_DIR);
        let (log, recovery) = Log::open(disk, &dir, LogConfig::default(), now_ms).await?;
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
        let mut image = MetadataImage::default();
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
                    image.apply(&parsed);
                }
                offset = header.next_offset();
            }
        }
        Ok(MetadataStore { log, image })
    }

    pub fn image(&self) -> &MetadataImage {
        &self.image
    }

    /// Appends the records as one batch, fsyncs, then applies them.
    pub async fn commit(&mut self, records: &[MetadataRecord], now_ms: i64) -> io::Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let mut builder = BatchBuilder::new(now_ms);
        for record in records {
            let json = serde_json::to_vec(record).map_err(io::Error::other)?;
            builder.push(None, Some(&json), now_ms);
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
            // Not applied, so not kept: a restart must not resurrect a change that failed.
            let _ = self.log.truncate_to(before);
            return Err(e);
        }
        for record in records {
            self.image.apply(record);
        }
        Ok(())
    }

    pub async fn close(&mut self, now_ms: i64) -> io::Result<()> {
        self.log.close(now_ms).await
    }
}
