//! An in-memory [`Disk`] with a durability model and fault injection, used by the log's unit and
//! property tests and by the deterministic simulator.
//!
//! # Durability model
//!
//! Every file has two images: `current`, what the OS shows (the page cache), and `durable`, what
//! is on the medium. [`File::write_at`] and [`File::set_len`] change `current` at once and append
//! the operation to the file's list of pending operations; [`File::sync`] makes `durable` equal to
//! `current` and clears the list. Two kinds of crash are distinguished because they lose different
//! things:
//!
//! - **Process kill** ([`MemDisk::process_crash`]): the kernel survives, so every file keeps its
//!   `current` image and nothing is lost. What dies is the process's open handles: every handle
//!   opened before the crash fails with "stale handle after crash" from then on, so code that
//!   accidentally keeps a pre-crash handle is caught instead of silently writing on.
//! - **Power loss** ([`MemDisk::power_loss`]): each file is rebuilt from `durable` plus a uniformly
//!   random prefix (possibly empty, possibly all) of its pending operations, and half the time the
//!   operation right after that prefix, if it is a write, is torn: only a random prefix of its
//!   bytes lands. Synced data therefore always survives, and unsynced data survives as some state
//!   the program actually passed through, plus at most one torn write. Handles go stale as for a
//!   process kill.
//!
//! Simplifications, each making the model kinder than real hardware:
//!
//! - Pending operations reach the medium in the order they were issued. A real page cache may
//!   flush pages out of order, so a real disk can also show a later write without an earlier one.
//! - Directory metadata (file creation, `create_dir_all`, `rename`, `remove_file`,
//!   `remove_dir_all`) is durable the moment the call returns, so [`Disk::sync_dir`] has nothing to
//!   do; tests cannot catch a missing `sync_dir`. A file created and never synced survives power
//!   loss, as whatever its pending-operation prefix leaves (often empty).
//! - A file removed or renamed over while open keeps its data for its open handles (POSIX unlink
//!   semantics) until the last one is dropped; a crash of either kind drops it at once.
//! - Paths are normalized lexically (`.` dropped, `..` pops a component); there are no symlinks.
//!
//! # Fault model
//!
//! [`Faults`] (set with [`MemDisk::set_faults`], all off by default) injects, per call:
//!
//! - `write_error_rate`: `write_at`/`set_len` fail with EIO and change nothing.
//! - `read_error_rate`: `read_at` fails with EIO.
//! - `sync_error_rate`: `sync` fails with EIO and nothing becomes durable (the pending operations
//!   stay pending; a later successful sync can still persist them).
//! - `capacity_bytes`: a write or extension that would take the total size of all files' `current`
//!   images past the capacity fails with ENOSPC and changes nothing.
//! - `lost_write_rate`: `write_at` reports success but changes nothing (a firmware lie).
//! - `misdirected_write_rate`: `write_at` reports success but the bytes land up to 4 KiB before or
//!   after the requested offset in the same file (clamped at 0; by chance it can be no shift).
//!
//! and, on request, bit rot at rest: [`MemDisk::flip_random_bit`] and [`MemDisk::flip_bit`].
//!
//! # Determinism
//!
//! The simulator replays a run from its seed, so every choice comes from one inline splitmix64
//! generator seeded by [`MemDisk::new`], all state lives in ordered maps, and the generator is only
//! drawn from when a fault rate is non-zero, at power loss and at a random bit flip. The same seed
//! and the same sequence of calls give the same disk, byte for byte.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use super::{BoxFuture, Disk, File, OpenMode};

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
    /// `sync` fails with EIO and persists nothing.
    pub sync_error_rate: f64,
    /// Total bytes of all files' current contents; growing past it fails with ENOSPC.
    pub capacity_bytes: Option<u64>,
    /// `write_at` returns `Ok` but changes nothing.
    pub lost_write_rate: f64,
    /// `write_at` returns `Ok` but the bytes land at an offset shifted by up to ±4096.
    pub misdirected_write_rate: f64,
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
    names: BTreeMap<PathBuf, u64>,
    /// Explicit directories. Roots (`/` and the empty relative root) exist implicitly.
    dirs: BTreeSet<PathBuf>,
    faults: Faults,
    stats: DiskStats,
}

struct Inode {
    current: Vec<u8>,
    durable: Vec<u8>,
    /// Operations since the last successful sync, in issue order; power loss replays a prefix.
    pending: Vec<Op>,
    /// Whether a name refers to this inode (there are no hard links, so at most one).
    linked: bool,
    /// Live handles in the current generation; an unlinked inode is freed when this reaches 0.
    open_handles: u64,
}

enum Op {
    Write { pos: usize, bytes: Vec<u8> },
    SetLen(usize),
}

/// splitmix64: tiny, full-period, and good enough for picking faults; any seed (even 0) works.
struct Prng(u64);

impl Prng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..bound` (multiply-shift; the bias is far below anything a test could see).
    fn below(&mut self, bound: u64) -> u64 {
        if bound == 0 {
            return 0;
        }
        ((u128::from(self.next_u64()) * u128::from(bound)) >> 64) as u64
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
        let unit = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        unit < p
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

/// Whether `path` lies strictly below `dir`. The empty relative root contains every relative
/// path, which `Path::starts_with` alone would not express.
fn strictly_within(path: &Path, dir: &Path) -> bool {
    if path == dir {
        return false;
    }
    if dir.as_os_str().is_empty() {
        path.is_relative()
    } else {
        path.starts_with(dir)
    }
}

/// `path` (below `from`) moved to the same place below `to`.
fn rebase(path: &Path, from: &Path, to: &Path) -> PathBuf {
    match path.strip_prefix(from) {
        Ok(rest) => normalize(&to.join(rest)),
        Err(_) => path.to_path_buf(),
    }
}

fn apply_write(buf: &mut Vec<u8>, pos: usize, bytes: &[u8]) {
    if bytes.is_empty() {
        return;
    }
    let end = pos + bytes.len();
    if buf.len() < end {
        buf.resize(end, 0);
    }
    buf[pos..end].copy_from_slice(bytes);
}

fn apply(buf: &mut Vec<u8>, op: &Op) {
    match op {
        Op::Write { pos, bytes } => apply_write(buf, *pos, bytes),
        Op::SetLen(len) => buf.resize(*len, 0),
    }
}

/// Converts a requested end offset to a buffer index, refusing what a `Vec` cannot hold.
fn checked_end(pos: u64, len: usize) -> io::Result<usize> {
    pos.checked_add(len as u64)
        .filter(|&end| end <= MAX_FILE_BYTES)
        .and_then(|end| usize::try_from(end).ok())
        .ok_or_else(|| os_error(EFBIG))
}

impl State {
    fn is_dir(&self, path: &Path) -> bool {
        path.parent().is_none() || self.dirs.contains(path)
    }

    fn is_file(&self, path: &Path) -> bool {
        self.names.contains_key(path)
    }

    /// New entries need an existing directory to live in.
    fn check_parent(&self, path: &Path) -> io::Result<()> {
        match path.parent() {
            None => Err(is_a_directory(path)),
            Some(parent) if self.is_dir(parent) => Ok(()),
            Some(parent) if self.is_file(parent) => Err(not_a_directory(parent)),
            Some(parent) => Err(not_found(parent)),
        }
    }

    fn used_bytes(&self) -> u64 {
        self.files.values().map(|f| f.current.len() as u64).sum()
    }

    fn check_capacity(&self, growth: u64) -> io::Result<()> {
        match self.faults.capacity_bytes {
            Some(capacity) if self.used_bytes().saturating_add(growth) > capacity => {
                Err(os_error(ENOSPC))
            }
            _ => Ok(()),
        }
    }

    fn unlink(&mut self, path: &Path) {
        if let Some(inode) = self.names.remove(path) {
            let free = match self.files.get_mut(&inode) {
                Some(file) => {
                    file.linked = false;
                    file.open_handles == 0
                }
                None => false,
            };
            if free {
                self.files.remove(&inode);
            }
        }
    }

    /// Both kinds of crash kill every handle, and with them every unlinked-but-open file.
    fn kill_handles(&mut self) {
        self.generation += 1;
        self.files.retain(|_, file| file.linked);
        for file in self.files.values_mut() {
            file.open_handles = 0;
        }
    }

    fn has_children(&self, dir: &Path) -> bool {
        self.names.keys().any(|p| p.parent() == Some(dir))
            || self.dirs.iter().any(|p| p.parent() == Some(dir))
    }

    fn rename_dir(&mut self, from: &Path, to: &Path) -> io::Result<()> {
        if from.parent().is_none() || to.starts_with(from) {
            return Err(path_error(
                io::ErrorKind::InvalidInput,
                "cannot move a directory into itself",
                to,
            ));
        }
        if self.is_file(to) {
            return Err(not_a_directory(to));
        }
        if self.is_dir(to) && self.has_children(to) {
            return Err(path_error(
                io::ErrorKind::DirectoryNotEmpty,
                "directory not empty",
                to,
            ));
        }
        self.check_parent(to)?;
        let moved_dirs: Vec<PathBuf> = self
            .dirs
            .iter()
            .filter(|p| *p == from || strictly_within(p, from))
            .cloned()
            .collect();
        for dir in moved_dirs {
            self.dirs.remove(&dir);
            self.dirs.insert(rebase(&dir, from, to));
        }
        let moved_names: Vec<PathBuf> = self
            .names
            .keys()
            .filter(|p| strictly_within(p, from))
            .cloned()
            .collect();
        for name in moved_names {
            if let Some(inode) = self.names.remove(&name) {
                self.names.insert(rebase(&name, from, to), inode);
            }
        }
        Ok(())
    }
}

impl MemDisk {
    /// An empty disk whose every random choice derives from `seed`.
    pub fn new(seed: u64) -> MemDisk {
        MemDisk {
            state: Arc::new(Mutex::new(State {
                rng: Prng(seed),
                generation: 0,
                next_inode: 1,
                files: BTreeMap::new(),
                names: BTreeMap::new(),
                dirs: BTreeSet::new(),
                faults: Faults::default(),
                stats: DiskStats::default(),
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

    /// The process was killed: the OS keeps every byte, but all open handles die.
    pub fn process_crash(&self) {
        lock(&self.state).kill_handles();
    }

    /// The power failed: every file falls back to its durable image plus a random prefix of its
    /// unsynced operations, the next of which may land torn. All open handles die.
    pub fn power_loss(&self) {
        let mut guard = lock(&self.state);
        let state = &mut *guard;
        state.kill_handles();
        let State { files, rng, .. } = state;
        for file in files.values_mut() {
            if file.pending.is_empty() {
                continue;
            }
            let count = file.pending.len();
            let applied = rng.below(count as u64 + 1) as usize;
            let mut image = std::mem::take(&mut file.durable);
            for op in &file.pending[..applied] {
                apply(&mut image, op);
            }
            if applied < count && rng.below(2) == 1 {
                if let Op::Write { pos, bytes } = &file.pending[applied] {
                    let landed = rng.below(bytes.len() as u64) as usize;
                    apply_write(&mut image, *pos, &bytes[..landed]);
                }
            }
            // The replayed state may be larger than `current` was (an extension later truncated);
            // capacity is deliberately not enforced here, as a real disk has no say either.
            file.current.clone_from(&image);
            file.durable = image;
            file.pending.clear();
        }
    }

    /// Flips one bit at rest in a randomly chosen non-empty file, in both its current and durable
    /// images (where the durable image is long enough). Returns the file and the byte offset, or
    /// `None` if every file is empty.
    pub fn flip_random_bit(&self) -> Option<(PathBuf, u64)> {
        let mut guard = lock(&self.state);
        let state = &mut *guard;
        let candidates: Vec<(&PathBuf, u64)> = state
            .names
            .iter()
            .filter(|(_, inode)| {
                state
                    .files
                    .get(inode)
                    .is_some_and(|f| !f.current.is_empty())
            })
            .map(|(path, inode)| (path, *inode))
            .collect();
        if candidates.is_empty() {
            return None;
        }
        let (path, inode) = candidates[state.rng.below(candidates.len() as u64) as usize];
        let path = path.clone();
        let file = state.files.get_mut(&inode)?;
        let offset = state.rng.below(file.current.len() as u64) as usize;
        let mask = 1u8 << state.rng.below(8);
        file.current[offset] ^= mask;
        if let Some(byte) = file.durable.get_mut(offset) {
            *byte ^= mask;
        }
        state.stats.injected_faults += 1;
        Some((path, offset as u64))
    }

    /// Flips bit `bit` (0–7) of byte `byte_offset` of `path`, in both its current and durable
    /// images (where the durable image is long enough).
    pub fn flip_bit(&self, path: impl AsRef<Path>, byte_offset: u64, bit: u8) -> io::Result<()> {
        let path = normalize(path.as_ref());
        let mut guard = lock(&self.state);
        let state = &mut *guard;
        let inode = *state.names.get(&path).ok_or_else(|| not_found(&path))?;
        let file = state
            .files
            .get_mut(&inode)
            .ok_or_else(|| not_found(&path))?;
        let offset = usize::try_from(byte_offset)
            .ok()
            .filter(|&offset| offset < file.current.len() && bit < 8)
            .ok_or_else(|| path_error(io::ErrorKind::InvalidInput, "no such bit", &path))?;
        let mask = 1u8 << bit;
        file.current[offset] ^= mask;
        if let Some(byte) = file.durable.get_mut(offset) {
            *byte ^= mask;
        }
        state.stats.injected_faults += 1;
        Ok(())
    }

    /// What the OS currently shows for `path` (survives a process kill).
    pub fn file_contents(&self, path: impl AsRef<Path>) -> Option<Vec<u8>> {
        let state = lock(&self.state);
        let inode = state.names.get(&normalize(path.as_ref()))?;
        state.files.get(inode).map(|f| f.current.clone())
    }

    /// What is durable for `path` (survives power loss).
    pub fn durable_contents(&self, path: impl AsRef<Path>) -> Option<Vec<u8>> {
        let state = lock(&self.state);
        let inode = state.names.get(&normalize(path.as_ref()))?;
        state.files.get(inode).map(|f| f.durable.clone())
    }
}

impl Disk for MemDisk {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn File>> {
        let path = normalize(path);
        let mut guard = lock(&self.state);
        let state = &mut *guard;
        if state.is_dir(&path) {
            return Err(is_a_directory(&path));
        }
        let inode = match state.names.get(&path) {
            Some(&inode) => inode,
            None if mode == OpenMode::Create => {
                state.check_parent(&path)?;
                let inode = state.next_inode;
                state.next_inode += 1;
                state.files.insert(
                    inode,
                    Inode {
                        current: Vec::new(),
                        durable: Vec::new(),
                        pending: Vec::new(),
                        linked: true,
                        open_handles: 0,
                    },
                );
                state.names.insert(path.clone(), inode);
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
            inode,
            generation: state.generation,
            writable: mode != OpenMode::Read,
        }))
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let path = normalize(path);
        let mut state = lock(&self.state);
        for ancestor in path.ancestors() {
            if state.is_file(ancestor) {
                return Err(if ancestor == path {
                    path_error(io::ErrorKind::AlreadyExists, "file exists", ancestor)
                } else {
                    not_a_directory(ancestor)
                });
            }
        }
        for ancestor in path.ancestors() {
            if ancestor.parent().is_some() {
                state.dirs.insert(ancestor.to_path_buf());
            }
        }
        Ok(())
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let path = normalize(path);
        let state = lock(&self.state);
        if state.is_file(&path) {
            return Err(not_a_directory(&path));
        }
        if !state.is_dir(&path) {
            return Err(not_found(&path));
        }
        let mut names: Vec<String> = state
            .names
            .keys()
            .chain(state.dirs.iter())
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
        state.is_file(&path) || state.is_dir(&path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let (from, to) = (normalize(from), normalize(to));
        let mut state = lock(&self.state);
        if state.is_dir(&from) {
            return if from == to {
                Ok(())
            } else {
                state.rename_dir(&from, &to)
            };
        }
        let inode = *state.names.get(&from).ok_or_else(|| not_found(&from))?;
        if from == to {
            return Ok(());
        }
        if state.is_dir(&to) {
            return Err(is_a_directory(&to));
        }
        state.check_parent(&to)?;
        state.unlink(&to);
        state.names.remove(&from);
        state.names.insert(to, inode);
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let path = normalize(path);
        let mut state = lock(&self.state);
        if state.is_dir(&path) {
            return Err(is_a_directory(&path));
        }
        if !state.is_file(&path) {
            return Err(not_found(&path));
        }
        state.unlink(&path);
        Ok(())
    }

    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        let path = normalize(path);
        let mut state = lock(&self.state);
        if state.is_file(&path) {
            return Err(not_a_directory(&path));
        }
        if !state.is_dir(&path) {
            return Err(not_found(&path));
        }
        let doomed: Vec<PathBuf> = state
            .names
            .keys()
            .filter(|p| strictly_within(p, &path))
            .cloned()
            .collect();
        for name in doomed {
            state.unlink(&name);
        }
        state
            .dirs
            .retain(|p| p != &path && !strictly_within(p, &path));
        Ok(())
    }

    fn sync_dir(&self, path: &Path) -> BoxFuture<'static, io::Result<()>> {
        // Metadata is durable on return (see the module doc); only a missing directory is an
        // error, as opening it for fsync would be on a real disk.
        let path = normalize(path);
        let result = if lock(&self.state).is_dir(&path) {
            Ok(())
        } else {
            Err(not_found(&path))
        };
        Box::pin(std::future::ready(result))
    }
}

/// A handle: the inode it was opened on, valid only in the generation it was opened in.
struct MemFile {
    state: Arc<Mutex<State>>,
    inode: u64,
    generation: u64,
    writable: bool,
}

impl MemFile {
    fn live<'a>(&self, state: &'a mut State) -> io::Result<&'a mut State> {
        if state.generation != self.generation || !state.files.contains_key(&self.inode) {
            return Err(stale());
        }
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
            return Err(os_error(EIO));
        }
        let file = state.files.get_mut(&self.inode).ok_or_else(stale)?;
        file.durable.clone_from(&file.current);
        file.pending.clear();
        Ok(())
    }
}

impl File for MemFile {
    fn len(&self) -> io::Result<u64> {
        let mut guard = lock(&self.state);
        let state = self.live(&mut guard)?;
        let file = state.files.get(&self.inode).ok_or_else(stale)?;
        Ok(file.current.len() as u64)
    }

    fn read_at(&self, pos: u64, buf: &mut [u8]) -> io::Result<usize> {
        let mut guard = lock(&self.state);
        let state = self.live(&mut guard)?;
        state.stats.reads += 1;
        if state.rng.chance(state.faults.read_error_rate) {
            state.stats.injected_faults += 1;
            return Err(os_error(EIO));
        }
        let file = state.files.get(&self.inode).ok_or_else(stale)?;
        let start = match usize::try_from(pos) {
            Ok(start) if start < file.current.len() => start,
            _ => return Ok(0),
        };
        let n = buf.len().min(file.current.len() - start);
        buf[..n].copy_from_slice(&file.current[start..start + n]);
        Ok(n)
    }

    fn write_at(&self, pos: u64, data: &[u8]) -> io::Result<()> {
        let mut guard = lock(&self.state);
        let state = self.live(&mut guard)?;
        self.writable()?;
        state.stats.writes += 1;
        // pwrite of nothing touches nothing, not even the length: keep it out of the op log.
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
            .current
            .len();
        if let Err(e) = state.check_capacity(end.saturating_sub(old_len) as u64) {
            state.stats.injected_faults += 1;
            return Err(e);
        }
        let file = state.files.get_mut(&self.inode).ok_or_else(stale)?;
        apply_write(&mut file.current, start, data);
        file.pending.push(Op::Write {
            pos: start,
            bytes: data.to_vec(),
        });
        debug_assert!(file.current.len() >= end);
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
            .current
            .len();
        if let Err(e) = state.check_capacity(len.saturating_sub(old_len) as u64) {
            state.stats.injected_faults += 1;
            return Err(e);
        }
        let file = state.files.get_mut(&self.inode).ok_or_else(stale)?;
        // Recorded even when the length does not change: power loss may persist the size change
        // without the writes before it, which is a state a real file system can show.
        file.current.resize(len, 0);
        file.pending.push(Op::SetLen(len));
        Ok(())
    }

    fn sync(&self) -> BoxFuture<'static, io::Result<()>> {
        Box::pin(std::future::ready(self.sync_now()))
    }
}

impl Drop for MemFile {
    fn drop(&mut self) {
        let mut state = lock(&self.state);
        // A crash already forgot this handle (and freed what only it kept alive).
        if state.generation != self.generation {
            return;
        }
        let free = match state.files.get_mut(&self.inode) {
            Some(file) => {
                debug_assert!(file.open_handles > 0);
                file.open_handles = file.open_handles.saturating_sub(1);
                !file.linked && file.open_handles == 0
            }
            None => false,
        };
        if free {
            state.files.remove(&self.inode);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn ready<F: std::future::Future>(fut: F) -> F::Output {
        block_on(fut)
    }

    /// Test-side randomness, independent of the disk's generator.
    struct TestRng(u64);

    impl TestRng {
        fn below(&mut self, bound: u64) -> u64 {
            let mut prng = Prng(self.0);
            let value = prng.below(bound);
            self.0 = prng.0;
            value
        }

        /// Random bytes, `min..max` of them.
        fn bytes(&mut self, min: usize, max: usize) -> Vec<u8> {
            let len = min + self.below((max - min) as u64) as usize;
            (0..len).map(|_| self.below(256) as u8).collect()
        }
    }

    fn disk_with_dir(seed: u64) -> MemDisk {
        let disk = MemDisk::new(seed);
        disk.create_dir_all(Path::new("/d")).unwrap();
        disk
    }

    fn open(disk: &MemDisk, path: &str, mode: OpenMode) -> Arc<dyn File> {
        disk.open(Path::new(path), mode).unwrap()
    }

    fn open_err(disk: &MemDisk, path: &str, mode: OpenMode) -> io::Error {
        match disk.open(Path::new(path), mode) {
            Ok(_) => panic!("{path} opened"),
            Err(e) => e,
        }
    }

    fn read_all(file: &dyn File) -> Vec<u8> {
        let mut buf = vec![0; file.len().unwrap() as usize];
        super::super::read_exact_at(file, 0, &mut buf).unwrap();
        buf
    }

    #[test]
    fn unsynced_write_survives_process_crash_but_handles_die() {
        let disk = disk_with_dir(1);
        let file = open(&disk, "/d/f", OpenMode::Create);
        file.write_at(0, b"hello").unwrap();
        disk.process_crash();

        assert_eq!(
            file.write_at(0, b"x").unwrap_err().to_string(),
            "stale handle after crash"
        );
        assert!(file.len().is_err());
        assert!(file.read_at(0, &mut [0; 4]).is_err());
        assert!(ready(file.sync()).is_err());

        let reopened = open(&disk, "/d/f", OpenMode::Read);
        assert_eq!(read_all(reopened.as_ref()), b"hello");
        assert_eq!(disk.durable_contents("/d/f").unwrap(), b"");
    }

    #[test]
    fn synced_data_always_survives_power_loss() {
        for seed in 0..300 {
            let disk = disk_with_dir(seed);
            let mut rng = TestRng(seed);
            let file = open(&disk, "/d/f", OpenMode::Create);
            let synced = rng.bytes(1, 101);
            file.write_at(0, &synced).unwrap();
            ready(file.sync()).unwrap();
            let mut end = synced.len() as u64;
            for _ in 0..rng.below(6) {
                if rng.below(3) == 0 {
                    end += rng.below(50);
                    file.set_len(end).unwrap();
                } else {
                    let data = rng.bytes(1, 41);
                    file.write_at(end, &data).unwrap();
                    end += data.len() as u64;
                }
            }
            disk.power_loss();
            let after = disk.file_contents("/d/f").unwrap();
            assert_eq!(&after[..synced.len()], &synced[..], "seed {seed}");
            assert_eq!(disk.durable_contents("/d/f").unwrap(), after, "seed {seed}");
        }
    }

    enum TestOp {
        Write(u64, Vec<u8>),
        SetLen(u64),
    }

    fn model_apply(image: &mut Vec<u8>, op: &TestOp) {
        match op {
            TestOp::Write(pos, bytes) => apply_write(image, *pos as usize, bytes),
            TestOp::SetLen(len) => image.resize(*len as usize, 0),
        }
    }

    #[test]
    fn power_loss_leaves_a_prefix_of_the_ops_with_at_most_one_torn_write() {
        let (mut durable_only, mut all_applied, mut torn, mut partial) = (0, 0, 0, 0);
        for seed in 0..1000 {
            let disk = disk_with_dir(seed);
            let mut rng = TestRng(seed.wrapping_mul(31) + 7);
            let file = open(&disk, "/d/f", OpenMode::Create);
            file.write_at(0, &rng.bytes(0, 64)).unwrap();
            ready(file.sync()).unwrap();
            let durable = disk.durable_contents("/d/f").unwrap();

            let ops: Vec<TestOp> = (0..1 + rng.below(8))
                .map(|_| {
                    if rng.below(4) == 0 {
                        TestOp::SetLen(rng.below(96))
                    } else {
                        TestOp::Write(rng.below(80), rng.bytes(1, 33))
                    }
                })
                .collect();
            let mut expected = durable.clone();
            for op in &ops {
                match op {
                    TestOp::Write(pos, bytes) => file.write_at(*pos, bytes).unwrap(),
                    TestOp::SetLen(len) => file.set_len(*len).unwrap(),
                }
                model_apply(&mut expected, op);
            }
            assert_eq!(disk.file_contents("/d/f").unwrap(), expected);

            disk.power_loss();
            let got = disk.file_contents("/d/f").unwrap();
            assert_eq!(disk.durable_contents("/d/f").unwrap(), got);

            let mut image = durable.clone();
            let mut matched = None;
            for k in 0..=ops.len() {
                if got == image {
                    matched = Some(if k == 0 {
                        "durable"
                    } else if k == ops.len() {
                        "all"
                    } else {
                        "partial"
                    });
                    break;
                }
                let Some(op) = ops.get(k) else { break };
                if let TestOp::Write(pos, bytes) = op {
                    let torn_match = (1..bytes.len()).any(|landed| {
                        let mut t = image.clone();
                        apply_write(&mut t, *pos as usize, &bytes[..landed]);
                        t == got
                    });
                    if torn_match {
                        matched = Some("torn");
                        break;
                    }
                }
                model_apply(&mut image, op);
            }
            match matched {
                Some("durable") => durable_only += 1,
                Some("all") => all_applied += 1,
                Some("torn") => torn += 1,
                Some(_) => partial += 1,
                None => panic!("seed {seed}: power loss produced a state no prefix explains"),
            }
        }
        assert!(durable_only > 0 && all_applied > 0 && torn > 0 && partial > 0);
    }

    #[test]
    fn rename_keeps_open_handles_on_their_file() {
        let disk = disk_with_dir(2);
        let tmp = open(&disk, "/d/a.tmp", OpenMode::Create);
        tmp.write_at(0, b"new").unwrap();
        let old = open(&disk, "/d/a", OpenMode::Create);
        old.write_at(0, b"old").unwrap();

        disk.rename(Path::new("/d/a.tmp"), Path::new("/d/a"))
            .unwrap();
        assert!(!disk.exists(Path::new("/d/a.tmp")));
        assert_eq!(disk.list_dir(Path::new("/d")).unwrap(), vec!["a"]);

        // The handle opened as a.tmp now writes to a; the replaced file lives on for its handle.
        tmp.write_at(3, b"er").unwrap();
        assert_eq!(disk.file_contents("/d/a").unwrap(), b"newer");
        assert_eq!(read_all(old.as_ref()), b"old");
        old.write_at(0, b"OLD").unwrap();
        assert_eq!(disk.file_contents("/d/a").unwrap(), b"newer");

        let used = disk.used_bytes();
        drop(old);
        assert_eq!(
            disk.used_bytes(),
            used - 3,
            "the unlinked file is freed with its last handle"
        );
    }

    #[test]
    fn namespace_behaves_like_a_file_system() {
        let disk = MemDisk::new(3);
        let missing = open_err(&disk, "/x/f", OpenMode::Create);
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
        for mode in [OpenMode::Read, OpenMode::ReadWrite] {
            let err = open_err(&disk, "/nope", mode);
            assert_eq!(err.kind(), io::ErrorKind::NotFound);
        }

        disk.create_dir_all(Path::new("/a/b/c")).unwrap();
        assert!(disk.exists(Path::new("/a")) && disk.exists(Path::new("/a/b")));
        drop(open(&disk, "/a/./b/z.log", OpenMode::Create));
        drop(open(&disk, "/a/b/c/../m.log", OpenMode::Create));
        drop(open(&disk, "/a/b.txt", OpenMode::Create));
        assert_eq!(
            disk.list_dir(Path::new("/a/b")).unwrap(),
            vec!["c", "m.log", "z.log"]
        );
        assert_eq!(disk.list_dir(Path::new("/a")).unwrap(), vec!["b", "b.txt"]);
        assert_eq!(disk.list_dir(Path::new("/")).unwrap(), vec!["a"]);
        assert_eq!(
            disk.list_dir(Path::new("/a/b.txt")).unwrap_err().kind(),
            io::ErrorKind::NotADirectory
        );
        assert!(disk.create_dir_all(Path::new("/a/b.txt/x")).is_err());
        assert_eq!(
            open_err(&disk, "/a/b", OpenMode::Create).kind(),
            io::ErrorKind::IsADirectory
        );

        disk.rename(Path::new("/a/b"), Path::new("/a/moved"))
            .unwrap();
        assert_eq!(
            disk.list_dir(Path::new("/a/moved")).unwrap(),
            vec!["c", "m.log", "z.log"]
        );
        assert!(disk.file_contents("/a/moved/z.log").is_some());

        disk.remove_dir_all(Path::new("/a/moved")).unwrap();
        assert_eq!(disk.list_dir(Path::new("/a")).unwrap(), vec!["b.txt"]);
        assert!(!disk.exists(Path::new("/a/moved/c")));
        assert_eq!(disk.used_bytes(), 0);

        disk.remove_file(Path::new("/a/b.txt")).unwrap();
        assert_eq!(
            disk.remove_file(Path::new("/a/b.txt")).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        assert!(ready(disk.sync_dir(Path::new("/a"))).is_ok());
    }

    #[test]
    fn read_write_and_set_len_semantics() {
        let disk = disk_with_dir(4);
        let file = open(&disk, "/d/f", OpenMode::Create);
        file.write_at(4, b"ab").unwrap();
        assert_eq!(disk.file_contents("/d/f").unwrap(), b"\0\0\0\0ab");
        let mut buf = [9u8; 4];
        assert_eq!(file.read_at(4, &mut buf).unwrap(), 2);
        assert_eq!(&buf[..2], b"ab");
        assert_eq!(file.read_at(6, &mut buf).unwrap(), 0);
        assert_eq!(file.read_at(u64::MAX, &mut buf).unwrap(), 0);
        file.set_len(2).unwrap();
        file.set_len(3).unwrap();
        assert_eq!(disk.file_contents("/d/f").unwrap(), b"\0\0\0");
        assert_eq!(file.len().unwrap(), 3);
        assert!(file.write_at(u64::MAX, b"x").is_err());
        assert!(file.set_len(u64::MAX).is_err());

        let reader = open(&disk, "/d/f", OpenMode::Read);
        assert_eq!(
            reader.write_at(0, b"x").unwrap_err().raw_os_error(),
            Some(EBADF)
        );
        assert_eq!(disk.stats().writes, 2);
    }

    #[test]
    fn write_file_atomic_survives_power_loss_whole() {
        for seed in 0..50 {
            let disk = disk_with_dir(seed);
            let path = Path::new("/d/meta");
            ready(super::super::write_file_atomic(&disk, path, b"first")).unwrap();
            disk.power_loss();
            assert_eq!(super::super::read_file(&disk, path).unwrap(), b"first");
        }
    }

    #[test]
    fn capacity_limit_fails_with_enospc_and_writes_nothing() {
        let disk = disk_with_dir(5);
        disk.set_faults(Faults {
            capacity_bytes: Some(100),
            ..Faults::default()
        });
        let a = open(&disk, "/d/a", OpenMode::Create);
        let b = open(&disk, "/d/b", OpenMode::Create);
        a.write_at(0, &[1; 60]).unwrap();
        let err = b.write_at(0, &[2; 50]).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(ENOSPC));
        assert_eq!(disk.file_contents("/d/b").unwrap(), b"");
        assert_eq!(b.set_len(41).unwrap_err().raw_os_error(), Some(ENOSPC));
        b.write_at(0, &[2; 40]).unwrap();
        a.write_at(0, &[3; 60]).unwrap(); // overwriting in place needs no space
        assert_eq!(disk.used_bytes(), 100);

        drop(a);
        disk.remove_file(Path::new("/d/a")).unwrap();
        b.write_at(40, &[2; 50]).unwrap();
        assert_eq!(disk.stats().injected_faults, 2);
    }

    #[test]
    fn eio_rates_fail_the_right_calls() {
        let disk = disk_with_dir(6);
        let file = open(&disk, "/d/f", OpenMode::Create);
        file.write_at(0, b"durable").unwrap();
        ready(file.sync()).unwrap();

        disk.set_faults(Faults {
            write_error_rate: 0.5,
            ..Faults::default()
        });
        let failed = (0..1000u64)
            .filter(|i| match file.write_at(i % 7, b"x") {
                Ok(()) => false,
                Err(e) => {
                    assert_eq!(e.raw_os_error(), Some(EIO));
                    true
                }
            })
            .count();
        assert!(
            (400..600).contains(&failed),
            "{failed} of 1000 writes failed"
        );

        disk.set_faults(Faults {
            write_error_rate: 1.0,
            read_error_rate: 1.0,
            sync_error_rate: 1.0,
            ..Faults::default()
        });
        let before = disk.file_contents("/d/f").unwrap();
        assert_eq!(
            file.write_at(0, b"zzz").unwrap_err().raw_os_error(),
            Some(EIO)
        );
        assert_eq!(file.set_len(0).unwrap_err().raw_os_error(), Some(EIO));
        assert_eq!(
            file.read_at(0, &mut [0; 3]).unwrap_err().raw_os_error(),
            Some(EIO)
        );
        assert_eq!(ready(file.sync()).unwrap_err().raw_os_error(), Some(EIO));
        assert_eq!(disk.file_contents("/d/f").unwrap(), before);
        assert_eq!(disk.durable_contents("/d/f").unwrap(), b"durable");

        disk.set_faults(Faults::default());
        ready(file.sync()).unwrap();
        assert_eq!(disk.durable_contents("/d/f").unwrap(), before);
        let stats = disk.stats();
        assert_eq!(stats.injected_faults, failed as u64 + 4);
        assert_eq!((stats.writes, stats.reads, stats.syncs), (1002, 1, 3));
    }

    #[test]
    fn lost_and_misdirected_writes_report_success() {
        let disk = disk_with_dir(7);
        let file = open(&disk, "/d/f", OpenMode::Create);
        file.set_len(16384).unwrap();
        disk.set_faults(Faults {
            lost_write_rate: 1.0,
            ..Faults::default()
        });
        file.write_at(0, b"lost").unwrap();
        assert_eq!(disk.file_contents("/d/f").unwrap(), vec![0; 16384]);

        disk.set_faults(Faults {
            misdirected_write_rate: 1.0,
            ..Faults::default()
        });
        let mut misplaced = 0;
        for _ in 0..8 {
            file.set_len(0).unwrap();
            file.set_len(16384).unwrap();
            file.write_at(8192, b"MARK").unwrap();
            let contents = disk.file_contents("/d/f").unwrap();
            let at = contents.windows(4).position(|w| w == b"MARK").unwrap();
            assert!((8192 - 4096..8192 + 4096).contains(&at));
            if at != 8192 {
                misplaced += 1;
            }
        }
        assert!(misplaced > 0);
    }

    #[test]
    fn bit_flips_change_exactly_one_bit() {
        let disk = disk_with_dir(8);
        assert_eq!(disk.flip_random_bit(), None);
        let file = open(&disk, "/d/f", OpenMode::Create);
        drop(open(&disk, "/d/empty", OpenMode::Create));
        file.write_at(0, &[0; 64]).unwrap();
        ready(file.sync()).unwrap();

        let (path, offset) = disk.flip_random_bit().unwrap();
        assert_eq!(path, Path::new("/d/f"));
        let current = disk.file_contents("/d/f").unwrap();
        assert_eq!(current.iter().map(|b| b.count_ones()).sum::<u32>(), 1);
        assert_ne!(current[offset as usize], 0);
        assert_eq!(disk.durable_contents("/d/f").unwrap(), current);

        disk.flip_bit("/d/f", 3, 7).unwrap();
        assert_eq!(
            read_all(file.as_ref())[3] & 0x80,
            0x80 ^ (current[3] & 0x80)
        );
        assert!(disk.flip_bit("/d/f", 64, 0).is_err());
        assert!(disk.flip_bit("/d/f", 0, 8).is_err());
        assert!(disk.flip_bit("/d/none", 0, 0).is_err());
    }

    /// File contents, counters and bit flips: everything a run can observe.
    type Observed = (Vec<Option<Vec<u8>>>, DiskStats, Vec<Option<(PathBuf, u64)>>);

    /// A run mixing every fault and both crashes.
    fn scenario(seed: u64) -> Observed {
        let disk = disk_with_dir(seed);
        disk.set_faults(Faults {
            write_error_rate: 0.05,
            read_error_rate: 0.05,
            sync_error_rate: 0.1,
            capacity_bytes: Some(4000),
            lost_write_rate: 0.05,
            misdirected_write_rate: 0.05,
        });
        let mut flips = Vec::new();
        for round in 0..5u64 {
            for name in ["a", "b", "c"] {
                let path = format!("/d/{name}");
                let Ok(file) = disk.open(Path::new(&path), OpenMode::Create) else {
                    continue;
                };
                for i in 0..10u64 {
                    let _ = file.write_at(i * 13 + round, &[i as u8 ^ round as u8; 25]);
                    if i % 4 == 0 {
                        let _ = ready(file.sync());
                    }
                    let _ = file.read_at(i, &mut [0; 8]);
                }
            }
            flips.push(disk.flip_random_bit());
            if round % 2 == 0 {
                disk.power_loss();
            } else {
                disk.process_crash();
            }
        }
        let contents = ["a", "b", "c"]
            .iter()
            .map(|n| disk.file_contents(format!("/d/{n}")))
            .collect();
        (contents, disk.stats(), flips)
    }

    #[test]
    fn same_seed_same_disk() {
        for seed in 0..10 {
            assert_eq!(scenario(seed), scenario(seed), "seed {seed}");
        }
        assert!((1..10).any(|seed| scenario(seed) != scenario(0)));
    }
}
