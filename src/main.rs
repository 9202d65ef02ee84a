//! The `weir` command: run a broker, administer topics and consumer groups, produce and consume,
//! benchmark.

use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

mod leader_election_command;

use weir::bench;
use weir::broker::Broker;
use weir::client::{Client, ClusterClient};
use weir::config::{parse_properties, ServerConfig};
use weir::io::{read_file, Io};
use weir::local_cluster;
use weir::log::batch::{self, BatchBuilder};

#[derive(Parser)]
#[command(
    name = "weir",
    version,
    about = "A Kafka-compatible broker built for deterministic simulation"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a broker. Without --config: one node on 127.0.0.1:9092 with data in ./weir-data.
    Serve {
        /// A Kafka server.properties file (Kafka's own key names).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Override one key, as in the file: --override log.dirs=/tmp/data (repeatable).
        #[arg(long = "override", value_name = "KEY=VALUE")]
        overrides: Vec<String>,
    },
    /// Format a node's data directory for a cluster (like `kafka-storage.sh format`): writes
    /// meta.properties with the cluster id and the config's node.id into its log.dirs.
    Format {
        /// The node's server.properties.
        #[arg(long)]
        config: PathBuf,
        /// The cluster id, the same on every node (`kafka-storage.sh format -t`).
        #[arg(long, conflicts_with = "random_cluster_id")]
        cluster_id: Option<String>,
        /// Make a fresh cluster id, format with it and print it (then format the other nodes
        /// with `--cluster-id` and that id).
        #[arg(long)]
        random_cluster_id: bool,
        /// Override one key, as in the file (repeatable).
        #[arg(long = "override", value_name = "KEY=VALUE")]
        overrides: Vec<String>,
    },
    /// A local cluster on loopback: `up` starts one, `status` shows a cluster's quorum.
    Cluster {
        #[command(subcommand)]
        action: ClusterAction,
    },
    /// Create, list, describe or delete topics.
    Topics {
        #[arg(long, alias = "bootstrap-server", default_value = "127.0.0.1:9092")]
        bootstrap: String,
        #[command(subcommand)]
        action: TopicAction,
    },
    /// Produce each line of standard input as one record (key before the first tab, if any).
    /// A missing topic is created when the broker allows auto-creation.
    Produce {
        #[arg(long, alias = "bootstrap-server", default_value = "127.0.0.1:9092")]
        bootstrap: String,
        topic: String,
        #[arg(long, default_value_t = 0)]
        partition: i32,
        #[arg(long, default_value = "all")]
        acks: String,
    },
    /// Print records of a partition from an offset.
    Consume {
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
        topic: String,
        #[arg(long, default_value_t = 0)]
        partition: i32,
        #[arg(long, default_value_t = 0)]
        offset: i64,
        /// Stop after this many records.
        #[arg(long, default_value_t = 100)]
        max: u64,
    },
    /// List, describe or delete consumer groups, or reset their offsets (like
    /// kafka-consumer-groups.sh).
    Groups {
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
        #[command(subcommand)]
        action: GroupAction,
    },
    /// Elect partition leaders, preferred or unclean (like kafka-leader-election.sh).
    LeaderElection(leader_election_command::LeaderElectionArgs),
    /// Load generators that print throughput and latency.
    Bench {
        #[command(subcommand)]
        which: BenchKind,
    },
}

#[derive(Subcommand)]
enum ClusterAction {
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
        #[arg(long, default_value = "127.0.0.1:19092")]
        bootstrap: String,
    },
}

#[derive(Subcommand)]
enum TopicAction {
    Create {
        name: String,
        #[arg(long, default_value_t = 1)]
        partitions: i32,
        #[arg(long, default_value_t = 1)]
        replication_factor: i16,
        /// Topic config, KEY=VALUE (repeatable).
        #[arg(long = "config", value_name = "KEY=VALUE")]
        configs: Vec<String>,
    },
    List,
    /// Partitions with leader, replicas, ISR and ELR, and topic configs (like
    /// `kafka-topics.sh --describe`); every topic without a name.
    Describe {
        name: Option<String>,
    },
    Delete {
        name: String,
    },
}

#[derive(Subcommand)]
enum GroupAction {
    /// One line per group: group<TAB>state<TAB>protocol type<TAB>type (classic or consumer).
    List,
    /// State, members (with member epochs and assignments for a consumer-protocol group), and
    /// committed offsets with the lag behind the log end.
    Describe { group: String },
    /// Delete a group with no members (classic or consumer), with its committed offsets.
    Delete { group: String },
    /// Set the committed offsets of a group for one topic; refused while it has members.
    ResetOffsets {
        group: String,
        #[arg(long)]
        topic: String,
        /// earliest, latest, or an offset (clamped to the partition's range).
        #[arg(long)]
        to: String,
    },
}

#[derive(Subcommand)]
enum BenchKind {
    Produce {
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
        #[arg(long, default_value = "weir-bench")]
        topic: String,
        #[arg(long, default_value_t = 3)]
        partitions: i32,
        /// Replication factor of the topic the run creates.
        #[arg(long, default_value_t = 1)]
        replication_factor: i16,
        /// A config of the topic the run creates, as key=value (repeatable), e.g.
        /// min.insync.replicas=2.
        #[arg(long = "topic-config")]
        topic_configs: Vec<String>,
        #[arg(long, default_value_t = 100)]
        record_size: usize,
        #[arg(long, default_value_t = 1_000_000)]
        records: u64,
        #[arg(long, default_value_t = 100)]
        batch: usize,
        /// A fixed offered load in MB/s (10^6 bytes) of record values; latency then counts from
        /// each request's scheduled send time. Default: as fast as the requests in flight allow.
        #[arg(long)]
        rate_mb: Option<f64>,
        /// 0, 1 or all.
        #[arg(long, default_value = "1")]
        acks: String,
        /// Requests in flight per connection.
        #[arg(long, default_value_t = 5)]
        in_flight: usize,
        /// Connections sharing the records, each with its own requests in flight.
        #[arg(long, default_value_t = 1)]
        connections: usize,
        /// Do not create the topic first (for brokers without CreateTopics, e.g. librdkafka's
        /// mock cluster, where it must already exist with --partitions partitions).
        #[arg(long)]
        no_create: bool,
        #[arg(long, default_value_t = 60)]
        seconds: u64,
    },
    /// Long-poll wake-up latency: produce one record to partition 0, time until the consumer's
    /// parked fetch answers; idle pollers long-poll the other partitions meanwhile.
    Longpoll {
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
        #[arg(long, default_value = "weir-longpoll")]
        topic: String,
        #[arg(long, default_value_t = 8)]
        partitions: i32,
        #[arg(long, default_value_t = 2000)]
        rounds: u64,
        /// Connections long-polling partitions nothing is produced to.
        #[arg(long, default_value_t = 0)]
        idle_pollers: usize,
        #[arg(long)]
        no_create: bool,
        #[arg(long, default_value_t = 60)]
        seconds: u64,
    },
    Consume {
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
        #[arg(long, default_value = "weir-bench")]
        topic: String,
        #[arg(long, default_value_t = 3)]
        partitions: i32,
        #[arg(long, default_value_t = 1_000_000)]
        records: u64,
        /// Bytes per partition per fetch (max.partition.fetch.bytes).
        #[arg(long, default_value_t = 1 << 20)]
        fetch_bytes: i32,
        #[arg(long, default_value_t = 60)]
        seconds: u64,
    },
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("WEIR_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("weir: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("weir: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn addr(bootstrap: &str) -> anyhow::Result<SocketAddr> {
    let first = bootstrap.split(',').next().unwrap_or(bootstrap).trim();
    first
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| anyhow::anyhow!("cannot resolve {first}"))
}

fn acks(s: &str) -> anyhow::Result<i16> {
    match s {
        "all" | "-1" => Ok(-1),
        "0" => Ok(0),
        "1" => Ok(1),
        other => anyhow::bail!("acks must be 0, 1 or all, not '{other}'"),
    }
}

fn key_values(items: &[String]) -> anyhow::Result<BTreeMap<String, String>> {
    items
        .iter()
        .map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .ok_or_else(|| anyhow::anyhow!("expected KEY=VALUE, got '{kv}'"))
        })
        .collect()
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let io = Io::os();
    match cli.command {
        Command::Serve { config, overrides } => serve(io, config, overrides).await,
        Command::Format {
            config,
            cluster_id,
            random_cluster_id,
            overrides,
        } => format(io, config, cluster_id, random_cluster_id, overrides).await,
        Command::Cluster { action } => match action {
            ClusterAction::Up {
                nodes,
                dir,
                base_port,
            } => cluster_up(io, nodes, dir, base_port).await,
            ClusterAction::Status { bootstrap } => cluster_status(io, &bootstrap).await,
        },
        Command::Topics { bootstrap, action } => {
            // Any broker: it forwards metadata changes to the active controller.
            let mut client = connect_any(&io, &bootstrap).await?;
            match action {
                TopicAction::Create {
                    name,
                    partitions,
                    replication_factor,
                    configs,
                } => {
                    client
                        .create_topic(
                            &name,
                            partitions,
                            replication_factor,
                            &key_values(&configs)?,
                        )
                        .await?;
                    println!("created topic {name}");
                }
                TopicAction::List => {
                    for topic in client.metadata(None).await? {
                        println!("{}\t{} partitions", topic.name, topic.partitions);
                    }
                }
                TopicAction::Describe { name } => {
                    let names: Vec<&str> = name.iter().map(String::as_str).collect();
                    let wanted = (!names.is_empty()).then_some(names.as_slice());
                    let topics = client.describe_topics(wanted).await?;
                    print!("{}", weir::client::render_topic_descriptions(&topics));
                }
                TopicAction::Delete { name } => {
                    client.delete_topic(&name).await?;
                    println!("deleted topic {name}");
                }
            }
            Ok(())
        }
        Command::Produce {
            bootstrap,
            topic,
            partition,
            acks: a,
        } => {
            let acks = acks(&a)?;
            // As Kafka's producer: Metadata from any broker (creating the topic if the broker
            // allows), then the partition's leader, following it if it moves.
            let mut cluster = ClusterClient::connect(&io, bootstrap_addrs(&bootstrap)?).await?;
            let mut input = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut input)?;
            let now = io.clock.wall_ms();
            let mut builder = BatchBuilder::new(now);
            for line in input.lines() {
                let (key, value) = match line.split_once('\t') {
                    Some((k, v)) => (Some(k.as_bytes()), v.as_bytes()),
                    None => (None, line.as_bytes()),
                };
                builder.push(key, Some(value), now);
            }
            if builder.is_empty() {
                return Ok(());
            }
            let count = builder.len();
            let batch = bytes::Bytes::from(builder.finish(-1, -1, -1));
            let offset = cluster.produce(&topic, partition, batch, acks).await?;
            match offset {
                Some(o) => println!(
                    "produced {count} records at offsets {o}..{}",
                    o + count as i64 - 1
                ),
                None => println!("sent {count} records (acks=0)"),
            }
            Ok(())
        }
        Command::Consume {
            bootstrap,
            topic,
            partition,
            offset,
            max,
        } => {
            // From the partition's leader, whichever broker is the bootstrap.
            let mut cluster = ClusterClient::connect(&io, bootstrap_addrs(&bootstrap)?).await?;
            let mut next = offset;
            let mut printed = 0;
            while printed < max {
                let fetched = cluster
                    .fetch(&topic, partition, next, 1 << 20, Duration::from_millis(500))
                    .await?;
                if fetched.records.is_empty() {
                    break;
                }
                for item in batch::iter(&fetched.records) {
                    let (at, header) = item?;
                    let bytes = &fetched.records[at..at + header.total_len()];
                    let Some(records) = batch::records(bytes, &header) else {
                        println!(
                            "(compressed batch at offset {}: not decoded)",
                            header.base_offset
                        );
                        next = header.next_offset();
                        continue;
                    };
                    for r in records? {
                        if r.offset < next || printed >= max {
                            continue;
                        }
                        let show = |b: Option<&[u8]>| {
                            b.map(|b| String::from_utf8_lossy(b).into_owned())
                                .unwrap_or_else(|| "null".into())
                        };
                        println!(
                            "{}\t{}\t{}\t{}",
                            r.offset,
                            r.timestamp,
                            show(r.key),
                            show(r.value)
                        );
                        printed += 1;
                    }
                    next = header.next_offset();
                }
            }
            Ok(())
        }
        Command::Groups { bootstrap, action } => {
            let mut cluster = ClusterClient::connect(&io, bootstrap_addrs(&bootstrap)?).await?;
            groups(&mut cluster, action).await
        }
        Command::LeaderElection(args) => leader_election_command::run(&io, args).await,
        Command::Bench { which } => match which {
            BenchKind::Produce {
                bootstrap,
                topic,
                partitions,
                replication_factor,
                topic_configs,
                record_size,
                records,
                batch,
                rate_mb,
                acks: a,
                in_flight,
                connections,
                no_create,
                seconds,
            } => {
                if rate_mb.is_some_and(|r| !(r > 0.0 && r.is_finite())) {
                    anyhow::bail!("--rate-mb must be a positive number");
                }
                let spec = bench::ProduceBench {
                    addr: addr(&bootstrap)?,
                    topic,
                    partitions,
                    replication_factor,
                    topic_configs: key_values(&topic_configs)?,
                    rate: rate_mb.map(|r| r * 1e6),
                    record_size,
                    records,
                    records_per_batch: batch,
                    acks: acks(&a)?,
                    in_flight,
                    connections,
                    create_topic: !no_create,
                    time_limit: Duration::from_secs(seconds),
                };
                let report = bench::produce(&io, &spec).await?;
                let offered = rate_mb.map_or(String::new(), |r| format!(" offered {r} MB/s"));
                println!(
                    "{}",
                    report.render(&format!("produce {record_size} B acks={a}{offered}"))
                );
                Ok(())
            }
            BenchKind::Longpoll {
                bootstrap,
                topic,
                partitions,
                rounds,
                idle_pollers,
                no_create,
                seconds,
            } => {
                let spec = bench::LongPollBench {
                    addr: addr(&bootstrap)?,
                    topic,
                    partitions,
                    rounds,
                    idle_pollers,
                    create_topic: !no_create,
                    time_limit: Duration::from_secs(seconds),
                };
                let report = bench::longpoll(&io, &spec).await?;
                println!(
                    "{}",
                    report.render(&format!("long-poll wake-up, {idle_pollers} idle pollers"))
                );
                Ok(())
            }
            BenchKind::Consume {
                bootstrap,
                topic,
                partitions,
                records,
                fetch_bytes,
                seconds,
            } => {
                let spec = bench::ConsumeBench {
                    addr: addr(&bootstrap)?,
                    topic,
                    partitions,
                    records,
                    fetch_bytes,
                    time_limit: Duration::from_secs(seconds),
                };
                let report = bench::consume(&io, &spec).await?;
                println!("{}", report.render("consume"));
                Ok(())
            }
        },
    }
}

async fn format(
    io: Io,
    path: PathBuf,
    cluster_id: Option<String>,
    random: bool,
    overrides: Vec<String>,
) -> anyhow::Result<()> {
    let config = load_config(&io, Some(path), overrides)?;
    let cluster_id = match (cluster_id, random) {
        (Some(id), _) => id,
        (None, true) => weir::broker::identity::random_cluster_id(&io),
        (None, false) => anyhow::bail!("give --cluster-id ID or --random-cluster-id"),
    };
    for dir in &config.log_dirs {
        weir::broker::format_log_dir(&io, std::path::Path::new(dir), &cluster_id, config.node_id)
            .await?;
        eprintln!(
            "formatted {dir} for cluster.id={cluster_id} node.id={}",
            config.node_id
        );
    }
    println!("{cluster_id}");
    Ok(())
}

fn load_config(
    io: &Io,
    path: Option<PathBuf>,
    overrides: Vec<String>,
) -> anyhow::Result<ServerConfig> {
    let mut props = match &path {
        Some(p) => {
            let raw = read_file(io.disk.as_ref(), p)
                .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", p.display()))?;
            parse_properties(&String::from_utf8_lossy(&raw))?
        }
        None => BTreeMap::new(),
    };
    props.extend(key_values(&overrides)?);
    let (config, warnings) = ServerConfig::from_properties(&props)?;
    for w in warnings {
        tracing::warn!("{w}");
    }
    #[cfg(feature = "planted")]
    let config = plant_from_env(config)?;
    Ok(config)
}

/// The test-only `planted` build (the real-process fault suite's teeth, `scripts/jepsen`):
/// plants the bug `WEIR_PLANTED_BUG` names. No other build has the variable, the field or the
/// bug.
#[cfg(feature = "planted")]
fn plant_from_env(mut config: ServerConfig) -> anyhow::Result<ServerConfig> {
    if let Some(name) = std::env::var_os("WEIR_PLANTED_BUG") {
        let name = name.to_string_lossy();
        let bug = weir::config::PlantedBug::parse(&name).map_err(|e| anyhow::anyhow!(e))?;
        tracing::warn!(bug = %name, "planted bug enabled (test-only build)");
        config.planted_bug = Some(bug);
    }
    Ok(config)
}

async fn serve(io: Io, path: Option<PathBuf>, overrides: Vec<String>) -> anyhow::Result<()> {
    let config = load_config(&io, path, overrides)?;
    let running = Broker::start(config, io).await?;
    tokio::select! {
        _ = wait_for_signal() => {}
        reason = running.broker.storage_offline() => {
            // As Kafka halts when its last log directory fails: exit without a clean shutdown,
            // so that the next start recovers from what is really on disk.
            anyhow::bail!("log directory offline ({reason}); exiting so the broker can be restarted");
        }
    }
    tracing::info!("shutting down");
    running.broker.shutdown().await?;
    Ok(())
}

async fn cluster_up(io: Io, nodes: u32, dir: PathBuf, base_port: u16) -> anyhow::Result<()> {
    let plans = local_cluster::plan(&dir, nodes, base_port)?;
    let cluster_id = local_cluster::prepare(&io, &plans).await?;
    let running = local_cluster::start(&io, &plans).await?;
    println!(
        "cluster {cluster_id}: {nodes} node(s), configs under {}",
        dir.display()
    );
    println!("bootstrap: {}", local_cluster::bootstrap(&plans));
    println!("Ctrl-C stops every node");
    let offline = weir::io::join_all(
        running
            .iter()
            .map(|r| {
                let broker = r.broker.clone();
                async move { (broker.config().node_id, broker.storage_offline().await) }
            })
            .collect(),
    );
    tokio::select! {
        _ = wait_for_signal() => {}
        // One node's log directory failing stops nothing else; the others serve on.
        _ = offline => {}
    }
    println!("stopping {} node(s)", running.len());
    local_cluster::stop(&running).await;
    Ok(())
}

/// Every address of a comma-separated `bootstrap` list.
fn bootstrap_addrs(bootstrap: &str) -> anyhow::Result<Vec<SocketAddr>> {
    bootstrap
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(addr)
        .collect()
}

/// Connects to the first broker of `bootstrap` that answers.
async fn connect_any(io: &Io, bootstrap: &str) -> anyhow::Result<Client> {
    let mut last = None;
    for host in bootstrap
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
    {
        match addr(host) {
            Ok(a) => match Client::connect(io, a).await {
                Ok(c) => return Ok(c),
                Err(e) => last = Some(anyhow::anyhow!("{host}: {e}")),
            },
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| anyhow::anyhow!("empty --bootstrap")))
}

async fn cluster_status(io: Io, bootstrap: &str) -> anyhow::Result<()> {
    let mut client = connect_any(&io, bootstrap).await?;
    let quorum = client.describe_quorum().await?;
    let brokers = client.brokers().await?;
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

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Group requests go to the group's coordinator, offsets to each partition's leader
/// (`ClusterClient`), whichever broker the bootstrap is.
async fn groups(cluster: &mut ClusterClient, action: GroupAction) -> anyhow::Result<()> {
    match action {
        GroupAction::List => {
            for g in cluster.list_groups().await? {
                println!(
                    "{}\t{}\t{}\t{}",
                    g.group_id, g.state, g.protocol_type, g.group_type
                );
            }
        }
        GroupAction::Describe { group } => {
            // A consumer-protocol group (KIP-848) first; classic groups answer "not found" there.
            let (consumer, classic, committed) = describe_at_coordinator(cluster, &group).await?;
            if let Some(d) = consumer {
                println!(
                    "group {group}: {} (type consumer, group epoch {}, assignment epoch {}, \
                     assignor '{}'), {} members",
                    d.state,
                    d.group_epoch,
                    d.assignment_epoch,
                    d.assignor,
                    d.members.len()
                );
                for m in &d.members {
                    let instance = m.instance_id.as_deref().unwrap_or("-");
                    let assigned: Vec<String> = m
                        .assignment
                        .iter()
                        .map(|(t, ps)| {
                            let ps: Vec<String> = ps.iter().map(i32::to_string).collect();
                            format!("{t}:{}", ps.join(","))
                        })
                        .collect();
                    println!(
                        "member\t{}\t{instance}\t{}\t{}\tepoch {}\t{}",
                        m.member_id,
                        m.client_id,
                        m.client_host,
                        m.member_epoch,
                        if assigned.is_empty() {
                            "-".to_string()
                        } else {
                            assigned.join(" ")
                        }
                    );
                }
            } else {
                let Some(d) = classic else {
                    anyhow::bail!("group '{group}' does not exist");
                };
                println!(
                    "group {group}: {} (type classic, protocol type '{}', protocol '{}'), {} members",
                    d.state,
                    d.protocol_type,
                    d.protocol,
                    d.members.len()
                );
                for m in &d.members {
                    let instance = m.instance_id.as_deref().unwrap_or("-");
                    println!(
                        "member\t{}\t{instance}\t{}\t{}",
                        m.member_id, m.client_id, m.client_host
                    );
                }
            }
            println!("topic\tpartition\tcommitted\tlog-end\tlag");
            for (topic, partition, committed) in committed {
                let (end, _) = cluster.list_offset(&topic, partition, -1).await?;
                let lag = if committed >= 0 {
                    (end - committed).max(0).to_string()
                } else {
                    "-".into()
                };
                println!("{topic}\t{partition}\t{committed}\t{end}\t{lag}");
            }
        }
        GroupAction::Delete { group } => {
            cluster
                .at_coordinator(&group, |c| {
                    let group = group.clone();
                    Box::pin(async move { c.delete_group(&group).await })
                })
                .await?;
            println!("deleted group {group}");
        }
        GroupAction::ResetOffsets { group, topic, to } => {
            let (consumer, classic, _) = describe_at_coordinator(cluster, &group).await?;
            if let Some(d) = consumer {
                if !d.members.is_empty() {
                    anyhow::bail!(
                        "consumer group '{group}' has {} active members ({}): stop them before resetting its offsets",
                        d.members.len(),
                        d.state
                    );
                }
            } else if let Some(d) = classic {
                if !d.members.is_empty() {
                    anyhow::bail!(
                        "group '{group}' has {} active members ({}): stop them before resetting its offsets",
                        d.members.len(),
                        d.state
                    );
                }
            }
            let info = cluster
                .any()
                .await?
                .metadata(Some(&[topic.as_str()]))
                .await?;
            let partitions = match info.first() {
                Some(t) if t.error.is_none() => t.partitions,
                _ => anyhow::bail!("unknown topic '{topic}'"),
            };
            let target: Option<i64> = match to.as_str() {
                "earliest" | "latest" => None,
                n => Some(n.parse().map_err(|_| {
                    anyhow::anyhow!("--to must be earliest, latest or an offset, got '{n}'")
                })?),
            };
            let mut offsets = Vec::new();
            for p in 0..partitions {
                let (start, _) = cluster.list_offset(&topic, p, -2).await?;
                let (end, _) = cluster.list_offset(&topic, p, -1).await?;
                let offset = match (to.as_str(), target) {
                    ("earliest", _) => start,
                    ("latest", _) => end,
                    (_, Some(n)) => n.clamp(start, end),
                    _ => unreachable!(),
                };
                offsets.push((p, offset));
            }
            cluster
                .at_coordinator(&group, |c| {
                    let (group, topic, offsets) = (group.clone(), topic.clone(), offsets.clone());
                    Box::pin(async move { c.commit_offsets(&group, &topic, &offsets).await })
                })
                .await?;
            for (p, o) in offsets {
                println!("{topic}\t{p}\t{o}");
            }
        }
    }
    Ok(())
}

type GroupDescriptions = (
    Option<weir::client::ConsumerGroupDescription>,
    Option<weir::client::GroupDescription>,
    Vec<(String, i32, i64)>,
);

/// A group as its coordinator describes it (as a consumer-protocol group, else as a classic
/// one) with its committed offsets, asked in one visit that follows coordinator moves.
async fn describe_at_coordinator(
    cluster: &mut ClusterClient,
    group: &str,
) -> anyhow::Result<GroupDescriptions> {
    let described = cluster
        .at_coordinator(group, |c| {
            let group = group.to_string();
            Box::pin(async move {
                let consumer = c.describe_consumer_group(&group).await?;
                let classic = match consumer {
                    Some(_) => None,
                    None => c.describe_group(&group).await?,
                };
                let committed = c.committed_offsets(&group, None).await?;
                Ok((consumer, classic, committed))
            })
        })
        .await?;
    Ok(described)
}
