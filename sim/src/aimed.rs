//! Aimed faults (BUGGIFY in the replication path, issue 21): the nemesis watches the cluster's
//! metadata and quorum every `poll_ms` and, at moments where replication bugs hide, strikes the
//! node that matters with a chance drawn from the seed (madsim's generator, never the OS's):
//!
//! - `election`: a partition just got a new leader (a new leader epoch) → strike the new
//!   leader, before its followers' first fetch (what a new leader assumes about them);
//! - `isr_expand`: a partition's ISR just grew → strike its leader, so the replica just
//!   admitted may be elected within a fetch round trip of joining;
//! - `isr_shrink`: a partition's ISR just shrank → strike its leader (the survivors decide);
//! - `quorum_election`: the metadata quorum has a new leader → strike it before it commits an
//!   entry of its own epoch; several in a row make Raft's "figure 8" schedules (a leader of an
//!   older epoch elected again with entries the one between never had);
//! - `coordinator_move`: a `__consumer_offsets` partition got a new leader → strike it while
//!   the coordinator there is loading its groups.
//!
//! The broker names none of these moments: the nemesis reads them from the freshest metadata
//! image and the quorum statuses, as `kill_partition_leader` does. Off unless a scenario has a
//! `[nemesis.aimed]` table, so other scenarios keep their schedules and trace hashes.
//!
//! Two more points are the broker's own fault points (`weir::config::fault_points`): windows
//! the nemesis cannot see in time, named in the broker's code and armed through its config
//! with the chance given here (the world copies them into every broker's `ServerConfig`):
//!
//! - `catch_up_answer_lost`: a follower catching up (out of the ISR, below the high
//!   watermark) loses the leader's answer and backs off, so a leader that admitted it on what
//!   that answer carried has it in the ISR without the records (with `isr_expand`, the leader
//!   is struck meanwhile);
//! - `coordinator_load_stall`: a new coordinator's replay of an offsets partition starts
//!   200–2000 ms late, so its groups stay loading while members come asking;
//! - the quorum driver's `quorum_answer_one_batch`, `quorum_leader_flush_stall`,
//!   `quorum_new_leader_flush_stall`, `quorum_first_commit_stall`,
//!   `quorum_old_tail_commit_stall`, `quorum_vote_request_delay` and `quorum_rival_vote_hold`:
//!   fetch answers cut to one batch, the quorum thread stalled 2.5–6 s at a leader's moments,
//!   vote requests sent late and a rival candidate's read late, which together make Raft's figure 8 and the narrow vote schedules reachable
//!   (`src/broker/drivers/quorum/fault_point.rs`).

use std::collections::BTreeMap;
#[cfg(madsim)]
use std::sync::atomic::Ordering;
#[cfg(madsim)]
use std::time::Duration;

#[cfg(madsim)]
use madsim::rand::Rng;
use serde::Deserialize;
#[cfg(madsim)]
use weir::broker::quorum_status::QuorumRole;

#[cfg(madsim)]
use crate::nemesis::Nemesis;
use crate::scenario::FaultKind;

/// A moment the nemesis may strike at.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum AimPoint {
    Election,
    IsrExpand,
    IsrShrink,
    QuorumElection,
    CoordinatorMove,
    /// A broker fault point (`FaultPoints::catch_up_answer_lost`), not a nemesis strike.
    CatchUpAnswerLost,
    /// A broker fault point (`FaultPoints::coordinator_load_stall`), not a nemesis strike.
    CoordinatorLoadStall,
    /// Quorum driver fault points (`FaultPoints::quorum_*`), not nemesis strikes.
    QuorumAnswerOneBatch,
    QuorumLeaderFlushStall,
    QuorumNewLeaderFlushStall,
    QuorumFirstCommitStall,
    QuorumOldTailCommitStall,
    QuorumVoteRequestDelay,
    QuorumRivalVoteHold,
}

#[cfg(madsim)]
impl Aimed {
    /// The broker fault points this table arms, with their chances.
    pub fn fault_points(&self) -> weir::config::FaultPoints {
        let chance = |p: AimPoint| self.points.get(&p).copied().unwrap_or(0.0).clamp(0.0, 1.0);
        weir::config::FaultPoints {
            catch_up_answer_lost: chance(AimPoint::CatchUpAnswerLost),
            coordinator_load_stall: chance(AimPoint::CoordinatorLoadStall),
            quorum_answer_one_batch: chance(AimPoint::QuorumAnswerOneBatch),
            quorum_leader_flush_stall: chance(AimPoint::QuorumLeaderFlushStall),
            quorum_new_leader_flush_stall: chance(AimPoint::QuorumNewLeaderFlushStall),
            quorum_first_commit_stall: chance(AimPoint::QuorumFirstCommitStall),
            quorum_old_tail_commit_stall: chance(AimPoint::QuorumOldTailCommitStall),
            quorum_vote_request_delay: chance(AimPoint::QuorumVoteRequestDelay),
            quorum_rival_vote_hold: chance(AimPoint::QuorumRivalVoteHold),
            quorum_window_ms: [0, 0],
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Aimed {
    /// How often the nemesis looks, in simulated ms.
    #[serde(default = "default_poll")]
    pub poll_ms: u64,
    /// Chance of a strike per moment seen, by point; points not named never strike.
    #[serde(default)]
    pub points: BTreeMap<AimPoint, f64>,
    /// What a strike does (relative weights): `kill`, `power_loss`, `pause`, `isolate`,
    /// `cut_from_controllers`.
    #[serde(default = "default_faults")]
    pub faults: BTreeMap<FaultKind, u32>,
    /// From seeing the moment to the strike, in simulated ms: [min, max].
    #[serde(default = "default_delay")]
    pub delay_ms: [u64; 2],
    /// How long a strike lasts (down, paused or cut off), in simulated ms: [min, max].
    #[serde(default = "default_duration")]
    pub duration_ms: [u64; 2],
    /// At most this many strikes per run.
    #[serde(default = "default_max")]
    pub max_strikes: u32,
}

fn default_poll() -> u64 {
    5
}
fn default_faults() -> BTreeMap<FaultKind, u32> {
    BTreeMap::from([(FaultKind::Kill, 1)])
}
fn default_delay() -> [u64; 2] {
    [0, 20]
}
fn default_duration() -> [u64; 2] {
    [100, 1000]
}
fn default_max() -> u32 {
    20
}

/// What the nemesis last saw of one partition.
#[cfg(any(madsim, test))]
#[derive(Clone, Debug, PartialEq, Eq)]
struct Seen {
    leader: i32,
    leader_epoch: i32,
    isr: Vec<i32>,
}

/// The moments between two looks, each with the node to strike (its node id).
#[cfg(any(madsim, test))]
fn moments(
    before: &BTreeMap<(String, i32), Seen>,
    now: &BTreeMap<(String, i32), Seen>,
) -> Vec<(AimPoint, i32)> {
    let mut out = Vec::new();
    for (key, n) in now {
        let Some(b) = before.get(key) else { continue };
        if n.leader < 0 {
            continue;
        }
        let offsets = key.0 == weir::group::OFFSETS_TOPIC;
        if n.leader_epoch > b.leader_epoch {
            let point = if offsets {
                AimPoint::CoordinatorMove
            } else {
                AimPoint::Election
            };
            out.push((point, n.leader));
        } else if !offsets && n.leader_epoch == b.leader_epoch {
            if n.isr.iter().any(|r| !b.isr.contains(r)) {
                out.push((AimPoint::IsrExpand, n.leader));
            } else if n.isr.len() < b.isr.len() {
                out.push((AimPoint::IsrShrink, n.leader));
            }
        }
    }
    out
}

#[cfg(madsim)]
impl Nemesis {
    /// The partitions of the freshest image among the running, unpaused brokers.
    fn look(&self) -> Option<BTreeMap<(String, i32), Seen>> {
        let image = self
            .machines
            .iter()
            .filter(|m| m.up.load(Ordering::SeqCst) && !m.paused.load(Ordering::SeqCst))
            .filter_map(|m| m.broker.lock().unwrap().clone())
            .map(|b| b.image())
            .max_by_key(|image| image.applied())?;
        Some(
            image
                .partitions()
                .filter_map(|(key, p)| {
                    let topic = image.topic_by_id(key.0)?;
                    let seen = Seen {
                        leader: p.leader,
                        leader_epoch: p.leader_epoch,
                        isr: p.isr.clone(),
                    };
                    Some(((topic.name.clone(), key.1), seen))
                })
                .collect(),
        )
    }

    /// The quorum leader and its epoch, as the running nodes report it.
    fn quorum_leadership(&self) -> Option<(usize, u32)> {
        let leader = self.quorum_leader()?;
        let status = self.machines[leader].quorum_status()?;
        (status.role == QuorumRole::Leader).then_some((leader, status.epoch))
    }

    /// Aimed faults until `until_ms` of run time (nothing without `[nemesis.aimed]`).
    pub async fn run_aimed(&self, until_ms: u64) {
        let Some(aimed) = self.spec.aimed.clone() else {
            return;
        };
        let kinds: Vec<(FaultKind, u32)> = aimed
            .faults
            .iter()
            .filter(|(_, &w)| w > 0)
            .map(|(&k, &w)| (k, w))
            .collect();
        let total: u32 = kinds.iter().map(|(_, w)| w).sum();
        if total == 0 || aimed.points.is_empty() {
            return;
        }
        let draw = |range: [u64; 2]| {
            if range[0] >= range[1] {
                range[0]
            } else {
                madsim::rand::thread_rng().gen_range(range[0]..=range[1])
            }
        };
        let mut seen = BTreeMap::new();
        let mut quorum: Option<(usize, u32)> = None;
        let mut strikes = 0;
        let poll = Duration::from_millis(aimed.poll_ms.max(1));
        while strikes < aimed.max_strikes && self.clock.now_ms() + aimed.poll_ms < until_ms {
            tokio::time::sleep(poll).await;
            let mut found = Vec::new();
            if let Some(now) = self.look() {
                found = moments(&seen, &now);
                // Keys that vanish (a deleted topic) are forgotten; new ones start here.
                seen = now;
            }
            let leadership = self.quorum_leadership();
            if let (Some((node, epoch)), Some((_, before))) = (leadership, quorum) {
                if epoch > before {
                    // Node ids are machine index + 1 (`world::broker_config`).
                    found.push((AimPoint::QuorumElection, node as i32 + 1));
                }
            }
            if leadership.is_some() {
                quorum = leadership;
            }
            for (point, node) in found {
                let Some(&chance) = aimed.points.get(&point) else {
                    continue;
                };
                if !madsim::rand::thread_rng().gen_bool(chance.clamp(0.0, 1.0)) {
                    continue;
                }
                let Ok(index) = usize::try_from(node - 1) else {
                    continue;
                };
                if index >= self.machines.len() {
                    continue;
                }
                let mut pick = madsim::rand::thread_rng().gen_range(0..total);
                let kind = kinds
                    .iter()
                    .find(|(_, w)| {
                        if pick < *w {
                            true
                        } else {
                            pick -= w;
                            false
                        }
                    })
                    .map(|(k, _)| *k)
                    .expect("pick is below the total weight");
                let delay = draw(aimed.delay_ms);
                let duration = draw(aimed.duration_ms)
                    .min(until_ms.saturating_sub(self.clock.now_ms() + delay));
                if delay > 0 {
                    tokio::time::sleep(Duration::from_millis(delay)).await;
                }
                self.fault_note(format!(
                    "aimed {point:?}: {kind:?} broker-{index} for {duration} ms"
                ));
                strikes += 1;
                // One strike at a time: the fault runs to its end (a restart) before the next
                // look, so the moments it causes are seen afresh.
                self.inject(kind, index, Duration::from_millis(duration), None, None)
                    .await;
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(leader: i32, leader_epoch: i32, isr: &[i32]) -> Seen {
        Seen {
            leader,
            leader_epoch,
            isr: isr.to_vec(),
        }
    }

    #[test]
    fn moments_are_read_from_two_looks() {
        let key = |t: &str| (t.to_string(), 0);
        let before = BTreeMap::from([
            (key("t"), seen(1, 3, &[1, 2])),
            (key("u"), seen(2, 1, &[1, 2, 3])),
            (key(weir::group::OFFSETS_TOPIC), seen(3, 1, &[3])),
        ]);
        let now = BTreeMap::from([
            (key("t"), seen(1, 3, &[1, 2, 3])),
            (key("u"), seen(2, 1, &[2, 3])),
            (key(weir::group::OFFSETS_TOPIC), seen(1, 2, &[1])),
            (key("new"), seen(1, 0, &[1])),
        ]);
        assert_eq!(
            moments(&before, &now),
            vec![
                (AimPoint::CoordinatorMove, 1),
                (AimPoint::IsrExpand, 1),
                (AimPoint::IsrShrink, 2),
            ]
        );
        let elected = BTreeMap::from([(key("t"), seen(2, 4, &[2]))]);
        assert_eq!(moments(&before, &elected), vec![(AimPoint::Election, 2)]);
        let leaderless = BTreeMap::from([(key("t"), seen(-1, 4, &[]))]);
        assert!(moments(&before, &leaderless).is_empty());
    }
}
