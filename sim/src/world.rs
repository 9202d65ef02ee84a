//! One simulated run: build the world from a scenario and a seed (madsim runtime, broker
//! machines with their own disks and clocks, a client machine), run the workload under the
//! nemesis, heal, check liveness, read everything back, and judge.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use madsim::rand::Rng;
use madsim::runtime::{Handle, Runtime};
use madsim::task::NodeId;
use weir::broker::replication_events::ReplicationEvent;
use weir::broker::Broker;
use weir::client::{Client, ClientError};
use weir::config::{PlantedBug, ServerConfig};
use weir::io::memdisk::MemDisk;
use weir::io::os::{OsRng, TokioNet, TokioSpawn};
use weir::io::{Clock, Io};

use crate::admin::{self, AdminSpec};
use crate::checker::{self, FinalRead, ProbeFindings};
use crate::clock::NodeClock;
use crate::consumer_workload;
use crate::disk::{NodeDisk, RestartRequest, Strikes};
use crate::group_check::{self, GroupEvent};
use crate::group_workload::{self, GroupsSpec};
use crate::history::{trace_hash, Event, History};
use crate::metadata_check::{self, FinalMetadata};
use crate::nemesis::{BrokerSlot, Machine, Nemesis};
use crate::partition_trace::{PartitionEvent, PartitionTrace};
use crate::producer::{self, ProducerSpec};
use crate::quorum_check::{QuorumFindings, QuorumObserver};
pub use crate::report::RunOutcome;
use crate::scenario::{Check, ConsumerClient, GroupProtocol, Scenario};
use crate::workload::{self, ConsumerSpec, RunClock};
use crate::{read_back, replica_check, replica_read};

/// Simulated time allowed after the workload for healing, liveness and the final read.
const SETTLE: Duration = Duration::from_secs(120);
/// How long the cluster has to serve a produce and a fetch once faults heal.
const LIVENESS_BOUND: Duration = Duration::from_secs(30);
/// How long the final read may keep retrying (a cluster whose leaders never settle).
const FINAL_READ_BOUND: Duration = Duration::from_secs(90);
const BROKER_PORT: u16 = 9092;
const CONTROLLER_PORT: u16 = 9093;
/// The inter-broker listener of `[cluster] secure_links`.
const INTERNAL_PORT: u16 = 9094;
/// Multi-node worlds: how long after healing a leader and a committed CreateTopics may take,
/// and then how long every node may take to reach the same committed end.
const QUORUM_BOUND: Duration = Duration::from_secs(30);
const CATCH_UP_BOUND: Duration = Duration::from_secs(15);
/// How often every node's quorum status is sampled, and (every this many status rounds) its
/// newly committed metadata.
const SAMPLE_EVERY: Duration = Duration::from_millis(20);
const COMMITTED_EVERY: u64 = 5;
/// Committed records read from one node per sample.
const COMMITTED_BATCH: usize = 256;

fn broker_addr(index: u32) -> SocketAddr {
    // Simulated addresses: madsim routes them inside the process; nothing touches a real network.
    SocketAddr::new(
        IpAddr::V4(Ipv4Addr::new(10, 0, 1, index as u8 + 1)),
        BROKER_PORT,
    )
}

/// The node's properties as a Kafka user writes them for a cluster: combined nodes are voters
/// with both listeners; pure controllers have only the controller listener; pure brokers
/// only the client one. Every node names the same static voters.
fn cluster_properties(scenario: &Scenario, index: u32) -> BTreeMap<String, String> {
    let cluster = &scenario.cluster;
    let ip = broker_addr(index).ip();
    let voters: Vec<String> = (0..cluster.nodes())
        .filter(|&i| cluster.is_voter(i))
        .map(|i| format!("{}@{}:{CONTROLLER_PORT}", i + 1, broker_addr(i).ip()))
        .collect();
    let (broker, voter) = (cluster.is_broker(index), cluster.is_voter(index));
    let roles = match (broker, voter) {
        (true, true) => "broker,controller",
        (true, false) => "broker",
        _ => "controller",
    };
    let mut listeners = Vec::new();
    if broker {
        listeners.push(format!("PLAINTEXT://{ip}:{BROKER_PORT}"));
    }
    if broker && cluster.secure_links {
        listeners.push(format!("INTERNAL://{ip}:{INTERNAL_PORT}"));
    }
    if voter {
        listeners.push(format!("CONTROLLER://{ip}:{CONTROLLER_PORT}"));
    }
    let mut props = BTreeMap::new();
    props.insert("node.id".into(), (index + 1).to_string());
    props.insert("process.roles".into(), roles.into());
    props.insert("controller.quorum.voters".into(), voters.join(","));
    props.insert("listeners".into(), listeners.join(","));
    if broker {
        props.insert(
            "advertised.listeners".into(),
            format!("PLAINTEXT://{ip}:{BROKER_PORT}"),
        );
        props.insert("inter.broker.listener.name".into(), "PLAINTEXT".into());
    }
    props.insert("controller.listener.names".into(), "CONTROLLER".into());
    if cluster.secure_controller || cluster.secure_links {
        props.extend(secure_controller_properties());
    }
    if cluster.secure_links && broker {
        props.extend(secure_links_properties(cluster.token_secs));
        props.insert(
            "advertised.listeners".into(),
            format!("PLAINTEXT://{ip}:{BROKER_PORT},INTERNAL://{ip}:{INTERNAL_PORT}"),
        );
    }
    props
}

/// One leaf certificate (P-256) every node serves, signed by a test CA every node trusts; host
/// names are not checked (`ssl.endpoint.identification.algorithm` empty), so it fits every
/// address. Valid from 2000 to 2100: the simulator's wall clock starts in 2022, so a
/// certificate made "now" would not be valid yet inside it.
const NODE_CA: &str = "-----BEGIN CERTIFICATE-----
MIIBQjCB6aADAgECAgEBMAoGCCqGSM49BAMCMBYxFDASBgNVBAMMC3dlaXItc2lt
LWNhMCAXDTAwMDEwMTAwMDAwMFoYDzIxMDAwMTAxMDAwMDAwWjAWMRQwEgYDVQQD
DAt3ZWlyLXNpbS1jYTBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABLgCQeA+L9Xd
6yUDVku0KJqaI85dxLEsG/4ojQcpUrVf1uj7nutgHByvurew+Jv1nrMZxM1GOcO4
26N7w+9c/8SjJjAkMBIGA1UdEwEB/wQIMAYBAf8CAQAwDgYDVR0PAQH/BAQDAgGG
MAoGCCqGSM49BAMCA0gAMEUCIQCXTN0HkNj6X+H5bKIAtv/0Zvc4lwiQFPVj2RxZ
t+lyygIgLvYVVImkNzrbEYyZp/Bvq8Bbp0WoFSq16JutA5c+c/o=
-----END CERTIFICATE-----";
const NODE_CERT: &str = "-----BEGIN CERTIFICATE-----
MIIBaTCCARCgAwIBAgIBAjAKBggqhkjOPQQDAjAWMRQwEgYDVQQDDAt3ZWlyLXNp
bS1jYTAgFw0wMDAxMDEwMDAwMDBaGA8yMTAwMDEwMTAwMDAwMFowGDEWMBQGA1UE
AwwNd2Vpci1zaW0tbm9kZTBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABGMezvaV
IDl0f+50TBj1LZNIKVdZGdWb26/I9W66pqRbQuCHFqsmeOgw14YVwUvKozfQa28E
TCLOXuV1JVsVNuejSzBJMAwGA1UdEwEB/wQCMAAwGgYDVR0RBBMwEYIJbG9jYWxo
b3N0hwR/AAABMB0GA1UdJQQWMBQGCCsGAQUFBwMBBggrBgEFBQcDAjAKBggqhkjO
PQQDAgNHADBEAiAW3obNiZLmrjWRURc9smX49ATZSOHLzue75k4rktIZ/QIgbdwh
Z/ZWst6TPB0sLJQt3RJyN9clqL3dy8wMcYm5dE4=
-----END CERTIFICATE-----";
const NODE_KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgU0Bez/vG8tfJpSk5
6Zpm2nUWgNE/q5v2+fyfGUM0uBKhRANCAARjHs72lSA5dH/udEwY9S2TSClXWRnV
m9uvyPVuuqakW0LghxarJnjoMNeGFcFLyqM30GtvBEwizl7ldSVbFTbn
-----END PRIVATE KEY-----";

/// The controller listener as SASL_SSL with PLAIN: each node logs in as `node` and accepts it.
fn secure_controller_properties() -> BTreeMap<String, String> {
    let jaas = "org.apache.kafka.common.security.plain.PlainLoginModule required \
                username=\"node\" password=\"node-secret\" user_node=\"node-secret\";";
    [
        (
            "listener.security.protocol.map",
            "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_SSL",
        ),
        ("sasl.enabled.mechanisms", "PLAIN"),
        ("sasl.mechanism.controller.protocol", "PLAIN"),
        ("listener.name.controller.plain.sasl.jaas.config", jaas),
        ("ssl.keystore.type", "PEM"),
        ("ssl.keystore.certificate.chain", NODE_CERT),
        ("ssl.keystore.key", NODE_KEY),
        ("ssl.truststore.type", "PEM"),
        ("ssl.truststore.certificates", NODE_CA),
        ("ssl.endpoint.identification.algorithm", ""),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// With `secure_links`, on top of the secure controller listener: INTERNAL, the inter-broker
/// listener, SASL_SSL with OAUTHBEARER; each node logs in with an unsecured token for `node`
/// lasting `token_secs`, so a session lasts at most that long (less with
/// `connections.max.reauth.ms`).
fn secure_links_properties(token_secs: u64) -> BTreeMap<String, String> {
    let jaas = format!(
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \
         unsecuredLoginStringClaim_sub=\"node\" unsecuredLoginLifetimeSeconds=\"{token_secs}\";"
    );
    [
        (
            "listener.security.protocol.map",
            "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_SSL,INTERNAL:SASL_SSL".to_string(),
        ),
        ("inter.broker.listener.name", "INTERNAL".to_string()),
        (
            "listener.name.internal.sasl.enabled.mechanisms",
            "OAUTHBEARER".to_string(),
        ),
        (
            "sasl.mechanism.inter.broker.protocol",
            "OAUTHBEARER".to_string(),
        ),
        ("listener.name.internal.oauthbearer.sasl.jaas.config", jaas),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// When the quorum's fault points start striking, from the world's start (simulated ms): after
/// the cluster has formed and the workload's topic exists.
const QUORUM_POINTS_FROM_MS: u64 = 5000;

fn broker_config(scenario: &Scenario, index: u32) -> Result<ServerConfig, String> {
    let mut props: BTreeMap<String, String> = if scenario.cluster.is_multi_node() {
        cluster_properties(scenario, index)
    } else {
        let addr = broker_addr(index);
        let mut props = BTreeMap::new();
        props.insert("node.id".into(), (index + 1).to_string());
        props.insert("listeners".into(), format!("PLAINTEXT://{addr}"));
        props
    };
    props.insert("log.dirs".into(), "/data".into()); // a scenario's `[broker]` may name more
    props.insert("log.flush.scheduler.interval.ms".into(), "100".into());
    if let Some(g) = scenario.groups.as_ref().filter(|g| g.any_consumer()) {
        // KIP-848 members take their session and heartbeat interval from the coordinator:
        // the `[groups]` timers become the broker's unless `[broker]` names its own.
        props.insert(
            "group.consumer.session.timeout.ms".into(),
            g.session_timeout_ms.to_string(),
        );
        props.insert(
            "group.consumer.heartbeat.interval.ms".into(),
            g.heartbeat_interval_ms.to_string(),
        );
        // Kafka refuses a session or interval below its floor (45 s and 5 s by default), as
        // the broker's config check does: the floors come down with them.
        props.insert(
            "group.consumer.min.session.timeout.ms".into(),
            g.session_timeout_ms.to_string(),
        );
        props.insert(
            "group.consumer.min.heartbeat.interval.ms".into(),
            g.heartbeat_interval_ms.to_string(),
        );
    }
    if scenario.cluster.racks {
        props.insert("broker.rack".into(), format!("RACK{}", index + 1));
    }
    props.extend(scenario.broker.clone());
    let (mut config, _warnings) =
        ServerConfig::from_properties(&props).map_err(|e| format!("broker config: {e}"))?;
    config.planted_bug = scenario
        .planted_bug
        .as_deref()
        .map(PlantedBug::parse)
        .transpose()?;
    if let Some(aimed) = &scenario.nemesis.aimed {
        config.fault_points = aimed.fault_points();
    }
    Ok(config)
}

/// Runs one seed of a scenario on the current thread. Call it on a fresh thread per seed:
/// madsim keeps per-thread state, and HashMap seeds are per thread.
pub fn run(scenario: &Scenario, seed: u64) -> RunOutcome {
    let wall = Instant::now();
    let cpu = crate::cpu::thread_secs();
    let history = History::default();
    let mut runtime = Runtime::with_seed_and_config(seed, madsim::Config::default());
    // The transactional workload's final read may take up to 20 s past its drain.
    let drain = scenario.groups.as_ref().map_or(0, |g| g.drain_secs).max(
        scenario
            .transactions
            .as_ref()
            .map_or(0, |t| t.drain_secs + 20),
    );
    // A cluster's end has more phases (quorum liveness, replicas catching up).
    let settle = if scenario.cluster.is_multi_node() {
        SETTLE * 3
    } else {
        SETTLE * 2
    };
    // Each post-heal probe may take its whole bound when it fails.
    let probing = probe_spec(scenario, Vec::new());
    let probe_time = crate::probes::PROBE_BOUND
        * [
            probing.admin.is_some(),
            probing.group.is_some(),
            probing.txn.is_some(),
        ]
        .iter()
        .filter(|&&on| on)
        .count() as u32;
    runtime
        .set_time_limit(Duration::from_secs(scenario.duration_secs + drain) + settle + probe_time);
    let sim_end = Arc::new(std::sync::Mutex::new(0f64));
    let probed: Arc<std::sync::Mutex<ProbeFindings>> = Arc::default();
    let nodes = Arc::new(std::sync::Mutex::new(Vec::new()));
    let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
        runtime.block_on(simulate(
            scenario.clone(),
            history.clone(),
            (sim_end.clone(), probed.clone()),
            nodes.clone(),
        ))
    }));
    if result.is_ok() {
        // Dropping the runtime leaves the nodes' tasks (and the brokers, disks and buffers they
        // hold) allocated; killing the nodes first frees them. Without this a sweep grows by
        // about a megabyte per run.
        let nodes: Vec<NodeId> = std::mem::take(&mut *nodes.lock().unwrap());
        runtime.block_on(async move {
            let handle = Handle::current();
            for node in nodes {
                handle.kill(node);
            }
        });
    }
    let (final_read, liveness, panic, final_metadata, quorum, replicas) = match result {
        Ok(Ok((final_read, liveness, metadata, quorum, replicas))) => {
            (Some(final_read), liveness, None, metadata, quorum, replicas)
        }
        Ok(Err(failure)) => (
            None,
            None,
            Some(format!("run failed: {failure}")),
            None,
            None,
            Vec::new(),
        ),
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            (None, None, Some(message), None, None, Vec::new())
        }
    };
    if let Some(p) = &panic {
        // The evidence up to the panic stays: the trace ends with what stopped the run.
        history.record(history.last_ms(), Event::Note(format!("run ended: {p}")));
    }
    let entries = history.take();
    // Losses only a cluster's elections can cause (`beyond_promise`); none on one broker.
    let beyond = match scenario.excuse_beyond_promise && scenario.cluster.is_multi_node() {
        true => crate::beyond_promise::find(&entries, min_insync_replicas(scenario)),
        false => Default::default(),
    };
    let mut findings = match &final_read {
        Some(final_read) => checker::check_beyond(&entries, final_read, liveness, &beyond),
        None => {
            // No final read: judge what the history alone shows (reads, acknowledgements),
            // not what only the end could tell (lost, duplicated, out of order).
            let mut f = checker::check(&entries, &FinalRead::new(), None);
            f.lost.clear();
            f.lost_reads.clear();
            f.duplicated.clear();
            f.misordered.clear();
            f.sent_lost.clear();
            for c in [
                Check::Lost,
                Check::LostRead,
                Check::Duplicate,
                Check::Order,
                Check::Sent,
            ] {
                f.evidence_ms.remove(&c);
            }
            f
        }
    };
    if let Some(read) = final_read
        .as_ref()
        .filter(|_| scenario.cluster.is_multi_node())
    {
        checker::forget_unread(&mut findings, &entries, read);
    }
    if scenario.deleter.is_some() {
        // Consumers' and group members' fetches are bounded by the producers' request
        // time-out (their clients' time-out).
        let bound = scenario.producers.request_timeout_ms;
        let found = crate::delete_check::check(&entries, final_read.as_ref(), bound);
        if let Some((at, _)) = found.first() {
            findings.evidence_ms.insert(Check::Deleted, *at);
        }
        findings.deleted_readable = found.into_iter().map(|(_, why)| why).collect();
    }
    if !replicas.is_empty() {
        // Seen only at the end, once the replicas caught up.
        let end = entries.last().map_or(0, |e| e.at_ms);
        findings.evidence_ms.insert(Check::Replicas, end);
        findings.replicas = replicas;
    }
    if let Some(g) = &scenario.groups {
        let expected = group_check::Expected {
            groups: g.count,
            members: g.members,
            partitions: scenario.topic.partitions,
            settle_bound_ms: g.settle_bound_ms(),
        };
        findings.groups = group_check::check(&entries, final_read.as_ref(), expected);
        for (&c, &t) in &findings.groups.evidence_ms {
            findings.evidence_ms.insert(c, t);
        }
    }
    if scenario.transactions.is_some() {
        findings.txn = crate::txn_check::check(&entries);
        if let Some(t) = findings.txn.first_ms.filter(|_| findings.txn.count() > 0) {
            findings.evidence_ms.insert(Check::Transactions, t);
        }
    }
    let refused = crate::admin_errors::check(&entries);
    if let Some((at, _)) = refused.first() {
        findings.evidence_ms.insert(Check::AdminAvailability, *at);
    }
    findings.admin_errors = refused.into_iter().map(|(_, why)| why).collect();
    let rules = crate::delivery_check::Rules {
        judge_sequence_errors: scenario.producers.acks_value() == Ok(-1)
            && scenario.producers.idempotent
            && scenario.checks.contains(&Check::Lost),
    };
    let surfaced = crate::delivery_check::check(&entries, rules, &beyond);
    if let Some((at, _)) = surfaced.first() {
        findings
            .evidence_ms
            .insert(Check::ProducerAvailability, *at);
    }
    findings.producer_errors = surfaced.into_iter().map(|(_, why)| why).collect();
    if let Some(metadata) = &final_metadata {
        findings.metadata = metadata_check::check(&entries, metadata);
        if !findings.metadata.is_empty() {
            // Seen only at the end.
            let end = entries.last().map_or(0, |e| e.at_ms);
            findings.evidence_ms.insert(Check::Metadata, end);
        }
    }
    findings.probes = std::mem::take(&mut *probed.lock().unwrap());
    for (check, failed) in [
        (Check::AdminLiveness, findings.probes.admin.is_some()),
        (Check::GroupLiveness, findings.probes.group.is_some()),
        (Check::TxnLiveness, findings.probes.txn.is_some()),
    ] {
        if failed {
            // Seen only at the end.
            let end = entries.last().map_or(0, |e| e.at_ms);
            findings.evidence_ms.insert(check, end);
        }
    }
    if let Some((quorum, quorum_liveness)) = quorum {
        let end = entries.last().map_or(0, |e| e.at_ms);
        if let Some(t) = quorum.leaders_ms {
            findings.evidence_ms.insert(Check::OneLeader, t);
        }
        if let Some(t) = quorum.committed_ms {
            findings.evidence_ms.insert(Check::CommittedPrefix, t);
        }
        if quorum_liveness.is_some() {
            findings.evidence_ms.insert(Check::QuorumLiveness, end);
        }
        findings.quorum = quorum;
        findings.quorum_liveness = quorum_liveness;
    }
    // Judged after every finding is in (the metadata check's too).
    let mut violations = findings.violations(&scenario.checks);
    if let Some(p) = &panic {
        violations.push(format!("panic: {p}"));
    }
    let faults = entries
        .iter()
        .filter(|e| matches!(e.event, Event::Fault(_)))
        .count();
    let injected = entries
        .iter()
        .filter_map(|e| match e.event {
            Event::Inject(kind) => Some((kind, e.at_ms)),
            _ => None,
        })
        .collect();
    // A panic is evidence at the moment it stopped the run.
    let evidence_ms = findings
        .first_evidence_ms(&scenario.checks)
        .into_iter()
        .chain(
            panic
                .as_ref()
                .map(|_| entries.last().map_or(0, |e| e.at_ms)),
        )
        .min();
    let simulated_secs = *sim_end.lock().unwrap();
    RunOutcome {
        scenario: scenario.name.clone(),
        seed,
        passed: violations.is_empty(),
        violations,
        findings,
        trace_hash: trace_hash(&entries),
        injected,
        evidence_ms,
        swarm: false,
        events: entries.len(),
        faults,
        simulated_secs,
        wall_secs: wall.elapsed().as_secs_f64(),
        cpu_secs: cpu.zip(crate::cpu::thread_secs()).map(|(a, b)| b - a),
        panic,
        history: entries,
    }
}

/// Which post-heal probes a scenario's end runs (`probes`): the admin sequence in clusters and
/// with an admin client, a group join where groups run, a transaction where transactions run.
fn probe_spec(scenario: &Scenario, addrs: Vec<SocketAddr>) -> crate::probes::ProbeSpec {
    let topic = &scenario.topic;
    crate::probes::ProbeSpec {
        admin: (scenario.cluster.is_multi_node() || scenario.admin.is_some())
            .then_some(topic.replication_factor.max(1)),
        group: scenario
            .groups
            .as_ref()
            .map(|g| (topic.name.clone(), topic.partitions, g.session_timeout_ms)),
        // The probe sets its own times.
        txn: crate::txn_workload::TxnSpec::of(scenario, addrs.clone(), 0),
        addrs,
    }
}

/// The probes of what users do after healing (`probes`), on the client machine, once the
/// final read and metadata are in; their findings go to `slot`. The run's simulated end
/// moves past them.
async fn end_probes(
    scenario: &Scenario,
    client_node: &madsim::runtime::NodeHandle,
    addrs: Vec<SocketAddr>,
    history: History,
    clock: RunClock,
    (sim_end, slot): &EndSlots,
) -> Result<(), String> {
    let spec = probe_spec(scenario, addrs);
    if spec.admin.is_none() && spec.group.is_none() && spec.txn.is_none() {
        return Ok(());
    }
    let found = client_node
        .spawn(crate::probes::run(client_io(), spec, history, clock))
        .await
        .map_err(|e| e.to_string())?;
    *slot.lock().unwrap() = found;
    *sim_end.lock().unwrap() = clock.now_ms() as f64 / 1000.0;
    Ok(())
}

/// Where `simulate` leaves the run's simulated end (seconds) and the probes' findings.
type EndSlots = (
    Arc<std::sync::Mutex<f64>>,
    Arc<std::sync::Mutex<ProbeFindings>>,
);

async fn simulate(
    scenario: Scenario,
    history: History,
    slots: EndSlots,
    nodes: Arc<std::sync::Mutex<Vec<NodeId>>>,
) -> Result<SimEnd, String> {
    let sim_end = slots.0.clone();
    let handle = Handle::current();
    let clock = RunClock::start();
    let duration_ms = scenario.duration_secs * 1000;
    let mut machines = Vec::new();
    let multi = scenario.cluster.is_multi_node();
    // One cluster id for every node of a multi-node world, as `weir format -t ID` gives them.
    let cluster_id = multi.then(|| {
        let mut rng = madsim::rand::thread_rng();
        format!("sim-{:016x}", rng.gen::<u64>())
    });
    for index in 0..scenario.cluster.nodes() {
        let mut config = broker_config(&scenario, index)?;
        let mut rng = madsim::rand::thread_rng();
        let disk = MemDisk::new(rng.gen());
        if let Some(id) = &cluster_id {
            format_node(&disk, id, index as i32 + 1, &config.log_dirs).await?;
        }
        if scenario
            .transactions
            .as_ref()
            .is_some_and(|t| t.version >= 2)
        {
            finalize_transactions_v2(&disk, &config.log_dirs).await?;
        }
        let offset = scenario.cluster.clock_offset_ms as i64;
        let drift = scenario.cluster.clock_drift_ppm as i64;
        let node_clock = NodeClock::new(
            if offset > 0 {
                rng.gen_range(-offset..=offset)
            } else {
                0
            },
            if drift > 0 {
                rng.gen_range(-drift..=drift)
            } else {
                0
            },
        );
        if scenario.nemesis.aimed.is_some() {
            // The quorum's fault points strike from a few seconds in (the world's topic is
            // created) to the end of the fault phase, on the node's monotonic clock, which
            // starts here with the world: a wall-clock offset or jump does not move it.
            let start = node_clock.monotonic().as_millis() as u64;
            config.fault_points.quorum_window_ms =
                [start + QUORUM_POINTS_FROM_MS, start + duration_ms];
        }
        let up = Arc::new(AtomicBool::new(false));
        let restart = Arc::new(RestartRequest::default());
        let strikes = Arc::new(Strikes {
            spec: scenario.nemesis.buggify.clone(),
            // On with the workload (the nemesis turns them on), off from healing on.
            enabled: AtomicBool::new(false),
            crashes: Default::default(),
            disk: disk.clone(),
            up: up.clone(),
            restart: restart.clone(),
            peers: Default::default(),
        });
        let (init_disk, init_clock, init_up, init_history) = (
            disk.clone(),
            node_clock.clone(),
            up.clone(),
            history.clone(),
        );
        let (init_restart, init_strikes) = (restart.clone(), strikes.clone());
        let slot: BrokerSlot = Arc::default();
        let init_slot = slot.clone();
        let starting = Arc::new(AtomicBool::new(false));
        let init_starting = starting.clone();
        let addr = broker_addr(index);
        let fsync_latency = scenario.cluster.fsync_latency_us;
        let init_topic = scenario.topic.name.clone();
        let node = handle
            .create_node()
            .name(format!("broker-{index}"))
            .ip(addr.ip())
            .init(move || {
                let io = Io {
                    clock: Arc::new(init_clock.clone()),
                    rng: Arc::new(OsRng::with_seed(madsim::rand::random())),
                    spawner: Arc::new(TokioSpawn),
                    net: Arc::new(TokioNet),
                    disk: Arc::new(NodeDisk::new(
                        init_disk.clone(),
                        fsync_latency,
                        init_strikes.clone(),
                    )),
                };
                let (config, up, history) = (config.clone(), init_up.clone(), init_history.clone());
                let topic = init_topic.clone();
                let restart = init_restart.clone();
                let slot = init_slot.clone();
                let starting = init_starting.clone();
                async move {
                    let started = Broker::start(config, io).await;
                    starting.store(false, Ordering::SeqCst);
                    match started {
                        Ok(running) => {
                            slot.lock().unwrap().replace(running.broker.clone());
                            // Before any partition role (those wait for the registration):
                            // no truncation of this incarnation goes unseen.
                            let (trace_history, node) = (history.clone(), index as i32 + 1);
                            running
                                .broker
                                .observe_replication(Arc::new(move |e| match e {
                                    ReplicationEvent::Truncated {
                                        topic: t,
                                        partition,
                                        leader_epoch,
                                        from,
                                        to,
                                    } if *t == topic => trace_history.record(
                                        clock.now_ms(),
                                        Event::Partition(PartitionEvent::Truncated {
                                            node,
                                            partition: *partition,
                                            leader_epoch: *leader_epoch,
                                            from: *from,
                                            to: *to,
                                        }),
                                    ),
                                    ReplicationEvent::Truncated { .. } => {}
                                }));
                            up.store(true, Ordering::SeqCst);
                            // Serve until the nemesis kills this node, or the log directory
                            // goes offline: then the process exits (as `weir serve` does) and
                            // waits for a restart.
                            let reason = running.broker.storage_offline().await;
                            up.store(false, Ordering::SeqCst);
                            history.record(
                                clock.now_ms(),
                                Event::Note(format!("broker-{index} offline: {reason}")),
                            );
                            restart.request(format!("log directory offline: {reason}"));
                            let _keep = running;
                            std::future::pending::<()>().await;
                        }
                        Err(e) => {
                            // Like a process that exits: the node stays down until restarted.
                            history.record(
                                clock.now_ms(),
                                Event::Note(format!("broker-{index} failed to start: {e:#}")),
                            );
                            restart.request(format!("failed to start: {e:#}"));
                        }
                    }
                }
            })
            .build();
        nodes.lock().unwrap().push(node.id());
        machines.push(Machine {
            node: node.id(),
            disk,
            clock: node_clock,
            up,
            paused: AtomicBool::new(false),
            restart,
            strikes,
            power: tokio::sync::Mutex::new(()),
            broker: slot,
            voter: scenario.cluster.is_voter(index),
            starting,
        });
    }
    let peers: Vec<std::sync::Weak<Strikes>> = machines
        .iter()
        .map(|m| Arc::downgrade(&m.strikes))
        .collect();
    for m in &machines {
        let _ = m.strikes.peers.set(peers.clone());
    }
    let client_node = handle
        .create_node()
        .name("clients")
        .ip(IpAddr::V4(Ipv4Addr::new(10, 0, 2, 1)))
        .build();
    nodes.lock().unwrap().push(client_node.id());
    let addr = broker_addr(0);
    // Clients bootstrap from every broker (pure controllers serve no clients).
    let addrs: Vec<SocketAddr> = (0..scenario.cluster.nodes())
        .filter(|&i| scenario.cluster.is_broker(i))
        .map(broker_addr)
        .collect();
    let addr = if multi { addrs[0] } else { addr };
    let topic = scenario.topic.clone();
    let acks = scenario.producers.acks_value()?;
    history.record(
        clock.now_ms(),
        Event::Note(format!(
            "start: {} broker(s), topic {} x{}",
            machines.len(),
            topic.name,
            topic.partitions
        )),
    );
    if let Some(id) = &cluster_id {
        history.record(
            clock.now_ms(),
            Event::Note(format!(
                "cluster {id}: {} node(s), {} voter(s), roles {:?}",
                machines.len(),
                machines.iter().filter(|m| m.voter).count(),
                scenario.cluster.roles
            )),
        );
    }

    // Create the topic (retrying while the broker starts, on the next broker each time).
    let created = {
        let topic = topic.clone();
        let addrs = addrs.clone();
        client_node
            .spawn(async move {
                let io = client_io();
                for attempt in 0..300 {
                    let addr = addrs[attempt % addrs.len()];
                    if let Ok(mut c) = Client::connect(&io, addr).await {
                        match c
                            .create_topic(
                                &topic.name,
                                topic.partitions,
                                topic.replication_factor,
                                &topic.configs,
                            )
                            .await
                        {
                            Ok(()) => return Ok(()),
                            Err(ClientError::Kafka(
                                kafka_protocol::error::ResponseError::TopicAlreadyExists,
                                _,
                            )) => return Ok(()),
                            // A cluster's brokers register a heartbeat or two after the quorum
                            // elects: until then placement finds too few brokers.
                            Err(ClientError::Kafka(
                                kafka_protocol::error::ResponseError::InvalidReplicationFactor,
                                _,
                            )) if addrs.len() > 1 => {}
                            Err(e) if !e.is_retriable() => return Err(e.to_string()),
                            Err(_) => {}
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err("could not create the topic".to_string())
            })
            .await
            .map_err(|e| e.to_string())?
    };
    created?;

    let mut tasks = Vec::new();
    let interval = Duration::from_micros(1_000_000 / scenario.producers.rate as u64);
    for id in 0..scenario.producers.count {
        let spec = ProducerSpec {
            id,
            addr,
            // In a cluster: producer k writes partition k mod P, through its leader.
            bootstrap: if multi { addrs.clone() } else { Vec::new() },
            partition: multi.then(|| (id % topic.partitions as u32) as i32),
            topic: topic.name.clone(),
            partitions: topic.partitions,
            acks,
            idempotent: scenario.producers.idempotent,
            interval,
            batch_records: scenario.producers.batch_records,
            retries: scenario.producers.retries,
            timeout: Duration::from_millis(scenario.producers.request_timeout_ms),
            delivery_timeout: Duration::from_millis(scenario.producers.delivery_timeout_ms),
            retry_backoff: Duration::from_millis(scenario.producers.retry_backoff_ms),
            retry_backoff_max: Duration::from_millis(scenario.producers.retry_backoff_max_ms),
            metadata_max_age: Duration::from_millis(
                scenario.producers.metadata_refresh_interval_ms,
            ),
            max_in_flight: scenario.producers.max_in_flight,
            until_ms: duration_ms,
        };
        tasks.push(client_node.spawn(producer::run_producer(
            client_io(),
            spec,
            history.clone(),
            clock,
        )));
    }
    for id in 0..scenario.consumers.count {
        let spec = ConsumerSpec {
            id,
            addr,
            bootstrap: if multi { addrs.clone() } else { Vec::new() },
            topic: topic.name.clone(),
            partitions: topic.partitions,
            max_wait: Duration::from_millis(scenario.consumers.max_wait_ms),
            timeout: Duration::from_millis(scenario.producers.request_timeout_ms),
            until_ms: duration_ms,
            rack: match scenario.consumers.racks.as_slice() {
                [] => String::new(),
                racks => racks[id as usize % racks.len()].clone(),
            },
        };
        let io = client_io();
        tasks.push(match scenario.consumers.client {
            ConsumerClient::Basic => {
                client_node.spawn(workload::run_consumer(io, spec, history.clone(), clock))
            }
            ConsumerClient::Librdkafka => client_node.spawn(crate::validating_consumer::run(
                io,
                spec,
                history.clone(),
                clock,
            )),
        });
    }

    if let Some(a) = &scenario.admin {
        let spec = AdminSpec {
            addrs: addrs.clone(),
            interval: Duration::from_millis(a.interval_ms),
            timeout: Duration::from_millis(a.request_timeout_ms),
            until_ms: duration_ms,
        };
        tasks.push(client_node.spawn(admin::run_admin(client_io(), spec, history.clone(), clock)));
    }

    if let Some(r) = &scenario.reassign {
        let spec = crate::reassigner::ReassignSpec {
            addrs: addrs.clone(),
            topic: topic.name.clone(),
            partitions: topic.partitions,
            brokers: (0..scenario.cluster.nodes())
                .filter(|&i| scenario.cluster.is_broker(i))
                .map(|i| i as i32 + 1)
                .collect(),
            replication_factor: topic.replication_factor.max(1) as usize,
            interval: Duration::from_millis(r.interval_ms),
            timeout: Duration::from_millis(r.request_timeout_ms),
            cancel_one_in: r.cancel_one_in,
            until_ms: duration_ms,
        };
        tasks.push(client_node.spawn(crate::reassigner::run_reassigner(
            client_io(),
            spec,
            history.clone(),
            clock,
        )));
    }

    if let Some(d) = &scenario.deleter {
        let spec = crate::record_deleter::DeleterSpec {
            bootstrap: if multi { addrs.clone() } else { vec![addr] },
            topic: topic.name.clone(),
            partitions: topic.partitions,
            interval_ms: d.interval_ms,
            count: d.count,
            keep_ms: d.keep_ms,
            timeout: Duration::from_millis(d.request_timeout_ms),
            api_timeout: Duration::from_millis(d.api_timeout_ms),
            until_ms: duration_ms,
        };
        tasks.push(client_node.spawn(crate::record_deleter::run_deleter(
            client_io(),
            spec,
            history.clone(),
            clock,
        )));
    }

    if let Some(g) = &scenario.groups {
        let spec = GroupsSpec {
            groups: g.clone(),
            addr,
            bootstrap: if multi { addrs.clone() } else { Vec::new() },
            topic: topic.name.clone(),
            partitions: topic.partitions,
            timeout: Duration::from_millis(scenario.producers.request_timeout_ms),
            churn_until_ms: duration_ms,
            until_ms: duration_ms + g.drain_secs * 1000,
        };
        for group in 0..g.count {
            for slot in 0..g.members {
                let (io, spec, history) = (client_io(), spec.clone(), history.clone());
                tasks.push(match g.protocol_of(group) {
                    GroupProtocol::Consumer => client_node.spawn(consumer_workload::run_member(
                        io, spec, group, slot, history, clock,
                    )),
                    _ => client_node.spawn(group_workload::run_member(
                        io, spec, group, slot, history, clock,
                    )),
                });
            }
        }
        tasks.push(client_node.spawn(group_workload::run_observer(
            client_io(),
            spec,
            history.clone(),
            clock,
        )));
    }

    if let Some(spec) = crate::txn_workload::TxnSpec::of(&scenario, addrs.clone(), duration_ms) {
        let t = &spec.txns;
        for id in 0..t.producers {
            tasks.push(client_node.spawn(crate::txn_workload::run_producer(
                client_io(),
                spec.clone(),
                id,
                history.clone(),
                clock,
            )));
        }
        if t.pipeline {
            for partition in 0..t.partitions {
                tasks.push(client_node.spawn(crate::txn_pipeline::run_task(
                    client_io(),
                    spec.clone(),
                    partition,
                    history.clone(),
                    clock,
                )));
            }
        }
        tasks.push(client_node.spawn(crate::txn_workload::run_reader(
            client_io(),
            spec,
            history.clone(),
            clock,
        )));
    }

    let nemesis = Nemesis {
        machines,
        failovers: Default::default(),
        others: vec![client_node.id()],
        spec: scenario.nemesis.clone(),
        history: history.clone(),
        clock,
        topic: Some((topic.name.clone(), topic.partitions)),
    };
    let observer = std::sync::Mutex::new(QuorumObserver::default());
    let min_isr = min_insync_replicas(&scenario);
    let trace = std::sync::Mutex::new(PartitionTrace::new(&topic.name, min_isr));
    if multi {
        tokio::join!(
            nemesis.run_random(duration_ms),
            nemesis.run_timeline(),
            nemesis.run_restarts(duration_ms),
            nemesis.run_aimed(duration_ms),
            sample_quorum(&nemesis, &observer, &trace, clock, duration_ms, None),
        );
    } else {
        tokio::join!(
            nemesis.run_random(duration_ms),
            nemesis.run_timeline(),
            nemesis.run_restarts(duration_ms)
        );
    }
    let now = clock.now_ms();
    if now < duration_ms {
        tokio::time::sleep(Duration::from_millis(duration_ms - now)).await;
    }
    nemesis.heal().await;
    if scenario.groups.is_some() {
        history.record(clock.now_ms(), Event::Group(GroupEvent::Healed));
    }
    for task in tasks {
        // Workloads stop by themselves at the deadline; a request in flight is bounded by its
        // time-out, so this wait is bounded too.
        let _ = task.await;
    }
    if multi {
        let (quorum, quorum_liveness) = quorum_after_heal(
            &nemesis,
            observer,
            &trace,
            &client_node,
            addrs.clone(),
            &scenario,
            history.clone(),
            clock,
        )
        .await?;
        // Partitions KIP-966 leaves leaderless on purpose are not judged for liveness: the
        // metadata keeps being replayed into the trace while the end runs, and a partition
        // joins `exempt` as soon as its committed state proves it (`PartitionTrace`).
        let unclean_election = scenario
            .topic
            .configs
            .get("unclean.leader.election.enable")
            .or_else(|| scenario.broker.get("unclean.leader.election.enable"))
            .is_some_and(|v| v == "true");
        let exempt: Exempt = Arc::default();
        let ended = AtomicBool::new(false);
        let end = async {
            let data = if scenario.producers.count > 0 || scenario.consumers.count > 0 {
                let (final_read, mut liveness) = read_back(
                    addr,
                    addrs.clone(),
                    &topic,
                    &exempt,
                    &client_node,
                    &history,
                    clock,
                )
                .await?;
                // Every replica catches up with its leader, then no two disagree below their
                // high watermarks.
                let rf = topic.replication_factor.max(1) as usize;
                let (logs, lag) = replica_read::settle(
                    &nemesis.machines,
                    &topic.name,
                    topic.partitions,
                    rf,
                    &exempt,
                    clock,
                )
                .await;
                let mut replicas = Vec::new();
                for (p, r) in &logs {
                    replicas.extend(replica_check::check(*p, r));
                }
                let batches: usize = logs.values().flatten().map(|r| r.batches.len()).sum();
                history.record(
                clock.now_ms(),
                Event::Note(format!(
                    "replicas: {} partition(s), {} replica logs, {batches} batches compared, {} divergences",
                    logs.len(),
                    logs.values().map(Vec::len).sum::<usize>(),
                    replicas.len()
                )),
            );
                if let Some(why) = lag {
                    let why = format!(
                        "replicas not caught up {:?} after the final read: {why}",
                        replica_read::CATCH_UP_BOUND
                    );
                    history.record(clock.now_ms(), Event::Note(why.clone()));
                    liveness = Some(liveness.map_or(why.clone(), |l| format!("{l}; {why}")));
                }
                Some((final_read, liveness, replicas))
            } else {
                None
            };
            ended.store(true, Ordering::SeqCst);
            Ok::<_, String>(data)
        };
        let (data, ()) = tokio::join!(
            end,
            feed_trace(
                &nemesis,
                &trace,
                (!unclean_election).then_some(&exempt),
                clock,
                &ended
            )
        );
        let data = data?;
        let unavailable: Vec<i32> = exempt.lock().unwrap().iter().copied().collect();
        if scenario.groups.is_some() && !unavailable.is_empty() {
            history.record(
                clock.now_ms(),
                Event::Group(GroupEvent::Unavailable {
                    partitions: unavailable,
                }),
            );
        }
        let end = multi_node_end(
            quorum,
            quorum_liveness,
            data,
            &scenario,
            &client_node,
            addrs.clone(),
            history.clone(),
            clock,
            sim_end,
        )
        .await?;
        end_probes(&scenario, &client_node, addrs, history, clock, &slots).await?;
        return Ok(end);
    }

    let (final_read, liveness) = read_back(
        addr,
        Vec::new(),
        &topic,
        &Exempt::default(),
        &client_node,
        &history,
        clock,
    )
    .await?;
    let final_metadata = if scenario.admin.is_some() {
        let history = history.clone();
        let read = client_node
            .spawn(async move {
                let io = client_io();
                let mut last = String::new();
                // Bounded retries for connection trouble, as for the final read.
                for _ in 0..50 {
                    match admin::read_metadata(&io, addr).await {
                        Ok(m) => return Ok(m),
                        Err(e) => last = e.to_string(),
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(format!("final metadata read failed: {last}"))
            })
            .await
            .map_err(|e| e.to_string())?;
        match read {
            Ok(m) => {
                history.record(
                    clock.now_ms(),
                    Event::Note(format!("final metadata: {} admin topics", m.len())),
                );
                Some(m)
            }
            Err(e) => {
                history.record(clock.now_ms(), Event::Note(e.clone()));
                return Err(e);
            }
        }
    } else {
        None
    };
    *sim_end.lock().unwrap() = clock.now_ms() as f64 / 1000.0;
    end_probes(&scenario, &client_node, vec![addr], history, clock, &slots).await?;
    Ok((final_read, liveness, final_metadata, None, Vec::new()))
}

/// After healing: the liveness probe (a produce and a fetch per partition within the bound),
/// then the final read of every partition. `bootstrap` not empty: a cluster, where each
/// partition is produced to and read from its leader.
async fn read_back(
    addr: SocketAddr,
    bootstrap: Vec<SocketAddr>,
    topic: &crate::scenario::Topic,
    exempt: &Exempt,
    client_node: &madsim::runtime::NodeHandle,
    history: &History,
    clock: RunClock,
) -> Result<(FinalRead, Option<String>), String> {
    // Liveness: after healing, a produce and a fetch must succeed within the bound.
    let liveness_history = history.clone();
    let topic_name = topic.name.clone();
    let partitions = topic.partitions;
    let routes = bootstrap.clone();
    let skip = exempt.clone();
    let liveness = client_node
        .spawn(async move {
            liveness_check(
                addr,
                &routes,
                &topic_name,
                partitions,
                &skip,
                liveness_history,
                clock,
            )
            .await
        })
        .await
        .map_err(|e| e.to_string())?;
    if let Some(why) = &liveness {
        history.record(
            clock.now_ms(),
            Event::Note(format!("liveness failed: {why}")),
        );
    }
    let topic_name = topic.name.clone();
    let exempt = exempt.clone();
    let final_read = client_node
        .spawn({
            let history = history.clone();
            async move {
                if bootstrap.is_empty() {
                    let all = 0..partitions;
                    return match final_read(
                        addr,
                        &[],
                        &topic_name,
                        all,
                        FINAL_READ_BOUND,
                        history.clone(),
                        clock,
                    )
                    .await
                    {
                        Ok(read) => (read, None),
                        Err(e) => (FinalRead::new(), Some(e)),
                    };
                }
                // A cluster: partition by partition, so that one without a leader leaves the
                // others judged (it is missing from the read: unknown, not lost).
                let bound =
                    (FINAL_READ_BOUND / partitions.max(1) as u32).max(Duration::from_secs(20));
                let mut read = FinalRead::new();
                let mut failed = Vec::new();
                // A partition left leaderless by design has nobody to read from.
                for p in 0..partitions {
                    if exempt.lock().unwrap().contains(&p) {
                        continue;
                    }
                    let one = p..p + 1;
                    match final_read(
                        addr,
                        &bootstrap,
                        &topic_name,
                        one,
                        bound,
                        history.clone(),
                        clock,
                    )
                    .await
                    {
                        Ok(r) => read.extend(r),
                        Err(e) => failed.push(format!("partition {p}: {e}")),
                    }
                }
                (read, (!failed.is_empty()).then(|| failed.join("; ")))
            }
        })
        .await
        .map_err(|e| e.to_string())?;
    let (final_read, liveness) = match final_read {
        (read, None) => (read, liveness),
        (read, Some(e)) => {
            history.record(clock.now_ms(), Event::Note(e.clone()));
            (
                read,
                Some(liveness.map_or(e.clone(), |l| format!("{l}; {e}"))),
            )
        }
    };
    let total: usize = final_read.values().map(|r| r.records.len()).sum();
    let digest: Vec<(i32, usize, i64)> = final_read
        .iter()
        .map(|(p, r)| {
            (
                *p,
                r.records.len(),
                r.records.last().map(|x| x.0).unwrap_or(-1),
            )
        })
        .collect();
    history.record(
        clock.now_ms(),
        Event::Note(format!("final read: {total} records {digest:?}")),
    );
    Ok((final_read, liveness))
}

/// What a run ends with: the final read, the data liveness verdict, the final metadata (with
/// an admin workload), in multi-node worlds the quorum findings with the quorum liveness
/// verdict, and the replicas' divergences below their high watermarks.
type SimEnd = (
    FinalRead,
    Option<String>,
    Option<FinalMetadata>,
    Option<(QuorumFindings, Option<String>)>,
    Vec<String>,
);

/// The workload topic's `min.insync.replicas` (its own config, else the brokers').
fn min_insync_replicas(scenario: &Scenario) -> usize {
    scenario
        .topic
        .configs
        .get("min.insync.replicas")
        .or_else(|| scenario.broker.get("min.insync.replicas"))
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
}

/// Writes `meta.properties` as `weir format --cluster-id ID` does (Kafka's format), so every
/// node of the world belongs to one cluster.
async fn format_node(
    disk: &MemDisk,
    cluster_id: &str,
    node_id: i32,
    log_dirs: &[String],
) -> Result<(), String> {
    // Every directory of `log.dirs` (JBOD), each with its own id, as `weir format` writes them.
    for (n, dir) in log_dirs.iter().enumerate() {
        let dir = std::path::Path::new(dir);
        weir::io::create_dir_all_durable(disk, dir)
            .await
            .map_err(|e| format!("format node {node_id}: {e}"))?;
        let id = uuid::Uuid::from_u64_pair(node_id as u64, n as u64 + 1000);
        let text = format!(
            "version=1\ncluster.id={cluster_id}\nnode.id={node_id}\ndirectory.id={}\n",
            weir::broker::identity::encode_id(id)
        );
        weir::io::write_file_atomic(disk, &dir.join("meta.properties"), text.as_bytes())
            .await
            .map_err(|e| format!("format node {node_id}: {e}"))?;
    }
    Ok(())
}

/// Finalizes `transaction.version=2` in the new cluster's first metadata, as `weir format`
/// does by default (its bootstrap records, committed by the first active controller).
async fn finalize_transactions_v2(disk: &MemDisk, log_dirs: &[String]) -> Result<(), String> {
    let Some(dir) = log_dirs.first() else {
        return Ok(());
    };
    let dir = std::path::Path::new(dir);
    let record = weir::controller::MetadataRecord::FeatureLevel {
        name: weir::controller::features::TRANSACTION_VERSION.to_string(),
        level: 2,
    };
    let line = serde_json::to_string(&record).map_err(|e| e.to_string())? + "\n";
    weir::io::create_dir_all_durable(disk, dir)
        .await
        .map_err(|e| format!("bootstrap records: {e}"))?;
    weir::io::write_file_atomic(
        disk,
        &dir.join(weir::broker::bootstrap_records::FILE),
        line.as_bytes(),
    )
    .await
    .map_err(|e| format!("bootstrap records: {e}"))
}

/// The workload partitions left leaderless by design (KIP-966), as the trace proves them.
use crate::read_back::Exempt;

/// From healing to the end: replays newly committed metadata into the partition trace every
/// [`COMMITTED_EVERY`] samples, and (`exempt` given: unclean election off) adds each partition
/// the trace proves leaderless by design, with a note saying why.
async fn feed_trace(
    nemesis: &Nemesis,
    trace: &std::sync::Mutex<PartitionTrace>,
    exempt: Option<&Exempt>,
    clock: RunClock,
    ended: &AtomicBool,
) {
    while !ended.load(Ordering::SeqCst) {
        let at = clock.now_ms();
        // The lock is released before the sleep (a block: clippy does not see `drop`).
        {
            let mut t = trace.lock().unwrap();
            for m in &nemesis.machines {
                let broker = m.broker.lock().unwrap().clone();
                let Some(broker) = broker else { continue };
                let records = broker.committed_metadata(t.next_offset(), COMMITTED_BATCH);
                for event in t.feed(&records) {
                    nemesis.history.record(at, event);
                }
            }
            if let Some(exempt) = exempt {
                let mut set = exempt.lock().unwrap();
                for (p, why) in t.designed_unavailable() {
                    if set.insert(p) {
                        nemesis.history.record(
                            at,
                            Event::Note(format!(
                                "designed unavailability, not judged for liveness: {why}"
                            )),
                        );
                    }
                }
            }
        }
        tokio::time::sleep(SAMPLE_EVERY * COMMITTED_EVERY as u32).await;
    }
}

/// Samples every running node's quorum status every [`SAMPLE_EVERY`], and its newly committed
/// metadata every [`COMMITTED_EVERY`] rounds, until `until_ms` of run time (or `done`).
async fn sample_quorum(
    nemesis: &Nemesis,
    observer: &std::sync::Mutex<QuorumObserver>,
    trace: &std::sync::Mutex<PartitionTrace>,
    clock: RunClock,
    until_ms: u64,
    done: Option<&AtomicBool>,
) {
    let mut round = 0u64;
    while clock.now_ms() < until_ms && !done.is_some_and(|d| d.load(Ordering::SeqCst)) {
        let at = clock.now_ms();
        {
            let mut o = observer.lock().unwrap();
            for m in &nemesis.machines {
                let broker = m.broker.lock().unwrap().clone();
                let Some(broker) = broker else { continue };
                let status = broker.quorum_status();
                o.observe_status(at, &status);
                if round.is_multiple_of(COMMITTED_EVERY) {
                    let node = status.node_id;
                    let records = broker.committed_metadata(o.cursor(node), COMMITTED_BATCH);
                    o.observe_committed(at, node, &records);
                    for event in trace.lock().unwrap().feed(&records) {
                        nemesis.history.record(at, event);
                    }
                }
            }
        }
        nemesis.observe_failovers(at);
        round += 1;
        tokio::time::sleep(SAMPLE_EVERY).await;
    }
}

/// After healing: a leader must appear and a CreateTopics must commit within
/// [`QUORUM_BOUND`], then every node must reach one committed end within
/// [`CATCH_UP_BOUND`]; then each node's whole committed sequence is compared.
#[allow(clippy::too_many_arguments)]
async fn quorum_after_heal(
    nemesis: &Nemesis,
    observer: std::sync::Mutex<QuorumObserver>,
    trace: &std::sync::Mutex<PartitionTrace>,
    client_node: &madsim::runtime::NodeHandle,
    addrs: Vec<SocketAddr>,
    scenario: &Scenario,
    history: History,
    clock: RunClock,
) -> Result<(QuorumFindings, Option<String>), String> {
    let start = clock.now_ms();
    let deadline = start + QUORUM_BOUND.as_millis() as u64;
    let done = AtomicBool::new(false);
    let partitions = scenario.topic.partitions.min(3);
    let rf = scenario.topic.replication_factor;
    let create = client_node.spawn(async move {
        let io = client_io();
        let mut last = String::from("no attempt");
        let mut attempt = 0usize;
        while clock.now_ms() < deadline {
            let addr = addrs[attempt % addrs.len()];
            attempt += 1;
            let tried = async {
                let mut c = Client::connect(&io, addr).await?;
                c.set_timeout(Duration::from_secs(5));
                c.create_topic("quorum-liveness", partitions, rf, &BTreeMap::new())
                    .await
            };
            match io.timeout(Duration::from_secs(6), tried).await {
                Some(Ok(())) => return Ok(addr),
                // An earlier attempt that timed out on our side landed after all.
                Some(Err(ClientError::Kafka(
                    kafka_protocol::error::ResponseError::TopicAlreadyExists,
                    _,
                ))) => return Ok(addr),
                Some(Err(e)) => last = format!("{addr}: {e}"),
                None => last = format!("{addr}: timed out"),
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Err(last)
    });
    let created = async {
        let r = create.await;
        done.store(true, Ordering::SeqCst);
        r
    };
    let (created, ()) = tokio::join!(
        created,
        sample_quorum(nemesis, &observer, trace, clock, deadline, Some(&done))
    );
    let mut liveness = match created.map_err(|e| e.to_string())? {
        Ok(addr) => {
            history.record(
                clock.now_ms(),
                Event::Note(format!(
                    "quorum liveness: topic created through {addr} after {} ms",
                    clock.now_ms() - start
                )),
            );
            None
        }
        Err(e) => Some(format!(
            "no metadata change committed within {QUORUM_BOUND:?} of healing: {e}"
        )),
    };
    let leader = nemesis.quorum_leader();
    if leader.is_none() && liveness.is_none() {
        liveness = Some("a topic was created but no node claims to lead the quorum".into());
    }
    // Every node reaches the same committed end (the one with the most).
    let catch_up = clock.now_ms() + CATCH_UP_BOUND.as_millis() as u64;
    let finals = loop {
        let finals: Vec<(i32, Vec<(u64, Bytes)>)> = nemesis
            .machines
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let broker = m.broker.lock().unwrap().clone();
                let records = broker
                    .map(|b| b.committed_metadata(0, usize::MAX))
                    .unwrap_or_default();
                (i as i32 + 1, records)
            })
            .collect();
        let ends: Vec<u64> = finals
            .iter()
            .map(|(_, r)| r.last().map_or(0, |(o, _)| o + 1))
            .collect();
        let top = ends.iter().copied().max().unwrap_or(0);
        if ends.iter().all(|&e| e == top) || clock.now_ms() >= catch_up {
            if let Some((node, end)) = finals
                .iter()
                .zip(&ends)
                .find(|(_, &e)| e < top)
                .map(|((n, _), e)| (*n, *e))
            {
                let why = format!(
                    "node {node} committed metadata ends at {end}, others at {top}, {CATCH_UP_BOUND:?} after the change"
                );
                liveness = Some(liveness.map_or(why.clone(), |l| format!("{l}; {why}")));
            }
            break finals;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let mut observer = observer.into_inner().unwrap();
    let at = clock.now_ms();
    for (node, records) in &finals {
        observer.observe_final(at, *node, records);
        for event in trace.lock().unwrap().feed(records) {
            history.record(at, event);
        }
    }
    let findings = observer.into_findings();
    history.record(
        at,
        Event::Note(format!(
            "quorum: leader {:?}, {} epochs led, {} committed offsets, {} samples",
            leader.map(|i| i + 1),
            findings.epochs,
            findings.offsets,
            findings.samples
        )),
    );
    if let Some(why) = &liveness {
        history.record(at, Event::Note(format!("quorum liveness failed: {why}")));
    }
    Ok((findings, liveness))
}

/// The end of a multi-node run: the data workload's read-back and replica findings (`data`,
/// when it has one); the admin topics' metadata, read through any broker.
#[allow(clippy::too_many_arguments)]
async fn multi_node_end(
    quorum: QuorumFindings,
    quorum_liveness: Option<String>,
    data: Option<(FinalRead, Option<String>, Vec<String>)>,
    scenario: &Scenario,
    client_node: &madsim::runtime::NodeHandle,
    addrs: Vec<SocketAddr>,
    history: History,
    clock: RunClock,
    sim_end: Arc<std::sync::Mutex<f64>>,
) -> Result<SimEnd, String> {
    let final_metadata = if scenario.admin.is_some() {
        let read = client_node
            .spawn(async move {
                let io = client_io();
                let mut last = String::new();
                for attempt in 0..50 {
                    let addr = addrs[attempt % addrs.len()];
                    match admin::read_metadata(&io, addr).await {
                        Ok(m) => return Ok(m),
                        Err(e) => last = format!("{addr}: {e}"),
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(format!("final metadata read failed: {last}"))
            })
            .await
            .map_err(|e| e.to_string())?;
        match read {
            Ok(m) => {
                history.record(
                    clock.now_ms(),
                    Event::Note(format!("final metadata: {} admin topics", m.len())),
                );
                Some(m)
            }
            Err(e) => {
                history.record(clock.now_ms(), Event::Note(e.clone()));
                return Err(e);
            }
        }
    } else {
        None
    };
    *sim_end.lock().unwrap() = clock.now_ms() as f64 / 1000.0;
    let (final_read, liveness, replicas) = data.unwrap_or((FinalRead::new(), None, Vec::new()));
    Ok((
        final_read,
        liveness,
        final_metadata,
        Some((quorum, quorum_liveness)),
        replicas,
    ))
}

fn client_io() -> Io {
    Io {
        clock: Arc::new(weir::io::os::TokioClock::new()),
        rng: Arc::new(OsRng::with_seed(madsim::rand::random())),
        spawner: Arc::new(TokioSpawn),
        net: Arc::new(TokioNet),
        // Clients never touch a disk.
        disk: Arc::new(MemDisk::new(0)),
    }
}

/// The liveness probe on the client machine (see [`read_back::liveness_check`]).
async fn liveness_check(
    addr: SocketAddr,
    bootstrap: &[SocketAddr],
    topic: &str,
    partitions: i32,
    exempt: &Exempt,
    history: History,
    clock: RunClock,
) -> Option<String> {
    let io = client_io();
    let probe = read_back::Probe {
        addr,
        bootstrap,
        topic,
        bound: LIVENESS_BOUND,
    };
    read_back::liveness_check(&io, probe, partitions, exempt, history, clock).await
}

/// The final read on the client machine (see [`read_back::final_read`]).
async fn final_read(
    addr: SocketAddr,
    bootstrap: &[SocketAddr],
    topic: &str,
    parts: std::ops::Range<i32>,
    bound: Duration,
    history: History,
    clock: RunClock,
) -> Result<FinalRead, String> {
    let io = client_io();
    let probe = read_back::Probe {
        addr,
        bootstrap,
        topic,
        bound,
    };
    read_back::final_read(&io, probe, parts, history, clock).await
}
