//! Reconciliation: makes the partitions this node holds match the image. A node hosts a
//! partition iff the image lists it among the partition's replicas; the partition is opened
//! (leader or follower alike) when the image gains it, and closed and its directory deleted
//! when the image no longer has it here (topic deleted, or the replica moved away; a move
//! away only once the image has caught up at start-up, `plan::plan`).
//!
//! Idempotent and retried: it runs after every applied commit and again from the background
//! loop until a pass succeeds at the image's current offset, so a failure after a durable
//! commit (a directory that would not open) never leaves the node half-applied until restart.
//!
//! Leadership needs no local state: who leads, and at which epoch, is read from the image
//! when a request comes ([`Broker::leadership`]).

use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use uuid::Uuid;

use crate::broker::{shared::Broker, state::Lifecycle, state::PartitionHandle};
use crate::replica::isr::{BrokerView, Leadership as IsrLeadership};
use crate::replica::LeaderView;

pub(crate) mod plan;

/// This node's relation to a partition, from the image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Leadership {
    /// This node leads it, at this leader epoch.
    Leader(i32),
    /// Another broker leads it (or nobody: -1); this node may or may not be a follower.
    NotLeader { leader: i32, leader_epoch: i32 },
    /// The image has no such partition.
    Unknown,
}

impl Broker {
    /// Who leads `topic`-`index` according to the image.
    pub fn leadership(&self, topic: &str, index: i32) -> Leadership {
        self.leadership_in(&self.image(), topic, index)
    }

    /// Who leads `topic`-`index` according to `image`: a caller that also reads the partition's
    /// replicas or ISR reads both from the same image (another thread may publish a newer one
    /// between two looks, and a leader view of one image with the leadership of the next could
    /// make this node leader at the epoch of another's leadership).
    fn leadership_in(
        &self,
        image: &crate::controller::MetadataImage,
        topic: &str,
        index: i32,
    ) -> Leadership {
        let Some(t) = image.topic(topic) else {
            return Leadership::Unknown;
        };
        match image.partition(t.id, index) {
            None => Leadership::Unknown,
            // Before the start-up gate opens this node leads nothing, whatever its image says
            // (it may be stale and its log shortened by a power loss: `startup_gate`).
            Some(p) if !self.serving_partitions() => Leadership::NotLeader {
                leader: -1,
                leader_epoch: p.leader_epoch,
            },
            Some(p) if p.leader == self.config.node_id => Leadership::Leader(p.leader_epoch),
            Some(p) => Leadership::NotLeader {
                leader: p.leader,
                leader_epoch: p.leader_epoch,
            },
        }
    }

    /// Whether the local replica of `topic`-`index` has taken up the leadership at
    /// `leader_epoch` (`sync_role` ran for it). A coordinator begins loading its partition only
    /// then: before it, the image may already name this node while its replica still follows
    /// the old leader, and records the fetcher appends after the replay's end would be missed
    /// (Kafka loads from the replica's become-leader transition).
    pub(crate) fn replica_leads(&self, topic: &str, index: i32, leader_epoch: i32) -> bool {
        let Some(handle) = self.partition(topic, index) else {
            return false;
        };
        let (role, replica_epoch, log_epoch) = {
            let p = handle.lock();
            (p.role(), p.leader_epoch(), p.log().latest_epoch())
        };
        let leads = role == crate::replica::Role::Leader && replica_epoch == leader_epoch;
        if !leads {
            // The timer loops call again every few hundred ms: only at debug.
            tracing::debug!(
                topic,
                partition = index,
                leader_epoch,
                ?role,
                replica_epoch,
                log_epoch,
                "coordinator load waits for the replica to take the image's leadership up"
            );
        }
        leads
    }

    /// Opens every partition the image places on this node and deletes those it no longer
    /// does. On success records the image offset it matched, so the background loop retries
    /// only while a pass has failed or the image moved on.
    pub(crate) async fn reconcile(&self) -> io::Result<()> {
        let image = self.image();
        let local: BTreeMap<plan::PartitionKey, Uuid> = self
            .partitions
            .read()
            .unwrap()
            .iter()
            .map(|(k, h)| (k.clone(), h.topic_id))
            .collect();
        // Before the start-up gate opens the image is still catching up: replicas it moves
        // away are kept until it has (`plan::plan`).
        let caught_up = self.serving_partitions();
        let mut first_error = None;
        for change in plan::plan(&image, self.config.node_id, &local, caught_up) {
            match change {
                plan::Change::Remove((topic, index)) => {
                    if let Some(handle) = self.partition(&topic, index) {
                        self.close_and_delete(&topic, index, &handle).await;
                    }
                }
                plan::Change::Open((topic, index), id) => {
                    if let Err(e) = self.open_partition(&topic, id, index).await {
                        tracing::warn!(topic, partition = index, error = %e,
                            "could not open a partition the metadata places here; will retry");
                        first_error.get_or_insert(e);
                    }
                }
                plan::Change::SyncRole((topic, index)) => self.sync_role(&topic, index),
            }
        }
        // The group coordinator follows the offsets partitions' leadership (load / unload).
        self.sync_offsets_roles();
        match first_error {
            // Roles (and removals) were held back by the start-up gate: the background loop
            // passes again, and the first pass after the gate opens carries them out.
            None if !caught_up => Ok(()),
            None => {
                self.reconciled.store(image.applied(), Ordering::SeqCst);
                Ok(())
            }
            Some(e) => Err(e),
        }
    }

    /// Hands the image's leadership and this node's role to the local replica, which stamps
    /// appends with the epoch, starts it in the epoch cache (KAFKA-7415) and fences requests
    /// by it (FENCED/UNKNOWN_LEADER_EPOCH). A leader of a replicated partition also gets the
    /// replicas, the committed ISR, the partition epoch and the replicas' brokers as the image
    /// has them, so a committed ISR change lands in its replica set. Idempotent; an epoch older
    /// than the replica's is ignored.
    pub(crate) fn sync_role(&self, topic: &str, index: i32) {
        let Some(handle) = self.partition(topic, index) else {
            return;
        };
        if !self.serving_partitions() {
            // No role and no fetcher before the start-up gate opens (`startup_gate`).
            self.follow_leader(topic, index);
            return;
        }
        let image = self.image();
        let now = self.io.clock.wall_ms();
        let lost = {
            let mut p = handle.lock();
            let (result, lost) = match self.leadership_in(&image, topic, index) {
                Leadership::Leader(_) => match self.leader_view(&image, topic, index) {
                    Some(view) => (
                        p.become_leader(view, now).map_err(|e| format!("{e:?}")),
                        false,
                    ),
                    None => (Ok(()), false),
                },
                Leadership::NotLeader { leader_epoch, .. } => (
                    p.become_follower(leader_epoch)
                        .map_err(|e| format!("{e:?}")),
                    true,
                ),
                Leadership::Unknown => (Ok(()), false),
            };
            if let Err(e) = result {
                tracing::debug!(
                    topic,
                    partition = index,
                    e,
                    "image leadership not taken up by the replica"
                );
            }
            lost
        };
        // Waits on a partition another broker now leads end here: their produces cannot reach
        // the high watermark through this node any more (NOT_LEADER_OR_FOLLOWER).
        if lost {
            handle.leadership_lost();
        }
        // A follower fetches from the leader the image names (`replica_fetcher`).
        self.follow_leader(topic, index);
    }

    /// The image's partition as its leader (this node) needs it.
    fn leader_view(
        &self,
        image: &crate::controller::MetadataImage,
        topic: &str,
        index: i32,
    ) -> Option<LeaderView> {
        let t = image.topic(topic)?;
        let p = image.partition(t.id, index)?;
        let brokers = p
            .replicas
            .iter()
            .map(|&r| {
                let view = match image.broker(r) {
                    Some(b) => BrokerView {
                        broker_epoch: b.epoch,
                        // KIP-858: not a replica in a failed directory either.
                        eligible: b.is_active()
                            && !crate::controller::log_dirs::replica_dir_offline(
                                image,
                                (t.id, index),
                                r,
                            ),
                    },
                    None => BrokerView {
                        broker_epoch: -1,
                        eligible: false,
                    },
                };
                (r, view)
            })
            .collect();
        Some(LeaderView {
            node: self.config.node_id,
            leadership: IsrLeadership {
                leader_epoch: p.leader_epoch,
                partition_epoch: p.partition_epoch,
                replicas: p.replicas.clone(),
                isr: p.isr.clone(),
            },
            brokers,
            replica_lag_time_max_ms: self.config.replica_lag_time_max_ms,
        })
    }

    /// From the background loop: reconciles again unless the last pass held at this image.
    pub(crate) async fn reconcile_if_behind(&self) {
        if self.reconciled.load(Ordering::SeqCst) == self.image().applied() {
            return;
        }
        // Serialised with commits, so local effects keep commit order.
        let _writers = self.metadata.lock().await;
        let _gate = self.reconcile_gate.lock().await;
        if let Err(e) = self.reconcile().await {
            tracing::debug!(error = %e, "reconciliation still failing");
        }
    }

    /// Removes a partition this node no longer hosts: no fsync or checkpoint of it is in flight
    /// past the gates, and none starts after (they skip deleted partitions), so nothing writes
    /// into the directory once it is gone, nor into a new topic's of the same name.
    async fn close_and_delete(&self, topic: &str, index: i32, handle: &Arc<PartitionHandle>) {
        {
            let mut partitions = self.partitions.write().unwrap();
            let key = (topic.to_string(), index);
            if partitions.get(&key).is_some_and(|h| Arc::ptr_eq(h, handle)) {
                partitions.remove(&key);
            }
        }
        self.stop_following(topic, index);
        let _gate = handle.flush_gate.lock().await;
        let _start_gate = handle.log_start_gate.lock().await;
        // Also ends its waits: produces are answered, fetches re-read (and find it gone).
        handle.set_lifecycle(Lifecycle::Deleted);
        let dir = self.partition_dir(topic, index);
        // Only this topic's data: a directory a newer topic of the same name already took is
        // that topic's (its partition.metadata names another id).
        if crate::broker::partition_metadata::read_topic_id(&self.io, &dir)
            .is_none_or(|id| id == handle.topic_id)
        {
            if let Err(e) = self.io.disk.remove_dir_all(&dir) {
                tracing::warn!(dir = %dir.display(), error = %e, "could not remove a partition no longer hosted here");
            }
        }
        // A partition of that name placed here again later is placed afresh.
        self.dirs.forget(topic, index);
    }
}

#[cfg(test)]
mod tests;
