//! The foreign clients of a real-process run: real client libraries in their own processes,
//! each writing the simulator's history lines (`history_file`) to its own file, merged into
//! the run's history by time. librdkafka (confluent-kafka, with `--python`): a producer
//! (partition 0, the scenario's acks and idempotence), a consumer that assign()s every
//! partition and reads it end to end, two consumer groups (classic and KIP-848) committing
//! after processing, and an AdminClient changing its own topics. kafkajs (with `--node` and
//! tests/jepsen/node_modules): an idempotent acks=all producer on partition 1. A client whose
//! runtime is missing is left out and named.
//!
//! Producers stop at the deadline; consumers and the admin client go on until the runner
//! creates the stop file (everything healed, the producers done), then drain and read back.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::run::Options;
use crate::group_check::{Expected, GroupEvent};
use crate::history::{Event, History};
use crate::history_file::HistoryFile;
use crate::scenario::Scenario;
use crate::workload::RunClock;

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/jepsen");

/// Ids in the history, past the simulator's own clients': producer ids (the top bits of an
/// op) and the assign consumer's consumer id.
const CONFLUENT_PRODUCER_ID: u32 = 1000;
const KAFKAJS_PRODUCER_ID: u32 = 1001;
const ASSIGN_CONSUMER_ID: u32 = 1000;
/// Members per consumer group, and how long after healing a group has to settle.
const GROUP_MEMBERS: u32 = 2;
const SETTLE_BOUND_MS: u64 = 30_000;
/// How long a consumer may drain after the stop file (inside the runner's drain bound).
const CONSUMER_DRAIN_SECS: u64 = 40;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Foreign {
    ConfluentProducer,
    KafkajsProducer,
    AssignConsumer,
    /// A consumer group: its id in the history (0, 1, ...) and `group.protocol`.
    Group {
        id: u32,
        protocol: &'static str,
    },
    Admin,
}

impl Foreign {
    pub fn name(&self) -> String {
        match self {
            Foreign::ConfluentProducer => "confluent-producer".into(),
            Foreign::KafkajsProducer => "kafkajs-producer".into(),
            Foreign::AssignConsumer => "confluent-assign-consumer".into(),
            Foreign::Group { protocol, .. } => format!("confluent-group-{protocol}"),
            Foreign::Admin => "confluent-admin".into(),
        }
    }

    /// Its history lines; its own log (stderr) beside them.
    pub fn out(&self, dir: &Path) -> PathBuf {
        dir.join(format!("{}.jsonl", self.name()))
    }

    pub fn is_producer(&self) -> bool {
        matches!(self, Foreign::ConfluentProducer | Foreign::KafkajsProducer)
    }

    pub fn is_group(&self) -> bool {
        matches!(self, Foreign::Group { .. })
    }

    pub fn spawn(
        &self,
        opts: &Options,
        scenario: &Scenario,
        addrs: &[std::net::SocketAddr],
        now_ms: u64,
        duration_ms: u64,
        stop: &Path,
    ) -> Result<Child, String> {
        let now_epoch_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_err(|e| e.to_string())?
            .as_millis() as u64;
        let origin = (now_epoch_ms - now_ms).to_string();
        let bootstrap = addrs
            .iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join(",");
        let topic = &scenario.topic;
        let (program, script) = match self {
            Foreign::KafkajsProducer => (opts.node.as_ref(), "kafkajs_producer.mjs"),
            Foreign::ConfluentProducer => (opts.python.as_ref(), "confluent_producer.py"),
            Foreign::AssignConsumer | Foreign::Group { .. } => {
                (opts.python.as_ref(), "confluent_consumer.py")
            }
            Foreign::Admin => (opts.python.as_ref(), "confluent_admin.py"),
        };
        let program = program.ok_or_else(|| format!("{}: no runtime", self.name()))?;
        let mut cmd = Command::new(program);
        cmd.arg(format!("{DIR}/{script}"));
        match self {
            Foreign::ConfluentProducer => {
                cmd.args(["--topic", &topic.name])
                    .args(["--acks", &scenario.producers.acks])
                    .args(["--producer", &CONFLUENT_PRODUCER_ID.to_string()])
                    .args(["--rate", &scenario.producers.rate.to_string()]);
                if scenario.producers.idempotent {
                    cmd.arg("--idempotent");
                }
            }
            Foreign::KafkajsProducer => {
                cmd.args(["--topic", &topic.name])
                    .args(["--partition", &(1 % topic.partitions.max(1)).to_string()])
                    .args(["--producer", &KAFKAJS_PRODUCER_ID.to_string()])
                    .args(["--rate", &scenario.producers.rate.to_string()]);
            }
            Foreign::AssignConsumer | Foreign::Group { .. } => {
                match self {
                    Foreign::Group { id, protocol } => cmd
                        .arg("group")
                        .args(["--id", &id.to_string()])
                        .args(["--protocol", protocol])
                        .args(["--members", &GROUP_MEMBERS.to_string()]),
                    _ => cmd
                        .arg("assign")
                        .args(["--id", &ASSIGN_CONSUMER_ID.to_string()]),
                };
                cmd.args(["--topic", &topic.name])
                    .args(["--partitions", &topic.partitions.to_string()])
                    .args(["--drain-secs", &CONSUMER_DRAIN_SECS.to_string()])
                    .arg("--stop")
                    .arg(stop);
            }
            Foreign::Admin => {
                cmd.args(["--seed", &opts.seed.to_string()])
                    .arg("--stop")
                    .arg(stop);
            }
        }
        let out = self.out(&opts.dir);
        cmd.args(["--bootstrap", &bootstrap])
            .args(["--origin-ms", &origin])
            .args(["--until-ms", &duration_ms.to_string()])
            .arg("--out")
            .arg(&out)
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        // The library's own log (connection failures under the faults) goes beside it.
        if let Ok(log) = std::fs::File::create(out.with_extension("log")) {
            cmd.stderr(log);
        }
        cmd.spawn()
            .map_err(|e| format!("{} ({}): {e}", self.name(), program.display()))
    }
}

/// The foreign clients this run can have, and those left out (named, with why).
pub fn plan(scenario: &Scenario, opts: &Options) -> (Vec<Foreign>, Vec<String>) {
    let mut run = Vec::new();
    let mut skipped = Vec::new();
    if opts.python.is_some() {
        run.extend([
            Foreign::ConfluentProducer,
            Foreign::AssignConsumer,
            Foreign::Group {
                id: 0,
                protocol: "classic",
            },
            Foreign::Group {
                id: 1,
                protocol: "consumer",
            },
            Foreign::Admin,
        ]);
    } else {
        skipped.push("confluent-kafka clients (no --python)".into());
    }
    let kafkajs = Path::new(DIR).join("node_modules/kafkajs");
    match &opts.node {
        Some(_) if kafkajs.is_dir() => run.push(Foreign::KafkajsProducer),
        Some(_) => skipped.push(format!(
            "kafkajs producer ({} missing: npm ci in tests/jepsen)",
            kafkajs.display()
        )),
        None => skipped.push("kafkajs producer (no --node)".into()),
    }
    if scenario.topic.partitions < 1 {
        run.retain(|c| !matches!(c, Foreign::AssignConsumer | Foreign::Group { .. }));
    }
    (run, skipped)
}

/// What the group checks expect of this run's groups.
pub fn expected_groups(foreign: &[Foreign], scenario: &Scenario) -> Option<Expected> {
    let groups = foreign.iter().filter(|c| c.is_group()).count() as u32;
    (groups > 0).then_some(Expected {
        groups,
        members: GROUP_MEMBERS,
        partitions: scenario.topic.partitions,
        settle_bound_ms: SETTLE_BOUND_MS,
    })
}

/// Waits for the clients to exit, all within `bound`; kills (and notes) the rest.
pub async fn wait(
    mut children: Vec<(&Foreign, Child)>,
    bound: Duration,
    history: &History,
    clock: RunClock,
) {
    let waited = Instant::now();
    while waited.elapsed() < bound
        && children
            .iter_mut()
            .any(|(_, c)| c.try_wait().ok().flatten().is_none())
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for (client, child) in &mut children {
        if child.try_wait().ok().flatten().is_none() {
            let _ = child.kill();
            history.record(
                clock.now_ms(),
                Event::Note(format!(
                    "{} was killed at the drain bound ({bound:?})",
                    client.name()
                )),
            );
        }
        let _ = child.wait();
    }
}

/// One line on what a client did, from its history lines.
pub fn summary(name: String, h: &HistoryFile) -> String {
    let (mut invoked, mut acked, mut reads, mut commits, mut admin, mut admin_acked) =
        (0, 0, 0, 0, 0, 0);
    for e in &h.entries {
        match &e.event {
            Event::Invoke { .. } => invoked += 1,
            Event::Ack { .. } => acked += 1,
            Event::Read { .. }
            | Event::Group(GroupEvent::Read { .. })
            | Event::Group(GroupEvent::ReadServed { .. }) => reads += 1,
            Event::Group(GroupEvent::CommitAck { .. }) => commits += 1,
            Event::AdminInvoke { .. } => admin += 1,
            Event::AdminAck { .. } => admin_acked += 1,
            _ => {}
        }
    }
    let mut parts = Vec::new();
    if invoked > 0 {
        parts.push(format!("{invoked} produced ({acked} acked)"));
    }
    if reads > 0 {
        parts.push(format!("{reads} reads"));
    }
    if commits > 0 {
        parts.push(format!("{commits} commits acked"));
    }
    if admin > 0 {
        parts.push(format!("{admin} admin ops ({admin_acked} acked)"));
    }
    if h.final_metadata.is_some() {
        parts.push("final metadata read".into());
    }
    if parts.is_empty() {
        parts.push("nothing".into());
    }
    format!("{name}: {}", parts.join(", "))
}
