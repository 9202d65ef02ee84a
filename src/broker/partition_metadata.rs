//! The file in each partition directory naming the topic id it belongs to (Kafka's
//! `partition.metadata`): a directory whose id is not the image's belongs to a deleted or
//! re-created topic.

use std::io;
use std::path::Path;

use uuid::Uuid;

use crate::io::{read_file, write_file_atomic, Io};

/// File in each partition directory naming the topic id it belongs to (Kafka's name).
const PARTITION_METADATA: &str = "partition.metadata";

pub(super) fn read_topic_id(io: &Io, dir: &Path) -> Option<Uuid> {
    let raw = read_file(io.disk.as_ref(), &dir.join(PARTITION_METADATA)).ok()?;
    let text = String::from_utf8(raw).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("topic_id: "))
        .and_then(|id| Uuid::parse_str(id.trim()).ok())
}

pub(super) async fn write_topic_id(io: &Io, dir: &Path, id: Uuid) -> io::Result<()> {
    if read_topic_id(io, dir) == Some(id) {
        return Ok(());
    }
    let text = format!("version: 0\ntopic_id: {id}\n");
    write_file_atomic(
        io.disk.as_ref(),
        &dir.join(PARTITION_METADATA),
        text.as_bytes(),
    )
    .await
}
