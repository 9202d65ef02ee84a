//! `weir groups`: list, describe and delete consumer groups and reset their offsets (like
//! `kafka-consumer-groups.sh`). Group requests go to the group's coordinator, offsets to each
//! partition's leader (`ClusterClient`), whichever broker the bootstrap is. Kafka's spellings
//! work too: `--list|--describe|--delete|--reset-offsets` for the actions, `--group G` for
//! the name, `--to-earliest|--to-latest|--to-offset N` and `--execute` for a reset (Weir's
//! reset always executes: there is no `--dry-run`).

use std::collections::BTreeMap;

use clap::{Args, Subcommand};

use weir::client::ClusterClient;
use weir::io::Io;

use super::named;
use super::output::{print_json, Output};

#[derive(Args)]
pub struct GroupsArgs {
    #[command(flatten)]
    server: super::ServerArgs,
    #[command(subcommand)]
    action: GroupAction,
}

#[derive(Subcommand)]
enum GroupAction {
    /// One line per group: group<TAB>state<TAB>protocol type<TAB>type (classic or consumer).
    #[command(long_flag = "list")]
    List,
    /// As kafka-consumer-groups.sh --describe: each partition's committed offset, log end, lag
    /// and the member holding it (default, --offsets); or the members (--members); or the
    /// group's state, coordinator and assignor (--state).
    #[command(long_flag = "describe")]
    Describe {
        #[arg(value_name = "GROUP")]
        name: Option<String>,
        #[arg(long = "group", value_name = "GROUP")]
        group: Option<String>,
        #[arg(long, conflicts_with_all = ["state", "offsets"])]
        members: bool,
        #[arg(long, conflicts_with = "offsets")]
        state: bool,
        /// The default view.
        #[arg(long)]
        offsets: bool,
        /// With --members: each member's assignment (and epochs, for a consumer-protocol
        /// group); with --state: the group and assignment epochs.
        #[arg(long)]
        verbose: bool,
    },
    /// Delete a group with no members (classic or consumer), with its committed offsets.
    #[command(long_flag = "delete")]
    Delete {
        #[arg(value_name = "GROUP")]
        name: Option<String>,
        #[arg(long = "group", value_name = "GROUP")]
        group: Option<String>,
    },
    /// Set the committed offsets of a group for one topic; refused while it has members.
    #[command(long_flag = "reset-offsets")]
    ResetOffsets {
        #[arg(value_name = "GROUP")]
        name: Option<String>,
        #[arg(long = "group", value_name = "GROUP")]
        group: Option<String>,
        #[arg(long)]
        topic: String,
        /// earliest, latest, or an offset (clamped to the partition's range).
        #[arg(long, required_unless_present_any = ["to_earliest", "to_latest", "to_offset"])]
        to: Option<String>,
        /// As `--to earliest` (kafka-consumer-groups.sh's spelling).
        #[arg(long = "to-earliest", conflicts_with_all = ["to", "to_latest", "to_offset"])]
        to_earliest: bool,
        /// As `--to latest`.
        #[arg(long = "to-latest", conflicts_with_all = ["to", "to_offset"])]
        to_latest: bool,
        /// As `--to N`.
        #[arg(long = "to-offset", conflicts_with = "to")]
        to_offset: Option<i64>,
        /// Accepted for kafka-consumer-groups.sh's habit: Weir's reset always executes.
        #[arg(long)]
        execute: bool,
    },
}

pub async fn run(io: &Io, args: GroupsArgs, output: Output) -> anyhow::Result<()> {
    let mut cluster = args.server.cluster_client(io).await?;
    if let (GroupAction::List, true) = (&args.action, output.json()) {
        return print_json(&cluster.list_groups().await?);
    }
    groups(&mut cluster, args.action, output).await
}

async fn groups(
    cluster: &mut ClusterClient,
    action: GroupAction,
    output: Output,
) -> anyhow::Result<()> {
    match action {
        GroupAction::List => {
            for g in cluster.list_groups().await? {
                println!(
                    "{}\t{}\t{}\t{}",
                    g.group_id, g.state, g.protocol_type, g.group_type
                );
            }
        }
        GroupAction::Describe {
            name,
            group,
            members,
            state,
            offsets: _,
            verbose,
        } => {
            let group = named(name, group, "--group")?;
            let view = describe(cluster, &group).await?;
            if output.json() {
                return print_json(&view);
            }
            let text = if state {
                view.render_state(verbose)
            } else if members {
                view.render_members(verbose)
            } else {
                view.render_offsets()
            };
            print!("{text}");
        }
        GroupAction::Delete { name, group } => {
            let group = named(name, group, "--group")?;
            cluster
                .at_coordinator(&group, |c| {
                    let group = group.clone();
                    Box::pin(async move { c.delete_group(&group).await })
                })
                .await?;
            println!("deleted group {group}");
        }
        GroupAction::ResetOffsets {
            name,
            group,
            topic,
            to,
            to_earliest,
            to_latest,
            to_offset,
            execute: _,
        } => {
            let group = named(name, group, "--group")?;
            let to = match (to, to_offset) {
                (Some(to), _) => to,
                (None, Some(n)) => n.to_string(),
                (None, None) if to_earliest => "earliest".to_string(),
                (None, None) if to_latest => "latest".to_string(),
                (None, None) => {
                    anyhow::bail!("--to (or --to-earliest|--to-latest|--to-offset) is required")
                }
            };
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

/// A partition's committed offset (if any) and the member holding it (if any).
type Holding<'a> = (Option<i64>, Option<&'a MemberView>);

/// One member, whichever protocol the group speaks.
#[derive(Debug, serde::Serialize)]
struct MemberView {
    consumer_id: String,
    instance_id: Option<String>,
    host: String,
    client_id: String,
    /// A consumer-protocol member's epoch (KIP-848).
    member_epoch: Option<i32>,
    assignment: Vec<(String, Vec<i32>)>,
}

/// One partition of `--describe --offsets`.
#[derive(Debug, serde::Serialize)]
struct OffsetRow {
    topic: String,
    partition: i32,
    /// `None`: nothing committed.
    current_offset: Option<i64>,
    log_end_offset: i64,
    lag: Option<i64>,
    /// The member holding the partition, if any.
    consumer_id: Option<String>,
    host: Option<String>,
    client_id: Option<String>,
}

/// A group as `kafka-consumer-groups.sh --describe` shows it.
#[derive(Debug, serde::Serialize)]
struct GroupView {
    group: String,
    /// `classic` or `consumer` (KIP-848).
    group_type: &'static str,
    state: String,
    coordinator: Option<String>,
    assignment_strategy: String,
    group_epoch: Option<i32>,
    assignment_epoch: Option<i32>,
    members: Vec<MemberView>,
    offsets: Vec<OffsetRow>,
}

async fn describe(cluster: &mut ClusterClient, group: &str) -> anyhow::Result<GroupView> {
    let (consumer, classic, committed) = describe_at_coordinator(cluster, group).await?;
    let (group_type, state, strategy, epochs, members) = match (consumer, classic) {
        (Some(d), _) => (
            "consumer",
            d.state,
            d.assignor,
            (Some(d.group_epoch), Some(d.assignment_epoch)),
            d.members
                .into_iter()
                .map(|m| MemberView {
                    consumer_id: m.member_id,
                    instance_id: m.instance_id,
                    host: m.client_host,
                    client_id: m.client_id,
                    member_epoch: Some(m.member_epoch),
                    assignment: m.assignment,
                })
                .collect::<Vec<_>>(),
        ),
        (None, Some(d)) => (
            "classic",
            d.state,
            d.protocol,
            (None, None),
            d.members
                .into_iter()
                .map(|m| MemberView {
                    consumer_id: m.member_id,
                    instance_id: m.instance_id,
                    host: m.client_host,
                    client_id: m.client_id,
                    member_epoch: None,
                    assignment: m.assignment,
                })
                .collect(),
        ),
        (None, None) => anyhow::bail!("Consumer group '{group}' does not exist."),
    };
    // Every committed partition and every assigned one, with who holds it.
    let mut rows: BTreeMap<(String, i32), Holding> = committed
        .into_iter()
        .map(|(t, p, o)| ((t, p), ((o >= 0).then_some(o), None)))
        .collect();
    for m in &members {
        for (topic, partitions) in &m.assignment {
            for p in partitions {
                rows.entry((topic.clone(), *p)).or_insert((None, None)).1 = Some(m);
            }
        }
    }
    let mut offsets = Vec::new();
    for ((topic, partition), (current, holder)) in rows {
        let (end, _) = cluster.list_offset(&topic, partition, -1).await?;
        offsets.push(OffsetRow {
            lag: current.map(|c| (end - c).max(0)),
            current_offset: current,
            log_end_offset: end,
            consumer_id: holder.map(|m| m.consumer_id.clone()),
            host: holder.map(|m| m.host.clone()),
            client_id: holder.map(|m| m.client_id.clone()),
            topic,
            partition,
        });
    }
    let coordinator = cluster
        .any()
        .await?
        .coordinator(group)
        .await
        .ok()
        .map(|c| format!("{}:{} ({})", c.host, c.port, c.id));
    Ok(GroupView {
        group: group.to_string(),
        group_type,
        state,
        coordinator,
        assignment_strategy: strategy,
        group_epoch: epochs.0,
        assignment_epoch: epochs.1,
        members,
        offsets,
    })
}

fn or_dash<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_string(), |v| v.to_string())
}

fn assignment_text(assignment: &[(String, Vec<i32>)]) -> String {
    if assignment.is_empty() {
        return "-".to_string();
    }
    let parts: Vec<String> = assignment
        .iter()
        .map(|(t, ps)| {
            let ps: Vec<String> = ps.iter().map(i32::to_string).collect();
            format!("{t}:{}", ps.join(","))
        })
        .collect();
    parts.join(" ")
}

impl GroupView {
    /// Kafka prints this line before the offsets of a group nobody consumes in.
    fn no_members_note(&self) -> String {
        if self.members.is_empty() {
            format!("\nConsumer group '{}' has no active members.\n", self.group)
        } else {
            String::new()
        }
    }

    fn render_offsets(&self) -> String {
        let rows: Vec<Vec<String>> = self
            .offsets
            .iter()
            .map(|o| {
                vec![
                    self.group.clone(),
                    o.topic.clone(),
                    o.partition.to_string(),
                    or_dash(o.current_offset),
                    o.log_end_offset.to_string(),
                    or_dash(o.lag),
                    or_dash(o.consumer_id.clone()),
                    or_dash(o.host.clone()),
                    or_dash(o.client_id.clone()),
                ]
            })
            .collect();
        let headers = [
            "GROUP",
            "TOPIC",
            "PARTITION",
            "CURRENT-OFFSET",
            "LOG-END-OFFSET",
            "LAG",
            "CONSUMER-ID",
            "HOST",
            "CLIENT-ID",
        ];
        format!("{}\n{}", self.no_members_note(), table(&headers, &rows))
    }

    fn render_members(&self, verbose: bool) -> String {
        let consumer = self.group_type == "consumer";
        let mut headers = vec!["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"];
        if verbose {
            if consumer {
                headers.push("CURRENT-EPOCH");
            }
            headers.push("ASSIGNMENT");
        }
        let rows: Vec<Vec<String>> = self
            .members
            .iter()
            .map(|m| {
                let count: usize = m.assignment.iter().map(|(_, ps)| ps.len()).sum();
                let mut row = vec![
                    self.group.clone(),
                    m.consumer_id.clone(),
                    m.host.clone(),
                    m.client_id.clone(),
                    count.to_string(),
                ];
                if verbose {
                    if consumer {
                        row.push(or_dash(m.member_epoch));
                    }
                    row.push(assignment_text(&m.assignment));
                }
                row
            })
            .collect();
        format!("{}\n{}", self.no_members_note(), table(&headers, &rows))
    }

    fn render_state(&self, verbose: bool) -> String {
        let mut headers = vec!["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE"];
        let mut row = vec![
            self.group.clone(),
            or_dash(self.coordinator.clone()),
            if self.assignment_strategy.is_empty() {
                "-".to_string()
            } else {
                self.assignment_strategy.clone()
            },
            self.state.clone(),
        ];
        if verbose && self.group_type == "consumer" {
            headers.extend(["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH"]);
            row.push(or_dash(self.group_epoch));
            row.push(or_dash(self.assignment_epoch));
        }
        headers.push("#MEMBERS");
        row.push(self.members.len().to_string());
        format!("\n{}", table(&headers, &[row]))
    }
}

/// Columns padded to their widest cell, one space apart, as Kafka's tools print them.
fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        format!("{}\n", padded.join(" ").trim_end())
    };
    let mut out = line(headers.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_pads_every_column_to_its_widest_cell() {
        let t = table(&["GROUP", "LAG"], &[vec!["g".into(), "12345".into()]]);
        assert_eq!(t, "GROUP LAG\ng     12345\n");
    }
}
