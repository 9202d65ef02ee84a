//! Production implementations of the I/O traits, on tokio and the OS.
//!
//! Under `--cfg madsim` the `tokio` alias is madsim's, so [`TokioClock`], [`TokioSpawn`] and
//! [`TokioNet`] become simulated too; [`OsDisk`] must never run there (the simulator supplies
//! [`super::memdisk::MemDisk`]).

use std::io;
use std::net::SocketAddr;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{BoxFuture, BoxStream, Clock, Disk, File, Listener, Network, OpenMode, Rng, Spawn};

pub struct TokioClock {
    origin: tokio::time::Instant,
}

impl TokioClock {
    pub fn new() -> TokioClock {
        TokioClock {
            origin: tokio::time::Instant::now(),
        }
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for TokioClock {
    fn monotonic(&self) -> Duration {
        tokio::time::Instant::now().duration_since(self.origin)
    }

    fn wall_ms(&self) -> i64 {
        let since_epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        since_epoch.as_millis() as i64
    }

    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep(duration))
    }
}

/// xorshift64* seeded once from the OS. Not for cryptography: ids and jitter only.
pub struct OsRng {
    state: Mutex<u64>,
}

impl OsRng {
    pub fn new() -> OsRng {
        let mut seed = [0u8; 8];
        // Without OS randomness fall back to the clock: ids must still differ between runs.
        if getrandom::fill(&mut seed).is_err() {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos() as u64;
            seed = nanos.to_le_bytes();
        }
        OsRng::with_seed(u64::from_le_bytes(seed))
    }

    pub fn with_seed(seed: u64) -> OsRng {
        OsRng {
            state: Mutex::new(seed | 1),
        }
    }
}

impl Default for OsRng {
    fn default() -> Self {
        Self::new()
    }
}

impl Rng for OsRng {
    fn next_u64(&self) -> u64 {
        let mut state = self.state.lock().unwrap();
        let mut x = *state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        *state = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

pub struct TokioSpawn;

impl Spawn for TokioSpawn {
    fn spawn(&self, task: BoxFuture<'static, ()>) {
        tokio::spawn(task);
    }
}

pub struct TokioNet;

struct TokioListener(tokio::net::TcpListener);

impl Listener for TokioListener {
    fn accept(&mut self) -> BoxFuture<'_, io::Result<(BoxStream, SocketAddr)>> {
        Box::pin(async move {
            let (stream, peer) = self.0.accept().await?;
            let _ = stream.set_nodelay(true);
            Ok((Box::new(stream) as BoxStream, peer))
        })
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }
}

impl Network for TokioNet {
    fn bind(&self, addr: SocketAddr) -> BoxFuture<'static, io::Result<Box<dyn Listener>>> {
        Box::pin(async move {
            let listener = tokio::net::TcpListener::bind(addr).await?;
            Ok(Box::new(TokioListener(listener)) as Box<dyn Listener>)
        })
    }

    fn connect(&self, addr: SocketAddr) -> BoxFuture<'static, io::Result<BoxStream>> {
        Box::pin(async move {
            let stream = tokio::net::TcpStream::connect(addr).await?;
            let _ = stream.set_nodelay(true);
            Ok(Box::new(stream) as BoxStream)
        })
    }
}

/// The real file system. Absent from simulation builds: the simulator brings its own disk.
#[cfg(not(madsim))]
pub struct OsDisk;

#[cfg(not(madsim))]
struct OsFile(Arc<std::fs::File>);

#[cfg(not(madsim))]
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

#[cfg(not(madsim))]
/// fsync can take milliseconds: keep it off the async worker threads.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    match tokio::task::spawn_blocking(f).await {
        Ok(result) => result,
        Err(e) => Err(io::Error::other(e.to_string())),
    }
}

#[cfg(not(madsim))]
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
