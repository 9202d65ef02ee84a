//! `weir cluster up` (a local cluster on loopback), `weir cluster status` (the quorum and
//! the brokers as DescribeQuorum and Metadata show them) and `weir cluster unregister --id N`
//! (a retired broker's registration removed, as `kafka-cluster.sh unregister`).

use std::path::PathBuf;
use std::time::Duration;

use clap::Subcommand;

use weir::broker::RunningBroker;
use weir::io::Io;
use weir::local_cluster::{self, Readiness};

use super::connect_any;
use super::output::{print_json, Output};
use super::progress::Progress;
use super::serve::wait_for_signal;

#[derive(Subcommand)]
pub enum ClusterAction {
    /// Generate Kafka-style configs under DIR (node-N/server.properties), format every node
    /// with one cluster id and run the nodes until Ctrl-C, then stop them all cleanly.
    Up {
        #[arg(long, default_value_t = 3)]
        nodes: u32,
        #[arg(long, default_value = "weir-cluster")]
        dir: PathBuf,
        /// Node N serves clients on BASE + 10·(N−1) and the quorum on the port after.
        #[arg(long, default_value_t = 19092)]
        base_port: u16,
    },
    /// The metadata quorum (leader, epoch, each voter's lag, from DescribeQuorum) and the
    /// brokers (fenced or not).
    Status {
        /// Brokers to ask, comma-separated; the first that answers is used.
        #[arg(long, alias = "bootstrap-server", default_value = "127.0.0.1:19092")]
        bootstrap: String,
        /// Kafka client properties securing the connection (security.protocol, sasl.*, ssl.*).
        #[command(flatten)]
        security: super::CommandConfig,
    },
    /// Remove a retired broker's registration (UnregisterBroker, like `kafka-cluster.sh
    /// unregister`): cordon it, move its replicas away (`weir reassign`), stop it, then this.
    Unregister {
        #[command(flatten)]
        server: super::ServerArgs,
        /// The id of the broker to unregister.
        #[arg(long)]
        id: i32,
    },
}

pub async fn run(io: Io, action: ClusterAction, output: Output) -> anyhow::Result<()> {
    match action {
        ClusterAction::Up {
            nodes,
            dir,
            base_port,
        } => cluster_up(io, nodes, dir, base_port).await,
        ClusterAction::Status {
            bootstrap,
            security,
        } => cluster_status(io, &bootstrap, &security, output).await,
        ClusterAction::Unregister { server, id } => {
            let mut client = server.connect_any(&io).await?;
            client
                .unregister_broker(id)
                .await
                .map_err(|e| anyhow::anyhow!("Error while unregistering broker {id}: {e}"))?;
            // kafka-cluster.sh's line.
            println!("Broker {id} is no longer registered.");
            Ok(())
        }
    }
}

/// The progress line of `cluster up`: formatted, started (k of n), quorum leader elected,
/// serving (k of n); each of the four a quarter of the bar.
fn up_line(nodes: usize, started: usize, ready: Readiness) -> (f64, String) {
    let n = nodes.max(1) as f64;
    let elected = ready.leader.is_some();
    let done =
        (1.0 + started as f64 / n + f64::from(u8::from(elected)) + ready.serving as f64 / n) / 4.0;
    let text = if started < nodes {
        format!("{nodes} node(s) formatted; {started}/{nodes} started")
    } else if let Some(leader) = ready.leader {
        format!(
            "{nodes} started; quorum leader node {leader}; {}/{nodes} serving",
            ready.serving
        )
    } else {
        format!("{nodes} started; electing a quorum leader")
    };
    (done, text)
}

/// Until every node serves and the quorum has a leader, redrawing the progress line.
async fn until_ready(io: &Io, running: &[RunningBroker], line: &Progress) -> Readiness {
    loop {
        let ready = local_cluster::readiness(running);
        let (done, text) = up_line(running.len(), running.len(), ready);
        line.update(done, text);
        if ready.complete(running.len()) {
            return ready;
        }
        io.clock.sleep(Duration::from_millis(100)).await;
    }
}

async fn cluster_up(io: Io, nodes: u32, dir: PathBuf, base_port: u16) -> anyhow::Result<()> {
    let plans = local_cluster::plan(&dir, nodes, base_port)?;
    let cluster_id = local_cluster::prepare(&io, &plans).await?;
    println!(
        "cluster {cluster_id}: {nodes} node(s), configs under {}",
        dir.display()
    );
    println!("bootstrap: {}", local_cluster::bootstrap(&plans));
    let line = Progress::on_stderr();
    let count = plans.len();
    let started = |started| {
        let (done, text) = up_line(count, started, Readiness::default());
        line.update(done, text);
    };
    started(0);
    let running = local_cluster::start(&io, &plans, started).await?;
    let offline = weir::io::join_all(
        running
            .iter()
            .map(|r| {
                let broker = r.broker.clone();
                async move { (broker.config().node_id, broker.storage_offline().await) }
            })
            .collect(),
    );
    // Ctrl-C stops the nodes while they elect and register too.
    let signal = wait_for_signal();
    tokio::pin!(signal, offline);
    let ready = tokio::select! {
        biased;
        _ = &mut signal => None,
        _ = &mut offline => None,
        ready = until_ready(&io, &running, &line) => Some(ready),
    };
    line.finish();
    if let Some(ready) = ready {
        println!(
            "running: {} node(s) serving, quorum leader node {}; Ctrl-C stops every node",
            ready.serving,
            ready.leader.unwrap_or(-1)
        );
        tokio::select! {
            biased;
            _ = &mut signal => {}
            // One node's log directory failing stops nothing else; the others serve on.
            _ = &mut offline => {}
        }
    }
    println!("stopping {} node(s)", running.len());
    local_cluster::stop(&running).await;
    Ok(())
}

async fn cluster_status(
    io: Io,
    bootstrap: &str,
    security: &super::CommandConfig,
    output: Output,
) -> anyhow::Result<()> {
    let mut client = connect_any(&io, bootstrap, security).await?;
    let quorum = client.describe_quorum().await?;
    let brokers = client.brokers().await?;
    if output.json() {
        return print_json(&Status::of(quorum, &brokers));
    }
    println!(
        "quorum: leader {} epoch {} high watermark {}",
        quorum.leader_id, quorum.leader_epoch, quorum.high_watermark
    );
    let now = io.clock.wall_ms();
    let describe = |kind: &str, r: &weir::client::QuorumReplica| {
        let lag = quorum
            .lag(r)
            .map_or("unknown".to_string(), |l| l.to_string());
        let seen = if r.last_fetch_timestamp >= 0 {
            format!("{} ms ago", (now - r.last_fetch_timestamp).max(0))
        } else {
            "never".to_string()
        };
        let role = if r.node_id == quorum.leader_id {
            " (leader)"
        } else {
            ""
        };
        println!(
            "  {kind} {}{role}: log end {} lag {lag} last fetch {seen}",
            r.node_id, r.log_end_offset
        );
    };
    for r in &quorum.voters {
        describe("voter", r);
    }
    for r in &quorum.observers {
        describe("observer", r);
    }
    println!("brokers:");
    let live: std::collections::BTreeSet<i32> = brokers.iter().map(|b| b.id).collect();
    for b in &brokers {
        println!("  {} {}:{} unfenced", b.id, b.host, b.port);
    }
    // A voter or observer the quorum knows that Metadata does not list: fenced (or a pure
    // controller, which serves no clients).
    for r in quorum.voters.iter().chain(&quorum.observers) {
        if !live.contains(&r.node_id) {
            println!("  {} fenced or not a broker", r.node_id);
        }
    }
    Ok(())
}

/// `cluster status --output json`: the quorum as DescribeQuorum tells it, the unfenced brokers
/// as Metadata lists them, and the quorum's nodes Metadata does not list (fenced, or pure
/// controllers).
#[derive(serde::Serialize)]
struct Status {
    quorum: weir::client::QuorumDescription,
    brokers: Vec<StatusBroker>,
    fenced_or_not_brokers: Vec<i32>,
}

#[derive(serde::Serialize)]
struct StatusBroker {
    id: i32,
    host: String,
    port: u16,
}

impl Status {
    fn of(quorum: weir::client::QuorumDescription, brokers: &[weir::client::BrokerInfo]) -> Self {
        let listed = |id: i32| brokers.iter().any(|b| b.id == id);
        let fenced_or_not_brokers = (quorum.voters.iter().chain(&quorum.observers))
            .map(|r| r.node_id)
            .filter(|id| !listed(*id))
            .collect();
        Self {
            brokers: brokers
                .iter()
                .map(|b| StatusBroker {
                    id: b.id,
                    host: b.host.clone(),
                    port: b.port,
                })
                .collect(),
            fenced_or_not_brokers,
            quorum,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_up_line_goes_formatted_started_elected_serving() {
        let none = Readiness::default();
        assert_eq!(
            up_line(3, 0, none),
            (0.25, "3 node(s) formatted; 0/3 started".to_string())
        );
        assert_eq!(
            up_line(3, 3, none),
            (0.5, "3 started; electing a quorum leader".to_string())
        );
        let elected = Readiness {
            leader: Some(2),
            serving: 3,
        };
        assert_eq!(
            up_line(3, 3, elected),
            (
                1.0,
                "3 started; quorum leader node 2; 3/3 serving".to_string()
            )
        );
        assert!(elected.complete(3));
        assert!(!Readiness {
            leader: None,
            ..elected
        }
        .complete(3));
    }
}
