//! The cluster metadata as a replayable state machine: records in, image out. Every change to
//! brokers, topics, partitions, topic, broker and group configs, producer-id blocks, ACLs,
//! SCRAM credentials and client quotas is a [`MetadataRecord`];
//! the image is whatever applying them in order gives (KRaft's shape: the records travel
//! through the metadata quorum's log unchanged, and every node replays the same ones).
//!
//! `brokers`, `topics` and `partitions` hold one table each; this file applies records to
//! them and answers the queries that span them.

mod brokers;
mod partitions;
pub mod quotas;
mod records;
pub mod scram;
mod snapshot;
mod topics;

use std::collections::BTreeMap;

use uuid::Uuid;

pub use brokers::BrokerRegistration;
pub use partitions::PartitionRegistration;
pub use records::{
    BrokerEndpoint, ConfigResource, MetadataRecord, PartitionChange, PartitionRecord, ScramRecord,
    DIR_LOST, DIR_UNASSIGNED, NO_LEADER,
};
pub use topics::TopicMeta;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MetadataImage {
    brokers: brokers::Brokers,
    topics: topics::Topics,
    partitions: partitions::Partitions,
    /// Dynamic broker and group configs; a resource without any has no entry.
    configs: BTreeMap<ConfigResource, BTreeMap<String, String>>,
    /// End of the producer-id block reserved so far.
    producer_ids_reserved: i64,
    /// The ACL bindings (what the authorizer decides with).
    acls: crate::acl::AclTable,
    /// SCRAM credentials by user and mechanism.
    scram: scram::ScramCredentials,
    /// Client quotas by entity and key (KIP-546).
    quotas: quotas::ClientQuotas,
    /// Finalized feature levels by name (a feature at level 0 has no entry).
    features: BTreeMap<String, i16>,
    /// The offset after the last applied record.
    applied: i64,
}

impl MetadataImage {
    /// Applies the record at metadata-log `offset`. Records are validated by the controller
    /// before they are written, so one that does not fit the image is a bug (a panic, so that
    /// no node carries on with an image the others do not have).
    pub fn apply(&mut self, offset: i64, record: &MetadataRecord) {
        assert!(
            offset >= self.applied,
            "metadata offset {offset} applied after {}",
            self.applied
        );
        match record {
            MetadataRecord::RegisterBroker {
                id,
                incarnation,
                listeners,
                rack,
                fenced,
                log_dirs,
            } => self.brokers.register(
                offset,
                *id,
                *incarnation,
                listeners,
                rack,
                *fenced,
                log_dirs,
            ),
            MetadataRecord::BrokerLogDirs {
                id,
                epoch,
                log_dirs,
            } => self.brokers.change_log_dirs(*id, *epoch, log_dirs),
            MetadataRecord::BrokerCordonedLogDirs {
                id,
                epoch,
                cordoned_log_dirs,
            } => self
                .brokers
                .change_cordoned_log_dirs(*id, *epoch, cordoned_log_dirs),
            MetadataRecord::BrokerChange {
                id,
                epoch,
                fenced,
                in_controlled_shutdown,
            } => self
                .brokers
                .change(*id, *epoch, *fenced, *in_controlled_shutdown),
            MetadataRecord::UnregisterBroker { id, epoch } => self.brokers.unregister(*id, *epoch),
            MetadataRecord::Topic {
                name,
                id,
                configs,
                legacy_partitions,
                legacy_replication_factor,
            } => {
                let legacy = legacy_partitions.unwrap_or(0);
                assert!(legacy >= 0);
                self.topics.create(TopicMeta {
                    name: name.clone(),
                    id: *id,
                    partitions: 0,
                    replication_factor: legacy_replication_factor.unwrap_or(0),
                    configs: configs.clone(),
                    legacy_partitions: legacy,
                });
            }
            MetadataRecord::Partition(p) => {
                let topic = self
                    .topics
                    .by_id_mut(p.topic_id)
                    .unwrap_or_else(|| panic!("partition of unknown topic id {}", p.topic_id));
                if p.partition == topic.partitions {
                    topic.partitions += 1;
                    if p.partition == 0 {
                        topic.replication_factor = p.replicas.len() as i16;
                    }
                } else {
                    assert!(
                        (0..topic.partitions).contains(&p.partition),
                        "partition {} of {} out of order (it has {})",
                        p.partition,
                        topic.name,
                        topic.partitions
                    );
                }
                self.partitions.create(p);
            }
            MetadataRecord::PartitionChange(change) => self.partitions.change(change),
            MetadataRecord::RemoveTopic { name, id } => {
                self.topics.remove(name, *id);
                self.partitions.remove_topic(*id);
            }
            MetadataRecord::LegacyPartitions { name, count } => {
                let topic = self
                    .topics
                    .get_mut(name)
                    .expect("partitions of a known topic");
                assert!(
                    *count > topic.legacy_partitions.max(topic.partitions),
                    "partition counts only grow"
                );
                topic.legacy_partitions = *count;
            }
            MetadataRecord::TopicConfig { name, changes } => {
                let topic = self.topics.get_mut(name).expect("config of a known topic");
                for (key, value) in changes {
                    match value {
                        Some(v) => topic.configs.insert(key.clone(), v.clone()),
                        None => topic.configs.remove(key),
                    };
                }
            }
            MetadataRecord::ResourceConfig { resource, changes } => {
                let configs = self.configs.entry(resource.clone()).or_default();
                for (key, value) in changes {
                    match value {
                        Some(v) => configs.insert(key.clone(), v.clone()),
                        None => configs.remove(key),
                    };
                }
                if configs.is_empty() {
                    self.configs.remove(resource);
                }
            }
            MetadataRecord::ProducerIds { next } => {
                assert!(
                    *next > self.producer_ids_reserved,
                    "producer ids never go back"
                );
                self.producer_ids_reserved = *next;
            }
            MetadataRecord::AccessControlEntry { id, acl } => self.acls.insert(*id, acl.clone()),
            MetadataRecord::RemoveAccessControlEntry { id } => self.acls.remove(*id),
            MetadataRecord::UserScramCredential(record) => self.scram.upsert(record),
            MetadataRecord::RemoveUserScramCredential { name, mechanism } => {
                self.scram.remove(name, *mechanism)
            }
            MetadataRecord::ClientQuota { entity, key, value } => {
                self.quotas.set(entity, key, value.map(|v| v.0))
            }
            MetadataRecord::FeatureLevel { name, level } => {
                assert!(*level >= 0, "feature {name} at level {level}");
                if *level == 0 {
                    self.features.remove(name);
                } else {
                    self.features.insert(name.clone(), *level);
                }
            }
            MetadataRecord::NoOp => {}
        }
        self.applied = offset + 1;
    }

    pub fn topics(&self) -> impl Iterator<Item = &TopicMeta> {
        self.topics.all()
    }

    pub fn topic(&self, name: &str) -> Option<&TopicMeta> {
        self.topics.get(name)
    }

    pub fn topic_by_id(&self, id: Uuid) -> Option<&TopicMeta> {
        self.topics.by_id(id)
    }

    pub fn partition(&self, topic_id: Uuid, partition: i32) -> Option<&PartitionRegistration> {
        self.partitions.get(topic_id, partition)
    }

    /// A topic's registered partitions, in index order.
    pub fn topic_partitions(
        &self,
        topic_id: Uuid,
    ) -> impl Iterator<Item = (i32, &PartitionRegistration)> + '_ {
        self.partitions.of_topic(topic_id)
    }

    /// Every partition registration, by (topic id, partition).
    pub fn partitions(&self) -> impl Iterator<Item = ((Uuid, i32), &PartitionRegistration)> {
        self.partitions.all()
    }

    /// Partitions whose leader is `broker`.
    pub fn partitions_led_by(
        &self,
        broker: i32,
    ) -> impl Iterator<Item = ((Uuid, i32), &PartitionRegistration)> {
        self.partitions
            .all()
            .filter(move |(_, p)| p.leader == broker)
    }

    /// Partitions `broker` is a replica of (it hosts their data).
    pub fn partitions_hosted_on(
        &self,
        broker: i32,
    ) -> impl Iterator<Item = ((Uuid, i32), &PartitionRegistration)> {
        self.partitions
            .all()
            .filter(move |(_, p)| p.replicas.contains(&broker))
    }

    /// Legacy partitions (from a log written before partition records) not yet registered:
    /// (topic id, partition) in order. A single node registers them on itself at start.
    pub fn unregistered_legacy_partitions(&self) -> Vec<(Uuid, i32)> {
        self.topics
            .all()
            .flat_map(|t| (t.partitions..t.legacy_partitions).map(move |p| (t.id, p)))
            .collect()
    }

    pub fn broker(&self, id: i32) -> Option<&BrokerRegistration> {
        self.brokers.get(id)
    }

    /// Every registered broker, fenced or not, by id.
    pub fn brokers(&self) -> impl Iterator<Item = &BrokerRegistration> {
        self.brokers.all()
    }

    /// Brokers clients may use: registered and unfenced (those in controlled shutdown still
    /// serve until they stop), by id.
    pub fn live_brokers(&self) -> impl Iterator<Item = &BrokerRegistration> {
        self.brokers.all().filter(|b| !b.fenced)
    }

    /// Whether `id` may lead or join an ISR: registered, unfenced, not shutting down.
    pub fn is_active_broker(&self, id: i32) -> bool {
        self.brokers.get(id).is_some_and(|b| b.is_active())
    }

    /// The stored configs of a broker or group resource (empty when it has none).
    pub fn resource_configs(&self, resource: &ConfigResource) -> &BTreeMap<String, String> {
        static NONE: BTreeMap<String, String> = BTreeMap::new();
        self.configs.get(resource).unwrap_or(&NONE)
    }

    /// Every resource with stored configs, in order.
    pub fn all_resource_configs(
        &self,
    ) -> impl Iterator<Item = (&ConfigResource, &BTreeMap<String, String>)> {
        self.configs.iter()
    }

    pub fn acls(&self) -> &crate::acl::AclTable {
        &self.acls
    }

    pub fn scram(&self) -> &scram::ScramCredentials {
        &self.scram
    }

    pub fn quotas(&self) -> &quotas::ClientQuotas {
        &self.quotas
    }

    /// The finalized level of feature `name` (0 when none is finalized).
    pub fn feature_level(&self, name: &str) -> i16 {
        self.features.get(name).copied().unwrap_or(0)
    }

    /// Every finalized feature (level above 0), by name.
    pub fn features(&self) -> &BTreeMap<String, i16> {
        &self.features
    }

    pub fn producer_ids_reserved(&self) -> i64 {
        self.producer_ids_reserved
    }

    /// The offset after the last applied record (the metadata offset a broker reports).
    pub fn applied(&self) -> i64 {
        self.applied
    }
}

#[cfg(test)]
mod tests;
