//! Finalized features (KIP-584 as KRaft keeps them): which features Weir supports, at which
//! levels, and the controller's decision on an UpdateFeatures request. A finalized level lives
//! in the metadata image (`FeatureLevel` records, so it goes through the quorum, snapshots and
//! restarts); ApiVersions advertises it.
//!
//! Only `transaction.version` is supported (0..=2: 1 flexible `__transaction_state` values, 2
//! transactions v2 of KIP-890 part 2). Weir advertises no `metadata.version` or
//! `group.version`: a client takes a feature's path only when the broker serves it, and those
//! paths are not Weir's to promise. A new cluster (`weir format`) starts at
//! [`NEW_CLUSTER_LEVELS`], as Kafka 4.x's latest production levels; a cluster whose metadata
//! has no record of a feature is at level 0.

use super::image::{MetadataImage, MetadataRecord};

pub const TRANSACTION_VERSION: &str = "transaction.version";

/// A supported feature and its level range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Supported {
    pub name: &'static str,
    pub min: i16,
    pub max: i16,
}

/// Every feature Weir supports (every API version a level needs is served: for
/// `transaction.version` 2, Produce 12, EndTxn 5, TxnOffsetCommit 5, AddPartitionsToTxn 5).
pub const SUPPORTED: &[Supported] = &[Supported {
    name: TRANSACTION_VERSION,
    min: 0,
    max: 2,
}];

/// The levels `weir format` finalizes in a new cluster (Kafka 4.x: transactions v2).
pub const NEW_CLUSTER_LEVELS: &[(&str, i16)] = &[(TRANSACTION_VERSION, 2)];

pub fn supported(name: &str) -> Option<Supported> {
    SUPPORTED.iter().copied().find(|s| s.name == name)
}

/// Kafka's UpdateFeatures upgrade types (v0's `allowDowngrade` maps to safe downgrade).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpgradeType {
    Upgrade,
    SafeDowngrade,
    UnsafeDowngrade,
}

impl UpgradeType {
    pub fn from_code(code: i8) -> Option<UpgradeType> {
        match code {
            1 => Some(UpgradeType::Upgrade),
            2 => Some(UpgradeType::SafeDowngrade),
            3 => Some(UpgradeType::UnsafeDowngrade),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeatureUpdate {
    pub name: String,
    pub level: i16,
    pub upgrade_type: UpgradeType,
}

/// The records of an UpdateFeatures request, or why it is refused (Kafka's KRaft controller
/// takes all updates or none: the first invalid one refuses the request, INVALID_UPDATE_VERSION).
pub fn update(
    image: &MetadataImage,
    updates: &[FeatureUpdate],
) -> Result<Vec<MetadataRecord>, String> {
    let mut records = Vec::new();
    for (i, u) in updates.iter().enumerate() {
        if updates[..i].iter().any(|e| e.name == u.name) {
            return Err(format!("Feature {} appears more than once.", u.name));
        }
        let Some(range) = supported(&u.name) else {
            return Err(format!(
                "Invalid update version {} for feature {}. The controller does not support the given feature.",
                u.level, u.name
            ));
        };
        if u.level < 0 || u.level > range.max || (u.level != 0 && u.level < range.min) {
            return Err(format!(
                "Invalid update version {} for feature {}. Weir supports {}..={}.",
                u.level, u.name, range.min, range.max
            ));
        }
        let current = image.feature_level(&u.name);
        match u.upgrade_type {
            UpgradeType::Upgrade if u.level < current => {
                return Err(format!(
                    "Invalid update version {} for feature {}. Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade.",
                    u.level, u.name
                ))
            }
            UpgradeType::SafeDowngrade | UpgradeType::UnsafeDowngrade if u.level > current => {
                return Err(format!(
                    "Invalid update version {} for feature {}. Can't downgrade to a newer version.",
                    u.level, u.name
                ))
            }
            _ => {}
        }
        if u.level != current {
            records.push(MetadataRecord::FeatureLevel {
                name: u.name.clone(),
                level: u.level,
            });
        }
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tv(level: i16, upgrade_type: UpgradeType) -> FeatureUpdate {
        FeatureUpdate {
            name: TRANSACTION_VERSION.into(),
            level,
            upgrade_type,
        }
    }

    fn at(level: i16) -> MetadataImage {
        let mut image = MetadataImage::default();
        image.apply(
            0,
            &MetadataRecord::FeatureLevel {
                name: TRANSACTION_VERSION.into(),
                level,
            },
        );
        image
    }

    #[test]
    fn upgrades_downgrades_and_refusals() {
        use UpgradeType::*;
        let none = MetadataImage::default();
        assert_eq!(none.feature_level(TRANSACTION_VERSION), 0);
        let upgrade = update(&none, &[tv(2, Upgrade)]).unwrap();
        assert_eq!(
            upgrade,
            vec![MetadataRecord::FeatureLevel {
                name: TRANSACTION_VERSION.into(),
                level: 2
            }]
        );
        // At the level already: nothing to write.
        assert_eq!(update(&at(2), &[tv(2, Upgrade)]).unwrap(), vec![]);
        // Beyond what Weir serves, or negative.
        assert!(update(&none, &[tv(3, Upgrade)])
            .unwrap_err()
            .contains("supports 0..=2"));
        assert!(update(&none, &[tv(-1, Upgrade)]).is_err());
        // A downgrade needs its type; an "upgrade" to an older level is refused.
        assert!(update(&at(2), &[tv(1, Upgrade)])
            .unwrap_err()
            .contains("safe or unsafe"));
        assert_eq!(update(&at(2), &[tv(0, SafeDowngrade)]).unwrap().len(), 1);
        assert!(update(&at(1), &[tv(2, SafeDowngrade)])
            .unwrap_err()
            .contains("newer"));
        // Features Weir does not serve (metadata.version, group.version) are refused.
        for name in ["metadata.version", "group.version", "kraft.version"] {
            let u = FeatureUpdate {
                name: name.into(),
                level: 1,
                upgrade_type: Upgrade,
            };
            assert!(update(&none, &[u])
                .unwrap_err()
                .contains("does not support"));
        }
        // Twice in one request.
        assert!(update(&none, &[tv(1, Upgrade), tv(2, Upgrade)]).is_err());
        // Level 0 removes the feature from the image.
        let mut image = at(2);
        image.apply(
            1,
            &MetadataRecord::FeatureLevel {
                name: TRANSACTION_VERSION.into(),
                level: 0,
            },
        );
        assert!(image.features().is_empty());
    }
}
