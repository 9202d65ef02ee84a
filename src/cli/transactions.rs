//! `weir transactions`: list, describe, describe-producers, find-hanging and abort, as
//! `kafka-transactions.sh` offers them (KIP-664), with its column names. Text prints a tab
//! separated table with a header; `--output json` one document.

use clap::{Args, Subcommand};

use weir::client::{HangingTransaction, ProducerDescription};
use weir::io::Io;

use super::output::{print_json, Output};

#[derive(Args)]
pub struct TransactionsArgs {
    #[command(flatten)]
    server: super::ServerArgs,
    #[command(subcommand)]
    action: TransactionsAction,
}

#[derive(Subcommand)]
enum TransactionsAction {
    /// Every transactional id of every coordinator, with its producer id and state.
    List {
        /// Only transactions running longer than this (ms).
        #[arg(long = "duration-filter")]
        duration_filter: Option<i64>,
        /// Only these states (Ongoing, PrepareCommit, CompleteAbort...), comma-separated.
        #[arg(long = "state-filter", value_delimiter = ',')]
        state_filter: Vec<String>,
        /// Only these producer ids, comma-separated.
        #[arg(long = "producer-id-filter", value_delimiter = ',')]
        producer_id_filter: Vec<i64>,
    },
    /// One transactional id's state at its coordinator.
    Describe {
        #[arg(long = "transactional-id")]
        transactional_id: String,
    },
    /// The producers a partition's replica remembers (its leader's, or --broker-id's).
    DescribeProducers {
        #[arg(long)]
        topic: String,
        #[arg(long)]
        partition: i32,
        #[arg(long = "broker-id")]
        broker_id: Option<i32>,
    },
    /// Transactions open on a broker's partitions for longer than --max-transaction-timeout
    /// that their coordinator does not hold open there.
    FindHanging {
        #[arg(long = "broker-id")]
        broker_id: i32,
        /// Minutes (Kafka's default: 15, transaction.max.timeout.ms).
        #[arg(long = "max-transaction-timeout", default_value_t = 15)]
        max_transaction_timeout: i64,
    },
    /// Aborts the open transaction starting at --start-offset of a partition (an ABORT marker
    /// written by its leader, as Kafka's tool does).
    Abort {
        #[arg(long)]
        topic: String,
        #[arg(long)]
        partition: i32,
        #[arg(long = "start-offset")]
        start_offset: i64,
    },
}

pub async fn run(io: &Io, args: TransactionsArgs, output: Output) -> anyhow::Result<()> {
    let mut cluster = args.server.cluster_client(io).await?;
    match args.action {
        TransactionsAction::List {
            duration_filter,
            state_filter,
            producer_id_filter,
        } => {
            let listed = cluster
                .list_transactions(
                    &state_filter,
                    &producer_id_filter,
                    duration_filter.unwrap_or(-1),
                )
                .await?;
            if output.json() {
                return print_json(&listed);
            }
            println!("TransactionalId\tCoordinator\tProducerId\tTransactionState");
            for t in listed {
                println!(
                    "{}\t{}\t{}\t{}",
                    t.transactional_id, t.coordinator, t.producer_id, t.state
                );
            }
        }
        TransactionsAction::Describe { transactional_id } => {
            let d = cluster.describe_transaction(&transactional_id).await?;
            if output.json() {
                return print_json(&d);
            }
            let (start, duration) = if d.start_ms < 0 {
                ("None".to_string(), "None".to_string())
            } else {
                let now = io.clock.wall_ms();
                (d.start_ms.to_string(), (now - d.start_ms).to_string())
            };
            let partitions: Vec<String> = d
                .partitions
                .iter()
                .map(|(t, p)| format!("{t}-{p}"))
                .collect();
            println!(
                "CoordinatorId\tTransactionalId\tProducerId\tProducerEpoch\tTransactionState\t\
                 TransactionTimeoutMs\tCurrentTransactionStartTimeMs\tTransactionDurationMs\t\
                 TopicPartitions"
            );
            println!(
                "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
                d.coordinator,
                d.transactional_id,
                d.producer_id,
                d.producer_epoch,
                d.state,
                d.timeout_ms,
                start,
                duration,
                partitions.join(",")
            );
        }
        TransactionsAction::DescribeProducers {
            topic,
            partition,
            broker_id,
        } => {
            let producers = cluster
                .describe_producers(&topic, partition, broker_id)
                .await?;
            if output.json() {
                return print_json(&producers);
            }
            println!(
                "ProducerId\tProducerEpoch\tLatestCoordinatorEpoch\tLastSequence\t\
                 LastTimestamp\tCurrentTransactionStartOffset"
            );
            for p in producers {
                println!(
                    "{}\t{}\t{}\t{}\t{}\t{}",
                    p.producer_id,
                    p.producer_epoch,
                    p.coordinator_epoch,
                    p.last_sequence,
                    p.last_timestamp,
                    none_if_negative(p.current_txn_start_offset)
                );
            }
        }
        TransactionsAction::FindHanging {
            broker_id,
            max_transaction_timeout,
        } => {
            let now = io.clock.wall_ms();
            let max_ms = max_transaction_timeout.saturating_mul(60_000);
            let hanging = cluster.find_hanging(broker_id, max_ms, now).await?;
            if output.json() {
                return print_json(&hanging);
            }
            print_hanging(&hanging, now);
        }
        TransactionsAction::Abort {
            topic,
            partition,
            start_offset,
        } => {
            let p: ProducerDescription = cluster
                .abort_transaction(&topic, partition, start_offset)
                .await?;
            println!(
                "Aborted the transaction of producer {} (epoch {}) starting at offset {} of \
                 {topic}-{partition}",
                p.producer_id, p.producer_epoch, start_offset
            );
        }
    }
    Ok(())
}

fn none_if_negative(v: i64) -> String {
    if v < 0 {
        "None".to_string()
    } else {
        v.to_string()
    }
}

fn print_hanging(hanging: &[HangingTransaction], now: i64) {
    println!(
        "Topic\tPartition\tProducerId\tProducerEpoch\tCoordinatorEpoch\tStartOffset\t\
         LastTimestamp\tDuration(min)"
    );
    for h in hanging {
        let p = &h.producer;
        println!(
            "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
            h.topic,
            h.partition,
            p.producer_id,
            p.producer_epoch,
            p.coordinator_epoch,
            p.current_txn_start_offset,
            p.last_timestamp,
            (now - p.last_timestamp) / 60_000
        );
    }
}
