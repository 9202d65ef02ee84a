//! Consumer groups on the wire: the classic protocol and offsets (`classic`: FindCoordinator,
//! JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, OffsetDelete,
//! ListGroups, DescribeGroups, DeleteGroups) and KIP-848's (`consumer`:
//! ConsumerGroupHeartbeat, ConsumerGroupDescribe). The driver is `drivers::group_coordinator`.

pub(crate) mod classic;
pub(crate) mod consumer;
