//! The classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) and the rebalance
//! they drive: Empty → PreparingRebalance → CompletingRebalance → Stable, as Kafka's
//! `ClassicGroup` and the classic half of `GroupMetadataManager`.

mod heartbeat;
mod join;
mod rebalance;
mod static_join;
mod sync;

use super::*;

/// A new member's id: the client id (or instance id) and a UUID from the driver's randomness.
fn mint_member_id(prefix: &str, fresh: u128) -> String {
    let uuid = uuid::Builder::from_random_bytes(fresh.to_be_bytes()).into_uuid();
    format!("{prefix}-{uuid}")
}

/// A SyncGroup answer carrying the member's assignment of the current generation.
fn sync_answer(g: &Group, member_id: &str) -> Response {
    Response::Sync(SyncResponse {
        error: None,
        protocol_type: g.protocol_type.clone(),
        protocol_name: g.protocol.clone(),
        assignment: g.members[member_id].assignment.clone(),
    })
}
