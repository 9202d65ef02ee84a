//! `weir get-offsets`: each partition's offset at a time, as `kafka-get-offsets.sh` prints it
//! (`topic:partition:offset`), from ListOffsets at each partition's leader.

use clap::Args;

use weir::io::Io;

use super::output::{print_json, Output};

#[derive(Args)]
pub struct GetOffsetsArgs {
    #[command(flatten)]
    server: super::ServerArgs,
    /// A regular expression of the topics to ask for (whole name); every topic without it.
    #[arg(long)]
    topic: Option<String>,
    /// Comma-separated partition ids (every partition without it).
    #[arg(long, value_delimiter = ',')]
    partitions: Vec<i32>,
    /// -1 or latest, -2 or earliest, -3 or max-timestamp, or a timestamp in ms: the first
    /// offset whose timestamp is at least it.
    #[arg(long, default_value = "latest", allow_hyphen_values = true)]
    time: String,
    /// Leave internal topics (__consumer_offsets) out.
    #[arg(long = "exclude-internal-topics")]
    exclude_internal_topics: bool,
}

#[derive(Debug, serde::Serialize)]
struct PartitionOffset {
    topic: String,
    partition: i32,
    /// -1 when no record is at or after the time asked.
    offset: i64,
}

/// `--time` as ListOffsets' timestamp.
fn parse_time(time: &str) -> anyhow::Result<i64> {
    Ok(match time {
        "latest" => -1,
        "earliest" => -2,
        "max-timestamp" => -3,
        t => match t.parse::<i64>() {
            Ok(n) if n >= -3 => n,
            _ => anyhow::bail!(
                "--time must be latest (-1), earliest (-2), max-timestamp (-3) or a timestamp \
                 in ms, not '{t}'"
            ),
        },
    })
}

pub async fn run(io: &Io, args: GetOffsetsArgs, output: Output) -> anyhow::Result<()> {
    let time = parse_time(&args.time)?;
    let pattern = match &args.topic {
        Some(p) => Some(
            regex::Regex::new(&format!("^(?:{p})$"))
                .map_err(|e| anyhow::anyhow!("--topic is not a regular expression: {e}"))?,
        ),
        None => None,
    };
    let mut cluster = args.server.cluster_client(io).await?;
    let topics = cluster.any().await?.describe_topics(None).await?;
    let mut out = Vec::new();
    for t in &topics {
        if args.exclude_internal_topics && t.internal {
            continue;
        }
        if pattern.as_ref().is_some_and(|p| !p.is_match(&t.name)) {
            continue;
        }
        for p in &t.partitions {
            if !args.partitions.is_empty() && !args.partitions.contains(&p.partition) {
                continue;
            }
            let (offset, _) = cluster.list_offset(&t.name, p.partition, time).await?;
            out.push(PartitionOffset {
                topic: t.name.clone(),
                partition: p.partition,
                offset,
            });
        }
    }
    if output.json() {
        return print_json(&out);
    }
    for o in &out {
        println!("{}:{}:{}", o.topic, o.partition, o.offset);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::parse_time;

    #[test]
    fn times_as_kafka_spells_them() {
        assert_eq!(parse_time("latest").unwrap(), -1);
        assert_eq!(parse_time("-2").unwrap(), -2);
        assert_eq!(parse_time("max-timestamp").unwrap(), -3);
        assert_eq!(parse_time("1700000000000").unwrap(), 1_700_000_000_000);
        assert!(parse_time("-7").is_err());
        assert!(parse_time("yesterday").is_err());
    }
}
