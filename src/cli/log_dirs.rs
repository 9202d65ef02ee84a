//! `weir log-dirs --describe`: Kafka's `kafka-log-dirs.sh`, over DescribeLogDirs at each
//! broker, with its output: two progress lines, then one JSON document
//! (`{"version":1,"brokers":[{"broker":1,"logDirs":[{"logDir":…,"error":null,"partitions":[…]}]}]}`)
//! that scripts parse. `--output json` prints the document alone.

use std::net::ToSocketAddrs;

use clap::Args;
use serde::Serialize;

use weir::client::Client;
use weir::io::Io;

use super::output::Output;

#[derive(Args)]
pub struct LogDirsArgs {
    #[command(flatten)]
    server: super::ServerArgs,
    /// Describe the log directories (the only action, as in kafka-log-dirs.sh).
    #[arg(long)]
    describe: bool,
    /// Comma-separated broker ids to ask (every broker without it).
    #[arg(long = "broker-list", value_delimiter = ',')]
    broker_list: Vec<i32>,
    /// Comma-separated topics to show (every topic without it).
    #[arg(long = "topic-list", value_delimiter = ',')]
    topic_list: Vec<String>,
}

#[derive(Serialize)]
struct Report {
    version: i32,
    brokers: Vec<BrokerDirs>,
}

#[derive(Serialize)]
struct BrokerDirs {
    broker: i32,
    #[serde(rename = "logDirs")]
    log_dirs: Vec<Dir>,
}

#[derive(Serialize)]
struct Dir {
    #[serde(rename = "logDir")]
    log_dir: String,
    /// The exception class Kafka names for the directory's error, or null.
    error: Option<String>,
    partitions: Vec<Replica>,
}

#[derive(Serialize)]
struct Replica {
    /// `topic-partition`.
    partition: String,
    size: i64,
    #[serde(rename = "offsetLag")]
    offset_lag: i64,
    #[serde(rename = "isFuture")]
    is_future: bool,
}

/// The exception class a Java client shows for `e` (what kafka-log-dirs.sh prints).
fn exception_name(e: kafka_protocol::error::ResponseError) -> String {
    use kafka_protocol::error::ResponseError::*;
    let class = match e {
        KafkaStorageError => "KafkaStorageException",
        LogDirNotFound => "LogDirNotFoundException",
        ClusterAuthorizationFailed => "ClusterAuthorizationException",
        _ => return format!("{e:?}"),
    };
    format!("org.apache.kafka.common.errors.{class}")
}

pub async fn run(io: &Io, args: LogDirsArgs, output: Output) -> anyhow::Result<()> {
    if !args.describe {
        anyhow::bail!("Command must include exactly one action: --describe");
    }
    let mut bootstrap = args.server.connect_any(io).await?;
    let mut brokers = bootstrap.brokers().await?;
    if !args.broker_list.is_empty() {
        brokers.retain(|b| args.broker_list.contains(&b.id));
        let missing: Vec<String> = (args.broker_list.iter())
            .filter(|id| !brokers.iter().any(|b| b.id == **id))
            .map(|id| id.to_string())
            .collect();
        if !missing.is_empty() {
            anyhow::bail!(
                "ERROR: The given brokers do not exist from --broker-list: {}",
                missing.join(",")
            );
        }
    }
    let text = !output.json();
    if text {
        println!("Querying brokers for log directories information");
    }
    let mut report = Report {
        version: 1,
        brokers: Vec::new(),
    };
    for b in &brokers {
        let addr = format!("{}:{}", b.host, b.port)
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| anyhow::anyhow!("broker {}: cannot resolve {}", b.id, b.host))?;
        let mut client =
            Client::connect_secure(io, addr, &b.host, &args.server.security.security(io)?).await?;
        let dirs = client.describe_log_dirs(None).await?;
        let log_dirs = dirs
            .into_iter()
            .map(|d| Dir {
                log_dir: d.path,
                error: d.error.map(exception_name),
                partitions: d
                    .replicas
                    .into_iter()
                    .filter(|r| args.topic_list.is_empty() || args.topic_list.contains(&r.topic))
                    .map(|r| Replica {
                        partition: format!("{}-{}", r.topic, r.partition),
                        size: r.size,
                        offset_lag: r.offset_lag,
                        is_future: r.is_future,
                    })
                    .collect(),
            })
            .collect();
        report.brokers.push(BrokerDirs {
            broker: b.id,
            log_dirs,
        });
    }
    if text {
        let ids: Vec<String> = brokers.iter().map(|b| b.id.to_string()).collect();
        println!(
            "Received log directory information from brokers {}",
            ids.join(",")
        );
    }
    println!("{}", serde_json::to_string(&report)?);
    Ok(())
}
