//! Acknowledged writes lost **beyond what acks=all promises**: the losses Kafka's own election
//! rules cause once `min.insync.replicas` replicas of a partition have stopped uncleanly, one
//! of them by a power loss that took its unflushed tail.
//!
//! Kafka does not fsync before acknowledging (`log.flush.interval.messages` is unbounded): an
//! acknowledged record is durable because every ISR member holds it, in the page cache. A kill
//! keeps the page cache; a power loss does not. KIP-966 keeps a partition safe through up to
//! `min.insync.replicas - 1` unclean stops: a replica back from one is removed from the ISR and
//! the ELR as its new incarnation registers, so it is not elected over a replica that kept the
//! records. Beyond that, Kafka 4.x elects a replica whose log may have lost acknowledged
//! records, in two ways, and the other replicas truncate to it:
//! - **its stale incarnation**: the controller has not yet accepted the restarted broker's
//!   registration, so the old incarnation is still in the ISR. A newly active controller gives
//!   every registered broker a full session (`ClusterControlManager.activate`) and refuses the
//!   new incarnation (DUPLICATE_BROKER_REGISTRATION) until that session expires; meanwhile it
//!   may elect the stale incarnation cleanly from the ISR;
//! - **the last known leader**: with ISR and ELR both empty, `canElectLastKnownLeader` elects
//!   the last leader (unclean, RECOVERING), whatever `unclean.leader.election.enable` says.
//!
//! Weir does both, as Kafka does (Weir's `unclean.recovery.manager.enabled=true`, KIP-966 part
//! 2, compares the replicas' logs instead). The long sweeps of `replication-5-mixed` found such
//! losses in about 1 seed in 300 (5 brokers, a metadata quorum without a majority for seconds
//! while partition leaders lose power): `scenarios/open/README.md`.
//!
//! [`find`] excuses an acknowledged offset only on facts the history proves, all of them:
//! 1. a follower of its partition truncated from above it to at or below it, while following
//!    leader epoch E (`PartitionEvent::Truncated`);
//! 2. E's leader L lost power after the write was sent and before E's election;
//! 3. E's election was one of the two above: L was in neither the ISR nor the ELR just before
//!    it (the last known leader), or L had not re-registered (no `Restarted` of L) between that
//!    power loss and the election (its stale incarnation);
//! 4. at least `min.insync.replicas` distinct replicas of the partition stopped uncleanly
//!    (killed or powered off) between the write's send and the truncation.
//!
//! A record that was read below the high watermark (committed) but never acknowledged — its
//! producer's answer lost to the same faults — is excused on the same facts, the write's send
//! time standing in for the acknowledged write's: it was committed on as many replicas as an
//! acknowledged one, and taken by the same election. (Seed 87 of `replication-5-mixed` with
//! KIP-996's way back to the leader: a batch replicated to the ISR [4, 5] at epoch 1, committed,
//! its leader killed before it answered; broker 5 then lost power and was elected the last
//! known leader, taking 280 acknowledged offsets and those five read ones with it.)
//!
//! Anything else lost is still a violation. An excused offset is reported as a note.

use std::collections::{BTreeMap, BTreeSet};

use crate::group_check::GroupEvent;
use crate::history::{Entry, Event};
use crate::partition_trace::PartitionEvent;

/// The nemesis's note for a kill of the node at `index` (0-based).
pub fn kill_note(index: usize) -> String {
    format!("kill broker-{index}")
}

/// The nemesis's note for a power loss of the node at `index`.
pub fn power_loss_note(index: usize) -> String {
    format!("power loss broker-{index}")
}

/// The nemesis's note for a power loss of every node at once.
pub fn power_loss_all_note(nodes: usize) -> String {
    format!("power loss of all {nodes} nodes")
}

/// An unclean stop a fault note records: the node ids (index + 1) and whether power was lost.
fn stop_of(note: &str) -> Option<(Vec<i32>, bool)> {
    let node = |rest: &str| rest.parse::<i32>().ok().map(|index| vec![index + 1]);
    if let Some(rest) = note.strip_prefix("kill broker-") {
        return node(rest).map(|n| (n, false));
    }
    if let Some(rest) = note.strip_prefix("power loss broker-") {
        return node(rest).map(|n| (n, true));
    }
    let all = note
        .strip_prefix("power loss of all ")?
        .strip_suffix(" nodes")?;
    let n: i32 = all.parse().ok()?;
    Some(((1..=n).collect(), true))
}

/// The acknowledged offsets [`find`] excused, with one note per excused range.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BeyondPromise {
    at: BTreeSet<(i32, i64)>,
    /// Committed reads (partition, offset, value) of writes never acknowledged, lost with them.
    reads: BTreeSet<(i32, i64, String)>,
    /// Per partition, when its first excused loss happened (the follower's truncation).
    since_ms: BTreeMap<i32, u64>,
    pub notes: Vec<String>,
}

impl BeyondPromise {
    /// The acknowledged offset `offset` of `partition` was lost beyond the promise.
    pub fn covers(&self, partition: i32, offset: i64) -> bool {
        !self.at.is_empty() && self.at.contains(&(partition, offset))
    }

    /// `value`, read below the high watermark at `offset` of `partition`, was lost beyond the
    /// promise with acknowledged writes (see the module comment).
    pub fn covers_read(&self, partition: i32, offset: i64, value: &str) -> bool {
        !self.reads.is_empty() && self.reads.contains(&(partition, offset, value.to_string()))
    }

    pub fn is_empty(&self) -> bool {
        self.at.is_empty() && self.reads.is_empty()
    }

    /// Acknowledged writes of `partition` were lost beyond the promise at or before `at_ms`.
    pub fn lost_before(&self, partition: i32, at_ms: u64) -> bool {
        self.since_ms.get(&partition).is_some_and(|&t| t <= at_ms)
    }
}

/// A partition step of the history, with its place in the history (`seq`) and its time.
struct Step<'a> {
    seq: usize,
    at_ms: u64,
    event: &'a PartitionEvent,
}

/// The acknowledged offsets of the history lost beyond acks=all's promise (see the module
/// comment). `min_isr`: the topic's `min.insync.replicas`.
pub fn find(entries: &[Entry], min_isr: usize) -> BeyondPromise {
    // op → (partition, records, send time); acknowledged offsets → send time.
    let mut sent: BTreeMap<u64, (i32, usize, u64)> = BTreeMap::new();
    let mut acked: BTreeMap<(i32, i64), u64> = BTreeMap::new();
    // (seq, time, node, power lost).
    let mut stops: Vec<(usize, u64, i32, bool)> = Vec::new();
    let mut steps: Vec<Step> = Vec::new();
    for (seq, e) in entries.iter().enumerate() {
        match &e.event {
            Event::Invoke {
                op,
                partition,
                values,
                ..
            } => {
                sent.insert(*op, (*partition, values.len(), e.at_ms));
            }
            Event::Ack { op, offset } => {
                if let Some(&(partition, n, sent_ms)) = sent.get(op) {
                    for i in 0..n as i64 {
                        acked.entry((partition, offset + i)).or_insert(sent_ms);
                    }
                }
            }
            Event::Fault(note) => {
                if let Some((nodes, power)) = stop_of(note) {
                    stops.extend(nodes.into_iter().map(|n| (seq, e.at_ms, n, power)));
                }
            }
            Event::Partition(event) => steps.push(Step {
                seq,
                at_ms: e.at_ms,
                event,
            }),
            _ => {}
        }
    }
    let mut out = BeyondPromise::default();
    for t in &steps {
        let PartitionEvent::Truncated {
            node,
            partition,
            leader_epoch,
            from,
            to,
        } = t.event
        else {
            continue;
        };
        let (partition, epoch) = (*partition, *leader_epoch);
        // The election of the epoch the follower truncated for (the follower may hear of it
        // before the simulator's metadata sample does: search the whole history).
        let Some(elected) = steps.iter().find(|s| {
            matches!(s.event, PartitionEvent::Leader { partition: p, epoch: e, leader }
                if *p == partition && *e == epoch && *leader >= 0)
        }) else {
            continue;
        };
        let PartitionEvent::Leader { leader, .. } = elected.event else {
            unreachable!("matched a leader above");
        };
        if leader == node {
            continue;
        }
        // The power losses of the elected replica before its election.
        let powered_off: Vec<(usize, u64)> = stops
            .iter()
            .filter(|(seq, _, n, power)| *power && n == leader && *seq < elected.seq)
            .map(|&(seq, at_ms, _, _)| (seq, at_ms))
            .collect();
        let Some(&(last_loss_seq, last_loss_ms)) = powered_off.last() else {
            continue;
        };
        let Some((how, bad_epoch)) = bad_election(&steps, elected, *leader, last_loss_seq) else {
            continue;
        };
        let replicas = replicas_of(&steps, partition);
        let mut stopped_all: BTreeSet<i32> = BTreeSet::new();
        // Conditions 2 and 4 for a write sent at `sent_ms`: the elected replica's power loss
        // came after it, and enough replicas stopped uncleanly since.
        let mut excusable = |sent_ms: u64| {
            if sent_ms > last_loss_ms {
                return false;
            }
            let stopped: BTreeSet<i32> = stops
                .iter()
                .filter(|(seq, at_ms, n, _)| {
                    *at_ms >= sent_ms && *seq < t.seq && replicas.contains(n)
                })
                .map(|(_, _, n, _)| *n)
                .collect();
            if stopped.len() < min_isr.max(1) {
                return false;
            }
            stopped_all.extend(stopped);
            true
        };
        let range = (partition, *to)..(partition, *from);
        let excused: Vec<i64> = acked
            .range(range.clone())
            .filter(|(_, &sent_ms)| excusable(sent_ms))
            .map(|(&(_, offset), _)| offset)
            .collect();
        let excused_reads: Vec<(i64, &str)> = committed_reads(entries, partition, *to..*from)
            .into_iter()
            .filter(|&(_, sent_ms)| excusable(sent_ms))
            .map(|(read, _)| read)
            .collect();
        // Offsets an earlier truncation excused already are in its note.
        let new: Vec<i64> = excused
            .into_iter()
            .filter(|o| out.at.insert((partition, *o)))
            .collect();
        // Reads at an offset excused above need no excuse of their own.
        let new_reads: Vec<i64> = excused_reads
            .into_iter()
            .filter(|&(o, v)| {
                !out.at.contains(&(partition, o)) && out.reads.insert((partition, o, v.to_string()))
            })
            .map(|(o, _)| o)
            .collect();
        if let (Some(&first), Some(&last)) = (new_reads.first(), new_reads.last()) {
            let since = out.since_ms.entry(partition).or_insert(t.at_ms);
            *since = (*since).min(t.at_ms);
            out.notes.push(format!(
                "partition {partition}: {} committed reads in {first}..={last} of writes never \
                 acknowledged, lost with acknowledged ones: broker {node} truncated {from} → {to} \
                 following broker {leader} at epoch {epoch} (its power loss and election as for \
                 acknowledged writes, after they were sent)",
                new_reads.len(),
            ));
        }
        let (Some(&first), Some(&last)) = (new.first(), new.last()) else {
            continue;
        };
        let since = out.since_ms.entry(partition).or_insert(t.at_ms);
        *since = (*since).min(t.at_ms);
        // The power loss that took them: the first after the earliest of them was sent.
        let first_sent = new.iter().filter_map(|o| acked.get(&(partition, *o))).min();
        let loss_ms = powered_off
            .iter()
            .map(|&(_, at_ms)| at_ms)
            .find(|&at_ms| first_sent.is_some_and(|&s| at_ms >= s))
            .unwrap_or(last_loss_ms);
        out.notes.push(format!(
            "partition {partition}: {} acknowledged offsets in {first}..={last} lost beyond acks=all's promise: \
             broker {leader} lost power at {loss_ms} ms, after they were sent, and was elected at leader epoch \
             {bad_epoch} as {how}; broker {node} truncated {from} → {to} following it at epoch {epoch}; replicas \
             {stopped_all:?} stopped uncleanly since (min.insync.replicas {min_isr})",
            new.len()
        ));
    }
    out
}

/// The reads (offset, value) in `range` of `partition` that a consumer or group member was
/// served below the high watermark its answer reported, each with the send time of the write
/// of that value (its latest Invoke). A value no write sent is left out (a phantom is the
/// checker's business). Called only for a truncation whose election passed [`bad_election`]:
/// a rare scan of the history.
fn committed_reads(
    entries: &[Entry],
    partition: i32,
    range: std::ops::Range<i64>,
) -> BTreeMap<(i64, &str), u64> {
    let mut read: BTreeMap<&str, BTreeSet<i64>> = BTreeMap::new();
    for e in entries {
        let (p, offset, value, hw) = match &e.event {
            Event::Read {
                partition,
                offset,
                value,
                high_watermark,
                ..
            }
            | Event::Group(GroupEvent::ReadServed {
                partition,
                offset,
                value,
                high_watermark,
                ..
            }) => (*partition, *offset, value.as_str(), *high_watermark),
            _ => continue,
        };
        if p == partition && offset < hw && range.contains(&offset) {
            read.entry(value).or_default().insert(offset);
        }
    }
    let mut out: BTreeMap<(i64, &str), u64> = BTreeMap::new();
    if read.is_empty() {
        return out;
    }
    for e in entries {
        let Event::Invoke {
            partition: p,
            values,
            ..
        } = &e.event
        else {
            continue;
        };
        if *p != partition {
            continue;
        }
        for v in values {
            let Some((&value, offsets)) = read.get_key_value(v.as_str()) else {
                continue;
            };
            for &offset in offsets {
                let sent = out.entry((offset, value)).or_insert(e.at_ms);
                *sent = (*sent).max(e.at_ms);
            }
        }
    }
    out
}

/// The election that gave `leader` (led at `elected`) the partition with the log its power loss
/// (at history position `loss_seq`) left: `elected` itself or an earlier election of the same
/// replica since that power loss with nobody else leading in between (a replica re-elected
/// cleanly, say from the ELR, still has the log the first election gave it). With how it
/// could pick that log (see [`election_kind`]) and its leader epoch; `None` when every such
/// election was a clean one of a replica the controller knew had restarted.
fn bad_election(
    steps: &[Step],
    elected: &Step,
    leader: i32,
    loss_seq: usize,
) -> Option<(&'static str, i32)> {
    let PartitionEvent::Leader { partition, .. } = elected.event else {
        return None;
    };
    let leaders = steps.iter().rev().filter(|s| {
        s.seq <= elected.seq
            && s.seq > loss_seq
            && matches!(s.event, PartitionEvent::Leader { partition: p, .. } if p == partition)
    });
    for s in leaders {
        let PartitionEvent::Leader {
            leader: l, epoch, ..
        } = s.event
        else {
            continue;
        };
        if *l < 0 {
            continue;
        }
        if *l != leader {
            // Another replica led since: the log came from it, not from the power loss.
            return None;
        }
        if let Some(how) = election_kind(steps, s, leader, loss_seq) {
            return Some((how, *epoch));
        }
    }
    None
}

/// How the election of `elected` (leader `leader`) could pick a replica whose power loss (at
/// history position `loss_seq`) took acknowledged records, or `None` for a clean election of a
/// replica the controller knew had restarted.
fn election_kind(
    steps: &[Step],
    elected: &Step,
    leader: i32,
    loss_seq: usize,
) -> Option<&'static str> {
    let PartitionEvent::Leader { partition, .. } = elected.event else {
        return None;
    };
    // Elected from outside the ISR and ELR as they stood just before: the last known leader.
    // (The change that empties them and the election are often one record: a registration's
    // removal from the ELR elects the last known leader in the same PartitionChange.)
    let outside = steps
        .iter()
        .rev()
        .filter(|s| s.seq < elected.seq)
        .find_map(|s| match s.event {
            PartitionEvent::Isr {
                partition: p,
                isr,
                elr,
                ..
            } if p == partition => Some(!isr.contains(&leader) && !elr.contains(&leader)),
            _ => None,
        });
    if outside == Some(true) {
        return Some("the last known leader, from outside the ISR and ELR (KIP-966)");
    }
    let re_registered = steps.iter().any(|s| {
        s.seq > loss_seq
            && s.seq < elected.seq
            && matches!(s.event, PartitionEvent::Restarted { broker, .. } if *broker == leader)
    });
    (!re_registered).then_some(
        "its stale incarnation, still in the ISR before the controller accepted its re-registration",
    )
}

/// Every broker the history shows as a replica of `partition`: its leaders, ISR and ELR.
fn replicas_of(steps: &[Step], partition: i32) -> BTreeSet<i32> {
    let mut out = BTreeSet::new();
    for s in steps {
        match s.event {
            PartitionEvent::Leader {
                partition: p,
                leader,
                ..
            } if *p == partition && *leader >= 0 => {
                out.insert(*leader);
            }
            PartitionEvent::Isr {
                partition: p,
                isr,
                elr,
                ..
            } if *p == partition => out.extend(isr.iter().chain(elr).copied()),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(at_ms: u64, event: Event) -> Entry {
        Entry { at_ms, event }
    }

    fn leader(at_ms: u64, partition: i32, leader: i32, epoch: i32) -> Entry {
        at(
            at_ms,
            Event::Partition(PartitionEvent::Leader {
                partition,
                leader,
                epoch,
            }),
        )
    }

    fn isr(at_ms: u64, partition: i32, isr: &[i32], elr: &[i32]) -> Entry {
        at(
            at_ms,
            Event::Partition(PartitionEvent::Isr {
                partition,
                isr: isr.to_vec(),
                elr: elr.to_vec(),
                partition_epoch: 0,
            }),
        )
    }

    fn restarted(at_ms: u64, broker: i32) -> Entry {
        at(
            at_ms,
            Event::Partition(PartitionEvent::Restarted {
                broker,
                removed_from: vec![0],
            }),
        )
    }

    /// Seed 1136 of `replication-5-mixed` (past its CI cap), cut to partition 0 (replicas 2, 3, 4): a write
    /// acknowledged at 165..=169; broker 3 (index 2) loses power with it unflushed, broker 2
    /// (index 1) loses power and is killed; with ISR and ELR empty broker 3 is elected as the
    /// last known leader and broker 2 truncates to its log.
    fn seed_1136(power_loss_of_3: bool, kill_of_2: bool, last_known: bool) -> Vec<Entry> {
        let mut h = vec![
            leader(1_453, 0, 2, 0),
            isr(1_453, 0, &[2, 3, 4], &[]),
            at(
                6_463,
                Event::Invoke {
                    op: 7,
                    partition: 0,
                    session: 1,
                    values: (0..5).map(|i| format!("p0-7-{i}")).collect(),
                },
            ),
            at(6_503, Event::Ack { op: 7, offset: 165 }),
        ];
        if power_loss_of_3 {
            h.push(at(6_498, Event::Fault(power_loss_note(2))));
        } else {
            h.push(at(6_498, Event::Fault(kill_note(2))));
        }
        h.push(isr(6_553, 0, &[2, 3], &[]));
        h.push(at(11_043, Event::Fault(power_loss_note(1))));
        if kill_of_2 {
            h.push(at(12_908, Event::Fault(kill_note(1))));
        }
        h.push(leader(17_453, 0, -1, 2));
        if last_known {
            // Broker 3's re-registration takes it out of the ELR: ISR and ELR empty.
            h.push(restarted(17_453, 3));
            h.push(isr(17_453, 0, &[], &[]));
        } else {
            h.push(isr(17_453, 0, &[3], &[]));
            h.push(restarted(17_500, 3));
        }
        h.push(at(
            17_704,
            Event::Partition(PartitionEvent::Truncated {
                node: 2,
                partition: 0,
                leader_epoch: 3,
                from: 175,
                to: 165,
            }),
        ));
        h.push(leader(17_753, 0, 3, 3));
        h.sort_by_key(|e| e.at_ms);
        h
    }

    #[test]
    fn the_nemesis_notes_parse_as_stops() {
        assert_eq!(stop_of(&kill_note(0)), Some((vec![1], false)));
        assert_eq!(stop_of(&power_loss_note(4)), Some((vec![5], true)));
        assert_eq!(
            stop_of(&power_loss_all_note(3)),
            Some((vec![1, 2, 3], true))
        );
        assert_eq!(stop_of("pause broker-1 for 20 ms"), None);
        assert_eq!(stop_of("kill broker-x"), None);
    }

    #[test]
    fn a_last_known_leader_election_after_two_unclean_stops_is_beyond_the_promise() {
        let found = find(&seed_1136(true, true, true), 2);
        for o in 165..=169 {
            assert!(found.covers(0, o), "{o}: {found:?}");
        }
        assert!(!found.covers(0, 164) && !found.covers(0, 170));
        assert_eq!(found.notes.len(), 1, "{found:?}");
        assert!(found.notes[0].contains("last known leader"), "{found:?}");
    }

    #[test]
    fn a_last_known_leader_elected_as_the_elr_empties_is_beyond_the_promise() {
        // Seed 2018: the last ELR member's re-registration and the last known leader's
        // election are one change: ISR [] ELR [4] → leader 3, ISR [3].
        let h: Vec<Entry> = seed_1136(true, true, true)
            .into_iter()
            .map(|mut e| {
                if let Event::Partition(PartitionEvent::Isr { isr, elr, .. }) = &mut e.event {
                    if isr.is_empty() && elr.is_empty() {
                        *elr = vec![4];
                    }
                }
                e
            })
            .collect();
        assert!(find(&h, 2).covers(0, 165));
    }

    #[test]
    fn a_clean_re_election_keeps_the_last_known_leaders_log() {
        // Seed 2172: the last known leader (epoch 3) is shrunk into the ELR and elected from
        // it cleanly (epoch 5); the follower truncates only then.
        let mut h = seed_1136(true, true, true);
        for e in &mut h {
            if let Event::Partition(PartitionEvent::Truncated { leader_epoch, .. }) = &mut e.event {
                *leader_epoch = 5;
            }
        }
        h.push(leader(18_000, 0, -1, 4));
        h.push(isr(18_000, 0, &[], &[3]));
        h.push(leader(18_100, 0, 3, 5));
        h.sort_by_key(|e| e.at_ms);
        assert!(find(&h, 2).covers(0, 167));
        // Another replica led in between: its log, not the power loss, is what 2 truncated to.
        h.push(leader(17_900, 0, 4, 4));
        h.sort_by_key(|e| e.at_ms);
        let found = find(&h, 2);
        assert!(found.is_empty(), "{found:?}");
    }

    #[test]
    fn without_the_elected_replicas_power_loss_the_loss_is_a_violation() {
        // Broker 3 was killed, not powered off: its page cache kept the records.
        assert!(find(&seed_1136(false, true, true), 2).is_empty());
    }

    #[test]
    fn fewer_unclean_stops_than_min_insync_replicas_is_a_violation() {
        // Broker 2 lost power too, so two replicas stopped: not enough for min ISR 3.
        assert!(find(&seed_1136(true, true, true), 3).is_empty());
        // With only broker 3's power loss and broker 2's power loss it is still two.
        assert!(!find(&seed_1136(true, false, true), 2).is_empty());
    }

    #[test]
    fn a_clean_election_of_a_re_registered_replica_is_a_violation() {
        // The ISR was not empty and broker 3's re-registration was committed before the
        // election: the controller knew it had restarted.
        assert!(find(&seed_1136(true, true, false), 2).is_empty());
    }

    /// `seed_1136` with a second write (op 8, sent at `sent_ms`) never acknowledged, whose
    /// five records a consumer read at 170..=174 below high watermark 175.
    fn with_a_committed_unacknowledged_write(sent_ms: u64) -> Vec<Entry> {
        let mut h = seed_1136(true, true, true);
        h.push(at(
            sent_ms,
            Event::Invoke {
                op: 8,
                partition: 0,
                session: 1,
                values: (0..5).map(|i| format!("p0-8-{i}")).collect(),
            },
        ));
        for i in 0..5 {
            h.push(at(
                8_000,
                Event::Read {
                    consumer: 0,
                    partition: 0,
                    offset: 170 + i,
                    value: format!("p0-8-{i}"),
                    high_watermark: 175,
                },
            ));
        }
        h.sort_by_key(|e| e.at_ms);
        h
    }

    #[test]
    fn committed_reads_of_an_unacknowledged_write_go_with_the_acknowledged_ones() {
        let found = find(&with_a_committed_unacknowledged_write(6_470), 2);
        for o in 165..=169 {
            assert!(found.covers(0, o), "{o}: {found:?}");
        }
        for i in 0..5 {
            assert!(
                found.covers_read(0, 170 + i, &format!("p0-8-{i}")),
                "{i}: {found:?}"
            );
            // Only that value: another one at the offset is still judged.
            assert!(!found.covers(0, 170 + i) && !found.covers_read(0, 170 + i, "p0-9-0"));
        }
        assert_eq!(found.notes.len(), 2, "{found:?}");
        assert!(found.notes.iter().any(|n| n.contains("never acknowledged")));
    }

    #[test]
    fn committed_reads_of_a_write_sent_after_the_power_loss_are_not_excused() {
        let found = find(&with_a_committed_unacknowledged_write(6_499), 2);
        assert!(found.covers(0, 165), "{found:?}");
        assert!(!found.covers_read(0, 170, "p0-8-0"), "{found:?}");
        // Read above the high watermark: not committed, nothing to excuse (nor to judge).
        let mut h = with_a_committed_unacknowledged_write(6_470);
        for e in &mut h {
            if let Event::Read { high_watermark, .. } = &mut e.event {
                *high_watermark = 170;
            }
        }
        assert!(!find(&h, 2).covers_read(0, 170, "p0-8-0"));
    }

    #[test]
    fn a_write_sent_after_the_power_loss_is_not_excused() {
        let mut h = seed_1136(true, true, true);
        for e in &mut h {
            if let Event::Invoke { .. } = e.event {
                e.at_ms = 6_499;
            }
        }
        h.sort_by_key(|e| e.at_ms);
        assert!(find(&h, 2).is_empty());
    }
}
