//! `weir configs --entity-type users|clients`: client quotas as `kafka-configs.sh` manages
//! them (`--entity-name`/`--entity-default` per entity type, in order, or `--user`,
//! `--client`, `--user-defaults`, `--client-defaults`), with its output lines.

use std::collections::BTreeMap;

use weir::client::{QuotaEntityParts, QuotaMatch};
use weir::io::Io;

use super::{changes, connect_any, ConfigsArgs, EntityType};
use crate::cli::output::{print_json, Output};

/// Whether the arguments name quota entities (users or client ids).
pub(super) fn is_quota_command(args: &ConfigsArgs) -> bool {
    args.entity_type
        .iter()
        .any(|t| matches!(t, EntityType::Users | EntityType::Clients))
        || args.user.is_some()
        || args.client.is_some()
        || args.user_defaults
        || args.client_defaults
}

/// Each entity type named, with how it is matched, users first.
fn components(args: &ConfigsArgs) -> anyhow::Result<Vec<(String, QuotaMatch)>> {
    let mut by_type: BTreeMap<&'static str, QuotaMatch> = BTreeMap::new();
    let mut names = args.entity_name.iter();
    let mut add = |t: &'static str, m: QuotaMatch| {
        if by_type.insert(t, m).is_some() {
            anyhow::bail!("{t} is named twice");
        }
        Ok(())
    };
    for t in &args.entity_type {
        let name = match t {
            EntityType::Users => "user",
            EntityType::Clients => "client-id",
            other => anyhow::bail!("--entity-type {other:?} does not go with users or clients"),
        };
        let m = match names.next() {
            Some(n) => QuotaMatch::Exact(n.clone()),
            None if args.entity_default => QuotaMatch::Default,
            None => QuotaMatch::Any,
        };
        add(name, m)?;
    }
    if names.next().is_some() {
        anyhow::bail!("more --entity-name than --entity-type");
    }
    if let Some(u) = &args.user {
        add("user", QuotaMatch::Exact(u.clone()))?;
    }
    if args.user_defaults {
        add("user", QuotaMatch::Default)?;
    }
    if let Some(c) = &args.client {
        add("client-id", QuotaMatch::Exact(c.clone()))?;
    }
    if args.client_defaults {
        add("client-id", QuotaMatch::Default)?;
    }
    // "user" sorts after "client-id": Kafka lists the user first.
    let mut out: Vec<_> = by_type
        .into_iter()
        .map(|(t, m)| (t.to_string(), m))
        .collect();
    out.reverse();
    Ok(out)
}

/// How `kafka-configs.sh` names an entity: `user-principal 'alice', client-id 'app'`.
fn label(entity: &QuotaEntityParts) -> String {
    entity
        .iter()
        .map(|(t, n)| {
            let t = if t == "user" { "user-principal" } else { t };
            match n {
                Some(n) => format!("{t} '{n}'"),
                None => format!("the default {t}"),
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A quota value as Kafka prints a double (`1024.0`).
fn value(v: f64) -> String {
    format!("{v:?}")
}

#[derive(serde::Serialize)]
struct Described {
    entity: BTreeMap<String, Option<String>>,
    quotas: BTreeMap<String, f64>,
}

pub(super) async fn run(io: &Io, args: &ConfigsArgs, output: Output) -> anyhow::Result<()> {
    let components = components(args)?;
    if args.all {
        anyhow::bail!("--all is for topics and brokers");
    }
    let mut client = connect_any(io, &args.bootstrap, &args.security).await?;
    if args.alter {
        let entity: QuotaEntityParts = components
            .iter()
            .map(|(t, m)| match m {
                QuotaMatch::Exact(n) => Ok((t.clone(), Some(n.clone()))),
                QuotaMatch::Default => Ok((t.clone(), None)),
                QuotaMatch::Any => {
                    anyhow::bail!("--alter needs --entity-name or --entity-default for {t}")
                }
            })
            .collect::<anyhow::Result<_>>()?;
        let ops = quota_changes(args.add_config.as_deref(), &args.delete_config)?;
        client.alter_client_quotas(&entity, &ops).await?;
        println!("Completed updating config for {}.", label(&entity));
        return Ok(());
    }
    let found = client.describe_client_quotas(&components, true).await?;
    if output.json() {
        let described: Vec<Described> = found
            .into_iter()
            .map(|(entity, quotas)| Described {
                entity: entity.into_iter().collect(),
                quotas,
            })
            .collect();
        return print_json(&described);
    }
    for (entity, quotas) in &found {
        let values: Vec<String> = quotas
            .iter()
            .map(|(k, v)| format!("{k}={}", value(*v)))
            .collect();
        println!(
            "Quota configs for {} are {}",
            label(entity),
            values.join(", ")
        );
    }
    Ok(())
}

/// `--add-config` values as numbers (`None`: `--delete-config`).
fn quota_changes(
    add: Option<&str>,
    delete: &[String],
) -> anyhow::Result<BTreeMap<String, Option<f64>>> {
    let parsed = changes(add, delete)?;
    if parsed.is_empty() {
        anyhow::bail!("--alter needs --add-config or --delete-config");
    }
    parsed
        .into_iter()
        .map(|(k, v)| match v {
            None => Ok((k, None)),
            Some(v) => v
                .parse::<f64>()
                .map(|n| (k.clone(), Some(n)))
                .map_err(|_| anyhow::anyhow!("quota {k} wants a number, got '{v}'")),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_values_read_as_kafka_configs_prints_them() {
        let entity = vec![
            ("user".to_string(), Some("alice".to_string())),
            ("client-id".to_string(), None),
        ];
        assert_eq!(
            label(&entity),
            "user-principal 'alice', the default client-id"
        );
        assert_eq!(value(1024.0), "1024.0");
        assert_eq!(value(12.5), "12.5");
        let ops = quota_changes(
            Some("producer_byte_rate=1024"),
            &["request_percentage".into()],
        )
        .unwrap();
        assert_eq!(ops["producer_byte_rate"], Some(1024.0));
        assert_eq!(ops["request_percentage"], None);
        assert!(quota_changes(Some("producer_byte_rate=fast"), &[]).is_err());
    }
}
