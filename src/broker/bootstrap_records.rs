//! The records a cluster's metadata starts with (Kafka's `bootstrap.checkpoint`, which
//! `kafka-storage.sh format --add-scram` fills): `weir format --add-scram` writes them to each
//! log directory, and the active controller commits them as the first write of an empty
//! metadata log — before any broker registers — so SCRAM can secure the inter-broker
//! listeners from the first start. A log that holds anything is never bootstrapped again
//! (a credential deleted later stays deleted), as in Kafka.

use std::io;
use std::path::Path;

use super::{errors::CommitError, shared::Broker};
use crate::controller::MetadataRecord;
use crate::io::{read_file, write_file_atomic, Io};

/// The file in a log directory: one JSON record a line.
pub const FILE: &str = "bootstrap.records";

/// Writes `records` for the node's first start.
pub async fn write(io: &Io, dir: &Path, records: &[MetadataRecord]) -> anyhow::Result<()> {
    let mut text = String::new();
    for r in records {
        text.push_str(&serde_json::to_string(r)?);
        text.push('\n');
    }
    write_file_atomic(io.disk.as_ref(), &dir.join(FILE), text.as_bytes()).await?;
    Ok(())
}

/// The bootstrap records of `dir` (none without the file).
pub fn read(io: &Io, dir: &Path) -> io::Result<Vec<MetadataRecord>> {
    let path = dir.join(FILE);
    let Ok(raw) = read_file(io.disk.as_ref(), &path) else {
        return Ok(Vec::new());
    };
    String::from_utf8_lossy(&raw)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            serde_json::from_str(l)
                .map_err(|e| io::Error::other(format!("{}: bad record: {e}", path.display())))
        })
        .collect()
}

impl Broker {
    /// Commits the bootstrap records if the metadata log is still empty. The caller holds
    /// the metadata lock (so nothing else can write first) and is the active controller.
    pub(crate) async fn commit_bootstrap_records(&self) -> Result<(), CommitError> {
        if self.image().applied() > 0 {
            return Ok(());
        }
        let Some(dir) = self.config.log_dirs.first() else {
            return Ok(());
        };
        let records = read(&self.io, Path::new(dir)).map_err(CommitError::Storage)?;
        if records.is_empty() {
            return Ok(());
        }
        tracing::info!(
            count = records.len(),
            "committing the bootstrap records of weir format"
        );
        self.commit_through_quorum(false, |_, image| {
            // Checked again against the image the write is decided on.
            let records = if image.applied() > 0 {
                Vec::new()
            } else {
                records
            };
            Ok((records, ()))
        })
        .await
    }
}
