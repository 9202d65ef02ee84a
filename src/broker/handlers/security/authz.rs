//! The broker's side of authorization: who asks (the connection's principal and peer IP) and
//! the questions handlers ask the pure authorizer (`crate::acl`) against the ACLs in the
//! current image.
//!
//! Principal: the connection's (`RequestContext::principal`): `User:ANONYMOUS` on PLAINTEXT,
//! the mapped certificate subject on SSL, the SASL user on SASL listeners. Requests on the
//! controller listener are not checked (quorum RPCs, broker sessions, AlterPartition, the
//! CreateTopics a broker sends for auto-creation, and client requests relayed by another node,
//! which that node authorized before relaying): as in Kafka, that listener serves only the
//! nodes, and can be secured with TLS and SASL. The inter-broker APIs on a client listener (a
//! follower's Fetch and ListOffsets, WriteTxnMarkers) need CLUSTER_ACTION on the cluster for
//! the connection's principal, as in Kafka: put the brokers' user in `super.users` (or grant it).

use std::net::SocketAddr;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::RequestKind;

use crate::acl::{self, AuthorizerSettings, Caller, Decision, Operation, ResourceType};
use crate::broker::api::RequestContext;
use crate::broker::shared::Broker;
use crate::controller::MetadataImage;

/// The settings of the configured authorizer, if any.
pub(crate) fn settings(config: &crate::config::ServerConfig) -> Option<Arc<AuthorizerSettings>> {
    config.authorizer.enabled.then(|| {
        Arc::new(AuthorizerSettings {
            super_users: config.authorizer.super_users.iter().cloned().collect(),
            allow_if_no_acl: config.authorizer.allow_everyone_if_no_acl_found,
        })
    })
}

/// One request's view: the caller and the ACLs as of now. Without an authorizer (or on the
/// controller listener) everything is allowed, and nothing is looked up (the produce and fetch
/// paths ask per topic).
pub(crate) struct Authz {
    deciding: Option<Deciding>,
}

struct Deciding {
    settings: Arc<AuthorizerSettings>,
    image: Arc<MetadataImage>,
    host: String,
    principal: String,
}

impl Authz {
    pub fn allows(&self, operation: Operation, resource_type: ResourceType, name: &str) -> bool {
        let Some(d) = &self.deciding else {
            return true;
        };
        let caller = Caller {
            principal: &d.principal,
            host: &d.host,
        };
        acl::authorize(
            &d.settings,
            d.image.acls(),
            &caller,
            operation,
            resource_type,
            name,
        ) == Decision::Allow
    }

    pub fn topic(&self, operation: Operation, name: &str) -> bool {
        self.allows(operation, ResourceType::Topic, name)
    }

    /// WRITE on a transactional id: every transactional request and produce needs it.
    pub fn transactional_id(&self, name: &str) -> bool {
        self.allows(Operation::Write, ResourceType::TransactionalId, name)
    }

    pub fn group(&self, operation: Operation, name: &str) -> bool {
        self.allows(operation, ResourceType::Group, name)
    }

    /// CreateTopics and auto-creation: CREATE on the cluster or on the topic.
    pub fn may_create_topic(&self, name: &str) -> bool {
        self.cluster(Operation::Create) || self.topic(Operation::Create, name)
    }

    /// DescribeConfigs (DESCRIBE_CONFIGS) and the AlterConfigs APIs (ALTER_CONFIGS) on a config
    /// resource by its wire type: a topic, the cluster for a broker or broker logger, a group.
    /// Other types pass here and are refused by the handler.
    pub fn config_resource(
        &self,
        resource_type: i8,
        name: &str,
        operation: Operation,
    ) -> Result<(), (ResponseError, String)> {
        let (allowed, code) = match resource_type {
            2 => (
                self.topic(operation, name),
                ResponseError::TopicAuthorizationFailed,
            ),
            4 | 8 => (
                self.cluster(operation),
                ResponseError::ClusterAuthorizationFailed,
            ),
            32 => (
                self.group(operation, name),
                ResponseError::GroupAuthorizationFailed,
            ),
            _ => (true, ResponseError::UnknownServerError),
        };
        match allowed {
            true => Ok(()),
            false => Err((code, "Authorization failed.".into())),
        }
    }

    pub fn cluster(&self, operation: Operation) -> bool {
        self.allows(operation, ResourceType::Cluster, acl::CLUSTER_NAME)
    }

    /// The authorized-operations bits of a resource: every supported operation without an
    /// authorizer, else those the caller is allowed.
    pub fn operations(&self, resource_type: ResourceType, name: &str) -> i32 {
        let Some(d) = &self.deciding else {
            return acl::all_operations(resource_type);
        };
        let caller = Caller {
            principal: &d.principal,
            host: &d.host,
        };
        acl::authorized_operations(&d.settings, d.image.acls(), &caller, resource_type, name)
    }
}

impl Broker {
    /// The authorization view for one request.
    pub(crate) fn authz(&self, ctx: &RequestContext) -> Authz {
        self.authz_at(ctx.trusted, ctx.peer, &ctx.principal)
    }

    fn authz_at(&self, trusted: bool, peer: SocketAddr, principal: &str) -> Authz {
        let settings = self.authorizer.as_ref().filter(|_| !trusted);
        Authz {
            deciding: settings.map(|settings| Deciding {
                settings: settings.clone(),
                image: self.image(),
                host: peer.ip().to_string(),
                principal: principal.to_string(),
            }),
        }
    }

    /// Whether a client request this node would relay to the active controller is allowed in
    /// full: the controller listener trusts what arrives, so the relaying node decides. A
    /// request with anything denied is not relayed but handled here, which answers the denied
    /// items with their authorization error (and, on a node that is not the active controller,
    /// the others with NOT_CONTROLLER, retriable).
    pub(crate) fn relay_allowed(
        &self,
        peer: SocketAddr,
        principal: &str,
        body: &RequestKind,
    ) -> bool {
        if self.authorizer.is_none() {
            return true;
        }
        // The connection's principal: TLS and SASL listeners name the client.
        let authz = self.authz_at(false, peer, principal);
        match body {
            RequestKind::CreateTopics(r) => {
                r.topics.iter().all(|t| authz.may_create_topic(&t.name))
            }
            RequestKind::DeleteTopics(r) => {
                let image = self.image();
                let by_id = r.topics.iter().map(|t| {
                    t.name
                        .as_ref()
                        .map(|n| n.to_string())
                        .or_else(|| image.topic_by_id(t.topic_id).map(|t| t.name.clone()))
                });
                let by_name = r.topic_names.iter().map(|n| Some(n.to_string()));
                by_id
                    .chain(by_name)
                    .flatten()
                    .all(|n| authz.topic(Operation::Delete, &n))
            }
            RequestKind::CreatePartitions(r) => r
                .topics
                .iter()
                .all(|t| authz.topic(Operation::Alter, &t.name)),
            RequestKind::AlterConfigs(r) => r.resources.iter().all(|c| {
                authz
                    .config_resource(c.resource_type, &c.resource_name, Operation::AlterConfigs)
                    .is_ok()
            }),
            RequestKind::IncrementalAlterConfigs(r) => r.resources.iter().all(|c| {
                authz
                    .config_resource(c.resource_type, &c.resource_name, Operation::AlterConfigs)
                    .is_ok()
            }),
            RequestKind::CreateAcls(_)
            | RequestKind::DeleteAcls(_)
            | RequestKind::AlterUserScramCredentials(_)
            | RequestKind::ElectLeaders(_)
            | RequestKind::AlterPartitionReassignments(_)
            | RequestKind::UnregisterBroker(_) => authz.cluster(Operation::Alter),
            RequestKind::AlterClientQuotas(_) => authz.cluster(Operation::AlterConfigs),
            RequestKind::DescribeQuorum(_) | RequestKind::ListPartitionReassignments(_) => {
                authz.cluster(Operation::Describe)
            }
            // InitProducerId is not checked (see docs/COMPATIBILITY.md).
            _ => true,
        }
    }

    /// Whether the ACL APIs are served (an authorizer is configured).
    pub(crate) fn has_authorizer(&self) -> bool {
        self.authorizer.is_some()
    }
}
