//! `weir leader-election`: Kafka's `kafka-leader-election.sh` over ElectLeaders, with its
//! options and its output lines, so operators' scripts read it unchanged. The usual use after
//! a whole-cluster crash whose last known leaders will not come back:
//! `weir leader-election --bootstrap-server h:9092 --election-type unclean --all-topic-partitions`.

use std::net::ToSocketAddrs;
use std::time::Duration;

use clap::Args;
use kafka_protocol::error::ResponseError;

use weir::client::{Client, ClientError, ElectionOutcome, ElectionType};
use weir::io::Io;

#[derive(Args)]
pub struct LeaderElectionArgs {
    #[command(flatten)]
    server: super::ServerArgs,
    /// `preferred`: move leadership to each partition's first replica if it is in the ISR and
    /// alive. `unclean`: elect a leader for partitions that have none, from outside the ISR if
    /// need be (acknowledged records may be lost).
    #[arg(long = "election-type", value_parser = parse_election_type)]
    election_type: ElectionType,
    /// The topic of the one partition to elect (with --partition).
    #[arg(long, requires = "partition", conflicts_with = "all_topic_partitions")]
    topic: Option<String>,
    /// The partition (with --topic).
    #[arg(long, requires = "topic")]
    partition: Option<i32>,
    /// Every partition of every topic (those that need no election are left alone).
    #[arg(long = "all-topic-partitions")]
    all_topic_partitions: bool,
    /// How long to keep trying to reach the active controller, in ms.
    #[arg(long = "timeout", default_value_t = 30_000)]
    timeout_ms: u64,
}

fn parse_election_type(s: &str) -> Result<ElectionType, String> {
    match s.to_ascii_lowercase().as_str() {
        "preferred" => Ok(ElectionType::Preferred),
        "unclean" => Ok(ElectionType::Unclean),
        other => Err(format!(
            "election type must be preferred or unclean, not '{other}'"
        )),
    }
}

fn type_name(t: ElectionType) -> &'static str {
    match t {
        ElectionType::Preferred => "PREFERRED",
        ElectionType::Unclean => "UNCLEAN",
    }
}

pub async fn run(io: &Io, args: LeaderElectionArgs) -> anyhow::Result<()> {
    let partitions = match (&args.topic, args.partition, args.all_topic_partitions) {
        (Some(t), Some(p), false) => Some(vec![(t.clone(), p)]),
        (None, None, true) => None,
        _ => anyhow::bail!(
            "One and only one of the following options is required: --topic (with --partition), \
             --all-topic-partitions"
        ),
    };
    let outcomes = elect(io, &args, partitions.as_deref()).await?;
    report(args.election_type, &outcomes)
}

/// Sends the request to a bootstrap broker, and while the answer is NOT_CONTROLLER (a node
/// that does not relay it, or a controller election under way) to every broker Metadata
/// names, until `timeout_ms`.
async fn elect(
    io: &Io,
    args: &LeaderElectionArgs,
    partitions: Option<&[(String, i32)]>,
) -> anyhow::Result<Vec<ElectionOutcome>> {
    let deadline = io.clock.monotonic() + Duration::from_millis(args.timeout_ms);
    let mut hosts: Vec<String> = args
        .server
        .bootstrap
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(String::from)
        .collect();
    if hosts.is_empty() {
        anyhow::bail!("empty --bootstrap-server");
    }
    let security = args.server.security.security(io)?;
    let mut last = String::from("no broker answered");
    loop {
        for host in hosts.clone() {
            let Some(addr) = host.to_socket_addrs().ok().and_then(|mut a| a.next()) else {
                last = format!("{host}: cannot resolve");
                continue;
            };
            let name = super::host_of(&host);
            let connecting = Client::connect_secure(io, addr, &name, &security);
            let mut client = match connecting.await {
                Ok(c) => c,
                Err(e) => {
                    last = format!("{host}: {e}");
                    continue;
                }
            };
            client.set_timeout(Duration::from_millis(args.timeout_ms.clamp(1_000, 30_000)));
            match client.elect_leaders(args.election_type, partitions).await {
                Ok(outcomes) => return Ok(outcomes),
                Err(ClientError::Kafka(ResponseError::ClusterAuthorizationFailed, _)) => {
                    println!("Not authorized to perform leader election");
                    anyhow::bail!("Not authorized to perform leader election");
                }
                Err(e) => last = format!("{host}: {e}"),
            }
            // Learn the other brokers: one of them is (or will be) the active controller.
            if let Ok(brokers) = client.brokers().await {
                for b in brokers {
                    let h = format!("{}:{}", b.host, b.port);
                    if !hosts.contains(&h) {
                        hosts.push(h);
                    }
                }
            }
        }
        if io.clock.monotonic() >= deadline {
            println!("Timeout waiting for election results");
            anyhow::bail!("Timeout waiting for election results: {last}");
        }
        io.clock.sleep(Duration::from_millis(200)).await;
    }
}

/// Kafka's three kinds of line: elected, nothing to do, failed (then exit status 1).
fn report(election: ElectionType, outcomes: &[ElectionOutcome]) -> anyhow::Result<()> {
    let tp = |o: &ElectionOutcome| format!("{}-{}", o.topic, o.partition);
    let succeeded: Vec<String> = outcomes
        .iter()
        .filter(|o| o.error.is_none())
        .map(tp)
        .collect();
    let noop: Vec<String> = outcomes
        .iter()
        .filter(|o| matches!(o.error, Some((ResponseError::ElectionNotNeeded, _))))
        .map(tp)
        .collect();
    let failed: Vec<&ElectionOutcome> = outcomes
        .iter()
        .filter(|o| {
            o.error
                .as_ref()
                .is_some_and(|(e, _)| *e != ResponseError::ElectionNotNeeded)
        })
        .collect();
    let kind = type_name(election);
    if !succeeded.is_empty() {
        println!(
            "Successfully completed leader election ({kind}) for partitions {}",
            succeeded.join(", ")
        );
    }
    if !noop.is_empty() {
        println!(
            "Valid replica already elected for partitions {}",
            noop.join(", ")
        );
    }
    for o in &failed {
        let (e, message) = o.error.as_ref().expect("filtered on errors");
        println!(
            "Error completing leader election ({kind}) for partition: {}: {e:?}: {message}",
            tp(o)
        );
    }
    if !failed.is_empty() {
        anyhow::bail!("{} replica(s) could not be elected", failed.len());
    }
    Ok(())
}
