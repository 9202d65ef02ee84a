//! The controller: decides metadata changes (brokers, topics, partitions, configs, producer
//! ids) and records them. Everything here is pure: requests in, records out,
//! validated against the committed image; the driver passes `now` and entropy.
//!
//! - [`Controller`] (this file): topics, partitions, topic/broker/group configs, producer-id
//!   blocks;
//! - `placement`: where new replicas go; `election`: leaders, ISR and ELR changes;
//! - `brokers`: broker sessions (registration, heartbeats, fencing, controlled shutdown);
//! - `active`: the active controller's own state and timers as a core (the sessions of its
//!   term, the producer-id cursor, the periodic fencing and elections);
//! - `alter_partition`: a leader's ISR change requests;
//! - `acls`, `scram`: ACL bindings and SCRAM credentials (CreateAcls, DeleteAcls,
//!   AlterUserScramCredentials);
//! - `quotas`: client quotas (AlterClientQuotas, and DescribeClientQuotas' filter);
//! - `image`: the records and the state they replay into.
//!
//! The records are made durable by the metadata quorum (`broker::drivers::quorum`), of one
//! voter on a single node.

pub mod acls;
pub mod active;
pub mod alter_partition;
pub mod brokers;
pub mod election;
pub mod features;
pub mod image;
pub mod log_dirs;
pub mod placement;
pub mod quotas;
pub mod reassignment;
pub mod retire;
pub mod scram;

use std::collections::BTreeMap;
use std::fmt;

use uuid::Uuid;

use crate::config::{dynamic_broker, GroupConfigBounds, TopicConfig};
use election::ElectionConfig;
use image::DIR_UNASSIGNED;
pub use image::{
    BrokerEndpoint, BrokerRegistration, ConfigResource, MetadataImage, MetadataRecord,
    PartitionChange, PartitionRecord, PartitionRegistration, ScramRecord, TopicMeta, NO_LEADER,
};

/// How many producer ids one metadata record reserves.
pub const PRODUCER_ID_BLOCK: i64 = 1000;
/// Kafka's limit on topic name length.
pub const MAX_TOPIC_NAME: usize = 249;
/// The most partitions one change may add. Kafka's controller refuses a user operation of more
/// than 10 000 records (one per partition) the same way; without a bound, one CreateTopics
/// asking for 2^31 partitions would make the broker open directories until it runs out.
pub const MAX_NEW_PARTITIONS: i32 = 10_000;
/// The most partitions one periodic election pass changes (Kafka's
/// `maxElectionsPerImbalance`); the rest wait for the next pass.
pub const MAX_PERIODIC_ELECTIONS: usize = 1000;
const TOO_LARGE: &str = "Unable to perform excessively large batch operation.";

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ControllerError {
    TopicAlreadyExists(String),
    UnknownTopic(String),
    InvalidTopic(String),
    InvalidPartitions(String),
    InvalidReplicationFactor(String),
    InvalidConfig(String),
    TopicDeletionDisabled,
    /// The change would add more than [`MAX_NEW_PARTITIONS`] partitions.
    TooLarge,
    InvalidReplicaAssignment(String),
    InvalidRequest(String),
    UnknownTopicId(Uuid),
    StaleBrokerEpoch(String),
    DuplicateBrokerRegistration(String),
    /// The request is ahead of this controller's image.
    NotController(String),
    FencedLeaderEpoch(String),
    InvalidUpdateVersion(String),
    IneligibleReplica(String),
    PreferredLeaderNotAvailable(String),
    EligibleLeadersNotAvailable(String),
    /// A reassignment cancel with none in progress.
    NoReassignmentInProgress(String),
    /// UnregisterBroker of an id that is not registered.
    BrokerIdNotRegistered(String),
    /// The client's `controller_mutation_rate` is exceeded (KIP-599): refused for this long.
    ThrottlingQuotaExceeded(std::time::Duration),
}

impl fmt::Display for ControllerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ControllerError::TopicAlreadyExists(t) => write!(f, "topic '{t}' already exists"),
            ControllerError::UnknownTopic(t) => write!(f, "unknown topic '{t}'"),
            ControllerError::InvalidTopic(m)
            | ControllerError::InvalidPartitions(m)
            | ControllerError::InvalidReplicationFactor(m)
            | ControllerError::InvalidConfig(m)
            | ControllerError::InvalidReplicaAssignment(m)
            | ControllerError::InvalidRequest(m)
            | ControllerError::StaleBrokerEpoch(m)
            | ControllerError::DuplicateBrokerRegistration(m)
            | ControllerError::NotController(m)
            | ControllerError::FencedLeaderEpoch(m)
            | ControllerError::InvalidUpdateVersion(m)
            | ControllerError::IneligibleReplica(m)
            | ControllerError::PreferredLeaderNotAvailable(m)
            | ControllerError::EligibleLeadersNotAvailable(m)
            | ControllerError::NoReassignmentInProgress(m)
            | ControllerError::BrokerIdNotRegistered(m) => f.write_str(m),
            ControllerError::UnknownTopicId(id) => write!(f, "unknown topic id {id}"),
            ControllerError::TopicDeletionDisabled => {
                f.write_str("topic deletion is disabled (delete.topic.enable=false)")
            }
            ControllerError::TooLarge => f.write_str(TOO_LARGE),
            ControllerError::ThrottlingQuotaExceeded(_) => {
                f.write_str("The throttling quota has been exceeded.")
            }
        }
    }
}

/// Checks a topic name the way Kafka does: 1..=249 of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn validate_topic_name(name: &str) -> Result<(), ControllerError> {
    let invalid = |why: &str| {
        Err(ControllerError::InvalidTopic(format!(
            "topic name '{name}' {why}"
        )))
    };
    if name.is_empty() {
        return invalid("is empty");
    }
    if name == "." || name == ".." {
        return invalid("is not allowed");
    }
    if name.len() > MAX_TOPIC_NAME {
        return invalid("is longer than 249 characters");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        return invalid("contains characters other than ASCII alphanumerics, '.', '_' and '-'");
    }
    Ok(())
}

/// A topic creation request after defaults were resolved by the caller.
#[derive(Clone, Debug, Default)]
pub struct NewTopic {
    pub name: String,
    /// -1: the broker default.
    pub partitions: i32,
    /// -1: the broker default.
    pub replication_factor: i16,
    pub configs: BTreeMap<String, String>,
    /// A manual assignment (replicas per partition, from index 0); empty: placed by the
    /// controller. With one, `partitions` and `replication_factor` must be -1.
    pub assignments: Vec<Vec<i32>>,
}

/// Validates requests against the image and turns them into records.
#[derive(Clone)]
pub struct Controller {
    default_partitions: i32,
    default_replication_factor: i16,
    delete_topic_enable: bool,
    topic_defaults: TopicConfig,
    /// KIP-966 eligible leader replicas (on by default since Kafka 4.1).
    eligible_leader_replicas: bool,
    /// The broker default of `unclean.leader.election.enable`.
    unclean_leader_election: bool,
    /// `unclean.recovery.manager.enabled`, `unclean.recovery.timeout.ms` and the static broker
    /// default of `unclean.recovery.strategy` (KIP-966 part 2).
    recovery: RecoverySettings,
    /// What group configs are checked against (`group.consumer.min.session.timeout.ms`...).
    group_bounds: GroupConfigBounds,
    /// Simulator and tests: the bug planted here (`NoEligibleLeaderReplicas`).
    #[cfg(any(madsim, test))]
    planted: crate::config::planted::Planted,
}

/// The broker's KIP-966 part 2 settings, as the controller reads them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecoverySettings {
    /// `unclean.recovery.manager.enabled`.
    pub enabled: bool,
    /// `unclean.recovery.timeout.ms`.
    pub timeout_ms: i64,
    /// `unclean.recovery.strategy` in `server.properties`, if set (not empty).
    pub strategy: Option<election::RecoveryStrategy>,
}

impl Default for RecoverySettings {
    fn default() -> Self {
        RecoverySettings {
            enabled: false,
            timeout_ms: 300_000,
            strategy: None,
        }
    }
}

impl Controller {
    pub fn new(
        default_partitions: i32,
        default_replication_factor: i16,
        delete_topic_enable: bool,
        topic_defaults: TopicConfig,
    ) -> Controller {
        Controller {
            default_partitions,
            default_replication_factor,
            delete_topic_enable,
            topic_defaults,
            eligible_leader_replicas: true,
            unclean_leader_election: false,
            recovery: RecoverySettings::default(),
            group_bounds: GroupConfigBounds::default(),
            #[cfg(any(madsim, test))]
            planted: Default::default(),
        }
    }

    /// Simulator and tests: plants a bug (the broker copies `ServerConfig::planted_bug`).
    #[cfg(any(madsim, test))]
    pub fn set_planted(&mut self, planted: crate::config::planted::Planted) {
        self.planted = planted;
    }

    pub fn set_group_bounds(&mut self, bounds: GroupConfigBounds) {
        self.group_bounds = bounds;
    }

    pub fn group_bounds(&self) -> &GroupConfigBounds {
        &self.group_bounds
    }

    pub fn set_eligible_leader_replicas(&mut self, enabled: bool) {
        self.eligible_leader_replicas = enabled;
    }

    pub fn set_unclean_leader_election(&mut self, enabled: bool) {
        self.unclean_leader_election = enabled;
    }

    /// Planted `no-eligible-leader-replicas`: every topic elects as Kafka did before KIP-966.
    fn planted_no_elr(&self) -> bool {
        #[cfg(any(madsim, test))]
        if (self.planted).is(crate::config::PlantedBug::NoEligibleLeaderReplicas) {
            return true;
        }
        false
    }

    /// Planted `unclean-election-by-default`: without a topic or dynamic override, unclean
    /// election is on (Kafka's default before 0.11; the static setting is not read).
    fn planted_unclean_by_default(&self) -> bool {
        #[cfg(any(madsim, test))]
        if (self.planted).is(crate::config::PlantedBug::UncleanElectionByDefault) {
            return true;
        }
        false
    }

    pub fn set_recovery(&mut self, recovery: RecoverySettings) {
        self.recovery = recovery;
    }

    /// A topic's election settings: min ISR from its `min.insync.replicas` (capped at its
    /// replication factor), unclean election from its override, else the cluster-wide dynamic
    /// broker default, else the static one (KRaft's controller reads the cluster default, not a
    /// broker's own configs).
    pub fn election_config(&self, image: &MetadataImage, topic: &TopicMeta) -> ElectionConfig {
        let cluster = image.resource_configs(&ConfigResource::Broker(String::new()));
        let defaults = defaults_over(self.topic_defaults.clone(), cluster);
        let config = defaults.with_overrides(&topic.configs).unwrap_or(defaults);
        let key = "unclean.leader.election.enable";
        let unclean = topic
            .configs
            .get(key)
            .or_else(|| cluster.get(key))
            .map(|v| v.trim().eq_ignore_ascii_case("true"))
            .unwrap_or(self.unclean_leader_election || self.planted_unclean_by_default());
        // `unclean.recovery.strategy` the same way; unset everywhere, KIP-966's mapping.
        let key = "unclean.recovery.strategy";
        let strategy = topic
            .configs
            .get(key)
            .or_else(|| cluster.get(key))
            .and_then(|v| election::RecoveryStrategy::parse(v))
            .or(self.recovery.strategy)
            .unwrap_or_else(|| election::RecoveryStrategy::derived(unclean));
        ElectionConfig {
            elr: self.eligible_leader_replicas && !self.planted_no_elr(),
            min_isr: (config.min_insync_replicas.max(1) as usize)
                .min(topic.replication_factor.max(1) as usize),
            unclean,
            recovery: self.recovery.enabled.then_some(election::Recovery {
                strategy,
                timeout_ms: self.recovery.timeout_ms,
            }),
        }
    }

    /// The Topic record and one Partition record per partition. `entropy` picks the placement's
    /// start (the driver draws it from `io.rng`).
    pub fn create_topic(
        &self,
        image: &MetadataImage,
        topic: &NewTopic,
        id: Uuid,
        entropy: u64,
    ) -> Result<Vec<MetadataRecord>, ControllerError> {
        validate_topic_name(&topic.name)?;
        if image.topic(&topic.name).is_some() {
            return Err(ControllerError::TopicAlreadyExists(topic.name.clone()));
        }
        let assignments = if topic.assignments.is_empty() {
            let partitions = match topic.partitions {
                -1 => self.default_partitions,
                n if n > 0 => n,
                n => {
                    return Err(ControllerError::InvalidPartitions(format!(
                        "number of partitions must be at least 1, got {n}"
                    )))
                }
            };
            if partitions > MAX_NEW_PARTITIONS {
                return Err(ControllerError::TooLarge);
            }
            let replication_factor = match topic.replication_factor {
                -1 => self.default_replication_factor,
                n if n > 0 => n,
                n => {
                    return Err(ControllerError::InvalidReplicationFactor(format!(
                        "replication factor must be at least 1, got {n}"
                    )))
                }
            };
            placement::assign(
                &usable_brokers(image),
                0,
                partitions,
                replication_factor,
                entropy,
            )?
        } else {
            if topic.partitions != -1 || topic.replication_factor != -1 {
                return Err(ControllerError::InvalidRequest(
                    "Both numPartitions or replicationFactor and replicasAssignments were set. \
                     Both cannot be used at the same time."
                        .to_string(),
                ));
            }
            if topic.assignments.len() > MAX_NEW_PARTITIONS as usize {
                return Err(ControllerError::TooLarge);
            }
            check_manual(image, &topic.assignments, None, 0)?;
            topic.assignments.clone()
        };
        self.topic_defaults
            .with_overrides(&topic.configs)
            .map_err(|e| ControllerError::InvalidConfig(e.to_string()))?;
        let mut records = vec![MetadataRecord::topic(
            &topic.name,
            id,
            topic.configs.clone(),
        )];
        records.extend(partition_records(image, id, 0, assignments));
        Ok(records)
    }

    pub fn delete_topic(
        &self,
        image: &MetadataImage,
        name: &str,
    ) -> Result<MetadataRecord, ControllerError> {
        if !self.delete_topic_enable {
            return Err(ControllerError::TopicDeletionDisabled);
        }
        let topic = image
            .topic(name)
            .ok_or_else(|| ControllerError::UnknownTopic(name.to_string()))?;
        Ok(MetadataRecord::RemoveTopic {
            name: name.to_string(),
            id: topic.id,
        })
    }

    /// Partition records growing `name` to `count` partitions, placed automatically (with the
    /// replication factor of its partition 0) or by `assignments` (one per new partition).
    pub fn create_partitions(
        &self,
        image: &MetadataImage,
        name: &str,
        count: i32,
        assignments: Option<&[Vec<i32>]>,
        entropy: u64,
    ) -> Result<Vec<MetadataRecord>, ControllerError> {
        let topic = image
            .topic(name)
            .ok_or_else(|| ControllerError::UnknownTopic(name.to_string()))?;
        if count <= topic.partitions {
            return Err(ControllerError::InvalidPartitions(format!(
                "topic '{name}' has {} partitions; the new count {count} must be larger",
                topic.partitions
            )));
        }
        if count - topic.partitions > MAX_NEW_PARTITIONS {
            return Err(ControllerError::TooLarge);
        }
        let added = count - topic.partitions;
        let rf = topic.replication_factor.max(1);
        let assignments = match assignments {
            None => {
                placement::assign(&usable_brokers(image), topic.partitions, added, rf, entropy)?
            }
            Some(a) => {
                if a.len() != added as usize {
                    return Err(ControllerError::InvalidReplicaAssignment(format!(
                        "Attempted to add {added} additional partition(s), but only {} assignment(s) were specified.",
                        a.len()
                    )));
                }
                check_manual(image, a, Some(rf as usize), topic.partitions)?;
                a.to_vec()
            }
        };
        Ok(partition_records(
            image,
            topic.id,
            topic.partitions,
            assignments,
        ))
    }

    /// Partition records for partitions a log from before partition records left
    /// unregistered: all on `node`, the single node that wrote that log.
    pub fn register_legacy_partitions(
        &self,
        image: &MetadataImage,
        node: i32,
    ) -> Vec<MetadataRecord> {
        image
            .unregistered_legacy_partitions()
            .into_iter()
            .map(|(topic_id, partition)| {
                MetadataRecord::Partition(PartitionRecord {
                    topic_id,
                    partition,
                    replicas: vec![node],
                    isr: vec![node],
                    elr: vec![],
                    last_known_elr: vec![],
                    leader: node,
                    leader_epoch: 0,
                    partition_epoch: 0,
                    leader_recovering: false,
                    directories: Vec::new(),
                })
            })
            .collect()
    }

    /// The active controller's periodic elections: leaderless partitions again (unclean
    /// election where a topic allows it, now that replicas may have come back), and with
    /// `auto_rebalance` (`auto.leader.rebalance.enable`) leadership back to each preferred
    /// replica that is in the ISR and active.
    pub fn periodic_elections(
        &self,
        image: &MetadataImage,
        auto_rebalance: bool,
    ) -> Vec<MetadataRecord> {
        let config = |t: &TopicMeta| self.election_config(image, t);
        let mut changes = election::elect_leaderless(image, None, &config);
        if auto_rebalance {
            let imbalanced: Vec<(Uuid, i32)> = image
                .partitions()
                .filter(|(_, p)| p.leader != NO_LEADER && p.leader != p.replicas[0])
                .map(|(k, _)| k)
                .collect();
            changes.extend(election::elect_preferred(image, &imbalanced, &config));
        }
        changes
            .into_iter()
            .take(MAX_PERIODIC_ELECTIONS)
            .map(MetadataRecord::PartitionChange)
            .collect()
    }

    /// Config changes for a topic; `None` removes an override (back to the broker default).
    pub fn alter_topic_config(
        &self,
        image: &MetadataImage,
        name: &str,
        changes: BTreeMap<String, Option<String>>,
    ) -> Result<MetadataRecord, ControllerError> {
        let topic = image
            .topic(name)
            .ok_or_else(|| ControllerError::UnknownTopic(name.to_string()))?;
        let mut merged = topic.configs.clone();
        for (key, value) in &changes {
            match value {
                Some(v) => merged.insert(key.clone(), v.clone()),
                None => merged.remove(key),
            };
        }
        self.topic_defaults
            .with_overrides(&merged)
            .map_err(|e| ControllerError::InvalidConfig(e.to_string()))?;
        Ok(MetadataRecord::TopicConfig {
            name: name.to_string(),
            changes,
        })
    }

    /// Dynamic config changes of a broker (`name` its id) or of the cluster default (`name`
    /// empty), validated as Kafka's `ConfigAdminManager` validates them: the id must be a
    /// registered broker, and the resulting configs must pass [`dynamic_broker::validate`].
    /// Every refusal is INVALID_REQUEST, as in Kafka.
    pub fn alter_broker_config(
        &self,
        image: &MetadataImage,
        name: &str,
        changes: BTreeMap<String, Option<String>>,
    ) -> Result<MetadataRecord, ControllerError> {
        if !name.is_empty() {
            let id: i32 = name.parse().map_err(|_| {
                ControllerError::InvalidRequest(format!(
                    "Node id must be an integer, but it is: {name}"
                ))
            })?;
            if id < 0 {
                return Err(ControllerError::InvalidRequest(
                    "Invalid negative broker ID.".into(),
                ));
            }
            if image.broker(id).is_none() {
                return Err(ControllerError::InvalidRequest(format!(
                    "Unexpected broker id {name}: no such broker is registered"
                )));
            }
        }
        let resource = ConfigResource::Broker(name.to_string());
        let merged = merge(image.resource_configs(&resource), &changes);
        dynamic_broker::validate(&merged, !name.is_empty())
            .map_err(ControllerError::InvalidRequest)?;
        Ok(MetadataRecord::ResourceConfig { resource, changes })
    }

    /// Config changes of a group (which need not exist), validated as Kafka's `GroupConfig`
    /// validates them against the broker's bounds (INVALID_CONFIG); an empty name is
    /// INVALID_REQUEST ("Default group resources are not allowed.").
    pub fn alter_group_config(
        &self,
        image: &MetadataImage,
        name: &str,
        changes: BTreeMap<String, Option<String>>,
    ) -> Result<MetadataRecord, ControllerError> {
        if name.is_empty() {
            return Err(ControllerError::InvalidRequest(
                "Default group resources are not allowed.".into(),
            ));
        }
        let resource = ConfigResource::Group(name.to_string());
        let merged = merge(image.resource_configs(&resource), &changes);
        self.group_bounds
            .validate(&merged)
            .map_err(ControllerError::InvalidConfig)?;
        Ok(MetadataRecord::ResourceConfig { resource, changes })
    }

    /// The topic defaults on broker `node`: the static `log.*` keys, then the cluster-wide
    /// dynamic ones, then `node`'s own (Kafka's precedence).
    pub fn topic_defaults_on(&self, image: &MetadataImage, node: i32) -> TopicConfig {
        let cluster = image.resource_configs(&ConfigResource::Broker(String::new()));
        let own = image.resource_configs(&ConfigResource::Broker(node.to_string()));
        defaults_over(defaults_over(self.topic_defaults.clone(), cluster), own)
    }

    /// A topic's effective config on broker `node`: its overrides over [`Self::topic_defaults_on`].
    pub fn topic_config_on(
        &self,
        image: &MetadataImage,
        node: i32,
        topic: &TopicMeta,
    ) -> TopicConfig {
        let defaults = self.topic_defaults_on(image, node);
        defaults.with_overrides(&topic.configs).unwrap_or(defaults)
    }

    /// A record reserving the next block of producer ids, if `next_id` is past the reserved ones.
    pub fn reserve_producer_ids(
        &self,
        image: &MetadataImage,
        next_id: i64,
    ) -> Option<MetadataRecord> {
        (next_id >= image.producer_ids_reserved()).then(|| MetadataRecord::ProducerIds {
            next: next_id.max(image.producer_ids_reserved()) + PRODUCER_ID_BLOCK,
        })
    }

    /// The effective config of a topic: broker defaults with its overrides.
    pub fn topic_config(&self, topic: &TopicMeta) -> TopicConfig {
        // Overrides were validated when written; fall back to defaults if that ever fails.
        self.topic_defaults
            .with_overrides(&topic.configs)
            .unwrap_or_else(|_| self.topic_defaults.clone())
    }

    pub fn topic_defaults(&self) -> &TopicConfig {
        &self.topic_defaults
    }
}

/// `current` with `changes` applied (`None` removes a key).
fn merge(
    current: &BTreeMap<String, String>,
    changes: &BTreeMap<String, Option<String>>,
) -> BTreeMap<String, String> {
    let mut merged = current.clone();
    for (key, value) in changes {
        match value {
            Some(v) => merged.insert(key.clone(), v.clone()),
            None => merged.remove(key),
        };
    }
    merged
}

/// Brokers that may take new replicas: unfenced, not shutting down, and not cordoned
/// (KIP-1066: at least one online directory not cordoned).
fn usable_brokers(image: &MetadataImage) -> Vec<i32> {
    image
        .brokers()
        .filter(|b| b.is_active() && !b.is_cordoned())
        .map(|b| b.id)
        .collect()
}

/// The directory a new replica on `broker` is assigned at creation (Kafka's
/// `ClusterDescriber.defaultDir`): its one placeable directory when it has exactly one, else
/// unassigned until the broker reports where it placed the replica (AssignReplicasToDirs).
fn default_dir(image: &MetadataImage, broker: i32) -> Uuid {
    let Some(b) = image.broker(broker) else {
        return DIR_UNASSIGNED;
    };
    let mut dirs = b.placeable_log_dirs();
    match (dirs.next(), dirs.next(), b.log_dirs.len()) {
        (Some(only), None, 1) => only,
        _ => DIR_UNASSIGNED,
    }
}

fn check_manual(
    image: &MetadataImage,
    assignments: &[Vec<i32>],
    replication_factor: Option<usize>,
    first: i32,
) -> Result<(), ControllerError> {
    placement::check_manual(
        assignments,
        replication_factor,
        |b| image.broker(b).is_some(),
        |b| image.is_active_broker(b),
        first,
    )
}

/// A new partition's directories (KIP-858): each broker's only directory where it has
/// exactly one, so that broker's AssignReplicasToDirs is a no-op; none at all (an empty list)
/// when no replica's directory is known yet.
fn directories(image: &MetadataImage, replicas: &[i32]) -> Vec<Uuid> {
    let dirs: Vec<Uuid> = replicas.iter().map(|b| default_dir(image, *b)).collect();
    if dirs.iter().all(|d| *d == DIR_UNASSIGNED) {
        Vec::new()
    } else {
        dirs
    }
}

/// New partitions: the ISR is the active replicas, the first of them leads (Kafka's choice for
/// manual assignments too, where some replicas may be down).
fn partition_records(
    image: &MetadataImage,
    topic_id: Uuid,
    first: i32,
    assignments: Vec<Vec<i32>>,
) -> Vec<MetadataRecord> {
    assignments
        .into_iter()
        .enumerate()
        .map(|(i, replicas)| {
            let isr: Vec<i32> = replicas
                .iter()
                .copied()
                .filter(|b| image.is_active_broker(*b))
                .collect();
            let directories = directories(image, &replicas);
            MetadataRecord::Partition(PartitionRecord {
                topic_id,
                partition: first + i as i32,
                leader: isr.first().copied().unwrap_or(NO_LEADER),
                replicas,
                isr,
                elr: vec![],
                last_known_elr: vec![],
                leader_epoch: 0,
                partition_epoch: 0,
                leader_recovering: false,
                directories,
            })
        })
        .collect()
}

/// `base` with a broker resource's dynamic `log.*` configs on top. Validated when written; a
/// failure leaves the level out rather than the broker down. No configs at that level (the
/// usual case) change nothing, and then nothing is parsed: a topic's config is looked up on
/// every partition opened and every election.
fn defaults_over(base: TopicConfig, configs: &BTreeMap<String, String>) -> TopicConfig {
    if configs.is_empty() {
        return base;
    }
    dynamic_broker::topic_defaults_with(&base, configs).unwrap_or(base)
}

#[cfg(test)]
mod tests;
