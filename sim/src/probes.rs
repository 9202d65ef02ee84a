//! After healing, what users do must work again within a bound, not only produce and fetch
//! (issue 21 item 4). Each probe runs once at the end of a run, after the final read (so it
//! changes nothing the data checks judge), as an application would: it retries what fails
//! (through the next broker, or after finding the coordinator again) until the bound, and a
//! probe that has not succeeded by then is a violation named for what failed:
//!
//! - `admin-liveness` (clusters, and any scenario with an admin client): CreateTopics, then
//!   CreatePartitions, IncrementalAlterConfigs and DeleteTopics of one topic, each step
//!   through the next broker;
//! - `group-liveness` (scenarios with groups): a fresh classic group's one member joins,
//!   syncs to a generation that holds (a heartbeat in it succeeds), and commits an offset;
//! - `txn-liveness` (scenarios with transactions): one transaction commits one record, which
//!   a read_committed fetch then returns.
//!
//! The probes' topic and group are their own (`probe-admin`, `probe-group`, `txn-probe`); the
//! workload's checks never see them.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use weir::client::group_member::{encode_assignment, range_assign};
use weir::client::{Client, ClientError};
use weir::io::Io;

use crate::checker::ProbeFindings;
use crate::group_route::{connect_coordinator, coordinator_moved};
use crate::history::{Event, History};
use crate::routing::{Routes, DEFAULT_MAX_AGE};
use crate::txn_workload::{ensure_topic, fetch_committed, Call, Producer, TxnSpec};
use crate::workload::{connect, RunClock};

/// Each probe's bound after it starts (the data liveness probe's too).
pub const PROBE_BOUND: Duration = Duration::from_secs(30);
/// Each request's own time-out, and the pause between tries.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);
const PAUSE: Duration = Duration::from_millis(200);

const ADMIN_TOPIC: &str = "probe-admin";
const GROUP: &str = "probe-group";
const TXN_TOPIC: &str = "txn-probe";

/// Which probes a run ends with, and where.
#[derive(Clone, Debug, Default)]
pub struct ProbeSpec {
    /// Every broker.
    pub addrs: Vec<SocketAddr>,
    /// The admin probe, with this replication factor for its topic.
    pub admin: Option<i16>,
    /// The group probe: the workload's topic and its partitions, the session timeout.
    pub group: Option<(String, i32, u64)>,
    /// The transaction probe.
    pub txn: Option<TxnSpec>,
}

/// Runs the probes `spec` asks for, one after another, each within [`PROBE_BOUND`].
pub async fn run(io: Io, spec: ProbeSpec, history: History, clock: RunClock) -> ProbeFindings {
    let note = |what: &str, outcome: &Result<u64, String>| {
        let text = match outcome {
            Ok(ms) => format!("{what} probe: done {ms} ms after it began"),
            Err(why) => format!("{what} probe failed: {why}"),
        };
        history.record(clock.now_ms(), Event::Note(text));
    };
    let mut out = ProbeFindings::default();
    if let Some(rf) = spec.admin {
        let r = timed(clock, admin(&io, &spec.addrs, rf, clock)).await;
        note("admin", &r);
        out.admin = r.err();
    }
    if let Some((topic, partitions, session_ms)) = &spec.group {
        let r = timed(
            clock,
            group(&io, &spec.addrs, topic, *partitions, *session_ms, clock),
        )
        .await;
        note("group", &r);
        out.group = r.err();
    }
    if let Some(t) = &spec.txn {
        let r = timed(clock, txn(&io, t, &history, clock)).await;
        note("transaction", &r);
        out.txn = r.err();
    }
    out
}

async fn timed(
    clock: RunClock,
    probe: impl std::future::Future<Output = Result<(), String>>,
) -> Result<u64, String> {
    let start = clock.now_ms();
    probe.await.map(|()| clock.now_ms() - start)
}

/// The admin probe's steps, in order.
#[derive(Clone, Copy, Debug)]
enum AdminStep {
    CreateTopics,
    CreatePartitions,
    IncrementalAlterConfigs,
    DeleteTopics,
}

/// One step through one broker; `Ok` also when an earlier try of it (answered too late for
/// us) already did it.
async fn admin_step(c: &mut Client, step: AdminStep, rf: i16) -> Result<(), ClientError> {
    let done = match step {
        AdminStep::CreateTopics => c.create_topic(ADMIN_TOPIC, 1, rf, &BTreeMap::new()).await,
        AdminStep::CreatePartitions => c.create_partitions(ADMIN_TOPIC, 2).await,
        AdminStep::IncrementalAlterConfigs => {
            let changes = BTreeMap::from([("retention.ms".to_string(), Some("3600000".into()))]);
            c.alter_topic_configs(ADMIN_TOPIC, &changes).await
        }
        AdminStep::DeleteTopics => c.delete_topic(ADMIN_TOPIC).await,
    };
    match (step, done) {
        (
            AdminStep::CreateTopics,
            Err(ClientError::Kafka(ResponseError::TopicAlreadyExists, _)),
        )
        | (
            AdminStep::CreatePartitions,
            Err(ClientError::Kafka(ResponseError::InvalidPartitions, _)),
        )
        | (
            AdminStep::DeleteTopics,
            Err(ClientError::Kafka(ResponseError::UnknownTopicOrPartition, _)),
        ) => Ok(()),
        (_, done) => done,
    }
}

async fn admin(io: &Io, addrs: &[SocketAddr], rf: i16, clock: RunClock) -> Result<(), String> {
    let deadline = clock.now_ms() + PROBE_BOUND.as_millis() as u64;
    let mut attempt = 0usize;
    for step in [
        AdminStep::CreateTopics,
        AdminStep::CreatePartitions,
        AdminStep::IncrementalAlterConfigs,
        AdminStep::DeleteTopics,
    ] {
        let mut last = String::from("no attempt");
        loop {
            if clock.now_ms() >= deadline {
                return Err(format!(
                    "{step:?} of {ADMIN_TOPIC} not done {PROBE_BOUND:?} after the probe began (last: {last})"
                ));
            }
            let addr = addrs[attempt % addrs.len()];
            attempt += 1;
            let tried = async {
                let mut c = connect(io, addr, CALL_TIMEOUT).await?;
                admin_step(&mut c, step, rf).await
            };
            match io.timeout(CALL_TIMEOUT, tried).await {
                Some(Ok(())) => break,
                Some(Err(e)) => last = format!("{addr}: {e}"),
                None => last = format!("{addr}: timed out"),
            }
            io.clock.sleep(PAUSE).await;
        }
    }
    Ok(())
}

/// One member of a fresh classic group: join, sync (it leads: every partition to itself),
/// a heartbeat in that generation, a commit of offset 0 of every partition, then it leaves.
async fn group(
    io: &Io,
    addrs: &[SocketAddr],
    topic: &str,
    partitions: i32,
    session_ms: u64,
    clock: RunClock,
) -> Result<(), String> {
    let deadline = clock.now_ms() + PROBE_BOUND.as_millis() as u64;
    let mut lookups = 0u64;
    let mut member_id = String::new();
    let mut last = String::from("no attempt");
    let mut stage = "FindCoordinator";
    while clock.now_ms() < deadline {
        lookups += 1;
        let tried = async {
            stage = "FindCoordinator";
            let (mut c, _) = connect_coordinator(io, addrs, lookups, GROUP, CALL_TIMEOUT).await?;
            stage = "JoinGroup";
            let session = session_ms as i32;
            let joined = c
                .join_group(GROUP, &member_id, session, session, &[topic])
                .await;
            let joined = match joined {
                Ok(j) => j,
                Err(e) => {
                    if matches!(e, ClientError::Kafka(ResponseError::UnknownMemberId, _)) {
                        member_id.clear();
                    }
                    return Err(e);
                }
            };
            member_id = joined.member_id.clone();
            let mut assignments: BTreeMap<String, Bytes> = BTreeMap::new();
            if joined.is_leader() {
                let members: Vec<(String, Vec<String>)> = joined
                    .members
                    .iter()
                    .map(|(id, _)| (id.clone(), vec![topic.to_string()]))
                    .collect();
                let counts = BTreeMap::from([(topic.to_string(), partitions)]);
                for (id, owned) in range_assign(&members, &counts) {
                    assignments.insert(id, encode_assignment(&owned));
                }
            }
            stage = "SyncGroup";
            c.sync_group(GROUP, &joined, &assignments, session).await?;
            stage = "Heartbeat";
            c.heartbeat(GROUP, joined.generation, &member_id).await?;
            stage = "OffsetCommit";
            let offsets: Vec<(i32, i64, i32)> = (0..partitions).map(|p| (p, 0, -1)).collect();
            c.commit_member_offsets(GROUP, joined.generation, &member_id, topic, &offsets)
                .await?;
            let _ = c.leave_group(GROUP, &member_id).await;
            Ok::<_, ClientError>(())
        };
        let wait = CALL_TIMEOUT * 3 + Duration::from_millis(session_ms);
        match io.timeout(wait, tried).await {
            Some(Ok(())) => return Ok(()),
            Some(Err(e)) => {
                if !coordinator_moved(&e) {
                    last = format!("{stage}: {e}");
                } else {
                    last = format!("{stage}: coordinator moved ({e})");
                }
            }
            None => last = format!("{stage}: timed out"),
        }
        io.clock.sleep(PAUSE).await;
    }
    Err(format!(
        "{GROUP} did not join a stable generation and commit within {PROBE_BOUND:?} (last: {last})"
    ))
}

/// One transaction of one record to `txn-probe` partition 0, committed, then read back with
/// a read_committed fetch from the partition's leader.
async fn txn(io: &Io, spec: &TxnSpec, history: &History, clock: RunClock) -> Result<(), String> {
    let deadline = clock.now_ms() + PROBE_BOUND.as_millis() as u64;
    let mut spec = spec.clone();
    spec.until_ms = deadline;
    spec.final_at_ms = deadline;
    spec.timeout = CALL_TIMEOUT;
    // After healing every call is bounded alike, the coordinators' too (a hung one is the
    // finding, not something to wait out).
    spec.txns.request_timeout_ms = CALL_TIMEOUT.as_millis() as u64;
    ensure_topic(io, &spec, &clock, TXN_TOPIC, 1).await;
    let bootstrap = spec.bootstrap.clone();
    let value = "txn-probe-0";
    let mut p = Producer::new(
        io.clone(),
        spec,
        u32::MAX,
        "txn-probe".to_string(),
        TXN_TOPIC,
        history.clone(),
        clock,
    );
    let mut stage = "InitProducerId";
    let mut last = String::from("no attempt");
    let mut committed = false;
    while clock.now_ms() < deadline && !committed {
        let tried = async {
            stage = "InitProducerId";
            p.init().await?;
            stage = "AddPartitionsToTxn";
            p.at_coordinator(Call::Add(vec![0])).await?;
            stage = "Produce";
            p.produce(0, value).await?;
            stage = "EndTxn";
            p.at_coordinator(Call::End(true)).await?;
            Ok::<_, ClientError>(())
        };
        match tried.await {
            Ok(()) => committed = true,
            Err(e) => {
                last = format!("{stage}: {e}");
                p.reset();
                io.clock.sleep(PAUSE).await;
            }
        }
    }
    if !committed {
        return Err(format!(
            "no transaction committed within {PROBE_BOUND:?} (last: {last})"
        ));
    }
    // The reader's cached leader map (`routing::Routes`), marked stale when a read fails.
    let mut routes = Routes::new(bootstrap.clone(), DEFAULT_MAX_AGE, 0);
    while clock.now_ms() < deadline {
        let read = async {
            let mut c = routes
                .connect_leader(io, TXN_TOPIC, 0, CALL_TIMEOUT)
                .await?;
            let mut offset = 0;
            loop {
                let (values, next, _, _) = fetch_committed(&mut c, TXN_TOPIC, 0, offset).await?;
                if values.iter().any(|(_, v)| v == value) {
                    return Ok::<_, ClientError>(true);
                }
                if next == offset {
                    return Ok(false);
                }
                offset = next;
            }
        };
        let read = io.timeout(CALL_TIMEOUT, read).await;
        if !matches!(read, Some(Ok(_))) {
            routes.stale(TXN_TOPIC, 0);
        }
        match read {
            Some(Ok(true)) => return Ok(()),
            Some(Ok(false)) => last = "read_committed: not visible yet".into(),
            Some(Err(e)) => last = format!("read_committed: {e}"),
            None => last = "read_committed: timed out".into(),
        }
        io.clock.sleep(PAUSE).await;
    }
    Err(format!(
        "a committed transaction was not read back read_committed within {PROBE_BOUND:?} (last: {last})"
    ))
}
