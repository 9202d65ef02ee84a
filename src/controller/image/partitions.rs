//! Partition registrations of the image, keyed by (topic id, partition), and the rules every
//! registration keeps: replicas distinct, leader among them (or none), ISR and ELR inside the
//! replicas and apart, epochs never going back.

use std::collections::BTreeMap;

use uuid::Uuid;

use super::records::{PartitionChange, PartitionRecord, DIR_UNASSIGNED, NO_LEADER};

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PartitionRegistration {
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub elr: Vec<i32>,
    pub last_known_elr: Vec<i32>,
    pub leader: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub leader_recovering: bool,
    /// Replicas a reassignment is adding (KIP-455): in `replicas`, catching up.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub adding_replicas: Vec<i32>,
    /// Replicas a reassignment will remove once every target replica is in the ISR.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removing_replicas: Vec<i32>,
    /// KIP-858: each replica's directory, parallel to `replicas` (empty: none known, as in
    /// images from before directories).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub directories: Vec<Uuid>,
}

impl PartitionRegistration {
    /// Whether a reassignment is in progress (Kafka's `isReassigning`).
    pub fn is_reassigning(&self) -> bool {
        !self.adding_replicas.is_empty() || !self.removing_replicas.is_empty()
    }

    /// The replicas the reassignment targets (all of them when none is in progress).
    pub fn target_replicas(&self) -> Vec<i32> {
        self.replicas
            .iter()
            .copied()
            .filter(|r| !self.removing_replicas.contains(r))
            .collect()
    }

    pub fn has_leader(&self) -> bool {
        self.leader != NO_LEADER
    }

    /// The directory the image places `broker`'s replica in (None: not a replica, or no
    /// directories recorded).
    pub fn directory_of(&self, broker: i32) -> Option<Uuid> {
        let at = self.replicas.iter().position(|r| *r == broker)?;
        self.directories.get(at).copied()
    }

    /// This registration after `change`, as every node replays it: the partition epoch always
    /// bumps, the leader epoch only when the change sets the leader (notes §4.1). The caller
    /// checks the result.
    pub fn apply(&mut self, change: &PartitionChange) {
        let p = self;
        if let Some(replicas) = &change.replicas {
            // A replica kept keeps its directory; a new one has none yet (Kafka's
            // PartitionChangeBuilder does the same when a change does not name them).
            if !p.directories.is_empty() {
                p.directories = replicas
                    .iter()
                    .map(|r| p.directory_of(*r).unwrap_or(DIR_UNASSIGNED))
                    .collect();
            }
            p.replicas = replicas.clone();
        }
        if let Some(directories) = &change.directories {
            p.directories = directories.clone();
        }
        if let Some(isr) = &change.isr {
            p.isr = isr.clone();
        }
        if let Some(elr) = &change.elr {
            p.elr = elr.clone();
        }
        if let Some(last) = &change.last_known_elr {
            p.last_known_elr = last.clone();
        }
        if let Some(leader) = change.leader {
            p.leader = leader;
            p.leader_epoch = p
                .leader_epoch
                .checked_add(1)
                .expect("leader epoch overflow");
        }
        if let Some(recovering) = change.leader_recovering {
            p.leader_recovering = recovering;
        }
        if let Some(adding) = &change.adding_replicas {
            p.adding_replicas = adding.clone();
        }
        if let Some(removing) = &change.removing_replicas {
            p.removing_replicas = removing.clone();
        }
        p.partition_epoch = p
            .partition_epoch
            .checked_add(1)
            .expect("partition epoch overflow");
    }

    /// Panics naming the broken rule: a record that breaks one is a controller bug, and
    /// applying it would corrupt every node's image alike.
    fn check(&self, key: (Uuid, i32)) {
        let distinct = |v: &[i32]| {
            let mut s = v.to_vec();
            s.sort_unstable();
            s.windows(2).all(|w| w[0] != w[1])
        };
        assert!(!self.replicas.is_empty(), "{key:?}: no replicas");
        assert!(
            distinct(&self.replicas),
            "{key:?}: replicas {:?} repeat",
            self.replicas
        );
        assert!(distinct(&self.isr), "{key:?}: isr {:?} repeats", self.isr);
        assert!(distinct(&self.elr), "{key:?}: elr {:?} repeats", self.elr);
        assert!(
            self.leader == NO_LEADER || self.replicas.contains(&self.leader),
            "{key:?}: leader {} not in replicas {:?}",
            self.leader,
            self.replicas
        );
        assert!(
            self.isr.iter().all(|r| self.replicas.contains(r)),
            "{key:?}: isr {:?} not within replicas {:?}",
            self.isr,
            self.replicas
        );
        assert!(
            self.elr
                .iter()
                .all(|r| self.replicas.contains(r) && !self.isr.contains(r)),
            "{key:?}: elr {:?} not within replicas {:?} apart from isr {:?}",
            self.elr,
            self.replicas,
            self.isr
        );
        assert!(
            self.leader == NO_LEADER || self.isr.contains(&self.leader),
            "{key:?}: leader {} not in isr {:?}",
            self.leader,
            self.isr
        );
        assert!(
            !self.leader_recovering || self.isr.len() <= 1,
            "{key:?}: a recovering leader with isr {:?}",
            self.isr
        );
        assert!(
            distinct(&self.adding_replicas) && distinct(&self.removing_replicas),
            "{key:?}: adding {:?} or removing {:?} repeat",
            self.adding_replicas,
            self.removing_replicas
        );
        assert!(
            self.adding_replicas
                .iter()
                .chain(&self.removing_replicas)
                .all(|r| self.replicas.contains(r))
                && !self
                    .adding_replicas
                    .iter()
                    .any(|r| self.removing_replicas.contains(r)),
            "{key:?}: adding {:?} and removing {:?} must be apart, within replicas {:?}",
            self.adding_replicas,
            self.removing_replicas,
            self.replicas
        );
        assert!(
            self.replicas.len() > self.removing_replicas.len(),
            "{key:?}: a reassignment removing every replica of {:?}",
            self.replicas
        );
        assert!(self.leader_epoch >= 0 && self.partition_epoch >= 0);
        assert!(
            self.directories.is_empty() || self.directories.len() == self.replicas.len(),
            "{key:?}: directories {:?} not parallel to replicas {:?}",
            self.directories,
            self.replicas
        );
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Partitions {
    by_key: BTreeMap<(Uuid, i32), PartitionRegistration>,
}

impl Partitions {
    pub(super) fn create(&mut self, record: &PartitionRecord) {
        let key = (record.topic_id, record.partition);
        let registration = PartitionRegistration {
            replicas: record.replicas.clone(),
            isr: record.isr.clone(),
            elr: record.elr.clone(),
            last_known_elr: record.last_known_elr.clone(),
            leader: record.leader,
            leader_epoch: record.leader_epoch,
            partition_epoch: record.partition_epoch,
            leader_recovering: record.leader_recovering,
            adding_replicas: Vec::new(),
            removing_replicas: Vec::new(),
            directories: record.directories.clone(),
        };
        registration.check(key);
        if let Some(old) = self.by_key.get(&key) {
            // Kafka replays a PartitionRecord over an existing one (reassignment snapshots); the
            // epochs must still not go back.
            assert!(
                registration.leader_epoch >= old.leader_epoch
                    && registration.partition_epoch >= old.partition_epoch,
                "{key:?}: epochs go back"
            );
        }
        self.by_key.insert(key, registration);
    }

    /// A registration from a snapshot, reassignment state included (a new table: no earlier
    /// registration to compare epochs with).
    pub(super) fn restore(&mut self, key: (Uuid, i32), registration: PartitionRegistration) {
        registration.check(key);
        self.by_key.insert(key, registration);
    }

    pub(super) fn change(&mut self, change: &PartitionChange) {
        let key = (change.topic_id, change.partition);
        let p = self
            .by_key
            .get_mut(&key)
            .unwrap_or_else(|| panic!("change of unknown partition {key:?}"));
        p.apply(change);
        p.check(key);
    }

    pub(super) fn remove_topic(&mut self, id: Uuid) {
        let keys: Vec<_> = self
            .by_key
            .range((id, i32::MIN)..=(id, i32::MAX))
            .map(|(k, _)| *k)
            .collect();
        for key in keys {
            self.by_key.remove(&key);
        }
    }

    pub(super) fn get(&self, id: Uuid, partition: i32) -> Option<&PartitionRegistration> {
        self.by_key.get(&(id, partition))
    }

    pub(super) fn of_topic(
        &self,
        id: Uuid,
    ) -> impl Iterator<Item = (i32, &PartitionRegistration)> + '_ {
        self.by_key
            .range((id, i32::MIN)..=(id, i32::MAX))
            .map(|((_, p), r)| (*p, r))
    }

    pub(super) fn all(&self) -> impl Iterator<Item = ((Uuid, i32), &PartitionRegistration)> {
        self.by_key.iter().map(|(k, r)| (*k, r))
    }
}
