//! The controller: decides metadata changes (topics, partitions, configs, producer ids) and
//! records them. [`Controller`] is a pure state machine (requests in, records out, validated
//! against the current image); [`store::MetadataStore`] makes the records durable in the
//! metadata log before they take effect. A single node is its own quorum for now.

pub mod image;
pub mod store;

use std::collections::BTreeMap;
use std::fmt;

use uuid::Uuid;

use crate::config::TopicConfig;
pub use image::{MetadataImage, MetadataRecord, TopicMeta};

/// How many producer ids one metadata record reserves.
pub const PRODUCER_ID_BLOCK: i64 = 1000;
/// Kafka's limit on topic name length.
pub const MAX_TOPIC_NAME: usize = 249;
/// The most partitions one change may add. Kafka's controller refuses a user operation of more
/// than 10 000 records (one per partition) the same way; without a bound, one CreateTopics
/// asking for 2^31 partitions would make the broker open directories until it runs out.
pub const MAX_NEW_PARTITIONS: i32 = 10_000;
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
}

impl fmt::Display for ControllerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ControllerError::TopicAlreadyExists(t) => write!(f, "topic '{t}' already exists"),
            ControllerError::UnknownTopic(t) => write!(f, "unknown topic '{t}'"),
            ControllerError::InvalidTopic(m)
            | ControllerError::InvalidPartitions(m)
            | ControllerError::InvalidReplicationFactor(m)
            | ControllerError::InvalidConfig(m) => f.write_str(m),
            ControllerError::TopicDeletionDisabled => {
                f.write_str("topic deletion is disabled (delete.topic.enable=false)")
            }
            ControllerError::TooLarge => f.write_str(TOO_LARGE),
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
#[derive(Clone, Debug)]
pub struct NewTopic {
    pub name: String,
    /// -1: the broker default.
    pub partitions: i32,
    /// -1: the broker default.
    pub replication_factor: i16,
    pub configs: BTreeMap<String, String>,
}

/// Validates requests against the image and turns them into records.
pub struct Controller {
    brokers: i32,
    default_partitions: i32,
    default_replication_factor: i16,
    delete_topic_enable: bool,
    topic_defaults: TopicConfig,
}

impl Controller {
    pub fn new(
        brokers: i32,
        default_partitions: i32,
        default_replication_factor: i16,
        delete_topic_enable: bool,
        topic_defaults: TopicConfig,
    ) -> Controller {
        assert!(brokers > 0);
        Controller {
            brokers,
            default_partitions,
            default_replication_factor,
            delete_topic_enable,
            topic_defaults,
        }
    }

    pub fn create_topic(
        &self,
        image: &MetadataImage,
        topic: &NewTopic,
        id: Uuid,
    ) -> Result<MetadataRecord, ControllerError> {
        validate_topic_name(&topic.name)?;
        if image.topic(&topic.name).is_some() {
            return Err(ControllerError::TopicAlreadyExists(topic.name.clone()));
        }
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
        if replication_factor as i32 > self.brokers {
            return Err(ControllerError::InvalidReplicationFactor(format!(
                "replication factor {replication_factor} is larger than the {} available brokers",
                self.brokers
            )));
        }
        self.topic_defaults
            .with_overrides(&topic.configs)
            .map_err(|e| ControllerError::InvalidConfig(e.to_string()))?;
        Ok(MetadataRecord::Topic {
            name: topic.name.clone(),
            id,
            partitions,
            replication_factor,
            configs: topic.configs.clone(),
        })
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

    pub fn create_partitions(
        &self,
        image: &MetadataImage,
        name: &str,
        count: i32,
    ) -> Result<MetadataRecord, ControllerError> {
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
        Ok(MetadataRecord::Partitions {
            name: name.to_string(),
            count,
        })
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

#[cfg(test)]
mod tests {
    use super::*;

    fn controller() -> Controller {
        let defaults = crate::config::ServerConfig::default_single_node().topic_defaults;
        Controller::new(1, 3, 1, true, defaults)
    }

    #[test]
    fn topic_lifecycle() {
        let c = controller();
        let mut image = MetadataImage::default();
        let new = NewTopic {
            name: "orders".into(),
            partitions: -1,
            replication_factor: -1,
            configs: BTreeMap::from([("retention.ms".to_string(), "1000".to_string())]),
        };
        let record = c.create_topic(&image, &new, Uuid::from_u128(1)).unwrap();
        image.apply(&record);
        assert_eq!(image.topic("orders").unwrap().partitions, 3);
        assert_eq!(
            c.create_topic(&image, &new, Uuid::from_u128(2)),
            Err(ControllerError::TopicAlreadyExists("orders".into()))
        );
        assert!(c.create_partitions(&image, "orders", 2).is_err());
        // Regression (fuzzing): a count in the billions is refused, not opened.
        assert_eq!(
            c.create_partitions(&image, "orders", i32::MAX),
            Err(ControllerError::TooLarge)
        );
        assert!(c
            .create_partitions(&image, "orders", 3 + MAX_NEW_PARTITIONS)
            .is_ok());
        let huge = NewTopic {
            name: "huge".into(),
            partitions: 536_870_914,
            replication_factor: 1,
            configs: BTreeMap::new(),
        };
        assert_eq!(
            c.create_topic(&image, &huge, Uuid::nil()),
            Err(ControllerError::TooLarge)
        );
        image.apply(&c.create_partitions(&image, "orders", 5).unwrap());
        assert_eq!(image.topic("orders").unwrap().partitions, 5);
        let changes = BTreeMap::from([("retention.ms".to_string(), None)]);
        image.apply(&c.alter_topic_config(&image, "orders", changes).unwrap());
        assert!(image.topic("orders").unwrap().configs.is_empty());
        image.apply(&c.delete_topic(&image, "orders").unwrap());
        assert!(image.topic("orders").is_none());
        assert_eq!(image.applied(), 4);
    }

    #[test]
    fn rejects_bad_requests() {
        let c = controller();
        let image = MetadataImage::default();
        let mut new = NewTopic {
            name: "a/b".into(),
            partitions: 1,
            replication_factor: 1,
            configs: BTreeMap::new(),
        };
        assert!(matches!(
            c.create_topic(&image, &new, Uuid::nil()),
            Err(ControllerError::InvalidTopic(_))
        ));
        new.name = "ok".into();
        new.replication_factor = 3;
        assert!(matches!(
            c.create_topic(&image, &new, Uuid::nil()),
            Err(ControllerError::InvalidReplicationFactor(_))
        ));
        new.replication_factor = 1;
        new.configs.insert("retention.ms".into(), "soon".into());
        assert!(matches!(
            c.create_topic(&image, &new, Uuid::nil()),
            Err(ControllerError::InvalidConfig(_))
        ));
        assert!(validate_topic_name(&"x".repeat(250)).is_err());
        assert!(validate_topic_name("..").is_err());
    }

    #[test]
    fn records_round_trip_as_json() {
        let record = MetadataRecord::TopicConfig {
            name: "t".into(),
            changes: BTreeMap::from([("a".into(), Some("1".into())), ("b".into(), None)]),
        };
        let json = serde_json::to_string(&record).unwrap();
        assert_eq!(
            serde_json::from_str::<MetadataRecord>(&json).unwrap(),
            record
        );
    }
}
