//! `weir topics`: create, list, describe and delete topics (like `kafka-topics.sh`). Any
//! broker will do: it forwards metadata changes to the active controller.

use clap::{Args, Subcommand};

use weir::io::Io;

use super::key_values;
use super::output::{print_json, Output};

#[derive(Args)]
pub struct TopicsArgs {
    #[command(flatten)]
    server: super::ServerArgs,
    #[command(subcommand)]
    action: TopicAction,
}

#[derive(Subcommand)]
enum TopicAction {
    Create {
        name: String,
        #[arg(long, default_value_t = 1)]
        partitions: i32,
        #[arg(long, default_value_t = 1)]
        replication_factor: i16,
        /// Topic config, KEY=VALUE (repeatable).
        #[arg(long = "config", value_name = "KEY=VALUE")]
        configs: Vec<String>,
    },
    List,
    /// Partitions with leader, replicas, ISR and ELR, and topic configs (like
    /// `kafka-topics.sh --describe`); every topic without a name.
    Describe {
        name: Option<String>,
    },
    Delete {
        name: String,
    },
}

pub async fn run(io: &Io, args: TopicsArgs, output: Output) -> anyhow::Result<()> {
    let mut client = args.server.connect_any(io).await?;
    match args.action {
        TopicAction::Create {
            name,
            partitions,
            replication_factor,
            configs,
        } => {
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
        TopicAction::Describe { name } => {
            let names: Vec<&str> = name.iter().map(String::as_str).collect();
            let wanted = (!names.is_empty()).then_some(names.as_slice());
            let topics = client.describe_topics(wanted).await?;
            if output.json() {
                return print_json(&topics);
            }
            print!("{}", weir::client::render_topic_descriptions(&topics));
        }
        TopicAction::Delete { name } => {
            client.delete_topic(&name).await?;
            println!("deleted topic {name}");
        }
    }
    Ok(())
}
