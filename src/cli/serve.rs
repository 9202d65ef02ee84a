//! `weir serve` and `weir format`: run a node from a Kafka `server.properties`, or format its
//! data directories for a cluster.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::Args;

use weir::broker::Broker;
use weir::config::{parse_properties, ServerConfig};
use weir::io::{read_file, Io};

use super::key_values;

#[derive(Args)]
pub struct ServeArgs {
    /// A Kafka server.properties file (Kafka's own key names).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Override one key, as in the file: --override log.dirs=/tmp/data (repeatable).
    #[arg(long = "override", value_name = "KEY=VALUE")]
    overrides: Vec<String>,
}

#[derive(Args)]
pub struct FormatArgs {
    /// The node's server.properties.
    #[arg(long)]
    config: PathBuf,
    /// The cluster id, the same on every node (`kafka-storage.sh format -t`). It may begin
    /// with '-' (URL-safe base64: one id in 64 made elsewhere does, and `--cluster-id -x…`
    /// was then taken for an unknown option).
    #[arg(long, conflicts_with = "random_cluster_id", allow_hyphen_values = true)]
    cluster_id: Option<String>,
    /// Make a fresh cluster id, format with it and print it (then format the other nodes
    /// with `--cluster-id` and that id).
    #[arg(long)]
    random_cluster_id: bool,
    /// Override one key, as in the file (repeatable).
    #[arg(long = "override", value_name = "KEY=VALUE")]
    overrides: Vec<String>,
    /// A user's SCRAM credential in the cluster's first metadata, as `kafka-storage.sh
    /// format`: 'SCRAM-SHA-256=[name=alice,password=alice-secret]' (optional
    /// iterations=N; repeatable). Format every controller with the same ones.
    #[arg(long = "add-scram", value_name = "MECHANISM=[name=U,password=P]")]
    add_scram: Vec<String>,
    /// A feature's level in the new cluster, as `kafka-storage.sh format --feature`:
    /// `transaction.version=1` (repeatable). By default a new cluster finalizes
    /// transaction.version=2 (transactions v2), as Kafka 4.x does.
    #[arg(long = "feature", value_name = "NAME=LEVEL")]
    features: Vec<String>,
}

/// The FeatureLevel records of a new cluster: Kafka 4.x's defaults with `--feature` applied
/// (a level 0 writes none).
fn feature_records(args: &[String]) -> anyhow::Result<Vec<weir::controller::MetadataRecord>> {
    use weir::controller::features::{supported, NEW_CLUSTER_LEVELS};
    let mut levels: BTreeMap<String, i16> = NEW_CLUSTER_LEVELS
        .iter()
        .map(|(n, l)| (n.to_string(), *l))
        .collect();
    for (name, value) in key_values(args)? {
        let range = supported(&name).ok_or_else(|| {
            anyhow::anyhow!("unknown feature {name} (Weir supports transaction.version)")
        })?;
        let level: i16 = value
            .parse()
            .map_err(|_| anyhow::anyhow!("{name}: level {value:?} is not a number"))?;
        if !(range.min..=range.max).contains(&level) {
            anyhow::bail!(
                "{name}={level}: Weir supports {}..={}",
                range.min,
                range.max
            );
        }
        levels.insert(name, level);
    }
    Ok(levels
        .into_iter()
        .filter(|(_, l)| *l > 0)
        .map(|(name, level)| weir::controller::MetadataRecord::FeatureLevel { name, level })
        .collect())
}

pub async fn format(io: Io, args: FormatArgs) -> anyhow::Result<()> {
    let config = load_config(&io, Some(args.config), args.overrides)?;
    let cluster_id = match (args.cluster_id, args.random_cluster_id) {
        (Some(id), _) => id,
        (None, true) => weir::broker::identity::random_cluster_id(&io),
        (None, false) => anyhow::bail!("give --cluster-id ID or --random-cluster-id"),
    };
    let mut bootstrap = feature_records(&args.features)?;
    bootstrap.extend(super::add_scram::records(&io, &args.add_scram)?);
    for dir in &config.log_dirs {
        let dir_path = std::path::Path::new(dir);
        weir::broker::format_log_dir(&io, dir_path, &cluster_id, config.node_id).await?;
        if !bootstrap.is_empty() {
            weir::broker::bootstrap_records::write(&io, dir_path, &bootstrap).await?;
        }
        eprintln!(
            "formatted {dir} for cluster.id={cluster_id} node.id={}",
            config.node_id
        );
    }
    println!("{cluster_id}");
    Ok(())
}

fn load_config(
    io: &Io,
    path: Option<PathBuf>,
    overrides: Vec<String>,
) -> anyhow::Result<ServerConfig> {
    let mut props = match &path {
        Some(p) => {
            let raw = read_file(io.disk.as_ref(), p)
                .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", p.display()))?;
            parse_properties(&String::from_utf8_lossy(&raw))?
        }
        None => BTreeMap::new(),
    };
    props.extend(key_values(&overrides)?);
    let (config, warnings) = ServerConfig::from_properties(&props)?;
    for w in warnings {
        tracing::warn!("{w}");
    }
    #[cfg(feature = "planted")]
    let config = plant_from_env(config)?;
    Ok(config)
}

/// The test-only `planted` build (the real-process fault suite's teeth, `scripts/jepsen`):
/// plants the bug `WEIR_PLANTED_BUG` names. No other build has the variable, the field or the
/// bug.
#[cfg(feature = "planted")]
fn plant_from_env(mut config: ServerConfig) -> anyhow::Result<ServerConfig> {
    if let Some(name) = std::env::var_os("WEIR_PLANTED_BUG") {
        let name = name.to_string_lossy();
        let bug = weir::config::PlantedBug::parse(&name).map_err(|e| anyhow::anyhow!(e))?;
        tracing::warn!(bug = %name, "planted bug enabled (test-only build)");
        config.planted_bug = Some(bug);
    }
    Ok(config)
}

pub async fn serve(io: Io, args: ServeArgs) -> anyhow::Result<()> {
    let config = load_config(&io, args.config, args.overrides)?;
    let running = Broker::start(config, io).await?;
    tokio::select! {
        biased;
        _ = wait_for_signal() => {}
        reason = running.broker.storage_offline() => {
            // As Kafka halts when its last log directory fails: exit without a clean shutdown,
            // so that the next start recovers from what is really on disk.
            anyhow::bail!("log directory offline ({reason}); exiting so the broker can be restarted");
        }
    }
    tracing::info!("shutting down");
    running.broker.shutdown().await?;
    Ok(())
}

pub(super) async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    biased;
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::cli::Cli;

    /// A cluster id beginning with '-' is the option's value, not another option.
    #[test]
    fn a_cluster_id_may_begin_with_a_dash() {
        let id = "-1YiAHDwTkqBTeYa7lkXcQ";
        let cli = Cli::try_parse_from([
            "weir",
            "format",
            "--config",
            "s.properties",
            "--cluster-id",
            id,
        ]);
        let Ok(Cli {
            command: crate::cli::Command::Format(args),
            ..
        }) = cli
        else {
            panic!("refused: {:?}", cli.err());
        };
        assert_eq!(args.cluster_id.as_deref(), Some(id));
    }
}
