//! Weir's BrokerHeartbeat tagged field for KIP-966 part 2: the last epoch and log end of every
//! partition the broker hosts that its image shows awaiting recovery (no leader, ISR and ELR
//! empty). The controller listener is Weir's own, and Kafka ignores unknown tags anyway.
//!
//! Layout: one entry after another, each 32 bytes big-endian: topic id (16), partition (4),
//! last epoch (4), log end (8). A field whose length is not a multiple of 32 is ignored whole.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use uuid::Uuid;

use crate::broker::shared::Broker;
use crate::controller::election::recovery::awaits_recovery;
use crate::controller::election::ReplicaLog;

/// The tag ("WR"), far above Kafka's own BrokerHeartbeat tags.
pub(crate) const REPLICA_LOGS_TAG: i32 = 0x5752;
const ENTRY: usize = 32;

pub(crate) fn encode(logs: &[((Uuid, i32), ReplicaLog)]) -> Bytes {
    let mut buf = BytesMut::with_capacity(logs.len() * ENTRY);
    for ((topic, partition), log) in logs {
        buf.put_slice(topic.as_bytes());
        buf.put_i32(*partition);
        buf.put_i32(log.last_epoch);
        buf.put_i64(log.log_end);
    }
    buf.freeze()
}

pub(crate) fn decode(mut field: &[u8]) -> Vec<((Uuid, i32), ReplicaLog)> {
    if !field.len().is_multiple_of(ENTRY) {
        return Vec::new();
    }
    let mut logs = Vec::with_capacity(field.len() / ENTRY);
    while field.has_remaining() {
        let topic = Uuid::from_u128(field.get_u128());
        let partition = field.get_i32();
        let last_epoch = field.get_i32();
        let log_end = field.get_i64();
        logs.push((
            (topic, partition),
            ReplicaLog {
                last_epoch,
                log_end,
            },
        ));
    }
    logs
}

/// This broker's report: only with `unclean.recovery.manager.enabled`, only logs it has open.
pub(crate) fn local_report(broker: &Broker) -> Vec<((Uuid, i32), ReplicaLog)> {
    if !broker.config.unclean_recovery_manager_enabled {
        return Vec::new();
    }
    let image = broker.image();
    let node = broker.config.node_id;
    let mut logs = Vec::new();
    for ((topic_id, index), p) in image.partitions() {
        if !awaits_recovery(p) || !p.replicas.contains(&node) {
            continue;
        }
        let Some(topic) = image.topic_by_id(topic_id) else {
            continue;
        };
        let Some(handle) = broker.partition(&topic.name, index) else {
            continue;
        };
        let guard = handle.lock();
        logs.push((
            (topic_id, index),
            ReplicaLog {
                last_epoch: guard.log().latest_epoch(),
                log_end: guard.log_end_offset(),
            },
        ));
    }
    logs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_decodes_to_what_was_encoded_and_a_torn_one_to_nothing() {
        let logs = vec![
            (
                (Uuid::from_u128(7), 2),
                ReplicaLog {
                    last_epoch: 4,
                    log_end: 1 << 40,
                },
            ),
            (
                (Uuid::from_u128(u128::MAX), -1),
                ReplicaLog {
                    last_epoch: -1,
                    log_end: 0,
                },
            ),
        ];
        let bytes = encode(&logs);
        assert_eq!(decode(&bytes), logs);
        assert!(decode(&bytes[..40]).is_empty());
        assert!(decode(&[]).is_empty());
    }
}
