//! `weir produce` and `weir consume`: records from standard input to a partition's leader,
//! and a partition's records printed, one per line (offset, timestamp, key, value).

use std::time::Duration;

use clap::Args;

use weir::io::Io;
use weir::log::batch::{self, BatchBuilder};

use super::acks;
use super::output::{print_json, Output};

#[derive(Args)]
pub struct ProduceArgs {
    #[command(flatten)]
    server: super::ServerArgs,
    /// The topic (also `--topic`, as kafka-console-producer.sh spells it).
    #[arg(value_name = "TOPIC")]
    name: Option<String>,
    #[arg(long = "topic", value_name = "TOPIC")]
    topic: Option<String>,
    #[arg(long, default_value_t = 0)]
    partition: i32,
    #[arg(long, default_value = "all")]
    acks: String,
}

#[derive(Args)]
pub struct ConsumeArgs {
    #[command(flatten)]
    server: super::ServerArgs,
    /// The topic (also `--topic`, as kafka-console-consumer.sh spells it).
    #[arg(value_name = "TOPIC")]
    name: Option<String>,
    #[arg(long = "topic", value_name = "TOPIC")]
    topic: Option<String>,
    #[arg(long, default_value_t = 0)]
    partition: i32,
    #[arg(long, default_value_t = 0)]
    offset: i64,
    /// Stop after this many records (also `--max-messages`).
    #[arg(long, alias = "max-messages", default_value_t = 100)]
    max: u64,
}

pub async fn produce(io: &Io, args: ProduceArgs) -> anyhow::Result<()> {
    let ProduceArgs {
        server,
        name,
        topic,
        partition,
        acks: a,
    } = args;
    let topic = super::named(name, topic, "--topic")?;
    let acks = acks(&a)?;
    // As Kafka's producer: Metadata from any broker (creating the topic if the broker
    // allows), then the partition's leader, following it if it moves.
    let mut cluster = server.cluster_client(io).await?;
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
    // As Kafka's producer, whose idempotence is on by default with acks=all: a producer
    // id, so a batch sent again after a lost answer or a leader move is written once.
    let (producer_id, epoch, sequence) = if acks == -1 {
        let (id, epoch) = cluster.any().await?.init_producer_id().await?;
        (id, epoch, 0)
    } else {
        (-1, -1, -1)
    };
    let batch = bytes::Bytes::from(builder.finish(producer_id, epoch, sequence));
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

/// One record as `--output json` prints it (key and value as UTF-8, lossy; null when absent).
#[derive(serde::Serialize)]
struct ConsumedRecord {
    offset: i64,
    timestamp: i64,
    key: Option<String>,
    value: Option<String>,
}

pub async fn consume(io: &Io, args: ConsumeArgs, output: Output) -> anyhow::Result<()> {
    let ConsumeArgs {
        server,
        name,
        topic,
        partition,
        offset,
        max,
    } = args;
    let topic = super::named(name, topic, "--topic")?;
    // From the partition's leader, whichever broker is the bootstrap.
    let mut cluster = server.cluster_client(io).await?;
    let mut next = offset;
    let mut printed = 0;
    // With --output json: every record, printed as one document at the end.
    let mut consumed = Vec::new();
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
                let note = format!(
                    "(compressed batch at offset {}: not decoded)",
                    header.base_offset
                );
                match output {
                    Output::Text => println!("{note}"),
                    Output::Json => eprintln!("{note}"),
                }
                next = header.next_offset();
                continue;
            };
            for r in records? {
                if r.offset < next || printed >= max {
                    continue;
                }
                let text = |b: Option<&[u8]>| b.map(|b| String::from_utf8_lossy(b).into_owned());
                let record = ConsumedRecord {
                    offset: r.offset,
                    timestamp: r.timestamp,
                    key: text(r.key),
                    value: text(r.value),
                };
                match output {
                    Output::Json => consumed.push(record),
                    Output::Text => {
                        let null = |v: Option<String>| v.unwrap_or_else(|| "null".into());
                        println!(
                            "{}\t{}\t{}\t{}",
                            record.offset,
                            record.timestamp,
                            null(record.key),
                            null(record.value)
                        );
                    }
                }
                printed += 1;
            }
            next = header.next_offset();
        }
    }
    if output.json() {
        print_json(&consumed)?;
    }
    Ok(())
}
