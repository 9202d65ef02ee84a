//! The cluster metadata as a replayable state machine: records in, image out. Every change to
//! topics, partitions, topic configs and producer-id blocks is a [`MetadataRecord`]; the image is
//! whatever applying them in order gives. This is the shape KRaft uses, so the records can later
//! travel through a replicated quorum log unchanged.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum MetadataRecord {
    Topic {
        name: String,
        id: Uuid,
        partitions: i32,
        replication_factor: i16,
        configs: BTreeMap<String, String>,
    },
    RemoveTopic {
        name: String,
        id: Uuid,
    },
    Partitions {
        name: String,
        count: i32,
    },
    /// Sets (`Some`) or removes (`None`) topic-level config overrides.
    TopicConfig {
        name: String,
        changes: BTreeMap<String, Option<String>>,
    },
    /// Producer ids below `next` may have been handed out; ids are never reused.
    ProducerIds {
        next: i64,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicMeta {
    pub name: String,
    pub id: Uuid,
    pub partitions: i32,
    pub replication_factor: i16,
    /// Topic-level overrides only; broker defaults fill the rest.
    pub configs: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MetadataImage {
    topics: BTreeMap<String, TopicMeta>,
    /// End of the producer-id block reserved so far.
    producer_ids_reserved: i64,
    /// How many records were applied (the metadata log's end offset).
    applied: i64,
}

impl MetadataImage {
    /// Applies one record. Records are validated by the controller before they are written, so
    /// one that does not fit the image is a bug.
    pub fn apply(&mut self, record: &MetadataRecord) {
        match record {
            MetadataRecord::Topic {
                name,
                id,
                partitions,
                replication_factor,
                configs,
            } => {
                assert!(*partitions > 0);
                let previous = self.topics.insert(
                    name.clone(),
                    TopicMeta {
                        name: name.clone(),
                        id: *id,
                        partitions: *partitions,
                        replication_factor: *replication_factor,
                        configs: configs.clone(),
                    },
                );
                assert!(previous.is_none(), "topic {name} created twice");
            }
            MetadataRecord::RemoveTopic { name, id } => {
                let removed = self.topics.remove(name);
                assert!(
                    removed.is_some_and(|t| t.id == *id),
                    "removed unknown topic {name}"
                );
            }
            MetadataRecord::Partitions { name, count } => {
                let topic = self
                    .topics
                    .get_mut(name)
                    .expect("partitions of a known topic");
                assert!(*count > topic.partitions, "partition counts only grow");
                topic.partitions = *count;
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
            MetadataRecord::ProducerIds { next } => {
                assert!(
                    *next > self.producer_ids_reserved,
                    "producer ids never go back"
                );
                self.producer_ids_reserved = *next;
            }
        }
        self.applied += 1;
    }

    pub fn topics(&self) -> impl Iterator<Item = &TopicMeta> {
        self.topics.values()
    }

    pub fn topic(&self, name: &str) -> Option<&TopicMeta> {
        self.topics.get(name)
    }

    pub fn topic_by_id(&self, id: Uuid) -> Option<&TopicMeta> {
        self.topics.values().find(|t| t.id == id)
    }

    pub fn producer_ids_reserved(&self) -> i64 {
        self.producer_ids_reserved
    }

    pub fn applied(&self) -> i64 {
        self.applied
    }
}
