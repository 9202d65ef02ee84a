//! `weir topics`: create, list, describe and delete topics (like `kafka-topics.sh`). Any
//! broker will do: it forwards metadata changes to the active controller. Kafka's spellings
//! work too: `--create|--list|--describe|--delete` for the actions, `--topic T` for the name.

use clap::{Args, Subcommand};

use weir::io::Io;

use super::output::{print_json, Output};
use super::{key_values, named};

#[derive(Args)]
pub struct TopicsArgs {
    #[command(flatten)]
    server: super::ServerArgs,
    #[command(subcommand)]
    action: TopicAction,
}

#[derive(Subcommand)]
enum TopicAction {
    #[command(long_flag = "create")]
    Create {
        name: Option<String>,
        #[arg(long = "topic", value_name = "TOPIC")]
        topic: Option<String>,
        #[arg(long, default_value_t = 1)]
        partitions: i32,
        #[arg(long, default_value_t = 1)]
        replication_factor: i16,
        /// Topic config, KEY=VALUE (repeatable).
        #[arg(long = "config", value_name = "KEY=VALUE")]
        configs: Vec<String>,
    },
    #[command(long_flag = "list")]
    List,
    /// Partitions with leader, replicas, ISR and ELR, and topic configs (like
    /// `kafka-topics.sh --describe`); every topic without a name.
    #[command(long_flag = "describe")]
    Describe {
        name: Option<String>,
        #[arg(long = "topic", value_name = "TOPIC", conflicts_with = "name")]
        topic: Option<String>,
    },
    #[command(long_flag = "delete")]
    Delete {
        name: Option<String>,
        #[arg(long = "topic", value_name = "TOPIC")]
        topic: Option<String>,
    },
}

pub async fn run(io: &Io, args: TopicsArgs, output: Output) -> anyhow::Result<()> {
    let mut client = args.server.connect_any(io).await?;
    match args.action {
        TopicAction::Create {
            name,
            topic,
            partitions,
            replication_factor,
            configs,
        } => {
            let name = named(name, topic, "--topic")?;
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
        TopicAction::List if output.json() => {
            let names: Vec<String> = client
                .metadata(None)
                .await?
                .into_iter()
                .map(|t| t.name)
                .collect();
            print_json(&names)?;
        }
        TopicAction::List => {
            for topic in client.metadata(None).await? {
                println!("{}\t{} partitions", topic.name, topic.partitions);
            }
        }
        TopicAction::Describe { name, topic } => {
            let name = name.or(topic);
            let names: Vec<&str> = name.iter().map(String::as_str).collect();
            let wanted = (!names.is_empty()).then_some(names.as_slice());
            let topics = client.describe_topics(wanted).await?;
            if output.json() {
                return print_json(&topics);
            }
            print!("{}", weir::client::render_topic_descriptions(&topics));
        }
        TopicAction::Delete { name, topic } => {
            let name = named(name, topic, "--topic")?;
            client.delete_topic(&name).await?;
            println!("deleted topic {name}");
        }
    }
    Ok(())
}
