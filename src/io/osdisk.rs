//! The real file system, for production. Left out of simulation builds, where nothing may
//! touch the host's disk.

use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use super::{BoxFuture, Disk, File, OpenMode};

/// The real file system. Absent from simulation builds: the simulator brings its own disk.
pub struct OsDisk;

struct OsFile(Arc<std::fs::File>);

impl File for OsFile {
    fn len(&self) -> io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }

    fn read_at(&self, pos: u64, buf: &mut [u8]) -> io::Result<usize> {
        let mut done = 0;
        while done < buf.len() {
            match self.0.read_at(&mut buf[done..], pos + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(done)
    }

    fn write_at(&self, pos: u64, data: &[u8]) -> io::Result<()> {
        self.0.write_all_at(data, pos)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }

    fn sync(&self) -> BoxFuture<'static, io::Result<()>> {
        let file = self.0.clone();
        Box::pin(async move { blocking(move || file.sync_data()).await })
    }
}

/// fsync can take milliseconds: keep it off the async worker threads.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    match tokio::task::spawn_blocking(f).await {
        Ok(result) => result,
        Err(e) => Err(io::Error::other(e.to_string())),
    }
}

impl Disk for OsDisk {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn File>> {
        let mut options = std::fs::OpenOptions::new();
        match mode {
            OpenMode::Read => options.read(true),
            OpenMode::ReadWrite => options.read(true).write(true),
            OpenMode::Create => options.read(true).write(true).create(true),
        };
        Ok(Arc::new(OsFile(Arc::new(options.open(path)?))))
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir_all(path)
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(path)? {
            names.push(entry?.file_name().to_string_lossy().into_owned());
        }
        names.sort();
        Ok(names)
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_dir_all(path)
    }

    fn sync_dir(&self, path: &Path) -> BoxFuture<'static, io::Result<()>> {
        let path = path.to_path_buf();
        Box::pin(async move { blocking(move || std::fs::File::open(path)?.sync_all()).await })
    }
}
