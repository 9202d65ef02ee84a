//! One connection to a broker: encodes requests, matches responses by correlation id, and
//! negotiates versions with ApiVersions. Requests can be pipelined: [`Connection::send`] and
//! [`Connection::receive`] are separate so a caller may keep several in flight.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::io;
use std::net::SocketAddr;

use bytes::{Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, RequestHeader, ResponseHeader,
    SaslAuthenticateRequest, SaslHandshakeRequest,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use rustls::pki_types::ServerName;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::io::{BoxStream, Io};
use crate::protocol::frame::{finish_frame, read_frame, start_frame, write_frame, FrameError};
use crate::security::sasl::client::{ClientStep, SaslClient};
use crate::security::tls::stream::TlsStream;

use super::security::Security;

/// Responses larger than this are refused (a broken or hostile peer).
const MAX_RESPONSE: usize = 256 * 1024 * 1024;

/// The read buffer: it holds small responses whole (one read each), while a response at least
/// this large is read straight into its own buffer (tokio's `BufReader` skips its buffer for a
/// read that big), so a larger one gains nothing. It is zeroed once per connection, and the
/// simulator's clients reconnect often: 256 KiB here was a sixth of a simulated run's work.
const READ_BUFFER: usize = 8 * 1024;

#[derive(Debug)]
pub enum ClientError {
    Io(io::Error),
    /// The peer sent something that is not a valid answer.
    Protocol(String),
    /// The broker answered with an error code.
    Kafka(ResponseError, String),
    Timeout,
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Io(e) => write!(f, "i/o: {e}"),
            ClientError::Protocol(m) => write!(f, "protocol: {m}"),
            ClientError::Kafka(code, m) if m.is_empty() => write!(f, "broker error: {code}"),
            ClientError::Kafka(code, m) => write!(f, "broker error: {code}: {m}"),
            ClientError::Timeout => f.write_str("timed out"),
        }
    }
}

impl std::error::Error for ClientError {}

impl From<io::Error> for ClientError {
    fn from(e: io::Error) -> Self {
        ClientError::Io(e)
    }
}

impl ClientError {
    /// Whether retrying the same request may succeed (connection trouble, leader moves...).
    pub fn is_retriable(&self) -> bool {
        match self {
            ClientError::Io(_) | ClientError::Timeout => true,
            ClientError::Kafka(code, _) => code.is_retriable(),
            ClientError::Protocol(_) => false,
        }
    }
}

pub type Result<T> = std::result::Result<T, ClientError>;

pub struct Connection {
    /// Read through the buffer, written straight through it (`BufReader` passes writes on):
    /// one request or answer at a time, so no split into halves (and its lock on every poll).
    stream: BufReader<BoxStream>,
    next_correlation: i32,
    /// Sent and not yet answered: (correlation id, api key, version).
    in_flight: VecDeque<(i32, ApiKey, i16)>,
    versions: BTreeMap<i16, (i16, i16)>,
    client_id: StrBytes,
    buf: BytesMut,
}

impl Connection {
    pub async fn connect(io: &Io, addr: SocketAddr, client_id: &str) -> Result<Connection> {
        let stream = io.net.connect(addr).await?;
        Connection::over(stream, client_id).await
    }

    /// A connection secured as `security` says: TLS (the broker's certificate checked against
    /// the trust store and, unless turned off, `host`), ApiVersions, then SASL.
    pub async fn connect_secure(
        io: &Io,
        addr: SocketAddr,
        host: &str,
        client_id: &str,
        security: &Security,
    ) -> Result<Connection> {
        let stream = io.net.connect(addr).await?;
        let stream = match &security.tls {
            None => stream,
            Some(config) => {
                let name = ServerName::try_from(host.to_string())
                    .map_err(|e| ClientError::Protocol(format!("TLS server name '{host}': {e}")))?;
                let conn = rustls::ClientConnection::new(config.clone(), name)
                    .map_err(|e| ClientError::Protocol(format!("TLS: {e}")))?;
                let tls = TlsStream::connect(stream, conn).await.map_err(|e| {
                    ClientError::Io(io::Error::new(
                        e.kind(),
                        format!("TLS handshake with {host} failed: {e}"),
                    ))
                })?;
                Box::new(tls) as BoxStream
            }
        };
        let mut conn = Connection::over(stream, client_id).await?;
        if let Some(login) = &security.sasl {
            let mut client = SaslClient::for_login(login, io.clock.wall_ms());
            conn.authenticate(io, &mut client).await?;
        }
        Ok(conn)
    }

    /// SaslHandshake v1, then the mechanism's tokens in SaslAuthenticate (driven by the pure
    /// client core), as Kafka's `SaslClientAuthenticator` does after ApiVersions.
    async fn authenticate(&mut self, io: &Io, client: &mut SaslClient) -> Result<()> {
        let mechanism = client.mechanism().name();
        let handshake =
            SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(mechanism));
        let version = self.version(ApiKey::SaslHandshake, 1)?;
        let answer = self.call(&handshake, version).await?;
        if answer.error_code != 0 {
            let enabled: Vec<String> = answer.mechanisms.iter().map(|m| m.to_string()).collect();
            let code = ResponseError::try_from_code(answer.error_code)
                .unwrap_or(ResponseError::UnsupportedSaslMechanism);
            return Err(ClientError::Kafka(
                code,
                format!(
                    "the broker does not enable sasl.mechanism={mechanism} on this listener \
                     (it enables: {})",
                    enabled.join(", ")
                ),
            ));
        }
        let version = self.version(ApiKey::SaslAuthenticate, 2)?;
        let entropy = crate::security::entropy(io);
        let mut step = client.start(&entropy);
        loop {
            let token = match step {
                ClientStep::Done => return Ok(()),
                ClientStep::Failed(m) => {
                    return Err(ClientError::Protocol(format!("{mechanism}: {m}")))
                }
                ClientStep::Send(token) => token,
            };
            let request = SaslAuthenticateRequest::default().with_auth_bytes(token.into());
            let answer = self.call(&request, version).await?;
            if let Some(code) = ResponseError::try_from_code(answer.error_code) {
                return Err(ClientError::Kafka(
                    code,
                    answer
                        .error_message
                        .map(|m| m.to_string())
                        .unwrap_or_default(),
                ));
            }
            step = client.server_token(&answer.auth_bytes);
        }
    }

    /// ApiVersions on a connection made (and secured at the transport) by the caller.
    async fn over(stream: BoxStream, client_id: &str) -> Result<Connection> {
        let mut conn = Connection {
            stream: BufReader::with_capacity(READ_BUFFER, stream),
            next_correlation: 1,
            in_flight: VecDeque::new(),
            versions: BTreeMap::new(),
            client_id: StrBytes::from_string(client_id.to_string()),
            buf: BytesMut::with_capacity(64 * 1024),
        };
        let request = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("weir-client"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        // Version 3 is the first flexible one. Older brokers (and librdkafka's mock) answer it
        // with UNSUPPORTED_VERSION in a v0 body, which a v3 decoder cannot read: look at the
        // error code (the first field of every version) and ask again with v0.
        conn.send(&request, 3).await?;
        let (mut body, _, _) = conn.receive_body::<ApiVersionsRequest>().await?;
        let unsupported = body.len() >= 2
            && i16::from_be_bytes([body[0], body[1]]) == ResponseError::UnsupportedVersion.code();
        let response = if unsupported {
            conn.call(&ApiVersionsRequest::default(), 0).await?
        } else {
            ApiVersionsResponse::decode(&mut body, 3)
                .map_err(|e| ClientError::Protocol(format!("ApiVersions v3 response: {e}")))?
        };
        if response.error_code != 0 {
            return Err(ClientError::Protocol(format!(
                "ApiVersions failed with error {}",
                response.error_code
            )));
        }
        for key in response.api_keys {
            conn.versions
                .insert(key.api_key, (key.min_version, key.max_version));
        }
        Ok(conn)
    }

    /// The highest version both sides speak, at most `ours`.
    pub fn version(&self, api: ApiKey, ours: i16) -> Result<i16> {
        let (min, max) = self
            .versions
            .get(&(api as i16))
            .copied()
            .ok_or_else(|| ClientError::Protocol(format!("broker does not support {api:?}")))?;
        let v = ours.min(max);
        if v < min {
            return Err(ClientError::Protocol(format!(
                "no common version of {api:?} (broker {min}..={max}, client ≤ {ours})"
            )));
        }
        Ok(v)
    }

    /// Sends a request without waiting; returns its correlation id.
    pub async fn send<R: Request>(&mut self, request: &R, version: i16) -> Result<i32> {
        let api =
            ApiKey::try_from(R::KEY).map_err(|_| ClientError::Protocol("bad api key".into()))?;
        let correlation = self.next_correlation;
        self.next_correlation = self.next_correlation.wrapping_add(1);
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(correlation)
            .with_client_id(Some(self.client_id.clone()));
        start_frame(&mut self.buf);
        header
            .encode(&mut self.buf, R::header_version(version))
            .and_then(|_| request.encode(&mut self.buf, version))
            .map_err(|e| ClientError::Protocol(format!("encoding {api:?} v{version}: {e}")))?;
        finish_frame(&mut self.buf);
        write_frame(&mut self.stream, &self.buf).await?;
        self.in_flight.push_back((correlation, api, version));
        Ok(correlation)
    }

    /// Sends a request that gets no answer (Produce with acks=0).
    pub async fn send_oneway<R: Request>(&mut self, request: &R, version: i16) -> Result<()> {
        self.send(request, version).await?;
        self.in_flight.pop_back();
        Ok(())
    }

    /// Waits until bytes of an answer have arrived (or the peer closed), without consuming
    /// them. Cancel-safe: what arrives stays buffered for [`Connection::receive`].
    pub async fn readable(&mut self) -> Result<()> {
        self.stream.fill_buf().await?;
        Ok(())
    }

    /// Reads the answer to the oldest request in flight, which must be an `R`.
    pub async fn receive<R: Request>(&mut self) -> Result<R::Response> {
        let (mut body, api, version) = self.receive_body::<R>().await?;
        R::Response::decode(&mut body, version).map_err(|e| {
            ClientError::Protocol(format!("decoding {api:?} v{version} response: {e}"))
        })
    }

    /// The body of the answer to the oldest request in flight (an `R`), header checked.
    async fn receive_body<R: Request>(&mut self) -> Result<(Bytes, ApiKey, i16)> {
        let (correlation, api, version) = self
            .in_flight
            .pop_front()
            .ok_or_else(|| ClientError::Protocol("nothing in flight".into()))?;
        if api as i16 != R::KEY {
            return Err(ClientError::Protocol(format!("expected answer to {api:?}")));
        }
        let frame = match read_frame(&mut self.stream, MAX_RESPONSE).await {
            Ok(Some(frame)) => frame,
            Ok(None) => return Err(ClientError::Io(io::ErrorKind::UnexpectedEof.into())),
            // A TLS record (alert 0x15 or handshake 0x16, version 3.x) read as a length: the
            // broker speaks TLS on this port (librdkafka gives the same hint).
            Err(FrameError::Oversized { size, .. })
                if matches!(size >> 24, 0x15 | 0x16) && (size >> 16) & 0xff == 0x03 =>
            {
                return Err(ClientError::Protocol(
                    "the broker answered with TLS: is this an SSL or SASL_SSL listener? (give \
                     --command-config with security.protocol and a trust store)"
                        .into(),
                ))
            }
            Err(e) => return Err(ClientError::Protocol(e.to_string())),
        };
        let mut body: Bytes = frame.freeze();
        let header_version = <R::Response as HeaderVersion>::header_version(version);
        let header = ResponseHeader::decode(&mut body, header_version)
            .map_err(|e| ClientError::Protocol(format!("response header: {e}")))?;
        if header.correlation_id != correlation {
            return Err(ClientError::Protocol(format!(
                "correlation id {} where {correlation} was expected",
                header.correlation_id
            )));
        }
        Ok((body, api, version))
    }

    /// Sends one request and waits for its answer.
    pub async fn call<R: Request>(&mut self, request: &R, version: i16) -> Result<R::Response> {
        self.send(request, version).await?;
        self.receive::<R>().await
    }
}
