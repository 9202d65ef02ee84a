//! Config verdicts for users (`cargo sim check --config server.properties [--topic-config …]
//! [--producer …]`): the standard fault suite run against the user's own broker, topic and
//! producer settings, fault class by fault class, with a verdict on whether data the client was
//! told about can be lost, and for an unsafe class the seed and the shrunk schedule showing it.
//!
//! Most classes run on one broker. A class whose outcome in a real cluster rests on replication
//! (the copies on other brokers) runs on a cluster of max(RF, 3) brokers with the user's
//! replication settings kept (replication factor, `min.insync.replicas`, unclean election):
//! leader failover always (faults aimed at partition leaders: kills, power losses, isolation,
//! a zombie leader cut off from the controllers), and power loss when the topic has more than
//! one replica and the broker does not fsync before acknowledging (Kafka's default: durability
//! comes from replication, not fsync). On one broker those replication keys are left out (with
//! `min.insync.replicas=2` a single replica would refuse every write). "needs a cluster" remains
//! only for settings that make no valid cluster scenario.

use std::collections::BTreeMap;

use toml::Value;

use crate::scenario::FaultKind;

/// The user's settings, as given.
#[derive(Clone, Debug, Default)]
pub struct UserConfig {
    /// server.properties.
    pub broker: BTreeMap<String, String>,
    /// `--topic-config k=v,…` (topic-level keys; `replication.factor` is accepted here too).
    pub topic: BTreeMap<String, String>,
    /// `--producer k=v,…` (Kafka producer keys).
    pub producer: BTreeMap<String, String>,
}

/// `key=value` lines; `#` and `!` start comments (as Java properties).
pub fn parse_properties(text: &str) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
            continue;
        }
        let (k, v) = line
            .split_once('=')
            .or_else(|| line.split_once(':'))
            .ok_or_else(|| format!("line {}: expected key=value, got '{line}'", n + 1))?;
        out.insert(k.trim().to_string(), v.trim().to_string());
    }
    Ok(out)
}

/// `k=v,k=v`.
pub fn parse_pairs(text: &str) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = pair
            .split_once('=')
            .ok_or_else(|| format!("expected key=value, got '{pair}'"))?;
        out.insert(k.trim().to_string(), v.trim().to_string());
    }
    Ok(out)
}

/// What the settings mean for durability, with Kafka's defaults for what is not given.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    pub acks: String,
    pub idempotent: bool,
    pub retries: u64,
    pub max_in_flight: u32,
    pub replication_factor: i64,
    pub min_insync: i64,
    pub unclean: bool,
    pub fsync_before_ack: bool,
}

fn bool_of(key: &str, v: &str) -> Result<bool, String> {
    match v {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(format!("{key} must be true or false, not '{v}'")),
    }
}

fn int_of(key: &str, v: &str) -> Result<i64, String> {
    v.parse()
        .map_err(|_| format!("{key} must be an integer, not '{v}'"))
}

impl Settings {
    pub fn of(c: &UserConfig) -> Result<Settings, String> {
        // A topic override wins over the broker default, as in Kafka.
        let either = |key: &str| c.topic.get(key).or_else(|| c.broker.get(key));
        let acks = c.producer.get("acks").map_or("all", String::as_str);
        let acks = match acks {
            "all" | "-1" => "all",
            "1" => "1",
            "0" => "0",
            other => return Err(format!("acks must be 0, 1 or all, not '{other}'")),
        };
        let idempotent = c
            .producer
            .get("enable.idempotence")
            .map_or(Ok(true), |v| bool_of("enable.idempotence", v))?;
        let retries = c
            .producer
            .get("retries")
            .map_or(Ok(i32::MAX as i64), |v| int_of("retries", v))?;
        let max_in_flight = c
            .producer
            .get("max.in.flight.requests.per.connection")
            .map_or(Ok(5), |v| {
                int_of("max.in.flight.requests.per.connection", v)
            })?;
        if retries < 0 || !(1..=64).contains(&max_in_flight) {
            return Err(
                "retries must be ≥ 0 and max.in.flight.requests.per.connection 1..=64".into(),
            );
        }
        if idempotent && (max_in_flight > 5 || acks != "all" || retries == 0) {
            // The Kafka producer refuses this combination at start (ConfigException).
            return Err(
                "enable.idempotence=true needs acks=all, retries > 0 and at most 5 requests in \
                 flight (the Kafka producer refuses to start otherwise); set \
                 enable.idempotence=false to check the other settings"
                    .into(),
            );
        }
        let replication_factor = match c.topic.get("replication.factor") {
            Some(v) => int_of("replication.factor", v)?,
            None => c
                .broker
                .get("default.replication.factor")
                .map_or(Ok(1), |v| int_of("default.replication.factor", v))?,
        };
        let min_insync =
            either("min.insync.replicas").map_or(Ok(1), |v| int_of("min.insync.replicas", v))?;
        let unclean = either("unclean.leader.election.enable")
            .map_or(Ok(false), |v| bool_of("unclean.leader.election.enable", v))?;
        let fsync_before_ack = c
            .broker
            .get("weir.fsync.before.ack")
            .map_or(Ok(false), |v| bool_of("weir.fsync.before.ack", v))?;
        Ok(Settings {
            acks: acks.to_string(),
            idempotent,
            retries: retries as u64,
            max_in_flight: max_in_flight as u32,
            replication_factor,
            min_insync,
            unclean,
            fsync_before_ack,
        })
    }

    /// How these settings differ from the no-loss recipe (acks=all, retries, unclean election
    /// off, RF ≥ 3, min.insync.replicas > 1, RF > min.insync.replicas), each with the fault
    /// class where Kafka's documentation says it loses data.
    pub fn deviations(&self) -> Vec<String> {
        let mut out = Vec::new();
        match self.acks.as_str() {
            "0" => out.push(
                "acks=0: the producer is never told whether a write arrived; anything in flight \
                 when the broker dies is gone (process kill)"
                    .to_string(),
            ),
            "1" => out.push(
                "acks=1: the leader alone acknowledges; a write it loses before a follower \
                 copies it is gone (leader failover)"
                    .to_string(),
            ),
            _ => {}
        }
        if self.retries == 0 {
            out.push(
                "retries=0: a send that meets a transient error fails instead of being \
                 resent (network partition)"
                    .into(),
            );
        }
        if !self.idempotent && self.retries > 0 {
            out.push(
                "enable.idempotence=false with retries: a resent batch may be written twice \
                 (network partition)"
                    .into(),
            );
        }
        if self.unclean {
            out.push(
                "unclean.leader.election.enable=true: a replica outside the ISR may become \
                 leader and truncate acknowledged writes (leader failover)"
                    .into(),
            );
        }
        if self.replication_factor < 3 {
            out.push(format!(
                "replication.factor={}: fewer than three copies (power loss, leader failover)",
                self.replication_factor
            ));
        }
        if self.min_insync <= 1 {
            out.push(format!(
                "min.insync.replicas={}: acks=all is satisfied by the leader alone (leader failover)",
                self.min_insync
            ));
        }
        if self.replication_factor <= self.min_insync && self.replication_factor > 1 {
            out.push(format!(
                "replication.factor={} ≤ min.insync.replicas={}: one broker down stops every \
                 acks=all write (availability, not loss)",
                self.replication_factor, self.min_insync
            ));
        }
        out
    }
}

/// The standard fault suite, by class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum FaultClass {
    ProcessKill,
    PowerLoss,
    NetworkPartition,
    DiskFaults,
    LeaderFailover,
}

impl FaultClass {
    pub const ALL: [FaultClass; 5] = [
        FaultClass::ProcessKill,
        FaultClass::PowerLoss,
        FaultClass::NetworkPartition,
        FaultClass::DiskFaults,
        FaultClass::LeaderFailover,
    ];

    pub fn name(self) -> &'static str {
        match self {
            FaultClass::ProcessKill => "process kill",
            FaultClass::PowerLoss => "power loss",
            FaultClass::NetworkPartition => "network partition",
            FaultClass::DiskFaults => "disk faults",
            FaultClass::LeaderFailover => "leader failover",
        }
    }

    pub fn file_stem(self) -> &'static str {
        match self {
            FaultClass::ProcessKill => "process-kill",
            FaultClass::PowerLoss => "power-loss",
            FaultClass::NetworkPartition => "network-partition",
            FaultClass::DiskFaults => "disk-faults",
            FaultClass::LeaderFailover => "leader-failover",
        }
    }

    fn weights(self) -> Vec<(FaultKind, u32)> {
        use FaultKind::*;
        match self {
            FaultClass::ProcessKill => vec![(Kill, 1)],
            FaultClass::PowerLoss => vec![(PowerLoss, 1)],
            FaultClass::NetworkPartition => {
                vec![(Isolate, 1), (IsolateOut, 2), (Split, 1), (Latency, 1)]
            }
            FaultClass::DiskFaults => vec![(DiskEio, 2), (DiskFull, 1), (SyncEio, 2), (Kill, 1)],
            FaultClass::LeaderFailover => vec![
                (KillPartitionLeader, 2),
                (PowerLossPartitionLeader, 1),
                (IsolatePartitionLeader, 1),
                (CutPartitionLeaderFromControllers, 2),
                (Kill, 1),
            ],
        }
    }

    /// The class's faults on a cluster: power loss also aims at partition leaders there.
    fn cluster_weights(self) -> Vec<(FaultKind, u32)> {
        match self {
            FaultClass::PowerLoss => vec![
                (FaultKind::PowerLoss, 1),
                (FaultKind::PowerLossPartitionLeader, 2),
            ],
            other => other.weights(),
        }
    }

    /// How many brokers the class runs on with these settings: a cluster of max(RF, 3) (at most
    /// 9) when [`FaultClass::needs_cluster`] says replication decides, else one.
    pub fn brokers(self, s: &Settings) -> u32 {
        if self.needs_cluster(s).is_some() {
            s.replication_factor.clamp(3, 9) as u32
        } else {
            1
        }
    }

    /// Why this class cannot be judged on one broker with these settings, if it cannot (it
    /// then runs on a cluster, see [`FaultClass::brokers`]).
    pub fn needs_cluster(self, s: &Settings) -> Option<String> {
        match self {
            FaultClass::PowerLoss if s.replication_factor > 1 && !s.fsync_before_ack => {
                Some(format!(
                "with replication.factor={} and no fsync before acknowledging (Kafka's default), \
                 what survives one broker's power loss is the copies on the other brokers",
                s.replication_factor
            ))
            }
            FaultClass::LeaderFailover => Some(format!(
                "a leader change judges replication.factor={}, min.insync.replicas={}, \
                 unclean.leader.election.enable={} and acks={}",
                s.replication_factor, s.min_insync, s.unclean, s.acks
            )),
            _ => None,
        }
    }
}

/// Replication time-outs a cluster class sets when the user does not (see `scenario_value`).
const CLUSTER_TIMEOUTS: [(&str, &str); 3] = [
    ("replica.lag.time.max.ms", "3000"),
    ("broker.session.timeout.ms", "3000"),
    ("broker.heartbeat.interval.ms", "500"),
];

/// Keys the simulated world sets itself (identity, listeners, directories, the quorum).
const WORLD_KEYS: [&str; 12] = [
    "node.id",
    "broker.id",
    "listeners",
    "advertised.listeners",
    "listener.security.protocol.map",
    "inter.broker.listener.name",
    "controller.listener.names",
    "controller.quorum.voters",
    "controller.quorum.bootstrap.servers",
    "process.roles",
    "log.dirs",
    "log.dir",
];

/// Replication keys one broker cannot honour; they are judged by the classes that need a
/// cluster instead (with `min.insync.replicas=2` a single replica would refuse every write).
const REPLICATION_KEYS: [&str; 7] = [
    "default.replication.factor",
    "replication.factor",
    "min.insync.replicas",
    "unclean.leader.election.enable",
    "offsets.topic.replication.factor",
    "transaction.state.log.replication.factor",
    "transaction.state.log.min.isr",
];

/// Settings of the user's file that the check does not pass to the simulated broker.
pub fn left_out(c: &UserConfig) -> Vec<String> {
    c.broker
        .keys()
        .chain(c.topic.keys())
        .filter(|k| WORLD_KEYS.contains(&k.as_str()) || REPLICATION_KEYS.contains(&k.as_str()))
        .cloned()
        .collect()
}

fn table(pairs: Vec<(String, Value)>) -> Value {
    Value::Table(pairs.into_iter().collect())
}

fn text(s: &str) -> Value {
    Value::String(s.to_string())
}

/// The class's scenario on `brokers` brokers, as a scenario file's TOML value.
pub fn scenario_value(c: &UserConfig, s: &Settings, class: FaultClass, brokers: u32) -> Value {
    let keep = |k: &String| {
        !WORLD_KEYS.contains(&k.as_str())
            && (brokers > 1 || !REPLICATION_KEYS.contains(&k.as_str()))
    };
    let broker: toml::map::Map<String, Value> = c
        .broker
        .iter()
        .filter(|(k, _)| keep(k))
        .map(|(k, v)| (k.clone(), text(v)))
        .collect();
    let topic_configs = c
        .topic
        .iter()
        .filter(|(k, _)| keep(k) && k.as_str() != "replication.factor")
        .map(|(k, v)| (k.clone(), text(v)))
        .collect();
    let rf = if brokers > 1 { s.replication_factor } else { 1 };
    let mut broker = broker;
    if brokers > 1 {
        // Kafka's replication time-outs (30 s lag, 9 s session), scaled to the suite's
        // 20-second runs as its producer time-outs are, unless the user set them.
        for (k, v) in CLUSTER_TIMEOUTS {
            if !c.broker.contains_key(k) {
                broker.insert(k.to_string(), text(v));
            }
        }
    }
    let weights = if brokers > 1 {
        class.cluster_weights()
    } else {
        class.weights()
    };
    let weights = weights
        .into_iter()
        .map(|(k, w)| {
            let name = Value::try_from(k).expect("a fault kind renders");
            (
                name.as_str().unwrap_or_default().to_string(),
                Value::Integer(w as i64),
            )
        })
        .collect();
    let checks = [
        "lost",
        "acked-offset",
        "lost-read",
        "duplicate",
        "inconsistent",
        "order",
        "sent",
    ];
    table(vec![
        ("name".into(), text(&format!("check-{}", class.file_stem()))),
        (
            "description".into(),
            text(&format!(
                "cargo sim check: {} against the user's settings",
                class.name()
            )),
        ),
        ("duration_secs".into(), Value::Integer(20)),
        (
            "checks".into(),
            Value::Array(checks.iter().map(|c| text(c)).collect()),
        ),
        (
            "cluster".into(),
            table(vec![("brokers".into(), Value::Integer(brokers as i64))]),
        ),
        ("broker".into(), Value::Table(broker)),
        (
            "topic".into(),
            table(vec![
                ("partitions".into(), Value::Integer(3)),
                ("replication_factor".into(), Value::Integer(rf)),
                ("configs".into(), Value::Table(topic_configs)),
            ]),
        ),
        (
            "producers".into(),
            table(vec![
                // In a cluster each producer writes one partition (through its leader).
                (
                    "count".into(),
                    Value::Integer(if brokers > 1 { 3 } else { 2 }),
                ),
                ("acks".into(), text(&s.acks)),
                ("idempotent".into(), Value::Boolean(s.idempotent)),
                ("rate".into(), Value::Integer(50)),
                ("batch_records".into(), Value::Integer(4)),
                // Kafka's default is "forever" (bounded by delivery.timeout.ms); the suite's
                // runs are 20 s, so its time-outs and retries are scaled down with them.
                ("retries".into(), Value::Integer(s.retries.min(10) as i64)),
                ("request_timeout_ms".into(), Value::Integer(1000)),
                (
                    "max_in_flight".into(),
                    Value::Integer(s.max_in_flight as i64),
                ),
            ]),
        ),
        (
            "consumers".into(),
            table(vec![("count".into(), Value::Integer(1))]),
        ),
        (
            "nemesis".into(),
            table(vec![
                (
                    "interval_ms".into(),
                    Value::Array(vec![Value::Integer(800), Value::Integer(3000)]),
                ),
                (
                    "duration_ms".into(),
                    Value::Array(vec![Value::Integer(200), Value::Integer(2500)]),
                ),
                (
                    "latency_ms".into(),
                    Value::Array(vec![Value::Integer(100), Value::Integer(800)]),
                ),
                ("weights".into(), Value::Table(weights)),
            ]),
        ),
    ])
}

/// One class's verdict.
#[derive(Clone, Debug)]
pub enum Verdict {
    /// Every seed passed.
    Safe { seeds: usize },
    /// A seed lost (or duplicated) data the client was told about.
    Unsafe {
        seed: u64,
        violations: Vec<String>,
        /// The shrunk schedule, as a one-line summary, the file holding it and where its
        /// picture would go; or why it could not be shrunk.
        shrunk: Result<(String, String, String), String>,
    },
    /// Writes were given up on that a producer with retries would have resent.
    Dropped { seed: u64, failed: usize },
    /// One broker cannot show it.
    NeedsCluster(String),
    /// The run could not judge: after healing the cluster did not serve (no leader, no
    /// produce), so "nothing lost" would mean nothing.
    Inconclusive { seed: u64, why: String },
}

#[cfg(madsim)]
pub use run::check;

#[cfg(madsim)]
mod run {
    use super::*;
    use crate::shrink;
    use crate::sweep::run_isolated;

    /// Runs the suite: each class over `seeds` (stopping at the first that fails), shrinking
    /// the failing seed and writing its schedule under `out_dir`.
    pub fn check(
        c: &UserConfig,
        seeds: &[u64],
        out_dir: &std::path::Path,
        log: &mut dyn FnMut(&str),
    ) -> Result<Vec<(FaultClass, Verdict)>, String> {
        let s = Settings::of(c)?;
        std::fs::create_dir_all(out_dir).map_err(|e| format!("{}: {e}", out_dir.display()))?;
        let mut out = Vec::new();
        for class in FaultClass::ALL {
            // Replication decides leader failover (and power loss without fsync): a cluster.
            let brokers = class.brokers(&s);
            let value = scenario_value(c, &s, class, brokers);
            let name = format!("check-{}", class.file_stem());
            let scenario = match shrink::parse(&value, &name) {
                Ok(sc) => sc,
                Err(e) if brokers > 1 => {
                    let why = class.needs_cluster(&s).unwrap_or_default();
                    out.push((class, Verdict::NeedsCluster(format!("{why}; {e}"))));
                    continue;
                }
                Err(e) => return Err(format!("the settings make no valid scenario: {e}")),
            };
            log(&format!("check: {} ({} seeds)", class.name(), seeds.len()));
            let mut verdict = Verdict::Safe { seeds: 0 };
            for &seed in seeds {
                let o = run_isolated(&scenario, seed);
                if !o.passed {
                    let file = out_dir.join(format!("{}.toml", class.file_stem()));
                    let shrunk = shrink::shrink(&value, &name, seed, false, 120, &mut |_| {})
                        .and_then(|sh| {
                            std::fs::write(&file, &sh.toml)
                                .map_err(|e| format!("{}: {e}", file.display()))?;
                            let faults: Vec<String> = sh
                                .after
                                .faults
                                .iter()
                                .map(|f| {
                                    format!(
                                        "{} on node {} at {} ms for {} ms",
                                        toml::Value::try_from(f.fault)
                                            .ok()
                                            .and_then(|v| v.as_str().map(str::to_string))
                                            .unwrap_or_default(),
                                        f.node,
                                        f.at_ms,
                                        f.duration_ms.unwrap_or(0)
                                    )
                                })
                                .collect();
                            Ok((
                                format!(
                                    "{} → {} faults: {}",
                                    sh.before.faults.len(),
                                    sh.after.faults.len(),
                                    if faults.is_empty() {
                                        "none needed".to_string()
                                    } else {
                                        faults.join(", ")
                                    }
                                ),
                                file.display().to_string(),
                                file.with_extension("html").display().to_string(),
                            ))
                        });
                    verdict = Verdict::Unsafe {
                        seed,
                        violations: o.violations.clone(),
                        shrunk,
                    };
                    break;
                }
                if let Some(why) = o.findings.liveness.as_ref().filter(|_| brokers > 1) {
                    // Data checks pass vacuously when nothing was served; say so instead.
                    verdict = Verdict::Inconclusive {
                        seed,
                        why: why.clone(),
                    };
                    break;
                }
                if s.retries == 0 && o.findings.failed > 0 {
                    verdict = Verdict::Dropped {
                        seed,
                        failed: o.findings.failed,
                    };
                    break;
                }
                if let Verdict::Safe { seeds } = &mut verdict {
                    *seeds += 1;
                }
            }
            out.push((class, verdict));
        }
        Ok(out)
    }
}

/// The verdict table.
pub fn render(c: &UserConfig, results: &[(FaultClass, Verdict)]) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    if let Ok(s) = Settings::of(c) {
        let _ = writeln!(
            out,
            "settings: acks={} enable.idempotence={} retries={} max.in.flight={} \
             replication.factor={} min.insync.replicas={} unclean.leader.election.enable={} \
             weir.fsync.before.ack={}",
            s.acks,
            s.idempotent,
            s.retries,
            s.max_in_flight,
            s.replication_factor,
            s.min_insync,
            s.unclean,
            s.fsync_before_ack
        );
        let deviations = s.deviations();
        if deviations.is_empty() {
            let _ = writeln!(out, "the no-loss recipe: no deviation");
        }
        for d in deviations {
            let _ = writeln!(out, "deviation from the no-loss recipe: {d}");
        }
    }
    let left = left_out(c);
    if !left.is_empty() {
        let _ = writeln!(
            out,
            "not passed to the single-broker classes: {} (the world sets its own identity and \
             directories; replication settings are judged by the classes that run on a cluster)",
            left.join(", ")
        );
    }
    let _ = writeln!(out);
    for (class, v) in results {
        let line = match v {
            Verdict::Safe { seeds } => format!("safe            {seeds} seeds, nothing lost"),
            Verdict::Unsafe {
                seed,
                violations,
                shrunk,
            } => {
                let mut l = format!("UNSAFE          seed {seed}: {}", violations.join("; "));
                match shrunk {
                    Ok((summary, file, html)) => {
                        let _ = write!(
                            l,
                            "\n{:19}shrunk: {summary}\n{:19}replay: cargo sim run {file} --seed {seed} --html {html}",
                            "", ""
                        );
                    }
                    Err(e) => {
                        let _ = write!(l, "\n{:19}(not shrunk: {e})", "");
                    }
                }
                l
            }
            Verdict::Dropped { seed, failed } => format!(
                "UNSAFE          seed {seed}: {failed} writes given up (retries=0; a producer \
                 with retries resends them)"
            ),
            Verdict::NeedsCluster(why) => format!("needs a cluster  {why}"),
            Verdict::Inconclusive { seed, why } => {
                format!(
                    "inconclusive    seed {seed}: the cluster did not serve after healing: {why}"
                )
            }
        };
        let _ = writeln!(out, "{:<18} {line}", class.name());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recipe() -> UserConfig {
        UserConfig {
            broker: parse_properties(
                "# the recipe\nnode.id=1\nlisteners=PLAINTEXT://:9092\ndefault.replication.factor=3\n\
                 min.insync.replicas=2\nunclean.leader.election.enable=false\n",
            )
            .unwrap(),
            topic: BTreeMap::new(),
            producer: parse_pairs("acks=all,enable.idempotence=true,retries=2147483647").unwrap(),
        }
    }

    #[test]
    fn the_recipe_has_no_deviation_and_needs_a_cluster_only_where_replication_decides() {
        let s = Settings::of(&recipe()).unwrap();
        assert!(s.deviations().is_empty(), "{:?}", s.deviations());
        assert!(FaultClass::ProcessKill.needs_cluster(&s).is_none());
        assert!(FaultClass::PowerLoss.needs_cluster(&s).is_some());
        assert!(FaultClass::LeaderFailover.needs_cluster(&s).is_some());
        let v = scenario_value(&recipe(), &s, FaultClass::PowerLoss, 1);
        let sc = crate::shrink::parse(&v, "x").unwrap();
        // One broker: one replica, no min.insync.replicas=2 (it would refuse every write),
        // and the world's own listeners.
        assert_eq!(sc.topic.replication_factor, 1);
        assert!(!sc.broker.contains_key("min.insync.replicas"));
        assert!(!sc.broker.contains_key("listeners"));
        assert!(sc.checks.contains(&crate::scenario::Check::Sent));
    }

    #[test]
    fn replication_classes_run_on_a_cluster_with_the_users_replication_settings() {
        let s = Settings::of(&recipe()).unwrap();
        assert_eq!(FaultClass::ProcessKill.brokers(&s), 1);
        assert_eq!(FaultClass::LeaderFailover.brokers(&s), 3);
        assert_eq!(FaultClass::PowerLoss.brokers(&s), 3);
        let v = scenario_value(&recipe(), &s, FaultClass::LeaderFailover, 3);
        let sc = crate::shrink::parse(&v, "x").unwrap();
        assert_eq!(sc.cluster.brokers, 3);
        assert_eq!(sc.topic.replication_factor, 3);
        assert_eq!(sc.broker["min.insync.replicas"], "2");
        assert_eq!(sc.broker["unclean.leader.election.enable"], "false");
        assert_eq!(sc.broker["replica.lag.time.max.ms"], "3000");
        assert!(!sc.broker.contains_key("listeners"));
        assert!(sc.producers.count as i32 >= sc.topic.partitions);
        assert!(sc.nemesis.weights[&FaultKind::KillPartitionLeader] > 0);
        assert!(sc.nemesis.weights[&FaultKind::CutPartitionLeaderFromControllers] > 0);
        let power = scenario_value(&recipe(), &s, FaultClass::PowerLoss, 3);
        let sc = crate::shrink::parse(&power, "x").unwrap();
        assert!(sc.nemesis.weights[&FaultKind::PowerLossPartitionLeader] > 0);
        // A user's own time-out wins.
        let mut c = recipe();
        c.broker
            .insert("broker.session.timeout.ms".into(), "9000".into());
        let v = scenario_value(&c, &s, FaultClass::LeaderFailover, 3);
        let sc = crate::shrink::parse(&v, "x").unwrap();
        assert_eq!(sc.broker["broker.session.timeout.ms"], "9000");
    }

    #[test]
    fn each_deviation_is_named() {
        let with = |f: &dyn Fn(&mut UserConfig)| {
            let mut c = recipe();
            f(&mut c);
            Settings::of(&c).unwrap()
        };
        let acks0 = with(&|c| {
            c.producer.insert("acks".into(), "0".into());
            c.producer
                .insert("enable.idempotence".into(), "false".into());
        });
        assert!(acks0.deviations()[0].starts_with("acks=0"));
        let rf1 = with(&|c| {
            c.broker
                .insert("default.replication.factor".into(), "1".into());
        });
        // One replica: a single broker is exactly the cluster, so power loss is judged.
        assert!(FaultClass::PowerLoss.needs_cluster(&rf1).is_none());
        let unclean = with(&|c| {
            c.topic
                .insert("unclean.leader.election.enable".into(), "true".into());
        });
        assert!(unclean.deviations()[0].starts_with("unclean"));
        let fsync = with(&|c| {
            c.broker
                .insert("weir.fsync.before.ack".into(), "true".into());
        });
        assert!(FaultClass::PowerLoss.needs_cluster(&fsync).is_none());
    }

    #[test]
    fn settings_the_kafka_producer_refuses_are_refused() {
        let mut c = recipe();
        c.producer.insert("acks".into(), "1".into());
        assert!(Settings::of(&c).unwrap_err().contains("enable.idempotence"));
        assert!(parse_pairs("acks").is_err());
        assert!(parse_properties("just words").is_err());
    }
}
