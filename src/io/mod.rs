//! Every effect the broker has on the world goes through the traits in this module: the disk, the
//! network, the clock, randomness and task spawning. Production implementations live in
//! [`os`] and [`osdisk`]; the simulator supplies its own (a seeded clock with skew, [`memdisk::MemDisk`] with a
//! power-loss model and fault injection). Nothing above this layer touches `std::fs`, sockets,
//! `Instant::now`, `SystemTime` or OS randomness.
//!
//! Disk reads and writes are synchronous on purpose: like Kafka, the broker writes into the page
//! cache from the request path and only `fsync` is slow, so only [`File::sync`] is a future.

pub mod memdisk;
pub mod os;
#[cfg(not(madsim))]
pub mod osdisk;

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Time as the broker sees it. A simulated node may run fast, slow or offset.
pub trait Clock: Send + Sync + 'static {
    /// Monotonic time since an arbitrary origin; never goes backwards.
    fn monotonic(&self) -> Duration;
    /// Wall-clock time in milliseconds since the Unix epoch (record timestamps, retention).
    fn wall_ms(&self) -> i64;
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()>;
}

/// Randomness. Production seeds from the OS; the simulator from the scenario seed.
pub trait Rng: Send + Sync + 'static {
    fn next_u64(&self) -> u64;
}

/// The one pseudo-random generator behind every draw of the io layer: [`os::OsRng`] and the
/// in-memory disk's fault choices. A seed fixes all its output (for a given `rand` version), so
/// a simulated run replays from its seed.
pub type Generator = rand::rngs::SmallRng;

/// A [`Generator`] whose every draw follows from `seed` (any value, 0 included).
pub fn generator(seed: u64) -> Generator {
    rand::SeedableRng::seed_from_u64(seed)
}

/// Fills `buf` with bytes for cryptography (SCRAM nonces): the OS's CSPRNG in production
/// (the [`Generator`] is not one), `rng` in the simulator, so a seed replays the exchange.
pub fn secure_random(rng: &dyn Rng, buf: &mut [u8]) {
    #[cfg(not(madsim))]
    {
        use ring::rand::SecureRandom;
        if ring::rand::SystemRandom::new().fill(buf).is_ok() {
            return;
        }
    }
    for chunk in buf.chunks_mut(8) {
        let bytes = rng.next_u64().to_le_bytes();
        chunk.copy_from_slice(&bytes[..chunk.len()]);
    }
}

/// Spawns a detached task on the current runtime (or the current simulated node).
pub trait Spawn: Send + Sync + 'static {
    fn spawn(&self, task: BoxFuture<'static, ()>);
}

/// A bidirectional byte stream (a TCP connection).
pub trait Stream: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Stream for T {}

pub type BoxStream = Box<dyn Stream>;

pub trait Listener: Send + 'static {
    fn accept(&mut self) -> BoxFuture<'_, io::Result<(BoxStream, SocketAddr)>>;
    fn local_addr(&self) -> io::Result<SocketAddr>;
}

pub trait Network: Send + Sync + 'static {
    fn bind(&self, addr: SocketAddr) -> BoxFuture<'static, io::Result<Box<dyn Listener>>>;
    fn connect(&self, addr: SocketAddr) -> BoxFuture<'static, io::Result<BoxStream>>;
    /// The address a host name (or IP literal, bracketed IPv6 too) and port stand for: the
    /// first the resolver gives. Inter-node addresses (voters, advertised listeners) may be
    /// names, as Kafka's configs allow; the simulator resolves them through madsim's own DNS.
    fn resolve(&self, host: &str, port: u16) -> BoxFuture<'static, io::Result<SocketAddr>>;
}

/// How to open a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenMode {
    /// Existing file, read only.
    Read,
    /// Existing file, read and write.
    ReadWrite,
    /// Read and write, created empty if missing.
    Create,
}

/// An open file. Writes land in the "OS" immediately (they survive a process kill) but are only
/// durable against power loss once [`File::sync`] has completed.
// A fallible length has no cheap `is_empty` twin.
#[allow(clippy::len_without_is_empty)]
pub trait File: Send + Sync + 'static {
    fn len(&self) -> io::Result<u64>;
    /// Reads up to `buf.len()` bytes at `pos`; fewer only at end of file.
    fn read_at(&self, pos: u64, buf: &mut [u8]) -> io::Result<usize>;
    /// Writes all of `data` at `pos`, extending the file if needed.
    fn write_at(&self, pos: u64, data: &[u8]) -> io::Result<()>;
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Makes everything written so far durable (fsync).
    fn sync(&self) -> BoxFuture<'static, io::Result<()>>;
}

pub trait Disk: Send + Sync + 'static {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn File>>;
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    /// Names of the entries of a directory, sorted.
    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>>;
    fn exists(&self, path: &Path) -> bool;
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    fn remove_dir_all(&self, path: &Path) -> io::Result<()>;
    /// Makes the directory's entries (creates, renames, removes) durable.
    fn sync_dir(&self, path: &Path) -> BoxFuture<'static, io::Result<()>>;
}

/// The bundle of effects handed to every layer that needs one.
#[derive(Clone)]
pub struct Io {
    pub clock: Arc<dyn Clock>,
    pub rng: Arc<dyn Rng>,
    pub spawner: Arc<dyn Spawn>,
    pub net: Arc<dyn Network>,
    pub disk: Arc<dyn Disk>,
}

impl Io {
    /// The production world: real disk, real sockets, real time.
    #[cfg(not(madsim))]
    pub fn os() -> Io {
        Io {
            clock: Arc::new(os::TokioClock::new()),
            rng: Arc::new(os::OsRng::new()),
            spawner: Arc::new(os::TokioSpawn),
            net: Arc::new(os::TokioNet),
            disk: Arc::new(osdisk::OsDisk),
        }
    }

    pub fn spawn<F: Future<Output = ()> + Send + 'static>(&self, task: F) {
        self.spawner.spawn(Box::pin(task));
    }

    /// Runs `fut` for at most `limit`; `None` on time-out.
    pub async fn timeout<F: Future>(&self, limit: Duration, fut: F) -> Option<F::Output> {
        let sleep = self.clock.sleep(limit);
        tokio::select! {
            biased;
            out = fut => Some(out),
            _ = sleep => None,
        }
    }
}

/// Runs futures concurrently and returns their outputs in order (several fsyncs at once let
/// the device overlap them).
pub async fn join_all<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(move |cx| {
        let mut pending = false;
        for (future, output) in futures.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                match future.as_mut().poll(cx) {
                    std::task::Poll::Ready(out) => *output = Some(out),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(
                outputs
                    .iter_mut()
                    .map(|o| o.take().expect("ready"))
                    .collect(),
            )
        }
    })
    .await
}

/// Reads exactly `buf.len()` bytes at `pos`, failing with `UnexpectedEof` on a short file.
pub fn read_exact_at(file: &dyn File, pos: u64, buf: &mut [u8]) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        let n = file.read_at(pos + done as u64, &mut buf[done..])?;
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "short read"));
        }
        done += n;
    }
    Ok(())
}

/// Writes `data` to `path` so that after a crash the path holds either the old or the new
/// contents, never a mix: write a temporary file, fsync it, rename over, fsync the directory.
pub async fn write_file_atomic(disk: &dyn Disk, path: &Path, data: &[u8]) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    let file = disk.open(&tmp, OpenMode::Create)?;
    file.set_len(0)?;
    file.write_at(0, data)?;
    file.sync().await?;
    drop(file);
    disk.rename(&tmp, path)?;
    if let Some(dir) = parent_dir(path) {
        disk.sync_dir(dir).await?;
    }
    Ok(())
}

/// The directory holding `path`, to fsync after creating or renaming it: a relative path with
/// one component (`data`) lives in `.`, where `Path::parent` says `""` — which no one can open.
fn parent_dir(path: &Path) -> Option<&Path> {
    path.parent().map(|p| {
        if p.as_os_str().is_empty() {
            Path::new(".")
        } else {
            p
        }
    })
}

/// Creates `path` and any missing ancestors so that they survive power loss: a new directory's
/// name is durable only once its parent is fsynced.
pub async fn create_dir_all_durable(disk: &dyn Disk, path: &Path) -> io::Result<()> {
    let missing: Vec<&Path> = path
        .ancestors()
        .take_while(|a| !a.as_os_str().is_empty() && !disk.exists(a))
        .collect();
    disk.create_dir_all(path)?;
    for dir in missing {
        if let Some(parent) = parent_dir(dir) {
            disk.sync_dir(parent).await?;
        }
    }
    Ok(())
}

/// Reads a whole (small) file.
pub fn read_file(disk: &dyn Disk, path: &Path) -> io::Result<Vec<u8>> {
    let file = disk.open(path, OpenMode::Read)?;
    let len = file.len()? as usize;
    let mut buf = vec![0u8; len];
    read_exact_at(file.as_ref(), 0, &mut buf)?;
    Ok(buf)
}
