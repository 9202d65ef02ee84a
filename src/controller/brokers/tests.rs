use super::*;
use crate::controller::election::ElectionConfig;
use crate::controller::image::{PartitionRecord, PartitionRegistration, NO_LEADER};

const TIMEOUT: i64 = 9000;
const T: Uuid = Uuid::from_u128(77);

fn config(_: &TopicMeta) -> ElectionConfig {
    ElectionConfig {
        elr: true,
        min_isr: 2,
        unclean: false,
        recovery: None,
    }
}

fn request(id: i32, incarnation: u128) -> RegistrationRequest {
    RegistrationRequest {
        log_dirs: Vec::new(),
        id,
        incarnation: Uuid::from_u128(incarnation),
        listeners: vec![BrokerEndpoint {
            name: "PLAINTEXT".into(),
            host: "127.0.0.1".into(),
            port: 9000 + id as u16,
        }],
        rack: None,
        previous_epoch: -1,
        durable: false,
    }
}

fn commit(image: &mut MetadataImage, records: &[MetadataRecord]) {
    for r in records {
        let at = image.applied();
        image.apply(at, r);
    }
}

fn beat(id: i32, image: &MetadataImage) -> HeartbeatRequest {
    HeartbeatRequest {
        offline_dirs: Vec::new(),
        cordoned_dirs: None,
        id,
        epoch: image.broker(id).unwrap().epoch,
        metadata_offset: image.applied() - 1,
        want_fence: false,
        want_shutdown: false,
        replica_logs: Vec::new(),
    }
}

/// Brokers 1..=3 registered and unfenced, topic "t" with partition 0 on [1, 2, 3] led by 1.
fn cluster(sessions: &mut BrokerSessions) -> MetadataImage {
    let mut image = MetadataImage::default();
    for id in 1..=3 {
        let records = sessions
            .register(&image, &request(id, id as u128), 0, &config)
            .unwrap();
        commit(&mut image, &records);
    }
    for id in 1..=3 {
        let d = sessions
            .heartbeat(&image, &beat(id, &image), 0, &config)
            .unwrap();
        assert!(!d.reply.is_fenced);
        commit(&mut image, &d.records);
    }
    commit(
        &mut image,
        &[
            MetadataRecord::topic("t", T, Default::default()),
            MetadataRecord::Partition(PartitionRecord {
                directories: Vec::new(),
                topic_id: T,
                partition: 0,
                replicas: vec![1, 2, 3],
                isr: vec![1, 2, 3],
                elr: vec![],
                last_known_elr: vec![],
                leader: 1,
                leader_epoch: 0,
                partition_epoch: 0,
                leader_recovering: false,
            }),
        ],
    );
    image
}

fn p0(image: &MetadataImage) -> &PartitionRegistration {
    image.partition(T, 0).unwrap()
}

#[test]
fn the_broker_epoch_is_the_registration_offset_and_grows_across_incarnations() {
    let mut sessions = BrokerSessions::new(TIMEOUT);
    let mut image = cluster(&mut sessions);
    assert_eq!(registered_epoch(&image, 2, Uuid::from_u128(2)), Some(1));
    // The same incarnation again: same epoch, nothing written.
    assert!(sessions
        .register(&image, &request(2, 2), 10, &config)
        .unwrap()
        .is_empty());
    // A new incarnation while the old session lives is refused...
    assert!(matches!(
        sessions.register(&image, &request(2, 99), 10, &config),
        Err(ControllerError::DuplicateBrokerRegistration(_))
    ));
    // ...and accepted once it expired; the new registration starts fenced.
    let records = sessions
        .register(&image, &request(2, 99), 10 + TIMEOUT + 1, &config)
        .unwrap();
    // No clean-shutdown epoch: it leaves the ISR first (KIP-966), then registers.
    assert!(matches!(records[0], MetadataRecord::PartitionChange(_)));
    let at = image.applied() + records.len() as i64 - 1;
    commit(&mut image, &records);
    let b = image.broker(2).unwrap();
    assert_eq!((b.epoch, b.fenced), (at, true));
    assert!(b.epoch > 1);
    assert_eq!(p0(&image).isr, [1, 3]);
}

#[test]
fn heartbeats_with_another_epoch_are_stale() {
    let mut sessions = BrokerSessions::new(TIMEOUT);
    let image = cluster(&mut sessions);
    let mut hb = beat(1, &image);
    hb.epoch += 1;
    assert!(matches!(
        sessions.heartbeat(&image, &hb, 1, &config),
        Err(ControllerError::StaleBrokerEpoch(_))
    ));
    hb.id = 42;
    assert!(matches!(
        sessions.heartbeat(&image, &hb, 1, &config),
        Err(ControllerError::StaleBrokerEpoch(_))
    ));
}

#[test]
fn a_broker_is_unfenced_only_once_it_has_caught_up_to_its_registration() {
    let mut sessions = BrokerSessions::new(TIMEOUT);
    let mut image = MetadataImage::default();
    let records = sessions
        .register(&image, &request(1, 1), 0, &config)
        .unwrap();
    commit(&mut image, &records);
    let mut hb = beat(1, &image);
    hb.metadata_offset = -1; // has not applied its own registration (offset 0) yet
    let d = sessions.heartbeat(&image, &hb, 1, &config).unwrap();
    assert!(d.records.is_empty() && d.reply.is_fenced);
    hb.metadata_offset = 0;
    hb.want_fence = true;
    let d = sessions.heartbeat(&image, &hb, 1, &config).unwrap();
    assert!(d.records.is_empty() && d.reply.is_fenced);
    hb.want_fence = false;
    let d = sessions.heartbeat(&image, &hb, 1, &config).unwrap();
    assert!(!d.reply.is_fenced);
    commit(&mut image, &d.records);
    assert!(image.is_active_broker(1));
}

#[test]
fn a_silent_broker_is_fenced_one_per_tick_and_loses_its_leaderships() {
    let mut sessions = BrokerSessions::new(TIMEOUT);
    let mut image = cluster(&mut sessions);
    // Broker 3 keeps heartbeating; 1 and 2 go silent.
    let d = sessions
        .heartbeat(&image, &beat(3, &image), 5000, &config)
        .unwrap();
    assert!(d.records.is_empty());
    assert!(sessions.tick(&image, TIMEOUT, &config).is_empty());
    let records = sessions.tick(&image, TIMEOUT + 1, &config);
    // Broker 1 first (ties broken by id): out of the ISR, leadership to 2, then fenced.
    assert!(matches!(
        records.last(),
        Some(MetadataRecord::BrokerChange {
            id: 1,
            fenced: Some(true),
            ..
        })
    ));
    commit(&mut image, &records);
    assert_eq!((p0(&image).leader, &p0(&image).isr), (2, &vec![2, 3]));
    let records = sessions.tick(&image, TIMEOUT + 2, &config);
    assert!(matches!(
        records.last(),
        Some(MetadataRecord::BrokerChange {
            id: 2,
            fenced: Some(true),
            ..
        })
    ));
    commit(&mut image, &records);
    // ISR [3] is below min ISR 2: 2 goes to the ELR.
    assert_eq!(
        (p0(&image).leader, &p0(&image).isr, &p0(&image).elr),
        (3, &vec![3], &vec![2])
    );
    assert!(sessions.tick(&image, TIMEOUT + 3, &config).is_empty());
}

#[test]
fn unfencing_elects_leaderless_partitions() {
    let mut sessions = BrokerSessions::new(TIMEOUT);
    let mut image = cluster(&mut sessions);
    for (id, at) in [(1, 1), (2, 2), (3, 3)] {
        let mut hb = beat(id, &image);
        hb.want_fence = true;
        let d = sessions.heartbeat(&image, &hb, at, &config).unwrap();
        assert!(d.reply.is_fenced);
        commit(&mut image, &d.records);
    }
    let p = p0(&image);
    assert_eq!(
        (p.leader, p.isr.is_empty(), &p.elr),
        (NO_LEADER, true, &vec![2, 3])
    );
    // Broker 2 is back: an ELR member, it leads alone.
    let d = sessions
        .heartbeat(&image, &beat(2, &image), 10, &config)
        .unwrap();
    commit(&mut image, &d.records);
    let p = p0(&image);
    assert_eq!((p.leader, &p.isr, &p.elr), (2, &vec![2], &vec![3]));
}

#[test]
fn controlled_shutdown_moves_leaderships_before_it_is_granted() {
    let mut sessions = BrokerSessions::new(TIMEOUT);
    let mut image = cluster(&mut sessions);
    let mut hb = beat(1, &image);
    hb.want_shutdown = true;
    let d = sessions.heartbeat(&image, &hb, 1, &config).unwrap();
    assert!(d.reply.in_controlled_shutdown && !d.reply.should_shut_down);
    commit(&mut image, &d.records);
    assert_eq!((p0(&image).leader, &p0(&image).isr), (2, &vec![2, 3]));
    assert!(!image.is_active_broker(1));
    // Granted once the broker has applied the changes (and leads nothing)...
    let mut hb = beat(1, &image);
    hb.want_shutdown = true;
    hb.metadata_offset -= 1;
    let d = sessions.heartbeat(&image, &hb, 2, &config).unwrap();
    assert!(!d.reply.should_shut_down);
    hb.metadata_offset += 1;
    let d = sessions.heartbeat(&image, &hb, 3, &config).unwrap();
    // ...and so has every active broker: 2, the new leader, must know it leads before 1
    // stops, or acks=all writes would find no leader in between.
    assert!(d.records.is_empty() && !d.reply.should_shut_down);
    sessions
        .heartbeat(&image, &beat(2, &image), 3, &config)
        .unwrap();
    let d = sessions.heartbeat(&image, &hb, 3, &config).unwrap();
    assert!(!d.reply.should_shut_down, "broker 3 has not caught up");
    let mut behind = beat(3, &image);
    behind.metadata_offset -= 1;
    sessions.heartbeat(&image, &behind, 3, &config).unwrap();
    assert!(
        !sessions
            .heartbeat(&image, &hb, 3, &config)
            .unwrap()
            .reply
            .should_shut_down
    );
    sessions
        .heartbeat(&image, &beat(3, &image), 3, &config)
        .unwrap();
    let d = sessions.heartbeat(&image, &hb, 3, &config).unwrap();
    // Granted, and fenced as it goes: its next incarnation need not wait for a session to
    // expire (a rolling restart is not slowed by broker.session.timeout.ms).
    assert!(d.reply.should_shut_down && d.reply.is_fenced);
    commit(&mut image, &d.records);
    assert!(image.broker(1).unwrap().fenced);
    let mut restart = request(1, 77);
    restart.previous_epoch = image.broker(1).unwrap().epoch;
    let records = sessions.register(&image, &restart, 4, &config).unwrap();
    assert!(matches!(
        records.as_slice(),
        [MetadataRecord::RegisterBroker { id: 1, .. }]
    ));
    // A fenced broker asking to shut down may go at once.
    let mut hb = beat(2, &image);
    hb.want_fence = true;
    let records = sessions.heartbeat(&image, &hb, 4, &config).unwrap().records;
    commit(&mut image, &records);
    let mut hb = beat(2, &image);
    hb.want_shutdown = true;
    assert!(
        sessions
            .heartbeat(&image, &hb, 5, &config)
            .unwrap()
            .reply
            .should_shut_down
    );
}

#[test]
fn a_broker_back_from_an_unclean_shutdown_leaves_every_isr_and_elr() {
    let mut sessions = BrokerSessions::new(TIMEOUT);
    let mut image = cluster(&mut sessions);
    // Broker 3 drops out of the ISR into the ELR first (ISR [1] below min ISR 2).
    let mut change = crate::controller::PartitionChange::new(T, 0);
    change.isr = Some(vec![1]);
    change.elr = Some(vec![2, 3]);
    commit(&mut image, &[MetadataRecord::PartitionChange(change)]);
    let late = TIMEOUT * 2;
    // A clean restart of broker 2 (it names its last epoch): nothing but the registration.
    let mut clean = request(2, 20);
    clean.previous_epoch = image.broker(2).unwrap().epoch;
    let records = sessions.register(&image, &clean, late, &config).unwrap();
    assert_eq!(records.len(), 1);
    // An unclean restart of broker 3: out of the ELR before it registers again.
    let records = sessions
        .register(&image, &request(3, 30), late, &config)
        .unwrap();
    assert_eq!(records.len(), 2);
    commit(&mut image, &records);
    assert_eq!(p0(&image).elr, [2]);
    assert!(image.broker(3).unwrap().fenced);
}

/// KIP-966's "last replica standing" (notes §7.4), message by message: brokers 1 and 2 drop
/// out (ISR [3], below min ISR 2, so 2 goes to the ELR), then 3 crashes and comes back from an
/// unclean shutdown. With ELR the controller takes 3 out and 2 leads once it returns; without
/// (Kafka before 4.1, the planted `no-eligible-leader-replicas`), 3 stays the ISR and is
/// re-elected with whatever its log lost.
#[test]
fn the_last_replica_standing_is_not_re_elected_after_an_unclean_restart() {
    for elr in [true, false] {
        let elections = |_: &TopicMeta| ElectionConfig {
            elr,
            min_isr: 2,
            unclean: false,
            recovery: None,
        };
        let mut sessions = BrokerSessions::new(TIMEOUT);
        let mut image = cluster(&mut sessions);
        for (id, at) in [(1, 1), (2, 2), (3, 3)] {
            let mut hb = beat(id, &image);
            hb.want_fence = true;
            let d = sessions.heartbeat(&image, &hb, at, &elections).unwrap();
            commit(&mut image, &d.records);
        }
        let p = p0(&image).clone();
        if elr {
            assert_eq!(
                (p.leader, &p.isr, &p.elr),
                (NO_LEADER, &vec![], &vec![2, 3])
            );
        } else {
            assert_eq!((p.leader, &p.isr, &p.elr), (NO_LEADER, &vec![3], &vec![]));
        }
        // 3 restarts uncleanly (a new incarnation, no clean-shutdown epoch) and catches up.
        let late = TIMEOUT * 2;
        let records = sessions
            .register(&image, &request(3, 33), late, &elections)
            .unwrap();
        commit(&mut image, &records);
        let d = sessions
            .heartbeat(&image, &beat(3, &image), late, &elections)
            .unwrap();
        commit(&mut image, &d.records);
        if elr {
            // Not electable: it left the ISR and ELR before registering.
            let p = p0(&image);
            assert_eq!((p.leader, &p.isr, &p.elr), (NO_LEADER, &vec![], &vec![2]));
            // 2, which held every committed offset when the HW froze, leads once back.
            let d = sessions
                .heartbeat(&image, &beat(2, &image), late, &elections)
                .unwrap();
            commit(&mut image, &d.records);
            let p = p0(&image);
            assert_eq!((p.leader, &p.isr), (2, &vec![2]));
        } else {
            let p = p0(&image);
            assert_eq!((p.leader, &p.isr), (3, &vec![3]), "the historical loss");
        }
    }
}

/// The restart-safety case (power loss of a leader): its old session expired but the timer
/// has not fenced it yet, so the image still names it leader, unfenced. The new incarnation's
/// registration (no clean-shutdown epoch) must, in the same commit, take it out of the ISR and
/// elect away from it at a new leader epoch, so a broker that has applied its own
/// registration never leads from the epoch in which its log lost a suffix.
#[test]
fn an_unclean_registration_of_a_leader_elects_away_from_it_in_the_same_commit() {
    let mut sessions = BrokerSessions::new(TIMEOUT);
    let mut image = cluster(&mut sessions);
    let before = p0(&image).clone();
    assert_eq!((before.leader, before.leader_epoch), (1, 0));
    // While the old session lives the new incarnation is refused, and nothing changes.
    assert!(matches!(
        sessions.register(&image, &request(1, 11), TIMEOUT / 2, &config),
        Err(ControllerError::DuplicateBrokerRegistration(_))
    ));
    assert_eq!(p0(&image), &before);
    // Expired (not yet fenced by the timer): accepted, and the leadership moves with it.
    let records = sessions
        .register(&image, &request(1, 11), TIMEOUT + 1, &config)
        .unwrap();
    assert!(matches!(
        records.last(),
        Some(MetadataRecord::RegisterBroker {
            id: 1,
            fenced: true,
            ..
        })
    ));
    commit(&mut image, &records);
    let p = p0(&image);
    assert_ne!(p.leader, 1, "still led by the broker that lost its suffix");
    assert!(p.leader == 2 || p.leader == 3);
    assert!(p.leader_epoch > before.leader_epoch);
    assert!(!p.isr.contains(&1) && !p.elr.contains(&1));
    assert!(image.broker(1).unwrap().fenced);
}

/// A broker that fsyncs before acknowledging lost nothing committed in an unclean shutdown (its
/// fetches counted only fsynced data): it keeps its ISR/ELR places, but not its leader epochs
/// (its log may end below what its followers hold at them).
#[test]
fn a_durable_broker_back_from_an_unclean_shutdown_keeps_its_places_not_its_epochs() {
    let mut sessions = BrokerSessions::new(TIMEOUT);
    let mut image = cluster(&mut sessions);
    let late = TIMEOUT * 2;
    let before = p0(&image).clone();
    assert!(before.leader >= 0, "a leader to restart: {before:?}");
    let mut restarted = request(before.leader, 77);
    restarted.durable = true;
    let records = sessions
        .register(&image, &restarted, late, &config)
        .unwrap();
    commit(&mut image, &records);
    let after = p0(&image);
    assert_eq!(after.isr, before.isr, "kept its ISR place");
    assert_ne!(after.leader, before.leader, "led elsewhere");
    assert!(after.leader_epoch > before.leader_epoch);
}

/// Issue 17's whole-cluster crash, message by message: each broker is fenced in turn (its
/// process died), then all three come back as new incarnations with no clean-shutdown epoch.
/// Default mode: every restart leaves ISR and ELR, the partition keeps only its last known
/// leader, and Kafka 4.x elects it (uncleanly, RECOVERING) once it unfences — before, it stayed
/// leaderless for ever. Durable mode (fsync before ack): the restarts keep their ELR places and
/// the first ELR member back leads cleanly.
#[test]
fn a_whole_cluster_crash_is_led_again_once_its_last_known_leader_is_back() {
    for durable in [false, true] {
        let mut sessions = BrokerSessions::new(TIMEOUT);
        let mut image = cluster(&mut sessions);
        for (id, at) in [(1, 1), (2, 2), (3, 3)] {
            let mut hb = beat(id, &image);
            hb.want_fence = true;
            let d = sessions.heartbeat(&image, &hb, at, &config).unwrap();
            commit(&mut image, &d.records);
        }
        let p = p0(&image).clone();
        assert_eq!(
            (p.leader, &p.isr, &p.elr, &p.last_known_elr),
            (NO_LEADER, &vec![], &vec![2, 3], &vec![3])
        );
        let late = TIMEOUT * 2;
        for id in 1..=3 {
            let mut r = request(id, 100 + id as u128);
            r.durable = durable;
            let records = sessions.register(&image, &r, late, &config).unwrap();
            commit(&mut image, &records);
        }
        let p = p0(&image).clone();
        let want_elr = if durable { vec![2, 3] } else { vec![] };
        assert_eq!((p.leader, &p.isr, &p.elr), (NO_LEADER, &vec![], &want_elr));
        // Broker 1 (in neither set) unfences first: still nobody to elect.
        let d = sessions
            .heartbeat(&image, &beat(1, &image), late, &config)
            .unwrap();
        commit(&mut image, &d.records);
        assert_eq!(p0(&image).leader, NO_LEADER);
        // Then broker 2, in the ELR only when durable.
        let d = sessions
            .heartbeat(&image, &beat(2, &image), late, &config)
            .unwrap();
        commit(&mut image, &d.records);
        if durable {
            let p = p0(&image);
            assert_eq!(
                (p.leader, &p.isr, p.leader_recovering),
                (2, &vec![2], false)
            );
            continue;
        }
        assert_eq!(p0(&image).leader, NO_LEADER, "2 holds no ELR place");
        // The last known leader back: elected, uncleanly.
        let d = sessions
            .heartbeat(&image, &beat(3, &image), late, &config)
            .unwrap();
        commit(&mut image, &d.records);
        let p = p0(&image);
        assert_eq!(
            (
                p.leader,
                &p.isr,
                &p.elr,
                &p.last_known_elr,
                p.leader_recovering
            ),
            (3, &vec![3], &vec![], &vec![], true)
        );
    }
}

#[test]
fn heartbeat_reports_drive_the_recovery_election_on_the_tick() {
    use crate::controller::election::{Recovery, RecoveryStrategy, ReplicaLog};
    use crate::controller::image::PartitionChange;
    let balanced = |_: &TopicMeta| ElectionConfig {
        elr: true,
        min_isr: 2,
        unclean: false,
        recovery: Some(Recovery {
            strategy: RecoveryStrategy::Balanced,
            timeout_ms: 60_000,
        }),
    };
    let mut sessions = BrokerSessions::new(TIMEOUT);
    let mut image = cluster(&mut sessions);
    // After a whole-cluster crash: no leader, ISR and ELR empty, last-known ELR [1, 2].
    let mut crashed = PartitionChange::new(T, 0);
    crashed.leader = Some(NO_LEADER);
    crashed.isr = Some(vec![]);
    crashed.last_known_elr = Some(vec![1, 2]);
    commit(&mut image, &[MetadataRecord::PartitionChange(crashed)]);
    let beat_with = |id: i32, last_epoch: i32, log_end: i64, image: &MetadataImage| {
        let mut b = beat(id, image);
        b.replica_logs = vec![(
            (T, 0),
            ReplicaLog {
                last_epoch,
                log_end,
            },
        )];
        b
    };
    for (id, log_end) in [(1, 10), (3, 99)] {
        let b = beat_with(id, 3, log_end, &image);
        sessions.heartbeat(&image, &b, 10, &balanced).unwrap();
    }
    // Broker 2, a last-known ELR member, has not reported: wait.
    assert!(sessions.tick(&image, 20, &balanced).is_empty());
    let b = beat_with(2, 3, 20, &image);
    sessions.heartbeat(&image, &b, 30, &balanced).unwrap();
    let records = sessions.tick(&image, 40, &balanced);
    commit(&mut image, &records);
    // The longer log of the two members wins; 3 (not a member) is never considered.
    let p = p0(&image);
    assert_eq!((p.leader, &p.isr, p.leader_recovering), (2, &vec![2], true));
    assert!(p.last_known_elr.is_empty());
}
