//! The `requests` target: a fresh broker on a `MemDisk` answers a client's byte stream, then is
//! stopped, restarted, killed and restarted again.
//!
//! Input: what a client writes on one connection, i.e. request frames, each a big-endian i32
//! size and that many bytes (at most [`MAX_FRAMES`]; a size that does not fit takes the rest of
//! the input). A captured client session is a valid input as it is.
//!
//! What must hold, beyond "never panics, never hangs":
//! - every answer is one well-formed response frame for the request's API and version, with the
//!   request's correlation id, that the codec decodes back;
//! - a request the broker refuses ends the stream, as it would close the connection;
//! - whatever the requests did to the metadata survives a clean restart and a crash restart
//!   unchanged, and both restarts succeed.

use std::collections::BTreeMap;

use bytes::{Buf, Bytes};
use kafka_protocol::messages::{
    ApiKey, CreatePartitionsRequest, CreateTopicsRequest, RequestHeader, ResponseHeader,
    ResponseKind,
};
use kafka_protocol::protocol::Decodable;
use weir::broker::Broker;
use weir::config::ServerConfig;
use weir::io::memdisk::MemDisk;

use crate::harness_io::{block_on, io, kill_tasks};

/// The client address the harness's requests come from.
pub const PEER: std::net::SocketAddr =
    std::net::SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 50_000);

/// Requests per input: enough for a client session, bounded so one input stays fast.
pub const MAX_FRAMES: usize = 64;

/// Splits a client stream into request frames (see the module doc).
pub fn frames(mut data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while data.len() >= 4 && out.len() < MAX_FRAMES {
        let size = i32::from_be_bytes([data[0], data[1], data[2], data[3]]);
        data = &data[4..];
        let size = if size < 0 || size as usize > data.len() {
            data.len()
        } else {
            size as usize
        };
        out.push(&data[..size]);
        data = &data[size..];
    }
    out
}

/// Joins frames into a client stream (for the seed writer).
pub fn stream(frames: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for f in frames {
        out.extend_from_slice(&(f.len() as i32).to_be_bytes());
        out.extend_from_slice(f);
    }
    out
}

/// Partitions one request may ask for in the harness. The broker takes up to 10 000, but
/// opening thousands of partitions on `MemDisk` (whose directory listing scans every file)
/// costs seconds, which libFuzzer reports as a hang; such requests are skipped, not sent.
const MAX_PARTITIONS_ASKED: i64 = 64;

/// Whether a frame is a CreateTopics or CreatePartitions asking for too many partitions.
pub(crate) fn too_costly(frame: &[u8]) -> bool {
    if frame.len() < 8 {
        return false;
    }
    let Ok(api) = ApiKey::try_from(i16::from_be_bytes([frame[0], frame[1]])) else {
        return false;
    };
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    if !matches!(api, ApiKey::CreateTopics | ApiKey::CreatePartitions) {
        return false;
    }
    let valid = api.valid_versions();
    if !(valid.min..=valid.max).contains(&version) {
        return false;
    }
    let mut buf = Bytes::copy_from_slice(frame);
    let decoded = std::panic::catch_unwind(move || {
        RequestHeader::decode(&mut buf, api.request_header_version(version)).ok()?;
        let asked: i64 = match api {
            ApiKey::CreateTopics => CreateTopicsRequest::decode(&mut buf, version)
                .ok()?
                .topics
                .iter()
                .map(|t| t.num_partitions.max(1) as i64)
                .sum(),
            _ => CreatePartitionsRequest::decode(&mut buf, version)
                .ok()?
                .topics
                .iter()
                .map(|t| t.count.max(0) as i64)
                .sum(),
        };
        Some(asked)
    });
    matches!(decoded, Ok(Some(asked)) if asked > MAX_PARTITIONS_ASKED)
}

pub fn config() -> ServerConfig {
    let props = BTreeMap::from([
        (
            "listeners".to_string(),
            "PLAINTEXT://127.0.0.1:9092".to_string(),
        ),
        ("log.dirs".to_string(), "/data".to_string()),
        ("weir.fsync.before.ack".to_string(), "true".to_string()),
    ]);
    ServerConfig::from_properties(&props)
        .expect("the harness config is valid")
        .0
}

/// The metadata as the broker publishes it, to compare across restarts.
fn topics(broker: &Broker) -> Vec<(String, String, i32, BTreeMap<String, String>)> {
    broker
        .image()
        .topics()
        .map(|t| {
            (
                t.name.clone(),
                t.id.to_string(),
                t.partitions,
                t.configs.clone(),
            )
        })
        .collect()
}

pub fn run(data: &[u8]) {
    kill_tasks();
    let disk = MemDisk::new(7);
    let io = io(&disk);
    let running = block_on(Broker::start(config(), io.clone())).expect("a fresh broker starts");
    let broker = running.broker;
    for frame in frames(data) {
        if too_costly(frame) {
            continue;
        }
        match block_on(broker.handle_request(Bytes::copy_from_slice(frame), PEER)) {
            Ok(Some(response)) => check_response(frame, response),
            Ok(None) => {}
            // The connection would close here: nothing after it is read.
            Err(_) => break,
        }
    }
    let before = topics(&broker);
    block_on(broker.shutdown()).expect("a clean shutdown on a healthy disk succeeds");
    drop(broker);
    kill_tasks();
    let restarted = block_on(Broker::start(config(), io.clone()))
        .expect("a broker restarts on what it wrote")
        .broker;
    assert_eq!(
        topics(&restarted),
        before,
        "metadata changed across a clean restart"
    );
    drop(restarted);
    kill_tasks();
    disk.process_crash();
    let recovered = block_on(Broker::start(config(), io))
        .expect("a broker restarts after a crash")
        .broker;
    assert_eq!(
        topics(&recovered),
        before,
        "metadata changed across a crash restart"
    );
}

/// An answer is one frame for the request's API and version that decodes back.
fn check_response(request: &[u8], response: Bytes) {
    assert!(request.len() >= 8, "a too-short request was answered");
    let api_key = ApiKey::try_from(i16::from_be_bytes([request[0], request[1]]))
        .expect("only known API keys are answered");
    let mut version = i16::from_be_bytes([request[2], request[3]]);
    let correlation_id = i32::from_be_bytes([request[4], request[5], request[6], request[7]]);
    let mut body = response;
    assert!(body.len() >= 8, "response frame too short");
    let size = body.get_i32();
    assert_eq!(size as usize, body.len(), "response size prefix");
    let header_version = api_key.response_header_version(version);
    let header = ResponseHeader::decode(&mut body, header_version).expect("response header");
    assert_eq!(header.correlation_id, correlation_id);
    let mut decoded = ResponseKind::decode(api_key, &mut body.clone(), version);
    if decoded.is_err() && api_key == ApiKey::ApiVersions {
        // An unsupported ApiVersions version is answered at v0 (as Kafka does), so that the
        // client can read the versions it may retry with.
        version = 0;
        decoded = ResponseKind::decode(api_key, &mut body.clone(), version);
    }
    if let Err(e) = decoded {
        panic!("{api_key:?} v{version}: the response does not decode: {e:#}");
    }
    let _ = ResponseKind::decode(api_key, &mut body, version);
    assert!(
        body.is_empty(),
        "{api_key:?} v{version}: {} bytes after the response",
        body.len()
    );
}
