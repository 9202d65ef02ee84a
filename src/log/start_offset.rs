//! The durable log start offset: the `log-start-offset` file of a partition directory, Kafka's
//! `log-start-offset-checkpoint` for one log. DeleteRecords moves the start offset into the
//! middle of a segment, where the segment files alone cannot say where the log begins; this
//! file does. It is written (atomically, fsynced) before the new start takes effect, so a start
//! offset that a client was told about survives a kill -9 or a power loss.
//!
//! Format: `"<offset> <crc32c hex>\n"`, like the recovery point. A damaged file is ignored with a
//! warning (the log then starts at its first segment), never trusted.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::io::{read_file, write_file_atomic, Disk};

pub(super) const START_OFFSET_FILE: &str = "log-start-offset";

/// A log start offset to make durable, written outside any lock on the log.
pub struct StartOffsetWrite {
    pub(super) disk: Arc<dyn Disk>,
    pub(super) dir: PathBuf,
    pub(super) offset: i64,
}

impl StartOffsetWrite {
    pub fn offset(&self) -> i64 {
        self.offset
    }

    /// Writes and fsyncs the file (temporary file, rename, directory sync).
    pub async fn write(&self) -> io::Result<()> {
        let text = render(self.offset);
        let path = self.dir.join(START_OFFSET_FILE);
        write_file_atomic(self.disk.as_ref(), &path, text.as_bytes()).await
    }
}

fn render(offset: i64) -> String {
    let text = offset.to_string();
    format!("{text} {:08x}\n", crc32c::crc32c(text.as_bytes()))
}

/// The stored start offset, if there is a sound one.
pub(super) fn read(disk: &dyn Disk, dir: &Path) -> Option<i64> {
    let raw = read_file(disk, &dir.join(START_OFFSET_FILE)).ok()?;
    let parsed = (|| {
        let text = std::str::from_utf8(&raw).ok()?;
        let (offset, crc) = text.trim().split_once(' ')?;
        let crc = u32::from_str_radix(crc, 16).ok()?;
        if crc32c::crc32c(offset.as_bytes()) != crc {
            return None;
        }
        offset.parse::<i64>().ok().filter(|&o| o >= 0)
    })();
    if parsed.is_none() {
        tracing::warn!(dir = %dir.display(), "log-start-offset file is damaged; ignoring it");
    }
    parsed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::memdisk::{block_on, MemDisk};

    #[test]
    fn round_trip_and_damage() {
        let disk = MemDisk::new(1);
        let dir = Path::new("/d");
        disk.create_dir_all(dir).unwrap();
        assert_eq!(read(&disk, dir), None);
        let write = StartOffsetWrite {
            disk: Arc::new(disk.clone()),
            dir: dir.to_path_buf(),
            offset: 1234,
        };
        block_on(write.write()).unwrap();
        assert_eq!(read(&disk, dir), Some(1234));
        disk.flip_bit(dir.join(START_OFFSET_FILE), 1, 0).unwrap();
        assert_eq!(read(&disk, dir), None);
    }
}
