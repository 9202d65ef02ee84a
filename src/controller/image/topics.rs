//! The topics of the image, by name and by id.

use std::collections::BTreeMap;

use uuid::Uuid;

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TopicMeta {
    pub name: String,
    pub id: Uuid,
    /// How many partitions are registered (indexes `0..partitions`).
    pub partitions: i32,
    /// The replica count of partition 0 (Kafka reports the first partition's).
    pub replication_factor: i16,
    /// Topic-level overrides only; broker defaults fill the rest.
    pub configs: BTreeMap<String, String>,
    /// The partition count a pre-partition-record log gave this topic (see
    /// [`super::records::MetadataRecord::Topic`]); 0 for topics created since.
    pub legacy_partitions: i32,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Topics {
    by_name: BTreeMap<String, TopicMeta>,
    names_by_id: BTreeMap<Uuid, String>,
}

impl Topics {
    pub(super) fn create(&mut self, topic: TopicMeta) {
        assert!(
            !self.names_by_id.contains_key(&topic.id),
            "topic id {} used twice",
            topic.id
        );
        self.names_by_id.insert(topic.id, topic.name.clone());
        let name = topic.name.clone();
        let previous = self.by_name.insert(name.clone(), topic);
        assert!(previous.is_none(), "topic {name} created twice");
    }

    pub(super) fn remove(&mut self, name: &str, id: Uuid) {
        let removed = self.by_name.remove(name);
        assert!(
            removed.is_some_and(|t| t.id == id),
            "removed unknown topic {name}"
        );
        self.names_by_id.remove(&id);
    }

    pub(super) fn get(&self, name: &str) -> Option<&TopicMeta> {
        self.by_name.get(name)
    }

    pub(super) fn get_mut(&mut self, name: &str) -> Option<&mut TopicMeta> {
        self.by_name.get_mut(name)
    }

    pub(super) fn by_id(&self, id: Uuid) -> Option<&TopicMeta> {
        self.names_by_id.get(&id).and_then(|n| self.by_name.get(n))
    }

    pub(super) fn by_id_mut(&mut self, id: Uuid) -> Option<&mut TopicMeta> {
        let name = self.names_by_id.get(&id)?;
        self.by_name.get_mut(name)
    }

    pub(super) fn all(&self) -> impl Iterator<Item = &TopicMeta> {
        self.by_name.values()
    }
}
