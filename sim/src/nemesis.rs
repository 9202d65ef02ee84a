//! The nemesis: injects faults into the simulated cluster, drawn from the seed (weights in the
//! scenario) or given as a timeline, and heals everything before the final check.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use madsim::net::NetSim;
use madsim::rand::Rng;
use madsim::runtime::Handle;
use madsim::task::NodeId;
use weir::broker::quorum_status::{QuorumRole, QuorumStatus};
use weir::broker::Broker;
use weir::io::memdisk::{Faults, MemDisk};

use crate::clock::NodeClock;
use crate::disk::{RestartRequest, Strikes};
use crate::history::{Event, History};
use crate::scenario::{FaultKind, Nemesis as Spec};
use crate::workload::RunClock;

/// Bound on concurrent random fault streams.
const MAX_STREAMS: u32 = 8;
/// At heal, how many times a node whose start failed is started again.
const HEAL_START_ATTEMPTS: usize = 3;
/// How long heal waits for a start under way before judging it.
const START_WAIT: Duration = Duration::from_secs(30);
const START_POLL: Duration = Duration::from_millis(100);

/// A broker machine as the nemesis sees it: its node, and the hardware that outlives restarts.
pub struct Machine {
    pub node: NodeId,
    pub disk: MemDisk,
    pub clock: NodeClock,
    /// Set by the node when its broker is serving; cleared when the nemesis stops it.
    pub up: Arc<AtomicBool>,
    pub paused: AtomicBool,
    /// The node asks here to be restarted (a narrow-window crash, an offline log directory).
    pub restart: Arc<RestartRequest>,
    pub strikes: Arc<Strikes>,
    /// Held from a kill to the restart, so two faults never restart one node at once.
    pub power: tokio::sync::Mutex<()>,
    /// The broker the node runs, while it runs (for quorum status and committed metadata).
    pub broker: BrokerSlot,
    /// A voter of the metadata quorum (else a pure broker, an observer).
    pub voter: bool,
    /// Set when the nemesis restarts the node, cleared by the node once its broker has
    /// started or failed to: healing must not restart a node that is still starting.
    pub starting: Arc<AtomicBool>,
}

/// Where a node publishes its running broker; emptied when the node is killed.
pub type BrokerSlot = Arc<std::sync::Mutex<Option<Arc<Broker>>>>;

impl Machine {
    /// The node was killed: it serves nothing and its broker is gone.
    fn stopped(&self) {
        self.up.store(false, Ordering::SeqCst);
        self.starting.store(false, Ordering::SeqCst);
        self.broker.lock().unwrap().take();
    }

    fn power_on(&self, handle: &Handle) {
        self.starting.store(true, Ordering::SeqCst);
        handle.restart(self.node);
    }

    /// The node's quorum status, if its broker runs.
    pub fn quorum_status(&self) -> Option<QuorumStatus> {
        let broker = self.broker.lock().unwrap().clone();
        broker.map(|b| b.quorum_status())
    }
}

pub struct Nemesis {
    pub machines: Vec<Machine>,
    /// Leader kills whose failover is being timed.
    pub failovers: Failovers,
    /// Every other node (clients), for network faults between groups.
    pub others: Vec<NodeId>,
    pub spec: Spec,
    pub history: History,
    pub clock: RunClock,
    /// The workload's topic and its partition count, for faults aimed at a partition leader.
    pub topic: Option<(String, i32)>,
}

fn draw(range: [u64; 2]) -> u64 {
    if range[0] >= range[1] {
        range[0]
    } else {
        madsim::rand::thread_rng().gen_range(range[0]..=range[1])
    }
}

/// How long a leader kill's failover is watched at most, and how many at once.
const FAILOVER_WAIT_MS: u64 = 30_000;
const FAILOVERS_AT_ONCE: usize = 16;

/// A leader kill whose failover is being timed: when, which node, its epoch, and the node
/// seen leading a later epoch since (with its log end when first seen leading).
#[derive(Clone, Copy, Debug)]
struct Failover {
    start_ms: u64,
    old: usize,
    epoch: u32,
    new_leader: Option<(usize, u32, u64)>,
}

/// The failover figure (docs/PERFORMANCE.md): from killing (or cutting the power of) the
/// leader of an epoch to the first quorum sample at which another node leads a later epoch
/// and its high watermark has reached the log end it had when first seen leading (its
/// LeaderChange batch committed). Noted in the trace as `failover N ms`.
#[derive(Debug, Default)]
pub struct Failovers(std::sync::Mutex<Vec<Failover>>);

impl Failovers {
    fn start(&self, start_ms: u64, old: usize, epoch: u32) {
        let mut pending = self.0.lock().unwrap();
        if pending.len() >= FAILOVERS_AT_ONCE {
            pending.remove(0);
        }
        pending.push(Failover {
            start_ms,
            old,
            epoch,
            new_leader: None,
        });
    }
}

impl Nemesis {
    /// Advances the timed failovers with the nodes' statuses at run time `at_ms`.
    pub fn observe_failovers(&self, at_ms: u64) {
        let mut pending = self.failovers.0.lock().unwrap();
        if pending.is_empty() {
            return;
        }
        let statuses: Vec<Option<QuorumStatus>> = self
            .machines
            .iter()
            .map(|m| {
                m.up.load(Ordering::SeqCst)
                    .then(|| m.quorum_status())
                    .flatten()
            })
            .collect();
        pending.retain_mut(|f| {
            if at_ms > f.start_ms + FAILOVER_WAIT_MS {
                return false;
            }
            let leading = statuses.iter().enumerate().find_map(|(i, s)| {
                s.as_ref()
                    .filter(|s| i != f.old && s.role == QuorumRole::Leader && s.epoch > f.epoch)
                    .map(|s| (i, s))
            });
            let Some((i, s)) = leading else { return true };
            match f.new_leader {
                Some((n, e, end)) if n == i && e == s.epoch => {
                    if s.high_watermark < end {
                        return true;
                    }
                    let ms = at_ms - f.start_ms;
                    self.history.record(
                        at_ms,
                        Event::Note(format!(
                            "failover {ms} ms: broker-{} (epoch {}) killed, broker-{i} leads \
                             epoch {e} and committed",
                            f.old, f.epoch
                        )),
                    );
                    false
                }
                _ => {
                    f.new_leader = Some((i, s.epoch, s.log_end));
                    true
                }
            }
        });
    }

    pub(crate) fn fault_note(&self, what: String) {
        self.history.record(self.clock.now_ms(), Event::Fault(what));
    }

    fn heal_note(&self, what: String) {
        self.history.record(self.clock.now_ms(), Event::Heal(what));
    }

    /// Random faults until `until_ms` of run time: `streams` independent streams, each one
    /// fault at a time. With `replay_draws`, the streams replay the timeline's faults they are
    /// named in instead of drawing their own.
    pub async fn run_random(&self, until_ms: u64) {
        let streams = self.spec.streams.clamp(1, MAX_STREAMS);
        let runs = (0..streams)
            .map(|k| async move {
                if self.spec.replay_draws {
                    self.replay_stream(k).await
                } else {
                    self.run_stream(k, until_ms).await
                }
            })
            .collect();
        weir::io::join_all(runs).await;
    }

    /// The fault kinds with their weights, and the total weight.
    fn kinds(&self) -> (Vec<(FaultKind, u32)>, u32) {
        let kinds: Vec<(FaultKind, u32)> = self
            .spec
            .weights
            .iter()
            .filter(|(_, &w)| w > 0)
            .map(|(&k, &w)| (k, w))
            .collect();
        let total = kinds.iter().map(|(_, w)| w).sum();
        (kinds, total)
    }

    async fn run_stream(&self, stream: u32, until_ms: u64) {
        let (kinds, total) = self.kinds();
        if total == 0 {
            return;
        }
        loop {
            let wait = draw(self.spec.interval_ms);
            if self.clock.now_ms() + wait >= until_ms {
                return;
            }
            tokio::time::sleep(Duration::from_millis(wait)).await;
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
            let node = madsim::rand::thread_rng().gen_range(0..self.machines.len());
            let duration = draw(self.spec.duration_ms);
            // Never let a fault outlast the workload: healing comes right after.
            let duration = duration.min(until_ms.saturating_sub(self.clock.now_ms()));
            self.inject(
                kind,
                node,
                Duration::from_millis(duration),
                Some(stream),
                None,
            )
            .await;
        }
    }

    /// Stream `stream` of a recorded schedule: its faults at their times, with the draws
    /// `run_stream` made for them, in the same order (the values are not used, except the
    /// interval's, to wake at the very instant the original woke while it agrees with the
    /// timeline: recorded times are whole milliseconds).
    async fn replay_stream(&self, stream: u32) {
        let (_, total) = self.kinds();
        let mut faults: Vec<_> = self
            .spec
            .timeline
            .iter()
            .filter(|f| f.stream == Some(stream))
            .cloned()
            .collect();
        faults.sort_by_key(|f| f.at_ms);
        for fault in faults {
            let wait = draw(self.spec.interval_ms);
            let now = self.clock.now_ms();
            if now + wait == fault.at_ms {
                tokio::time::sleep(Duration::from_millis(wait)).await;
            } else if fault.at_ms > now {
                tokio::time::sleep(Duration::from_millis(fault.at_ms - now)).await;
            }
            let _kind = madsim::rand::thread_rng().gen_range(0..total.max(1));
            let _node = madsim::rand::thread_rng().gen_range(0..self.machines.len());
            let drawn = draw(self.spec.duration_ms);
            let duration = fault.duration_ms.unwrap_or(drawn);
            self.inject(
                fault.fault,
                fault.node as usize,
                Duration::from_millis(duration),
                Some(stream),
                fault.partition,
            )
            .await;
        }
        // The draw after which the original stream found no time left.
        let _ = draw(self.spec.interval_ms);
    }

    /// The explicit timeline, concurrently with the random faults (with `replay_draws`, the
    /// faults no stream drew).
    pub async fn run_timeline(&self) {
        let mut faults: Vec<_> = self
            .spec
            .timeline
            .iter()
            .filter(|f| !(self.spec.replay_draws && f.stream.is_some()))
            .cloned()
            .collect();
        faults.sort_by_key(|f| f.at_ms);
        for fault in faults {
            let now = self.clock.now_ms();
            if fault.at_ms > now {
                tokio::time::sleep(Duration::from_millis(fault.at_ms - now)).await;
            }
            let duration = fault
                .duration_ms
                .unwrap_or_else(|| draw(self.spec.duration_ms));
            self.inject(
                fault.fault,
                fault.node as usize,
                Duration::from_millis(duration),
                None,
                fault.partition,
            )
            .await;
        }
    }

    /// The node that leads the quorum now: the running, unpaused node claiming Leader in the
    /// highest epoch.
    pub fn quorum_leader(&self) -> Option<usize> {
        self.machines
            .iter()
            .enumerate()
            .filter(|(_, m)| m.up.load(Ordering::SeqCst) && !m.paused.load(Ordering::SeqCst))
            .filter_map(|(i, m)| m.quorum_status().map(|s| (i, s)))
            .filter(|(_, s)| s.role == QuorumRole::Leader)
            .max_by_key(|(i, s)| (s.epoch, std::cmp::Reverse(*i)))
            .map(|(i, _)| i)
    }

    /// The machine leading a random partition of the workload's topic (or partition `chosen`),
    /// by the freshest metadata image among the running, unpaused brokers (the most records
    /// applied), with the partition; `None` when no image names a live leader.
    pub fn partition_leader(&self, chosen: Option<i32>) -> Option<(usize, i32)> {
        let (name, partitions) = self.topic.as_ref()?;
        // Drawn even when chosen, so a replay makes the draws the original did.
        let drawn = madsim::rand::thread_rng().gen_range(0..*partitions);
        let partition = chosen.unwrap_or(drawn);
        let image = self
            .machines
            .iter()
            .filter(|m| m.up.load(Ordering::SeqCst) && !m.paused.load(Ordering::SeqCst))
            .filter_map(|m| m.broker.lock().unwrap().clone())
            .map(|b| b.image())
            .max_by_key(|image| image.applied())?;
        let topic = image.topic(name)?;
        let leader = image.partition(topic.id, partition)?.leader;
        // Node ids are machine index + 1 (`world::broker_config`).
        let index = usize::try_from(leader - 1).ok()?;
        (index < self.machines.len()).then_some((index, partition))
    }

    /// Applies one fault to machine `index` (for a fault aimed at the quorum leader or at a
    /// partition leader, `partition` or a random one: to that leader, or to `index` when none
    /// is known); faults that last are healed after `duration`. `stream`: the random stream
    /// that drew it, for the record.
    pub async fn inject(
        &self,
        kind: FaultKind,
        index: usize,
        duration: Duration,
        stream: Option<u32>,
        partition: Option<i32>,
    ) {
        let now = self.clock.now_ms();
        self.history.record(now, Event::Inject(kind));
        // The schedule, explicit (shrinking replays it, `--html` draws it), with the node an
        // aimed fault hit.
        let schedule = |node: usize, partition: Option<i32>| {
            self.history.record(
                now,
                Event::Scheduled(crate::scenario::TimedFault {
                    at_ms: now,
                    fault: kind,
                    node: node as u32,
                    duration_ms: Some(duration.as_millis() as u64),
                    partition,
                    stream,
                }),
            );
        };
        if let Some(base) = kind.at_partition_leader() {
            let target = match self.partition_leader(partition) {
                Some((leader, partition)) => {
                    schedule(leader, Some(partition));
                    self.fault_note(format!(
                        "{kind:?}: partition {partition} is led by broker-{leader}"
                    ));
                    leader
                }
                None => {
                    schedule(index, partition);
                    self.fault_note(format!(
                        "{kind:?}: no partition leader known, broker-{index}"
                    ));
                    index
                }
            };
            return self.apply(base, target, duration, false).await;
        }
        match kind.at_leader() {
            None => {
                schedule(index, None);
                self.apply(kind, index, duration, false).await
            }
            Some(base) => {
                let leader = self.quorum_leader();
                let target = match leader {
                    Some(leader) => {
                        schedule(leader, None);
                        self.fault_note(format!("{kind:?}: the leader is broker-{leader}"));
                        leader
                    }
                    None => {
                        schedule(index, None);
                        self.fault_note(format!("{kind:?}: no leader known, broker-{index}"));
                        index
                    }
                };
                let minority = kind == FaultKind::SplitLeaderMinority;
                // Timed only when a leader was known (its kill starts the failover).
                if leader.is_some() && matches!(base, FaultKind::Kill | FaultKind::PowerLoss) {
                    if let Some(status) = self.machines[target].quorum_status() {
                        self.failovers
                            .start(self.clock.now_ms(), target, status.epoch);
                    }
                }
                self.apply(base, target, duration, minority).await
            }
        }
    }

    /// The nodes on the chosen node's side of a split. `leader_minority`: the chosen node and
    /// just under half of the voters minus one more (so its side has no majority), pure
    /// brokers at random; otherwise the chosen node alone. Clients go either way.
    fn split_side(&self, index: usize, leader_minority: bool) -> Vec<NodeId> {
        let mut rng = madsim::rand::thread_rng();
        let mut side = vec![self.machines[index].node];
        if leader_minority {
            let voters = self.machines.iter().filter(|m| m.voter).count();
            let mut room = (voters.saturating_sub(1) / 2).saturating_sub(1);
            for (i, m) in self.machines.iter().enumerate() {
                if i == index {
                    continue;
                }
                if m.voter {
                    if room > 0 && rng.gen_bool(0.5) {
                        side.push(m.node);
                        room -= 1;
                    }
                } else if rng.gen_bool(0.5) {
                    side.push(m.node);
                }
            }
        }
        side.extend(self.others.iter().copied().filter(|_| rng.gen_bool(0.5)));
        side
    }

    async fn apply(&self, kind: FaultKind, index: usize, duration: Duration, minority: bool) {
        let handle = Handle::current();
        let net = NetSim::current();
        let m = &self.machines[index];
        let ms = duration.as_millis();
        match kind {
            FaultKind::Kill | FaultKind::PowerLoss => {
                let _power = m.power.lock().await;
                handle.kill(m.node);
                m.stopped();
                if kind == FaultKind::Kill {
                    m.disk.process_crash();
                    self.fault_note(crate::beyond_promise::kill_note(index));
                } else {
                    m.disk.power_loss();
                    self.fault_note(crate::beyond_promise::power_loss_note(index));
                }
                tokio::time::sleep(duration).await;
                m.paused.store(false, Ordering::SeqCst);
                m.disk.thaw();
                m.power_on(&handle);
                self.heal_note(format!("restart broker-{index} after {ms} ms"));
            }
            FaultKind::PowerLossAll => {
                // Every machine's power lock, in index order (so two faults never interleave),
                // then every node down at the same simulated instant.
                let mut locks = Vec::new();
                for x in &self.machines {
                    locks.push(x.power.lock().await);
                }
                for x in &self.machines {
                    handle.kill(x.node);
                    x.stopped();
                    x.disk.power_loss();
                }
                self.fault_note(crate::beyond_promise::power_loss_all_note(
                    self.machines.len(),
                ));
                tokio::time::sleep(duration).await;
                for x in &self.machines {
                    x.paused.store(false, Ordering::SeqCst);
                    x.disk.thaw();
                    x.power_on(&handle);
                }
                drop(locks);
                self.heal_note(format!("restart all nodes after {ms} ms"));
            }
            FaultKind::Pause => {
                handle.pause(m.node);
                m.paused.store(true, Ordering::SeqCst);
                self.fault_note(format!("pause broker-{index} for {ms} ms"));
                tokio::time::sleep(duration).await;
                if m.paused.swap(false, Ordering::SeqCst) {
                    handle.resume(m.node);
                }
                self.heal_note(format!("resume broker-{index}"));
            }
            FaultKind::Isolate | FaultKind::IsolateOut => {
                let both = kind == FaultKind::Isolate;
                if both {
                    net.clog_node(m.node);
                } else {
                    net.clog_node_out(m.node);
                }
                self.fault_note(format!("{kind:?} broker-{index} for {ms} ms"));
                tokio::time::sleep(duration).await;
                if both {
                    net.unclog_node(m.node);
                } else {
                    net.unclog_node_out(m.node);
                }
                self.heal_note(format!("heal network of broker-{index}"));
            }
            FaultKind::Split => {
                // The chosen broker and a random share of the clients on one side.
                let side_a = self.split_side(index, minority);
                let side_b: Vec<NodeId> = self
                    .machines
                    .iter()
                    .map(|x| x.node)
                    .chain(self.others.iter().copied())
                    .filter(|n| !side_a.contains(n))
                    .collect();
                for &a in &side_a {
                    for &b in &side_b {
                        net.clog_link(a, b);
                        net.clog_link(b, a);
                    }
                }
                self.fault_note(format!(
                    "split {} | {} nodes for {ms} ms",
                    side_a.len(),
                    side_b.len()
                ));
                tokio::time::sleep(duration).await;
                for &a in &side_a {
                    for &b in &side_b {
                        net.unclog_link(a, b);
                        net.unclog_link(b, a);
                    }
                }
                self.heal_note("heal split".into());
            }
            FaultKind::CutFromControllers => {
                // Both ways between this node and every other voter; clients (and pure
                // brokers) still reach it. In a combined cluster that is every other node: a
                // leader that still takes produce requests but hears from no controller and no
                // follower (notes §7.6).
                let cut: Vec<NodeId> = self
                    .machines
                    .iter()
                    .enumerate()
                    .filter(|(i, x)| *i != index && x.voter)
                    .map(|(_, x)| x.node)
                    .collect();
                for &c in &cut {
                    net.clog_link(m.node, c);
                    net.clog_link(c, m.node);
                }
                self.fault_note(format!(
                    "cut broker-{index} off from {} controller(s) for {ms} ms",
                    cut.len()
                ));
                tokio::time::sleep(duration).await;
                for &c in &cut {
                    net.unclog_link(m.node, c);
                    net.unclog_link(c, m.node);
                }
                self.heal_note(format!("heal controller links of broker-{index}"));
            }
            FaultKind::Latency => {
                let lo = Duration::from_millis(self.spec.latency_ms[0]);
                let hi =
                    Duration::from_millis(self.spec.latency_ms[1].max(self.spec.latency_ms[0] + 1));
                net.update_config(|c| c.send_latency = lo..hi);
                self.fault_note(format!("latency {lo:?}..{hi:?} for {ms} ms"));
                tokio::time::sleep(duration).await;
                net.update_config(|c| c.send_latency = madsim::net::Config::default().send_latency);
                self.heal_note("latency healed".into());
            }
            FaultKind::Loss => {
                let rate = self.spec.loss_rate;
                net.update_config(|c| c.packet_loss_rate = rate);
                self.fault_note(format!("packet loss {rate} for {ms} ms"));
                tokio::time::sleep(duration).await;
                net.update_config(|c| c.packet_loss_rate = 0.0);
                self.heal_note("packet loss healed".into());
            }
            FaultKind::ClockJump => {
                let jump = madsim::rand::thread_rng().gen_range(-60_000i64..=60_000);
                m.clock.jump(jump);
                self.fault_note(format!("clock of broker-{index} jumps {jump} ms"));
            }
            FaultKind::FailLogDir => {
                let running = m.broker.lock().unwrap().clone();
                let dirs = running
                    .map(|b| b.config().log_dirs.clone())
                    .unwrap_or_default();
                let Some(dir) = dirs.last().filter(|_| dirs.len() > 1).cloned() else {
                    self.fault_note(format!(
                        "broker-{index} has no second log directory to fail"
                    ));
                    return;
                };
                m.disk.set_faults(Faults {
                    failed_dirs: vec![std::path::PathBuf::from(&dir)],
                    ..Faults::default()
                });
                self.fault_note(format!(
                    "log directory {dir} of broker-{index} fails for {ms} ms"
                ));
                tokio::time::sleep(duration).await;
                // The disk is replaced (its data back): the node restarts on it, as an operator
                // restarts a broker after swapping a disk.
                let _power = m.power.lock().await;
                handle.kill(m.node);
                m.stopped();
                m.disk.process_crash();
                m.disk.set_faults(Faults::default());
                m.paused.store(false, Ordering::SeqCst);
                m.disk.thaw();
                m.power_on(&handle);
                self.heal_note(format!("restart broker-{index} with {dir} back"));
            }
            FaultKind::BitFlip => {
                let flipped = m.disk.flip_random_bit();
                self.fault_note(format!("bit flip on broker-{index}: {flipped:?}"));
            }
            FaultKind::DiskEio
            | FaultKind::DiskFull
            | FaultKind::SyncEio
            | FaultKind::LostWrite
            | FaultKind::MisdirectedWrite => {
                let rate = self.spec.disk_error_rate;
                let mut faults = Faults::default();
                match kind {
                    FaultKind::DiskEio => {
                        faults.write_error_rate = rate;
                        faults.read_error_rate = rate;
                    }
                    FaultKind::DiskFull => faults.capacity_bytes = Some(m.disk.used_bytes()),
                    FaultKind::SyncEio => faults.sync_error_rate = rate,
                    FaultKind::LostWrite => faults.lost_write_rate = rate,
                    _ => faults.misdirected_write_rate = rate,
                }
                m.disk.set_faults(faults);
                self.fault_note(format!("{kind:?} on broker-{index} for {ms} ms"));
                tokio::time::sleep(duration).await;
                m.disk.set_faults(Faults::default());
                self.heal_note(format!("disk of broker-{index} healed"));
            }
            FaultKind::KillLeader
            | FaultKind::PowerLossLeader
            | FaultKind::PauseLeader
            | FaultKind::IsolateLeader
            | FaultKind::SplitLeaderMinority
            | FaultKind::KillPartitionLeader
            | FaultKind::PowerLossPartitionLeader
            | FaultKind::PausePartitionLeader
            | FaultKind::IsolatePartitionLeader
            | FaultKind::CutPartitionLeaderFromControllers => {
                // `inject` resolves these to the leader and its base fault.
                unreachable!("a leader fault reaches apply unresolved: {kind:?}")
            }
        }
    }

    /// Serves the machines' restart requests until `until_ms` of run time: the node is killed
    /// (its disk is already frozen if a narrow-window fault crashed it), stays down for a
    /// while, and restarts, as a supervisor would restart a crashed broker.
    /// Narrow-window faults are on while this runs.
    pub async fn run_restarts(&self, until_ms: u64) {
        for m in &self.machines {
            m.strikes.enabled.store(true, Ordering::SeqCst);
        }
        let watchers = (0..self.machines.len())
            .map(|index| self.serve_restarts(index, until_ms))
            .collect();
        weir::io::join_all(watchers).await;
    }

    async fn serve_restarts(&self, index: usize, until_ms: u64) {
        let handle = Handle::current();
        let m = &self.machines[index];
        loop {
            let now = self.clock.now_ms();
            if now >= until_ms {
                return;
            }
            tokio::select! {
                biased;
                _ = m.restart.notify.notified() => {}
                _ = tokio::time::sleep(Duration::from_millis(until_ms - now)) => return,
            }
            let reason = m.restart.take();
            let _power = m.power.lock().await;
            handle.kill(m.node);
            m.stopped();
            if !m.disk.is_frozen() {
                m.disk.process_crash();
            }
            self.fault_note(format!("broker-{index} down: {reason}"));
            let down = draw(m.strikes.spec.restart_ms);
            tokio::time::sleep(Duration::from_millis(down)).await;
            m.paused.store(false, Ordering::SeqCst);
            m.disk.thaw();
            m.restart.served();
            m.power_on(&handle);
            self.heal_note(format!("restart broker-{index} after {down} ms"));
        }
    }

    /// Ends every fault and brings every broker back.
    pub async fn heal(&self) {
        let handle = Handle::current();
        let net = NetSim::current();
        net.update_config(|c| *c = madsim::net::Config::default());
        let all: Vec<NodeId> = self
            .machines
            .iter()
            .map(|m| m.node)
            .chain(self.others.iter().copied())
            .collect();
        for &a in &all {
            net.unclog_node(a);
            for &b in &all {
                if a != b {
                    net.unclog_link(a, b);
                }
            }
        }
        for (index, m) in self.machines.iter().enumerate() {
            let _power = m.power.lock().await;
            m.strikes.enabled.store(false, Ordering::SeqCst);
            m.disk.set_faults(Faults::default());
            if m.disk.is_frozen() {
                handle.kill(m.node);
                m.stopped();
                m.disk.thaw();
            }
            m.restart.served();
            if m.paused.swap(false, Ordering::SeqCst) {
                handle.resume(m.node);
            }
            if !m.up.load(Ordering::SeqCst) && !m.starting.load(Ordering::SeqCst) {
                m.power_on(&handle);
                self.heal_note(format!("heal: restart broker-{index}"));
            }
        }
        // A start that was under way when the faults ended may still fail on them (an fsync
        // that hit the injected EIO): like a supervisor, start such a node again, now on a
        // healed disk. Bounded: a few attempts, each waiting at most START_WAIT.
        for (index, m) in self.machines.iter().enumerate() {
            for _ in 0..HEAL_START_ATTEMPTS {
                let mut waited = Duration::ZERO;
                while m.starting.load(Ordering::SeqCst) && waited < START_WAIT {
                    tokio::time::sleep(START_POLL).await;
                    waited += START_POLL;
                }
                let _power = m.power.lock().await;
                if m.up.load(Ordering::SeqCst) || m.starting.load(Ordering::SeqCst) {
                    break;
                }
                m.restart.served();
                m.power_on(&handle);
                self.heal_note(format!(
                    "heal: start broker-{index} again (its start failed)"
                ));
            }
        }
        self.heal_note("all faults healed".into());
    }
}
