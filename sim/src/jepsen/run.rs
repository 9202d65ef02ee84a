//! One real-process run of a scenario: namespaces, `weir serve` processes, the simulator's
//! own producers and consumers (Weir's client over real sockets) and the foreign clients
//! (`clients`: librdkafka and kafkajs, each its own process writing history lines) under the
//! real nemesis, then heal, the liveness probe, the final read, the history file, and the
//! simulator's checker on what that file holds. Everything it starts it stops, on success, error or panic
//! ([`Cleanup`]); the wrapper script's trap is the backstop for a killed runner.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use weir::client::{Client, ClientError};
use weir::io::Io;

use super::clients::{self, Foreign};
use super::nemesis::{self, RealNemesis};
use super::net;
use super::nodes::{client_addr, Nodes};
use crate::checker;
use crate::group_check::{self, GroupEvent};
use crate::history::{Event, History};
use crate::history_file::{self, HistoryFile};
use crate::metadata_check;
use crate::producer::{self, ProducerSpec};
use crate::read_back::{self, Exempt, Probe};
use crate::scenario::{Check, Expect, Roles, Scenario};
use crate::workload::{self, ConsumerSpec, RunClock};

/// The checks a real-process history can feed from the scenario's list: the record-level ones.
/// The others need the simulator's view inside the nodes (quorum, replicas) or its own group
/// and admin workloads; the foreign clients' group and admin checks (`GROUP_CHECKS`,
/// `ADMIN_CHECKS`) apply whenever those clients ran.
pub const REAL_CHECKS: &[Check] = &[
    Check::Lost,
    Check::Duplicate,
    Check::Inconsistent,
    Check::Monotonic,
    Check::Corrupt,
    Check::Liveness,
    Check::LostRead,
    Check::Uncommitted,
    Check::Order,
    Check::AckedOffset,
];

/// Judged when the history has group consumers (the librdkafka groups).
pub const GROUP_CHECKS: &[Check] = &[
    Check::GroupOwnership,
    Check::GroupOffsets,
    Check::GroupDelivery,
    Check::GroupSettle,
];

/// Judged when the history has admin changes (the librdkafka AdminClient).
pub const ADMIN_CHECKS: &[Check] = &[Check::Metadata, Check::AdminAvailability];

/// After healing: the bounds on the produce-and-fetch probe, and on the final read.
const LIVENESS_BOUND: Duration = Duration::from_secs(30);
const FINAL_READ_BOUND: Duration = Duration::from_secs(30);
/// How long the cluster has to come up and create the workload's topic.
const START_BOUND: Duration = Duration::from_secs(60);
/// How long the workload's clients have after the deadline to finish what is in flight.
const DRAIN_BOUND: Duration = Duration::from_secs(60);

pub struct Options {
    pub weir: PathBuf,
    /// The `planted` build, for scenarios with a `planted_bug`.
    pub weir_planted: Option<PathBuf>,
    pub seed: u64,
    /// Overrides the scenario's `duration_secs`.
    pub duration_secs: Option<u64>,
    /// The run's directory (properties, data, logs, history).
    pub dir: PathBuf,
    /// A Python with confluent-kafka: adds the librdkafka clients (a producer, an assign()
    /// consumer, a classic and a KIP-848 group, an AdminClient: `clients`).
    pub python: Option<PathBuf>,
    /// A node with kafkajs in tests/jepsen/node_modules: adds the kafkajs producer.
    pub node: Option<PathBuf>,
}

#[derive(Debug)]
pub struct Outcome {
    pub scenario: String,
    pub seed: u64,
    pub expect: Expect,
    pub wall_secs: f64,
    pub faults: usize,
    pub fault_kinds: String,
    pub invoked: usize,
    pub acked: usize,
    pub reads: usize,
    pub violations: Vec<String>,
    /// Scenario fault kinds, checks and clients the suite left out.
    pub left_out: Vec<String>,
    /// Per foreign client: its name and what it did ("kafkajs-producer 410 invoked 398 acked").
    pub clients: Vec<String>,
    pub history: PathBuf,
    /// The run itself could not be done (set-up, start, final read).
    pub error: Option<String>,
}

impl Outcome {
    /// A safe scenario passes with no violation; an unsafe one (a tooth) only when caught.
    pub fn failed(&self) -> bool {
        self.error.is_some()
            || match self.expect {
                Expect::Safe => !self.violations.is_empty(),
                Expect::Unsafe => self.violations.is_empty(),
            }
    }
}

/// Stops every process and removes the namespaces, however the run ends.
struct Cleanup {
    nodes: Option<Arc<Mutex<Nodes>>>,
    count: usize,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(nodes) = self.nodes.take() {
            let mut nodes = nodes.lock().unwrap_or_else(|p| p.into_inner());
            for i in 0..nodes.nodes.len() {
                nodes.kill(i);
            }
        }
        net::teardown(self.count);
    }
}

pub fn run(scenario: &Scenario, opts: &Options) -> Outcome {
    let wall = Instant::now();
    let mut outcome = Outcome {
        scenario: scenario.name.clone(),
        seed: opts.seed,
        expect: scenario.expect,
        wall_secs: 0.0,
        faults: 0,
        fault_kinds: String::new(),
        invoked: 0,
        acked: 0,
        reads: 0,
        violations: Vec::new(),
        clients: Vec::new(),
        left_out: nemesis::unsupported(&scenario.nemesis)
            .iter()
            .map(|k| format!("fault {k:?}"))
            .collect(),
        history: opts.dir.join("history.jsonl"),
        error: None,
    };
    if let Err(e) = run_inner(scenario, opts, &mut outcome) {
        outcome.error = Some(e);
    }
    outcome.wall_secs = wall.elapsed().as_secs_f64();
    outcome
}

fn run_inner(scenario: &Scenario, opts: &Options, outcome: &mut Outcome) -> Result<(), String> {
    if scenario.cluster.roles != Roles::Combined {
        return Err("real-process runs support combined nodes only".into());
    }
    if scenario.admin.is_some() {
        outcome.left_out.push("admin workload".into());
    }
    if scenario.groups.is_some() {
        outcome.left_out.push("groups workload".into());
    }
    let bin = match &scenario.planted_bug {
        Some(_) => opts
            .weir_planted
            .clone()
            .ok_or("the scenario plants a bug: give --weir-planted (a `planted` build)")?,
        None => opts.weir.clone(),
    };
    std::fs::create_dir_all(&opts.dir).map_err(|e| format!("{}: {e}", opts.dir.display()))?;
    let n = scenario.cluster.nodes() as usize;
    let mut cleanup = Cleanup {
        nodes: None,
        count: n,
    };
    net::setup(n)?;
    let nodes = Nodes::start(scenario, &opts.dir, &bin, scenario.planted_bug.clone())?;
    let nodes = Arc::new(Mutex::new(nodes));
    cleanup.nodes = Some(nodes.clone());

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let duration_ms = opts.duration_secs.unwrap_or(scenario.duration_secs) * 1000;
    let history = History::default();
    let (foreign, skipped) = clients::plan(scenario, opts);
    outcome.left_out.extend(skipped);
    let (mut file, tally) = rt.block_on(workload_and_faults(
        scenario,
        opts,
        duration_ms,
        nodes.clone(),
        history,
        &foreign,
    ))?;
    // The foreign clients' lines join the history in time order (a stable sort keeps each
    // client's own order).
    for client in &foreign {
        let Ok(f) = std::fs::File::open(client.out(&opts.dir)) else {
            outcome
                .clients
                .push(format!("{}: no history", client.name()));
            continue;
        };
        let theirs = history_file::read(std::io::BufReader::new(f))
            .map_err(|e| format!("{}: {e}", client.name()))?;
        outcome
            .clients
            .push(clients::summary(client.name(), &theirs));
        file.entries.extend(theirs.entries);
        if theirs.final_metadata.is_some() {
            file.final_metadata = theirs.final_metadata;
        }
    }
    file.entries.sort_by_key(|e| e.at_ms);
    file.groups = clients::expected_groups(&foreign, scenario);
    let exited = nodes.lock().unwrap().exited();
    drop(cleanup);

    // The verdict comes from the file, as `weir-jepsen check` would read it.
    let mut out = std::fs::File::create(&outcome.history)
        .map_err(|e| format!("{}: {e}", outcome.history.display()))?;
    history_file::write(&file, &mut out).map_err(|e| e.to_string())?;
    let judged = judge(&outcome.history, scenario)?;
    outcome.violations = judged.violations;
    outcome.violations.extend(exited);
    outcome.invoked = judged.invoked;
    outcome.acked = judged.acked;
    outcome.reads = judged.reads;
    outcome.clients.extend(judged.transactions);
    outcome.faults = tally.total();
    outcome.fault_kinds = tally
        .faults
        .iter()
        .map(|(k, n)| format!("{k}×{n}"))
        .chain(
            tally
                .failed
                .iter()
                .map(|(k, n)| format!("{k}×{n} not injected")),
        )
        .collect::<Vec<_>>()
        .join(" ");
    Ok(())
}

/// What the checker says about a history file.
pub struct Judged {
    pub violations: Vec<String>,
    pub invoked: usize,
    pub acked: usize,
    pub reads: usize,
    /// What the transactional workload did, when the history has one.
    pub transactions: Option<String>,
}

/// The simulator's checker on a history file, with the scenario's checks (those a real run
/// can feed).
pub fn judge(path: &Path, scenario: &Scenario) -> Result<Judged, String> {
    let input = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let file = history_file::read(std::io::BufReader::new(input))?;
    let mut findings = checker::check(&file.entries, &file.final_read, file.liveness.clone());
    checker::forget_unread(&mut findings, &file.entries, &file.final_read);
    let mut checks: Vec<Check> = scenario
        .checks
        .iter()
        .copied()
        .filter(|c| REAL_CHECKS.contains(c))
        .collect();
    if let Some(expected) = file.groups {
        findings.groups = group_check::check(&file.entries, Some(&file.final_read), expected);
        checks.extend(GROUP_CHECKS);
    }
    let mut transactions = None;
    if file
        .entries
        .iter()
        .any(|e| matches!(e.event, Event::Txn(_)))
    {
        findings.txn = crate::txn_check::check(&file.entries);
        checks.push(Check::Transactions);
        let t = &findings.txn;
        transactions = Some(format!(
            "weir transactional clients: {} transactions ({} committed, {} aborted), {} read_committed reads, {} consume-transform-produce transactions, {} restarts",
            t.transactions, t.committed, t.aborted, t.reads, t.pipeline_transactions, t.restarts
        ));
    }
    let admin = file
        .entries
        .iter()
        .any(|e| matches!(e.event, Event::AdminInvoke { .. }));
    let mut unread_metadata = None;
    if admin {
        checks.extend(ADMIN_CHECKS);
        findings.admin_errors = metadata_check::not_controller(&file.entries)
            .into_iter()
            .map(|(_, why)| why)
            .collect();
        match &file.final_metadata {
            Some(m) => findings.metadata = metadata_check::check(&file.entries, m),
            None => {
                unread_metadata =
                    Some("metadata: the admin client could not read the final metadata".into())
            }
        }
    }
    let mut violations = findings.violations(&checks);
    violations.extend(unread_metadata);
    let g = &findings.groups;
    for (check, examples) in [
        (Check::GroupOffsets, &g.offsets),
        (Check::GroupOwnership, &g.ownership),
        (Check::GroupSettle, &g.unsettled),
        (Check::Metadata, &findings.metadata),
        (Check::AdminAvailability, &findings.admin_errors),
    ] {
        if checks.contains(&check) && !examples.is_empty() {
            violations.push(format!("{check:?}: {}", examples[0]));
        }
    }
    if checks.contains(&Check::GroupDelivery) && !g.undelivered_examples.is_empty() {
        let few: Vec<&str> = g
            .undelivered_examples
            .iter()
            .take(3)
            .map(String::as_str)
            .collect();
        violations.push(format!("GroupDelivery e.g. {}", few.join(", ")));
    }
    for (check, examples) in [
        (Check::Lost, &findings.lost),
        (Check::AckedOffset, &findings.acked_moved),
    ] {
        if checks.contains(&check) && !examples.is_empty() {
            let few: Vec<&str> = examples.iter().take(3).map(String::as_str).collect();
            violations.push(format!("{check:?} e.g. {}", few.join(", ")));
        }
    }
    Ok(Judged {
        violations,
        invoked: findings.invoked,
        acked: findings.acked,
        reads: findings.reads,
        transactions,
    })
}

async fn create_topic(scenario: &Scenario, addrs: &[std::net::SocketAddr]) -> Result<(), String> {
    let io = Io::os();
    let topic = &scenario.topic;
    let started = Instant::now();
    let mut last = String::from("no attempt");
    while started.elapsed() < START_BOUND {
        for a in addrs {
            let attempt = async {
                let mut c = Client::connect(&io, *a).await?;
                c.set_timeout(Duration::from_secs(10));
                c.create_topic(
                    &topic.name,
                    topic.partitions,
                    topic.replication_factor,
                    &topic.configs,
                )
                .await
            };
            match io.timeout(Duration::from_secs(10), attempt).await {
                Some(Ok(())) => return Ok(()),
                Some(Err(ClientError::Kafka(
                    kafka_protocol::error::ResponseError::TopicAlreadyExists,
                    _,
                ))) => return Ok(()),
                Some(Err(e)) => last = e.to_string(),
                None => last = "timed out".into(),
            }
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    Err(format!(
        "could not create the topic within {START_BOUND:?}: {last}"
    ))
}

async fn workload_and_faults(
    scenario: &Scenario,
    opts: &Options,
    duration_ms: u64,
    nodes: Arc<Mutex<Nodes>>,
    history: History,
    foreign: &[Foreign],
) -> Result<(HistoryFile, nemesis::Tally), String> {
    let n = scenario.cluster.nodes() as usize;
    let addrs: Vec<std::net::SocketAddr> = (0..n).map(client_addr).collect();
    create_topic(scenario, &addrs).await?;
    let seed = opts.seed;
    let topic = &scenario.topic;
    let clock = RunClock::start();
    let stop = opts.dir.join("clients.stop");
    let mut running = Vec::new();
    for client in foreign {
        let child = client.spawn(opts, scenario, &addrs, clock.now_ms(), duration_ms, &stop)?;
        running.push((client, child));
    }
    history.record(
        0,
        Event::Note(format!(
            "real processes: {n} nodes, seed {seed}, {duration_ms} ms of workload"
        )),
    );
    let acks = scenario.producers.acks_value()?;
    let interval = Duration::from_micros(1_000_000 / scenario.producers.rate.max(1) as u64);
    let mut tasks = Vec::new();
    for id in 0..scenario.producers.count {
        let spec = ProducerSpec {
            id,
            addr: addrs[0],
            bootstrap: addrs.clone(),
            partition: Some((id % topic.partitions as u32) as i32),
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
        tasks.push(tokio::spawn(producer::run_producer(
            Io::os(),
            spec,
            history.clone(),
            clock,
        )));
    }
    for id in 0..scenario.consumers.count {
        let spec = ConsumerSpec {
            id,
            addr: addrs[0],
            bootstrap: addrs.clone(),
            topic: topic.name.clone(),
            partitions: topic.partitions,
            max_wait: Duration::from_millis(scenario.consumers.max_wait_ms),
            timeout: Duration::from_millis(scenario.producers.request_timeout_ms),
            until_ms: duration_ms,
            rack: String::new(),
        };
        tasks.push(match scenario.consumers.client {
            crate::scenario::ConsumerClient::Basic => tokio::spawn(workload::run_consumer(
                Io::os(),
                spec,
                history.clone(),
                clock,
            )),
            crate::scenario::ConsumerClient::Librdkafka => tokio::spawn(
                crate::validating_consumer::run(Io::os(), spec, history.clone(), clock),
            ),
        });
    }
    // The transactional workload (the simulator's own clients over real sockets): producers,
    // the consume-transform-produce tasks and the read_committed reader, which does the final
    // read and the group's committed offsets once its drain time has passed.
    if let Some(spec) = crate::txn_workload::TxnSpec::of(scenario, addrs.clone(), duration_ms) {
        let t = &spec.txns;
        for id in 0..t.producers {
            tasks.push(tokio::spawn(crate::txn_workload::run_producer(
                Io::os(),
                spec.clone(),
                id,
                history.clone(),
                clock,
            )));
        }
        if t.pipeline {
            for partition in 0..t.partitions {
                tasks.push(tokio::spawn(crate::txn_pipeline::run_task(
                    Io::os(),
                    spec.clone(),
                    partition,
                    history.clone(),
                    clock,
                )));
            }
        }
        tasks.push(tokio::spawn(crate::txn_workload::run_reader(
            Io::os(),
            spec,
            history.clone(),
            clock,
        )));
    }
    let nemesis = RealNemesis {
        nodes,
        spec: scenario.nemesis.clone(),
        history: history.clone(),
        clock,
        topic: topic.name.clone(),
        partitions: topic.partitions,
        seed,
        until_ms: duration_ms,
    };
    let faults = std::thread::spawn(move || nemesis.run());
    // The nemesis thread ends by the deadline plus one fault's hold; poll rather than block
    // the clients' runtime.
    while !faults.is_finished() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let tally = faults
        .join()
        .map_err(|_| "the nemesis panicked".to_string())?;
    if foreign.iter().any(Foreign::is_group) {
        history.record(clock.now_ms(), Event::Group(GroupEvent::Healed));
    }
    for t in tasks {
        if tokio::time::timeout(DRAIN_BOUND, t).await.is_err() {
            history.record(
                clock.now_ms(),
                Event::Note("a client did not finish within the drain bound".into()),
            );
        }
    }
    // The producers stop at the deadline and flush (at most 40 s); then the consumers and the
    // admin client, told that everything has healed and been written, drain and read back.
    let (producers, readers): (Vec<_>, Vec<_>) =
        running.into_iter().partition(|(c, _)| c.is_producer());
    clients::wait(producers, DRAIN_BOUND, &history, clock).await;
    std::fs::write(&stop, b"").map_err(|e| format!("{}: {e}", stop.display()))?;
    clients::wait(readers, DRAIN_BOUND, &history, clock).await;
    let exempt = Exempt::default();
    let probe = |bound| Probe {
        addr: addrs[0],
        bootstrap: &addrs,
        topic: &topic.name,
        bound,
    };
    let io = Io::os();
    let liveness = read_back::liveness_check(
        &io,
        probe(LIVENESS_BOUND),
        topic.partitions,
        &exempt,
        history.clone(),
        clock,
    )
    .await;
    let mut final_read = checker::FinalRead::new();
    let mut failed = Vec::new();
    for p in 0..topic.partitions {
        match read_back::final_read(
            &io,
            probe(FINAL_READ_BOUND),
            p..p + 1,
            history.clone(),
            clock,
        )
        .await
        {
            Ok(r) => final_read.extend(r),
            Err(e) => failed.push(format!("partition {p}: {e}")),
        }
    }
    let liveness = match (liveness, failed.is_empty()) {
        (l, true) => l,
        (l, false) => Some(
            l.into_iter()
                .chain(std::iter::once(failed.join("; ")))
                .collect::<Vec<_>>()
                .join("; "),
        ),
    };
    let total: usize = final_read.values().map(|r| r.records.len()).sum();
    history.record(
        clock.now_ms(),
        Event::Note(format!("final read: {total} records")),
    );
    Ok((
        HistoryFile {
            entries: history.take(),
            final_read,
            liveness,
            ..HistoryFile::default()
        },
        tally,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(text: &str) -> Scenario {
        let s: Scenario = toml::from_str(text).unwrap();
        s.validate().unwrap();
        s
    }

    /// A history file with one acknowledged write the final read no longer has.
    fn lossy_history(dir: &Path) -> PathBuf {
        let path = dir.join("history.jsonl");
        let text = [
            r#"{"type":"invoke","at_ms":1,"op":1,"partition":0,"session":0,"values":["p0-0-0"]}"#,
            r#"{"type":"ack","at_ms":2,"op":1,"offset":0}"#,
            r#"{"type":"invoke","at_ms":3,"op":2,"partition":0,"session":0,"values":["p0-1-0"]}"#,
            r#"{"type":"ack","at_ms":4,"op":2,"offset":1}"#,
            r#"{"type":"final","partition":0,"start":0,"stopped_at":null,"records":[[0,"p0-0-0"]]}"#,
            r#"{"type":"liveness","failure":null}"#,
        ]
        .join("\n");
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn judge_flags_a_lost_acknowledged_write_under_the_scenarios_checks() {
        let dir = std::env::temp_dir().join(format!("weir-jepsen-judge-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = lossy_history(&dir);
        let acks1 = scenario("expect = \"unsafe\"\nchecks = [\"lost\", \"acked-offset\"]");
        let j = judge(&path, &acks1).unwrap();
        assert_eq!((j.invoked, j.acked), (2, 2));
        assert!(
            j.violations
                .iter()
                .any(|v| v.contains("1 lost acknowledged writes")),
            "{:?}",
            j.violations
        );
        // A scenario that checks only duplicates says nothing about it.
        let dups = scenario("checks = [\"duplicate\"]");
        assert!(judge(&path, &dups).unwrap().violations.is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The foreign clients' lines: a group commit accepted below one already acknowledged, and
    /// an acknowledged topic creation the final metadata does not show. The group and admin
    /// checks apply though the scenario lists neither.
    #[test]
    fn judge_applies_the_group_and_admin_checks_to_foreign_clients() {
        let dir = std::env::temp_dir().join(format!("weir-jepsen-clients-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("history.jsonl");
        let commit = |op: u64, at: u64, offset: i64| {
            [
                format!(
                    r#"{{"type":"group","at_ms":{at},"event":{{"kind":"commit","op":{op},"group":0,"member":"m0","generation":1,"offsets":[[0,{offset}]]}}}}"#
                ),
                format!(
                    r#"{{"type":"group","at_ms":{},"event":{{"kind":"commit_ack","op":{op}}}}}"#,
                    at + 1
                ),
            ]
        };
        let mut lines: Vec<String> = Vec::new();
        lines.extend(commit(1, 10, 5));
        lines.extend(commit(2, 20, 3));
        lines.extend([
            r#"{"type":"admin_invoke","at_ms":30,"op":1,"change":{"kind":"create_topic","topic":"admin-1","partitions":2,"configs":{}}}"#.to_string(),
            r#"{"type":"admin_ack","at_ms":31,"op":1}"#.to_string(),
            r#"{"type":"final_metadata","topics":{}}"#.to_string(),
            r#"{"type":"groups","groups":1,"members":1,"partitions":1,"settle_bound_ms":30000}"#.to_string(),
            r#"{"type":"liveness","failure":null}"#.to_string(),
        ]);
        std::fs::write(&path, lines.join("\n")).unwrap();
        let j = judge(&path, &scenario("checks = [\"lost\"]")).unwrap();
        let has = |what: &str| j.violations.iter().any(|v| v.contains(what));
        assert!(
            has("1 committed offsets gone backwards"),
            "{:?}",
            j.violations
        );
        assert!(
            has("1 admin changes lost or half done"),
            "{:?}",
            j.violations
        );
        // Ends in no generation: the settle check says so.
        assert!(has("groups not settled"), "{:?}", j.violations);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The transactional workload's lines: a commit acknowledged whose value the final
    /// read_committed read does not hold. The transactions check applies though the scenario
    /// does not list it.
    #[test]
    fn judge_applies_the_transactions_check_to_a_transactional_history() {
        let dir = std::env::temp_dir().join(format!("weir-jepsen-txn-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("history.jsonl");
        let value = crate::txn_check::value(0, 1, 0);
        let lines = [
            format!(
                r#"{{"type":"txn","at_ms":10,"event":{{"kind":"send","producer":0,"txn":1,"partition":0,"value":"{value}"}}}}"#
            ),
            r#"{"type":"txn","at_ms":20,"event":{"kind":"ended","producer":0,"txn":1,"commit":true}}"#.to_string(),
            r#"{"type":"txn","at_ms":30,"event":{"kind":"final","partition":0,"values":[],"settled":true,"last_stable_offset":0,"high_watermark":0}}"#.to_string(),
            r#"{"type":"liveness","failure":null}"#.to_string(),
        ];
        std::fs::write(&path, lines.join("\n")).unwrap();
        let j = judge(&path, &scenario("checks = [\"duplicate\"]")).unwrap();
        assert!(
            j.violations
                .iter()
                .any(|v| v.contains("acknowledged commits with values missing")),
            "{:?}",
            j.violations
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_tooth_passes_only_when_caught() {
        let mut o = Outcome {
            scenario: "t".into(),
            seed: 1,
            expect: Expect::Unsafe,
            wall_secs: 0.0,
            faults: 0,
            fault_kinds: String::new(),
            invoked: 0,
            acked: 0,
            reads: 0,
            violations: Vec::new(),
            left_out: Vec::new(),
            clients: Vec::new(),
            history: PathBuf::new(),
            error: None,
        };
        assert!(o.failed());
        o.violations.push("1 lost acknowledged writes".into());
        assert!(!o.failed());
        o.expect = Expect::Safe;
        assert!(o.failed());
        o.violations.clear();
        assert!(!o.failed());
        o.error = Some("could not start".into());
        assert!(o.failed());
    }
}
