//! `weir configs --entity-type users|clients`: client quotas as `kafka-configs.sh` manages
//! them (`--entity-name`/`--entity-default` per entity type, in order, or `--user`,
//! `--client`, `--user-defaults`, `--client-defaults`), with its output lines; a user's SCRAM
//! credentials (`SCRAM-SHA-*` keys, `scram`) go with them as they do in Kafka's tool.

use std::collections::BTreeMap;

use weir::client::{QuotaEntityParts, QuotaMatch, ScramCredentialInfo};
use weir::io::Io;

use super::scram::{self, ScramChanges};
use super::{changes, ConfigsArgs, EntityType};
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
    /// A user's SCRAM credentials (mechanism and iterations), when users are described.
    #[serde(skip_serializing_if = "Option::is_none")]
    scram: Option<Vec<ScramCredentialInfo>>,
}

/// The user whose SCRAM credentials the components name: one user (`Exact`) or every user
/// (`Any`), with no other entity type; `None` when they name none (defaults, client ids).
fn scram_users(components: &[(String, QuotaMatch)]) -> Option<Vec<String>> {
    match components {
        [(t, QuotaMatch::Exact(u))] if t == "user" => Some(vec![u.clone()]),
        [(t, QuotaMatch::Any)] if t == "user" => Some(Vec::new()),
        _ => None,
    }
}

pub(super) async fn run(io: &Io, args: &ConfigsArgs, output: Output) -> anyhow::Result<()> {
    let components = components(args)?;
    if args.all {
        anyhow::bail!("--all is for topics and brokers");
    }
    let mut client = args.server.connect_any(io).await?;
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
        let (ops, scram) = quota_changes(args.add_config.as_deref(), &args.delete_config)?;
        if !scram.is_empty() {
            let user = match entity.as_slice() {
                [(t, Some(user))] if t == "user" => user.clone(),
                _ => anyhow::bail!(
                    "SCRAM credentials belong to one user: --entity-type users --entity-name NAME \
                     (not a default, not with a client id)"
                ),
            };
            // One request per mechanism: a KRaft controller (Kafka's and Weir's) refuses two
            // changes of one user in one request (DUPLICATE_RESOURCE), which makes
            // `kafka-configs.sh` fail on `SCRAM-SHA-256=[..],SCRAM-SHA-512=[..]`; Weir's tool
            // applies them one after the other instead (deletions first).
            for m in &scram.deletions {
                client
                    .alter_user_scram_credentials(&user, std::slice::from_ref(m), &[])
                    .await?;
            }
            for u in &scram.upsertions {
                client
                    .alter_user_scram_credentials(&user, &[], std::slice::from_ref(u))
                    .await?;
            }
        }
        if !ops.is_empty() {
            client.alter_client_quotas(&entity, &ops).await?;
        }
        println!("Completed updating config for {}.", label(&entity));
        return Ok(());
    }
    let found = client.describe_client_quotas(&components, true).await?;
    let credentials = match scram_users(&components) {
        Some(users) => client.describe_user_scram_credentials(&users).await?,
        None => Vec::new(),
    };
    if output.json() {
        let mut described: Vec<Described> = found
            .into_iter()
            .map(|(entity, quotas)| Described {
                entity: entity.into_iter().collect(),
                quotas,
                scram: None,
            })
            .collect();
        for (user, infos) in credentials.into_iter().filter(|(_, i)| !i.is_empty()) {
            let entity = BTreeMap::from([("user".to_string(), Some(user))]);
            match described.iter_mut().find(|d| d.entity == entity) {
                Some(d) => d.scram = Some(infos),
                None => described.push(Described {
                    entity,
                    quotas: BTreeMap::new(),
                    scram: Some(infos),
                }),
            }
        }
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
    for (user, infos) in credentials.iter().filter(|(_, i)| !i.is_empty()) {
        println!("{}", scram::line(user, infos));
    }
    Ok(())
}

/// `--add-config` values as numbers (`None`: `--delete-config`), and the SCRAM credentials
/// to set or delete.
fn quota_changes(
    add: Option<&str>,
    delete: &[String],
) -> anyhow::Result<(BTreeMap<String, Option<f64>>, ScramChanges)> {
    let mut parsed = changes(add, delete)?;
    if parsed.is_empty() {
        anyhow::bail!("--alter needs --add-config or --delete-config");
    }
    let scram = scram::take_scram(&mut parsed).map_err(|e| anyhow::anyhow!(e))?;
    let quotas = parsed
        .into_iter()
        .map(|(k, v)| match v {
            None => Ok((k, None)),
            Some(v) => v
                .parse::<f64>()
                .map(|n| (k.clone(), Some(n)))
                .map_err(|_| anyhow::anyhow!("quota {k} wants a number, got '{v}'")),
        })
        .collect::<anyhow::Result<_>>()?;
    Ok((quotas, scram))
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
        let (ops, scram) = quota_changes(
            Some("producer_byte_rate=1024"),
            &["request_percentage".into()],
        )
        .unwrap();
        assert!(scram.is_empty());
        assert_eq!(ops["producer_byte_rate"], Some(1024.0));
        assert_eq!(ops["request_percentage"], None);
        assert!(quota_changes(Some("producer_byte_rate=fast"), &[]).is_err());
    }
}
