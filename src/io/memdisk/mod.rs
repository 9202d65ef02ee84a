//! An in-memory [`Disk`] with a durability model and fault injection, used by the log's unit and
//! property tests and by the deterministic simulator.
//!
//! # Durability model
//!
//! Every file has two images ([`image::FileImage`]): `current`, what the OS shows (the page
//! cache), and `durable`, what is on the medium. [`File::write_at`] and [`File::set_len`] change
//! `current` at once and mark the 4 KiB pages they touch dirty; a size change is pending too.
//! [`File::sync`] writes the dirty pages and the size back. Names ([`namespace::Namespace`]) work
//! the same way one level up: creating, renaming or removing a file changes what the OS shows at
//! once and reaches the medium only when its directory is fsynced ([`Disk::sync_dir`]). Two
//! kinds of crash are distinguished because they lose different things:
//!
//! - **Process kill** ([`MemDisk::process_crash`]): the kernel survives, so every file keeps its
//!   `current` image and every name stays. What dies is the process's open handles: every handle
//!   opened before the crash fails with "stale handle after crash" from then on, so code that
//!   accidentally keeps a pre-crash handle is caught instead of silently writing on.
//! - **Power loss** ([`MemDisk::power_loss`]): writeback happens in any order, so each file keeps
//!   its durable bytes, one of the sizes it had since its last fsync, and any subset of its dirty
//!   pages, each landing whole, not at all, or torn (a prefix of its 512-byte sectors). Each
//!   directory keeps a random prefix of its unsynced entry changes: a file created in a
//!   directory never fsynced disappears, a rename may revert, a removed file may come back.
//!   Synced data under a synced name always survives. Handles go stale as for a process kill.
//!
//! Remaining simplifications: removing a directory tree, renaming a directory, and renaming a
//! file into another directory are durable at once (the broker does not rely on them being
//! undone); a file removed or renamed over while open keeps its data for its open handles
//! (POSIX unlink semantics) until the last one is dropped; paths are normalized lexically (`.`
//! dropped, `..` pops a component); there are no symlinks or hard links.
//!
//! # Fault model
//!
//! [`Faults`] (set with [`MemDisk::set_faults`], all off by default) injects, per call:
//!
//! - `write_error_rate`: `write_at`/`set_len` fail with EIO and change nothing.
//! - `read_error_rate`: `read_at` fails with EIO.
//! - `failed_dirs`: everything under these directories fails with EIO (one dead JBOD disk).
//! - `sync_error_rate`: `sync` fails with EIO, as Linux does it ("fsyncgate"): drawn per
//!   failure, the dirty pages either stay dirty (a later fsync may still write them) or are
//!   dropped, marked clean without reaching the medium: the page cache still shows them, a later
//!   fsync succeeds without writing them, and power loss takes them back.
//! - `capacity_bytes`: a write or extension that would take the total size of all files' `current`
//!   images past the capacity fails with ENOSPC and changes nothing.
//! - `lost_write_rate`: `write_at` reports success but changes nothing (a firmware lie).
//! - `misdirected_write_rate`: `write_at` reports success but the bytes land up to 4 KiB before or
//!   after the requested offset in the same file (clamped at 0; by chance it can be no shift).
//!
//! and, on request, bit rot at rest ([`MemDisk::flip_random_bit`], [`MemDisk::flip_bit`]) and a
//! frozen disk ([`MemDisk::freeze`]): a crash at this very instant, after which every call fails
//! with EIO until [`MemDisk::thaw`] (the simulator's narrow-window faults).
//!
//! # Determinism
//!
//! The simulator replays a run from its seed, so every choice comes from one generator (the io
//! layer's [`Generator`](crate::io::Generator), from `rand`) seeded by [`MemDisk::new`], all state lives in ordered maps, and the generator is only
//! drawn from when a fault rate is non-zero, at power loss and at a random bit flip. The same seed
//! and the same sequence of calls give the same disk, byte for byte.

mod image;
mod namespace;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use rand::Rng as _;

use super::{BoxFuture, Disk, File, OpenMode};
use image::FileImage;
pub use image::{SyncFailure, PAGE, SECTOR};
use namespace::Namespace;

const EBADF: i32 = 9;
const EIO: i32 = 5;
const EFBIG: i32 = 27;
const ENOSPC: i32 = 28;

/// Files are plain `Vec<u8>`s: refuse sizes that would only end in an allocation abort.
const MAX_FILE_BYTES: u64 = 1 << 32;

/// How far a misdirected write may land from where it was aimed, either way.
const MISDIRECT_SPAN: u64 = 4096;

/// Faults to inject. All rates are probabilities per call in `0.0..=1.0`; zero (the default)
/// turns a fault off.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Faults {
    /// `write_at` and `set_len` fail with EIO.
    pub write_error_rate: f64,
    /// `read_at` fails with EIO.
    pub read_error_rate: f64,
    /// `sync` fails with EIO, keeping or dropping the dirty pages (see the module doc).
    pub sync_error_rate: f64,
    /// Total bytes of all files' current contents; growing past it fails with ENOSPC.
    pub capacity_bytes: Option<u64>,
    /// `write_at` returns `Ok` but changes nothing.
    pub lost_write_rate: f64,
    /// `write_at` returns `Ok` but the bytes land at an offset shifted by up to ±4096.
    pub misdirected_write_rate: f64,
    /// Directories whose disk died (a JBOD directory's failure): every open, read, write,
    /// fsync, rename and removal under them fails with EIO, the rest of the disk works.
    pub failed_dirs: Vec<PathBuf>,
}

/// Counters for test assertions and simulator reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiskStats {
    /// `write_at` calls on live handles, failed ones included.
    pub writes: u64,
    /// `read_at` calls on live handles, failed ones included.
    pub reads: u64,
    /// `sync` calls on live handles, failed ones included.
    pub syncs: u64,
    /// Faults that fired: EIO, ENOSPC, lost and misdirected writes, bit flips.
    pub injected_faults: u64,
    /// Dirty pages a failed fsync marked clean without writing them.
    pub dropped_pages: u64,
}

/// How a frozen disk stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Crash {
    ProcessKill,
    PowerLoss,
}

/// An in-memory disk. Clones share the same disk, so the simulator can keep one outside a node and
/// hand it back to the node after a restart.
#[derive(Clone)]
pub struct MemDisk {
    state: Arc<Mutex<State>>,
}

struct State {
    rng: Prng,
    /// Bumped by every crash; handles from an older generation are dead.
    generation: u64,
    next_inode: u64,
    /// Keyed by inode so that open handles follow a file across renames.
    files: BTreeMap<u64, Inode>,
    /// The inodes of `files` that lost their name (`Inode::linked` false): garbage collection
    /// looks only at these, not at every file after every rename and directory fsync.
    unlinked: std::collections::BTreeSet<u64>,
    ns: Namespace,
    faults: Faults,
    stats: DiskStats,
    /// Crashed at an instant chosen by the simulator: every call fails until thawed.
    frozen: bool,
}

struct Inode {
    image: FileImage,
    /// Whether a current name refers to this inode (no hard links, so at most one).
    linked: bool,
    /// Live handles in the current generation.
    open_handles: u64,
}

/// The disk's own stream of choices: the io layer's [`Generator`](crate::io::Generator), seeded
/// by [`MemDisk::new`] (the simulator draws that seed from the run's).
struct Prng(crate::io::Generator);

impl Prng {
    fn new(seed: u64) -> Prng {
        Prng(crate::io::generator(seed))
    }

    /// Uniform in `0..bound`; 0 when `bound` is 0.
    fn below(&mut self, bound: u64) -> u64 {
        if bound == 0 {
            return 0;
        }
        self.0.random_range(0..bound)
    }

    /// True with probability `p`. Draws nothing when `p` is off or certain, so turning faults on
    /// or off at rate 0/1 does not shift the power-loss choices of an otherwise identical run.
    fn chance(&mut self, p: f64) -> bool {
        if p.is_nan() || p <= 0.0 {
            return false;
        }
        if p >= 1.0 {
            return true;
        }
        self.0.random_bool(p)
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    // A panicking test thread must not turn every later disk call into a second panic.
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn os_error(code: i32) -> io::Error {
    io::Error::from_raw_os_error(code)
}

fn stale() -> io::Error {
    io::Error::other("stale handle after crash")
}

fn frozen() -> io::Error {
    io::Error::other("disk frozen: the machine crashed")
}

fn path_error(kind: io::ErrorKind, what: &str, path: &Path) -> io::Error {
    io::Error::new(kind, format!("{}: {what}", path.display()))
}

fn not_found(path: &Path) -> io::Error {
    path_error(io::ErrorKind::NotFound, "no such file or directory", path)
}

fn not_a_directory(path: &Path) -> io::Error {
    path_error(io::ErrorKind::NotADirectory, "not a directory", path)
}

fn is_a_directory(path: &Path) -> io::Error {
    path_error(io::ErrorKind::IsADirectory, "is a directory", path)
}

fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Prefix(_) | Component::RootDir | Component::Normal(_) => {
                out.push(component.as_os_str())
            }
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
        }
    }
    out
}

/// Converts a requested end offset to a buffer index, refusing what a `Vec` cannot hold.
fn checked_end(pos: u64, len: usize) -> io::Result<usize> {
    pos.checked_add(len as u64)
        .filter(|&end| end <= MAX_FILE_BYTES)
        .and_then(|end| usize::try_from(end).ok())
        .ok_or_else(|| os_error(EFBIG))
}

impl State {
    fn live(&self) -> io::Result<()> {
        if self.frozen {
            Err(frozen())
        } else {
            Ok(())
        }
    }

    /// EIO for a path under one of `Faults::failed_dirs`.
    fn check_dir_alive(&mut self, path: &Path) -> io::Result<()> {
        if self.faults.failed_dirs.iter().any(|d| path.starts_with(d)) {
            self.stats.injected_faults += 1;
            return Err(os_error(EIO));
        }
        Ok(())
    }

    /// New entries need an existing directory to live in.
    fn check_parent(&self, path: &Path) -> io::Result<()> {
        match path.parent() {
            None => Err(is_a_directory(path)),
            Some(parent) if self.ns.is_dir(parent) => Ok(()),
            Some(parent) if self.ns.is_file(parent) => Err(not_a_directory(parent)),
            Some(parent) => Err(not_found(parent)),
        }
    }

    fn used_bytes(&self) -> u64 {
        self.files
            .values()
            .filter(|f| f.linked || f.open_handles > 0)
            .map(|f| f.image.current.len() as u64)
            .sum()
    }

    fn check_capacity(&self, growth: u64) -> io::Result<()> {
        match self.faults.capacity_bytes {
            Some(capacity) if self.used_bytes().saturating_add(growth) > capacity => {
                Err(os_error(ENOSPC))
            }
            _ => Ok(()),
        }
    }

    /// An inode lost its current name.
    fn unlinked(&mut self, inode: Option<u64>) {
        if let Some(inode) = inode {
            if let Some(file) = self.files.get_mut(&inode) {
                file.linked = false;
                self.unlinked.insert(inode);
            }
        }
        self.collect_garbage();
    }

    /// Frees every inode nothing can reach any more: no current name, no open handle, and no
    /// durable or pending name that power loss could bring back.
    fn collect_garbage(&mut self) {
        debug_assert!(
            self.files
                .iter()
                .filter(|(_, f)| !f.linked)
                .map(|(&inode, _)| inode)
                .eq(self.unlinked.iter().copied()),
            "the unlinked set is every file without a name"
        );
        let files = &self.files;
        let unreachable: std::collections::BTreeSet<u64> = self
            .unlinked
            .iter()
            .copied()
            .filter(|inode| files.get(inode).is_some_and(|f| f.open_handles == 0))
            .collect();
        if unreachable.is_empty() {
            return;
        }
        let recoverable = self.ns.recoverable_among(&unreachable);
        for inode in unreachable.difference(&recoverable) {
            self.files.remove(inode);
            self.unlinked.remove(inode);
        }
    }

    /// Both kinds of crash kill every handle.
    fn kill_handles(&mut self) {
        self.generation += 1;
        for file in self.files.values_mut() {
            file.open_handles = 0;
        }
        self.collect_garbage();
    }

    fn power_loss(&mut self) {
        self.kill_handles();
        self.ns.power_loss(&mut self.rng);
        let named: std::collections::BTreeSet<u64> = self.ns.names.values().copied().collect();
        self.files.retain(|inode, _| named.contains(inode));
        // Every file left has a name again.
        self.unlinked.clear();
        let State { files, rng, .. } = self;
        for file in files.values_mut() {
            file.linked = true;
            // The replayed state may be larger than `current` was (an extension later
            // truncated); capacity is deliberately not enforced here, as a real disk has no say.
            file.image.power_loss(rng);
        }
    }

    fn has_children(&self, dir: &Path) -> bool {
        namespace::keys_below(&self.ns.names, dir).next().is_some()
            || namespace::set_below(&self.ns.dirs, dir).next().is_some()
    }

    fn rename_dir(&mut self, from: &Path, to: &Path) -> io::Result<()> {
        if from.parent().is_none() || to.starts_with(from) {
            return Err(path_error(
                io::ErrorKind::InvalidInput,
                "cannot move a directory into itself",
                to,
            ));
        }
        if self.ns.is_file(to) {
            return Err(not_a_directory(to));
        }
        if self.ns.is_dir(to) && self.has_children(to) {
            return Err(path_error(
                io::ErrorKind::DirectoryNotEmpty,
                "directory not empty",
                to,
            ));
        }
        self.check_parent(to)?;
        self.ns.rename_dir(from, to);
        Ok(())
    }
}

impl MemDisk {
    /// An empty disk whose every random choice derives from `seed`.
    pub fn new(seed: u64) -> MemDisk {
        MemDisk {
            state: Arc::new(Mutex::new(State {
                rng: Prng::new(seed),
                generation: 0,
                next_inode: 1,
                files: BTreeMap::new(),
                unlinked: Default::default(),
                ns: Namespace::default(),
                faults: Faults::default(),
                stats: DiskStats::default(),
                frozen: false,
            })),
        }
    }

    pub fn set_faults(&self, faults: Faults) {
        lock(&self.state).faults = faults;
    }

    pub fn faults(&self) -> Faults {
        lock(&self.state).faults.clone()
    }

    pub fn stats(&self) -> DiskStats {
        lock(&self.state).stats
    }

    /// Total bytes of all files' current contents (what `capacity_bytes` limits).
    pub fn used_bytes(&self) -> u64 {
        lock(&self.state).used_bytes()
    }

    /// The process was killed: the OS keeps every byte and name, but all open handles die.
    pub fn process_crash(&self) {
        lock(&self.state).kill_handles();
    }

    /// The power failed: see the module doc for what survives. All open handles die.
    pub fn power_loss(&self) {
        lock(&self.state).power_loss();
    }

    /// The machine crashes at this instant (in the middle of whatever the process is doing):
    /// handles die, and every call fails with EIO until [`MemDisk::thaw`], so nothing the
    /// crashed process still attempts reaches the disk.
    pub fn freeze(&self, crash: Crash) {
        let mut state = lock(&self.state);
        match crash {
            Crash::ProcessKill => state.kill_handles(),
            Crash::PowerLoss => state.power_loss(),
        }
        state.frozen = true;
    }

    /// The machine is back: calls work again (on handles opened from now on).
    pub fn thaw(&self) {
        let mut state = lock(&self.state);
        // Handles opened by the dead process while frozen (none succeed, but be sure) die too.
        state.kill_handles();
        state.frozen = false;
    }

    pub fn is_frozen(&self) -> bool {
        lock(&self.state).frozen
    }

    /// Whether everything the OS shows (every byte and every name) is on the medium.
    pub fn is_synced(&self) -> bool {
        let state = lock(&self.state);
        state.ns.is_synced() && state.files.values().all(|f| f.image.is_synced())
    }

    /// Flips one bit at rest in a randomly chosen non-empty file, in both its current and durable
    /// images (where the durable image is long enough). Returns the file and the byte offset, or
    /// `None` if every file is empty.
    pub fn flip_random_bit(&self) -> Option<(PathBuf, u64)> {
        let mut guard = lock(&self.state);
        let state = &mut *guard;
        let candidates: Vec<(&namespace::Key, u64)> = state
            .ns
            .names
            .iter()
            .filter(|(_, inode)| {
                state
                    .files
                    .get(inode)
                    .is_some_and(|f| !f.image.current.is_empty())
            })
            .map(|(path, inode)| (path, *inode))
            .collect();
        if candidates.is_empty() {
            return None;
        }
        let (path, inode) = candidates[state.rng.below(candidates.len() as u64) as usize];
        let path = path.to_path_buf();
        let file = state.files.get_mut(&inode)?;
        let offset = state.rng.below(file.image.current.len() as u64) as usize;
        let mask = 1u8 << state.rng.below(8);
        file.image.flip(offset, mask);
        state.stats.injected_faults += 1;
        Some((path, offset as u64))
    }

    /// Flips bit `bit` (0–7) of byte `byte_offset` of `path`, in both its current and durable
    /// images (where the durable image is long enough).
    pub fn flip_bit(&self, path: impl AsRef<Path>, byte_offset: u64, bit: u8) -> io::Result<()> {
        let path = normalize(path.as_ref());
        let mut guard = lock(&self.state);
        let state = &mut *guard;
        let inode = *state
            .ns
            .names
            .get(namespace::key(&path))
            .ok_or_else(|| not_found(&path))?;
        let file = state
            .files
            .get_mut(&inode)
            .ok_or_else(|| not_found(&path))?;
        let offset = usize::try_from(byte_offset)
            .ok()
            .filter(|&offset| offset < file.image.current.len() && bit < 8)
            .ok_or_else(|| path_error(io::ErrorKind::InvalidInput, "no such bit", &path))?;
        file.image.flip(offset, 1u8 << bit);
        state.stats.injected_faults += 1;
        Ok(())
    }

    /// What the OS currently shows for `path` (survives a process kill).
    pub fn file_contents(&self, path: impl AsRef<Path>) -> Option<Vec<u8>> {
        let state = lock(&self.state);
        let inode = state
            .ns
            .names
            .get(namespace::key(&normalize(path.as_ref())))?;
        state.files.get(inode).map(|f| f.image.current.clone())
    }

    /// What is on the medium for the file `path` names now (its bytes survive power loss; its
    /// name only if its directory was synced).
    pub fn durable_contents(&self, path: impl AsRef<Path>) -> Option<Vec<u8>> {
        let state = lock(&self.state);
        let inode = state
            .ns
            .names
            .get(namespace::key(&normalize(path.as_ref())))?;
        state.files.get(inode).map(|f| f.image.durable.clone())
    }
}

impl Disk for MemDisk {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn File>> {
        let path = normalize(path);
        let mut guard = lock(&self.state);
        let state = &mut *guard;
        state.live()?;
        state.check_dir_alive(&path)?;
        if state.ns.is_dir(&path) {
            return Err(is_a_directory(&path));
        }
        let inode = match state.ns.names.get(namespace::key(&path)) {
            Some(&inode) => inode,
            None if mode == OpenMode::Create => {
                state.check_parent(&path)?;
                let inode = state.next_inode;
                state.next_inode += 1;
                state.files.insert(
                    inode,
                    Inode {
                        image: FileImage::default(),
                        linked: true,
                        open_handles: 0,
                    },
                );
                let replaced = state.ns.link(&path, inode);
                assert!(replaced.is_none(), "a new name replaced nothing");
                inode
            }
            None => return Err(not_found(&path)),
        };
        let file = state
            .files
            .get_mut(&inode)
            .ok_or_else(|| not_found(&path))?;
        file.open_handles += 1;
        Ok(Arc::new(MemFile {
            state: self.state.clone(),
            path,
            inode,
            generation: state.generation,
            writable: mode != OpenMode::Read,
        }))
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let path = normalize(path);
        let mut state = lock(&self.state);
        state.live()?;
        state.check_dir_alive(&path)?;
        for ancestor in path.ancestors() {
            if state.ns.is_file(ancestor) {
                return Err(if ancestor == path {
                    path_error(io::ErrorKind::AlreadyExists, "file exists", ancestor)
                } else {
                    not_a_directory(ancestor)
                });
            }
        }
        let mut missing: Vec<&Path> = path.ancestors().filter(|a| a.parent().is_some()).collect();
        // Parents first, so each new directory's creation is recorded in an existing parent.
        missing.reverse();
        for ancestor in missing {
            state.ns.mkdir(ancestor);
        }
        Ok(())
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let path = normalize(path);
        let mut state = lock(&self.state);
        state.live()?;
        state.check_dir_alive(&path)?;
        if state.ns.is_file(&path) {
            return Err(not_a_directory(&path));
        }
        if !state.ns.is_dir(&path) {
            return Err(not_found(&path));
        }
        // Paths order component by component, so everything under `path` sorts right after
        // it: a range, not a scan of the whole disk (a restart lists every partition's
        // directory, and each list walked every file of the node).
        let mut names: Vec<String> = namespace::keys_below(&state.ns.names, &path)
            .chain(namespace::set_below(&state.ns.dirs, &path))
            .filter(|p| p.parent() == Some(path.as_path()))
            .filter_map(|p| p.file_name())
            .map(|name| name.to_string_lossy().into_owned())
            .collect();
        names.sort();
        names.dedup();
        Ok(names)
    }

    fn exists(&self, path: &Path) -> bool {
        let path = normalize(path);
        let state = lock(&self.state);
        state.ns.is_file(&path) || state.ns.is_dir(&path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let (from, to) = (normalize(from), normalize(to));
        let mut state = lock(&self.state);
        state.live()?;
        state.check_dir_alive(&from)?;
        state.check_dir_alive(&to)?;
        if state.ns.is_dir(&from) {
            return if from == to {
                Ok(())
            } else {
                state.rename_dir(&from, &to)
            };
        }
        if !state.ns.is_file(&from) {
            return Err(not_found(&from));
        }
        if from == to {
            return Ok(());
        }
        if state.ns.is_dir(&to) {
            return Err(is_a_directory(&to));
        }
        state.check_parent(&to)?;
        let replaced = state.ns.rename_file(&from, &to);
        state.unlinked(replaced);
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let path = normalize(path);
        let mut state = lock(&self.state);
        state.live()?;
        state.check_dir_alive(&path)?;
        if state.ns.is_dir(&path) {
            return Err(is_a_directory(&path));
        }
        if !state.ns.is_file(&path) {
            return Err(not_found(&path));
        }
        let inode = state.ns.unlink(&path);
        state.unlinked(inode);
        Ok(())
    }

    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        let path = normalize(path);
        let mut state = lock(&self.state);
        state.live()?;
        state.check_dir_alive(&path)?;
        if state.ns.is_file(&path) {
            return Err(not_a_directory(&path));
        }
        if !state.ns.is_dir(&path) {
            return Err(not_found(&path));
        }
        for inode in state.ns.remove_tree(&path) {
            if let Some(file) = state.files.get_mut(&inode) {
                file.linked = false;
                state.unlinked.insert(inode);
            }
        }
        state.collect_garbage();
        Ok(())
    }

    fn sync_dir(&self, path: &Path) -> BoxFuture<'static, io::Result<()>> {
        let path = normalize(path);
        let mut state = lock(&self.state);
        let result = if let Err(e) = state.live() {
            Err(e)
        } else if let Err(e) = state.check_dir_alive(&path) {
            Err(e)
        } else if state.ns.is_dir(&path) {
            state.ns.sync_dir(&path);
            state.collect_garbage();
            Ok(())
        } else {
            // As opening it for fsync would on a real disk.
            Err(not_found(&path))
        };
        Box::pin(std::future::ready(result))
    }
}

/// A handle: the inode it was opened on, valid only in the generation it was opened in.
struct MemFile {
    state: Arc<Mutex<State>>,
    /// The name it was opened by (for `Faults::failed_dirs`).
    path: PathBuf,
    inode: u64,
    generation: u64,
    writable: bool,
}

impl MemFile {
    fn live<'a>(&self, state: &'a mut State) -> io::Result<&'a mut State> {
        state.live()?;
        if state.generation != self.generation || !state.files.contains_key(&self.inode) {
            return Err(stale());
        }
        state.check_dir_alive(&self.path)?;
        Ok(state)
    }

    fn writable(&self) -> io::Result<()> {
        if self.writable {
            Ok(())
        } else {
            Err(os_error(EBADF))
        }
    }

    fn sync_now(&self) -> io::Result<()> {
        let mut guard = lock(&self.state);
        let state = self.live(&mut guard)?;
        state.stats.syncs += 1;
        if state.rng.chance(state.faults.sync_error_rate) {
            state.stats.injected_faults += 1;
            let failure = if state.rng.below(2) == 0 {
                SyncFailure::Kept
            } else {
                SyncFailure::Dropped
            };
            let file = state.files.get_mut(&self.inode).ok_or_else(stale)?;
            let dropped = file.image.fail_sync(failure);
            state.stats.dropped_pages += dropped;
            return Err(os_error(EIO));
        }
        let file = state.files.get_mut(&self.inode).ok_or_else(stale)?;
        file.image.write_back();
        Ok(())
    }
}

impl File for MemFile {
    fn len(&self) -> io::Result<u64> {
        let mut guard = lock(&self.state);
        let state = self.live(&mut guard)?;
        let file = state.files.get(&self.inode).ok_or_else(stale)?;
        Ok(file.image.current.len() as u64)
    }

    fn read_at(&self, pos: u64, buf: &mut [u8]) -> io::Result<usize> {
        let mut guard = lock(&self.state);
        let state = self.live(&mut guard)?;
        state.stats.reads += 1;
        if state.rng.chance(state.faults.read_error_rate) {
            state.stats.injected_faults += 1;
            return Err(os_error(EIO));
        }
        let current = &state
            .files
            .get(&self.inode)
            .ok_or_else(stale)?
            .image
            .current;
        let start = match usize::try_from(pos) {
            Ok(start) if start < current.len() => start,
            _ => return Ok(0),
        };
        let n = buf.len().min(current.len() - start);
        buf[..n].copy_from_slice(&current[start..start + n]);
        Ok(n)
    }

    fn write_at(&self, pos: u64, data: &[u8]) -> io::Result<()> {
        let mut guard = lock(&self.state);
        let state = self.live(&mut guard)?;
        self.writable()?;
        state.stats.writes += 1;
        // pwrite of nothing touches nothing, not even the length.
        if data.is_empty() {
            return Ok(());
        }
        if state.rng.chance(state.faults.write_error_rate) {
            state.stats.injected_faults += 1;
            return Err(os_error(EIO));
        }
        if state.rng.chance(state.faults.lost_write_rate) {
            state.stats.injected_faults += 1;
            return Ok(());
        }
        let mut pos = pos;
        if state.rng.chance(state.faults.misdirected_write_rate) {
            state.stats.injected_faults += 1;
            let shift = state.rng.below(2 * MISDIRECT_SPAN) as i64 - MISDIRECT_SPAN as i64;
            pos = pos.saturating_add_signed(shift);
        }
        let end = checked_end(pos, data.len())?;
        let start = end - data.len();
        // Capacity is checked where the bytes actually land, so it holds even for misdirected
        // writes.
        let old_len = state
            .files
            .get(&self.inode)
            .ok_or_else(stale)?
            .image
            .current
            .len();
        if let Err(e) = state.check_capacity(end.saturating_sub(old_len) as u64) {
            state.stats.injected_faults += 1;
            return Err(e);
        }
        let file = state.files.get_mut(&self.inode).ok_or_else(stale)?;
        file.image.write(start, data);
        debug_assert!(file.image.current.len() >= end);
        Ok(())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut guard = lock(&self.state);
        let state = self.live(&mut guard)?;
        self.writable()?;
        if state.rng.chance(state.faults.write_error_rate) {
            state.stats.injected_faults += 1;
            return Err(os_error(EIO));
        }
        let len = checked_end(len, 0)?;
        let old_len = state
            .files
            .get(&self.inode)
            .ok_or_else(stale)?
            .image
            .current
            .len();
        if let Err(e) = state.check_capacity(len.saturating_sub(old_len) as u64) {
            state.stats.injected_faults += 1;
            return Err(e);
        }
        let file = state.files.get_mut(&self.inode).ok_or_else(stale)?;
        file.image.set_len(len);
        Ok(())
    }

    fn sync(&self) -> BoxFuture<'static, io::Result<()>> {
        Box::pin(std::future::ready(self.sync_now()))
    }
}

impl Drop for MemFile {
    fn drop(&mut self) {
        let mut state = lock(&self.state);
        // A crash already forgot this handle.
        if state.generation != self.generation {
            return;
        }
        if let Some(file) = state.files.get_mut(&self.inode) {
            debug_assert!(file.open_handles > 0);
            file.open_handles = file.open_handles.saturating_sub(1);
            if !file.linked && file.open_handles == 0 {
                state.collect_garbage();
            }
        }
    }
}

/// Runs a future whose only waits are on a [`MemDisk`]: its futures are ready at once, so no
/// runtime is needed (tests of the log and the replica use this). Panics if it would block.
pub fn block_on<F: std::future::Future>(fut: F) -> F::Output {
    use std::task::{Context, Poll, Waker};
    let mut fut = std::pin::pin!(fut);
    match fut.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(out) => out,
        Poll::Pending => panic!("a future over MemDisk was not ready"),
    }
}
