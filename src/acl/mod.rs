//! The ACL authorizer as a pure core: bindings, filters and Kafka's StandardAuthorizer rules.
//! No I/O, no wire types: the broker turns requests into [`AclBinding`]s and [`AclFilter`]s
//! and asks [`authorize`]; the controller stores bindings through the metadata log and every
//! node replays them into the [`AclTable`] its image holds.
//!
//! - `binding`: resource types, pattern types, operations, permissions (Kafka's codes) and the
//!   checks a new binding must pass;
//! - `filter`: DescribeAcls/DeleteAcls filters (ANY, MATCH);
//! - `authorizer`: the table and the decision.

mod authorizer;
mod binding;
mod filter;

pub use authorizer::{
    all_operations, authorize, authorized_operations, AclTable, AuthorizerSettings, Caller,
    Decision,
};
pub use binding::{
    AclBinding, InvalidAcl, Operation, PatternType, Permission, RawBinding, ResourceType,
    CLUSTER_NAME, WILDCARD_HOST, WILDCARD_PRINCIPAL, WILDCARD_RESOURCE,
};
pub use filter::{AclFilter, PatternFilter, UnknownFilter};

/// The principal of every connection: Weir has only PLAINTEXT listeners (no SASL, no TLS), and
/// Kafka names an unauthenticated PLAINTEXT client so.
pub const ANONYMOUS: &str = "User:ANONYMOUS";

#[cfg(test)]
mod tests;
