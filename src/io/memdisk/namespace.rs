//! File names and directories as the OS shows them, and as they are on the medium. Creating,
//! renaming and removing a file changes what the OS shows at once, but reaches the medium only
//! when its directory is fsynced ([`Namespace::sync_dir`]); until then each directory keeps its
//! changes in order, and power loss keeps a random prefix of them (directories are journaled
//! independently, so one directory's changes may land without another's).
//!
//! Directories themselves are simpler: a new directory is pending in its parent like a file, but
//! removing a directory tree, renaming a directory, and renaming a file into another directory
//! reach the medium at once (the broker never relies on these being undone or not).

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::{Bound, Deref};
use std::path::{Path, PathBuf};

use super::Prng;

/// Changes to one directory's entries since its last fsync, in order. Bounded in practice by
/// the caller's fsync discipline; a runaway list is a bug in the caller, caught here.
const MAX_PENDING_PER_DIR: usize = 1 << 20;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Change {
    /// `name` now refers to `inode` (created, or the target of a rename within the directory).
    Link { name: PathBuf, inode: u64 },
    /// `name` no longer exists.
    Unlink { name: PathBuf },
    /// `from` moved to `to` within the directory (one atomic change, as `rename(2)` is).
    Rename { from: PathBuf, to: PathBuf },
    /// A subdirectory was created.
    MkDir { path: PathBuf },
}

/// A normalized path (as `super::normalize` makes them: no `.`, no `..`, no repeated or
/// trailing separator) as the namespace's maps key it. It orders exactly as `Path` orders
/// normalized paths, component by component, but compares bytes: `/` ranks below every other
/// byte, so a path that ends, or whose component ends, where the other's goes on sorts first,
/// as a shorter component or fewer components do (`tests::key_order_is_path_order`). `Path`'s
/// own comparison parses components on every call: it was most of what opening, renaming and
/// syncing cost the simulator (8 % of a `kill-page-cache` run). Same order, so every iteration
/// (power loss's per-directory draws, `flip_random_bit`'s choice) is unchanged.
#[derive(Clone, Debug)]
pub struct Key(PathBuf);

/// The borrowed form of [`Key`], for look-ups by `&Path` without a copy.
#[derive(Debug)]
#[repr(transparent)]
pub struct KeyRef(Path);

impl KeyRef {
    pub fn new(path: &Path) -> &KeyRef {
        // SAFETY: `KeyRef` is `repr(transparent)` over `Path`, so the two references have the
        // same layout and metadata (as `Path::new` casts `&OsStr`).
        unsafe { &*(path as *const Path as *const KeyRef) }
    }
}

/// `/` below every other byte: see [`Key`].
fn rank(byte: u8) -> u16 {
    if byte == b'/' {
        0
    } else {
        u16::from(byte) + 1
    }
}

impl Ord for KeyRef {
    fn cmp(&self, other: &KeyRef) -> Ordering {
        let a = self.0.as_os_str().as_encoded_bytes();
        let b = other.0.as_os_str().as_encoded_bytes();
        let same = a.iter().zip(b).take_while(|(x, y)| x == y).count();
        match (a.get(same), b.get(same)) {
            (Some(&x), Some(&y)) => rank(x).cmp(&rank(y)),
            _ => a.len().cmp(&b.len()),
        }
    }
}

impl PartialOrd for KeyRef {
    fn partial_cmp(&self, other: &KeyRef) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for KeyRef {
    fn eq(&self, other: &KeyRef) -> bool {
        self.0.as_os_str() == other.0.as_os_str()
    }
}

impl Eq for KeyRef {}

impl Borrow<KeyRef> for Key {
    fn borrow(&self) -> &KeyRef {
        KeyRef::new(&self.0)
    }
}

impl Ord for Key {
    fn cmp(&self, other: &Key) -> Ordering {
        KeyRef::new(&self.0).cmp(KeyRef::new(&other.0))
    }
}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Key) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Key) -> bool {
        self.0.as_os_str() == other.0.as_os_str()
    }
}

impl Eq for Key {}

impl Deref for Key {
    type Target = PathBuf;
    fn deref(&self) -> &PathBuf {
        &self.0
    }
}

impl From<&Path> for Key {
    fn from(path: &Path) -> Key {
        Key(path.to_path_buf())
    }
}

impl From<PathBuf> for Key {
    fn from(path: PathBuf) -> Key {
        Key(path)
    }
}

/// Look-up form of a path.
pub fn key(path: &Path) -> &KeyRef {
    KeyRef::new(path)
}

/// The keys strictly below `dir`: a range right after it (a directory's descendants sort right
/// after it, see [`Key`]), except under the empty relative root, whose descendants (every
/// relative path) sort after the absolute ones: a filter there.
pub fn keys_below<'a, V>(
    map: &'a BTreeMap<Key, V>,
    dir: &'a Path,
) -> Box<dyn Iterator<Item = &'a Key> + 'a> {
    if dir.as_os_str().is_empty() {
        Box::new(map.keys().filter(move |p| strictly_within(p, dir)))
    } else {
        let after = (Bound::Excluded(key(dir)), Bound::Unbounded);
        Box::new(
            map.range::<KeyRef, _>(after)
                .map(|(p, _)| p)
                .take_while(move |p| p.starts_with(dir)),
        )
    }
}

/// [`keys_below`] for a set.
pub fn set_below<'a>(
    set: &'a BTreeSet<Key>,
    dir: &'a Path,
) -> Box<dyn Iterator<Item = &'a Key> + 'a> {
    if dir.as_os_str().is_empty() {
        Box::new(set.iter().filter(move |p| strictly_within(p, dir)))
    } else {
        let after = (Bound::Excluded(key(dir)), Bound::Unbounded);
        Box::new(
            set.range::<KeyRef, _>(after)
                .take_while(move |p| p.starts_with(dir)),
        )
    }
}

#[derive(Default)]
pub struct Namespace {
    pub names: BTreeMap<Key, u64>,
    /// Explicit directories. Roots (`/` and the empty relative root) exist implicitly.
    pub dirs: BTreeSet<Key>,
    durable_names: BTreeMap<Key, u64>,
    durable_dirs: BTreeSet<Key>,
    /// Keyed by the directory the change is in.
    pending: BTreeMap<Key, Vec<Change>>,
}

fn parent(path: &Path) -> PathBuf {
    path.parent().map(Path::to_path_buf).unwrap_or_default()
}

/// Whether `path` lies strictly below `dir`. The empty relative root contains every relative
/// path, which `Path::starts_with` alone would not express.
pub fn strictly_within(path: &Path, dir: &Path) -> bool {
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
pub fn rebase(path: &Path, from: &Path, to: &Path) -> PathBuf {
    match path.strip_prefix(from) {
        Ok(rest) => super::normalize(&to.join(rest)),
        Err(_) => path.to_path_buf(),
    }
}

impl Namespace {
    pub fn is_dir(&self, path: &Path) -> bool {
        path.parent().is_none() || self.dirs.contains(key(path))
    }

    pub fn is_file(&self, path: &Path) -> bool {
        self.names.contains_key(key(path))
    }

    fn record(&mut self, dir: PathBuf, change: Change) {
        let list = self.pending.entry(Key(dir)).or_default();
        assert!(
            list.len() < MAX_PENDING_PER_DIR,
            "a directory with a million unsynced changes"
        );
        list.push(change);
    }

    /// A new file `path` for `inode`; returns the inode it replaced, if any.
    pub fn link(&mut self, path: &Path, inode: u64) -> Option<u64> {
        let old = self.names.insert(Key::from(path), inode);
        self.record(
            parent(path),
            Change::Link {
                name: path.to_path_buf(),
                inode,
            },
        );
        old
    }

    pub fn unlink(&mut self, path: &Path) -> Option<u64> {
        let inode = self.names.remove(key(path))?;
        self.record(
            parent(path),
            Change::Unlink {
                name: path.to_path_buf(),
            },
        );
        Some(inode)
    }

    /// Renames a file; returns the inode that `to` referred to before, if any.
    pub fn rename_file(&mut self, from: &Path, to: &Path) -> Option<u64> {
        let inode = self
            .names
            .remove(key(from))
            .expect("caller checked the source");
        let old = self.names.insert(Key::from(to), inode);
        if parent(from) == parent(to) {
            self.record(
                parent(from),
                Change::Rename {
                    from: from.to_path_buf(),
                    to: to.to_path_buf(),
                },
            );
        } else {
            // Across directories: durable at once (see the module doc).
            self.settle(&parent(from));
            self.settle(&parent(to));
            let durable = self.durable_names.remove(key(from));
            assert_eq!(durable, Some(inode), "a settled source is durable");
            self.durable_names.insert(Key::from(to), inode);
        }
        old
    }

    pub fn mkdir(&mut self, path: &Path) {
        if self.dirs.insert(Key::from(path)) {
            self.record(
                parent(path),
                Change::MkDir {
                    path: path.to_path_buf(),
                },
            );
        }
    }

    /// Removes a directory and everything below it, durably at once. Returns the inodes that
    /// lost their names.
    pub fn remove_tree(&mut self, path: &Path) -> Vec<u64> {
        let below = |p: &Path| p == path || strictly_within(p, path);
        // Ranges, not scans of the whole disk (a deleted partition's directory, every topic
        // deletion or replica move): what is below `path` sorts right after it (`Key`).
        let doomed: Vec<Key> = keys_below(&self.names, path).cloned().collect();
        let inodes = doomed
            .iter()
            .filter_map(|name| self.names.remove(name))
            .collect();
        let doomed: Vec<Key> = set_below(&self.dirs, path).cloned().collect();
        for dir in doomed {
            self.dirs.remove(&dir);
        }
        self.dirs.remove(key(path));
        let doomed: Vec<Key> = keys_below(&self.durable_names, path).cloned().collect();
        for name in doomed {
            self.durable_names.remove(&name);
        }
        let doomed: Vec<Key> = set_below(&self.durable_dirs, path).cloned().collect();
        for dir in doomed {
            self.durable_dirs.remove(&dir);
        }
        self.durable_dirs.remove(key(path));
        let doomed: Vec<Key> = keys_below(&self.pending, path).cloned().collect();
        for dir in doomed {
            self.pending.remove(&dir);
        }
        self.pending.remove(key(path));
        // Forget changes elsewhere that name the tree: the removal is already on the medium.
        for changes in self.pending.values_mut() {
            changes.retain(|change| match change {
                Change::Link { name, .. } | Change::Unlink { name } => !below(name),
                Change::Rename { from, to } => !below(from) && !below(to),
                Change::MkDir { path: dir } => !below(dir),
            });
        }
        inodes
    }

    /// Renames a directory, durably at once (after settling everything below it).
    pub fn rename_dir(&mut self, from: &Path, to: &Path) {
        let moved: Vec<PathBuf> = self
            .pending
            .keys()
            .filter(|d| d.as_path() == from || strictly_within(d, from))
            .map(|d| d.to_path_buf())
            .collect();
        for dir in moved {
            self.settle(&dir);
        }
        self.settle(&parent(from));
        self.settle(&parent(to));
        for dirs in [&mut self.dirs, &mut self.durable_dirs] {
            let moved: Vec<PathBuf> = dirs
                .iter()
                .filter(|p| p.as_path() == from || strictly_within(p, from))
                .map(|p| p.to_path_buf())
                .collect();
            for dir in moved {
                dirs.remove(key(&dir));
                dirs.insert(Key(rebase(&dir, from, to)));
            }
        }
        for names in [&mut self.names, &mut self.durable_names] {
            let moved: Vec<PathBuf> = names
                .keys()
                .filter(|p| strictly_within(p, from))
                .map(|p| p.to_path_buf())
                .collect();
            for name in moved {
                if let Some(inode) = names.remove(key(&name)) {
                    names.insert(Key(rebase(&name, from, to)), inode);
                }
            }
        }
    }

    /// Makes a directory's entries durable (fsync of the directory).
    pub fn sync_dir(&mut self, dir: &Path) {
        self.settle(dir);
    }

    fn settle(&mut self, dir: &Path) {
        if let Some(changes) = self.pending.remove(key(dir)) {
            for change in &changes {
                self.apply_durably(change);
            }
        }
    }

    fn apply_durably(&mut self, change: &Change) {
        match change {
            Change::Link { name, inode } => {
                self.durable_names.insert(Key(name.clone()), *inode);
            }
            Change::Unlink { name } => {
                self.durable_names.remove(key(name));
            }
            Change::Rename { from, to } => {
                // The source may never have reached the medium (created in a directory whose
                // earlier changes were lost): then the rename has nothing to move.
                if let Some(inode) = self.durable_names.remove(key(from)) {
                    self.durable_names.insert(Key(to.clone()), inode);
                } else {
                    self.durable_names.remove(key(to));
                }
            }
            Change::MkDir { path } => {
                self.durable_dirs.insert(Key(path.clone()));
            }
        }
    }

    /// Those of `candidates` that a durable name, or a pending creation, refers to: power loss
    /// may give them a name again, so they must outlive their current names. (One pass, no set
    /// of every inode: this runs after every rename over a name and every directory fsync.)
    pub fn recoverable_among(&self, candidates: &BTreeSet<u64>) -> BTreeSet<u64> {
        let pending = self
            .pending
            .values()
            .flatten()
            .filter_map(|change| match change {
                Change::Link { inode, .. } => Some(*inode),
                _ => None,
            });
        self.durable_names
            .values()
            .copied()
            .chain(pending)
            .filter(|inode| candidates.contains(inode))
            .collect()
    }

    /// The power failed: each directory keeps a random prefix of its pending changes; entries
    /// of a directory that did not itself survive are gone.
    pub fn power_loss(&mut self, rng: &mut Prng) {
        let pending = std::mem::take(&mut self.pending);
        // Parents sort before their children, so a directory's own creation is decided first.
        for (_dir, changes) in pending {
            // The unapplied suffix is simply lost.
            let kept = rng.below(changes.len() as u64 + 1) as usize;
            for change in &changes[..kept] {
                self.apply_durably(change);
            }
        }
        let dirs = &self.durable_dirs;
        let exists = |d: &Path| d.parent().is_none() || dirs.contains(key(d));
        let orphan_dirs: Vec<Key> = dirs
            .iter()
            .filter(|d| d.ancestors().skip(1).any(|a| !exists(a)))
            .cloned()
            .collect();
        for dir in orphan_dirs {
            self.durable_dirs.remove(&dir);
        }
        let dirs = &self.durable_dirs;
        self.durable_names.retain(|name, _| {
            name.parent()
                .is_none_or(|p| p.parent().is_none() || dirs.contains(key(p)))
        });
        self.names.clone_from(&self.durable_names);
        self.dirs.clone_from(&self.durable_dirs);
    }

    /// Whether every change has reached the medium.
    pub fn is_synced(&self) -> bool {
        self.pending.is_empty()
    }
}
