//! The workload topic's partition-level history, for the trace and for judging a leaderless
//! end: the committed metadata replayed in offset order into an image of our own (leaders
//! elected with their epochs, ISR/ELR changes, brokers registering as new incarnations and the
//! ISR/ELR places that cost them), plus the followers' truncations the brokers report
//! (`Broker::observe_replication`).
//!
//! Every event is stamped with the run time at which the simulator first saw it (a commit is
//! seen at the next metadata sample, within 100 ms), so the trace hash stays a function of
//! the seed. High-watermark moves are left out: one per fetch would swamp the trace.
//!
//! **Designed unavailability (KIP-966).** A replica that comes back from an unclean shutdown
//! re-registers and is removed from every ISR and ELR in that very commit, since its log may
//! have lost what it acknowledged. A replica that left the ISR while the ISR stayed at or above
//! `min.insync.replicas` gets no ELR place either: records committed after it left need not be
//! on it. When neither set keeps anyone, no replica is eligible and, with unclean election off,
//! the partition stays leaderless: Kafka's intended outcome, not a liveness bug — but only
//! until its last known leader (`LastKnownElr`, recorded when the ISR emptied) is back and
//! unfenced: Kafka 4.x then elects it (an unclean election, RECOVERING), and so does Weir
//! (issue 17's whole-cluster crash). Every node is back after the heal, so a partition with a
//! last known leader is never excused. [`PartitionTrace::designed_unavailable`] tells the
//! remaining case from an election bug by checkable facts only: no leader, ISR and ELR both
//! empty, no last known leader, and every replica's last departure
//! from ISR/ELR was one of those two — its own re-registration as a new incarnation, or a
//! shrink that left at least `min.insync.replicas` in the ISR — with at least one of the first
//! kind (the replicas that held the last committed records).

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use uuid::Uuid;
use weir::controller::image::{MetadataImage, MetadataRecord, PartitionRegistration, NO_LEADER};

use crate::history::Event;

/// The group coordinators' log, whose leaders are traced too.
const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// One partition-level step of the workload's topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PartitionEvent {
    /// A committed leader (or `-1`: none) and its leader epoch.
    Leader {
        partition: i32,
        leader: i32,
        epoch: i32,
    },
    /// A committed ISR or ELR change, with the partition epoch it took effect in.
    Isr {
        partition: i32,
        isr: Vec<i32>,
        elr: Vec<i32>,
        partition_epoch: i32,
    },
    /// A broker registered as a new incarnation (it restarted; in the simulator every stop is
    /// unclean), removed from the ISR/ELR of the listed partitions in the same commit.
    Restarted { broker: i32, removed_from: Vec<i32> },
    /// A follower (node id) cut its log from `from` to `to` while following `leader_epoch`.
    Truncated {
        node: i32,
        partition: i32,
        leader_epoch: i32,
        from: i64,
        to: i64,
    },
    /// A committed leader (or `-1`) of a `__consumer_offsets` partition, and its epoch: whose
    /// group coordinator answers are current (`group_check` tells a deposed coordinator's
    /// stale OffsetFetch answer from a lost commit with it). `partitions`: the offsets topic's
    /// partition count, to place a group (`partition_for`).
    CoordinatorLeader {
        partition: i32,
        partitions: i32,
        leader: i32,
        epoch: i32,
    },
}

/// ISR ∪ ELR: who may be elected cleanly.
fn eligible(p: &PartitionRegistration) -> BTreeSet<i32> {
    p.isr.iter().chain(&p.elr).copied().collect()
}

#[derive(Debug)]
pub struct PartitionTrace {
    topic: String,
    topic_id: Option<Uuid>,
    /// `__consumer_offsets`, once created: only its leaders are traced.
    offsets_id: Option<Uuid>,
    image: MetadataImage,
    /// The offset after the last record replayed.
    next: u64,
    /// Incarnation each broker last registered with.
    incarnations: BTreeMap<i32, Uuid>,
    /// The ISR size at or above which a departure earns no ELR place.
    min_isr: usize,
    /// The PartitionChange records since the last other record (a registration's removals
    /// precede it in its commit): (topic id, partition, eligible before, eligible after).
    run: Vec<(Uuid, i32, BTreeSet<i32>, BTreeSet<i32>)>,
    /// Per partition of the workload topic, per replica out of ISR/ELR: how it left last.
    departures: BTreeMap<i32, BTreeMap<i32, Departure>>,
}

/// How a replica last left ISR ∪ ELR.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Departure {
    /// Removed by its own re-registration after an unclean stop (KIP-966).
    Restarted,
    /// Shrunk out while at least `min.insync.replicas` stayed in the ISR: no ELR place due.
    AboveMinIsr,
    /// Anything else (fenced, shrunk below min ISR without an ELR place, ...).
    Other,
}

impl PartitionTrace {
    /// `min_isr`: the topic's `min.insync.replicas`.
    pub fn new(topic: &str, min_isr: usize) -> PartitionTrace {
        PartitionTrace {
            topic: topic.to_string(),
            topic_id: None,
            offsets_id: None,
            image: MetadataImage::default(),
            next: 0,
            incarnations: BTreeMap::new(),
            min_isr,
            run: Vec::new(),
            departures: BTreeMap::new(),
        }
    }

    /// The first committed offset not replayed yet.
    pub fn next_offset(&self) -> u64 {
        self.next
    }

    /// Replays the committed records past what was replayed already (any node's committed
    /// sequence will do: the quorum check holds them to one) and returns the events they make.
    pub fn feed(&mut self, records: &[(u64, Bytes)]) -> Vec<Event> {
        let mut out = Vec::new();
        for (offset, value) in records {
            if *offset < self.next {
                continue;
            }
            self.next = offset + 1;
            // Control records and anything unparsable are not metadata records.
            let Ok(record) = serde_json::from_slice::<MetadataRecord>(value) else {
                continue;
            };
            self.replay(*offset, &record, &mut out);
        }
        out
    }

    fn registration(&self, partition: i32) -> Option<PartitionRegistration> {
        self.topic_id
            .and_then(|id| self.image.partition(id, partition))
            .cloned()
    }

    fn replay(&mut self, offset: u64, record: &MetadataRecord, out: &mut Vec<Event>) {
        let touched = match record {
            MetadataRecord::Topic { name, id, .. } if *name == self.topic => {
                self.topic_id = Some(*id);
                None
            }
            MetadataRecord::Topic { name, id, .. } if name == OFFSETS_TOPIC => {
                self.offsets_id = Some(*id);
                None
            }
            MetadataRecord::Partition(r) => Some((r.topic_id, r.partition)),
            MetadataRecord::PartitionChange(c) => Some((c.topic_id, c.partition)),
            _ => None,
        };
        let before = touched.and_then(|(id, p)| self.image.partition(id, p).cloned());
        // Only the traced topic's records go into the trace's image, and only when what they
        // change is there: a node that loaded a metadata snapshot holds no records below it,
        // so its sequence may start past the topic's creation (the trace then stays short,
        // which only withholds the designed-unavailability excuse, never grants it).
        let ours = |id: &Uuid| Some(*id) == self.topic_id || Some(*id) == self.offsets_id;
        let placeable = match record {
            MetadataRecord::Topic { name, .. } => *name == self.topic || name == OFFSETS_TOPIC,
            MetadataRecord::Partition(r) => {
                ours(&r.topic_id) && self.image.topic_by_id(r.topic_id).is_some()
            }
            MetadataRecord::PartitionChange(c) => ours(&c.topic_id) && before.is_some(),
            MetadataRecord::RemoveTopic { id, .. } => {
                ours(id) && self.image.topic_by_id(*id).is_some()
            }
            _ => false,
        };
        if placeable {
            self.image.apply(offset as i64, record);
        }
        let after = touched.and_then(|(id, p)| self.image.partition(id, p).cloned());
        match record {
            MetadataRecord::PartitionChange(c) => {
                let (b, a) = (
                    before.as_ref().map(eligible).unwrap_or_default(),
                    after.as_ref().map(eligible).unwrap_or_default(),
                );
                self.run.push((c.topic_id, c.partition, b, a));
            }
            MetadataRecord::RegisterBroker {
                id, incarnation, ..
            } => {
                let run = std::mem::take(&mut self.run);
                let again = self
                    .incarnations
                    .insert(*id, *incarnation)
                    .is_some_and(|old| old != *incarnation);
                if again {
                    let removed_from: Vec<i32> = run
                        .iter()
                        .filter(|(t, _, b, a)| {
                            Some(*t) == self.topic_id && b.contains(id) && !a.contains(id)
                        })
                        .map(|(_, p, _, _)| *p)
                        .collect();
                    for p in &removed_from {
                        self.departures
                            .entry(*p)
                            .or_default()
                            .insert(*id, Departure::Restarted);
                    }
                    out.push(Event::Partition(PartitionEvent::Restarted {
                        broker: *id,
                        removed_from,
                    }));
                }
            }
            _ => self.run.clear(),
        }
        if let Some((id, partition)) = touched.filter(|(t, _)| Some(*t) == self.offsets_id) {
            self.coordinator_leader(id, partition, before.as_ref(), out);
            return;
        }
        let Some((_, partition)) = touched.filter(|(t, _)| Some(*t) == self.topic_id) else {
            return;
        };
        let Some(after) = after else { return };
        let led = before
            .as_ref()
            .is_none_or(|b| b.leader != after.leader || b.leader_epoch != after.leader_epoch);
        if led {
            out.push(Event::Partition(PartitionEvent::Leader {
                partition,
                leader: after.leader,
                epoch: after.leader_epoch,
            }));
        }
        let sets = before
            .as_ref()
            .is_none_or(|b| b.isr != after.isr || b.elr != after.elr);
        if sets {
            out.push(Event::Partition(PartitionEvent::Isr {
                partition,
                isr: after.isr.clone(),
                elr: after.elr.clone(),
                partition_epoch: after.partition_epoch,
            }));
        }
        let (was, now) = (
            before.as_ref().map(eligible).unwrap_or_default(),
            eligible(&after),
        );
        let left = if after.isr.len() >= self.min_isr {
            Departure::AboveMinIsr
        } else {
            // A registration right after it in the same commit may still make it `Restarted`.
            Departure::Other
        };
        let departures = self.departures.entry(partition).or_default();
        for r in was.difference(&now) {
            departures.insert(*r, left);
        }
        // Back in ISR/ELR: its earlier departure no longer counts.
        departures.retain(|r, _| !now.contains(r));
    }

    /// A `CoordinatorLeader` event when an offsets partition's leader or epoch changed.
    fn coordinator_leader(
        &self,
        id: Uuid,
        partition: i32,
        before: Option<&PartitionRegistration>,
        out: &mut Vec<Event>,
    ) {
        let Some(after) = self.image.partition(id, partition) else {
            return;
        };
        if before.is_some_and(|b| b.leader == after.leader && b.leader_epoch == after.leader_epoch)
        {
            return;
        }
        let partitions = self
            .image
            .partitions()
            .filter(|((t, _), _)| *t == id)
            .count();
        out.push(Event::Partition(PartitionEvent::CoordinatorLeader {
            partition,
            partitions: i32::try_from(partitions).expect("partition count fits i32"),
            leader: after.leader,
            epoch: after.leader_epoch,
        }));
    }

    /// The partitions of the workload topic left leaderless by design (KIP-966, see the module
    /// comment), each with the facts that show it. A partition not in this map and without a
    /// leader is a liveness failure.
    pub fn designed_unavailable(&self) -> BTreeMap<i32, String> {
        let mut out = BTreeMap::new();
        let Some(id) = self.topic_id else { return out };
        for ((t, partition), p) in self.image.partitions() {
            if t != id || p.leader != NO_LEADER || !p.isr.is_empty() || !p.elr.is_empty() {
                continue;
            }
            // Its last known leader is elected once back (every node is, after the heal).
            // Registrations are not in the trace's image (topic records only): the
            // incarnations seen say which brokers the cluster has.
            if p.last_known_elr
                .iter()
                .any(|r| self.incarnations.contains_key(r))
            {
                continue;
            }
            let departures = self.departures.get(&partition);
            let how = |r: &i32| departures.and_then(|d| d.get(r)).copied();
            let by_design = p
                .replicas
                .iter()
                .all(|r| matches!(how(r), Some(Departure::Restarted | Departure::AboveMinIsr)));
            let restarted: Vec<i32> = p
                .replicas
                .iter()
                .copied()
                .filter(|r| how(r) == Some(Departure::Restarted))
                .collect();
            if by_design && !restarted.is_empty() {
                out.insert(
                    partition,
                    format!(
                        "partition {partition}: no leader, ISR and ELR empty (leader epoch {}, partition epoch {}); \
                         replicas {restarted:?} removed from ISR/ELR by their own re-registration after an unclean \
                         stop, the others shrunk out with at least {} in the ISR (KIP-966: none eligible)",
                        p.leader_epoch, p.partition_epoch, self.min_isr
                    ),
                );
            }
        }
        out
    }

    /// The current registration of a workload partition (for notes).
    pub fn describe(&self, partition: i32) -> Option<String> {
        self.registration(partition).map(|p| {
            format!(
                "leader {} epoch {}, ISR {:?}, ELR {:?}, last known ELR {:?}",
                p.leader, p.leader_epoch, p.isr, p.elr, p.last_known_elr
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir::controller::image::{PartitionChange, PartitionRecord};

    fn encode(records: &[MetadataRecord]) -> Vec<(u64, Bytes)> {
        records
            .iter()
            .enumerate()
            .map(|(i, r)| (i as u64, Bytes::from(serde_json::to_vec(r).unwrap())))
            .collect()
    }

    fn register(id: i32, incarnation: u128) -> MetadataRecord {
        MetadataRecord::RegisterBroker {
            log_dirs: Vec::new(),
            id,
            incarnation: Uuid::from_u128(incarnation),
            listeners: Vec::new(),
            rack: None,
            fenced: false,
        }
    }

    fn change(topic: Uuid, f: impl FnOnce(&mut PartitionChange)) -> MetadataRecord {
        let mut c = PartitionChange::new(topic, 0);
        f(&mut c);
        MetadataRecord::PartitionChange(c)
    }

    /// Three brokers, one partition on all three, led by 1; then the given records.
    fn run(then: impl FnOnce(Uuid) -> Vec<MetadataRecord>) -> (PartitionTrace, Vec<Event>) {
        let topic = Uuid::from_u128(7);
        let mut records = vec![register(1, 1), register(2, 2), register(3, 3)];
        records.push(MetadataRecord::topic("events", topic, BTreeMap::new()));
        records.push(MetadataRecord::Partition(PartitionRecord {
            directories: Vec::new(),
            topic_id: topic,
            partition: 0,
            replicas: vec![1, 2, 3],
            isr: vec![1, 2, 3],
            elr: Vec::new(),
            last_known_elr: Vec::new(),
            leader: 1,
            leader_epoch: 0,
            partition_epoch: 0,
            leader_recovering: false,
        }));
        records.extend(then(topic));
        let mut trace = PartitionTrace::new("events", 2);
        let events = trace.feed(&encode(&records));
        (trace, events)
    }

    /// Every replica fenced out of the ISR into the ELR, then each back as a new incarnation
    /// and removed from the ELR by its registration.
    fn all_unclean(topic: Uuid) -> Vec<MetadataRecord> {
        vec![
            change(topic, |c| {
                c.isr = Some(vec![1]);
                c.elr = Some(vec![2, 3]);
            }),
            change(topic, |c| {
                c.isr = Some(Vec::new());
                c.elr = Some(vec![1, 2, 3]);
                c.leader = Some(NO_LEADER);
            }),
            change(topic, |c| c.elr = Some(vec![2, 3])),
            register(1, 11),
            change(topic, |c| c.elr = Some(vec![3])),
            register(2, 12),
            change(topic, |c| c.elr = Some(Vec::new())),
            register(3, 13),
        ]
    }

    #[test]
    fn the_offsets_topics_leaders_are_traced_apart_from_the_workloads() {
        let (trace, events) = run(|topic| {
            let offsets = Uuid::from_u128(9);
            let mut records = vec![MetadataRecord::topic(
                OFFSETS_TOPIC,
                offsets,
                BTreeMap::new(),
            )];
            for partition in 0..2 {
                records.push(MetadataRecord::Partition(PartitionRecord {
                    directories: Vec::new(),
                    topic_id: offsets,
                    partition,
                    replicas: vec![2, 3],
                    isr: vec![2, 3],
                    elr: Vec::new(),
                    last_known_elr: Vec::new(),
                    leader: 2,
                    leader_epoch: 0,
                    partition_epoch: 0,
                    leader_recovering: false,
                }));
            }
            records.push(change(offsets, |c| {
                c.leader = Some(3);
                c.isr = Some(vec![3]);
            }));
            // An ISR change alone moves no coordinator.
            records.push(change(offsets, |c| c.isr = Some(vec![3, 2])));
            records.push(change(topic, |c| c.leader = Some(2)));
            records
        });
        let coordinators: Vec<_> = events
            .iter()
            .filter_map(|e| match e {
                Event::Partition(PartitionEvent::CoordinatorLeader {
                    partition,
                    partitions,
                    leader,
                    epoch,
                }) => Some((*partition, *partitions, *leader, *epoch)),
                _ => None,
            })
            .collect();
        assert_eq!(coordinators, vec![(0, 1, 2, 0), (1, 2, 2, 0), (0, 2, 3, 1)]);
        let leaders = events
            .iter()
            .filter(|e| matches!(e, Event::Partition(PartitionEvent::Leader { .. })))
            .count();
        // The workload's partition: created, then led by 2.
        assert_eq!(leaders, 2);
        assert!(trace.describe(0).unwrap().starts_with("leader 2 epoch 1"));
    }

    #[test]
    fn leaders_isr_changes_and_restarts_are_traced() {
        let (_, events) = run(all_unclean);
        let leaders: Vec<_> = events
            .iter()
            .filter_map(|e| match e {
                Event::Partition(PartitionEvent::Leader { leader, epoch, .. }) => {
                    Some((*leader, *epoch))
                }
                _ => None,
            })
            .collect();
        assert_eq!(leaders, vec![(1, 0), (NO_LEADER, 1)]);
        let restarts: Vec<_> = events
            .iter()
            .filter_map(|e| match e {
                Event::Partition(PartitionEvent::Restarted {
                    broker,
                    removed_from,
                }) => Some((*broker, removed_from.clone())),
                _ => None,
            })
            .collect();
        assert_eq!(restarts, vec![(1, vec![0]), (2, vec![0]), (3, vec![0])]);
        let isr_changes = events
            .iter()
            .filter(|e| matches!(e, Event::Partition(PartitionEvent::Isr { .. })))
            .count();
        assert_eq!(isr_changes, 6, "{events:#?}");
    }

    #[test]
    fn every_eligible_replica_lost_to_its_unclean_restart_is_designed_unavailability() {
        let (trace, _) = run(all_unclean);
        let designed = trace.designed_unavailable();
        assert!(designed.contains_key(&0), "{designed:?}");
    }

    /// Issue 17's whole-cluster crash as the controller records it: the ISR empties with the
    /// last leader remembered. Once that broker is back Kafka 4.x elects it, so a partition
    /// still leaderless then is a liveness failure, not designed unavailability.
    #[test]
    fn a_partition_with_a_last_known_leader_is_not_excused() {
        let (trace, _) = run(|topic| {
            let mut records = all_unclean(topic);
            records.insert(2, change(topic, |c| c.last_known_elr = Some(vec![1])));
            records
        });
        assert_eq!(
            trace.registration(0).unwrap().last_known_elr,
            vec![1],
            "the setup"
        );
        assert!(trace.designed_unavailable().is_empty());
    }

    #[test]
    fn an_emptied_isr_without_restarts_is_not_excused() {
        // The sets emptied by plain changes (no registration in their commits): an election
        // bug as far as the checker can tell.
        let (trace, _) = run(|topic| {
            vec![change(topic, |c| {
                c.isr = Some(Vec::new());
                c.leader = Some(NO_LEADER);
            })]
        });
        assert!(trace.designed_unavailable().is_empty());
    }

    #[test]
    fn a_replica_shrunk_out_above_min_isr_earns_no_elr_place() {
        // Broker 1 leaves while two stay in the ISR (records committed after need not be on
        // it); the last two leave by their unclean restarts: nobody is eligible, by design.
        let (trace, _) = run(|topic| {
            vec![
                change(topic, |c| {
                    c.isr = Some(vec![2, 3]);
                    c.leader = Some(2);
                }),
                change(topic, |c| {
                    c.isr = Some(vec![3]);
                    c.leader = Some(3);
                }),
                register(2, 12),
                change(topic, |c| {
                    c.isr = Some(Vec::new());
                    c.leader = Some(NO_LEADER);
                }),
                register(3, 13),
            ]
        });
        assert!(trace.designed_unavailable().contains_key(&0));
    }

    #[test]
    fn an_elr_member_dropped_without_a_restart_is_not_excused() {
        // Broker 2 held an ELR place and lost it by a plain change (no registration): it was
        // eligible, so a leaderless end is the controller's fault as far as the checker knows.
        let (trace, _) = run(|topic| {
            let mut records = all_unclean(topic);
            records.insert(1, change(topic, |c| c.elr = Some(vec![3])));
            // The ELR of the later records no longer holds 2.
            records[2] = change(topic, |c| {
                c.isr = Some(Vec::new());
                c.elr = Some(vec![1, 3]);
                c.leader = Some(NO_LEADER);
            });
            records[3] = change(topic, |c| c.elr = Some(vec![3]));
            records.remove(5); // broker 2's removal (it holds no place any more)
            records
        });
        assert!(trace.designed_unavailable().is_empty());
    }
}
