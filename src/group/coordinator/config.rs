//! The settings the coordinator honours, and its hard bounds.

use crate::group::consumer::ConsumerConfig;

/// Broker settings the coordinator honours (Kafka's keys, see `config::server`).
#[derive(Clone, Debug)]
pub struct GroupConfig {
    /// `group.initial.rebalance.delay.ms`.
    pub initial_rebalance_delay_ms: i64,
    /// `group.min.session.timeout.ms`.
    pub min_session_timeout_ms: i32,
    /// `group.max.session.timeout.ms`.
    pub max_session_timeout_ms: i32,
    /// `group.max.size`.
    pub max_size: usize,
    /// `offset.metadata.max.bytes`.
    pub offset_metadata_max_bytes: usize,
    /// `offsets.retention.minutes`, in ms.
    pub offsets_retention_ms: i64,
    /// Bound on groups held (a hard limit Kafka does not have; new groups past it are refused).
    pub max_groups: usize,
    /// The consumer protocol's settings (KIP-848).
    pub consumer: ConsumerConfig,
    /// Simulator and tests: the bug planted in the classic protocol and offsets
    /// (`GroupKeepsDepartedMember`, `GroupCommitStaleGeneration`).
    #[cfg(any(madsim, test))]
    pub planted: crate::config::planted::Planted,
}

impl Default for GroupConfig {
    fn default() -> GroupConfig {
        GroupConfig {
            initial_rebalance_delay_ms: 3000,
            min_session_timeout_ms: 6000,
            max_session_timeout_ms: 1_800_000,
            max_size: MAX_MEMBERS,
            offset_metadata_max_bytes: 4096,
            offsets_retention_ms: 7 * 24 * 3600 * 1000,
            max_groups: 100_000,
            consumer: ConsumerConfig::default(),
            #[cfg(any(madsim, test))]
            planted: Default::default(),
        }
    }
}

/// Hard bound on members (plus pending members) of one group, whatever `group.max.size` says:
/// every member can park two requests, so this bounds the parked requests too.
pub const MAX_MEMBERS: usize = 10_000;
/// Bound on partitions in one commit, delete or fetch.
pub(super) const MAX_PARTITIONS_PER_REQUEST: usize = 100_000;
