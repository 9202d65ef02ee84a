//! `weir produce` and `weir consume`: records from standard input to a partition's leader,
//! and a partition's records printed, one per line (offset, timestamp, key, value).

use std::time::Duration;

use clap::Args;

use weir::io::Io;
use weir::log::batch::{self, BatchBuilder};

use super::acks;

#[derive(Args)]
pub struct ProduceArgs {
    #[command(flatten)]
    server: super::ServerArgs,
    topic: String,
    #[arg(long, default_value_t = 0)]
    partition: i32,
    #[arg(long, default_value = "all")]
    acks: String,
}

#[derive(Args)]
pub struct ConsumeArgs {
    #[command(flatten)]
    server: super::ServerArgs,
    topic: String,
    #[arg(long, default_value_t = 0)]
    partition: i32,
    #[arg(long, default_value_t = 0)]
    offset: i64,
    /// Stop after this many records.
    #[arg(long, default_value_t = 100)]
    max: u64,
}

pub async fn produce(io: &Io, args: ProduceArgs) -> anyhow::Result<()> {
    let ProduceArgs {
        server,
        topic,
        partition,
        acks: a,
    } = args;
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

pub async fn consume(io: &Io, args: ConsumeArgs) -> anyhow::Result<()> {
    let ConsumeArgs {
        server,
        topic,
        partition,
        offset,
        max,
    } = args;
    // From the partition's leader, whichever broker is the bootstrap.
    let mut cluster = server.cluster_client(io).await?;
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
