//! The rdkafka crate against the Weir release binary: admin create and delete, an idempotent
//! compressed producer, a consumer that reads every partition back, watermarks, and a
//! consumer's close. Every wait is bounded.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures_executor::block_on;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header, Headers, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use weir_e2e_rs::Weir;

const PARTITIONS: i32 = 3;
const RECORDS: usize = 900;
const DEADLINE: Duration = Duration::from_secs(60);

fn config(weir: &Weir) -> ClientConfig {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", &weir.bootstrap);
    config
}

fn admin(weir: &Weir) -> AdminClient<DefaultClientContext> {
    config(weir).create().expect("admin client")
}

fn create_topic(weir: &Weir, topic: &str, partitions: i32) {
    let new = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
    let results = block_on(admin(weir).create_topics([&new], &AdminOptions::new()))
        .expect("CreateTopics request");
    assert_eq!(results.len(), 1);
    results[0].as_ref().expect("topic created");
}

fn partition_count(weir: &Weir, topic: &str) -> Option<usize> {
    let consumer: BaseConsumer = config(weir).create().expect("consumer");
    let metadata = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .expect("metadata");
    metadata
        .topics()
        .iter()
        .find(|t| t.name() == topic && t.error().is_none())
        .map(|t| t.partitions().len())
}

/// Produces `RECORDS` records with keys, values and a header, spread over every partition;
/// returns where each was acknowledged: (partition, offset) → value.
fn produce(weir: &Weir, topic: &str) -> BTreeMap<(i32, i64), String> {
    let producer: FutureProducer = config(weir)
        .set("enable.idempotence", "true")
        .set("compression.type", "lz4")
        .set("linger.ms", "5")
        .create()
        .expect("producer");
    let mut pending = Vec::with_capacity(RECORDS);
    for i in 0..RECORDS {
        let key = format!("key-{i}");
        let value = format!("value-{i}");
        let headers = OwnedHeaders::new().insert(Header {
            key: "seq",
            value: Some(&i.to_string()),
        });
        let record = FutureRecord::to(topic)
            .key(&key)
            .payload(&value)
            .partition(i as i32 % PARTITIONS)
            .headers(headers);
        let delivery = producer
            .send_result(record)
            .map_err(|(e, _)| e)
            .expect("enqueue");
        pending.push((value, delivery));
    }
    producer.flush(DEADLINE).expect("flush");
    let mut acked = BTreeMap::new();
    for (value, delivery) in pending {
        let delivery = block_on(delivery)
            .expect("delivery report")
            .unwrap_or_else(|(e, _)| panic!("delivery of {value} failed: {e}"));
        assert!(
            acked
                .insert((delivery.partition, delivery.offset), value)
                .is_none(),
            "two records acknowledged at {}:{}",
            delivery.partition,
            delivery.offset
        );
    }
    acked
}

/// Reads every partition from the beginning until `expected` records arrived (or the deadline
/// passed) and returns them: (partition, offset) → value, checking key and header on the way.
fn consume(consumer: &BaseConsumer, topic: &str, expected: usize) -> BTreeMap<(i32, i64), String> {
    let mut assignment = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        assignment
            .add_partition_offset(topic, p, Offset::Beginning)
            .expect("assignment");
    }
    consumer.assign(&assignment).expect("assign");
    let mut read = BTreeMap::new();
    let deadline = Instant::now() + DEADLINE;
    while read.len() < expected && Instant::now() < deadline {
        let Some(message) = consumer.poll(Duration::from_millis(200)) else {
            continue;
        };
        let message = message.expect("consume");
        let value = String::from_utf8(message.payload().expect("payload").to_vec()).unwrap();
        let i: usize = value.strip_prefix("value-").unwrap().parse().unwrap();
        assert_eq!(message.key(), Some(format!("key-{i}").as_bytes()));
        let headers = message.headers().expect("headers");
        assert_eq!(headers.count(), 1);
        let seq = headers.get(0);
        assert_eq!(seq.key, "seq");
        assert_eq!(seq.value, Some(i.to_string().as_bytes()));
        assert!(
            read.insert((message.partition(), message.offset()), value)
                .is_none(),
            "offset {}:{} read twice",
            message.partition(),
            message.offset()
        );
    }
    read
}

#[test]
fn idempotent_lz4_produce_then_consume_every_partition() {
    let weir = Weir::start(1);
    let topic = "rdkafka-produce-consume";
    create_topic(&weir, topic, PARTITIONS);
    assert_eq!(partition_count(&weir, topic), Some(PARTITIONS as usize));

    let acked = produce(&weir, topic);
    assert_eq!(acked.len(), RECORDS);
    // Offsets are dense from 0 in every partition.
    for p in 0..PARTITIONS {
        let offsets: Vec<i64> = acked.keys().filter(|k| k.0 == p).map(|k| k.1).collect();
        let expected: Vec<i64> = (0..offsets.len() as i64).collect();
        assert_eq!(offsets, expected, "partition {p}");
    }

    // librdkafka's KafkaConsumer needs a group.id even to assign(); nothing is committed.
    let consumer: BaseConsumer = config(&weir)
        .set("group.id", "rdkafka-produce-consume")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let read = consume(&consumer, topic, RECORDS);
    assert_eq!(
        read, acked,
        "what was read differs from what was acknowledged"
    );

    for p in 0..PARTITIONS {
        let (low, high) = consumer
            .fetch_watermarks(topic, p, Duration::from_secs(10))
            .expect("watermarks");
        assert_eq!(low, 0);
        assert_eq!(
            high as usize,
            RECORDS / PARTITIONS as usize,
            "partition {p}"
        );
    }
}

#[test]
fn consumer_with_group_id_closes_promptly() {
    // A consumer with a group.id that only assign()s: closing it must not wait on a
    // coordinator for long (librdkafka's test 0053 spent 45 s there).
    let weir = Weir::start(PARTITIONS as u32);
    let topic = "rdkafka-close";
    create_topic(&weir, topic, PARTITIONS);
    let acked = produce(&weir, topic);
    let consumer: BaseConsumer = config(&weir)
        .set("group.id", "rdkafka-close-group")
        .set("enable.auto.commit", "true")
        .create()
        .expect("consumer");
    let read = consume(&consumer, topic, RECORDS);
    assert_eq!(read.len(), acked.len());
    let started = Instant::now();
    drop(consumer); // close, then destroy
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(10),
        "consumer close took {took:?}"
    );
}

#[test]
fn admin_delete_topic_removes_it() {
    let weir = Weir::start(1);
    let topic = "rdkafka-delete-me";
    create_topic(&weir, topic, 2);
    assert_eq!(partition_count(&weir, topic), Some(2));
    let results = block_on(admin(&weir).delete_topics(&[topic], &AdminOptions::new()))
        .expect("DeleteTopics request");
    results[0].as_ref().expect("topic deleted");
    let deadline = Instant::now() + Duration::from_secs(10);
    while partition_count(&weir, topic).is_some() {
        assert!(
            Instant::now() < deadline,
            "{topic} still listed after delete"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
