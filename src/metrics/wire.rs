//! What a request and its response say for the per-topic counters, read once per request in
//! the api layer (not in each handler): a produce's bytes and record counts per partition from
//! its batch headers (one header read per batch, never per record), counted when the response
//! says the partition's append succeeded; a fetch's record bytes per topic from its response.

use std::borrow::Cow;
use std::collections::BTreeMap;

use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};
use uuid::Uuid;

use super::Metrics;
use crate::log::batch::BatchHeader;

/// A topic as a request names it: by name, or by id (Produce v13+, Fetch v13+).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum TopicRef {
    Name(String),
    Id(Uuid),
}

fn topic_ref(name: &str, id: Uuid) -> TopicRef {
    if name.is_empty() && !id.is_nil() {
        TopicRef::Id(id)
    } else {
        TopicRef::Name(name.to_string())
    }
}

/// What a request's body says before it is handled (the body moves into the handler).
#[derive(Debug, Default)]
pub struct RequestTally {
    /// Produce: (topic, partition, (bytes, records)), each pair once (a repeated pair keeps
    /// its last entry). A list, not a map: a produce names a few partitions, and looking one
    /// up here costs no clone of its topic's name.
    produce: Vec<(TopicRef, i32, (u64, u64))>,
    /// Fetch: the fetching replica's id (-1 for consumers).
    fetch_replica: Option<i32>,
}

impl RequestTally {
    pub fn of(body: &RequestKind, version: i16) -> RequestTally {
        let mut tally = RequestTally::default();
        match body {
            RequestKind::Produce(req) => {
                for t in &req.topic_data {
                    let topic = topic_ref(t.name.as_str(), t.topic_id);
                    for p in &t.partition_data {
                        let bytes = p.records.as_ref().map_or(&[][..], |b| &b[..]);
                        let totals = batch_totals(bytes);
                        match tally.find_produced(&topic, p.index) {
                            Some(at) => tally.produce[at].2 = totals,
                            None => tally.produce.push((topic.clone(), p.index, totals)),
                        }
                    }
                }
            }
            RequestKind::Fetch(req) => {
                let id = if version >= 15 {
                    req.replica_state.replica_id.0
                } else {
                    req.replica_id.0
                };
                tally.fetch_replica = Some(id);
            }
            _ => {}
        }
        tally
    }

    /// Where `topic`-`index` is in `produce`.
    fn find_produced(&self, topic: &TopicRef, index: i32) -> Option<usize> {
        self.produce
            .iter()
            .position(|(t, i, _)| *i == index && t == topic)
    }

    /// The `request` label of this request (Fetch split by who asks).
    pub fn request_name(&self, key: ApiKey) -> std::borrow::Cow<'static, str> {
        super::request_name(key, self.fetch_replica)
    }

    /// Counts what `response` says was appended or returned; `name_of` resolves topic ids.
    pub fn count(
        &self,
        metrics: &Metrics,
        response: &ResponseKind,
        name_of: &dyn Fn(Uuid) -> Option<String>,
    ) {
        // A named topic's name is borrowed, not copied.
        fn named<'t>(
            t: &'t TopicRef,
            name_of: &dyn Fn(Uuid) -> Option<String>,
        ) -> Option<Cow<'t, str>> {
            match t {
                TopicRef::Name(n) => Some(Cow::Borrowed(n.as_str())),
                TopicRef::Id(id) => name_of(*id).map(Cow::Owned),
            }
        }
        match response {
            ResponseKind::Produce(r) => {
                // Per topic: (bytes, records, any partition failed).
                let mut topics: BTreeMap<String, (u64, u64, bool)> = BTreeMap::new();
                for t in &r.responses {
                    let topic = topic_ref(t.name.as_str(), t.topic_id);
                    let Some(name) = named(&topic, name_of) else {
                        continue;
                    };
                    if !topics.contains_key(name.as_ref()) {
                        topics.insert(name.to_string(), Default::default());
                    }
                    let entry = topics.get_mut(name.as_ref()).expect("inserted above");
                    for p in &t.partition_responses {
                        let sent = self
                            .find_produced(&topic, p.index)
                            .map(|at| &self.produce[at].2);
                        match (p.error_code, sent) {
                            (0, Some((bytes, records))) => {
                                entry.0 += bytes;
                                entry.1 += records;
                            }
                            _ => entry.2 = true,
                        }
                    }
                }
                for (topic, (bytes, records, failed)) in topics {
                    metrics.produced(&topic, bytes, records, failed);
                }
            }
            ResponseKind::Fetch(r) => {
                let follower = self.fetch_replica.is_some_and(|id| id >= 0);
                for t in &r.responses {
                    let bytes: u64 = t
                        .partitions
                        .iter()
                        .filter_map(|p| p.records.as_ref())
                        .map(|b| b.len() as u64)
                        .sum();
                    if bytes == 0 {
                        continue;
                    }
                    // As `topic_ref`, without copying the name.
                    let name = if t.topic.is_empty() && !t.topic_id.is_nil() {
                        name_of(t.topic_id).map(Cow::Owned)
                    } else {
                        Some(Cow::Borrowed(t.topic.as_str()))
                    };
                    if let Some(name) = name {
                        metrics.fetched(&name, bytes, follower);
                    }
                }
            }
            _ => {}
        }
    }
}

impl RequestTally {
    /// An acks=0 produce gets no response to read: its partitions count as appended, as a
    /// Kafka broker counts what it appends without telling the producer.
    pub fn count_unanswered(&self, metrics: &Metrics, name_of: &dyn Fn(Uuid) -> Option<String>) {
        let mut topics: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        for (topic, _, (bytes, records)) in &self.produce {
            let name = match topic {
                TopicRef::Name(n) => Some(n.clone()),
                TopicRef::Id(id) => name_of(*id),
            };
            if let Some(name) = name {
                let entry = topics.entry(name).or_default();
                entry.0 += bytes;
                entry.1 += records;
            }
        }
        for (topic, (bytes, records)) in topics {
            metrics.produced(&topic, bytes, records, false);
        }
    }
}

/// (bytes, records) of the record batches in `buf`, from their headers; a malformed tail
/// ends the walk (the handler refuses such a batch anyway).
fn batch_totals(buf: &[u8]) -> (u64, u64) {
    let mut records = 0u64;
    let mut at = 0;
    while at < buf.len() {
        let Ok(header) = BatchHeader::parse(&buf[at..]) else {
            break;
        };
        records += header.record_count.max(0) as u64;
        at = at.saturating_add(header.total_len());
    }
    (buf.len() as u64, records)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::batch::BatchBuilder;

    #[test]
    fn batch_totals_read_every_header() {
        let mut one = BatchBuilder::new(0);
        one.push(None, Some(b"a"), 0);
        one.push(None, Some(b"b"), 0);
        let mut two = BatchBuilder::new(0);
        two.push(None, Some(b"c"), 0);
        let mut buf = one.finish(-1, -1, -1);
        buf.extend_from_slice(&two.finish(-1, -1, -1));
        assert_eq!(batch_totals(&buf), (buf.len() as u64, 3));
        assert_eq!(batch_totals(&buf[..10]), (10, 0));
    }

    fn batch(records: usize) -> Vec<u8> {
        let mut b = BatchBuilder::new(0);
        for _ in 0..records {
            b.push(None, Some(b"v"), 0);
        }
        b.finish(-1, -1, -1)
    }

    /// Bytes and messages in count only partitions whose append the response confirms.
    #[test]
    fn a_produce_counts_what_its_response_confirms() {
        use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
        use kafka_protocol::messages::produce_response::{
            PartitionProduceResponse, TopicProduceResponse,
        };
        use kafka_protocol::messages::{ProduceRequest, ProduceResponse, TopicName};
        use kafka_protocol::protocol::StrBytes;

        let (ok, failed) = (batch(4), batch(9));
        let name = TopicName(StrBytes::from_static_str("t"));
        let req = ProduceRequest::default().with_topic_data(vec![TopicProduceData::default()
            .with_name(name.clone())
            .with_partition_data(vec![
                PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(ok.clone().into())),
                PartitionProduceData::default()
                    .with_index(1)
                    .with_records(Some(failed.into())),
            ])]);
        let tally = RequestTally::of(&RequestKind::Produce(req), 9);
        let resp = ProduceResponse::default().with_responses(vec![TopicProduceResponse::default()
            .with_name(name)
            .with_partition_responses(vec![
                PartitionProduceResponse::default().with_index(0),
                PartitionProduceResponse::default()
                    .with_index(1)
                    .with_error_code(6),
            ])]);
        let m = Metrics::new();
        tally.count(&m, &ResponseKind::Produce(resp), &|_| None);
        let text = super::super::render(&m, &Default::default());
        let line = |series: &str| {
            text.lines()
                .find(|l| l.starts_with(series))
                .map(str::to_string)
        };
        assert_eq!(
            line("kafka_server_brokertopicmetrics_messagesin_total{topic=\"t\"}"),
            Some("kafka_server_brokertopicmetrics_messagesin_total{topic=\"t\"} 4".into())
        );
        assert_eq!(
            line("kafka_server_brokertopicmetrics_bytesin_total{topic=\"t\"}"),
            Some(format!(
                "kafka_server_brokertopicmetrics_bytesin_total{{topic=\"t\"}} {}",
                ok.len()
            ))
        );
        assert!(
            line("kafka_server_brokertopicmetrics_failedproducerequests_total{topic=\"t\"} 1")
                .is_some()
        );
    }
}
