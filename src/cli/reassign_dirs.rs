//! The `log_dirs` of `weir reassign`'s plan (kafka-reassign-partitions.sh's): a path per
//! replica ("any": the broker chooses). `--execute` sends AlterReplicaLogDirs to each broker
//! named with a path, retrying while the replica is not there yet (a reassignment is bringing
//! it), as Kafka's tool does; `--verify` reports each move with Kafka's lines.

use std::collections::BTreeMap;
use std::net::ToSocketAddrs as _;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use weir::client::Client;
use weir::io::Io;

/// One replica to place in a directory: (broker, path, topic, partition).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct DirMove {
    pub broker: i32,
    pub path: String,
    pub topic: String,
    pub partition: i32,
}

impl DirMove {
    /// Kafka's `TopicPartitionReplica`: `topic-partition-broker`.
    fn replica(&self) -> String {
        format!("{}-{}-{}", self.topic, self.partition, self.broker)
    }
}

/// The moves a plan asks for: every replica whose `log_dirs` entry is a path.
pub fn moves<'a>(
    entries: impl Iterator<Item = (&'a str, i32, &'a [i32], Option<&'a [String]>)>,
) -> Vec<DirMove> {
    let mut moves: Vec<DirMove> = entries
        .flat_map(|(topic, partition, replicas, dirs)| {
            replicas
                .iter()
                .zip(dirs.unwrap_or_default())
                .filter(|(_, d)| d.as_str() != "any")
                .map(move |(b, d)| DirMove {
                    broker: *b,
                    path: d.clone(),
                    topic: topic.to_string(),
                    partition,
                })
        })
        .collect();
    moves.sort();
    moves
}

/// A client of each broker the moves name.
async fn broker_clients(
    io: &Io,
    server: &super::ServerArgs,
    bootstrap: &mut Client,
    moves: &[DirMove],
) -> anyhow::Result<BTreeMap<i32, Client>> {
    let brokers = bootstrap.brokers().await?;
    let mut clients = BTreeMap::new();
    for m in moves {
        if clients.contains_key(&m.broker) {
            continue;
        }
        let b = brokers
            .iter()
            .find(|b| b.id == m.broker)
            .ok_or_else(|| anyhow::anyhow!("Unknown broker id {}", m.broker))?;
        let addr = format!("{}:{}", b.host, b.port)
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| anyhow::anyhow!("broker {}: cannot resolve {}", b.id, b.host))?;
        let client =
            Client::connect_secure(io, addr, &b.host, &server.security.security(io)?).await?;
        clients.insert(m.broker, client);
    }
    Ok(clients)
}

/// Starts the moves, retrying those whose replica is not on its broker yet until `timeout`.
pub async fn start(
    io: &Io,
    server: &super::ServerArgs,
    bootstrap: &mut Client,
    moves: &[DirMove],
    timeout: Duration,
) -> anyhow::Result<()> {
    if moves.is_empty() {
        return Ok(());
    }
    let mut clients = broker_clients(io, server, bootstrap, moves).await?;
    let started_at = io.clock.monotonic();
    let mut pending: Vec<DirMove> = moves.to_vec();
    loop {
        let mut started = Vec::new();
        let mut still = Vec::new();
        for (broker, client) in clients.iter_mut() {
            let mine: Vec<&DirMove> = pending.iter().filter(|m| m.broker == *broker).collect();
            if mine.is_empty() {
                continue;
            }
            let request: Vec<(String, String, i32)> = mine
                .iter()
                .map(|m| (m.path.clone(), m.topic.clone(), m.partition))
                .collect();
            let answers = client.alter_replica_log_dirs(&request).await?;
            for m in mine {
                let answer = answers
                    .iter()
                    .find(|(t, p, _)| *t == m.topic && *p == m.partition)
                    .map(|a| a.2);
                match answer {
                    Some(None) => started.push(m.clone()),
                    Some(Some(ResponseError::ReplicaNotAvailable)) | None => still.push(m.clone()),
                    Some(Some(e)) => anyhow::bail!(
                        "Error moving replica {} to log directory {}: {e:?}",
                        m.replica(),
                        m.path
                    ),
                }
            }
        }
        if !started.is_empty() {
            let names: Vec<String> = started.iter().map(DirMove::replica).collect();
            println!(
                "Successfully started log directory move{} for: {}",
                if started.len() == 1 { "" } else { "s" },
                names.join(",")
            );
        }
        pending = still;
        if pending.is_empty() {
            return Ok(());
        }
        if io.clock.monotonic().saturating_sub(started_at) >= timeout {
            let names: Vec<String> = pending.iter().map(DirMove::replica).collect();
            anyhow::bail!(
                "Timed out before log directory move{} could be started for: {}",
                if pending.len() == 1 { "" } else { "s" },
                names.join(",")
            );
        }
        // The replica arrives with the reassignment: ask again.
        io.clock.sleep(Duration::from_millis(100)).await;
    }
}

/// Each move's state as Kafka's `--verify` prints it; `true` when every move is over
/// (completed, or no longer under way).
pub async fn states(
    io: &Io,
    server: &super::ServerArgs,
    bootstrap: &mut Client,
    moves: &[DirMove],
) -> anyhow::Result<(bool, Vec<String>)> {
    let mut clients = broker_clients(io, server, bootstrap, moves).await?;
    let mut done = true;
    let mut lines = Vec::new();
    for (broker, client) in clients.iter_mut() {
        let dirs = client.describe_log_dirs(None).await?;
        for m in moves.iter().filter(|m| m.broker == *broker) {
            let find = |future: bool| {
                dirs.iter()
                    .find(|d| {
                        d.replicas.iter().any(|r| {
                            r.topic == m.topic
                                && r.partition == m.partition
                                && r.is_future == future
                        })
                    })
                    .map(|d| d.path.clone())
            };
            let partition = format!("{}-{}", m.topic, m.partition);
            let line = match (find(false), find(true)) {
                (None, _) => {
                    done = false;
                    format!(
                        "Partition {partition} is not found in any live log dir on broker {broker}. \
                         There is likely an offline log directory on the broker."
                    )
                }
                (Some(_), Some(future)) if future == m.path => {
                    done = false;
                    format!(
                        "Reassignment of replica {} is still in progress.",
                        m.replica()
                    )
                }
                (Some(_), Some(future)) => {
                    done = false;
                    format!(
                        "Partition {partition} on broker {broker} is being moved to log dir \
                         {future} instead of {}.",
                        m.path
                    )
                }
                (Some(current), None) if current == m.path => {
                    format!(
                        "Reassignment of replica {} completed successfully.",
                        m.replica()
                    )
                }
                (Some(current), None) => format!(
                    "Partition {partition} on broker {broker} is not being moved from log dir \
                     {current} to {}.",
                    m.path
                ),
            };
            lines.push(line);
        }
    }
    Ok((done, lines))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plans_paths_become_moves_and_any_is_left_out() {
        let dirs = ["any".to_string(), "/d2".to_string()];
        let found = moves(
            [
                ("foo", 0, &[5, 6][..], Some(&dirs[..])),
                ("bar", 1, &[1][..], None),
            ]
            .into_iter(),
        );
        assert_eq!(
            found,
            vec![DirMove {
                broker: 6,
                path: "/d2".into(),
                topic: "foo".into(),
                partition: 0
            }]
        );
        assert_eq!(found[0].replica(), "foo-0-6");
    }
}
