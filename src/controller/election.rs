//! Leader election and ISR changes for one partition, as pure functions of its registration
//! (the shape of Kafka's `PartitionChangeBuilder`), and the cluster-wide passes built on them:
//! a broker fenced or shutting down, a broker unfenced, preferred-leader election.
//!
//! Rules (notes §4):
//! - acceptable leader: registered, unfenced, not in controlled shutdown, not being removed;
//! - clean election: keep the current leader if it is still valid, else the first acceptable
//!   replica in assignment order that is in the target ISR (or, with an empty ISR, in the ELR:
//!   it then becomes the ISR alone);
//! - without ELR the last ISR member is never removed: the ISR stays, the leader becomes -1;
//! - ELR (KIP-966): while the target ISR is below min ISR, ELR := (ELR ∪ old ISR) − target ISR
//!   − replicas that shut down uncleanly; an ISR at or above min ISR clears it;
//! - when clean election fails, with ELR on: the last known leader (recorded when the ISR
//!   became empty) once it is acceptable again and ISR and ELR are both empty, whatever
//!   `unclean.leader.election.enable` says (Kafka 4.x `canElectLastKnownLeader`; after a
//!   whole-cluster crash every restarted replica left ISR and ELR, and this is what brings the
//!   partition back by itself). It is an unclean election: its log may have lost an
//!   unflushed tail;
//! - then, only when unclean election is enabled (the topic's config, or ElectLeaders
//!   UNCLEAN): the first acceptable replica in assignment order, whatever its log;
//! - an unclean election sets ISR := [leader], leader recovering (KIP-704), ELR cleared;
//! - with `unclean.recovery.manager.enabled` (KIP-966 part 2, [`recovery`]) the last-known
//!   leader and unclean rungs give way, for a partition with ISR and ELR empty, to the recovery
//!   election, which compares the replicas' logs; the last known ELR then also collects every
//!   ELR member removed by an unclean shutdown while the ISR is empty;
//! - preferred election: `replicas[0]` if valid, else the current leader, else another valid
//!   replica, else the last known leader as above (never the unclean pick).

use uuid::Uuid;

pub mod recovery;
pub use recovery::{Recovery, RecoveryStrategy, ReplicaLog, ReplicaReports};

use super::image::{MetadataImage, PartitionChange, PartitionRegistration, TopicMeta, NO_LEADER};
use super::ControllerError;

/// What decides a partition's election besides its registration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ElectionConfig {
    /// Eligible leader replicas (KIP-966).
    pub elr: bool,
    /// `min(min.insync.replicas, replicas)`.
    pub min_isr: usize,
    /// `unclean.leader.election.enable` for the topic.
    pub unclean: bool,
    /// KIP-966 part 2 (`unclean.recovery.manager.enabled`): the topic's strategy and timeout.
    pub recovery: Option<Recovery>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Election {
    /// Keep a valid leader, else elect (clean, then unclean if the config allows).
    Online,
    /// Move leadership to the preferred replica when it is valid.
    Preferred,
}

struct Outcome {
    leader: i32,
    unclean: bool,
}

/// The change that takes `p` to `target_isr` and elects a leader as `election` says; `None`
/// when nothing would change. `acceptable` says who may lead; `unclean_shutdown` replicas may
/// not enter the ELR. A reassignment in progress completes when the ISR allows
/// ([`Target::complete_reassignment`]).
pub fn change_partition(
    key: (Uuid, i32),
    p: &PartitionRegistration,
    target_isr: Vec<i32>,
    election: Election,
    config: ElectionConfig,
    acceptable: &dyn Fn(i32) -> bool,
    unclean_shutdown: &[i32],
) -> Option<PartitionChange> {
    let target = Target::keep_replicas(p, target_isr);
    change_partition_to(
        key,
        p,
        target,
        election,
        config,
        acceptable,
        unclean_shutdown,
    )
}

/// Where a change takes a partition besides its leader (Kafka's `PartitionChangeBuilder`
/// targets): the ISR, the replicas and the reassignment's adding and removing sets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub isr: Vec<i32>,
    pub replicas: Vec<i32>,
    pub adding: Vec<i32>,
    pub removing: Vec<i32>,
}

impl Target {
    /// `target_isr` with `p`'s replicas and reassignment as they are.
    pub fn keep_replicas(p: &PartitionRegistration, target_isr: Vec<i32>) -> Target {
        Target {
            isr: target_isr,
            replicas: p.replicas.clone(),
            adding: p.adding_replicas.clone(),
            removing: p.removing_replicas.clone(),
        }
    }

    /// Kafka's `PartitionReassignmentReplicas.maybeCompleteReassignment`: with ISR' = ISR −
    /// removing and replicas' = replicas − removing, a reassignment completes when both are
    /// non-empty and ISR' holds every member of replicas'. The removing replicas then leave
    /// both, and adding and removing are cleared.
    pub fn complete_reassignment(&mut self) {
        if self.adding.is_empty() && self.removing.is_empty() {
            return;
        }
        let removing = &self.removing;
        let isr: Vec<i32> = self
            .isr
            .iter()
            .copied()
            .filter(|r| !removing.contains(r))
            .collect();
        let replicas: Vec<i32> = self
            .replicas
            .iter()
            .copied()
            .filter(|r| !removing.contains(r))
            .collect();
        if isr.is_empty() || replicas.is_empty() || !replicas.iter().all(|r| isr.contains(r)) {
            return;
        }
        self.isr = isr;
        self.replicas = replicas;
        self.adding.clear();
        self.removing.clear();
    }
}

/// [`change_partition`] towards a whole [`Target`]: the replicas may change (a reassignment
/// starting, completing or reverting). A replica leaving the replicas bumps the leader epoch,
/// which fences it (Kafka's `triggerLeaderEpochBumpForReplicaReassignmentIfNeeded`); a new
/// leader is elected only if the old one left the ISR.
pub fn change_partition_to(
    key: (Uuid, i32),
    p: &PartitionRegistration,
    mut target: Target,
    election: Election,
    config: ElectionConfig,
    acceptable: &dyn Fn(i32) -> bool,
    unclean_shutdown: &[i32],
) -> Option<PartitionChange> {
    target.complete_reassignment();
    let Target {
        isr: target_isr,
        replicas,
        adding,
        removing,
    } = target;
    assert!(
        !replicas.is_empty() && target_isr.iter().all(|r| replicas.contains(r)),
        "{key:?}: target ISR {target_isr:?} outside the target replicas {replicas:?}"
    );
    let mut isr = target_isr;
    let mut elr = p.elr.clone();
    // ELR membership.
    if config.elr {
        if isr.len() >= config.min_isr {
            elr.clear();
        } else {
            // In assignment order, so the record does not depend on set iteration.
            elr = replicas
                .iter()
                .copied()
                .filter(|r| elr.contains(r) || p.isr.contains(r))
                .filter(|r| !isr.contains(r) && !unclean_shutdown.contains(r))
                .collect();
        }
    } else {
        elr.retain(|r| replicas.contains(r));
    }
    let mut change = PartitionChange::new(key.0, key.1);
    // With the recovery manager, a partition with ISR and ELR empty waits for the recovery
    // election (which compares logs) instead of the last-known-leader and unclean rungs.
    let awaiting_recovery =
        config.elr && config.recovery.is_some() && isr.is_empty() && elr.is_empty();
    // Election.
    let valid =
        |r: i32| (isr.contains(&r) || (isr.is_empty() && elr.contains(&r))) && acceptable(r);
    let last_known = || {
        (config.elr
            && config.recovery.is_none()
            && isr.is_empty()
            && elr.is_empty()
            && p.last_known_elr.len() == 1
            && replicas.contains(&p.last_known_elr[0])
            && acceptable(p.last_known_elr[0]))
        .then(|| p.last_known_elr[0])
    };
    let outcome = match election {
        Election::Preferred => {
            let preferred = replicas[0];
            if valid(preferred) {
                Outcome {
                    leader: preferred,
                    unclean: false,
                }
            } else if p.leader != NO_LEADER && valid(p.leader) {
                Outcome {
                    leader: p.leader,
                    unclean: false,
                }
            } else if let Some(r) = replicas[1..].iter().copied().find(|r| valid(*r)) {
                Outcome {
                    leader: r,
                    unclean: false,
                }
            } else {
                unclean_choice(
                    &replicas,
                    ElectionConfig {
                        unclean: false,
                        ..config
                    },
                    acceptable,
                    last_known(),
                )
            }
        }
        Election::Online => {
            if p.leader != NO_LEADER && valid(p.leader) {
                Outcome {
                    leader: p.leader,
                    unclean: false,
                }
            } else if let Some(r) = replicas.iter().copied().find(|r| valid(*r)) {
                Outcome {
                    leader: r,
                    unclean: false,
                }
            } else if awaiting_recovery {
                Outcome {
                    leader: NO_LEADER,
                    unclean: false,
                }
            } else {
                unclean_choice(&replicas, config, acceptable, last_known())
            }
        }
    };
    if outcome.leader != p.leader {
        if elr.contains(&outcome.leader) {
            isr = vec![outcome.leader];
            elr.retain(|r| *r != outcome.leader);
        }
        change.leader = Some(outcome.leader);
        if outcome.unclean {
            change.isr = Some(vec![outcome.leader]);
            if !p.leader_recovering {
                change.leader_recovering = Some(true);
            }
        }
    }
    // An unclean election or a cluster without ELR keeps no ELR.
    if change.isr.is_some() || !config.elr {
        elr.clear();
    }
    if elr != p.elr {
        change.elr = Some(elr);
    }
    // With ELR the ISR may become empty; without, the last member stays.
    if change.isr.is_none() && (!isr.is_empty() || config.elr) && isr != p.isr {
        change.isr = Some(isr);
    }
    // The last known leader: recorded the first time the partition loses its whole ISR,
    // cleared once it has a leader again.
    let leader_after = change.leader.unwrap_or(p.leader);
    if config.elr && change.isr.as_ref().is_some_and(|i| i.is_empty()) {
        if p.leader != NO_LEADER && p.last_known_elr != [p.leader] {
            change.last_known_elr = Some(vec![p.leader]);
        }
    } else if leader_after != NO_LEADER && !p.last_known_elr.is_empty() {
        change.last_known_elr = Some(Vec::new());
    } else if config.elr
        && config.recovery.is_some()
        && change.isr.as_ref().unwrap_or(&p.isr).is_empty()
    {
        // The full last-known ELR: ELR members an unclean shutdown removed join it.
        let lke: Vec<i32> = replicas
            .iter()
            .copied()
            .filter(|r| {
                p.last_known_elr.contains(r) || (p.elr.contains(r) && unclean_shutdown.contains(r))
            })
            .collect();
        if lke != p.last_known_elr {
            change.last_known_elr = Some(lke);
        }
    }
    // The replica set and the reassignment.
    if !p.replicas.iter().all(|r| replicas.contains(r)) && change.leader.is_none() {
        change.leader = Some(p.leader);
    }
    if replicas != p.replicas {
        change.replicas = Some(replicas);
    }
    if adding != p.adding_replicas {
        change.adding_replicas = Some(adding);
    }
    if removing != p.removing_replicas {
        change.removing_replicas = Some(removing);
    }
    (!change.is_empty()).then_some(change)
}

fn unclean_choice(
    replicas: &[i32],
    config: ElectionConfig,
    acceptable: &dyn Fn(i32) -> bool,
    last_known: Option<i32>,
) -> Outcome {
    if let Some(leader) = last_known {
        return Outcome {
            leader,
            unclean: true,
        };
    }
    if config.unclean {
        if let Some(r) = replicas.iter().copied().find(|r| acceptable(*r)) {
            return Outcome {
                leader: r,
                unclean: true,
            };
        }
    }
    Outcome {
        leader: NO_LEADER,
        unclean: false,
    }
}

/// The changes for a broker leaving service (fenced, or in controlled shutdown): out of every
/// ISR, and every partition it led gets a new leader (or none). `config` gives each topic's
/// election settings.
pub fn remove_broker(
    image: &MetadataImage,
    broker: i32,
    config: &dyn Fn(&TopicMeta) -> ElectionConfig,
) -> Vec<PartitionChange> {
    let acceptable = |r: i32| r != broker && image.is_active_broker(r);
    image
        .partitions()
        .filter(|(_, p)| p.leader == broker || p.isr.contains(&broker))
        .filter_map(|(key, p)| {
            let topic = image.topic_by_id(key.0)?;
            let target: Vec<i32> = p.isr.iter().copied().filter(|r| *r != broker).collect();
            change_partition(
                key,
                p,
                target,
                Election::Online,
                config(topic),
                &acceptable,
                &[],
            )
        })
        .collect()
}

/// The changes for a broker that restarted after an unclean shutdown (KIP-966): with ELR on,
/// out of every ISR and ELR, and not electable, wherever its partitions' topics use ELR.
pub fn remove_unclean_broker(
    image: &MetadataImage,
    broker: i32,
    config: &dyn Fn(&TopicMeta) -> ElectionConfig,
) -> Vec<PartitionChange> {
    let acceptable = |r: i32| r != broker && image.is_active_broker(r);
    image
        .partitions()
        .filter(|(_, p)| p.isr.contains(&broker) || p.elr.contains(&broker))
        .filter_map(|(key, p)| {
            let topic = image.topic_by_id(key.0)?;
            let config = config(topic);
            if !config.elr {
                return None;
            }
            let target: Vec<i32> = p.isr.iter().copied().filter(|r| *r != broker).collect();
            change_partition(
                key,
                p,
                target,
                Election::Online,
                config,
                &acceptable,
                &[broker],
            )
        })
        .collect()
}

/// An online election, ISR kept, for every partition now led by `led_by` (`NO_LEADER`: the
/// leaderless ones), choosing among the replicas `acceptable` allows.
fn reelect_led_by(
    image: &MetadataImage,
    led_by: i32,
    acceptable: &dyn Fn(i32) -> bool,
    config: &dyn Fn(&TopicMeta) -> ElectionConfig,
) -> Vec<PartitionChange> {
    image
        .partitions()
        .filter(|(_, p)| p.leader == led_by)
        .filter_map(|(key, p)| {
            let topic = image.topic_by_id(key.0)?;
            change_partition(
                key,
                p,
                p.isr.clone(),
                Election::Online,
                config(topic),
                acceptable,
                &[],
            )
        })
        .collect()
}

/// Every partition `broker` leads gets another leader from its ISR (or none until the broker
/// is back, when the leaderless election picks it at a new epoch), keeping ISR and ELR.
pub fn move_leadership_off(
    image: &MetadataImage,
    broker: i32,
    config: &dyn Fn(&TopicMeta) -> ElectionConfig,
) -> Vec<PartitionChange> {
    let acceptable = |r: i32| r != broker && image.is_active_broker(r);
    reelect_led_by(image, broker, &acceptable, config)
}

/// Elections for every leaderless partition, with `added` acceptable even though the image
/// still shows it fenced (it is being unfenced in the same batch). Also the periodic retry of
/// unclean elections.
pub fn elect_leaderless(
    image: &MetadataImage,
    added: Option<i32>,
    config: &dyn Fn(&TopicMeta) -> ElectionConfig,
) -> Vec<PartitionChange> {
    let acceptable = |r: i32| Some(r) == added || image.is_active_broker(r);
    reelect_led_by(image, NO_LEADER, &acceptable, config)
}

/// Preferred-leader election (ElectLeaders PREFERRED, `auto.leader.rebalance.enable`) for the
/// given partitions: only those whose preferred replica is valid and not already leading.
pub fn elect_preferred(
    image: &MetadataImage,
    partitions: &[(Uuid, i32)],
    config: &dyn Fn(&TopicMeta) -> ElectionConfig,
) -> Vec<PartitionChange> {
    let acceptable = |r: i32| image.is_active_broker(r);
    partitions
        .iter()
        .filter_map(|&key| {
            let p = image.partition(key.0, key.1)?;
            let topic = image.topic_by_id(key.0)?;
            if p.leader == p.replicas[0] {
                return None;
            }
            change_partition(
                key,
                p,
                p.isr.clone(),
                Election::Preferred,
                config(topic),
                &acceptable,
                &[],
            )
            .filter(|c| c.leader == Some(p.replicas[0]))
        })
        .collect()
}

/// ElectLeaders for one partition (Kafka's `electLeaders`): a preferred election moves the
/// leadership to `replicas[0]`; an unclean one elects a leaderless partition from outside its
/// ISR if need be. `Ok(None)`: nothing to do (ELECTION_NOT_NEEDED).
pub fn elect_on_request(
    image: &MetadataImage,
    key: (Uuid, i32),
    unclean: bool,
    config: &dyn Fn(&TopicMeta) -> ElectionConfig,
) -> Result<Option<PartitionChange>, ControllerError> {
    let topic = image
        .topic_by_id(key.0)
        .ok_or(ControllerError::UnknownTopicId(key.0))?;
    let p = image
        .partition(key.0, key.1)
        .ok_or_else(|| ControllerError::UnknownTopic(format!("{}-{}", topic.name, key.1)))?;
    let acceptable = |r: i32| image.is_active_broker(r);
    if unclean {
        if p.leader != NO_LEADER {
            return Ok(None);
        }
        // The operator's unclean election: Kafka 4.x's rungs (last known leader, else any
        // live replica), whatever the recovery manager would wait for.
        let config = ElectionConfig {
            unclean: true,
            recovery: None,
            ..config(topic)
        };
        let change = change_partition(
            key,
            p,
            p.isr.clone(),
            Election::Online,
            config,
            &acceptable,
            &[],
        );
        return match change {
            Some(c) if c.leader.is_some_and(|l| l != NO_LEADER) => Ok(Some(c)),
            _ => Err(ControllerError::EligibleLeadersNotAvailable(format!(
                "{}-{}: no replica is alive to lead",
                topic.name, key.1
            ))),
        };
    }
    if p.leader == p.replicas[0] {
        return Ok(None);
    }
    let change = change_partition(
        key,
        p,
        p.isr.clone(),
        Election::Preferred,
        config(topic),
        &acceptable,
        &[],
    );
    match change {
        Some(c) if c.leader == Some(p.replicas[0]) => Ok(Some(c)),
        _ => Err(ControllerError::PreferredLeaderNotAvailable(format!(
            "{}-{}: the preferred replica {} is not in the ISR or not alive",
            topic.name, key.1, p.replicas[0]
        ))),
    }
}

#[cfg(test)]
mod tests;
