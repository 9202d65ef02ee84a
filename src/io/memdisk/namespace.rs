//! File names and directories as the OS shows them, and as they are on the medium. Creating,
//! renaming and removing a file changes what the OS shows at once, but reaches the medium only
//! when its directory is fsynced ([`Namespace::sync_dir`]); until then each directory keeps its
//! changes in order, and power loss keeps a random prefix of them (directories are journaled
//! independently, so one directory's changes may land without another's).
//!
//! Directories themselves are simpler: a new directory is pending in its parent like a file, but
//! removing a directory tree, renaming a directory, and renaming a file into another directory
//! reach the medium at once (the broker never relies on these being undone or not).

use std::collections::{BTreeMap, BTreeSet};
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

#[derive(Default)]
pub struct Namespace {
    pub names: BTreeMap<PathBuf, u64>,
    /// Explicit directories. Roots (`/` and the empty relative root) exist implicitly.
    pub dirs: BTreeSet<PathBuf>,
    durable_names: BTreeMap<PathBuf, u64>,
    durable_dirs: BTreeSet<PathBuf>,
    /// Keyed by the directory the change is in.
    pending: BTreeMap<PathBuf, Vec<Change>>,
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
        path.parent().is_none() || self.dirs.contains(path)
    }

    pub fn is_file(&self, path: &Path) -> bool {
        self.names.contains_key(path)
    }

    fn record(&mut self, dir: PathBuf, change: Change) {
        let list = self.pending.entry(dir).or_default();
        assert!(
            list.len() < MAX_PENDING_PER_DIR,
            "a directory with a million unsynced changes"
        );
        list.push(change);
    }

    /// A new file `path` for `inode`; returns the inode it replaced, if any.
    pub fn link(&mut self, path: &Path, inode: u64) -> Option<u64> {
        let old = self.names.insert(path.to_path_buf(), inode);
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
        let inode = self.names.remove(path)?;
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
        let inode = self.names.remove(from).expect("caller checked the source");
        let old = self.names.insert(to.to_path_buf(), inode);
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
            let durable = self.durable_names.remove(from);
            assert_eq!(durable, Some(inode), "a settled source is durable");
            self.durable_names.insert(to.to_path_buf(), inode);
        }
        old
    }

    pub fn mkdir(&mut self, path: &Path) {
        if self.dirs.insert(path.to_path_buf()) {
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
        let below = |p: &PathBuf| p == path || strictly_within(p, path);
        let doomed: Vec<PathBuf> = self
            .names
            .keys()
            .filter(|p| strictly_within(p, path))
            .cloned()
            .collect();
        let inodes = doomed
            .iter()
            .filter_map(|name| self.names.remove(name))
            .collect();
        self.dirs.retain(|p| !below(p));
        self.durable_names.retain(|p, _| !strictly_within(p, path));
        self.durable_dirs.retain(|p| !below(p));
        self.pending.retain(|dir, _| !below(dir));
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
            .filter(|d| *d == from || strictly_within(d, from))
            .cloned()
            .collect();
        for dir in moved {
            self.settle(&dir);
        }
        self.settle(&parent(from));
        self.settle(&parent(to));
        for dirs in [&mut self.dirs, &mut self.durable_dirs] {
            let moved: Vec<PathBuf> = dirs
                .iter()
                .filter(|p| *p == from || strictly_within(p, from))
                .cloned()
                .collect();
            for dir in moved {
                dirs.remove(&dir);
                dirs.insert(rebase(&dir, from, to));
            }
        }
        for names in [&mut self.names, &mut self.durable_names] {
            let moved: Vec<PathBuf> = names
                .keys()
                .filter(|p| strictly_within(p, from))
                .cloned()
                .collect();
            for name in moved {
                if let Some(inode) = names.remove(&name) {
                    names.insert(rebase(&name, from, to), inode);
                }
            }
        }
    }

    /// Makes a directory's entries durable (fsync of the directory).
    pub fn sync_dir(&mut self, dir: &Path) {
        self.settle(dir);
    }

    fn settle(&mut self, dir: &Path) {
        if let Some(changes) = self.pending.remove(dir) {
            for change in &changes {
                self.apply_durably(change);
            }
        }
    }

    fn apply_durably(&mut self, change: &Change) {
        match change {
            Change::Link { name, inode } => {
                self.durable_names.insert(name.clone(), *inode);
            }
            Change::Unlink { name } => {
                self.durable_names.remove(name);
            }
            Change::Rename { from, to } => {
                // The source may never have reached the medium (created in a directory whose
                // earlier changes were lost): then the rename has nothing to move.
                if let Some(inode) = self.durable_names.remove(from) {
                    self.durable_names.insert(to.clone(), inode);
                } else {
                    self.durable_names.remove(to);
                }
            }
            Change::MkDir { path } => {
                self.durable_dirs.insert(path.clone());
            }
        }
    }

    /// Inodes that a durable name, or a pending creation, refers to: power loss may give them a
    /// name again, so they must outlive their current names.
    pub fn recoverable_inodes(&self) -> BTreeSet<u64> {
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
        let exists = |d: &Path| d.parent().is_none() || dirs.contains(d);
        let orphan_dirs: Vec<PathBuf> = dirs
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
                .is_none_or(|p| p.parent().is_none() || dirs.contains(p))
        });
        self.names.clone_from(&self.durable_names);
        self.dirs.clone_from(&self.durable_dirs);
    }

    /// Whether every change has reached the medium.
    pub fn is_synced(&self) -> bool {
        self.pending.is_empty()
    }
}
