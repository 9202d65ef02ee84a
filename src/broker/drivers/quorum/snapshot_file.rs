//! Metadata snapshot files in `__cluster_metadata-0`, named as Kafka names them:
//! `<end offset, 20 digits>-<epoch, 10 digits>.checkpoint`. A snapshot being fetched from the
//! leader is written to `<name>.part` and renamed into place once complete and verified.
//!
//! Format: one header line `weir-metadata-snapshot 1 <end offset> <epoch> <body bytes>
//! <crc32c of the body, hex>\n`, then the body (the image, see
//! `MetadataImage::to_snapshot`). A file whose header does not match its name, whose length
//! or checksum is wrong, is damaged: [`decode`] says why and the caller ignores it.
//!
//! Every write goes through the `io` traits and is durable before it is reported: a local
//! snapshot is written atomically (temporary file, fsync, rename, directory fsync); a fetched
//! one is fsynced before it is verified, and its rename is followed by a directory fsync.

use std::io;
use std::path::{Path, PathBuf};

use bytes::Bytes;

use crate::io::{read_exact_at, read_file, write_file_atomic, Disk, OpenMode};
use crate::raft::{OffsetAndEpoch, SnapshotMeta};

const MAGIC: &str = "weir-metadata-snapshot";
const VERSION: u32 = 1;
const SUFFIX: &str = ".checkpoint";
const PARTIAL: &str = ".part";
/// The largest header line a valid file can have (bounds what is read to find it).
const MAX_HEADER: usize = 128;
/// The largest snapshot accepted, from the leader or the disk.
pub const MAX_SNAPSHOT_BYTES: u64 = 1 << 30;

pub fn file_name(id: OffsetAndEpoch) -> String {
    format!("{:020}-{:010}{SUFFIX}", id.offset, id.epoch)
}

fn path(dir: &Path, id: OffsetAndEpoch) -> PathBuf {
    dir.join(file_name(id))
}

fn partial_path(dir: &Path, id: OffsetAndEpoch) -> PathBuf {
    dir.join(format!("{}{PARTIAL}", file_name(id)))
}

/// The id a snapshot file name carries.
pub fn parse_name(name: &str) -> Option<OffsetAndEpoch> {
    let stem = name.strip_suffix(SUFFIX)?;
    let (offset, epoch) = stem.split_once('-')?;
    if offset.len() != 20 || epoch.len() != 10 {
        return None;
    }
    Some(OffsetAndEpoch {
        offset: offset.parse().ok()?,
        epoch: epoch.parse().ok()?,
    })
}

/// A snapshot file's bytes for `body`.
pub fn encode(id: OffsetAndEpoch, body: &[u8]) -> Vec<u8> {
    let header = format!(
        "{MAGIC} {VERSION} {} {} {} {:08x}\n",
        id.offset,
        id.epoch,
        body.len(),
        crc32c::crc32c(body)
    );
    let mut out = Vec::with_capacity(header.len() + body.len());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(body);
    out
}

/// The body of snapshot file `bytes`, if it is snapshot `id` and undamaged.
pub fn decode(id: OffsetAndEpoch, bytes: &[u8]) -> Result<&[u8], String> {
    let end = bytes
        .iter()
        .take(MAX_HEADER)
        .position(|b| *b == b'\n')
        .ok_or("no header line")?;
    let header = std::str::from_utf8(&bytes[..end]).map_err(|_| "the header is not text")?;
    let fields: Vec<&str> = header.split(' ').collect();
    let [magic, version, offset, epoch, len, crc] = fields[..] else {
        return Err(format!("a header of {} fields", fields.len()));
    };
    if magic != MAGIC || version != VERSION.to_string() {
        return Err(format!(
            "not a version {VERSION} snapshot: {magic} {version}"
        ));
    }
    if offset != id.offset.to_string() || epoch != id.epoch.to_string() {
        return Err(format!(
            "the header names {offset}-{epoch}, the file name another"
        ));
    }
    let body = &bytes[end + 1..];
    if len != body.len().to_string() {
        return Err(format!("{} body bytes, the header says {len}", body.len()));
    }
    let want = u32::from_str_radix(crc, 16).map_err(|_| "a bad checksum field")?;
    let got = crc32c::crc32c(body);
    if got != want {
        return Err(format!("checksum {got:08x}, the header says {want:08x}"));
    }
    Ok(body)
}

/// Writes snapshot `id` of `body` atomically and durably.
pub async fn write(
    disk: &dyn Disk,
    dir: &Path,
    id: OffsetAndEpoch,
    body: &[u8],
) -> io::Result<SnapshotMeta> {
    let bytes = encode(id, body);
    write_file_atomic(disk, &path(dir, id), &bytes).await?;
    Ok(SnapshotMeta {
        id,
        size: bytes.len() as u64,
    })
}

/// The snapshot ids in `dir`, oldest first. Partial and temporary files are not listed.
pub fn list(disk: &dyn Disk, dir: &Path) -> io::Result<Vec<OffsetAndEpoch>> {
    let mut ids: Vec<OffsetAndEpoch> = disk
        .list_dir(dir)?
        .iter()
        .filter_map(|n| parse_name(n))
        .collect();
    ids.sort_by_key(|id| (id.offset, id.epoch));
    Ok(ids)
}

/// Deletes the partial files an interrupted fetch left (at start).
pub fn remove_partials(disk: &dyn Disk, dir: &Path) -> io::Result<()> {
    for name in disk.list_dir(dir)? {
        // `write_file_atomic` writes `<stem>.tmp` first; a fetch writes `<name>.part`.
        let partial = name
            .strip_suffix(PARTIAL)
            .is_some_and(|n| parse_name(n).is_some());
        let temporary = name
            .strip_suffix(".tmp")
            .is_some_and(|stem| parse_name(&format!("{stem}{SUFFIX}")).is_some());
        if partial || temporary {
            disk.remove_file(&dir.join(name))?;
        }
    }
    Ok(())
}

/// Reads and verifies snapshot `id`: its size and body.
pub fn read(disk: &dyn Disk, dir: &Path, id: OffsetAndEpoch) -> Result<(u64, Vec<u8>), String> {
    let bytes = read_file(disk, &path(dir, id)).map_err(|e| format!("unreadable: {e}"))?;
    if bytes.len() as u64 > MAX_SNAPSHOT_BYTES {
        return Err(format!("{} bytes, more than allowed", bytes.len()));
    }
    let body = decode(id, &bytes)?.to_vec();
    Ok((bytes.len() as u64, body))
}

/// At most `max` bytes of snapshot `id` from `start` (for FetchSnapshot).
pub fn read_chunk(
    disk: &dyn Disk,
    dir: &Path,
    id: OffsetAndEpoch,
    start: u64,
    max: usize,
) -> io::Result<Bytes> {
    let file = disk.open(&path(dir, id), OpenMode::Read)?;
    let len = file.len()?;
    let n = len.saturating_sub(start).min(max as u64) as usize;
    let mut buf = vec![0u8; n];
    read_exact_at(file.as_ref(), start, &mut buf)?;
    Ok(buf.into())
}

/// Writes a fetched chunk into the partial file of `id` (position 0 starts it afresh).
pub fn write_chunk(
    disk: &dyn Disk,
    dir: &Path,
    id: OffsetAndEpoch,
    position: u64,
    bytes: &[u8],
) -> io::Result<()> {
    if position + bytes.len() as u64 > MAX_SNAPSHOT_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "a snapshot larger than allowed",
        ));
    }
    let file = disk.open(&partial_path(dir, id), OpenMode::Create)?;
    if position == 0 {
        file.set_len(0)?;
    }
    file.write_at(position, bytes)
}

/// Makes the partial file of `id` durable and verifies it: `Ok(Err(why))` if it is damaged or
/// not `size` bytes long.
pub async fn complete(
    disk: &dyn Disk,
    dir: &Path,
    id: OffsetAndEpoch,
    size: u64,
) -> io::Result<Result<(), String>> {
    let partial = partial_path(dir, id);
    let file = disk.open(&partial, OpenMode::ReadWrite)?;
    file.sync().await?;
    let bytes = read_file(disk, &partial)?;
    if bytes.len() as u64 != size {
        return Ok(Err(format!(
            "{} bytes, the leader said {size}",
            bytes.len()
        )));
    }
    Ok(decode(id, &bytes).map(|_| ()))
}

/// Renames the verified partial file of `id` into place, durably; returns its body.
pub async fn install(disk: &dyn Disk, dir: &Path, id: OffsetAndEpoch) -> io::Result<Vec<u8>> {
    disk.rename(&partial_path(dir, id), &path(dir, id))?;
    disk.sync_dir(dir).await?;
    read(disk, dir, id).map(|(_, body)| body).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("installed snapshot: {e}"),
        )
    })
}

/// Deletes snapshot `id`, complete or partial (missing files are fine).
pub fn delete(disk: &dyn Disk, dir: &Path, id: OffsetAndEpoch) -> io::Result<()> {
    for p in [path(dir, id), partial_path(dir, id)] {
        if disk.exists(&p) {
            disk.remove_file(&p)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::memdisk::{block_on, MemDisk};

    fn id(offset: u64, epoch: u32) -> OffsetAndEpoch {
        OffsetAndEpoch { offset, epoch }
    }

    #[test]
    fn names_round_trip_and_sort() {
        let name = file_name(id(1234, 5));
        assert_eq!(name, "00000000000000001234-0000000005.checkpoint");
        assert_eq!(parse_name(&name), Some(id(1234, 5)));
        assert_eq!(parse_name("00000000000000001234.log"), None);
        assert_eq!(parse_name(&format!("{name}.part")), None);
        let mem = MemDisk::new(3);
        let dir = Path::new("/m");
        mem.create_dir_all(dir).unwrap();
        block_on(write(&mem, dir, id(90, 2), b"b")).unwrap();
        block_on(write(&mem, dir, id(7, 1), b"a")).unwrap();
        assert_eq!(list(&mem, dir).unwrap(), vec![id(7, 1), id(90, 2)]);
    }

    #[test]
    fn damage_is_detected_never_trusted() {
        let good = encode(id(10, 3), b"{\"x\":1}");
        assert_eq!(decode(id(10, 3), &good).unwrap(), b"{\"x\":1}");
        // Another id than the name's, a flipped body bit, a cut file, no header.
        assert!(decode(id(11, 3), &good).is_err());
        let mut flipped = good.clone();
        *flipped.last_mut().unwrap() ^= 1;
        assert!(decode(id(10, 3), &flipped)
            .unwrap_err()
            .contains("checksum"));
        assert!(decode(id(10, 3), &good[..good.len() - 1]).is_err());
        assert!(decode(id(10, 3), b"garbage").is_err());
        assert!(decode(id(10, 3), &[]).is_err());
    }

    #[test]
    fn a_fetched_snapshot_is_assembled_verified_and_survives_power_loss() {
        let mem = MemDisk::new(4);
        let dir = Path::new("/f");
        mem.create_dir_all(dir).unwrap();
        let leader = Path::new("/l");
        mem.create_dir_all(leader).unwrap();
        let sid = id(500, 4);
        let meta = block_on(write(&mem, leader, sid, &[7u8; 1000])).unwrap();
        let mut at = 0;
        while at < meta.size {
            let chunk = read_chunk(&mem, leader, sid, at, 300).unwrap();
            write_chunk(&mem, dir, sid, at, &chunk).unwrap();
            at += chunk.len() as u64;
        }
        assert_eq!(
            block_on(complete(&mem, dir, sid, meta.size)).unwrap(),
            Ok(())
        );
        assert!(block_on(complete(&mem, dir, sid, meta.size + 1))
            .unwrap()
            .is_err());
        let body = block_on(install(&mem, dir, sid)).unwrap();
        assert_eq!(body, vec![7u8; 1000]);
        mem.power_loss();
        assert_eq!(read(&mem, dir, sid).unwrap().1, vec![7u8; 1000]);
        delete(&mem, dir, sid).unwrap();
        assert!(list(&mem, dir).unwrap().is_empty());
    }
}
