//! The `weir serve` processes, one per namespace: their properties (the simulator's cluster
//! layout on real addresses, plus the scenario's `[broker]` keys), `weir format`, start,
//! kill -9, SIGSTOP/SIGCONT. Dropping a [`Nodes`] kills every process it started.

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use super::net;
use crate::scenario::Scenario;

pub const CLIENT_PORT: u16 = 9092;
const CONTROLLER_PORT: u16 = 9093;
const CLUSTER_ID: &str = "MkU3OEVBNTcwNTJENDM2Qk";

pub struct Node {
    pub index: usize,
    config: PathBuf,
    log: PathBuf,
    child: Option<Child>,
    pub paused: bool,
}

pub struct Nodes {
    pub nodes: Vec<Node>,
    bin: PathBuf,
    /// `WEIR_PLANTED_BUG` for a planted build.
    planted: Option<String>,
}

pub fn client_addr(index: usize) -> SocketAddr {
    SocketAddr::new(net::node_ip(index).into(), CLIENT_PORT)
}

/// Kafka's keys for node `index` of a combined cluster, the fast timers the simulator's
/// scenarios assume, then the scenario's own `[broker]` keys.
fn properties(scenario: &Scenario, index: usize, data: &Path) -> BTreeMap<String, String> {
    let n = scenario.cluster.nodes() as usize;
    let voters: Vec<String> = (0..n)
        .map(|i| format!("{}@{}:{CONTROLLER_PORT}", i + 1, net::node_ip(i)))
        .collect();
    let ip = net::node_ip(index);
    let mut p = BTreeMap::new();
    let mut put = |k: &str, v: String| {
        p.insert(k.to_string(), v);
    };
    put("node.id", (index + 1).to_string());
    put("process.roles", "broker,controller".into());
    put("controller.quorum.voters", voters.join(","));
    put(
        "listeners",
        format!("PLAINTEXT://{ip}:{CLIENT_PORT},CONTROLLER://{ip}:{CONTROLLER_PORT}"),
    );
    put(
        "advertised.listeners",
        format!("PLAINTEXT://{ip}:{CLIENT_PORT}"),
    );
    put("controller.listener.names", "CONTROLLER".into());
    put("inter.broker.listener.name", "PLAINTEXT".into());
    put("log.dirs", data.display().to_string());
    put("log.flush.scheduler.interval.ms", "100".into());
    put("controller.quorum.election.timeout.ms", "500".into());
    put("controller.quorum.fetch.timeout.ms", "1000".into());
    put("replica.fetch.wait.max.ms", "200".into());
    put("replica.fetch.backoff.ms", "100".into());
    p.extend(scenario.broker.clone());
    p
}

impl Nodes {
    /// Writes each node's properties under `dir`, formats its storage and starts it.
    pub fn start(
        scenario: &Scenario,
        dir: &Path,
        bin: &Path,
        planted: Option<String>,
    ) -> Result<Nodes, String> {
        let mut nodes = Nodes {
            nodes: Vec::new(),
            bin: bin.to_path_buf(),
            planted,
        };
        for index in 0..scenario.cluster.nodes() as usize {
            let data = dir.join(format!("node{}", index + 1));
            let props = properties(scenario, index, &data);
            let text: String = props.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
            let config = dir.join(format!("node{}.properties", index + 1));
            std::fs::write(&config, text).map_err(|e| format!("{}: {e}", config.display()))?;
            let out = Command::new(bin)
                .args(["format", "--config"])
                .arg(&config)
                .args(["--cluster-id", CLUSTER_ID])
                .output()
                .map_err(|e| format!("{}: {e}", bin.display()))?;
            if !out.status.success() {
                return Err(format!(
                    "weir format: {}",
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
            nodes.nodes.push(Node {
                index,
                config,
                log: dir.join(format!("node{}.log", index + 1)),
                child: None,
                paused: false,
            });
        }
        for i in 0..nodes.nodes.len() {
            nodes.launch(i)?;
        }
        Ok(nodes)
    }

    /// Starts node `i` in its namespace (`ip netns exec` execs, so the child is the broker).
    pub fn launch(&mut self, i: usize) -> Result<(), String> {
        let node = &mut self.nodes[i];
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&node.log)
            .map_err(|e| format!("{}: {e}", node.log.display()))?;
        let err = log.try_clone().map_err(|e| e.to_string())?;
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &net::namespace(i)])
            .arg(&self.bin)
            .args(["serve", "--config"])
            .arg(&node.config)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err);
        if let Some(bug) = &self.planted {
            cmd.env("WEIR_PLANTED_BUG", bug);
        }
        node.child = Some(cmd.spawn().map_err(|e| format!("spawn: {e}"))?);
        node.paused = false;
        Ok(())
    }

    pub fn running(&self, i: usize) -> bool {
        self.nodes[i].child.is_some()
    }

    /// SIGKILL: the process dies at once; what it wrote stays in the page cache.
    pub fn kill(&mut self, i: usize) {
        let node = &mut self.nodes[i];
        if let Some(mut c) = node.child.take() {
            if node.paused {
                signal(c.id(), "CONT");
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        node.paused = false;
    }

    pub fn pause(&mut self, i: usize) {
        if let Some(c) = &self.nodes[i].child {
            signal(c.id(), "STOP");
            self.nodes[i].paused = true;
        }
    }

    pub fn resume(&mut self, i: usize) {
        if let Some(c) = &self.nodes[i].child {
            if self.nodes[i].paused {
                signal(c.id(), "CONT");
            }
        }
        self.nodes[i].paused = false;
    }

    /// A node that exited by itself (a crash, an assertion): its exit status.
    pub fn exited(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        for n in &mut self.nodes {
            if let Some(c) = &mut n.child {
                if let Ok(Some(status)) = c.try_wait() {
                    out.push(format!("node {} exited by itself: {status}", n.index + 1));
                    n.child = None;
                }
            }
        }
        out
    }
}

fn signal(pid: u32, sig: &str) {
    let _ = Command::new("kill")
        .args([format!("-{sig}"), pid.to_string()])
        .status();
}

impl Drop for Nodes {
    fn drop(&mut self) {
        for i in 0..self.nodes.len() {
            self.kill(i);
        }
    }
}
