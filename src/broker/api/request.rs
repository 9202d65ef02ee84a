//! The one decode of a request frame: its header is read here and nowhere else, against the
//! route table of the listener it came in on.

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind};
use kafka_protocol::protocol::{Decodable, StrBytes};

use super::context::ListenerKind;
use super::frame::catch;
use super::routes::{find, Route};
use super::versions::unsupported_api_versions;

/// A decoded request and the route that serves it.
pub struct Request<'r, B> {
    pub key: ApiKey,
    pub version: i16,
    pub correlation_id: i32,
    /// The header's client id ("" when null).
    pub client_id: StrBytes,
    pub body: RequestKind,
    /// The frame as it arrived (no size prefix), for relaying it byte for byte.
    pub frame: Bytes,
    pub route: &'r Route<B>,
}

impl<B> Request<'_, B> {
    /// Appends the whole frame answering this request with `response` to `out`: its
    /// correlation id, the response header version of its API and version.
    pub fn encode_answer(
        &self,
        out: &mut bytes::BytesMut,
        response: &kafka_protocol::messages::ResponseKind,
    ) -> Result<(), String> {
        let header_version = self.key.response_header_version(self.version);
        super::frame::encode_response(
            out,
            self.correlation_id,
            header_version,
            response,
            self.version,
        )
    }
}

/// What a frame decodes to.
pub enum Decoded<'r, B> {
    Request(Box<Request<'r, B>>),
    /// An ApiVersions of a version this broker does not speak: answered at once (as v0, with
    /// the versions it does speak, so the client can retry lower): this correlation id and
    /// this body.
    Answer(i32, Box<kafka_protocol::messages::ResponseKind>),
}

/// Decodes `frame` (no size prefix) as a request on `listener`; `Err` (the reason) closes the
/// connection: too short, an unknown API, one this listener does not serve at that version,
/// or bytes the codec refuses (or panics on).
pub fn decode<'r, B>(
    frame: Bytes,
    routes: &'r [Route<B>],
    listener: ListenerKind,
) -> Result<Decoded<'r, B>, String> {
    if frame.len() < 8 {
        return Err(format!(
            "request of {} bytes is too short for a header",
            frame.len()
        ));
    }
    let api_key_raw = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    let Ok(key) = ApiKey::try_from(api_key_raw) else {
        return Err(format!("unknown API key {api_key_raw}"));
    };
    let Some(route) = find(routes, listener, key, version) else {
        // ApiVersions must be answered whatever its version, so old clients can retry lower.
        if key == ApiKey::ApiVersions {
            let answer = unsupported_api_versions(routes);
            return Ok(Decoded::Answer(correlation_id, Box::new(answer)));
        }
        return Err(format!("unsupported {key:?} version {version}"));
    };
    let header_version = key.request_header_version(version);
    let mut body = frame.clone();
    let decoded = catch(|| {
        let header = RequestHeader::decode(&mut body, header_version)?;
        let body = RequestKind::decode(key, &mut body, version)?;
        Ok::<_, anyhow::Error>((header, body))
    });
    let (header, body) = match decoded {
        Ok(Ok(decoded)) => decoded,
        Ok(Err(e)) => return Err(format!("undecodable {key:?} v{version}: {e:#}")),
        Err(panic) => return Err(format!("decoder panicked on {key:?} v{version}: {panic}")),
    };
    Ok(Decoded::Request(Box::new(Request {
        key,
        version,
        correlation_id,
        // A view of the frame, not a copy.
        client_id: header.client_id.unwrap_or_default(),
        body,
        frame,
        route,
    })))
}
