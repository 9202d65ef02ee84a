//! ACL bindings: a resource pattern (type, name, LITERAL or PREFIXED) and an entry (principal,
//! host, operation, permission), with Kafka's wire codes. Only concrete values live here; the
//! wildcards a filter may hold (ANY, MATCH) are in `filter`.

use serde::{Deserialize, Serialize};

/// The resource name that a LITERAL pattern matches every resource with.
pub const WILDCARD_RESOURCE: &str = "*";
/// The principal that matches every `User:` principal.
pub const WILDCARD_PRINCIPAL: &str = "User:*";
/// The host that matches every host.
pub const WILDCARD_HOST: &str = "*";
/// The only name a CLUSTER resource has.
pub const CLUSTER_NAME: &str = "kafka-cluster";

/// Kafka's `ResourceType` (codes 2..=7; 0 UNKNOWN and 1 ANY are not resources).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ResourceType {
    Topic,
    Group,
    Cluster,
    TransactionalId,
    DelegationToken,
    User,
}

impl ResourceType {
    pub const ALL: [ResourceType; 6] = [
        ResourceType::Topic,
        ResourceType::Group,
        ResourceType::Cluster,
        ResourceType::TransactionalId,
        ResourceType::DelegationToken,
        ResourceType::User,
    ];

    pub fn code(self) -> i8 {
        match self {
            ResourceType::Topic => 2,
            ResourceType::Group => 3,
            ResourceType::Cluster => 4,
            ResourceType::TransactionalId => 5,
            ResourceType::DelegationToken => 6,
            ResourceType::User => 7,
        }
    }

    pub fn from_code(code: i8) -> Option<ResourceType> {
        ResourceType::ALL.into_iter().find(|t| t.code() == code)
    }

    /// The operations Kafka's authorizer knows on this type (`AclEntry.supportedOperations`):
    /// what an authorized-operations field reports on.
    pub fn supported_operations(self) -> &'static [Operation] {
        use Operation::*;
        match self {
            ResourceType::Topic => &[
                Read,
                Write,
                Create,
                Describe,
                Delete,
                Alter,
                DescribeConfigs,
                AlterConfigs,
            ],
            ResourceType::Group => &[Read, Describe, Delete, DescribeConfigs, AlterConfigs],
            ResourceType::Cluster => &[
                Create,
                ClusterAction,
                DescribeConfigs,
                AlterConfigs,
                IdempotentWrite,
                Alter,
                Describe,
            ],
            ResourceType::TransactionalId => &[Describe, Write, TwoPhaseCommit],
            ResourceType::DelegationToken => &[Describe],
            ResourceType::User => &[CreateTokens, DescribeTokens],
        }
    }
}

/// A binding's pattern type: LITERAL (the name, or every resource for `*`) or PREFIXED.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum PatternType {
    Literal,
    Prefixed,
}

impl PatternType {
    pub fn code(self) -> i8 {
        match self {
            PatternType::Literal => 3,
            PatternType::Prefixed => 4,
        }
    }

    pub fn from_code(code: i8) -> Option<PatternType> {
        match code {
            3 => Some(PatternType::Literal),
            4 => Some(PatternType::Prefixed),
            _ => None,
        }
    }
}

/// Kafka's `AclOperation` (codes 2..=15; 0 UNKNOWN and 1 ANY are not operations).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Operation {
    All,
    Read,
    Write,
    Create,
    Delete,
    Alter,
    Describe,
    ClusterAction,
    DescribeConfigs,
    AlterConfigs,
    IdempotentWrite,
    CreateTokens,
    DescribeTokens,
    TwoPhaseCommit,
}

impl Operation {
    pub const EVERY: [Operation; 14] = [
        Operation::All,
        Operation::Read,
        Operation::Write,
        Operation::Create,
        Operation::Delete,
        Operation::Alter,
        Operation::Describe,
        Operation::ClusterAction,
        Operation::DescribeConfigs,
        Operation::AlterConfigs,
        Operation::IdempotentWrite,
        Operation::CreateTokens,
        Operation::DescribeTokens,
        Operation::TwoPhaseCommit,
    ];

    pub fn code(self) -> i8 {
        Operation::EVERY
            .iter()
            .position(|o| *o == self)
            .expect("every operation is listed") as i8
            + 2
    }

    pub fn from_code(code: i8) -> Option<Operation> {
        let index = usize::try_from(code.checked_sub(2)?).ok()?;
        Operation::EVERY.get(index).copied()
    }
}

/// ALLOW or DENY.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Permission {
    Deny,
    Allow,
}

impl Permission {
    pub fn code(self) -> i8 {
        match self {
            Permission::Deny => 2,
            Permission::Allow => 3,
        }
    }

    pub fn from_code(code: i8) -> Option<Permission> {
        match code {
            2 => Some(Permission::Deny),
            3 => Some(Permission::Allow),
            _ => None,
        }
    }
}

/// One ACL: who (principal, host) may or may not (permission) do what (operation) on which
/// resources (type, name, pattern type).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AclBinding {
    pub resource_type: ResourceType,
    pub resource_name: String,
    pub pattern_type: PatternType,
    /// `Type:name`, e.g. `User:alice`, or [`WILDCARD_PRINCIPAL`].
    pub principal: String,
    /// An IP address as the broker sees the peer, or [`WILDCARD_HOST`].
    pub host: String,
    pub operation: Operation,
    pub permission: Permission,
}

/// Why a binding from a request cannot be stored (Kafka answers INVALID_REQUEST).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidAcl(pub String);

/// Wire codes and strings of a CreateAcls creation, before they are known to be valid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawBinding<'a> {
    pub resource_type: i8,
    pub resource_name: &'a str,
    pub pattern_type: i8,
    pub principal: &'a str,
    pub host: &'a str,
    pub operation: i8,
    pub permission: i8,
}

impl AclBinding {
    /// A binding from a CreateAcls creation, checked as Kafka's broker (`AclApis`) and
    /// controller (`AclControlManager.validateNewAcl`) check it, with their messages.
    pub fn from_raw(raw: &RawBinding<'_>) -> Result<AclBinding, InvalidAcl> {
        let bad = |m: String| Err(InvalidAcl(m));
        let Some(resource_type) = ResourceType::from_code(raw.resource_type) else {
            return bad(format!("Invalid resourceType {}", raw.resource_type));
        };
        let Some(pattern_type) = PatternType::from_code(raw.pattern_type) else {
            return bad(format!("Invalid patternType {}", raw.pattern_type));
        };
        let Some(operation) = Operation::from_code(raw.operation) else {
            return bad(format!("Invalid operation {}", raw.operation));
        };
        let Some(permission) = Permission::from_code(raw.permission) else {
            return bad(format!("Invalid permissionType {}", raw.permission));
        };
        if raw.resource_name.is_empty() {
            return bad("Resource name should not be empty".into());
        }
        if resource_type == ResourceType::Cluster && raw.resource_name != CLUSTER_NAME {
            return bad(format!(
                "The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
            ));
        }
        if !raw.principal.contains(':') {
            return bad(format!(
                "Could not parse principal from `{}` (no colon is present separating the \
                 principal type from the principal name)",
                raw.principal
            ));
        }
        if raw.host.is_empty() {
            return bad("Invalid empty host".into());
        }
        Ok(AclBinding {
            resource_type,
            resource_name: raw.resource_name.to_string(),
            pattern_type,
            principal: raw.principal.to_string(),
            host: raw.host.to_string(),
            operation,
            permission,
        })
    }
}
