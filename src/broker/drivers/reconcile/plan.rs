//! What publishing a new image asks of this node, decided without touching anything: the
//! partition changes that make the local replicas match the image ([`plan`]), and the local
//! effects of what changed beyond partitions ([`effects`]). `Broker::publish` executes both.

use std::collections::BTreeMap;

use uuid::Uuid;

use crate::controller::{ConfigResource, MetadataImage, MetadataRecord};

/// A local partition: `(topic name, index)`.
pub type PartitionKey = (String, i32);

/// One step towards local replicas that match the image, in the order to take them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// Close the local replica and delete its directory: the image no longer places it here,
    /// or the name now belongs to another topic (id).
    Remove(PartitionKey),
    /// Open the replica of topic `id` the image places here.
    Open(PartitionKey, Uuid),
    /// Hand the image's leadership and this node's role to the replica.
    SyncRole(PartitionKey),
}

/// The changes that make `local` (the replicas open here, with their topic ids) match the
/// partitions `image` places on `node`: removals first (a name re-created as another topic
/// is removed, then opened afresh), then openings, then every hosted replica's role.
///
/// `caught_up` is false while the image is still being rebuilt at start-up (the start-up gate
/// is closed): it is then some intermediate state of the metadata log, and a replica of a live
/// topic it does not place here may be placed here again by a later record (a reassignment
/// that moved it away and back). Such a replica is kept until the image has caught up, as
/// Kafka's broker acts on the metadata only once its loader has caught up: deleting it would
/// throw away data this node may be the last holder of, reopen the replica empty, and let a
/// later election of this node (the last known leader) take every acknowledged write back.
/// A deleted topic (its id gone from the image) never comes back, so its data goes at once.
pub fn plan(
    image: &MetadataImage,
    node: i32,
    local: &BTreeMap<PartitionKey, Uuid>,
    caught_up: bool,
) -> Vec<Change> {
    let wanted: BTreeMap<PartitionKey, Uuid> = image
        .partitions_hosted_on(node)
        .filter_map(|((id, index), _)| image.topic_by_id(id).map(|t| ((t.name.clone(), index), id)))
        .collect();
    let mut changes: Vec<Change> = local
        .iter()
        .filter(|(key, id)| wanted.get(*key) != Some(*id))
        .filter(|(key, id)| {
            caught_up || wanted.contains_key(*key) || image.topic_by_id(**id).is_none()
        })
        .map(|(key, _)| Change::Remove(key.clone()))
        .collect();
    changes.extend(
        wanted
            .iter()
            .filter(|(key, id)| local.get(*key) != Some(*id))
            .map(|(key, id)| Change::Open(key.clone(), *id)),
    );
    changes.extend(wanted.into_keys().map(Change::SyncRole));
    changes
}

/// What the image changed by: committed records (applied in order), or a whole snapshot.
pub enum Delta<'a> {
    Records(&'a [MetadataRecord]),
    Snapshot,
}

/// A local effect of a change beyond the partitions' placement and roles.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// The offsets topic exists with this many partitions: the group coordinator learns it.
    OffsetsTopic { partitions: i32 },
    /// A topic's config changed: its open partitions take it.
    ReconfigureTopic(String),
    /// The topic defaults (this broker's or the cluster's broker configs) may have moved: every
    /// open partition takes its topic's config again.
    ReconfigureAll,
}

/// The local effects of `delta`, read against `new` (the image with it applied) on `node`. A
/// snapshot says nothing of what changed, so it redoes them all.
pub fn effects(new: &MetadataImage, node: i32, delta: &Delta) -> Vec<Effect> {
    let offsets = crate::group::OFFSETS_TOPIC;
    match delta {
        Delta::Snapshot => {
            let mut out: Vec<Effect> = new
                .topic(offsets)
                .map(|t| Effect::OffsetsTopic {
                    partitions: t.partitions,
                })
                .into_iter()
                .collect();
            out.push(Effect::ReconfigureAll);
            out
        }
        Delta::Records(records) => records
            .iter()
            .filter_map(|record| match record {
                MetadataRecord::Topic { name, id, .. } if name == offsets => {
                    Some(Effect::OffsetsTopic {
                        partitions: new.topic_by_id(*id).map_or(0, |t| t.partitions),
                    })
                }
                MetadataRecord::TopicConfig { name, .. } => {
                    Some(Effect::ReconfigureTopic(name.clone()))
                }
                MetadataRecord::ResourceConfig {
                    resource: ConfigResource::Broker(name),
                    ..
                } if name.is_empty() || *name == node.to_string() => Some(Effect::ReconfigureAll),
                _ => None,
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests;
