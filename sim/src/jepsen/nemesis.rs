//! The real-process nemesis: the scenario's `[nemesis]` weights, intervals and durations,
//! drawn from the run's seed, applied to processes and packets: random faults one at a time
//! (inject, hold for its duration, heal), the `timeline` at its times, on threads of their own
//! so that `kill`, `nft` and `tc` never block the clients. Fault kinds a real machine cannot do here (power loss, disk and clock
//! faults) are left out and named in the report ([`unsupported`]).

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use weir::client::Client;
use weir::io::Io;

use super::net::{self, Cut};
use super::nodes::{client_addr, Nodes};
use crate::history::{Event, History};
use crate::scenario::{FaultKind, Nemesis as Spec};
use crate::workload::RunClock;

/// Whether the suite can inject `kind` on real processes.
pub fn supported(kind: FaultKind) -> bool {
    use FaultKind::*;
    matches!(
        kind,
        Kill | Pause
            | Isolate
            | IsolateOut
            | Split
            | Latency
            | Loss
            | KillLeader
            | PauseLeader
            | IsolateLeader
            | SplitLeaderMinority
            | CutFromControllers
            | KillPartitionLeader
            | PausePartitionLeader
            | IsolatePartitionLeader
            | CutPartitionLeaderFromControllers
    )
}

/// The scenario's fault kinds (random or timeline) the suite leaves out.
pub fn unsupported(spec: &Spec) -> Vec<FaultKind> {
    let mut kinds: Vec<FaultKind> = spec
        .weights
        .iter()
        .filter(|(_, &w)| w > 0)
        .map(|(&k, _)| k)
        .chain(spec.timeline.iter().map(|t| t.fault))
        .filter(|&k| !supported(k))
        .collect();
    kinds.sort();
    kinds.dedup();
    kinds
}

pub struct RealNemesis {
    pub nodes: Arc<Mutex<Nodes>>,
    pub spec: Spec,
    pub history: History,
    pub clock: RunClock,
    pub topic: String,
    pub partitions: i32,
    pub seed: u64,
    pub until_ms: u64,
}

/// What a nemesis run did.
#[derive(Debug, Default)]
pub struct Tally {
    pub faults: BTreeMap<String, usize>,
    /// Faults that could not be injected (say, latency on a kernel without `sch_netem`).
    pub failed: BTreeMap<String, usize>,
}

impl Tally {
    pub fn total(&self) -> usize {
        self.faults.values().sum()
    }
}

fn draw(rng: &mut SmallRng, range: [u64; 2]) -> u64 {
    rng.random_range(range[0]..=range[1].max(range[0]))
}

impl RealNemesis {
    fn node_count(&self) -> usize {
        self.nodes.lock().unwrap().nodes.len()
    }

    fn note(&self, event: Event) {
        self.history.record(self.clock.now_ms(), event);
    }

    /// The scenario's timeline and its random faults until the deadline, then everything
    /// healed. Random faults come one at a time; each timeline fault runs on a thread of its
    /// own from its `at_ms`, so timeline faults overlap as they do in the simulator (two cuts
    /// of one node overlap loosely: the first heal lifts both).
    pub fn run(&self) -> Tally {
        let tally = Mutex::new(Tally::default());
        std::thread::scope(|scope| {
            scope.spawn(|| self.run_timeline(&tally));
            self.run_random(&tally);
        });
        self.heal_all();
        tally.into_inner().unwrap_or_else(|p| p.into_inner())
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime for leader look-ups")
    }

    /// Bounded: each round sleeps at least `interval_ms[0]` (≥ 1 ms) and holds a fault at
    /// most `duration_ms[1]`, until the deadline, at most 10,000 rounds.
    fn run_random(&self, tally: &Mutex<Tally>) {
        let mut rng = SmallRng::seed_from_u64(self.seed);
        let kinds: Vec<(FaultKind, u32)> = self
            .spec
            .weights
            .iter()
            .filter(|(&k, &w)| w > 0 && supported(k))
            .map(|(&k, &w)| (k, w))
            .collect();
        let total: u32 = kinds.iter().map(|(_, w)| w).sum();
        let rt = Self::runtime();
        for _round in 0..10_000 {
            let wait = draw(&mut rng, self.spec.interval_ms).max(1);
            if self.clock.now_ms() + wait >= self.until_ms || total == 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(wait));
            let mut pick = rng.random_range(0..total);
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
                .expect("pick < total");
            let left = self.until_ms.saturating_sub(self.clock.now_ms());
            let hold = Duration::from_millis(draw(&mut rng, self.spec.duration_ms).min(left));
            let target = self.target(kind, None, &mut rng, &rt);
            self.inject(kind, target, hold, &mut rng, tally);
        }
    }

    /// The timeline's supported faults before the deadline (at most 1,000), each at its time.
    fn run_timeline(&self, tally: &Mutex<Tally>) {
        let mut faults: Vec<_> = self
            .spec
            .timeline
            .iter()
            .filter(|t| supported(t.fault) && t.at_ms < self.until_ms)
            .take(1_000)
            .cloned()
            .collect();
        faults.sort_by_key(|t| t.at_ms);
        std::thread::scope(|scope| {
            for (k, t) in faults.into_iter().enumerate() {
                let wait = t.at_ms.saturating_sub(self.clock.now_ms());
                std::thread::sleep(Duration::from_millis(wait));
                scope.spawn(move || {
                    let mut rng = SmallRng::seed_from_u64(self.seed ^ (k as u64 + 1) << 32);
                    let hold = t
                        .duration_ms
                        .unwrap_or_else(|| draw(&mut rng, self.spec.duration_ms));
                    let n = self.node_count();
                    let target = if t.fault.at_leader().is_some()
                        || t.fault.at_partition_leader().is_some()
                    {
                        self.target(t.fault, t.partition, &mut rng, &Self::runtime())
                    } else {
                        (t.node as usize).min(n - 1)
                    };
                    let hold = Duration::from_millis(hold);
                    self.inject(t.fault, target, hold, &mut rng, tally);
                });
            }
        });
    }

    fn inject(
        &self,
        kind: FaultKind,
        target: usize,
        hold: Duration,
        rng: &mut SmallRng,
        tally: &Mutex<Tally>,
    ) {
        self.note(Event::Inject(kind));
        let result = self.apply(kind, target, hold, rng);
        let mut tally = tally.lock().unwrap_or_else(|p| p.into_inner());
        match result {
            Ok(()) => *tally.faults.entry(format!("{kind:?}")).or_default() += 1,
            Err(e) => {
                *tally.failed.entry(format!("{kind:?}")).or_default() += 1;
                self.note(Event::Note(format!("fault {kind:?} failed: {e}")));
            }
        }
    }

    /// The node a fault hits: the quorum's or a partition's leader for the kinds aimed at
    /// one (a random node when no leader answers in time), else a random node.
    fn target(
        &self,
        kind: FaultKind,
        partition: Option<i32>,
        rng: &mut SmallRng,
        rt: &tokio::runtime::Runtime,
    ) -> usize {
        let n = self.node_count();
        let random = rng.random_range(0..n);
        let addrs: Vec<SocketAddr> = (0..n).map(client_addr).collect();
        let found = if kind.at_leader().is_some() {
            rt.block_on(quorum_leader(&addrs))
        } else if kind.at_partition_leader().is_some() {
            let p = partition.unwrap_or_else(|| rng.random_range(0..self.partitions.max(1)));
            rt.block_on(partition_leader(&addrs, &self.topic, p))
        } else {
            None
        };
        found.filter(|&i| i < n).unwrap_or(random)
    }

    fn apply(
        &self,
        kind: FaultKind,
        i: usize,
        hold: Duration,
        rng: &mut SmallRng,
    ) -> Result<(), String> {
        let base = kind
            .at_leader()
            .or(kind.at_partition_leader())
            .unwrap_or(kind);
        let n = self.node_count();
        let ms = hold.as_millis();
        let others: Vec<Ipv4Addr> = (0..n).filter(|&j| j != i).map(net::node_ip).collect();
        let node = i + 1;
        match base {
            FaultKind::Kill => {
                self.nodes.lock().unwrap().kill(i);
                self.note(Event::Fault(format!("kill -9 node {node}")));
                std::thread::sleep(hold);
                self.nodes.lock().unwrap().launch(i)?;
                self.note(Event::Heal(format!("restart node {node} after {ms} ms")));
            }
            FaultKind::Pause => {
                self.nodes.lock().unwrap().pause(i);
                self.note(Event::Fault(format!("SIGSTOP node {node} for {ms} ms")));
                std::thread::sleep(hold);
                self.nodes.lock().unwrap().resume(i);
                self.note(Event::Heal(format!("SIGCONT node {node}")));
            }
            FaultKind::Isolate | FaultKind::IsolateOut | FaultKind::CutFromControllers => {
                // Isolation cuts the clients too; a cut from the controllers leaves them (a
                // zombie leader clients still reach).
                let mut peers = others.clone();
                if base != FaultKind::CutFromControllers {
                    peers.push(net::CLIENT_IP);
                }
                let how = if base == FaultKind::IsolateOut {
                    Cut::Out
                } else {
                    Cut::Both
                };
                net::cut(i, &peers, how)?;
                self.note(Event::Fault(format!("{base:?} node {node} for {ms} ms")));
                std::thread::sleep(hold);
                net::heal(i)?;
                self.note(Event::Heal(format!("reconnect node {node}")));
            }
            FaultKind::Split => {
                // Node i alone on the minority side (with 3 nodes; more go to the majority at
                // random), clients reaching both sides.
                let mut minority = vec![i];
                for j in 0..n {
                    if j != i && minority.len() < (n - 1) / 2 && rng.random_bool(0.5) {
                        minority.push(j);
                    }
                }
                let majority: Vec<usize> = (0..n).filter(|j| !minority.contains(j)).collect();
                for &a in &minority {
                    let peers: Vec<Ipv4Addr> = majority.iter().map(|&b| net::node_ip(b)).collect();
                    net::cut(a, &peers, Cut::Both)?;
                }
                for &b in &majority {
                    let peers: Vec<Ipv4Addr> = minority.iter().map(|&a| net::node_ip(a)).collect();
                    net::cut(b, &peers, Cut::Both)?;
                }
                let side: Vec<usize> = minority.iter().map(|a| a + 1).collect();
                self.note(Event::Fault(format!(
                    "split {side:?} from the rest for {ms} ms"
                )));
                std::thread::sleep(hold);
                for j in 0..n {
                    net::heal(j)?;
                }
                self.note(Event::Heal("split healed".into()));
            }
            FaultKind::Latency => {
                let d = draw(rng, self.spec.latency_ms);
                net::netem(i, Some(d), None)?;
                self.note(Event::Fault(format!(
                    "{d} ms latency at node {node} for {ms} ms"
                )));
                std::thread::sleep(hold);
                net::heal(i)?;
                self.note(Event::Heal(format!("latency at node {node} lifted")));
            }
            FaultKind::Loss => {
                let rate = self.spec.loss_rate;
                net::loss(i, rate)?;
                self.note(Event::Fault(format!(
                    "{:.0} % loss at node {node} for {ms} ms",
                    rate * 100.0
                )));
                std::thread::sleep(hold);
                net::heal(i)?;
                self.note(Event::Heal(format!("loss at node {node} lifted")));
            }
            other => return Err(format!("{other:?} is not supported on real processes")),
        }
        Ok(())
    }

    /// Every node running, resumed and reconnected.
    pub fn heal_all(&self) {
        let mut nodes = self.nodes.lock().unwrap();
        for i in 0..nodes.nodes.len() {
            let _ = net::heal(i);
            nodes.resume(i);
            if !nodes.running(i) {
                if let Err(e) = nodes.launch(i) {
                    self.note(Event::Note(format!(
                        "restart of node {} failed: {e}",
                        i + 1
                    )));
                }
            }
        }
        self.note(Event::Heal("all faults healed".into()));
    }
}

const LOOKUP: Duration = Duration::from_secs(2);

async fn quorum_leader(addrs: &[SocketAddr]) -> Option<usize> {
    let io = Io::os();
    let deadline = Instant::now() + LOOKUP;
    for a in addrs {
        if Instant::now() >= deadline {
            break;
        }
        let asked = async {
            let mut c = Client::connect(&io, *a).await.ok()?;
            c.set_timeout(LOOKUP);
            c.describe_quorum().await.ok()
        };
        if let Some(Some(q)) = io.timeout(LOOKUP, asked).await {
            if q.leader_id > 0 {
                return Some(q.leader_id as usize - 1);
            }
        }
    }
    None
}

async fn partition_leader(addrs: &[SocketAddr], topic: &str, partition: i32) -> Option<usize> {
    let io = Io::os();
    for a in addrs {
        let asked = async {
            let mut c = Client::connect(&io, *a).await.ok()?;
            c.set_timeout(LOOKUP);
            c.wait_for_leader(topic, partition).await.ok()
        };
        if let Some(Some(b)) = io.timeout(LOOKUP, asked).await {
            if b.id > 0 {
                return Some(b.id as usize - 1);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn power_disk_and_clock_faults_are_left_out() {
        let spec: Spec = toml::from_str(
            "weights = { kill = 1, power_loss = 2, isolate_partition_leader = 1, disk_eio = 1, clock_jump = 0 }",
        )
        .unwrap();
        assert_eq!(
            unsupported(&spec),
            vec![FaultKind::PowerLoss, FaultKind::DiskEio]
        );
        assert!(supported(FaultKind::CutPartitionLeaderFromControllers));
        assert!(!supported(FaultKind::PowerLossAll));
    }
}
