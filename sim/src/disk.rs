//! The simulated disk as a node sees it: [`MemDisk`] (durability model, faults) plus fsync
//! latency in simulated time, so that work racing an fsync actually races it.

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use madsim::rand::Rng;
use weir::io::memdisk::MemDisk;
use weir::io::{BoxFuture, Disk, File, OpenMode};

pub struct NodeDisk {
    inner: MemDisk,
    /// fsync takes this long, in simulated microseconds: [min, max].
    sync_latency_us: [u64; 2],
}

impl NodeDisk {
    pub fn new(inner: MemDisk, sync_latency_us: [u64; 2]) -> NodeDisk {
        NodeDisk {
            inner,
            sync_latency_us,
        }
    }
}

fn latency(range: [u64; 2]) -> Duration {
    let us = if range[0] >= range[1] {
        range[0]
    } else {
        madsim::rand::thread_rng().gen_range(range[0]..=range[1])
    };
    Duration::from_micros(us)
}

/// The data is durable as of the call (MemDisk snapshots it then); the caller learns so only
/// after the device's latency, as with a real fsync.
fn delayed(
    done: BoxFuture<'static, io::Result<()>>,
    range: [u64; 2],
) -> BoxFuture<'static, io::Result<()>> {
    let wait = latency(range);
    Box::pin(async move {
        let result = done.await;
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        result
    })
}

struct NodeFile {
    inner: Arc<dyn File>,
    sync_latency_us: [u64; 2],
}

impl File for NodeFile {
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
        self.inner.set_len(len)
    }
    fn sync(&self) -> BoxFuture<'static, io::Result<()>> {
        delayed(self.inner.sync(), self.sync_latency_us)
    }
}

impl Disk for NodeDisk {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn File>> {
        Ok(Arc::new(NodeFile {
            inner: self.inner.open(path, mode)?,
            sync_latency_us: self.sync_latency_us,
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
        delayed(self.inner.sync_dir(path), self.sync_latency_us)
    }
}
