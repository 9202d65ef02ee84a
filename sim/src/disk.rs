//! The simulated disk as a node sees it: [`MemDisk`] (durability model, faults) plus fsync
//! latency in simulated time, so that work racing an fsync actually races it, plus the
//! narrow-window faults of `buggify.rs`: each operation is matched against the scenario's
//! points, and a strike freezes the disk at that instant (a crash or a power cut) and asks the
//! nemesis to restart the node, or delays an fsync.

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use madsim::rand::Rng;
use tokio::sync::Notify;
use weir::io::memdisk::{Crash, MemDisk};
use weir::io::{BoxFuture, Disk, File, OpenMode};

use crate::buggify::{Action, Buggify, Point};

/// A node's request to be restarted (its process crashed, or its broker went offline), served
/// by the nemesis. One request at a time: more while one is pending are the same restart.
#[derive(Default)]
pub struct RestartRequest {
    pending: AtomicBool,
    reason: Mutex<String>,
    pub notify: Notify,
}

impl RestartRequest {
    pub fn request(&self, reason: String) {
        if !self.pending.swap(true, Ordering::SeqCst) {
            *self.reason.lock().unwrap() = reason;
            self.notify.notify_one();
        }
    }

    /// The reason of the pending request; the request is served from now on.
    pub fn take(&self) -> String {
        std::mem::take(&mut *self.reason.lock().unwrap())
    }

    /// The node is back: later crashes are new requests.
    pub fn served(&self) {
        self.pending.store(false, Ordering::SeqCst);
    }
}

/// What the narrow-window faults of one machine need: the scenario's table, whether they are
/// on (off once the run heals), the machine's disk, whether its broker is serving (start-up
/// otherwise), and where to ask for a restart.
pub struct Strikes {
    pub spec: Buggify,
    pub enabled: AtomicBool,
    pub crashes: AtomicU32,
    pub disk: MemDisk,
    pub up: Arc<AtomicBool>,
    pub restart: Arc<RestartRequest>,
    /// Every machine of the world (this one included), for the cluster-wide actions; set once
    /// the world is built. Weak: the machines own their strikes.
    pub peers: OnceLock<Vec<Weak<Strikes>>>,
}

impl Strikes {
    /// Whether a fault strikes at `point` now, and which.
    fn strike(&self, point: Point, path: &Path) -> Option<Action> {
        if !self.enabled.load(Ordering::SeqCst) || self.disk.is_frozen() {
            return None;
        }
        let rate = self.spec.points.get(&point).copied().unwrap_or(0.0);
        if rate <= 0.0 || !self.spec.aims_at(path) {
            return None;
        }
        let mut rng = madsim::rand::thread_rng();
        if !rng.gen_bool(rate.min(1.0)) {
            return None;
        }
        let action = self.spec.action(rng.gen_range(0..self.spec.total_weight()));
        if action == Action::Delay {
            return Some(action);
        }
        if self.crashes.fetch_add(1, Ordering::SeqCst) >= self.spec.max_crashes {
            return None;
        }
        let crash = if matches!(action, Action::Crash | Action::CrashAll) {
            Crash::ProcessKill
        } else {
            Crash::PowerLoss
        };
        self.disk.freeze(crash);
        let reason = format!("{action:?} at {point:?} of {}", path.display());
        if matches!(action, Action::CrashAll | Action::PowerLossAll) {
            // The same instant on every other machine that still runs: whatever they were
            // doing (an answer on its way, an fsync in flight) stops there too.
            let peers = self.peers.get().map(Vec::as_slice).unwrap_or_default();
            for peer in peers.iter().filter_map(Weak::upgrade) {
                // This machine's disk is frozen already, so it is skipped here.
                if !peer.disk.is_frozen() {
                    peer.disk.freeze(crash);
                    peer.restart
                        .request(format!("{reason} (on another machine)"));
                }
            }
        }
        self.restart.request(reason);
        Some(action)
    }

    /// For synchronous operations: a crash turns the result into the frozen disk's error (the
    /// process is dead; what it does until the nemesis kills it reaches nothing).
    fn after_op<T>(&self, point: Point, path: &Path, result: io::Result<T>) -> io::Result<T> {
        match self.strike(point, path) {
            Some(Action::Crash | Action::PowerLoss | Action::CrashAll | Action::PowerLossAll) => {
                Err(io::Error::other("disk frozen: the machine crashed"))
            }
            _ => result,
        }
    }

    fn starting(&self) -> bool {
        !self.up.load(Ordering::SeqCst)
    }

    fn delay(&self) -> Duration {
        Duration::from_millis(draw(self.spec.delay_ms))
    }
}

fn draw(range: [u64; 2]) -> u64 {
    if range[0] >= range[1] {
        range[0]
    } else {
        madsim::rand::thread_rng().gen_range(range[0]..=range[1])
    }
}

pub struct NodeDisk {
    inner: MemDisk,
    /// fsync takes this long, in simulated microseconds: [min, max].
    sync_latency_us: [u64; 2],
    strikes: Arc<Strikes>,
}

impl NodeDisk {
    pub fn new(inner: MemDisk, sync_latency_us: [u64; 2], strikes: Arc<Strikes>) -> NodeDisk {
        NodeDisk {
            inner,
            sync_latency_us,
            strikes,
        }
    }
}

fn latency(range: [u64; 2]) -> Duration {
    Duration::from_micros(draw(range))
}

/// An fsync that takes the device's latency: the data is durable at its end, and the caller
/// learns so right after. Strikes in between (`BeforeSync`: the power fails while the fsync is
/// in flight) and after (`AfterSync`: before the caller learns); a crash never answers, the
/// process is gone.
fn delayed(
    sync: impl FnOnce() -> BoxFuture<'static, io::Result<()>> + Send + 'static,
    range: [u64; 2],
    strikes: Arc<Strikes>,
    path: Arc<Path>,
    after: Point,
) -> BoxFuture<'static, io::Result<()>> {
    Box::pin(async move {
        // The device works for its latency; the data is durable when it is done. A strike
        // before that point cuts the fsync short: others may have acted on it meanwhile.
        let wait = latency(range);
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        let before = if strikes.starting() {
            Point::Startup
        } else {
            Point::BeforeSync
        };
        match strikes.strike(before, &path) {
            Some(Action::Delay) => tokio::time::sleep(strikes.delay()).await,
            Some(_) => return std::future::pending().await,
            None => {}
        }
        let result = sync().await;
        if result.is_ok() {
            match strikes.strike(after, &path) {
                Some(Action::Delay) => tokio::time::sleep(strikes.delay()).await,
                Some(_) => return std::future::pending().await,
                None => {}
            }
        }
        result
    })
}

struct NodeFile {
    inner: Arc<dyn File>,
    /// The name it was opened by (for matching points; a rename does not follow it). Shared:
    /// every fsync's delayed future holds it.
    path: Arc<Path>,
    sync_latency_us: [u64; 2],
    strikes: Arc<Strikes>,
}

fn is_segment(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "log")
}

impl File for NodeFile {
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
    fn read_at(&self, pos: u64, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read_at(pos, buf)
    }
    fn write_at(&self, pos: u64, data: &[u8]) -> io::Result<()> {
        let result = self.inner.write_at(pos, data);
        if self.strikes.starting() {
            return self.strikes.after_op(Point::Startup, &self.path, result);
        }
        result
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        let shrinks = is_segment(&self.path) && self.inner.len().is_ok_and(|old| len < old);
        let result = self.inner.set_len(len);
        if shrinks {
            return self.strikes.after_op(Point::Truncate, &self.path, result);
        }
        if self.strikes.starting() {
            return self.strikes.after_op(Point::Startup, &self.path, result);
        }
        result
    }
    fn sync(&self) -> BoxFuture<'static, io::Result<()>> {
        let inner = self.inner.clone();
        delayed(
            move || inner.sync(),
            self.sync_latency_us,
            self.strikes.clone(),
            self.path.clone(),
            Point::AfterSync,
        )
    }
}

impl Disk for NodeDisk {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn File>> {
        let created = mode == OpenMode::Create && is_segment(path) && !self.inner.exists(path);
        let file = self.inner.open(path, mode)?;
        if created {
            self.strikes.after_op(Point::SegmentRoll, path, Ok(()))?;
        }
        Ok(Arc::new(NodeFile {
            inner: file,
            path: Arc::from(path),
            sync_latency_us: self.sync_latency_us,
            strikes: self.strikes.clone(),
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
        let result = self.inner.rename(from, to);
        self.strikes.after_op(Point::Rename, to, result)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.inner.remove_file(path)
    }
    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        self.inner.remove_dir_all(path)
    }
    fn sync_dir(&self, path: &Path) -> BoxFuture<'static, io::Result<()>> {
        let inner = self.inner.clone();
        let path: Arc<Path> = Arc::from(path);
        let dir = path.clone();
        delayed(
            move || inner.sync_dir(&dir),
            self.sync_latency_us,
            self.strikes.clone(),
            path,
            Point::AfterSyncDir,
        )
    }
}
