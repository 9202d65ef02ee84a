//! The `weir` command line: one file a command, each with its clap arguments and its `run`.
//! Options are spelled as Kafka's tools spell them where that helps habits
//! (`--bootstrap-server`, `--entity-type`, `--describe`); every command talks to a cluster
//! through `weir::client`, as a Kafka admin client would.

use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use weir::client::{Client, ClientSecurity, ClusterClient, Security};
use weir::config::parse_properties;
use weir::io::{read_file, Io};

mod acls;
mod add_scram;
mod bench;
mod cluster;
mod configs;
mod features;
mod get_offsets;
mod groups;
mod leader_election;
mod log_dirs;
mod metadata_quorum;
mod output;
mod progress;
mod reassign;
mod reassign_dirs;
mod records;
mod serve;
mod topics;
mod transactions;

#[derive(Parser)]
#[command(
    name = "weir",
    version,
    about = "A Kafka-compatible broker built for deterministic simulation"
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
    /// How read commands print: text as Kafka's tools do, or one JSON document for scripts.
    #[arg(long, global = true, value_enum, default_value_t = output::Output::Text)]
    output: output::Output,
}

#[derive(Subcommand)]
enum Command {
    /// Run a broker. Without --config: one node on 127.0.0.1:9092 with data in ./weir-data.
    Serve(serve::ServeArgs),
    /// Format a node's data directory for a cluster (like `kafka-storage.sh format`): writes
    /// meta.properties with the cluster id and the config's node.id into its log.dirs.
    Format(serve::FormatArgs),
    /// A local cluster on loopback: `up` starts one, `status` shows a cluster's quorum.
    Cluster {
        #[command(subcommand)]
        action: cluster::ClusterAction,
    },
    /// Create, list, describe or delete topics.
    Topics(topics::TopicsArgs),
    /// Produce each line of standard input as one record (key before the first tab, if any).
    /// A missing topic is created when the broker allows auto-creation.
    Produce(records::ProduceArgs),
    /// Print records of a partition from an offset.
    Consume(records::ConsumeArgs),
    /// List, describe or delete consumer groups, or reset their offsets (like
    /// kafka-consumer-groups.sh).
    Groups(groups::GroupsArgs),
    /// Elect partition leaders, preferred or unclean (like kafka-leader-election.sh).
    LeaderElection(leader_election::LeaderElectionArgs),
    /// List, add or remove ACLs (like kafka-acls.sh).
    Acls(acls::AclsArgs),
    /// Describe or alter the configs of topics and brokers (like kafka-configs.sh).
    Configs(configs::ConfigsArgs),
    /// The metadata quorum's status or replication (like kafka-metadata-quorum.sh).
    MetadataQuorum(metadata_quorum::MetadataQuorumArgs),
    /// Move partitions between brokers: generate, execute, verify, cancel or list
    /// reassignments (like kafka-reassign-partitions.sh).
    Reassign(reassign::ReassignArgs),
    /// Each partition's offset at a time: latest, earliest, max-timestamp or a timestamp
    /// (like kafka-get-offsets.sh).
    GetOffsets(get_offsets::GetOffsetsArgs),
    /// List, describe, find hanging or abort transactions (like kafka-transactions.sh).
    Transactions(transactions::TransactionsArgs),
    /// Each broker's log directories and the replicas in them (like kafka-log-dirs.sh).
    LogDirs(log_dirs::LogDirsArgs),
    /// Describe, upgrade or downgrade finalized features (like kafka-features.sh).
    Features(features::FeaturesArgs),
    /// Load generators that print throughput and latency.
    Bench {
        #[command(subcommand)]
        which: bench::BenchKind,
    },
}

pub async fn run(cli: Cli) -> anyhow::Result<()> {
    run_command(cli).await.map_err(hint)
}

/// A broker that closes the connection after ApiVersions is, most often, a SASL listener
/// refusing a request before authentication: say so, as the bare EOF does not.
fn hint(e: anyhow::Error) -> anyhow::Error {
    let eof = e.chain().any(|cause| {
        matches!(
            cause.downcast_ref::<weir::client::ClientError>(),
            Some(weir::client::ClientError::Io(io)) if io.kind() == std::io::ErrorKind::UnexpectedEof
        )
    });
    if eof {
        e.context(
            "the broker closed the connection (a SASL_PLAINTEXT or SASL_SSL listener closes it \
             before authentication: give --command-config with security.protocol, \
             sasl.mechanism and sasl.jaas.config)",
        )
    } else {
        e
    }
}

async fn run_command(cli: Cli) -> anyhow::Result<()> {
    let io = Io::os();
    match cli.command {
        Command::Serve(args) => serve::serve(io, args).await,
        Command::Format(args) => serve::format(io, args).await,
        Command::Cluster { action } => cluster::run(io, action, cli.output).await,
        Command::Topics(args) => topics::run(&io, args, cli.output).await,
        Command::Produce(args) => records::produce(&io, args).await,
        Command::Consume(args) => records::consume(&io, args, cli.output).await,
        Command::Groups(args) => groups::run(&io, args, cli.output).await,
        Command::LeaderElection(args) => leader_election::run(&io, args).await,
        Command::Acls(args) => acls::run(&io, args, cli.output).await,
        Command::Configs(args) => configs::run(&io, args, cli.output).await,
        Command::MetadataQuorum(args) => metadata_quorum::run(&io, args, cli.output).await,
        Command::Reassign(args) => reassign::run(&io, args, cli.output).await,
        Command::GetOffsets(args) => get_offsets::run(&io, args, cli.output).await,
        Command::Transactions(args) => transactions::run(&io, args, cli.output).await,
        Command::LogDirs(args) => log_dirs::run(&io, args, cli.output).await,
        Command::Features(args) => features::run(&io, args, cli.output).await,
        Command::Bench { which } => bench::run(&io, which).await,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_command_line_is_well_formed() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }

    #[test]
    fn kafkas_spellings_parse() {
        use clap::Parser;
        for line in [
            "weir topics --create --topic t --partitions 3 --replication-factor 1 --bootstrap-server h:1",
            "weir topics --bootstrap-server h:1 --describe --topic t",
            "weir topics --list --bootstrap-server h:1",
            "weir topics --delete --topic t",
            "weir groups --list",
            "weir groups --describe --group g --members",
            "weir groups --delete --group g",
            "weir groups --reset-offsets --group g --topic t --to-earliest --execute",
            "weir groups --reset-offsets --group g --topic t --to-offset 5 --execute",
            "weir consume --topic t --max-messages 3 --bootstrap-server h:1",
            "weir produce --topic t",
            "weir configs --describe --topic t",
            "weir configs --describe --broker 1",
            "weir configs --alter --broker-defaults --add-config a=1",
            "weir configs --describe --group g",
            "weir bench produce --bootstrap-server h:1 --num-records 10",
            "weir bench consume --bootstrap-server h:1 --messages 10",
            "weir cluster status --bootstrap-server h:1",
        ] {
            let parsed = super::Cli::try_parse_from(line.split(' '));
            assert!(parsed.is_ok(), "{line}: {}", parsed.err().unwrap());
        }
    }
}

fn addr(bootstrap: &str) -> anyhow::Result<SocketAddr> {
    let first = bootstrap.split(',').next().unwrap_or(bootstrap).trim();
    first
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| anyhow::anyhow!("cannot resolve {first}"))
}

fn acks(s: &str) -> anyhow::Result<i16> {
    match s {
        "all" | "-1" => Ok(-1),
        "0" => Ok(0),
        "1" => Ok(1),
        other => anyhow::bail!("acks must be 0, 1 or all, not '{other}'"),
    }
}

fn key_values(items: &[String]) -> anyhow::Result<BTreeMap<String, String>> {
    items
        .iter()
        .map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .ok_or_else(|| anyhow::anyhow!("expected KEY=VALUE, got '{kv}'"))
        })
        .collect()
}

/// `--command-config FILE`: Kafka's client properties for security, as Kafka's tools take
/// them (`security.protocol`, `sasl.mechanism`, `sasl.jaas.config`, `ssl.truststore.*`,
/// `ssl.keystore.*`, `ssl.key.password`, `ssl.endpoint.identification.algorithm`).
#[derive(Args, Clone, Debug, Default)]
pub struct CommandConfig {
    /// A client properties file securing the connections (TLS, SASL), as Kafka's tools'.
    #[arg(long = "command-config", value_name = "FILE", global = true)]
    command_config: Option<PathBuf>,
}

impl CommandConfig {
    /// The security the file asks for (PLAINTEXT without one); unknown keys are warned
    /// about, a bad value is an error naming its key.
    fn security(&self, io: &Io) -> anyhow::Result<Security> {
        let Some(path) = &self.command_config else {
            return Ok(Security::plaintext());
        };
        let raw = read_file(io.disk.as_ref(), path)
            .map_err(|e| anyhow::anyhow!("cannot read --command-config {}: {e}", path.display()))?;
        let props = parse_properties(&String::from_utf8_lossy(&raw))
            .map_err(|e| anyhow::anyhow!("--command-config {}: {e}", path.display()))?;
        let (parsed, warnings) = ClientSecurity::parse(&props)
            .map_err(|e| anyhow::anyhow!("--command-config {}: {e}", path.display()))?;
        for w in warnings {
            eprintln!("WARN {w}");
        }
        parsed
            .build(io)
            .map_err(|e| anyhow::anyhow!("--command-config {}: {e}", path.display()))
    }
}

/// Where a client command connects, and how: Kafka's tools' `--bootstrap-server` (also
/// `--bootstrap`) and `--command-config`.
#[derive(Args, Clone, Debug)]
pub struct ServerArgs {
    /// host:port of a broker; several separated by commas. Anywhere on the line, as Kafka's
    /// tools take it (before or after the action).
    #[arg(
        long = "bootstrap-server",
        alias = "bootstrap",
        default_value = "127.0.0.1:9092",
        global = true
    )]
    pub bootstrap: String,
    /// Kafka client properties securing the connection (security.protocol, sasl.*, ssl.*).
    #[command(flatten)]
    pub security: CommandConfig,
}

impl ServerArgs {
    /// A client of the whole cluster (`cluster_client`).
    async fn cluster_client(&self, io: &Io) -> anyhow::Result<ClusterClient> {
        cluster_client(io, &self.bootstrap, &self.security).await
    }

    /// The first bootstrap broker that answers (`connect_any`).
    async fn connect_any(&self, io: &Io) -> anyhow::Result<Client> {
        connect_any(io, &self.bootstrap, &self.security).await
    }
}

/// The host part of `host:port` (what a TLS certificate must name).
fn host_of(host_port: &str) -> String {
    let host = host_port
        .rsplit_once(':')
        .map_or(host_port, |(h, _)| h)
        .trim();
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .to_string()
}

/// A client of the whole cluster `bootstrap`, secured as `--command-config` says.
async fn cluster_client(
    io: &Io,
    bootstrap: &str,
    config: &CommandConfig,
) -> anyhow::Result<ClusterClient> {
    let security = config.security(io)?;
    let named = bootstrap
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(|h| Ok((host_of(h), addr(h)?)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(ClusterClient::connect_secure(io, named, security).await?)
}

/// A name given positionally (`weir topics create T`) or as Kafka's tools spell it
/// (`--topic T`, `--group G`): the one given, or an error naming the option.
fn named(positional: Option<String>, option: Option<String>, flag: &str) -> anyhow::Result<String> {
    match (positional, option) {
        (Some(n), None) | (None, Some(n)) => Ok(n),
        (Some(_), Some(_)) => anyhow::bail!("give the name once: positionally or with {flag}"),
        (None, None) => anyhow::bail!("{flag} is required"),
    }
}

/// Connects to the first broker of `bootstrap` that answers, secured as `--command-config`
/// says.
async fn connect_any(io: &Io, bootstrap: &str, config: &CommandConfig) -> anyhow::Result<Client> {
    let security = config.security(io)?;
    let mut last = None;
    for host in bootstrap
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
    {
        match addr(host) {
            Ok(a) => match Client::connect_secure(io, a, &host_of(host), &security).await {
                Ok(c) => return Ok(c),
                Err(e) => last = Some(anyhow::anyhow!("{host}: {e}")),
            },
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| anyhow::anyhow!("empty --bootstrap")))
}
