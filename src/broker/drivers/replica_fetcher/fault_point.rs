//! The replica fetcher's fault point (simulator and unit tests only; `config::fault_points`):
//! `catch_up_answer_lost`. A follower catching up (out of the ISR, fetching below the leader's
//! high watermark) loses the leader's answer for a partition, records and all, as if the
//! network had dropped it; the partition backs off `replica.fetch.backoff.ms` and asks again.
//!
//! The moment it aims at: the leader may have admitted this follower to the ISR on that very
//! fetch. Kafka admits a follower only once its fetch offset reaches the high watermark (it
//! holds what was committed), so a lost answer costs nothing but time; a leader that counted
//! the answer's records as held (`isr-expand-one-fetch-early`) has put a replica in the ISR
//! that lacks committed records for a whole backoff, and an election then loses them.

use uuid::Uuid;

use crate::broker::shared::Broker;
use crate::config::FaultPoints;
use crate::controller::MetadataImage;
use crate::replica::fetcher::{Answer, Position};

/// `answer` for `(topic_id, partition)` as this follower takes it: lost (a retry) when the
/// point strikes.
pub(super) fn catch_up_answer_lost(
    broker: &Broker,
    image: &MetadataImage,
    sent: &[Position],
    (topic_id, partition): (Uuid, i32),
    answer: Answer,
) -> Answer {
    let chance = broker.config.fault_points.catch_up_answer_lost;
    if chance <= 0.0 {
        return answer;
    }
    let Answer::Records {
        records,
        high_watermark,
        ..
    } = &answer
    else {
        return answer;
    };
    let Some(position) = sent
        .iter()
        .find(|p| p.topic_id == topic_id && p.partition == partition)
    else {
        return answer;
    };
    let catching_up = !records.is_empty()
        && position.fetch_offset < *high_watermark
        && broker.out_of_isr(image, &position.topic, partition, broker.config.node_id);
    if !catching_up || !FaultPoints::strikes(chance, broker.io.rng.as_ref()) {
        return answer;
    }
    tracing::debug!(
        topic = %position.topic,
        partition,
        fetch_offset = position.fetch_offset,
        high_watermark,
        "fault point catch_up_answer_lost: the answer is dropped"
    );
    Answer::Retry(kafka_protocol::error::ResponseError::RequestTimedOut.code())
}
