//! The ACL table and Kafka's StandardAuthorizer rules over it (`StandardAuthorizerData`):
//!
//! - a super user is always allowed;
//! - the ACLs that apply to a resource are its type's LITERAL ones of its name, the LITERAL
//!   `*` one, and the PREFIXED ones its name starts with;
//! - of those, an ACL counts when its principal is the caller's or `User:*`, its host the
//!   caller's or `*`, and its operation the one asked, ALL, or (ALLOW only) one that implies it:
//!   READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS;
//! - a counting DENY wins over any ALLOW; else a counting ALLOW allows;
//! - when no ACL applies to the resource at all (whoever it names),
//!   `allow.everyone.if.no.acl.found` decides; when some apply but none counts, denied.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use super::binding::{
    AclBinding, Operation, PatternType, Permission, ResourceType, WILDCARD_HOST,
    WILDCARD_PRINCIPAL, WILDCARD_RESOURCE,
};
use super::filter::AclFilter;

/// The decision on one action.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    Allow,
    Deny,
}

/// The authorizer's settings (`super.users`, `allow.everyone.if.no.acl.found`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuthorizerSettings {
    /// Principals always allowed, e.g. `User:admin`.
    pub super_users: BTreeSet<String>,
    pub allow_if_no_acl: bool,
}

/// Who asks: the principal (`User:ANONYMOUS` on a PLAINTEXT connection) and the peer's IP.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller<'a> {
    pub principal: &'a str,
    pub host: &'a str,
}

/// The stored ACLs by id, indexed by resource pattern for lookups.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AclTable {
    by_id: BTreeMap<Uuid, AclBinding>,
    by_pattern: BTreeMap<(ResourceType, PatternType, String), BTreeSet<Uuid>>,
}

impl AclTable {
    /// Adds a binding under a fresh id. The controller never stores one binding twice, nor
    /// reuses an id; replaying such a record would be a bug.
    pub fn insert(&mut self, id: Uuid, binding: AclBinding) {
        assert!(!self.by_id.contains_key(&id), "ACL id {id} stored twice");
        assert!(!self.contains(&binding), "ACL {binding:?} stored twice");
        self.by_pattern
            .entry(pattern_key(&binding))
            .or_default()
            .insert(id);
        self.by_id.insert(id, binding);
    }

    /// Removes the binding with `id` (it must exist).
    pub fn remove(&mut self, id: Uuid) {
        let binding = self
            .by_id
            .remove(&id)
            .unwrap_or_else(|| panic!("removal of unknown ACL id {id}"));
        let key = pattern_key(&binding);
        let ids = self.by_pattern.get_mut(&key).expect("indexed");
        ids.remove(&id);
        if ids.is_empty() {
            self.by_pattern.remove(&key);
        }
    }

    pub fn get(&self, id: Uuid) -> Option<&AclBinding> {
        self.by_id.get(&id)
    }

    pub fn contains(&self, binding: &AclBinding) -> bool {
        self.by_pattern
            .get(&pattern_key(binding))
            .is_some_and(|ids| ids.iter().any(|id| self.by_id[id] == *binding))
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// Every binding with its id, by id.
    pub fn all(&self) -> impl Iterator<Item = (Uuid, &AclBinding)> {
        self.by_id.iter().map(|(id, b)| (*id, b))
    }

    /// The bindings a filter selects, by id.
    pub fn matching<'a>(
        &'a self,
        filter: &'a AclFilter,
    ) -> impl Iterator<Item = (Uuid, &'a AclBinding)> + 'a {
        self.all().filter(move |(_, b)| filter.matches(b))
    }

    /// The ACLs that apply to a resource, whoever they name: its LITERAL name, LITERAL `*`,
    /// and every PREFIXED pattern its name starts with (one lookup per prefix length).
    fn applying<'a>(
        &'a self,
        resource_type: ResourceType,
        name: &'a str,
    ) -> impl Iterator<Item = &'a AclBinding> + 'a {
        let literal = [name, WILDCARD_RESOURCE]
            .into_iter()
            .enumerate()
            // A resource literally named `*` has one literal section, not two.
            .filter(move |(i, n)| *i == 0 || *n != name)
            .map(move |(_, n)| (resource_type, PatternType::Literal, n.to_string()));
        let prefixed = name
            .char_indices()
            .map(|(i, c)| i + c.len_utf8())
            .map(move |end| {
                (
                    resource_type,
                    PatternType::Prefixed,
                    name[..end].to_string(),
                )
            });
        literal
            .chain(prefixed)
            .filter_map(|key| self.by_pattern.get(&key))
            .flatten()
            .map(|id| &self.by_id[id])
    }
}

fn pattern_key(b: &AclBinding) -> (ResourceType, PatternType, String) {
    (b.resource_type, b.pattern_type, b.resource_name.clone())
}

/// Whether one ACL counts for the caller and operation, and how (`None`: it does not).
fn verdict(caller: &Caller<'_>, operation: Operation, acl: &AclBinding) -> Option<Decision> {
    if acl.principal != caller.principal && acl.principal != WILDCARD_PRINCIPAL {
        return None;
    }
    if acl.host != WILDCARD_HOST && acl.host != caller.host {
        return None;
    }
    if acl.operation != Operation::All {
        let matches = match acl.permission {
            // Implications widen only what is allowed: DENY READ does not deny DESCRIBE.
            Permission::Allow => match operation {
                Operation::Describe => matches!(
                    acl.operation,
                    Operation::Describe
                        | Operation::Read
                        | Operation::Write
                        | Operation::Delete
                        | Operation::Alter
                ),
                Operation::DescribeConfigs => matches!(
                    acl.operation,
                    Operation::DescribeConfigs | Operation::AlterConfigs
                ),
                other => other == acl.operation,
            },
            Permission::Deny => operation == acl.operation,
        };
        if !matches {
            return None;
        }
    }
    Some(match acl.permission {
        Permission::Allow => Decision::Allow,
        Permission::Deny => Decision::Deny,
    })
}

/// Decides whether `caller` may do `operation` on the resource (`resource_type`, `name`).
pub fn authorize(
    settings: &AuthorizerSettings,
    acls: &AclTable,
    caller: &Caller<'_>,
    operation: Operation,
    resource_type: ResourceType,
    name: &str,
) -> Decision {
    if settings.super_users.contains(caller.principal) {
        return Decision::Allow;
    }
    let mut any_applies = false;
    let mut allowed = false;
    for acl in acls.applying(resource_type, name) {
        any_applies = true;
        match verdict(caller, operation, acl) {
            Some(Decision::Deny) => return Decision::Deny,
            Some(Decision::Allow) => allowed = true,
            None => {}
        }
    }
    match (allowed, any_applies) {
        (true, _) => Decision::Allow,
        (false, false) if settings.allow_if_no_acl => Decision::Allow,
        _ => Decision::Deny,
    }
}

/// The authorized-operations bit field of a resource (bit = operation code) over the
/// operations its type supports, as Kafka's `Authorizer.authorizedOperations` reports it.
pub fn authorized_operations(
    settings: &AuthorizerSettings,
    acls: &AclTable,
    caller: &Caller<'_>,
    resource_type: ResourceType,
    name: &str,
) -> i32 {
    resource_type
        .supported_operations()
        .iter()
        .filter(|op| {
            authorize(settings, acls, caller, **op, resource_type, name) == Decision::Allow
        })
        .fold(0, |bits, op| bits | 1 << op.code())
}

/// Every operation the type supports, as bits: what is reported with no authorizer.
pub fn all_operations(resource_type: ResourceType) -> i32 {
    resource_type
        .supported_operations()
        .iter()
        .fold(0, |bits, op| bits | 1 << op.code())
}
