//! The registered brokers of the image: who exists, how to reach them, and whether they may
//! lead or join ISRs (fenced, in controlled shutdown).

use std::collections::BTreeMap;

use uuid::Uuid;

use super::records::BrokerEndpoint;

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BrokerRegistration {
    pub id: i32,
    pub incarnation: Uuid,
    /// The offset of the RegisterBroker record.
    pub epoch: i64,
    pub listeners: Vec<BrokerEndpoint>,
    pub rack: Option<String>,
    pub fenced: bool,
    pub in_controlled_shutdown: bool,
    /// KIP-858: its online log directories (empty: it registered none, as before JBOD).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub log_dirs: Vec<Uuid>,
    /// KIP-1066: those of its directories that take no new partitions (a new registration
    /// starts with none; the broker's heartbeats report them once it has caught up).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cordoned_log_dirs: Vec<Uuid>,
}

impl BrokerRegistration {
    /// May lead a partition or join an ISR (KIP-841: unfenced and not shutting down).
    pub fn is_active(&self) -> bool {
        !self.fenced && !self.in_controlled_shutdown
    }

    /// Takes no new partitions (KIP-1066): every online directory is cordoned. A broker that
    /// registered no directories (before JBOD) cannot be cordoned.
    pub fn is_cordoned(&self) -> bool {
        !self.log_dirs.is_empty()
            && self
                .log_dirs
                .iter()
                .all(|d| self.cordoned_log_dirs.contains(d))
    }

    /// Its online directories that may take a new partition (not cordoned).
    pub fn placeable_log_dirs(&self) -> impl Iterator<Item = Uuid> + '_ {
        self.log_dirs
            .iter()
            .copied()
            .filter(|d| !self.cordoned_log_dirs.contains(d))
    }

    /// The endpoint for `listener` (upper-cased name), if the broker registered one.
    pub fn endpoint(&self, listener: &str) -> Option<&BrokerEndpoint> {
        self.listeners
            .iter()
            .find(|e| e.name.eq_ignore_ascii_case(listener))
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Brokers {
    by_id: BTreeMap<i32, BrokerRegistration>,
}

impl Brokers {
    // One argument per field of the RegisterBroker record it replays.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn register(
        &mut self,
        offset: i64,
        id: i32,
        incarnation: Uuid,
        listeners: &[BrokerEndpoint],
        rack: &Option<String>,
        fenced: bool,
        log_dirs: &[Uuid],
    ) {
        assert!(id >= 0, "broker id {id} is negative");
        if let Some(old) = self.by_id.get(&id) {
            assert!(
                offset > old.epoch,
                "broker {id}'s epoch goes back: {offset} after {}",
                old.epoch
            );
        }
        self.by_id.insert(
            id,
            BrokerRegistration {
                id,
                incarnation,
                epoch: offset,
                listeners: listeners.to_vec(),
                rack: rack.clone(),
                fenced,
                in_controlled_shutdown: false,
                log_dirs: log_dirs.to_vec(),
                cordoned_log_dirs: Vec::new(),
            },
        );
    }

    /// The broker's cordoned directories (KIP-1066).
    pub(super) fn change_cordoned_log_dirs(&mut self, id: i32, epoch: i64, cordoned: &[Uuid]) {
        let broker = self
            .by_id
            .get_mut(&id)
            .unwrap_or_else(|| panic!("cordoned log dirs of unregistered broker {id}"));
        assert_eq!(
            broker.epoch, epoch,
            "cordoned log dirs of broker {id} at a stale epoch"
        );
        broker.cordoned_log_dirs = cordoned.to_vec();
    }

    pub(super) fn change(
        &mut self,
        id: i32,
        epoch: i64,
        fenced: Option<bool>,
        in_controlled_shutdown: Option<bool>,
    ) {
        let broker = self
            .by_id
            .get_mut(&id)
            .unwrap_or_else(|| panic!("change of unregistered broker {id}"));
        assert_eq!(
            broker.epoch, epoch,
            "change of broker {id} at a stale epoch"
        );
        if let Some(f) = fenced {
            broker.fenced = f;
        }
        if let Some(s) = in_controlled_shutdown {
            broker.in_controlled_shutdown = s;
        }
    }

    /// The broker's online directories after a failure (KIP-858).
    pub(super) fn change_log_dirs(&mut self, id: i32, epoch: i64, log_dirs: &[Uuid]) {
        let broker = self
            .by_id
            .get_mut(&id)
            .unwrap_or_else(|| panic!("log dirs of unregistered broker {id}"));
        assert_eq!(
            broker.epoch, epoch,
            "log dirs of broker {id} at a stale epoch"
        );
        broker.log_dirs = log_dirs.to_vec();
    }

    pub(super) fn unregister(&mut self, id: i32, epoch: i64) {
        let removed = self.by_id.remove(&id);
        assert!(
            removed.is_some_and(|b| b.epoch == epoch),
            "unregistered unknown broker {id} epoch {epoch}"
        );
    }

    pub(super) fn get(&self, id: i32) -> Option<&BrokerRegistration> {
        self.by_id.get(&id)
    }

    pub(super) fn all(&self) -> impl Iterator<Item = &BrokerRegistration> {
        self.by_id.values()
    }
}
