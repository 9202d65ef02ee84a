//! The image as a snapshot body (KIP-630's "the state at an offset"): every table written out
//! whole, as JSON, and read back into an equal image. It is not a list of records because a
//! replayed record takes its meaning from its offset (a broker's epoch is the offset of its
//! registration); the tables carry those values as they are.
//!
//! Reading checks what the image's own assertions would otherwise trip on (duplicate names or
//! ids, partitions of unknown topics or outside the topic's count), so a snapshot that passed
//! its checksum but holds nonsense is refused with a reason rather than a panic.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::quotas::{QuotaEntity, QuotaValue};
use super::records::{ConfigResource, ScramRecord};
use super::{BrokerRegistration, MetadataImage, PartitionRegistration, TopicMeta};
use crate::acl::AclBinding;

#[derive(Serialize, Deserialize)]
struct ImageTables {
    applied: i64,
    producer_ids_reserved: i64,
    brokers: Vec<BrokerRegistration>,
    topics: Vec<TopicMeta>,
    partitions: Vec<(Uuid, i32, PartitionRegistration)>,
    /// Dynamic broker and group configs (absent in snapshots written before them).
    #[serde(default)]
    configs: Vec<(ConfigResource, BTreeMap<String, String>)>,
    /// Absent from snapshots written before ACLs were stored.
    #[serde(default)]
    acls: Vec<(Uuid, AclBinding)>,
    #[serde(default)]
    scram: Vec<ScramRecord>,
    /// Client quotas (absent in snapshots written before them).
    #[serde(default)]
    quotas: Vec<(QuotaEntity, BTreeMap<String, QuotaValue>)>,
    /// Finalized features (absent in snapshots written before them).
    #[serde(default)]
    features: Vec<(String, i16)>,
}

impl MetadataImage {
    /// The image as a snapshot body.
    pub fn to_snapshot(&self) -> Vec<u8> {
        let tables = ImageTables {
            applied: self.applied,
            producer_ids_reserved: self.producer_ids_reserved,
            brokers: self.brokers.all().cloned().collect(),
            topics: self.topics.all().cloned().collect(),
            partitions: self
                .partitions
                .all()
                .map(|((id, p), r)| (id, p, r.clone()))
                .collect(),
            configs: self
                .configs
                .iter()
                .map(|(r, c)| (r.clone(), c.clone()))
                .collect(),
            acls: self.acls.all().map(|(id, b)| (id, b.clone())).collect(),
            scram: self.scram.all().cloned().collect(),
            quotas: self
                .quotas
                .all()
                .map(|(e, keys)| (e.clone(), keys.clone()))
                .collect(),
            features: self.features.iter().map(|(n, l)| (n.clone(), *l)).collect(),
        };
        serde_json::to_vec(&tables).expect("the image serialises")
    }

    /// The image a snapshot body holds.
    pub fn from_snapshot(body: &[u8]) -> Result<MetadataImage, String> {
        let tables: ImageTables =
            serde_json::from_slice(body).map_err(|e| format!("unreadable image: {e}"))?;
        if tables.applied < 0 || tables.producer_ids_reserved < 0 {
            return Err("negative offsets in the image".into());
        }
        let mut image = MetadataImage {
            applied: tables.applied,
            producer_ids_reserved: tables.producer_ids_reserved,
            ..MetadataImage::default()
        };
        let mut ids = BTreeSet::new();
        for b in tables.brokers {
            if b.id < 0 || !ids.insert(b.id) || b.epoch < 0 || b.epoch >= tables.applied {
                return Err(format!("broker {} twice or with a bad epoch", b.id));
            }
            image.brokers.register(
                b.epoch,
                b.id,
                b.incarnation,
                &b.listeners,
                &b.rack,
                b.fenced,
                &b.log_dirs,
            );
            image
                .brokers
                .change(b.id, b.epoch, None, Some(b.in_controlled_shutdown));
        }
        let (mut names, mut topic_ids) = (BTreeSet::new(), BTreeSet::new());
        for t in tables.topics {
            if !names.insert(t.name.clone()) || !topic_ids.insert(t.id) {
                return Err(format!("topic {} twice", t.name));
            }
            image.topics.create(t);
        }
        for (topic_id, partition, r) in tables.partitions {
            let Some(topic) = image.topics.by_id(topic_id) else {
                return Err(format!(
                    "partition {partition} of unknown topic id {topic_id}"
                ));
            };
            if !(0..topic.partitions.max(topic.legacy_partitions)).contains(&partition)
                || image.partitions.get(topic_id, partition).is_some()
                || !(r.directories.is_empty() || r.directories.len() == r.replicas.len())
            {
                return Err(format!(
                    "partition {partition} of {} out of range",
                    topic.name
                ));
            }
            image.partitions.restore((topic_id, partition), r);
        }
        for (resource, configs) in tables.configs {
            if configs.is_empty() || image.configs.insert(resource.clone(), configs).is_some() {
                return Err(format!("configs of {resource:?} twice or empty"));
            }
        }
        for (id, acl) in tables.acls {
            if image.acls.get(id).is_some() || image.acls.contains(&acl) {
                return Err(format!("ACL {id} twice"));
            }
            image.acls.insert(id, acl);
        }
        for record in tables.scram {
            if record.name.is_empty() || image.scram.get(&record.name, record.mechanism).is_some() {
                return Err(format!(
                    "SCRAM credential of '{}' twice or unnamed",
                    record.name
                ));
            }
            image.scram.upsert(&record);
        }
        for (entity, keys) in tables.quotas {
            let bad_value = keys.values().any(|v| !(v.0.is_finite() && v.0 > 0.0));
            if !entity.is_valid_shape()
                || keys.is_empty()
                || bad_value
                || image.quotas.of(&entity).is_some()
            {
                return Err(format!("quotas of {entity:?} twice, empty or invalid"));
            }
            for (key, value) in keys {
                image.quotas.set(&entity, &key, Some(value.0));
            }
        }
        for (name, level) in tables.features {
            if level <= 0 || image.features.insert(name.clone(), level).is_some() {
                return Err(format!("feature {name} twice or at level {level}"));
            }
        }
        Ok(image)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::records::{BrokerEndpoint, MetadataRecord, PartitionChange, PartitionRecord};
    use super::*;

    /// An image built by replaying records of every kind.
    fn image() -> MetadataImage {
        let mut image = MetadataImage::default();
        let topic = Uuid::from_u64_pair(7, 7);
        let endpoint = |port| BrokerEndpoint {
            name: "PLAINTEXT".into(),
            host: "127.0.0.1".into(),
            port,
        };
        let records = [
            MetadataRecord::RegisterBroker {
                log_dirs: Vec::new(),
                id: 1,
                incarnation: Uuid::from_u64_pair(1, 1),
                listeners: vec![endpoint(9092)],
                rack: Some("r1".into()),
                fenced: true,
            },
            MetadataRecord::RegisterBroker {
                log_dirs: Vec::new(),
                id: 2,
                incarnation: Uuid::from_u64_pair(2, 2),
                listeners: vec![endpoint(9093)],
                rack: None,
                fenced: true,
            },
            MetadataRecord::BrokerChange {
                id: 1,
                epoch: 3,
                fenced: Some(false),
                in_controlled_shutdown: None,
            },
            MetadataRecord::BrokerChange {
                id: 2,
                epoch: 4,
                fenced: Some(false),
                in_controlled_shutdown: Some(true),
            },
            MetadataRecord::topic(
                "t",
                topic,
                BTreeMap::from([("retention.ms".into(), "1000".into())]),
            ),
            MetadataRecord::Partition(PartitionRecord {
                directories: Vec::new(),
                topic_id: topic,
                partition: 0,
                replicas: vec![1, 2],
                isr: vec![1, 2],
                elr: vec![],
                last_known_elr: vec![],
                leader: 1,
                leader_epoch: 0,
                partition_epoch: 0,
                leader_recovering: false,
            }),
            MetadataRecord::PartitionChange(PartitionChange {
                isr: Some(vec![1]),
                ..PartitionChange::new(topic, 0)
            }),
            MetadataRecord::ProducerIds { next: 1000 },
            MetadataRecord::ResourceConfig {
                resource: ConfigResource::Broker(String::new()),
                changes: BTreeMap::from([("log.retention.ms".into(), Some("5".into()))]),
            },
            MetadataRecord::ResourceConfig {
                resource: ConfigResource::Group("g".into()),
                changes: BTreeMap::from([(
                    "consumer.session.timeout.ms".into(),
                    Some("50000".into()),
                )]),
            },
            MetadataRecord::AccessControlEntry {
                id: Uuid::from_u64_pair(9, 9),
                acl: AclBinding {
                    resource_type: crate::acl::ResourceType::Topic,
                    resource_name: "t".into(),
                    pattern_type: crate::acl::PatternType::Prefixed,
                    principal: "User:a".into(),
                    host: "*".into(),
                    operation: crate::acl::Operation::Write,
                    permission: crate::acl::Permission::Deny,
                },
            },
            MetadataRecord::UserScramCredential(ScramRecord {
                name: "alice".into(),
                mechanism: crate::controller::image::scram::ScramMechanism::Sha512,
                salt: vec![0, 1, 2],
                salted_password: vec![3, 4],
                iterations: 8192,
            }),
            MetadataRecord::ClientQuota {
                entity: QuotaEntity::user_client(
                    super::super::quotas::EntityName::Named("alice".into()),
                    super::super::quotas::EntityName::Default,
                ),
                key: "producer_byte_rate".into(),
                value: Some(QuotaValue(1024.0)),
            },
            MetadataRecord::FeatureLevel {
                name: "transaction.version".into(),
                level: 2,
            },
        ];
        for (offset, r) in records.iter().enumerate() {
            image.apply(offset as i64 + 3, r);
        }
        image
    }

    #[test]
    fn an_image_survives_its_snapshot() {
        let image = image();
        let body = image.to_snapshot();
        let back = MetadataImage::from_snapshot(&body).expect("reads back");
        assert_eq!(back, image);
        assert_eq!(back.applied(), 17);
        assert_eq!(back.feature_level("transaction.version"), 2);
        assert_eq!(
            back.resource_configs(&ConfigResource::Group("g".into()))
                ["consumer.session.timeout.ms"],
            "50000"
        );
        assert_eq!(back.all_resource_configs().count(), 2);
        assert_eq!(back.acls().len(), 1);
        assert_eq!(back.scram().users(), vec!["alice"]);
        assert_eq!(back.quotas().all().count(), 1);
        assert!(back.broker(2).is_some_and(|b| b.in_controlled_shutdown));
        // The empty image too.
        let empty = MetadataImage::default();
        assert_eq!(
            MetadataImage::from_snapshot(&empty.to_snapshot()).unwrap(),
            empty
        );
    }

    #[test]
    fn nonsense_is_refused_not_a_panic() {
        let body = String::from_utf8(image().to_snapshot()).unwrap();
        let twice = body.replace("\"id\":2,", "\"id\":1,");
        assert!(MetadataImage::from_snapshot(twice.as_bytes()).is_err());
        let orphan = body.replace(
            "00000000-0000-0007-0000-000000000007\",0",
            "00000000-0000-0008-0000-000000000007\",0",
        );
        assert_ne!(orphan, body);
        assert!(MetadataImage::from_snapshot(orphan.as_bytes()).is_err());
        assert!(MetadataImage::from_snapshot(b"{").is_err());
    }
}
