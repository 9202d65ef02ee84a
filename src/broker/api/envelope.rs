//! The Envelope (KIP-590) a broker wraps a client's request in to relay it to the active
//! controller: the client's frame as it arrived, who asked and from where, and (Weir's own
//! tagged field) the controller epoch the relay was sent for.
//!
//! The epoch fences late relays. A relay's bytes can reach a node long after the relaying
//! broker gave up on them (a connection that was cut and healed delivers what it held); by
//! then that node may lead the quorum again, in a later epoch, and the client's request may
//! have been carried out, undone and retried elsewhere meanwhile. A controller carries out an
//! envelope only in the epoch it was sealed for ([`Opened::fenced`]); otherwise it answers
//! NOT_CONTROLLER and the relaying broker, if it still waits, tries the controller it now
//! knows. (Seen in the simulator: a CreateTopics relayed to an isolated controller arrived
//! nine seconds late and re-created a topic deleted in between.)

use std::net::IpAddr;

use bytes::{Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    ApiKey, EnvelopeRequest, EnvelopeResponse, RequestHeader, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use super::frame::catch;

/// The Envelope version Weir sends and serves.
pub const VERSION: i16 = 0;

/// The tag of the controller epoch (4 bytes, big-endian) in an envelope's tagged fields.
/// Kafka's own envelopes have none (and are not fenced); Kafka ignores an unknown tag.
pub const EPOCH_TAG: i32 = 0x5745;

/// An envelope request frame (header and body, no size prefix; a `peer::Link` writes the
/// correlation id) carrying `inner`, a client's request frame (no size prefix), for the
/// controller of `epoch`, on behalf of `principal` at `client`.
pub fn seal(
    inner: &[u8],
    epoch: u32,
    principal: &str,
    client: IpAddr,
    client_id: &str,
) -> Result<Vec<u8>, String> {
    let address = match client {
        IpAddr::V4(a) => Bytes::copy_from_slice(&a.octets()),
        IpAddr::V6(a) => Bytes::copy_from_slice(&a.octets()),
    };
    let body = EnvelopeRequest::default()
        .with_request_data(Bytes::copy_from_slice(inner))
        .with_request_principal(Some(Bytes::copy_from_slice(principal.as_bytes())))
        .with_client_host_address(address)
        .with_unknown_tagged_field(EPOCH_TAG, Bytes::copy_from_slice(&epoch.to_be_bytes()));
    let mut buf = BytesMut::with_capacity(inner.len() + 64);
    RequestHeader::default()
        .with_request_api_key(ApiKey::Envelope as i16)
        .with_request_api_version(VERSION)
        .with_client_id(Some(StrBytes::from_string(client_id.to_string())))
        .encode(&mut buf, ApiKey::Envelope.request_header_version(VERSION))
        .map_err(|e| format!("encoding an envelope header: {e}"))?;
    body.encode(&mut buf, VERSION)
        .map_err(|e| format!("encoding an envelope: {e}"))?;
    Ok(buf.to_vec())
}

/// An envelope as the controller reads it.
#[derive(Debug, PartialEq, Eq)]
pub struct Opened {
    /// The client's request frame (no size prefix).
    pub frame: Bytes,
    /// The controller epoch it was sealed for; `None` from a sender that does not fence.
    pub epoch: Option<u32>,
    /// Who the client authenticated as, on the relaying broker.
    pub principal: Option<String>,
    /// The client's address, when given as 4 or 16 bytes.
    pub client: Option<IpAddr>,
}

impl Opened {
    /// Whether a controller that is active in `active_epoch` (`None`: not active) must refuse
    /// this envelope (NOT_CONTROLLER): it is not active, or the envelope was sealed for another
    /// epoch, so the request may have been given up on and settled otherwise.
    pub fn fenced(&self, active_epoch: Option<u32>) -> bool {
        match (active_epoch, self.epoch) {
            (None, _) => true,
            (Some(now), Some(sealed)) => now != sealed,
            (Some(_), None) => false,
        }
    }
}

/// Reads an envelope request's fields; `Err` for an epoch field of the wrong size or an
/// undecodable principal (the caller answers INVALID_REQUEST).
pub fn open(envelope: EnvelopeRequest) -> Result<Opened, String> {
    let epoch = match envelope.unknown_tagged_fields.get(&EPOCH_TAG) {
        None => None,
        Some(raw) => {
            let bytes: [u8; 4] = raw[..]
                .try_into()
                .map_err(|_| format!("an envelope epoch of {} bytes", raw.len()))?;
            Some(u32::from_be_bytes(bytes))
        }
    };
    let principal = match envelope.request_principal {
        None => None,
        Some(raw) => Some(
            String::from_utf8(raw.to_vec())
                .map_err(|_| "an envelope principal that is not UTF-8".to_string())?,
        ),
    };
    let address = &envelope.client_host_address[..];
    let client = if let Ok(v4) = <[u8; 4]>::try_from(address) {
        Some(IpAddr::from(v4))
    } else if let Ok(v6) = <[u8; 16]>::try_from(address) {
        Some(IpAddr::from(v6))
    } else {
        None
    };
    Ok(Opened {
        frame: envelope.request_data,
        epoch,
        principal,
        client,
    })
}

/// The controller's answer to an envelope: the inner response frame (correlation id first, no
/// size prefix), or an error that stands for the whole relay.
pub fn answer(inner: Result<Bytes, ResponseError>) -> EnvelopeResponse {
    match inner {
        Ok(frame) => EnvelopeResponse::default().with_response_data(Some(frame)),
        Err(code) => EnvelopeResponse::default().with_error_code(code.code()),
    }
}

/// Reads the controller's answer to an envelope (a response frame, correlation id first):
/// `Ok(Ok(inner frame))`, `Ok(Err(code))` when the controller refused the envelope, `Err` for
/// bytes that are not an envelope answer.
pub fn open_answer(mut frame: Bytes) -> Result<Result<Bytes, ResponseError>, String> {
    let decoded = catch(move || {
        ResponseHeader::decode(
            &mut frame,
            ApiKey::Envelope.response_header_version(VERSION),
        )?;
        EnvelopeResponse::decode(&mut frame, VERSION)
    })?;
    let response = decoded.map_err(|e| format!("undecodable envelope answer: {e:#}"))?;
    if let Some(code) = ResponseError::try_from_code(response.error_code) {
        return Ok(Err(code));
    }
    match response.response_data {
        Some(inner) if inner.len() >= 4 => Ok(Ok(inner)),
        Some(inner) => Err(format!("an envelope answer of {} bytes", inner.len())),
        None => Err("an envelope answer with neither data nor error".to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request_frame(seal_epoch: u32) -> EnvelopeRequest {
        let frame = seal(
            b"inner-frame",
            seal_epoch,
            "User:alice",
            [10, 0, 0, 7].into(),
            "b1",
        )
        .unwrap();
        let mut body = Bytes::from(frame);
        let header_version = ApiKey::Envelope.request_header_version(VERSION);
        let header = RequestHeader::decode(&mut body, header_version).unwrap();
        assert_eq!(header.request_api_key, ApiKey::Envelope as i16);
        EnvelopeRequest::decode(&mut body, VERSION).unwrap()
    }

    #[test]
    fn a_sealed_envelope_opens_to_what_was_sealed() {
        let opened = open(request_frame(7)).unwrap();
        assert_eq!(
            opened,
            Opened {
                frame: Bytes::from_static(b"inner-frame"),
                epoch: Some(7),
                principal: Some("User:alice".to_string()),
                client: Some([10, 0, 0, 7].into()),
            }
        );
    }

    #[test]
    fn only_the_active_controller_of_the_sealed_epoch_carries_it_out() {
        let opened = open(request_frame(7)).unwrap();
        assert!(!opened.fenced(Some(7)));
        assert!(opened.fenced(Some(8)), "a later epoch of the same node");
        assert!(opened.fenced(Some(6)));
        assert!(opened.fenced(None), "not active");
        // A sender that does not fence (Kafka's envelope) is served by any active controller.
        let unfenced = Opened {
            epoch: None,
            ..opened
        };
        assert!(!unfenced.fenced(Some(9)));
        assert!(unfenced.fenced(None));
    }

    #[test]
    fn malformed_fields_are_refused_not_guessed() {
        let short =
            request_frame(1).with_unknown_tagged_field(EPOCH_TAG, Bytes::from_static(b"ab"));
        assert!(open(short).unwrap_err().contains("2 bytes"));
        let bad = request_frame(1).with_request_principal(Some(Bytes::from_static(&[0xff, 0xfe])));
        assert!(open(bad).is_err());
        let odd = request_frame(1).with_client_host_address(Bytes::from_static(b"abc"));
        assert_eq!(open(odd).unwrap().client, None);
    }

    fn answer_frame(response: EnvelopeResponse) -> Bytes {
        let mut buf = BytesMut::new();
        ResponseHeader::default()
            .with_correlation_id(3)
            .encode(&mut buf, ApiKey::Envelope.response_header_version(VERSION))
            .unwrap();
        response.encode(&mut buf, VERSION).unwrap();
        buf.freeze()
    }

    #[test]
    fn answers_round_trip() {
        let inner = Bytes::from_static(b"\0\0\0\x05body");
        let ok = answer_frame(answer(Ok(inner.clone())));
        assert_eq!(open_answer(ok).unwrap(), Ok(inner));
        let refused = answer_frame(answer(Err(ResponseError::NotController)));
        assert_eq!(
            open_answer(refused).unwrap(),
            Err(ResponseError::NotController)
        );
        let empty = answer_frame(EnvelopeResponse::default());
        assert!(open_answer(empty).is_err());
        assert!(open_answer(Bytes::from_static(b"\0\0")).is_err());
    }
}
