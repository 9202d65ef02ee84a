//! `weir features`: Kafka's `kafka-features.sh` — `describe` (each supported feature with its
//! range, finalized level and epoch, from ApiVersions), `upgrade` and `downgrade`
//! (`--feature transaction.version=2`, repeatable; `--dry-run` validates only; a downgrade is
//! safe unless `--unsafe`), over UpdateFeatures, which the active controller decides all or
//! none. The lines are kafka-features.sh's.

use clap::{Args, Subcommand};

use weir::io::Io;

use super::output::Output;

#[derive(Args)]
pub struct FeaturesArgs {
    #[command(flatten)]
    server: super::ServerArgs,
    #[command(subcommand)]
    action: FeaturesAction,
}

#[derive(Subcommand)]
enum FeaturesAction {
    /// Each supported feature: its range, finalized level and epoch.
    Describe,
    /// Raise finalized features: --feature transaction.version=2.
    Upgrade(Change),
    /// Lower finalized features (0 removes one).
    Downgrade {
        #[command(flatten)]
        change: Change,
        /// An unsafe downgrade (Kafka's; may lose metadata a level needs).
        #[arg(long)]
        r#unsafe: bool,
    },
}

#[derive(Args)]
struct Change {
    /// NAME=LEVEL (repeatable).
    #[arg(long = "feature", value_name = "NAME=LEVEL", required = true)]
    features: Vec<String>,
    /// Validate only: change nothing.
    #[arg(long)]
    dry_run: bool,
}

fn parse(features: &[String]) -> anyhow::Result<Vec<(String, i16)>> {
    super::key_values(features)?
        .into_iter()
        .map(|(name, level)| {
            let level: i16 = level
                .parse()
                .map_err(|_| anyhow::anyhow!("{name}: level {level:?} is not a number"))?;
            Ok((name, level))
        })
        .collect()
}

pub async fn run(io: &Io, args: FeaturesArgs, output: Output) -> anyhow::Result<()> {
    let mut client = args.server.connect_any(io).await?;
    let (change, upgrade_type, verb) = match args.action {
        FeaturesAction::Describe => {
            let features = client.describe_features().await?;
            if output == Output::Json {
                println!("{}", serde_json::to_string_pretty(&features)?);
                return Ok(());
            }
            for f in features {
                println!(
                    "Feature: {}\tSupportedMinVersion: {}\tSupportedMaxVersion: {}\tFinalizedVersionLevel: {}\tEpoch: {}",
                    f.name, f.supported_min, f.supported_max, f.finalized, f.epoch
                );
            }
            return Ok(());
        }
        FeaturesAction::Upgrade(change) => (change, 1, "upgrade"),
        FeaturesAction::Downgrade { change, r#unsafe } => {
            (change, if r#unsafe { 3 } else { 2 }, "downgrade")
        }
    };
    let updates = parse(&change.features)?;
    let result = client
        .update_features(&updates, upgrade_type, change.dry_run)
        .await;
    let past = if verb == "upgrade" {
        "upgraded"
    } else {
        "downgraded"
    };
    match result {
        Ok(()) => {
            for (name, level) in &updates {
                if change.dry_run {
                    println!("{name} can be {past} to {level}.");
                } else {
                    println!("{name} was {past} to {level}.");
                }
            }
            Ok(())
        }
        Err(e) => {
            for (name, level) in &updates {
                println!("Could not {verb} {name} to {level}. {e}");
            }
            anyhow::bail!(
                "{} out of {} operation(s) failed.",
                updates.len(),
                updates.len()
            )
        }
    }
}
