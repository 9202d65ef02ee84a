//! Finalized features on the wire: ApiVersions' feature fields (KIP-584) from the metadata
//! image, and UpdateFeatures (relayed to the active controller, which decides with
//! `controller::features`). Clients choose protocol paths by these: a Java 4.x producer takes
//! transactions v2 only when `transaction.version` 2 is finalized.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::api_versions_response::{FinalizedFeatureKey, SupportedFeatureKey};
use kafka_protocol::messages::update_features_response::UpdatableFeatureResult;
use kafka_protocol::messages::{
    ApiVersionsResponse, UpdateFeaturesRequest, UpdateFeaturesResponse,
};
use kafka_protocol::protocol::StrBytes;

use crate::acl::Operation;
use crate::broker::api::RequestContext;
use crate::broker::{errors, shared::Broker};
use crate::controller::features::{self, FeatureUpdate, UpgradeType, SUPPORTED};
use crate::controller::MetadataImage;

/// Adds the supported and finalized features to an ApiVersions answer (v3+). Before v4, a feature
/// whose minimum level is 0 is left out of the supported ones, as Kafka does (older clients
/// refuse a minimum of 0). The finalized epoch is the image's metadata offset (as KRaft's), so
/// it only grows and a client re-reads the features when it does.
pub(crate) fn advertise(
    image: &MetadataImage,
    version: i16,
    response: ApiVersionsResponse,
) -> ApiVersionsResponse {
    if version < 3 {
        return response; // the feature fields are v3's tagged fields
    }
    let supported = SUPPORTED
        .iter()
        .filter(|s| version >= 4 || s.min > 0)
        .map(|s| {
            SupportedFeatureKey::default()
                .with_name(StrBytes::from_static_str(s.name))
                .with_min_version(s.min)
                .with_max_version(s.max)
        })
        .collect();
    let finalized = image
        .features()
        .iter()
        .filter(|(name, _)| features::supported(name).is_some())
        .map(|(name, level)| {
            FinalizedFeatureKey::default()
                .with_name(StrBytes::from_string(name.clone()))
                .with_min_version_level(*level)
                .with_max_version_level(*level)
        })
        .collect();
    // No finalized feature: the epoch stays -1 (the default, not encoded), so a cluster at
    // level 0 answers byte for byte as before features were served. A client that saw level 2
    // and then sees -1 keeps using v2, which is still served at every level.
    let epoch = if image.features().is_empty() {
        -1
    } else {
        image.applied().max(0)
    };
    response
        .with_supported_features(supported)
        .with_finalized_features_epoch(epoch)
        .with_finalized_features(finalized)
}

/// UpdateFeatures at the active controller: all updates or none (KRaft's rule); ALTER on the
/// cluster. v0's `allowDowngrade` is a safe downgrade; v2 answers only the top-level error.
pub(crate) async fn update(
    broker: &Broker,
    ctx: &RequestContext,
    req: UpdateFeaturesRequest,
) -> UpdateFeaturesResponse {
    let names: Vec<StrBytes> = req
        .feature_updates
        .iter()
        .map(|u| u.feature.clone())
        .collect();
    let version = ctx.version;
    let answer = |code: ResponseError, message: Option<String>| {
        let code = if message.is_some() { code.code() } else { 0 };
        let results = if version >= 2 {
            Vec::new()
        } else {
            names
                .iter()
                .map(|n| {
                    UpdatableFeatureResult::default()
                        .with_feature(n.clone())
                        .with_error_code(code)
                        .with_error_message(message.clone().map(StrBytes::from_string))
                })
                .collect()
        };
        UpdateFeaturesResponse::default()
            .with_error_code(code)
            .with_error_message(message.map(StrBytes::from_string))
            .with_results(results)
    };
    if !broker.authz(ctx).cluster(Operation::Alter) {
        return answer(
            ResponseError::ClusterAuthorizationFailed,
            Some("Cluster authorization failed.".into()),
        );
    }
    let mut updates = Vec::with_capacity(req.feature_updates.len());
    for u in &req.feature_updates {
        let upgrade_type = if version == 0 {
            Some(if u.allow_downgrade {
                UpgradeType::SafeDowngrade
            } else {
                UpgradeType::Upgrade
            })
        } else {
            UpgradeType::from_code(u.upgrade_type)
        };
        let Some(upgrade_type) = upgrade_type else {
            return answer(
                ResponseError::InvalidRequest,
                Some(format!("Unknown upgrade type {}", u.upgrade_type)),
            );
        };
        updates.push(FeatureUpdate {
            name: u.feature.to_string(),
            level: u.max_version_level,
            upgrade_type,
        });
    }
    let decided = broker
        .change_metadata_until(Some(ctx.deadline), req.validate_only, move |_, image| {
            Ok(match features::update(image, &updates) {
                Ok(records) => (records, None),
                Err(why) => (Vec::new(), Some(why)),
            })
        })
        .await;
    match decided {
        Ok(refused) => answer(ResponseError::InvalidUpdateVersion, refused),
        Err(e) => answer(errors::commit(&e), Some(e.to_string())),
    }
}
