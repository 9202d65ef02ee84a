//! Recovery elections (KIP-966 part 2): each strategy as a table of cases, the last-known ELR
//! they wait for, and the controller's memory of reports.

use super::*;
use crate::controller::election::{change_partition, Election};
use crate::controller::image::{PartitionRecord, TopicMeta};

const T: Uuid = Uuid::from_u128(1);
const KEY: (Uuid, i32) = (T, 0);

fn config(strategy: Option<RecoveryStrategy>) -> ElectionConfig {
    ElectionConfig {
        elr: true,
        min_isr: 2,
        unclean: false,
        recovery: strategy.map(|strategy| Recovery {
            strategy,
            timeout_ms: 1000,
        }),
    }
}

fn leaderless(lke: &[i32]) -> PartitionRegistration {
    PartitionRegistration {
        directories: Vec::new(),
        replicas: vec![1, 2, 3],
        isr: vec![],
        elr: vec![],
        last_known_elr: lke.to_vec(),
        leader: NO_LEADER,
        leader_epoch: 7,
        partition_epoch: 20,
        leader_recovering: false,
        adding_replicas: vec![],
        removing_replicas: vec![],
    }
}

fn log(last_epoch: i32, log_end: i64) -> ReplicaLog {
    ReplicaLog {
        last_epoch,
        log_end,
    }
}

#[test]
fn each_strategy_elects_as_the_kip_says() {
    use RecoveryStrategy::{Aggressive, Balanced};
    let never = RecoveryStrategy::None;
    // Replicas [1, 2, 3]; reports per replica (None: not reported); acceptable replicas.
    #[allow(clippy::type_complexity)]
    let cases: Vec<(
        &str,
        Option<RecoveryStrategy>,
        &[i32],
        [Option<ReplicaLog>; 3],
        &[i32],
        i64,
        Option<i32>,
    )> = vec![
        (
            "manager off: no recovery election (Kafka 4.x's rungs decide)",
            None,
            &[1, 2],
            [Some(log(5, 10)), Some(log(5, 20)), None],
            &[1, 2, 3],
            0,
            None,
        ),
        (
            "balanced: every last-known ELR member back: the longest log at the highest epoch",
            Some(Balanced),
            &[1, 2],
            [Some(log(5, 10)), Some(log(5, 20)), Some(log(5, 99))],
            &[1, 2, 3],
            0,
            Some(2),
        ),
        (
            "balanced: the highest last epoch wins over a longer log",
            Some(Balanced),
            &[1, 2],
            [Some(log(6, 10)), Some(log(5, 20)), None],
            &[1, 2],
            0,
            Some(1),
        ),
        (
            "balanced: a tie goes to the first in assignment order",
            Some(Balanced),
            &[2, 3],
            [None, Some(log(5, 20)), Some(log(5, 20))],
            &[2, 3],
            0,
            Some(2),
        ),
        (
            "balanced: a member not reported yet is waited for",
            Some(Balanced),
            &[1, 2],
            [Some(log(5, 10)), None, Some(log(9, 99))],
            &[1, 2, 3],
            999,
            None,
        ),
        (
            "balanced: a member fenced is waited for",
            Some(Balanced),
            &[1, 2],
            [Some(log(5, 10)), Some(log(5, 20)), None],
            &[1],
            999,
            None,
        ),
        (
            "balanced: past the timeout, the best of the members back (never a non-member)",
            Some(Balanced),
            &[1, 2],
            [Some(log(5, 10)), None, Some(log(9, 99))],
            &[1, 3],
            1000,
            Some(1),
        ),
        (
            "balanced: past the timeout with no member back, nothing",
            Some(Balanced),
            &[1, 2],
            [None, None, Some(log(9, 99))],
            &[3],
            5000,
            None,
        ),
        (
            "balanced without a last-known ELR waits for every replica",
            Some(Balanced),
            &[],
            [Some(log(5, 10)), Some(log(5, 20)), Some(log(4, 99))],
            &[1, 2, 3],
            0,
            Some(2),
        ),
        (
            "aggressive: at once, the best of any replica back and reported",
            Some(Aggressive),
            &[1],
            [None, Some(log(5, 20)), Some(log(5, 30))],
            &[1, 2, 3],
            0,
            Some(3),
        ),
        (
            "aggressive: nobody reported, nothing",
            Some(Aggressive),
            &[1],
            [None, None, None],
            &[1, 2, 3],
            0,
            None,
        ),
        (
            "none: never by itself",
            Some(never),
            &[1, 2],
            [Some(log(5, 10)), Some(log(5, 20)), None],
            &[1, 2],
            1_000_000,
            None,
        ),
    ];
    for (name, strategy, lke, reports, acceptable, waited, want) in cases {
        let p = leaderless(lke);
        let ok = |r: i32| acceptable.contains(&r);
        let reported = |r: i32| reports[(r - 1) as usize];
        let change = recover_partition(KEY, &p, config(strategy), waited, &ok, &reported);
        assert_eq!(change.as_ref().and_then(|c| c.leader), want, "{name}");
        if let Some(c) = change {
            // Unclean: alone in the ISR, recovering (KIP-704), the last-known ELR spent.
            let leader = c.leader.unwrap();
            assert_eq!(c.isr, Some(vec![leader]), "{name}");
            assert_eq!(c.leader_recovering, Some(true), "{name}");
            assert_eq!(c.last_known_elr, (!lke.is_empty()).then(Vec::new), "{name}");
        }
    }
}

#[test]
fn a_partition_with_an_isr_or_elr_is_not_recovered() {
    let mut p = leaderless(&[1]);
    p.elr = vec![2];
    let any = |_: i32| Some(log(1, 1));
    let config = config(Some(RecoveryStrategy::Aggressive));
    assert!(recover_partition(KEY, &p, config, 0, &|_| true, &any).is_none());
    let mut p = leaderless(&[1]);
    p.isr = vec![2];
    assert!(recover_partition(KEY, &p, config, 0, &|_| true, &any).is_none());
}

#[test]
fn with_the_manager_the_last_known_elr_collects_unclean_elr_members_and_waits() {
    let balanced = config(Some(RecoveryStrategy::Balanced));
    // Leader 1 fenced last: ISR empties, ELR keeps 1 and 2, the last-known ELR is [1].
    let p = PartitionRegistration {
        isr: vec![1],
        elr: vec![2],
        last_known_elr: vec![],
        leader: 1,
        ..leaderless(&[])
    };
    let c = change_partition(KEY, &p, vec![], Election::Online, balanced, &|_| false, &[]).unwrap();
    assert_eq!(
        (c.leader, c.elr.clone(), c.last_known_elr.clone()),
        (Some(NO_LEADER), Some(vec![1, 2]), Some(vec![1]))
    );
    let mut p = p.clone();
    p.apply(&c);
    // 2 restarts after an unclean shutdown: out of the ELR, into the last-known ELR.
    let c = change_partition(
        KEY,
        &p,
        vec![],
        Election::Online,
        balanced,
        &|_| false,
        &[2],
    )
    .unwrap();
    assert_eq!(
        (c.elr.clone(), c.last_known_elr.clone()),
        (Some(vec![1]), Some(vec![1, 2]))
    );
    p.apply(&c);
    // 1 likewise: the ELR empties; with the manager it is not elected as the last known
    // leader, even when acceptable (the recovery election compares logs first)...
    let c = change_partition(KEY, &p, vec![], Election::Online, balanced, &|_| true, &[1]).unwrap();
    assert_eq!(
        (c.leader, c.elr.clone(), c.last_known_elr.clone()),
        (None, Some(vec![]), None)
    );
    p.apply(&c);
    assert!(
        change_partition(KEY, &p, vec![], Election::Online, balanced, &|_| true, &[]).is_none()
    );
    // ...while without it, Kafka 4.x's last-known-leader rung elects it.
    let mut off = p.clone();
    off.last_known_elr = vec![1];
    let c = change_partition(
        KEY,
        &off,
        vec![],
        Election::Online,
        config(None),
        &|_| true,
        &[],
    )
    .unwrap();
    assert_eq!(c.leader, Some(1));
}

/// An image with brokers 1..=3 (epochs 0..=2, unfenced) and partition 0 of topic "t" as `p`.
fn image(p: &PartitionRegistration) -> MetadataImage {
    crate::controller::election::tests::image_with([PartitionRecord {
        directories: Vec::new(),
        topic_id: T,
        partition: 0,
        replicas: p.replicas.clone(),
        isr: p.isr.clone(),
        elr: p.elr.clone(),
        last_known_elr: p.last_known_elr.clone(),
        leader: p.leader,
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch,
        leader_recovering: p.leader_recovering,
    }])
}

#[test]
fn reports_count_only_from_the_registered_epoch_and_the_timeout_runs_from_first_sight() {
    let image = image(&leaderless(&[1, 2]));
    let balanced = |_: &TopicMeta| config(Some(RecoveryStrategy::Balanced));
    let mut reports = ReplicaReports::default();
    reports.report(1, 0, &[(KEY, log(5, 10))]);
    // Broker 2's report from an epoch it is no longer registered with does not count.
    reports.report(2, 7, &[(KEY, log(5, 20))]);
    assert!(reports.elect(&image, 100, 10, &balanced).is_empty());
    // An older epoch than the one kept is discarded.
    reports.report(2, 1, &[(KEY, log(5, 20))]);
    assert!(reports.elect(&image, 200, 10, &balanced).is_empty());
    // Past the timeout (1000 ms after first seen at 100): the best member back, broker 1.
    assert!(reports.elect(&image, 1099, 10, &balanced).is_empty());
    let changes = reports.elect(&image, 1100, 10, &balanced);
    assert_eq!(changes.len(), 1);
    assert_eq!(changes[0].leader, Some(1));
    // With 2's report at its registered epoch, at once: the longer log.
    let mut fresh = ReplicaReports::default();
    fresh.report(1, 0, &[(KEY, log(5, 10))]);
    fresh.report(2, 1, &[(KEY, log(5, 20))]);
    let changes = fresh.elect(&image, 0, 10, &balanced);
    assert_eq!(changes[0].leader, Some(2));
    // The limit bounds a pass.
    assert!(fresh.elect(&image, 0, 0, &balanced).is_empty());
}

#[test]
fn strategies_parse_and_derive_as_kafka_names_them() {
    assert_eq!(
        RecoveryStrategy::parse(" balanced"),
        Some(RecoveryStrategy::Balanced)
    );
    assert_eq!(
        RecoveryStrategy::parse("AGGRESSIVE"),
        Some(RecoveryStrategy::Aggressive)
    );
    assert_eq!(
        RecoveryStrategy::parse("None"),
        Some(RecoveryStrategy::None)
    );
    assert_eq!(RecoveryStrategy::parse("eager"), None);
    assert_eq!(
        RecoveryStrategy::derived(true),
        RecoveryStrategy::Aggressive
    );
    assert_eq!(RecoveryStrategy::derived(false), RecoveryStrategy::Balanced);
}
