//! The frames a peer link carries: a request encoded for a peer, a peer's response decoded
//! (garbage is an error, never a panic).

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

/// A request's frame (header and body, no size prefix); the link sets the correlation id.
pub fn encode_request(
    key: ApiKey,
    version: i16,
    client_id: &str,
    body: &RequestKind,
) -> anyhow::Result<Vec<u8>> {
    // Sized for the usual request (a replica fetch, a quorum RPC, a heartbeat): no growth from
    // empty; and handed over as the frame's `Vec` without a copy.
    let mut buf = BytesMut::with_capacity(256);
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(0)
        .with_client_id(Some(StrBytes::from_string(client_id.to_string())))
        .encode(&mut buf, key.request_header_version(version))?;
    body.encode(&mut buf, version)?;
    Ok(buf.into())
}

/// Decodes a response frame to `key` at `version`. A peer's garbage is an error, never a
/// panic.
pub fn decode_response(
    key: ApiKey,
    version: i16,
    mut frame: Bytes,
) -> anyhow::Result<ResponseKind> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        ResponseHeader::decode(&mut frame, key.response_header_version(version))?;
        ResponseKind::decode(key, &mut frame, version)
    }))
    .map_err(|_| anyhow::anyhow!("the {key:?} response decoder panicked"))?
}
