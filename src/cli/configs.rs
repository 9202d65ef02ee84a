//! `weir configs`: describe and alter the configs of topics and brokers, and client quotas
//! (`quotas`: users and client ids), with
//! `kafka-configs.sh`'s options and output lines (`--entity-type topics|brokers|users|clients`,
//! `--entity-name` or `--entity-default`, `--describe [--all]`, `--alter --add-config
//! k=v,k2=[a,b] --delete-config k`). Any broker will do: it forwards changes to the active
//! controller.

use std::collections::BTreeMap;

use clap::{Args, ValueEnum};

use weir::client::{Client, ConfigEntry, ConfigResource, ConfigSource};
use weir::io::Io;

mod quotas;
mod scram;
use super::output::{print_json, Output};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum EntityType {
    Topics,
    Brokers,
    /// Client quotas of users (KIP-55); with `--entity-type clients` too, of a user's client.
    Users,
    /// Client quotas of client ids.
    Clients,
    /// Consumer group configs (KIP-848): consumer.session.timeout.ms,
    /// consumer.heartbeat.interval.ms.
    Groups,
}

#[derive(Args)]
#[command(group = clap::ArgGroup::new("mode").required(true).args(["describe", "alter"]))]
pub struct ConfigsArgs {
    #[command(flatten)]
    server: super::ServerArgs,
    /// topics, brokers, users or clients; for a user's client id give `--entity-type users
    /// --entity-name U --entity-type clients --entity-name C` (names and defaults pair up
    /// with types in order), or use --user/--client.
    #[arg(long = "entity-type", value_enum)]
    entity_type: Vec<EntityType>,
    /// A topic name, broker id, user or client id (every one when describing without it).
    #[arg(long = "entity-name")]
    entity_name: Vec<String>,
    /// The cluster-wide default of every broker, or the default user or client id.
    #[arg(long = "entity-default")]
    entity_default: bool,
    /// This topic's configs (as `--entity-type topics --entity-name`).
    #[arg(long, conflicts_with_all = ["entity_type", "entity_name", "entity_default"])]
    topic: Option<String>,
    /// This broker's configs (as `--entity-type brokers --entity-name`).
    #[arg(long, conflicts_with_all = ["entity_type", "entity_name", "entity_default", "topic"])]
    broker: Option<i32>,
    /// The cluster-wide broker default (as `--entity-type brokers --entity-default`).
    #[arg(long = "broker-defaults", conflicts_with_all = ["entity_type", "entity_name", "entity_default", "topic", "broker"])]
    broker_defaults: bool,
    /// This consumer group's configs (as `--entity-type groups --entity-name`).
    #[arg(long, conflicts_with_all = ["entity_type", "entity_name", "entity_default", "topic", "broker", "broker_defaults"])]
    group: Option<String>,
    /// Quotas of this user (as `--entity-type users --entity-name`).
    #[arg(long)]
    user: Option<String>,
    /// Quotas of this client id (as `--entity-type clients --entity-name`).
    #[arg(long)]
    client: Option<String>,
    /// Quotas of the default user.
    #[arg(long = "user-defaults", conflicts_with = "user")]
    user_defaults: bool,
    /// Quotas of the default client id.
    #[arg(long = "client-defaults", conflicts_with = "client")]
    client_defaults: bool,
    /// List the configs set on the entity (with --all, every config and where it comes from).
    #[arg(long)]
    describe: bool,
    /// With --describe: every config, not only those set on the entity.
    #[arg(long, requires = "describe")]
    all: bool,
    /// Change configs: --add-config and --delete-config, applied together or not at all.
    #[arg(long)]
    alter: bool,
    /// k1=v1,k2=[v2,v3]: values to set (a value holding commas goes in square brackets).
    #[arg(long = "add-config", requires = "alter")]
    add_config: Option<String>,
    /// k1,k2: configs to remove, back to their default.
    #[arg(long = "delete-config", requires = "alter", value_delimiter = ',')]
    delete_config: Vec<String>,
}

/// An entity as the output names it, with its resource.
struct Entity {
    resource: ConfigResource,
    /// "topic t", "broker 1", "brokers in the cluster" (the default).
    label: String,
}

impl Entity {
    fn topic(name: &str) -> Entity {
        Entity {
            resource: ConfigResource::Topic(name.to_string()),
            label: format!("topic {name}"),
        }
    }

    fn broker(id: i32) -> Entity {
        Entity {
            resource: ConfigResource::Broker(id),
            label: format!("broker {id}"),
        }
    }

    fn group(name: &str) -> Entity {
        Entity {
            resource: ConfigResource::Group(name.to_string()),
            label: format!("group {name}"),
        }
    }

    fn broker_default() -> Entity {
        Entity {
            resource: ConfigResource::BrokerDefault,
            label: "brokers in the cluster".to_string(),
        }
    }
}

#[derive(Debug, serde::Serialize)]
struct DescribedEntity {
    entity: String,
    configs: Vec<DescribedConfig>,
}

#[derive(Debug, serde::Serialize)]
struct DescribedConfig {
    name: String,
    value: Option<String>,
    source: ConfigSource,
    sensitive: bool,
    read_only: bool,
}

/// Kafka's shorthands (`--topic T`, `--broker N`, `--broker-defaults`, `--group G`) as the
/// `--entity-type`/`--entity-name`/`--entity-default` they stand for (clap refuses them
/// together with those).
fn expand_shorthands(args: &mut ConfigsArgs) {
    let named = |t: EntityType, name: String| (vec![t], vec![name], false);
    let expanded = if let Some(t) = args.topic.take() {
        named(EntityType::Topics, t)
    } else if let Some(b) = args.broker.take() {
        named(EntityType::Brokers, b.to_string())
    } else if let Some(g) = args.group.take() {
        named(EntityType::Groups, g)
    } else if args.broker_defaults {
        (vec![EntityType::Brokers], vec![], true)
    } else {
        return;
    };
    (args.entity_type, args.entity_name, args.entity_default) = expanded;
}

pub async fn run(io: &Io, mut args: ConfigsArgs, output: Output) -> anyhow::Result<()> {
    expand_shorthands(&mut args);
    if quotas::is_quota_command(&args) {
        return quotas::run(io, &args, output).await;
    }
    let entity_type = match args.entity_type.as_slice() {
        [t] => *t,
        [] => anyhow::bail!("--entity-type is required"),
        _ => anyhow::bail!("only users and clients take two --entity-type"),
    };
    if args.entity_name.len() > 1 {
        anyhow::bail!("one --entity-name for {entity_type:?}");
    }
    if args.entity_default && !args.entity_name.is_empty() {
        anyhow::bail!("--entity-name and --entity-default name different entities");
    }
    if args.entity_default && matches!(entity_type, EntityType::Topics | EntityType::Groups) {
        anyhow::bail!(
            "--entity-default is for --entity-type brokers; {entity_type:?} have no default \
             entity"
        );
    }
    let mut client = args.server.connect_any(io).await?;
    let entities = entities(&mut client, &args, entity_type).await?;
    if args.alter {
        let [entity] = entities.as_slice() else {
            anyhow::bail!("--alter needs one entity: --entity-name or --entity-default");
        };
        let changes = changes(args.add_config.as_deref(), &args.delete_config)?;
        if changes.is_empty() {
            anyhow::bail!("--alter needs --add-config or --delete-config");
        }
        client.alter_configs(&entity.resource, &changes).await?;
        match entity.resource {
            ConfigResource::BrokerDefault => {
                println!("Completed updating default config for brokers in the cluster.")
            }
            _ => println!("Completed updating config for {}.", entity.label),
        }
        return Ok(());
    }
    let mut described = Vec::new();
    for entity in &entities {
        let configs = client.describe_configs(&entity.resource).await?;
        described.push(DescribedEntity {
            entity: entity.label.clone(),
            configs: shown(&entity.resource, configs, args.all),
        });
    }
    if output.json() {
        return print_json(&described);
    }
    for (entity, d) in entities.iter().zip(&described) {
        let which = if args.all { "All" } else { "Dynamic" };
        match entity.resource {
            ConfigResource::BrokerDefault => {
                println!("Default configs for brokers in the cluster are:")
            }
            _ => println!("{which} configs for {} are:", entity.label),
        }
        for c in &d.configs {
            let value = c.value.as_deref().unwrap_or("null");
            println!(
                "  {}={value} sensitive={} synonyms={{{}:{}={value}}}",
                c.name,
                c.sensitive,
                c.source.label(),
                c.name
            );
        }
    }
    Ok(())
}

/// The entities the arguments name: one, or every topic or broker.
async fn entities(
    client: &mut Client,
    args: &ConfigsArgs,
    entity_type: EntityType,
) -> anyhow::Result<Vec<Entity>> {
    Ok(match (entity_type, args.entity_name.first()) {
        (EntityType::Brokers, _) if args.entity_default => vec![Entity::broker_default()],
        (EntityType::Topics, Some(name)) => vec![Entity::topic(name)],
        (EntityType::Brokers, Some(id)) => {
            let id = id
                .parse()
                .map_err(|_| anyhow::anyhow!("a broker's --entity-name is its id, not '{id}'"))?;
            vec![Entity::broker(id)]
        }
        (EntityType::Topics, None) => client
            .metadata(None)
            .await?
            .into_iter()
            .map(|t| Entity::topic(&t.name))
            .collect(),
        (EntityType::Brokers, None) => client
            .brokers()
            .await?
            .into_iter()
            .map(|b| Entity::broker(b.id))
            .collect(),
        (EntityType::Groups, Some(name)) => vec![Entity::group(name)],
        (EntityType::Groups, None) => client
            .list_groups()
            .await?
            .into_iter()
            .map(|g| Entity::group(&g.group_id))
            .collect(),
        (EntityType::Users | EntityType::Clients, _) => {
            unreachable!("quota entities go to `quotas::run`")
        }
    })
}

/// The configs `--describe` shows: those set on the entity itself, or every one with --all.
fn shown(
    resource: &ConfigResource,
    configs: BTreeMap<String, ConfigEntry>,
    all: bool,
) -> Vec<DescribedConfig> {
    configs
        .into_iter()
        .map(|(name, e)| DescribedConfig {
            name,
            value: e.value,
            source: ConfigSource::from_code(e.source),
            sensitive: e.sensitive,
            read_only: e.read_only,
        })
        .filter(|c| all || c.source == resource.own_source())
        .collect()
}

/// `--add-config` and `--delete-config` as one set of changes (`None`: delete).
fn changes(
    add: Option<&str>,
    delete: &[String],
) -> anyhow::Result<BTreeMap<String, Option<String>>> {
    let mut out = BTreeMap::new();
    for item in split_top_level(add.unwrap_or("")) {
        let (k, v) = item
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("--add-config wants k=v pairs, got '{item}'"))?;
        let v = v.trim();
        let v = v
            .strip_prefix('[')
            .and_then(|v| v.strip_suffix(']'))
            .unwrap_or(v);
        out.insert(k.trim().to_string(), Some(v.to_string()));
    }
    for k in delete.iter().map(|k| k.trim()).filter(|k| !k.is_empty()) {
        if out.contains_key(k) {
            anyhow::bail!("'{k}' is both added and deleted");
        }
        out.insert(k.to_string(), None);
    }
    Ok(out)
}

/// Splits on the commas outside square brackets (`a=1,b=[x,y]` → `a=1`, `b=[x,y]`).
fn split_top_level(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, ch) in s.char_indices() {
        match ch {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts.into_iter().filter(|p| !p.trim().is_empty()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_config_takes_bracketed_lists() {
        let c = changes(
            Some("retention.ms=1000, cleanup.policy=[compact,delete]"),
            &[],
        )
        .unwrap();
        assert_eq!(c["retention.ms"].as_deref(), Some("1000"));
        assert_eq!(c["cleanup.policy"].as_deref(), Some("compact,delete"));
    }

    #[test]
    fn delete_config_removes_and_refuses_a_key_also_added() {
        let c = changes(None, &["retention.ms".into()]).unwrap();
        assert_eq!(c["retention.ms"], None);
        assert!(changes(Some("a=1"), &["a".into()]).is_err());
        assert!(changes(Some("novalue"), &[]).is_err());
    }

    #[test]
    fn describe_shows_what_is_set_on_the_entity_unless_all() {
        let entry = |v: &str, source| ConfigEntry {
            value: Some(v.into()),
            source,
            sensitive: false,
            read_only: false,
        };
        let configs = BTreeMap::from([
            ("retention.ms".to_string(), entry("1000", 1)),
            ("segment.bytes".to_string(), entry("1073741824", 5)),
        ]);
        let topic = ConfigResource::Topic("t".into());
        let own = shown(&topic, configs.clone(), false);
        assert_eq!(own.len(), 1);
        assert_eq!(own[0].source, ConfigSource::DynamicTopic);
        assert_eq!(shown(&topic, configs, true).len(), 2);
    }
}
