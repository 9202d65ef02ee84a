//! One member of a classic group, as the coordinator tracks it.

use bytes::Bytes;

use super::types::RequestId;

/// A JoinGroup waiting for the rebalance to complete.
#[derive(Clone, Copy, Debug)]
pub(super) struct ParkedJoin {
    pub request: RequestId,
}

#[derive(Clone, Debug)]
pub(super) struct Member {
    pub id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    /// Protocol names with their (opaque) subscription metadata, in the member's preference order.
    pub protocols: Vec<(String, Bytes)>,
    /// What the leader assigned it in the current generation (opaque).
    pub assignment: Bytes,
    pub join: Option<ParkedJoin>,
    pub sync: Option<RequestId>,
    /// Last sign of life (heartbeat, join completion, sync, commit).
    pub last_heard: i64,
    /// Joined but not yet through a completed join: its parked join is capped.
    pub is_new: bool,
    /// Join order, for deterministic leader choice.
    pub seq: u64,
}

/// How long a new member's first JoinGroup may stay parked (Kafka's `newMemberJoinTimeoutMs`).
pub(super) const NEW_MEMBER_JOIN_TIMEOUT_MS: i64 = 300_000;

impl Member {
    pub fn supports(&self, protocol: &str) -> bool {
        self.protocols.iter().any(|(name, _)| name == protocol)
    }

    pub fn metadata(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(name, _)| name == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }

    /// When the member is considered dead if nothing is heard; `None` while it waits in a
    /// rebalance (the join and sync timers bound those waits instead).
    pub fn session_deadline(&self) -> Option<i64> {
        if self.join.is_some() {
            return self
                .is_new
                .then_some(self.last_heard + NEW_MEMBER_JOIN_TIMEOUT_MS);
        }
        if self.sync.is_some() {
            return None;
        }
        Some(self.last_heard + self.session_timeout_ms as i64)
    }
}
