//! What a crash mid-move leaves, put right at start before the partitions open:
//! - `<topic>-<p>.<id>-future` of a replica still hosted here: the move goes on (its copy
//!   resumes from the future's recovered end, cut back where it diverged); of one not hosted
//!   here any more: removed;
//! - `<topic>-<p>.<id>-delete`: an old log a finished swap had not removed yet: removed;
//! - `<topic>-<p>` in two directories: the swap renamed the future in but the old one was not
//!   renamed away yet. The one holding the `moved-in` marker (written, durably, before the
//!   swap) is the replica; the other is removed. The marker goes once the old log is gone.

use std::collections::BTreeSet;
use std::io;

use uuid::Uuid;

use crate::broker::shared::Broker;
use crate::replica::dir_move::Key;

/// The marker a future log carries from just before its swap until the old log is gone.
pub(crate) const MOVED_IN: &str = "moved-in";

/// Kafka's future log directory name: `<topic>-<p>.<32 hex digits>-future`.
pub(crate) fn future_name(key: &Key, unique: Uuid) -> String {
    format!("{}-{}.{}-future", key.0, key.1, unique.simple())
}

pub(crate) fn parse_future_name(name: &str) -> Option<Key> {
    parse_suffixed(name, "-future")
}

pub(crate) fn parse_delete_name(name: &str) -> Option<Key> {
    parse_suffixed(name, "-delete")
}

fn parse_suffixed(name: &str, suffix: &str) -> Option<Key> {
    let rest = name.strip_suffix(suffix)?;
    let (partition, unique) = rest.rsplit_once('.')?;
    if unique.len() != 32 || !unique.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let (topic, index) = partition.rsplit_once('-')?;
    let index: i32 = index.parse().ok().filter(|&i| i >= 0)?;
    (!topic.is_empty()).then(|| (topic.to_string(), index))
}

impl Broker {
    /// Puts right what interrupted moves left in the online directories; `hosted` names the
    /// partitions hosted here (`<topic>-<p>`). Returns the moves to resume: (replica, the
    /// future's directory id).
    pub(crate) fn recover_moves(&self, hosted: &BTreeSet<String>) -> io::Result<Vec<(Key, Uuid)>> {
        let disk = self.io.disk.as_ref();
        let roots: Vec<_> = self
            .dirs
            .views()
            .into_iter()
            .filter(|v| v.offline.is_none())
            .map(|v| (v.path, v.id))
            .collect();
        let mut resume: Vec<(Key, Uuid)> = Vec::new();
        for (root, id) in &roots {
            for name in disk.list_dir(root)? {
                let path = root.join(&name);
                if parse_delete_name(&name).is_some() {
                    tracing::info!(dir = %path.display(), "removing the old log of a finished replica move");
                    disk.remove_dir_all(&path)?;
                } else if let Some(key) = parse_future_name(&name) {
                    let here = hosted.contains(&format!("{}-{}", key.0, key.1));
                    if here && !resume.iter().any(|(k, _)| *k == key) {
                        tracing::info!(dir = %path.display(), "resuming a replica move");
                        resume.push((key, *id));
                    } else {
                        tracing::info!(dir = %path.display(), "removing the future log of a replica not moving here");
                        disk.remove_dir_all(&path)?;
                    }
                }
            }
        }
        for name in hosted {
            let holders: Vec<_> = roots
                .iter()
                .map(|(root, _)| root.join(name))
                .filter(|p| disk.exists(p))
                .collect();
            if holders.len() > 1 {
                let keep = holders
                    .iter()
                    .position(|p| disk.exists(&p.join(MOVED_IN)))
                    .unwrap_or(0);
                for (i, p) in holders.iter().enumerate() {
                    if i != keep {
                        tracing::warn!(dir = %p.display(), kept = %holders[keep].display(),
                            "removing the old log of a replica move a crash interrupted");
                        disk.remove_dir_all(p)?;
                    }
                }
            }
            for p in &holders {
                let marker = p.join(MOVED_IN);
                if disk.exists(&marker) {
                    disk.remove_file(&marker)?;
                }
            }
        }
        Ok(resume)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn future_and_delete_names_are_kafkas() {
        let key = ("my.topic-x".to_string(), 12);
        let unique = Uuid::from_u64_pair(1, 2);
        let name = future_name(&key, unique);
        assert_eq!(
            name,
            "my.topic-x-12.00000000000000010000000000000002-future"
        );
        assert_eq!(parse_future_name(&name), Some(key.clone()));
        assert_eq!(parse_delete_name(&name), None);
        let doomed = name.replace("-future", "-delete");
        assert_eq!(parse_delete_name(&doomed), Some(key));
        for not_ours in [
            "t-0",
            "t-0.abc-future",
            "t-x.00000000000000010000000000000002-future",
            "-0.00000000000000010000000000000002-future",
            "t-.00000000000000010000000000000002-future",
        ] {
            assert_eq!(parse_future_name(not_ours), None, "{not_ours}");
        }
    }
}
