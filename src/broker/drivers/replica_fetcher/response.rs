//! Each partition of the leader's Fetch response, decoded into the follower core's
//! [`Answer`](crate::replica::fetcher::Answer), sorted as Kafka's `AbstractFetcherThread`
//! sorts them (the core decides what each one leads to):
//! - a diverging epoch (KIP-320): truncate (at the lower of the leader's and our own end of that epoch)
//!   and take nothing else from the answer, not even its high watermark;
//! - records (maybe none): append them at the leader's offsets, follow its high watermark;
//! - OFFSET_OUT_OF_RANGE: ask the leader for its log start and end;
//! - NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, unknown topic or
//!   partition: this broker or the leader is behind on metadata; back off, and a newer image
//!   re-arms the partition at once;
//! - anything else: back off (`replica.fetch.backoff.ms`) and fetch again.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_response::PartitionData;

use crate::log::leader_epochs::EpochEnd;

pub use crate::replica::fetcher::Answer as Outcome;

/// Sorts one partition of the answer.
pub fn classify(data: &PartitionData) -> Outcome {
    let code = data.error_code;
    if code == 0 {
        let d = &data.diverging_epoch;
        // Absent is (-1, -1), as Kafka's `FetchResponse.isDivergingEpoch`.
        if d.epoch != -1 || d.end_offset != -1 {
            return Outcome::Diverging(EpochEnd {
                epoch: d.epoch,
                end_offset: d.end_offset,
            });
        }
        return Outcome::Records {
            records: data.records.clone().unwrap_or_default(),
            high_watermark: data.high_watermark,
            log_start_offset: data.log_start_offset,
        };
    }
    match ResponseError::try_from_code(code) {
        Some(ResponseError::OffsetOutOfRange) => Outcome::OutOfRange,
        Some(
            ResponseError::NotLeaderOrFollower
            | ResponseError::FencedLeaderEpoch
            | ResponseError::UnknownLeaderEpoch
            | ResponseError::UnknownTopicOrPartition
            | ResponseError::UnknownTopicId,
        ) => Outcome::WaitForMetadata(code),
        _ => Outcome::Retry(code),
    }
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::fetch_response::EpochEndOffset;

    use bytes::Bytes;

    use super::*;

    fn data() -> PartitionData {
        PartitionData::default()
            .with_high_watermark(7)
            .with_log_start_offset(2)
            .with_records(Some(Bytes::from_static(b"batches")))
    }

    #[test]
    fn each_answer_is_sorted_as_kafkas_fetcher_does() {
        assert_eq!(
            classify(&data()),
            Outcome::Records {
                records: Bytes::from_static(b"batches"),
                high_watermark: 7,
                log_start_offset: 2
            }
        );
        // No records at all is an empty append (the high watermark still travels).
        let empty = data().with_records(None);
        assert!(matches!(classify(&empty), Outcome::Records { records, .. } if records.is_empty()));
        // A diverging epoch wins over everything else in the partition's answer.
        let diverging = data()
            .with_diverging_epoch(EpochEndOffset::default().with_epoch(3).with_end_offset(40));
        assert_eq!(
            classify(&diverging),
            Outcome::Diverging(EpochEnd {
                epoch: 3,
                end_offset: 40
            })
        );
        let code = |e: ResponseError| data().with_error_code(e.code());
        assert_eq!(
            classify(&code(ResponseError::OffsetOutOfRange)),
            Outcome::OutOfRange
        );
        for e in [
            ResponseError::NotLeaderOrFollower,
            ResponseError::FencedLeaderEpoch,
            ResponseError::UnknownLeaderEpoch,
            ResponseError::UnknownTopicOrPartition,
            ResponseError::UnknownTopicId,
        ] {
            assert_eq!(classify(&code(e)), Outcome::WaitForMetadata(e.code()));
        }
        let storage = ResponseError::KafkaStorageError;
        assert_eq!(classify(&code(storage)), Outcome::Retry(storage.code()));
        // A code this build does not know is retried, never trusted.
        assert_eq!(classify(&data().with_error_code(999)), Outcome::Retry(999));
    }
}
