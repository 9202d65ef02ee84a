//! Client quotas decided and queried against the committed image (Kafka's
//! `ClientQuotaControlManager` and `ClientQuotasImage.describe`). AlterClientQuotas checks each
//! entry on its own: the entity is `user`, `client-id`, both, or `ip` alone, each part named
//! once, a name never empty (`None` is the default entity); each key is one the entity type
//! takes, named once, with a value above 0, whole for the integral keys. A failed entry is
//! INVALID_REQUEST with Kafka's reason; the others are written as `ClientQuota` records.

use std::collections::BTreeMap;
use std::net::IpAddr;

use super::image::quotas::{EntityName, QuotaEntity, QuotaValue};
use super::{MetadataImage, MetadataRecord};

/// The keys of user and client-id entities, and whether each is integral (Kafka's LONG).
pub const CLIENT_KEYS: &[(&str, bool)] = &[
    ("producer_byte_rate", true),
    ("consumer_byte_rate", true),
    ("request_percentage", false),
    ("controller_mutation_rate", false),
];

/// The key of IP entities (KIP-612), an INT.
pub const IP_KEYS: &[(&str, bool)] = &[("connection_creation_rate", true)];

/// One operation of an entry: set `key` to `value`, or remove it.
#[derive(Clone, Debug)]
pub struct QuotaOp {
    pub key: String,
    pub value: f64,
    pub remove: bool,
}

/// An entry as the request gives it: the entity's (type, name) parts and its operations.
#[derive(Clone, Debug)]
pub struct QuotaAlteration {
    pub entity: Vec<(String, Option<String>)>,
    pub ops: Vec<QuotaOp>,
}

/// An entity described, with its quota values by key.
pub type Described = (QuotaEntity, BTreeMap<String, f64>);

/// Why an entry or a filter is refused: always INVALID_REQUEST, with this message.
pub type Invalid = String;

/// The entity the parts name, or why they name none.
pub fn entity_of(parts: &[(String, Option<String>)]) -> Result<QuotaEntity, Invalid> {
    let mut entity = QuotaEntity::default();
    if parts.is_empty() {
        return Err("Invalid empty client quota entity".into());
    }
    for (entity_type, name) in parts {
        if name.as_deref() == Some("") {
            return Err(format!("Invalid empty {entity_type} name"));
        }
        let slot = match entity_type.as_str() {
            "user" => &mut entity.user,
            "client-id" => &mut entity.client_id,
            "ip" => &mut entity.ip,
            other => return Err(format!("Unhandled client quota entity type: {other}")),
        };
        if slot.is_some() {
            return Err(format!(
                "Duplicate {entity_type} entity in the quota entity"
            ));
        }
        *slot = Some(EntityName::from_wire(name.as_deref()));
    }
    if !entity.is_valid_shape() {
        return Err(
            "Invalid quota entity combination, IP entity should not be combined with User or ClientId"
                .into(),
        );
    }
    if let Some(EntityName::Named(ip)) = &entity.ip {
        if ip.parse::<IpAddr>().is_err() {
            return Err(format!("{ip} is not a valid IP or resolvable host."));
        }
    }
    Ok(entity)
}

fn check_op(entity: &QuotaEntity, op: &QuotaOp) -> Result<(), Invalid> {
    let keys = if entity.ip.is_some() {
        IP_KEYS
    } else {
        CLIENT_KEYS
    };
    let Some((_, integral)) = keys.iter().find(|(k, _)| *k == op.key) else {
        return Err(format!("Invalid configuration key {}", op.key));
    };
    if op.remove {
        return Ok(());
    }
    if !op.value.is_finite() || op.value <= 0.0 {
        return Err(format!("Quota {} must be greater than 0", op.key));
    }
    if *integral && (op.value.fract() != 0.0 || op.value > i64::MAX as f64) {
        return Err(format!("Configuration {} must be a Long value", op.key));
    }
    Ok(())
}

/// The records of the valid entries (none when `validate_only`) and each entry's outcome, in
/// request order (with the entity as requested, for the answer).
pub fn alter(
    image: &MetadataImage,
    entries: Vec<QuotaAlteration>,
    validate_only: bool,
) -> (Vec<MetadataRecord>, Vec<Result<(), Invalid>>) {
    // Entries apply in order: a later one sees what an earlier one set.
    let mut after = image.quotas().clone();
    let mut records = Vec::new();
    let mut results = Vec::new();
    for entry in entries {
        let checked = entity_of(&entry.entity).and_then(|entity| {
            let mut seen = BTreeMap::new();
            for op in &entry.ops {
                check_op(&entity, op)?;
                if seen.insert(op.key.clone(), ()).is_some() {
                    return Err(format!("Duplicate quota key {}", op.key));
                }
            }
            Ok(entity)
        });
        let entity = match checked {
            Ok(entity) => entity,
            Err(why) => {
                results.push(Err(why));
                continue;
            }
        };
        for op in entry.ops {
            let value = (!op.remove).then_some(op.value);
            if after.get(&entity, &op.key) == value {
                continue; // unchanged (a removal of an unset key included)
            }
            after.set(&entity, &op.key, value);
            if !validate_only {
                records.push(MetadataRecord::ClientQuota {
                    entity: entity.clone(),
                    key: op.key,
                    value: value.map(QuotaValue),
                });
            }
        }
        results.push(Ok(()));
    }
    (records, results)
}

/// One filter component of DescribeClientQuotas.
#[derive(Clone, Debug)]
pub struct FilterComponent {
    pub entity_type: String,
    /// 0: exactly `name`; 1: the default entity; 2: any entity of the type.
    pub match_type: i8,
    pub name: Option<String>,
}

/// The entities matching the filter, in order, with their keys (Kafka's
/// `ClientQuotasImage.describe`): each component constrains its entity type; with `strict`
/// the entity has no other type.
pub fn describe(
    image: &MetadataImage,
    components: &[FilterComponent],
    strict: bool,
) -> Result<Vec<Described>, Invalid> {
    let mut by_type: BTreeMap<&str, &FilterComponent> = BTreeMap::new();
    for c in components {
        match c.entity_type.as_str() {
            "user" | "client-id" | "ip" => {}
            other => return Err(format!("Invalid entity type {other}")),
        }
        if by_type.insert(c.entity_type.as_str(), c).is_some() {
            return Err(format!(
                "Entity type {} cannot appear more than once in the filter.",
                c.entity_type
            ));
        }
        match (c.match_type, &c.name) {
            (0, None) => {
                return Err(format!(
                    "Cannot match exactly a null {} entity name",
                    c.entity_type
                ))
            }
            (1, Some(_)) | (2, Some(_)) => {
                return Err(format!(
                    "Match type {} takes no name for entity type {}",
                    c.match_type, c.entity_type
                ))
            }
            (0..=2, _) => {}
            (other, _) => return Err(format!("Unknown match type {other}")),
        }
    }
    let has_ip = by_type.contains_key("ip");
    if has_ip && (by_type.contains_key("user") || by_type.contains_key("client-id")) {
        return Err("Invalid entity filter component combination, IP filter component should not be used with User or ClientId filter component.".into());
    }
    let matches = |entity: &QuotaEntity| {
        for (entity_type, c) in &by_type {
            let Some(part) = entity.part(entity_type) else {
                return false;
            };
            let ok = match c.match_type {
                0 => part.wire() == c.name.as_deref(),
                1 => *part == EntityName::Default,
                _ => true,
            };
            if !ok {
                return false;
            }
        }
        !strict || entity.parts().len() == by_type.len()
    };
    Ok(image
        .quotas()
        .all()
        .filter(|(e, _)| matches(e))
        .map(|(e, keys)| {
            (
                e.clone(),
                keys.iter().map(|(k, v)| (k.clone(), v.0)).collect(),
            )
        })
        .collect())
}

#[cfg(test)]
mod tests;
