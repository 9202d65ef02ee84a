//! ApiVersions: the APIs this broker implements and the versions it speaks. Only what is
//! implemented is advertised (clients choose features by it: kafka-python refuses idempotence
//! without InitProducerId, librdkafka skips compression without FindCoordinator).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse};

/// (API, lowest, highest) served. Ceilings sit below the codec's where a newer version changes
/// semantics Weir does not have yet (Produce 12+ transactions v2 and topic ids, Fetch 17+
/// follower-only fields, InitProducerId 5+ two-phase commit). OffsetCommit and OffsetFetch v9
/// carry KIP-848 member epochs, which a classic group ignores as Kafka's does.
const SUPPORTED: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 11),
    (ApiKey::Fetch, 4, 16),
    (ApiKey::ListOffsets, 1, 10),
    (ApiKey::Metadata, 0, 13),
    (ApiKey::FindCoordinator, 0, 6),
    (ApiKey::ApiVersions, 0, 4),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 6),
    (ApiKey::InitProducerId, 0, 4),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::AlterConfigs, 0, 2),
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    (ApiKey::DeleteRecords, 0, 2),
    (ApiKey::OffsetForLeaderEpoch, 2, 4),
    (ApiKey::DescribeAcls, 1, 3),
    (ApiKey::CreateAcls, 1, 3),
    (ApiKey::DeleteAcls, 1, 3),
    (ApiKey::DescribeUserScramCredentials, 0, 0),
    (ApiKey::AlterUserScramCredentials, 0, 0),
    (ApiKey::DescribeCluster, 0, 2),
    (ApiKey::DescribeQuorum, 0, 2),
    (ApiKey::DescribeTopicPartitions, 0, 0),
    (ApiKey::ElectLeaders, 0, 2),
    (ApiKey::OffsetCommit, 2, 9),
    (ApiKey::OffsetFetch, 1, 9),
    (ApiKey::JoinGroup, 0, 9),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 5),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::DescribeGroups, 0, 6),
    (ApiKey::ListGroups, 0, 5),
    (ApiKey::DeleteGroups, 0, 2),
    (ApiKey::OffsetDelete, 0, 0),
    // KIP-848: librdkafka with group.protocol=consumer speaks v1 only (client-made member ids).
    (ApiKey::ConsumerGroupHeartbeat, 0, 1),
    (ApiKey::ConsumerGroupDescribe, 0, 1),
];

pub fn is_supported(api: ApiKey, version: i16) -> bool {
    SUPPORTED
        .iter()
        .any(|&(key, min, max)| key == api && (min..=max).contains(&version))
}

fn api_keys() -> Vec<ApiVersion> {
    SUPPORTED
        .iter()
        .map(|&(key, min, max)| {
            let codec = key.valid_versions();
            // Never advertise past what the codec can decode.
            assert!(
                codec.min <= min && max <= codec.max,
                "{key:?} beyond codec range"
            );
            ApiVersion::default()
                .with_api_key(key as i16)
                .with_min_version(min)
                .with_max_version(max)
        })
        .collect()
}

pub fn handle() -> ApiVersionsResponse {
    ApiVersionsResponse::default().with_api_keys(api_keys())
}

/// The inter-node APIs only the controller listener answers, each at every version the codec
/// decodes (`quorum_rpc::decode_request` accepts that range). Fetch is in [`SUPPORTED`].
const CONTROLLER_ONLY: &[ApiKey] = &[
    ApiKey::Vote,
    ApiKey::BeginQuorumEpoch,
    ApiKey::EndQuorumEpoch,
    ApiKey::BrokerRegistration,
    ApiKey::BrokerHeartbeat,
    ApiKey::AlterPartition,
];

/// ApiVersions on the controller listener: what clients get there too (forwarded requests
/// arrive on it), and the inter-node APIs a broker asks of the controller.
pub fn handle_controller() -> ApiVersionsResponse {
    let mut keys = api_keys();
    keys.extend(CONTROLLER_ONLY.iter().map(|&key| {
        let codec = key.valid_versions();
        ApiVersion::default()
            .with_api_key(key as i16)
            .with_min_version(codec.min)
            .with_max_version(codec.max)
    }));
    ApiVersionsResponse::default().with_api_keys(keys)
}

/// The answer to an ApiVersions version we do not speak: encoded as v0 so any client reads it,
/// with the versions we do speak, so it can retry.
pub fn unsupported_response() -> kafka_protocol::messages::ResponseKind {
    kafka_protocol::messages::ResponseKind::ApiVersions(
        ApiVersionsResponse::default()
            .with_error_code(ResponseError::UnsupportedVersion.code())
            .with_api_keys(api_keys()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advertised_versions_fit_the_codec() {
        assert_eq!(handle().api_keys.len(), SUPPORTED.len());
        assert!(is_supported(ApiKey::Produce, 9));
        assert!(!is_supported(ApiKey::Produce, 2));
        assert!(is_supported(ApiKey::JoinGroup, 0));
        // KIP-848: librdkafka's group.protocol=consumer needs v1.
        assert!(is_supported(ApiKey::ConsumerGroupHeartbeat, 1));
        assert!(is_supported(ApiKey::ConsumerGroupDescribe, 1));
        assert!(!is_supported(ApiKey::ConsumerGroupHeartbeat, 2));
    }

    #[test]
    fn the_controller_listener_also_advertises_alter_partition_v2_v3() {
        let keys = handle_controller().api_keys;
        let alter = keys
            .iter()
            .find(|k| k.api_key == ApiKey::AlterPartition as i16)
            .expect("AlterPartition advertised");
        assert_eq!((alter.min_version, alter.max_version), (2, 3));
        assert!(keys.iter().any(|k| k.api_key == ApiKey::Produce as i16));
        assert!(!handle()
            .api_keys
            .iter()
            .any(|k| k.api_key == ApiKey::AlterPartition as i16));
    }
}
