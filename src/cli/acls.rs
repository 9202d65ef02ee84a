//! `weir acls`: list, add and remove ACLs with `kafka-acls.sh`'s options and output lines
//! (`--list | --add | --remove`, `--topic`, `--group`, `--cluster`, `--transactional-id`,
//! `--allow-principal`, `--deny-principal`, `--operation`, `--producer`, `--consumer`,
//! `--resource-pattern-type`). Any broker will do: it forwards changes to the controller.

use std::collections::BTreeMap;

use clap::{ArgGroup, Args, ValueEnum};

use weir::acl::{
    AclBinding, AclFilter, Operation, PatternFilter, PatternType, Permission, ResourceType,
    CLUSTER_NAME, WILDCARD_HOST,
};
use weir::io::Io;

use super::output::{print_json, Output};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum PatternArg {
    Literal,
    Prefixed,
    /// Filters only (--list, --remove): every pattern type.
    Any,
    /// Filters only: the patterns that apply to the named resource (LITERAL, `*`, PREFIXED).
    Match,
}

#[derive(Args)]
#[command(group = ArgGroup::new("mode").required(true).args(["list", "add", "remove"]))]
pub struct AclsArgs {
    #[command(flatten)]
    server: super::ServerArgs,
    /// List the ACLs of the resources named (every ACL without one).
    #[arg(long)]
    list: bool,
    #[arg(long)]
    add: bool,
    /// Remove the ACLs given; with no principal, every ACL of the resources named.
    #[arg(long)]
    remove: bool,
    /// Weir never asks before removing; accepted for kafka-acls.sh's scripts.
    #[arg(long)]
    force: bool,
    #[arg(long)]
    topic: Vec<String>,
    #[arg(long)]
    group: Vec<String>,
    #[arg(long = "transactional-id")]
    transactional_id: Vec<String>,
    /// The cluster resource (kafka-cluster).
    #[arg(long)]
    cluster: bool,
    #[arg(long = "resource-pattern-type", value_enum, default_value_t = PatternArg::Literal)]
    pattern: PatternArg,
    /// User:name (repeatable).
    #[arg(long = "allow-principal")]
    allow_principal: Vec<String>,
    #[arg(long = "deny-principal")]
    deny_principal: Vec<String>,
    /// With --list: only the ACLs of this principal.
    #[arg(long)]
    principal: Option<String>,
    /// Hosts the allow principals may connect from (default every host).
    #[arg(long = "allow-host")]
    allow_host: Vec<String>,
    #[arg(long = "deny-host")]
    deny_host: Vec<String>,
    /// Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs,
    /// AlterConfigs, IdempotentWrite, CreateTokens, DescribeTokens, TwoPhaseCommit or All
    /// (repeatable; default All).
    #[arg(long = "operation", value_parser = parse_operation)]
    operations: Vec<Operation>,
    /// The ACLs a producer needs on --topic: Write, Describe and Create (and Write and
    /// Describe on --transactional-id, IdempotentWrite on the cluster).
    #[arg(long)]
    producer: bool,
    /// The ACLs a consumer needs: Read and Describe on --topic, Read on --group.
    #[arg(long)]
    consumer: bool,
}

fn parse_operation(s: &str) -> Result<Operation, String> {
    let wanted: String = s.chars().filter(|c| *c != '_' && *c != '-').collect();
    Operation::EVERY
        .into_iter()
        .find(|o| format!("{o:?}").eq_ignore_ascii_case(&wanted))
        .ok_or_else(|| format!("unknown operation '{s}'"))
}

/// A resource the arguments name, with its pattern type.
type Resource = (ResourceType, String);

fn resources(args: &AclsArgs) -> Vec<Resource> {
    let mut out: Vec<Resource> = Vec::new();
    out.extend(args.topic.iter().map(|t| (ResourceType::Topic, t.clone())));
    out.extend(args.group.iter().map(|g| (ResourceType::Group, g.clone())));
    out.extend(
        args.transactional_id
            .iter()
            .map(|t| (ResourceType::TransactionalId, t.clone())),
    );
    if args.cluster {
        out.push((ResourceType::Cluster, CLUSTER_NAME.to_string()));
    }
    out
}

/// The bindings `--add` (or a precise `--remove`) asks for.
fn bindings(args: &AclsArgs) -> anyhow::Result<Vec<AclBinding>> {
    let pattern_type = match args.pattern {
        PatternArg::Literal => PatternType::Literal,
        PatternArg::Prefixed => PatternType::Prefixed,
        PatternArg::Any | PatternArg::Match => anyhow::bail!(
            "--resource-pattern-type {:?} is a filter: ACLs are added as literal or prefixed",
            args.pattern
        ),
    };
    // (resource, operations) the options ask for.
    let mut wanted: Vec<(Resource, Operation)> = Vec::new();
    let named = resources(args);
    let ops = if args.operations.is_empty() {
        vec![Operation::All]
    } else {
        args.operations.clone()
    };
    if args.producer || args.consumer {
        for (t, name) in &named {
            let add = |ops: &[Operation], w: &mut Vec<(Resource, Operation)>| {
                w.extend(ops.iter().map(|o| ((*t, name.clone()), *o)))
            };
            match t {
                ResourceType::Topic if args.producer => add(
                    &[Operation::Write, Operation::Describe, Operation::Create],
                    &mut wanted,
                ),
                ResourceType::TransactionalId if args.producer => {
                    add(&[Operation::Write, Operation::Describe], &mut wanted)
                }
                _ => {}
            }
            match t {
                ResourceType::Topic if args.consumer => {
                    add(&[Operation::Read, Operation::Describe], &mut wanted)
                }
                ResourceType::Group if args.consumer => add(&[Operation::Read], &mut wanted),
                _ => {}
            }
        }
        if args.producer && args.transactional_id.is_empty() {
            let cluster = (ResourceType::Cluster, CLUSTER_NAME.to_string());
            wanted.push((cluster, Operation::IdempotentWrite));
        }
        if args.consumer && args.group.is_empty() {
            anyhow::bail!("--consumer needs --group");
        }
    } else {
        for r in &named {
            for o in &ops {
                if *o != Operation::All && !r.0.supported_operations().contains(o) {
                    anyhow::bail!("{o:?} is not an operation on a {:?} resource", r.0);
                }
                wanted.push((r.clone(), *o));
            }
        }
    }
    if wanted.is_empty() {
        anyhow::bail!("name a resource: --topic, --group, --transactional-id or --cluster");
    }
    let mut who: Vec<(String, String, Permission)> = Vec::new();
    let hosts = |h: &[String]| {
        if h.is_empty() {
            vec![WILDCARD_HOST.to_string()]
        } else {
            h.to_vec()
        }
    };
    for p in &args.allow_principal {
        for h in hosts(&args.allow_host) {
            who.push((p.clone(), h, Permission::Allow));
        }
    }
    for p in &args.deny_principal {
        for h in hosts(&args.deny_host) {
            who.push((p.clone(), h, Permission::Deny));
        }
    }
    if who.is_empty() {
        anyhow::bail!("give --allow-principal or --deny-principal (User:name)");
    }
    let mut out = Vec::new();
    for ((resource_type, resource_name), operation) in &wanted {
        for (principal, host, permission) in &who {
            if !principal.contains(':') {
                anyhow::bail!("a principal is Type:name (User:alice), not '{principal}'");
            }
            out.push(AclBinding {
                resource_type: *resource_type,
                resource_name: resource_name.clone(),
                pattern_type,
                principal: principal.clone(),
                host: host.clone(),
                operation: *operation,
                permission: *permission,
            });
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// The filter of one named resource (or of every resource), with `--principal`.
fn filter(args: &AclsArgs, resource: Option<&Resource>) -> AclFilter {
    let pattern = match args.pattern {
        PatternArg::Literal => PatternFilter::Exactly(PatternType::Literal),
        PatternArg::Prefixed => PatternFilter::Exactly(PatternType::Prefixed),
        PatternArg::Any => PatternFilter::Any,
        PatternArg::Match => PatternFilter::Match,
    };
    AclFilter {
        resource_type: resource.map(|r| r.0),
        resource_name: resource.map(|r| r.1.clone()),
        pattern: if resource.is_some() {
            pattern
        } else {
            PatternFilter::Any
        },
        principal: args.principal.clone(),
        host: None,
        operation: None,
        permission: None,
    }
}

/// Kafka's text for a resource pattern.
fn pattern_text(b: &AclBinding) -> String {
    let kind = serde_json::to_value(b.resource_type).unwrap_or_default();
    let pattern = serde_json::to_value(b.pattern_type).unwrap_or_default();
    format!(
        "ResourcePattern(resourceType={}, name={}, patternType={})",
        kind.as_str().unwrap_or("UNKNOWN"),
        b.resource_name,
        pattern.as_str().unwrap_or("UNKNOWN")
    )
}

fn entry_text(b: &AclBinding) -> String {
    let op = serde_json::to_value(b.operation).unwrap_or_default();
    let permission = serde_json::to_value(b.permission).unwrap_or_default();
    format!(
        "(principal={}, host={}, operation={}, permissionType={})",
        b.principal,
        b.host,
        op.as_str().unwrap_or("UNKNOWN"),
        permission.as_str().unwrap_or("UNKNOWN")
    )
}

/// Bindings grouped by resource pattern, as kafka-acls.sh prints them under `heading`.
fn render(heading: &str, bindings: &[AclBinding]) -> String {
    let mut by_pattern: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for b in bindings {
        by_pattern
            .entry(pattern_text(b))
            .or_default()
            .push(entry_text(b));
    }
    let mut out = String::new();
    for (pattern, entries) in by_pattern {
        out.push_str(&format!("{heading} `{pattern}`: \n"));
        for e in entries {
            out.push_str(&format!(" \t{e} \n"));
        }
        out.push('\n');
    }
    out
}

pub async fn run(io: &Io, args: AclsArgs, output: Output) -> anyhow::Result<()> {
    let mut client = args.server.connect_any(io).await?;
    let named = resources(&args);
    if args.list {
        let mut found = Vec::new();
        if named.is_empty() {
            found = client.describe_acls(&filter(&args, None)).await?;
        }
        for r in &named {
            found.extend(client.describe_acls(&filter(&args, Some(r))).await?);
        }
        found.sort();
        found.dedup();
        if output.json() {
            return print_json(&found);
        }
        print!("{}", render("Current ACLs for resource", &found));
    } else if args.add {
        let wanted = bindings(&args)?;
        print!("{}", render("Adding ACLs for resource", &wanted));
        client.create_acls(&wanted).await?;
    } else if named.is_empty() {
        anyhow::bail!(
            "--remove needs a resource: --topic, --group, --transactional-id or --cluster"
        );
    } else if args.allow_principal.is_empty() && args.deny_principal.is_empty() {
        // Every ACL of the resources named.
        let mut removed = Vec::new();
        for r in &named {
            removed.extend(client.delete_acls(&filter(&args, Some(r))).await?);
        }
        print!("{}", render("Removed ACLs for resource", &removed));
    } else {
        let mut removed = Vec::new();
        for b in bindings(&args)? {
            let exact = AclFilter {
                resource_type: Some(b.resource_type),
                resource_name: Some(b.resource_name.clone()),
                pattern: PatternFilter::Exactly(b.pattern_type),
                principal: Some(b.principal.clone()),
                host: Some(b.host.clone()),
                operation: Some(b.operation),
                permission: Some(b.permission),
            };
            removed.extend(client.delete_acls(&exact).await?);
        }
        print!("{}", render("Removed ACLs for resource", &removed));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        acls: AclsArgs,
    }

    fn args(line: &[&str]) -> AclsArgs {
        Cli::try_parse_from([&["acls"], line].concat())
            .unwrap()
            .acls
    }

    #[test]
    fn operations_as_kafka_spells_them() {
        assert_eq!(parse_operation("Write"), Ok(Operation::Write));
        assert_eq!(
            parse_operation("IdempotentWrite"),
            Ok(Operation::IdempotentWrite)
        );
        assert_eq!(
            parse_operation("describe-configs"),
            Ok(Operation::DescribeConfigs)
        );
        assert!(parse_operation("Fly").is_err());
    }

    #[test]
    fn add_makes_one_binding_per_principal_host_and_operation() {
        let a = args(&[
            "--add",
            "--allow-principal",
            "User:alice",
            "--operation",
            "Write",
            "--operation",
            "Describe",
            "--topic",
            "t",
        ]);
        let b = bindings(&a).unwrap();
        assert_eq!(b.len(), 2);
        assert!(b
            .iter()
            .all(|b| b.principal == "User:alice" && b.host == "*"));
        assert_eq!(
            render("Adding ACLs for resource", &b[..1]),
            "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, \
             patternType=LITERAL)`: \n \t(principal=User:alice, host=*, operation=WRITE, \
             permissionType=ALLOW) \n\n"
        );
    }

    #[test]
    fn producer_and_consumer_shortcuts() {
        let a = args(&[
            "--add",
            "--allow-principal",
            "User:bob",
            "--producer",
            "--topic",
            "t",
        ]);
        let ops: Vec<Operation> = bindings(&a).unwrap().iter().map(|b| b.operation).collect();
        assert_eq!(ops.len(), 4, "{ops:?}");
        assert!(ops.contains(&Operation::IdempotentWrite));
        let a = args(&[
            "--add",
            "--allow-principal",
            "User:bob",
            "--consumer",
            "--topic",
            "t",
        ]);
        assert!(bindings(&a).is_err(), "a consumer needs a group");
    }

    #[test]
    fn refuses_what_kafka_refuses() {
        let no_principal = args(&["--add", "--operation", "Read", "--topic", "t"]);
        assert!(bindings(&no_principal).is_err());
        let wrong_op = args(&[
            "--add",
            "--allow-principal",
            "User:a",
            "--operation",
            "Read",
            "--cluster",
        ]);
        assert!(bindings(&wrong_op).is_err());
        let bad_principal = args(&["--add", "--allow-principal", "alice", "--topic", "t"]);
        assert!(bindings(&bad_principal).is_err());
        let filter_pattern = args(&[
            "--add",
            "--allow-principal",
            "User:a",
            "--topic",
            "t",
            "--resource-pattern-type",
            "any",
        ]);
        assert!(bindings(&filter_pattern).is_err());
    }
}
