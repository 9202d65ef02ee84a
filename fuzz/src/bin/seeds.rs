//! Writes the seed corpora: `fuzz/corpus/requests/` gets one short session per API and version
//! the broker advertises (made with kafka-protocol's encoders, after a CreateTopics so handlers
//! find a topic), and `fuzz/corpus/log_recovery/` gets real partition directories written by
//! the log (clean, crashed, with and without checkpoints). Captured sessions of real clients
//! (`fuzz/capture.py`) sit beside them under `requests/` with a `captured-` prefix.
//!
//! Run from the repository root: `cargo run --manifest-path fuzz/Cargo.toml --bin seeds`.

use std::path::Path;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, Request, StrBytes};
use weir::io::memdisk::MemDisk;
use weir::io::Disk;
use weir::log::batch::BatchBuilder;
use weir::replica::Partition;
use weir_fuzz::harness_io::block_on;
use weir_fuzz::{log_recovery, requests};

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

fn frame<R: Request + Encodable>(request: &R, version: i16, correlation: i32) -> Option<Vec<u8>> {
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(correlation)
        .with_client_id(Some(StrBytes::from_static_str("seed")));
    let mut buf = BytesMut::new();
    header.encode(&mut buf, R::header_version(version)).ok()?;
    request.encode(&mut buf, version).ok()?;
    Some(buf.to_vec())
}

fn batch(producer: Option<(i64, i16, i32)>) -> Bytes {
    let mut b = BatchBuilder::new(1_767_225_600_000);
    b.push(Some(b"key"), Some(b"value"), 1_767_225_600_000);
    b.push(None, Some(b"second"), 1_767_225_600_001);
    let (pid, epoch, seq) = producer.unwrap_or((-1, -1, -1));
    Bytes::from(b.finish(pid, epoch, seq))
}

fn create_topics() -> CreateTopicsRequest {
    CreateTopicsRequest::default()
        .with_timeout_ms(5_000)
        .with_topics(vec![creatable("t", 2)])
}

fn creatable(topic: &str, partitions: i32) -> create_topics_request::CreatableTopic {
    create_topics_request::CreatableTopic::default()
        .with_name(name(topic))
        .with_num_partitions(partitions)
        .with_replication_factor(1)
        .with_configs(vec![create_topics_request::CreatableTopicConfig::default()
            .with_name(StrBytes::from_static_str("retention.ms"))
            .with_value(Some(StrBytes::from_static_str("60000")))])
}

fn produce(producer: Option<(i64, i16, i32)>) -> ProduceRequest {
    weir::client::produce_request(
        "t",
        &[(0, batch(producer)), (1, batch(None))],
        -1,
        std::time::Duration::from_secs(5),
    )
}

fn fetch() -> FetchRequest {
    use fetch_request::{FetchPartition, FetchTopic};
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(100)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(name("t"))
            .with_partitions(vec![
                FetchPartition::default()
                    .with_partition(0)
                    .with_fetch_offset(0)
                    .with_partition_max_bytes(1 << 16),
                FetchPartition::default()
                    .with_partition(1)
                    .with_fetch_offset(1)
                    .with_partition_max_bytes(1 << 16),
            ])])
}

fn resource(kind: i8, name: &str) -> (i8, StrBytes) {
    (kind, StrBytes::from_string(name.to_string()))
}

/// One request of `api` at `version`, with content where a default would be trivial.
fn request(api: ApiKey, version: i16, correlation: i32) -> Option<Vec<u8>> {
    use kafka_protocol::messages::*;
    let (topic_kind, topic) = resource(2, "t");
    match api {
        ApiKey::Produce => frame(&produce(None), version, correlation),
        ApiKey::Fetch => frame(&fetch(), version, correlation),
        ApiKey::ListOffsets => {
            use list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
            let partitions = [-1i64, -2, -3, 1_767_225_600_000]
                .iter()
                .enumerate()
                .map(|(i, &ts)| {
                    ListOffsetsPartition::default()
                        .with_partition_index(i as i32 % 2)
                        .with_timestamp(ts)
                })
                .collect();
            let r = ListOffsetsRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_topics(vec![ListOffsetsTopic::default()
                    .with_name(name("t"))
                    .with_partitions(partitions)]);
            frame(&r, version, correlation)
        }
        ApiKey::Metadata => {
            let r = MetadataRequest::default()
                .with_topics(Some(vec![
                    metadata_request::MetadataRequestTopic::default().with_name(Some(name("t"))),
                    metadata_request::MetadataRequestTopic::default().with_name(Some(name("auto"))),
                ]))
                .with_allow_auto_topic_creation(true);
            frame(&r, version, correlation)
        }
        ApiKey::FindCoordinator => {
            // The key moved into a list in v4: each version accepts only its own field.
            let group = StrBytes::from_static_str("group");
            let r = match version {
                0..=3 => FindCoordinatorRequest::default().with_key(group),
                _ => FindCoordinatorRequest::default().with_coordinator_keys(vec![group]),
            };
            frame(&r, version, correlation)
        }
        ApiKey::ApiVersions => {
            let r = ApiVersionsRequest::default()
                .with_client_software_name(StrBytes::from_static_str("seed"))
                .with_client_software_version(StrBytes::from_static_str("1"));
            frame(&r, version, correlation)
        }
        ApiKey::CreateTopics => {
            let r = CreateTopicsRequest::default()
                .with_timeout_ms(5_000)
                .with_topics(vec![creatable("u", 3), creatable("t", 1)]);
            frame(&r, version, correlation)
        }
        ApiKey::DeleteTopics => {
            let r = match version {
                0..=5 => DeleteTopicsRequest::default().with_topic_names(vec![name("t")]),
                _ => DeleteTopicsRequest::default()
                    .with_topics(vec![delete_topics_request::DeleteTopicState::default()
                        .with_name(Some(name("t")))]),
            };
            let r = r.with_timeout_ms(5_000);
            frame(&r, version, correlation)
        }
        ApiKey::InitProducerId => frame(
            &InitProducerIdRequest::default()
                .with_transaction_timeout_ms(60_000)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
            version,
            correlation,
        ),
        ApiKey::DescribeConfigs => {
            let r = DescribeConfigsRequest::default()
                .with_resources(vec![
                    describe_configs_request::DescribeConfigsResource::default()
                        .with_resource_type(topic_kind)
                        .with_resource_name(topic.clone()),
                    describe_configs_request::DescribeConfigsResource::default()
                        .with_resource_type(4)
                        .with_resource_name(StrBytes::from_static_str("1")),
                ])
                .with_include_synonyms(true)
                .with_include_documentation(version >= 3);
            frame(&r, version, correlation)
        }
        ApiKey::AlterConfigs => {
            use alter_configs_request::{AlterConfigsResource, AlterableConfig};
            let r =
                AlterConfigsRequest::default().with_resources(vec![AlterConfigsResource::default(
                )
                .with_resource_type(topic_kind)
                .with_resource_name(topic.clone())
                .with_configs(vec![AlterableConfig::default()
                    .with_name(StrBytes::from_static_str("cleanup.policy"))
                    .with_value(Some(StrBytes::from_static_str("delete")))])]);
            frame(&r, version, correlation)
        }
        ApiKey::IncrementalAlterConfigs => {
            use incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
            let r = IncrementalAlterConfigsRequest::default().with_resources(vec![
                AlterConfigsResource::default()
                    .with_resource_type(topic_kind)
                    .with_resource_name(topic.clone())
                    .with_configs(vec![AlterableConfig::default()
                        .with_name(StrBytes::from_static_str("message.timestamp.type"))
                        .with_config_operation(0)
                        .with_value(Some(StrBytes::from_static_str("LogAppendTime")))]),
            ]);
            frame(&r, version, correlation)
        }
        ApiKey::CreatePartitions => {
            let r = CreatePartitionsRequest::default()
                .with_topics(vec![
                    create_partitions_request::CreatePartitionsTopic::default()
                        .with_name(name("t"))
                        .with_count(4),
                ])
                .with_timeout_ms(5_000);
            frame(&r, version, correlation)
        }
        // An API the broker advertises that this writer does not know yet gets no seed of its
        // own (it is reported); mutation still reaches it from the other seeds' headers.
        _ => None,
    }
}

/// The APIs and versions the broker advertises, from its own ApiVersions answer.
fn advertised() -> Vec<(ApiKey, i16, i16)> {
    let disk = MemDisk::new(1);
    let io = weir_fuzz::harness_io::io(&disk);
    let broker = block_on(weir::broker::Broker::start(requests::config(), io))
        .unwrap()
        .broker;
    let ask = frame(&ApiVersionsRequest::default(), 3, 1).unwrap();
    let answer = block_on(broker.handle_request(Bytes::from(ask), weir_fuzz::requests::PEER))
        .unwrap()
        .unwrap();
    use kafka_protocol::protocol::Decodable;
    let mut body = answer.slice(4..);
    ResponseHeader::decode(&mut body, 0).unwrap();
    let response = ApiVersionsResponse::decode(&mut body, 3).unwrap();
    response
        .api_keys
        .iter()
        .filter_map(|k| {
            ApiKey::try_from(k.api_key)
                .ok()
                .map(|api| (api, k.min_version, k.max_version))
        })
        .collect()
}

fn write(dir: &Path, name: &str, bytes: &[u8]) {
    std::fs::write(dir.join(name), bytes).unwrap();
}

fn request_seeds(root: &Path) {
    let dir = root.join("requests");
    std::fs::create_dir_all(&dir).unwrap();
    let mut written = 0;
    for (api, min, max) in advertised() {
        for version in min..=max {
            let setup = frame(&create_topics(), 5, 1).unwrap();
            let Some(body) = request(api, version, 2) else {
                eprintln!("no seed for {api:?} v{version}");
                continue;
            };
            // Twice: the second sees what the first changed (a topic, a config, a record).
            let again = request(api, version, 3).unwrap();
            let session = requests::stream(&[setup, body, again]);
            write(&dir, &format!("{api:?}-v{version}"), &session);
            written += 1;
        }
    }
    // An idempotent producer: InitProducerId, then a batch and its retry.
    let session = requests::stream(&[
        frame(&create_topics(), 5, 1).unwrap(),
        frame(
            &InitProducerIdRequest::default()
                .with_transaction_timeout_ms(60_000)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
            4,
            2,
        )
        .unwrap(),
        frame(&produce(Some((0, 0, 0))), 9, 3).unwrap(),
        frame(&produce(Some((0, 0, 0))), 9, 4).unwrap(),
        frame(&produce(Some((0, 0, 2))), 9, 5).unwrap(),
        frame(&fetch(), 12, 6).unwrap(),
    ]);
    write(&dir, "idempotent-producer", &session);
    eprintln!("{written} request seeds (+1 session)");
}

/// A partition directory as the log leaves it, turned into a `log_recovery` input.
fn log_seed(batches: usize, checkpoint: bool, clean: bool, segment_bytes: u64) -> Vec<u8> {
    let disk = MemDisk::new(5);
    let dir = Path::new("/data/t-0");
    disk.create_dir_all(dir.parent().unwrap()).unwrap();
    let mut config = weir::config::ServerConfig::default_single_node().topic_defaults;
    config.segment_bytes = segment_bytes;
    config.index_interval_bytes = 100;
    let open = Partition::open(
        Arc::new(disk.clone()),
        dir,
        "t",
        0,
        config,
        Default::default(),
        0,
    );
    let mut p = block_on(open).unwrap().0;
    for i in 0..batches {
        let producer = (i % 2 == 0).then_some((3, 0, (i / 2) as i32 * 2));
        p.append(&batch(producer), 1_000 + i as i64).unwrap();
    }
    if checkpoint || clean {
        let plan = p.log().flush_plan();
        block_on(weir::log::Log::sync_files(&plan)).unwrap();
        p.flushed(&plan, 2_000);
        let (path, snapshot) = p.producer_snapshot();
        block_on(weir::io::write_file_atomic(&disk, &path, &snapshot)).unwrap();
        let checkpoint = p.log().checkpoint();
        if clean {
            block_on(checkpoint.write_clean()).unwrap();
        } else {
            block_on(checkpoint.write()).unwrap();
        }
    }
    drop(p);
    let mut names = disk.list_dir(dir).unwrap();
    names.sort();
    let segments: Vec<&String> = names.iter().filter(|n| n.ends_with(".log")).collect();
    assert!(
        (1..=4).contains(&segments.len()),
        "{} segments",
        segments.len()
    );
    let read = |n: &str| disk.file_contents(dir.join(n)).unwrap_or_default();
    let mut flags = log_recovery::INDEX | log_recovery::TIME_INDEX;
    flags |= ((segments.len() - 1) as u8) << 3;
    let mut pieces = Vec::new();
    if clean {
        flags |= log_recovery::CLEAN;
    }
    if checkpoint || clean {
        flags |= log_recovery::CHECKPOINT | log_recovery::SNAPSHOT;
        pieces.push(read("recovery-point"));
        pieces.push(read("producer-state"));
    }
    for segment in segments {
        let stem = segment.trim_end_matches(".log");
        pieces.push(read(segment));
        pieces.push(read(&format!("{stem}.index")));
        pieces.push(read(&format!("{stem}.timeindex")));
    }
    let input = log_recovery::input(flags, &pieces);
    // The seed must describe the same files.
    let files = log_recovery::files(&input);
    assert!(files
        .iter()
        .all(|(n, c)| read(n) == *c || n == "clean-shutdown"));
    input
}

fn log_seeds(root: &Path) {
    let dir = root.join("log_recovery");
    std::fs::create_dir_all(&dir).unwrap();
    let cases = [
        ("empty", 0, false, false, 1 << 20),
        ("one-batch-crashed", 1, false, false, 1 << 20),
        ("ten-batches-crashed", 10, false, false, 1 << 20),
        ("ten-batches-checkpointed", 10, true, false, 1 << 20),
        ("ten-batches-clean", 10, false, true, 1 << 20),
        ("three-segments-crashed", 9, false, false, 400),
        ("three-segments-checkpointed", 9, true, false, 400),
        ("three-segments-clean", 9, false, true, 400),
    ];
    for (name, batches, checkpoint, clean, segment_bytes) in cases {
        write(
            &dir,
            name,
            &log_seed(batches, checkpoint, clean, segment_bytes),
        );
    }
    eprintln!("{} log seeds", cases.len());
}

fn main() {
    let root = Path::new("fuzz/corpus");
    request_seeds(root);
    log_seeds(root);
}
