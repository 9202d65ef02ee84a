//! Forwarding: a client request that changes metadata (or asks DescribeQuorum), arriving at a
//! node that is not the active controller, is relayed byte for byte to the quorum leader's
//! controller listener and its answer returned to the client (only the correlation id is
//! rewritten). Kafka's brokers forward these to the controller (KIP-590); relaying the raw
//! frame keeps every version and field intact. The wait is bounded; when no leader is known
//! or the relay fails, the request is handled locally, which answers NOT_CONTROLLER (or
//! NOT_LEADER_OR_FOLLOWER for DescribeQuorum), both retriable.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::ApiKey;

use super::{versions, Broker};
use crate::protocol::frame::{finish_frame, start_frame};

/// How long a relayed request may take (a commit waits up to 10 s on the leader).
const FORWARD_TIMEOUT: Duration = Duration::from_millis(15_000);

const FORWARDED: &[ApiKey] = &[
    ApiKey::CreateTopics,
    ApiKey::DeleteTopics,
    ApiKey::CreatePartitions,
    ApiKey::AlterConfigs,
    ApiKey::IncrementalAlterConfigs,
    ApiKey::DescribeQuorum,
];

/// The relayed response frame (size prefix included), or `None` to handle the request here.
pub(super) async fn forward(broker: &Broker, frame: &Bytes) -> Option<BytesMut> {
    let quorum = broker.quorum.as_ref()?;
    if frame.len() < 8 {
        return None;
    }
    let key = ApiKey::try_from(i16::from_be_bytes([frame[0], frame[1]])).ok()?;
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    if !FORWARDED.contains(&key) || !versions::is_supported(key, version) {
        return None;
    }
    let leader_side = if key == ApiKey::DescribeQuorum {
        quorum.status().leader == Some(quorum.node_id())
    } else {
        quorum.is_active()
    };
    if leader_side {
        return None;
    }
    let link = quorum.leader_link()?;
    let correlation = [frame[4], frame[5], frame[6], frame[7]];
    let rx = link.call(frame.to_vec());
    let response = match broker.io.timeout(FORWARD_TIMEOUT, rx).await {
        Some(Ok(Ok(r))) => r,
        other => {
            let why = match other {
                Some(Ok(Err(e))) => e.to_string(),
                None => "timed out".to_string(),
                _ => "connection lost".to_string(),
            };
            tracing::debug!(?key, leader = %link.addr(), %why, "forwarding to the controller failed");
            return None;
        }
    };
    let mut out = BytesMut::with_capacity(response.len() + 4);
    start_frame(&mut out);
    out.extend_from_slice(&correlation);
    out.extend_from_slice(&response[4..]);
    finish_frame(&mut out);
    Some(out)
}
