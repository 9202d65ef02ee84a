//! Response framing and the codec's panic guard.

use std::panic::AssertUnwindSafe;

use bytes::BytesMut;
use kafka_protocol::messages::{ResponseHeader, ResponseKind};
use kafka_protocol::protocol::Encodable;

use crate::protocol::frame::{finish_frame, start_frame};

/// Appends one whole response frame (size prefix, header, body) to `out`.
pub fn encode_response(
    out: &mut BytesMut,
    correlation_id: i32,
    header_version: i16,
    body: &ResponseKind,
    version: i16,
) -> Result<(), String> {
    start_frame(out);
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    header
        .encode(out, header_version)
        .map_err(|e| format!("encoding response header: {e}"))?;
    // An encoder refusal is our bug (a field the version lacks): log it loudly.
    body.encode(out, version).map_err(|e| {
        tracing::error!(error = %e, version, "response encoding failed");
        format!("response encoding failed: {e}")
    })?;
    finish_frame(out);
    Ok(())
}

/// Runs a decoder, turning a panic inside the codec into an error for this connection only.
pub fn catch<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    std::panic::catch_unwind(AssertUnwindSafe(f)).map_err(|panic| {
        panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".to_string())
    })
}
