//! `weir groups`: list, describe and delete consumer groups and reset their offsets (like
//! `kafka-consumer-groups.sh`). Group requests go to the group's coordinator, offsets to each
//! partition's leader (`ClusterClient`), whichever broker the bootstrap is.

use clap::{Args, Subcommand};

use weir::client::ClusterClient;
use weir::io::Io;

use super::bootstrap_addrs;
use super::output::{print_json, Output};

#[derive(Args)]
pub struct GroupsArgs {
    #[arg(long, alias = "bootstrap-server", default_value = "127.0.0.1:9092")]
    bootstrap: String,
    #[command(subcommand)]
    action: GroupAction,
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

pub async fn run(io: &Io, args: GroupsArgs, output: Output) -> anyhow::Result<()> {
    let mut cluster = ClusterClient::connect(io, bootstrap_addrs(&args.bootstrap)?).await?;
    if let (GroupAction::List, true) = (&args.action, output.json()) {
        return print_json(&cluster.list_groups().await?);
    }
    groups(&mut cluster, args.action).await
}

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
