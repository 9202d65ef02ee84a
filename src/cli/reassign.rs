//! `weir reassign`: Kafka's `kafka-reassign-partitions.sh` workflow over
//! AlterPartitionReassignments / ListPartitionReassignments, with its options, its JSON files
//! and its output lines (notes operations §3.3):
//!
//! - `--generate --topics-to-move-json-file F --broker-list 4,5,6`: the current assignment and a
//!   proposed one over the listed brokers (Kafka's rack-unaware placement), one JSON line each;
//! - `--execute --reassignment-json-file F [--throttle N]`: prints the current assignment for
//!   rollback, sets the throttles (the topic replica lists: every current replica as leader,
//!   every new one as follower; the broker rates on every broker involved), starts the moves;
//! - `--verify --reassignment-json-file F`: each partition's state, and once all are done the
//!   throttles are cleared (unless `--preserve-throttles`); with `--wait` it polls, showing a
//!   progress bar, until they are;
//! - `--cancel --reassignment-json-file F`, `--list`.
//!
//! A plan's `log_dirs` (a path per replica, or "any") also moves replicas between a broker's
//! log directories: `--execute` sends AlterReplicaLogDirs to those brokers, `--verify` reports
//! each move (`reassign_dirs`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use serde::{Deserialize, Serialize};

use weir::client::{
    Client, ConfigResource, OngoingReassignment, ReassignOutcome, TopicDescription,
};
use weir::io::Io;

use super::output::{print_json, Output};
use super::reassign_dirs;

#[derive(Args)]
pub struct ReassignArgs {
    #[command(flatten)]
    server: super::ServerArgs,
    /// Propose a plan moving the topics of --topics-to-move-json-file onto --broker-list.
    #[arg(long, group = "action")]
    generate: bool,
    /// Start the reassignment of --reassignment-json-file.
    #[arg(long, group = "action")]
    execute: bool,
    /// Show the state of the reassignment of --reassignment-json-file; clears the throttles
    /// once it is complete.
    #[arg(long, group = "action")]
    verify: bool,
    /// Cancel the reassignment of --reassignment-json-file: the partitions go back to their
    /// replicas before it.
    #[arg(long, group = "action")]
    cancel: bool,
    /// List the reassignments in progress.
    #[arg(long, group = "action")]
    list: bool,
    /// `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2,3]}]}`.
    #[arg(long = "reassignment-json-file")]
    reassignment_json_file: Option<PathBuf>,
    /// `{"version":1,"topics":[{"topic":"t"}]}` (with --generate).
    #[arg(long = "topics-to-move-json-file")]
    topics_to_move_json_file: Option<PathBuf>,
    /// The brokers to place replicas on, e.g. `4,5,6` (with --generate).
    #[arg(long = "broker-list")]
    broker_list: Option<String>,
    /// Replication throttle in bytes/s for the moves (with --execute).
    #[arg(long, default_value_t = -1)]
    throttle: i64,
    /// Throttle in bytes/s for moves between a broker's log directories (with --execute).
    #[arg(long = "replica-alter-log-dirs-throttle", default_value_t = -1)]
    replica_alter_log_dirs_throttle: i64,
    /// With --verify: keep the throttles even when the reassignment is complete.
    #[arg(long = "preserve-throttles")]
    preserve_throttles: bool,
    /// With --execute: refuse a plan that changes a partition's replica count (KIP-860).
    #[arg(long = "disallow-replication-factor-change")]
    disallow_replication_factor_change: bool,
    /// With --execute: start even though other reassignments are in progress.
    #[arg(long)]
    additional: bool,
    /// With --execute or --verify: wait until every partition of the plan has moved,
    /// showing progress, then clear the throttles (as --verify does).
    #[arg(long)]
    wait: bool,
    /// How long a request may wait for the active controller, in ms.
    #[arg(long = "timeout", default_value_t = 30_000)]
    timeout_ms: u64,
}

/// Kafka's reassignment JSON.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
struct Plan {
    version: i32,
    partitions: Vec<PlanEntry>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
struct PlanEntry {
    topic: String,
    partition: i32,
    replicas: Vec<i32>,
    #[serde(default)]
    log_dirs: Option<Vec<String>>,
}

#[derive(Deserialize)]
struct TopicsToMove {
    topics: Vec<TopicToMove>,
}

#[derive(Deserialize)]
struct TopicToMove {
    topic: String,
}

const LEADER_RATE: &str = "leader.replication.throttled.rate";
const FOLLOWER_RATE: &str = "follower.replication.throttled.rate";
const LEADER_REPLICAS: &str = "leader.replication.throttled.replicas";
const FOLLOWER_REPLICAS: &str = "follower.replication.throttled.replicas";
const DIR_MOVE_RATE: &str = "replica.alter.log.dirs.io.max.bytes.per.second";

pub async fn run(io: &Io, args: ReassignArgs, output: Output) -> anyhow::Result<()> {
    let mut client = connect(io, &args).await?;
    if args.generate {
        generate(io, &mut client, &args).await
    } else if args.execute {
        let plan = read_plan(io, &args)?;
        execute(&mut client, &args, &plan).await?;
        let timeout = Duration::from_millis(args.timeout_ms);
        let moves = dir_moves(&plan);
        if args.replica_alter_log_dirs_throttle >= 0 && !moves.is_empty() {
            let rate = args.replica_alter_log_dirs_throttle.to_string();
            let brokers: BTreeSet<i32> = moves.iter().map(|m| m.broker).collect();
            for b in brokers {
                let change = [(DIR_MOVE_RATE.to_string(), Some(rate.clone()))].into();
                client
                    .alter_configs(&ConfigResource::Broker(b), &change)
                    .await?;
            }
            println!("The replica-alter-dir throttle limit was set to {rate} B/s");
        }
        reassign_dirs::start(io, &args.server, &mut client, &moves, timeout).await?;
        if args.wait {
            wait(io, &mut client, &args, &plan).await?;
        }
        Ok(())
    } else if args.verify {
        let plan = read_plan(io, &args)?;
        if args.wait {
            wait(io, &mut client, &args, &plan).await
        } else if output.json() {
            verify_json(&mut client, &args, &plan).await
        } else {
            verify(io, &mut client, &args, &plan).await.map(|_| ())
        }
    } else if args.cancel {
        let plan = read_plan(io, &args)?;
        cancel(&mut client, &plan).await
    } else if args.list && output.json() {
        print_json(&client.list_partition_reassignments(None).await?)
    } else if args.list {
        list(&mut client).await
    } else {
        anyhow::bail!(
            "Command must include exactly one action: --generate, --execute, --verify, --cancel, --list"
        )
    }
}

/// The first bootstrap broker that answers (secured as --command-config says); it relays the
/// admin requests to the controller.
async fn connect(io: &Io, args: &ReassignArgs) -> anyhow::Result<Client> {
    let mut client = args.server.connect_any(io).await?;
    client.set_timeout(Duration::from_millis(args.timeout_ms.clamp(1_000, 60_000)));
    Ok(client)
}

fn read_json<T: for<'de> Deserialize<'de>>(
    io: &Io,
    path: &Option<PathBuf>,
    option: &str,
) -> anyhow::Result<T> {
    let Some(path) = path else {
        anyhow::bail!("Missing required argument \"[{option}]\"");
    };
    let raw = weir::io::read_file(io.disk.as_ref(), path)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    serde_json::from_slice(&raw).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

fn read_plan(io: &Io, args: &ReassignArgs) -> anyhow::Result<Plan> {
    let plan: Plan = read_json(io, &args.reassignment_json_file, "reassignment-json-file")?;
    let mut seen = BTreeSet::new();
    for e in &plan.partitions {
        if !seen.insert((e.topic.clone(), e.partition)) {
            anyhow::bail!(
                "Duplicate reassignment of partition {}-{}",
                e.topic,
                e.partition
            );
        }
        if e.replicas.is_empty() {
            anyhow::bail!("Partition {}-{} has no replicas", e.topic, e.partition);
        }
        let distinct: BTreeSet<_> = e.replicas.iter().collect();
        if distinct.len() != e.replicas.len() {
            anyhow::bail!(
                "Partition {}-{} lists a broker twice: {:?}",
                e.topic,
                e.partition,
                e.replicas
            );
        }
        if let Some(dirs) = &e.log_dirs {
            if dirs.len() != e.replicas.len() {
                anyhow::bail!(
                    "Partition {}-{}: log_dirs has {} entries, replicas {}",
                    e.topic,
                    e.partition,
                    dirs.len(),
                    e.replicas.len()
                );
            }
        }
    }
    Ok(plan)
}

fn json_line(plan: &Plan) -> String {
    serde_json::to_string(plan).expect("a plan serializes")
}

/// The current assignment of `topics` as a plan.
async fn current(client: &mut Client, topics: &[&str]) -> anyhow::Result<Plan> {
    let described = client.describe_topics(Some(topics)).await?;
    let mut partitions = Vec::new();
    for t in &described {
        for p in &t.partitions {
            partitions.push(PlanEntry {
                topic: t.name.clone(),
                partition: p.partition,
                replicas: p.replicas.clone(),
                log_dirs: Some(vec!["any".into(); p.replicas.len()]),
            });
        }
    }
    partitions.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
    Ok(Plan {
        version: 1,
        partitions,
    })
}

async fn generate(io: &Io, client: &mut Client, args: &ReassignArgs) -> anyhow::Result<()> {
    let topics: TopicsToMove = read_json(
        io,
        &args.topics_to_move_json_file,
        "topics-to-move-json-file",
    )?;
    let Some(list) = &args.broker_list else {
        anyhow::bail!("Missing required argument \"[broker-list]\"");
    };
    let brokers: Vec<i32> = list
        .split(',')
        .map(|b| b.trim().parse::<i32>())
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow::anyhow!("--broker-list {list}: {e}"))?;
    let live = client.brokers().await?;
    if let Some(b) = brokers.iter().find(|b| !live.iter().any(|l| l.id == **b)) {
        anyhow::bail!("Broker {b} in --broker-list is not a live broker");
    }
    // KIP-1066: a cordoned broker (a broker being retired) takes no new replicas.
    let mut brokers_open = Vec::with_capacity(brokers.len());
    for b in live.iter().filter(|l| brokers.contains(&l.id)) {
        if cordoned(io, args, b).await? {
            eprintln!(
                "Broker {} is cordoned (cordoned.log.dirs): left out of the proposal",
                b.id
            );
        } else {
            brokers_open.push(b.id);
        }
    }
    if brokers_open.is_empty() {
        anyhow::bail!("Every broker in --broker-list is cordoned");
    }
    let brokers = brokers_open;
    let names: Vec<&str> = topics.topics.iter().map(|t| t.topic.as_str()).collect();
    let described: Vec<TopicDescription> = client.describe_topics(Some(&names)).await?;
    for name in &names {
        if !described.iter().any(|t| t.name == *name) {
            anyhow::bail!("Topic {name} not found");
        }
    }
    let current = current(client, &names).await?;
    let mut proposed = Vec::new();
    for t in &described {
        let rf = t.partitions.first().map_or(1, |p| p.replicas.len()) as i16;
        let count = t.partitions.len() as i32;
        let assignment =
            weir::controller::placement::assign(&brokers, 0, count, rf, io.rng.next_u64())
                .map_err(|e| anyhow::anyhow!("{e}"))?;
        for (p, replicas) in t.partitions.iter().zip(assignment) {
            proposed.push(PlanEntry {
                topic: t.name.clone(),
                partition: p.partition,
                log_dirs: Some(vec!["any".into(); replicas.len()]),
                replicas,
            });
        }
    }
    proposed.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
    println!("Current partition replica assignment");
    println!("{}", json_line(&current));
    println!();
    println!("Proposed partition reassignment configuration");
    println!(
        "{}",
        json_line(&Plan {
            version: 1,
            partitions: proposed
        })
    );
    Ok(())
}

/// Whether broker `b` is cordoned (KIP-1066): its `cordoned.log.dirs` (asked of the broker
/// itself, which alone knows its static value) is `*` or names every one of its directories.
async fn cordoned(
    io: &Io,
    args: &ReassignArgs,
    b: &weir::client::BrokerInfo,
) -> anyhow::Result<bool> {
    use std::net::ToSocketAddrs as _;
    let addr = format!("{}:{}", b.host, b.port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| anyhow::anyhow!("broker {}: cannot resolve {}", b.id, b.host))?;
    let mut client =
        Client::connect_secure(io, addr, &b.host, &args.server.security.security(io)?).await?;
    let configs = client
        .describe_configs(&ConfigResource::Broker(b.id))
        .await?;
    let named: Vec<String> = configs
        .get("cordoned.log.dirs")
        .and_then(|e| e.value.clone())
        .unwrap_or_default()
        .split(',')
        .map(|d| d.trim().to_string())
        .filter(|d| !d.is_empty())
        .collect();
    if named.iter().any(|d| d == "*") {
        return Ok(true);
    }
    if named.is_empty() {
        return Ok(false);
    }
    let dirs = client.describe_log_dirs(None).await?;
    Ok(dirs.iter().filter(|d| d.error.is_none()).all(|d| {
        named
            .iter()
            .any(|n| std::path::Path::new(n) == std::path::Path::new(&d.path))
    }))
}

async fn execute(client: &mut Client, args: &ReassignArgs, plan: &Plan) -> anyhow::Result<()> {
    let ongoing = client.list_partition_reassignments(None).await?;
    if !ongoing.is_empty() && !args.additional {
        anyhow::bail!(
            "Cannot execute because there is an existing partition assignment. Use --additional \
             to override this and create a new partition assignment in addition to the existing \
             one. The --additional flag can also be used to change the throttle by resubmitting \
             the current reassignment."
        );
    }
    let topics: Vec<&str> = plan
        .partitions
        .iter()
        .map(|e| e.topic.as_str())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let before = current(client, &topics).await?;
    for e in &plan.partitions {
        if !before
            .partitions
            .iter()
            .any(|c| c.topic == e.topic && c.partition == e.partition)
        {
            anyhow::bail!("Unable to find partition: {}-{}", e.topic, e.partition);
        }
    }
    let involved: Vec<PlanEntry> = before
        .partitions
        .iter()
        .filter(|c| {
            plan.partitions
                .iter()
                .any(|e| e.topic == c.topic && e.partition == c.partition)
        })
        .cloned()
        .collect();
    println!("Current partition replica assignment");
    println!();
    println!(
        "{}",
        json_line(&Plan {
            version: 1,
            partitions: involved.clone()
        })
    );
    println!();
    println!("Save this to use as the --reassignment-json-file option during rollback");
    if args.throttle >= 0 {
        set_throttles(client, plan, &involved, args.throttle).await?;
    }
    let requests: Vec<(String, i32, Option<Vec<i32>>)> = plan
        .partitions
        .iter()
        .map(|e| (e.topic.clone(), e.partition, Some(e.replicas.clone())))
        .collect();
    let outcomes = client
        .alter_partition_reassignments(&requests, !args.disallow_replication_factor_change)
        .await?;
    report(
        &outcomes,
        "Successfully started partition reassignment{s} for {}",
        "Error reassigning partition(s)",
    )
}

/// Kafka's throttle lists: every current replica may be throttled as a leader, every new
/// one as a follower; the rate on every broker of either.
async fn set_throttles(
    client: &mut Client,
    plan: &Plan,
    current: &[PlanEntry],
    rate: i64,
) -> anyhow::Result<()> {
    let mut leader: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let mut follower: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let mut brokers = BTreeSet::new();
    for e in &plan.partitions {
        let Some(c) = current
            .iter()
            .find(|c| c.topic == e.topic && c.partition == e.partition)
        else {
            continue;
        };
        for r in &c.replicas {
            leader
                .entry(&e.topic)
                .or_default()
                .push(format!("{}:{r}", e.partition));
            brokers.insert(*r);
        }
        for r in e.replicas.iter().filter(|r| !c.replicas.contains(r)) {
            follower
                .entry(&e.topic)
                .or_default()
                .push(format!("{}:{r}", e.partition));
            brokers.insert(*r);
        }
    }
    let topics: BTreeSet<&str> = leader.keys().chain(follower.keys()).copied().collect();
    for topic in topics {
        let mut changes = BTreeMap::new();
        let join = |v: Option<&Vec<String>>| v.map(|v| v.join(",")).unwrap_or_default();
        changes.insert(LEADER_REPLICAS.to_string(), Some(join(leader.get(topic))));
        changes.insert(
            FOLLOWER_REPLICAS.to_string(),
            Some(join(follower.get(topic))),
        );
        changes.retain(|_, v| v.as_ref().is_some_and(|v| !v.is_empty()));
        client.alter_topic_configs(topic, &changes).await?;
    }
    for b in &brokers {
        let changes: BTreeMap<String, Option<String>> = [LEADER_RATE, FOLLOWER_RATE]
            .iter()
            .map(|k| (k.to_string(), Some(rate.to_string())))
            .collect();
        client
            .alter_configs(&ConfigResource::Broker(*b), &changes)
            .await?;
    }
    println!("The inter-broker throttle limit was set to {rate} B/s");
    Ok(())
}

/// The plan's moves between log directories.
fn dir_moves(plan: &Plan) -> Vec<reassign_dirs::DirMove> {
    reassign_dirs::moves(plan.partitions.iter().map(|e| {
        (
            e.topic.as_str(),
            e.partition,
            e.replicas.as_slice(),
            e.log_dirs.as_deref(),
        )
    }))
}

/// Kafka's `--verify` lines; `Ok(true)` when every partition of the plan is done, and every
/// move between log directories.
async fn verify(
    io: &Io,
    client: &mut Client,
    args: &ReassignArgs,
    plan: &Plan,
) -> anyhow::Result<bool> {
    let (done, lines) = status(client, plan).await?;
    println!("Status of partition reassignment:");
    for line in lines {
        println!("{line}");
    }
    let moves = dir_moves(plan);
    let mut done = done;
    if !moves.is_empty() {
        let (moved, lines) = reassign_dirs::states(io, &args.server, client, &moves).await?;
        for line in lines {
            println!("{line}");
        }
        done &= moved;
    }
    if done && !args.preserve_throttles {
        for line in clear_throttles(client, plan).await? {
            println!("{line}");
        }
    }
    Ok(done)
}

/// `--verify --output json`: each partition's state (`completed`, `in_progress`, or `failed`:
/// neither moving nor at its target), as one document; the throttles are cleared as `--verify`
/// clears them.
async fn verify_json(client: &mut Client, args: &ReassignArgs, plan: &Plan) -> anyhow::Result<()> {
    #[derive(Serialize)]
    struct Verified<'a> {
        topic: &'a str,
        partition: i32,
        state: &'static str,
    }
    #[derive(Serialize)]
    struct Verification<'a> {
        complete: bool,
        throttles_cleared: bool,
        partitions: Vec<Verified<'a>>,
    }
    let (done, lines) = status(client, plan).await?;
    // `status` gives one line per partition of the plan, in its order.
    let partitions = (plan.partitions.iter().zip(&lines))
        .map(|(e, line)| Verified {
            topic: &e.topic,
            partition: e.partition,
            state: if line.ends_with("is completed.") {
                "completed"
            } else if line.ends_with("is still in progress.") {
                "in_progress"
            } else {
                "failed"
            },
        })
        .collect();
    let throttles_cleared = done && !args.preserve_throttles;
    if throttles_cleared {
        clear_throttles(client, plan).await?;
    }
    print_json(&Verification {
        complete: done,
        throttles_cleared,
        partitions,
    })
}

/// Each partition of the plan: completed (its replicas are the target and nothing is in
/// flight), still in progress, or failed (neither).
async fn status(client: &mut Client, plan: &Plan) -> anyhow::Result<(bool, Vec<String>)> {
    let keys: Vec<(String, i32)> = plan
        .partitions
        .iter()
        .map(|e| (e.topic.clone(), e.partition))
        .collect();
    let ongoing = client.list_partition_reassignments(Some(&keys)).await?;
    let topics: Vec<&str> = plan
        .partitions
        .iter()
        .map(|e| e.topic.as_str())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let now = current(client, &topics).await?;
    let mut done = true;
    let mut lines = Vec::new();
    for e in &plan.partitions {
        let tp = format!("[{},{}]", e.topic, e.partition);
        if ongoing
            .iter()
            .any(|o| o.topic == e.topic && o.partition == e.partition)
        {
            done = false;
            lines.push(format!(
                "Reassignment of partition {tp} is still in progress."
            ));
        } else if now
            .partitions
            .iter()
            .any(|c| c.topic == e.topic && c.partition == e.partition && c.replicas == e.replicas)
        {
            lines.push(format!("Reassignment of partition {tp} is completed."));
        } else {
            done = false;
            lines.push(format!(
                "There is no active reassignment of partition {tp}, but replica set is not {:?}.",
                e.replicas
            ));
        }
    }
    Ok((done, lines))
}

/// Clears the plan's throttles; the lines to say so, as Kafka's tool does.
async fn clear_throttles(client: &mut Client, plan: &Plan) -> anyhow::Result<Vec<String>> {
    let topics: BTreeSet<&str> = plan.partitions.iter().map(|e| e.topic.as_str()).collect();
    let brokers: BTreeSet<i32> = client.brokers().await?.iter().map(|b| b.id).collect();
    let clear = |keys: &[&str]| -> BTreeMap<String, Option<String>> {
        keys.iter().map(|k| (k.to_string(), None)).collect()
    };
    for b in &brokers {
        client
            .alter_configs(
                &ConfigResource::Broker(*b),
                &clear(&[LEADER_RATE, FOLLOWER_RATE, DIR_MOVE_RATE]),
            )
            .await?;
    }
    let mut said = vec![format!(
        "Clearing broker-level throttles on brokers {}",
        brokers
            .iter()
            .map(i32::to_string)
            .collect::<Vec<_>>()
            .join(",")
    )];
    for t in &topics {
        client
            .alter_topic_configs(t, &clear(&[LEADER_REPLICAS, FOLLOWER_REPLICAS]))
            .await?;
    }
    said.push(format!(
        "Clearing topic-level throttles on topic{} {}",
        if topics.len() > 1 { "s" } else { "" },
        topics.into_iter().collect::<Vec<_>>().join(",")
    ));
    Ok(said)
}

/// Polls until the plan is done, showing a progress line on standard error (a terminal only),
/// then one closing line there (`N/M partitions moved, T s`, for logs too) and verifies (and
/// so clears the throttles).
async fn wait(
    io: &Io,
    client: &mut Client,
    args: &ReassignArgs,
    plan: &Plan,
) -> anyhow::Result<()> {
    let total = plan.partitions.len();
    let start = io.clock.monotonic();
    // The reassignments are listed by the active controller, the replicas by this broker's
    // Metadata: right after a move completes, the broker may not have applied it yet. A
    // partition neither moving nor at its target only fails the wait if it stays so.
    const STRAY_POLLS: u32 = 6;
    let mut stray = 0;
    let line = super::progress::Progress::on_stderr();
    loop {
        let (done, lines) = status(client, plan).await?;
        let completed = lines
            .iter()
            .filter(|l| l.ends_with("is completed."))
            .count();
        stray = match lines.iter().any(|l| l.starts_with("There is no active")) {
            true => stray + 1,
            false => 0,
        };
        let failed = stray >= STRAY_POLLS;
        let moved = format!(
            "{completed}/{total} partitions moved, {:.1}s",
            (io.clock.monotonic() - start).as_secs_f64()
        );
        line.update(
            super::progress::fraction(completed as u64, total as u64),
            moved.clone(),
        );
        let moves = dir_moves(plan);
        let dirs_moved = moves.is_empty()
            || reassign_dirs::states(io, &args.server, client, &moves)
                .await?
                .0;
        if (done && dirs_moved) || failed {
            line.finish();
            eprintln!("{moved}");
            verify(io, client, args, plan).await?;
            if failed {
                anyhow::bail!("a partition of the plan is neither moving nor at its target");
            }
            return Ok(());
        }
        io.clock.sleep(Duration::from_millis(500)).await;
    }
}

async fn cancel(client: &mut Client, plan: &Plan) -> anyhow::Result<()> {
    let requests: Vec<(String, i32, Option<Vec<i32>>)> = plan
        .partitions
        .iter()
        .map(|e| (e.topic.clone(), e.partition, None))
        .collect();
    let outcomes = client
        .alter_partition_reassignments(&requests, true)
        .await?;
    report(
        &outcomes,
        "Successfully cancelled partition reassignment{s} for: {}",
        "Error cancelling partition reassignment(s)",
    )
}

/// Prints the partitions an Alter request started or cancelled as kafka-reassign-partitions.sh
/// does (`done` names them, `{s}` standing for the plural's "s"), then fails with `failed` and
/// the refused ones, if any.
fn report(outcomes: &[ReassignOutcome], done: &str, failed: &str) -> anyhow::Result<()> {
    let ok: Vec<String> = outcomes
        .iter()
        .filter(|o| o.error.is_none())
        .map(|o| format!("{}-{}", o.topic, o.partition))
        .collect();
    if !ok.is_empty() {
        let plural = if ok.len() > 1 { "s" } else { "" };
        println!(
            "{}",
            done.replace("{s}", plural).replace("{}", &ok.join(","))
        );
    }
    let refused: Vec<String> = outcomes
        .iter()
        .filter_map(|o| {
            o.error
                .as_ref()
                .map(|(e, m)| format!("{}-{}: {e:?}: {m}", o.topic, o.partition))
        })
        .collect();
    if !refused.is_empty() {
        anyhow::bail!("{failed}:\n{}", refused.join("\n"));
    }
    Ok(())
}

async fn list(client: &mut Client) -> anyhow::Result<()> {
    let ongoing: Vec<OngoingReassignment> = client.list_partition_reassignments(None).await?;
    if ongoing.is_empty() {
        println!("No partition reassignments found.");
        return Ok(());
    }
    println!("Current partition reassignments:");
    let ids = |v: &[i32]| v.iter().map(i32::to_string).collect::<Vec<_>>().join(",");
    for o in &ongoing {
        println!(
            "{}-{}: replicas: {}. adding: {}. removing: {}.",
            o.topic,
            o.partition,
            ids(&o.replicas),
            ids(&o.adding),
            ids(&o.removing)
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafkas_plan_json_reads_and_writes_back() {
        let raw = r#"{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[5,6],"log_dirs":["any","any"]},{"topic":"bar","partition":2,"replicas":[1]}]}"#;
        let plan: Plan = serde_json::from_str(raw).unwrap();
        assert_eq!(plan.partitions.len(), 2);
        assert_eq!(plan.partitions[1].log_dirs, None);
        let again: Plan = serde_json::from_str(&json_line(&plan)).unwrap();
        assert_eq!(again, plan);
    }
}
