//! The broker's log directories (`log.dirs`; several of them is JBOD, KIP-858): each has its
//! `directory.id` from `meta.properties`, the partitions placed in it, and whether it failed.
//!
//! - Placement: a partition stays where it was placed; at start it is found in the directory
//!   that holds its data; a new one goes to the online directory with the fewest partitions
//!   ([`least_loaded`], Kafka's rule; ties to the first in `log.dirs` order).
//! - Failure: an I/O error on a partition's files takes its whole directory offline for good
//!   (until a restart): its partitions are refused with KAFKA_STORAGE_ERROR and reported to the
//!   controller, the other directories keep serving. The broker as a whole goes offline only
//!   when every directory has failed (`health`).
//!
//! The first directory also holds the metadata log and the clean-shutdown file, as Kafka's
//! `metadata.log.dir` defaults to it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use uuid::Uuid;

type Key = (String, i32);

struct Dir {
    path: PathBuf,
    id: Uuid,
    /// `Some(reason)` once failed; never goes back.
    offline: Option<String>,
}

struct State {
    dirs: Vec<Dir>,
    /// Directories that failed before they could be opened at start (their id unknown):
    /// never online, in no registration, shown offline by DescribeLogDirs.
    failed_at_start: Vec<(PathBuf, String)>,
    /// The cordoned directories' ids (KIP-1066): no new partition goes there while another
    /// online directory is not cordoned.
    cordoned: Vec<Uuid>,
    /// Where each partition known here lives (an index into `dirs`).
    placed: BTreeMap<Key, usize>,
    /// Directories AlterReplicaLogDirs asked for replicas not here yet (Kafka's preferred log
    /// dir): such a replica is created there.
    preferred: BTreeMap<Key, Uuid>,
}

/// One directory as DescribeLogDirs and the metrics show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirView {
    pub path: PathBuf,
    pub id: Uuid,
    pub offline: Option<String>,
    pub partitions: Vec<Key>,
}

/// A directory that has just failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failed {
    pub path: PathBuf,
    pub id: Uuid,
    /// The partitions placed in it.
    pub partitions: Vec<Key>,
    /// No directory is online any more.
    pub all_offline: bool,
}

pub struct LogDirs {
    state: Mutex<State>,
}

/// The directory a new partition goes to: the online one (`Some(partitions)`) with the fewest
/// partitions, the first of equals; `None` when every directory is offline.
pub fn least_loaded(loads: &[Option<usize>]) -> Option<usize> {
    loads
        .iter()
        .enumerate()
        .filter_map(|(i, load)| load.map(|n| (n, i)))
        .min()
        .map(|(_, i)| i)
}

impl LogDirs {
    /// `dirs` in `log.dirs` order, with their directory ids (distinct, at least one).
    pub fn new(dirs: Vec<(PathBuf, Uuid)>) -> LogDirs {
        assert!(!dirs.is_empty(), "no log directory");
        let mut ids: Vec<Uuid> = dirs.iter().map(|d| d.1).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), dirs.len(), "two log directories share an id");
        LogDirs {
            state: Mutex::new(State {
                dirs: dirs
                    .into_iter()
                    .map(|(path, id)| Dir {
                        path,
                        id,
                        offline: None,
                    })
                    .collect(),
                cordoned: Vec::new(),
                failed_at_start: Vec::new(),
                placed: BTreeMap::new(),
                preferred: BTreeMap::new(),
            }),
        }
    }

    /// A directory of `log.dirs` that failed at start (KIP-858: offline from the outset).
    pub fn add_failed(&self, path: PathBuf, reason: String) {
        self.state
            .lock()
            .unwrap()
            .failed_at_start
            .push((path, reason));
    }

    /// Whether a directory failed at start (a clean-shutdown epoch then says nothing:
    /// Kafka sends PreviousBrokerEpoch -1 when any directory is offline).
    pub fn any_failed_at_start(&self) -> bool {
        !self.state.lock().unwrap().failed_at_start.is_empty()
    }

    /// Every directory id, in `log.dirs` order.
    pub fn ids(&self) -> Vec<Uuid> {
        self.state
            .lock()
            .unwrap()
            .dirs
            .iter()
            .map(|d| d.id)
            .collect()
    }

    /// The ids of the directories still online (what a registration lists).
    pub fn online_ids(&self) -> Vec<Uuid> {
        let state = self.state.lock().unwrap();
        state
            .dirs
            .iter()
            .filter(|d| d.offline.is_none())
            .map(|d| d.id)
            .collect()
    }

    /// The ids of the failed directories.
    pub fn offline_ids(&self) -> Vec<Uuid> {
        let state = self.state.lock().unwrap();
        state
            .dirs
            .iter()
            .filter(|d| d.offline.is_some())
            .map(|d| d.id)
            .collect()
    }

    /// The online directories' paths.
    pub fn online_paths(&self) -> Vec<PathBuf> {
        let state = self.state.lock().unwrap();
        state
            .dirs
            .iter()
            .filter(|d| d.offline.is_none())
            .map(|d| d.path.clone())
            .collect()
    }

    /// The directory `topic`-`index` lives in: where it was placed; else the first online
    /// directory `holds` says has its data (a restart); else a new placement. `None` only when
    /// it was never placed and every directory is offline.
    pub fn locate(
        &self,
        topic: &str,
        index: i32,
        holds: impl Fn(&Path) -> bool,
    ) -> Option<PathBuf> {
        let mut state = self.state.lock().unwrap();
        let key = (topic.to_string(), index);
        if let Some(&at) = state.placed.get(&key) {
            return Some(state.dirs[at].path.clone());
        }
        let found = state
            .dirs
            .iter()
            .position(|d| d.offline.is_none() && holds(&d.path));
        let preferred = state
            .preferred
            .remove(&key)
            .and_then(|id| state.dirs.iter().position(|d| d.id == id))
            .filter(|&at| state.dirs[at].offline.is_none());
        let at = match found.or(preferred) {
            Some(at) => at,
            None => {
                // Cordoned directories take a new partition only when every online one is.
                let open = |d: &Dir| d.offline.is_none() && !state.cordoned.contains(&d.id);
                let any_open = state.dirs.iter().any(open);
                let mut loads: Vec<Option<usize>> = state
                    .dirs
                    .iter()
                    .map(|d| (open(d) || (!any_open && d.offline.is_none())).then_some(0))
                    .collect();
                for &at in state.placed.values() {
                    if let Some(n) = loads[at].as_mut() {
                        *n += 1;
                    }
                }
                least_loaded(&loads)?
            }
        };
        state.placed.insert(key, at);
        Some(state.dirs[at].path.clone())
    }

    /// The ids that `cordoned.log.dirs` names: every directory for `*`, else those whose path
    /// is listed (a path that is not one of these is ignored).
    pub fn ids_named(&self, cordoned: &[String]) -> Vec<Uuid> {
        let state = self.state.lock().unwrap();
        let all = cordoned.iter().any(|c| c == "*");
        state
            .dirs
            .iter()
            .filter(|d| all || cordoned.iter().any(|c| Path::new(c) == d.path))
            .map(|d| d.id)
            .collect()
    }

    /// Which directories are cordoned now (KIP-1066).
    pub fn set_cordoned(&self, ids: Vec<Uuid>) {
        self.state.lock().unwrap().cordoned = ids;
    }

    /// Whether the directory `id` is cordoned.
    pub fn is_cordoned(&self, id: Uuid) -> bool {
        self.state.lock().unwrap().cordoned.contains(&id)
    }

    /// Moves `topic`-`index` to the directory `id` (a finished intra-broker move).
    pub fn replace(&self, topic: &str, index: i32, id: Uuid) -> bool {
        let mut state = self.state.lock().unwrap();
        let Some(at) = state.dirs.iter().position(|d| d.id == id) else {
            return false;
        };
        state.placed.insert((topic.to_string(), index), at);
        true
    }

    /// Places `topic`-`index` in the directory `id` when it is created here (AlterReplicaLogDirs
    /// for a replica not here yet). `false`: no such directory.
    pub fn prefer(&self, topic: &str, index: i32, id: Uuid) -> bool {
        let mut state = self.state.lock().unwrap();
        if !state.dirs.iter().any(|d| d.id == id) {
            return false;
        }
        state.preferred.insert((topic.to_string(), index), id);
        true
    }

    /// Whether any directory is offline (Kafka creates no future log then).
    pub fn any_offline(&self) -> bool {
        let state = self.state.lock().unwrap();
        !state.failed_at_start.is_empty() || state.dirs.iter().any(|d| d.offline.is_some())
    }

    /// Takes the directory `id` offline (an I/O error on a future log in it). `None` when it
    /// already was, or is not one of these.
    pub fn fail_dir(&self, id: Uuid, reason: String) -> Option<Failed> {
        let mut state = self.state.lock().unwrap();
        let at = state.dirs.iter().position(|d| d.id == id)?;
        if state.dirs[at].offline.is_some() {
            return None;
        }
        state.dirs[at].offline = Some(reason);
        let partitions = state
            .placed
            .iter()
            .filter(|(_, &d)| d == at)
            .map(|(k, _)| k.clone())
            .collect();
        Some(Failed {
            path: state.dirs[at].path.clone(),
            id,
            partitions,
            all_offline: state.dirs.iter().all(|d| d.offline.is_some()),
        })
    }

    /// Forgets a partition no longer hosted here (its data is gone).
    pub fn forget(&self, topic: &str, index: i32) {
        let mut state = self.state.lock().unwrap();
        state.placed.remove(&(topic.to_string(), index));
    }

    /// The id and path of the directory `topic`-`index` was placed in.
    pub fn dir_of(&self, topic: &str, index: i32) -> Option<(Uuid, PathBuf)> {
        let state = self.state.lock().unwrap();
        let at = *state.placed.get(&(topic.to_string(), index))?;
        Some((state.dirs[at].id, state.dirs[at].path.clone()))
    }

    /// The path of the directory with id `id`, if it is one of these and online.
    pub fn online_path_of(&self, id: Uuid) -> Option<PathBuf> {
        let state = self.state.lock().unwrap();
        state
            .dirs
            .iter()
            .find(|d| d.id == id && d.offline.is_none())
            .map(|d| d.path.clone())
    }

    /// Whether `topic`-`index` was placed in a failed directory.
    pub fn is_offline(&self, topic: &str, index: i32) -> bool {
        let state = self.state.lock().unwrap();
        // No directory failed (nearly always): no look-up, no key built (the fetch path and
        // every background tick ask here).
        if state.dirs.iter().all(|d| d.offline.is_none()) {
            return false;
        }
        state
            .placed
            .get(&(topic.to_string(), index))
            .is_some_and(|&at| state.dirs[at].offline.is_some())
    }

    /// Takes the directory of `topic`-`index` offline. `None` when it already was (or the
    /// partition was never placed).
    pub fn fail_dir_of(&self, topic: &str, index: i32, reason: String) -> Option<Failed> {
        let (id, _) = self.dir_of(topic, index)?;
        self.fail_dir(id, reason)
    }

    /// Every directory with its state and partitions, in `log.dirs` order.
    pub fn views(&self) -> Vec<DirView> {
        let state = self.state.lock().unwrap();
        state
            .dirs
            .iter()
            .enumerate()
            .map(|(at, d)| DirView {
                path: d.path.clone(),
                id: d.id,
                offline: d.offline.clone(),
                partitions: state
                    .placed
                    .iter()
                    .filter(|(_, &p)| p == at)
                    .map(|(k, _)| k.clone())
                    .collect(),
            })
            .chain(state.failed_at_start.iter().map(|(path, reason)| DirView {
                path: path.clone(),
                id: Uuid::nil(),
                offline: Some(reason.clone()),
                partitions: Vec::new(),
            }))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dirs(n: u64) -> LogDirs {
        LogDirs::new(
            (0..n)
                .map(|i| {
                    (
                        PathBuf::from(format!("/d{i}")),
                        Uuid::from_u64_pair(7, i + 100),
                    )
                })
                .collect(),
        )
    }

    #[test]
    fn least_loaded_picks_the_online_directory_with_fewest_partitions() {
        assert_eq!(least_loaded(&[Some(2), Some(1), Some(1)]), Some(1));
        assert_eq!(least_loaded(&[Some(0), Some(0)]), Some(0));
        assert_eq!(least_loaded(&[None, Some(5), Some(3)]), Some(2));
        assert_eq!(least_loaded(&[None, None]), None);
        assert_eq!(least_loaded(&[]), None);
    }

    #[test]
    fn new_partitions_spread_over_the_directories() {
        let d = dirs(2);
        let placed: Vec<PathBuf> = (0..4)
            .map(|i| d.locate("t", i, |_| false).unwrap())
            .collect();
        assert_eq!(placed, ["/d0", "/d1", "/d0", "/d1"].map(PathBuf::from));
        // Placed once, found there again.
        assert_eq!(d.locate("t", 1, |_| false), Some(PathBuf::from("/d1")));
    }

    #[test]
    fn a_restart_finds_a_partition_where_its_data_is() {
        let d = dirs(3);
        let found = d.locate("t", 0, |p| p == Path::new("/d2"));
        assert_eq!(found, Some(PathBuf::from("/d2")));
        assert_eq!(d.dir_of("t", 0).unwrap().1, PathBuf::from("/d2"));
    }

    #[test]
    fn a_failed_directory_takes_only_its_partitions_offline_and_gets_no_new_ones() {
        let d = dirs(2);
        d.locate("t", 0, |_| false);
        d.locate("t", 1, |_| false);
        let failed = d.fail_dir_of("t", 0, "EIO".into()).unwrap();
        assert_eq!(failed.partitions, vec![("t".to_string(), 0)]);
        assert!(!failed.all_offline);
        assert!(d.is_offline("t", 0));
        assert!(!d.is_offline("t", 1));
        assert_eq!(d.fail_dir_of("t", 0, "again".into()), None);
        assert_eq!(d.offline_ids(), vec![Uuid::from_u64_pair(7, 100)]);
        // New partitions all go to the surviving directory.
        for i in 2..5 {
            assert_eq!(d.locate("t", i, |_| false), Some(PathBuf::from("/d1")));
        }
        let last = d.fail_dir_of("t", 1, "EIO".into()).unwrap();
        assert!(last.all_offline);
        assert_eq!(d.locate("t", 9, |_| false), None);
    }

    #[test]
    fn cordoned_directories_get_new_partitions_only_when_all_are() {
        let d = dirs(3);
        assert_eq!(d.ids_named(&["*".into()]).len(), 3);
        let named = d.ids_named(&["/d0".into(), "/d2".into(), "/elsewhere".into()]);
        assert_eq!(
            named,
            vec![Uuid::from_u64_pair(7, 100), Uuid::from_u64_pair(7, 102)]
        );
        d.set_cordoned(named);
        for i in 0..3 {
            assert_eq!(d.locate("t", i, |_| false), Some(PathBuf::from("/d1")));
        }
        // Found where its data is, cordoned or not (cordoning moves nothing).
        assert_eq!(
            d.locate("u", 0, |p| p == Path::new("/d0")),
            Some(PathBuf::from("/d0"))
        );
        // Everything cordoned: a replica the controller placed here anyway still gets a home.
        d.set_cordoned(d.ids_named(&["*".into()]));
        assert!(d.locate("t", 9, |_| false).is_some());
    }

    #[test]
    fn a_preferred_directory_takes_the_replica_when_it_is_created() {
        let d = dirs(3);
        assert!(d.prefer("t", 0, Uuid::from_u64_pair(7, 102)));
        assert!(
            !d.prefer("t", 0, Uuid::from_u64_pair(7, 999)),
            "not a directory here"
        );
        assert_eq!(d.locate("t", 0, |_| false), Some(PathBuf::from("/d2")));
        // Used once: a later placement of the same name is placed afresh.
        d.forget("t", 0);
        assert_eq!(d.locate("t", 0, |_| false), Some(PathBuf::from("/d0")));
        // Data found elsewhere wins over the preference; an offline preference is ignored.
        d.prefer("u", 0, Uuid::from_u64_pair(7, 102));
        assert_eq!(
            d.locate("u", 0, |p| p == Path::new("/d1")),
            Some(PathBuf::from("/d1"))
        );
        d.prefer("v", 0, Uuid::from_u64_pair(7, 102));
        assert!(d
            .fail_dir(Uuid::from_u64_pair(7, 102), "EIO".into())
            .is_some());
        assert!(d.any_offline());
        assert_ne!(d.locate("v", 0, |_| false), Some(PathBuf::from("/d2")));
    }

    #[test]
    fn a_directory_failed_at_start_is_offline_and_in_no_registration() {
        let d = dirs(2);
        assert!(!d.any_failed_at_start());
        d.add_failed(PathBuf::from("/bad"), "meta.properties: corrupt".into());
        assert!(d.any_failed_at_start());
        assert_eq!(d.online_ids().len(), 2);
        assert!(d.offline_ids().is_empty(), "no id to report");
        assert!(!d.online_paths().contains(&PathBuf::from("/bad")));
        let views = d.views();
        assert_eq!(views.len(), 3);
        assert_eq!(views[2].path, PathBuf::from("/bad"));
        assert!(views[2].offline.is_some());
        for i in 0..4 {
            assert_ne!(d.locate("t", i, |_| false), Some(PathBuf::from("/bad")));
        }
    }
}
