//! Client quotas (KIP-546) as the image holds them: per entity (a user, a client id, both, or
//! an IP, each named or the default), the quota keys set on it. Every node replays the same
//! `ClientQuota` records, so every broker enforces the same quotas (`crate::quota`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One part of an entity: a name, or the default entity of its type (Kafka's null name).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntityName {
    Default,
    Named(String),
}

impl EntityName {
    /// Kafka's wire form: `None` for the default entity.
    pub fn wire(&self) -> Option<&str> {
        match self {
            EntityName::Default => None,
            EntityName::Named(n) => Some(n),
        }
    }

    pub fn from_wire(name: Option<&str>) -> EntityName {
        match name {
            None => EntityName::Default,
            Some(n) => EntityName::Named(n.to_string()),
        }
    }
}

/// A quota entity: `user`, `client-id`, both, or `ip` alone (the controller checks the
/// combination before a record names it).
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct QuotaEntity {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<EntityName>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<EntityName>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip: Option<EntityName>,
}

impl QuotaEntity {
    pub fn user(name: EntityName) -> QuotaEntity {
        QuotaEntity {
            user: Some(name),
            ..QuotaEntity::default()
        }
    }

    pub fn client(name: EntityName) -> QuotaEntity {
        QuotaEntity {
            client_id: Some(name),
            ..QuotaEntity::default()
        }
    }

    pub fn user_client(user: EntityName, client: EntityName) -> QuotaEntity {
        QuotaEntity {
            user: Some(user),
            client_id: Some(client),
            ip: None,
        }
    }

    /// Its parts as Kafka lists them: (entity type, name or `None` for the default).
    pub fn parts(&self) -> Vec<(&'static str, Option<&str>)> {
        let mut parts = Vec::new();
        if let Some(u) = &self.user {
            parts.push(("user", u.wire()));
        }
        if let Some(c) = &self.client_id {
            parts.push(("client-id", c.wire()));
        }
        if let Some(i) = &self.ip {
            parts.push(("ip", i.wire()));
        }
        parts
    }

    /// The part of type `entity_type` (`user`, `client-id`, `ip`), if the entity has one.
    pub fn part(&self, entity_type: &str) -> Option<&EntityName> {
        match entity_type {
            "user" => self.user.as_ref(),
            "client-id" => self.client_id.as_ref(),
            "ip" => self.ip.as_ref(),
            _ => None,
        }
    }

    pub fn is_valid_shape(&self) -> bool {
        match (&self.user, &self.client_id, &self.ip) {
            (_, _, Some(_)) => self.user.is_none() && self.client_id.is_none(),
            (None, None, None) => false,
            _ => true,
        }
    }
}

/// A quota value (Kafka's double). The controller admits only finite positive values, so
/// equality by bits is equality.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(transparent)]
pub struct QuotaValue(pub f64);

impl Eq for QuotaValue {}

/// The quotas, by entity, then key; an entity without any has no entry.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientQuotas {
    by_entity: BTreeMap<QuotaEntity, BTreeMap<String, QuotaValue>>,
}

impl ClientQuotas {
    /// Sets (`Some`) or removes (`None`) one key of one entity.
    pub fn set(&mut self, entity: &QuotaEntity, key: &str, value: Option<f64>) {
        assert!(
            entity.is_valid_shape(),
            "quota of an invalid entity {entity:?}"
        );
        match value {
            Some(v) => {
                assert!(v.is_finite() && v > 0.0, "quota {key}={v} not positive");
                self.by_entity
                    .entry(entity.clone())
                    .or_default()
                    .insert(key.to_string(), QuotaValue(v));
            }
            None => {
                if let Some(keys) = self.by_entity.get_mut(entity) {
                    keys.remove(key);
                    if keys.is_empty() {
                        self.by_entity.remove(entity);
                    }
                }
            }
        }
    }

    pub fn get(&self, entity: &QuotaEntity, key: &str) -> Option<f64> {
        self.by_entity.get(entity)?.get(key).map(|v| v.0)
    }

    pub fn of(&self, entity: &QuotaEntity) -> Option<&BTreeMap<String, QuotaValue>> {
        self.by_entity.get(entity)
    }

    /// Every entity with a quota, in order, with its keys.
    pub fn all(&self) -> impl Iterator<Item = (&QuotaEntity, &BTreeMap<String, QuotaValue>)> {
        self.by_entity.iter()
    }

    pub fn is_empty(&self) -> bool {
        self.by_entity.is_empty()
    }
}
