//! The metadata records: KRaft's record kinds, one JSON value per record in the metadata log.
//! Records are deltas the controller decided; [`super::MetadataImage::apply`] replays them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::quotas::{QuotaEntity, QuotaValue};
use super::scram::ScramMechanism;
use crate::acl::AclBinding;

/// No leader (Kafka's `-1`).
pub const NO_LEADER: i32 = -1;

/// One listener a broker registered: what clients on that listener are told to connect to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerEndpoint {
    /// Upper-cased listener name, e.g. `PLAINTEXT`.
    pub name: String,
    pub host: String,
    pub port: u16,
}

/// A partition as created (Kafka's PartitionRecord): the whole registration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionRecord {
    pub topic_id: Uuid,
    pub partition: i32,
    /// The assignment, preferred leader first.
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    /// Eligible leader replicas (KIP-966).
    #[serde(default)]
    pub elr: Vec<i32>,
    /// The last leader when the partition became leaderless with an empty ISR (KIP-966).
    #[serde(default)]
    pub last_known_elr: Vec<i32>,
    /// [`NO_LEADER`] when there is none.
    pub leader: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    /// KIP-704: the leader was elected uncleanly and has not yet reported RECOVERED.
    #[serde(default)]
    pub leader_recovering: bool,
    /// KIP-858: each replica's log directory, parallel to `replicas` ([`DIR_UNASSIGNED`]
    /// until its broker reports where it placed it). Empty in records written before it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub directories: Vec<Uuid>,
}

/// KIP-858's reserved directory ids (Kafka's `DirectoryId`): a replica not placed yet, and one
/// whose directory is offline or unknown.
pub const DIR_UNASSIGNED: Uuid = Uuid::from_u64_pair(0, 0);
pub const DIR_LOST: Uuid = Uuid::from_u64_pair(0, 1);

/// A change to one partition (Kafka's PartitionChangeRecord). `None` fields keep their value.
/// On replay the partition epoch always grows by one and the leader epoch grows by one iff
/// `leader` is set (even to the same leader: that is how a leader-epoch bump is asked for).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionChange {
    pub topic_id: Uuid,
    pub partition: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<Vec<i32>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isr: Option<Vec<i32>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elr: Option<Vec<i32>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_known_elr: Option<Vec<i32>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_recovering: Option<bool>,
    /// A reassignment's adding replicas (KIP-455); `Some(vec![])` clears them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adding_replicas: Option<Vec<i32>>,
    /// A reassignment's removing replicas; `Some(vec![])` clears them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removing_replicas: Option<Vec<i32>>,
    /// KIP-858: the replicas' directories, parallel to the (new) replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directories: Option<Vec<Uuid>>,
}

impl PartitionChange {
    pub fn new(topic_id: Uuid, partition: i32) -> PartitionChange {
        PartitionChange {
            topic_id,
            partition,
            ..PartitionChange::default()
        }
    }

    /// Whether applying it would change nothing but the partition epoch.
    pub fn is_empty(&self) -> bool {
        self.replicas.is_none()
            && self.isr.is_none()
            && self.elr.is_none()
            && self.last_known_elr.is_none()
            && self.leader.is_none()
            && self.leader_recovering.is_none()
            && self.adding_replicas.is_none()
            && self.removing_replicas.is_none()
            && self.directories.is_none()
    }
}

/// A config resource other than a topic (Kafka's ConfigRecord resource type and name).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "type", content = "name", rename_all = "snake_case")]
pub enum ConfigResource {
    /// Dynamic broker configs: a broker id, or empty for the cluster-wide default.
    Broker(String),
    /// KIP-848 group configs, by group id (the group need not exist).
    Group(String),
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum MetadataRecord {
    /// A broker's registration (KIP-631). Its epoch is this record's offset, so it grows
    /// strictly across incarnations. A registration replaces any earlier one of the same id.
    RegisterBroker {
        id: i32,
        incarnation: Uuid,
        listeners: Vec<BrokerEndpoint>,
        #[serde(default)]
        rack: Option<String>,
        /// Registrations start fenced; a heartbeat unfences.
        fenced: bool,
        /// KIP-858: the ids of its online log directories (BrokerRegistration `LogDirs`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        log_dirs: Vec<Uuid>,
    },
    /// Kafka's BrokerRegistrationChangeRecord with only `LogDirs` set: the broker's online log
    /// directories after some failed (KIP-858).
    BrokerLogDirs {
        id: i32,
        epoch: i64,
        log_dirs: Vec<Uuid>,
    },
    /// Kafka's BrokerRegistrationChangeRecord with only `CordonedLogDirs` set (KIP-1066): the
    /// broker's directories that take no new partitions, as its heartbeat last reported them.
    BrokerCordonedLogDirs {
        id: i32,
        epoch: i64,
        cordoned_log_dirs: Vec<Uuid>,
    },
    /// Kafka's BrokerRegistrationChangeRecord: fence, unfence, controlled shutdown.
    BrokerChange {
        id: i32,
        epoch: i64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fenced: Option<bool>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        in_controlled_shutdown: Option<bool>,
    },
    UnregisterBroker {
        id: i32,
        epoch: i64,
    },
    /// A topic. Its partitions follow as [`MetadataRecord::Partition`] records, in index order.
    Topic {
        name: String,
        id: Uuid,
        configs: BTreeMap<String, String>,
        /// Only in metadata logs written before partitions had their own records: the count,
        /// all replicas on the single node. The broker migrates them at start.
        #[serde(
            default,
            rename = "partitions",
            skip_serializing_if = "Option::is_none"
        )]
        legacy_partitions: Option<i32>,
        #[serde(
            default,
            rename = "replication_factor",
            skip_serializing_if = "Option::is_none"
        )]
        legacy_replication_factor: Option<i16>,
    },
    Partition(PartitionRecord),
    PartitionChange(PartitionChange),
    RemoveTopic {
        name: String,
        id: Uuid,
    },
    /// Only in logs from before [`MetadataRecord::Partition`]: a topic's new partition count.
    #[serde(rename = "partitions")]
    LegacyPartitions {
        name: String,
        count: i32,
    },
    /// Sets (`Some`) or removes (`None`) topic-level config overrides.
    TopicConfig {
        name: String,
        changes: BTreeMap<String, Option<String>>,
    },
    /// Sets (`Some`) or removes (`None`) configs of a broker or group resource (Kafka writes one
    /// ConfigRecord per key; one record carries a request's whole change here, so it applies
    /// all or nothing).
    ResourceConfig {
        resource: ConfigResource,
        changes: BTreeMap<String, Option<String>>,
    },
    /// Producer ids below `next` may have been handed out; ids are never reused.
    ProducerIds {
        next: i64,
    },
    /// Kafka's AccessControlEntryRecord: one ACL binding, under an id never used before.
    AccessControlEntry {
        id: Uuid,
        acl: AclBinding,
    },
    /// Kafka's RemoveAccessControlEntryRecord.
    RemoveAccessControlEntry {
        id: Uuid,
    },
    /// Kafka's UserScramCredentialRecord (KIP-554), but with the salted password the client
    /// computed where Kafka keeps the stored and server keys derived from it (Weir has no
    /// SHA-2 code and no SASL listener to use them; they follow from this record).
    UserScramCredential(ScramRecord),
    /// Kafka's RemoveUserScramCredentialRecord.
    RemoveUserScramCredential {
        name: String,
        mechanism: ScramMechanism,
    },
    /// Kafka's ClientQuotaRecord (KIP-546): sets one quota key of one entity, or removes it
    /// (`value` absent).
    ClientQuota {
        entity: QuotaEntity,
        key: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        value: Option<QuotaValue>,
    },
    /// Kafka's FeatureLevelRecord: a finalized feature's level (0 removes it, as in Kafka).
    FeatureLevel {
        name: String,
        level: i16,
    },
    /// Kafka's NoOpRecord (KIP-835): changes nothing. The active controller commits one to
    /// confirm it still leads before deciding against its image after a quiet spell
    /// (`Broker::confirm_leadership`).
    NoOp,
}

/// One user's credential for one mechanism.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramRecord {
    pub name: String,
    pub mechanism: ScramMechanism,
    pub salt: Vec<u8>,
    pub salted_password: Vec<u8>,
    pub iterations: i32,
}

impl MetadataRecord {
    /// A topic record as the controller writes it now (no legacy fields).
    pub fn topic(name: &str, id: Uuid, configs: BTreeMap<String, String>) -> MetadataRecord {
        MetadataRecord::Topic {
            name: name.to_string(),
            id,
            configs,
            legacy_partitions: None,
            legacy_replication_factor: None,
        }
    }
}
