//! Securing an outbound connection as a Kafka broker does towards another node's listener:
//! the TLS client handshake (that listener's trust store checks the other node; its key store
//! is this node's certificate for `ssl.client.auth`), then SASL: SaslHandshake v1 with the
//! configured mechanism and the mechanism's tokens in SaslAuthenticate, driven by the pure
//! client core (`security::sasl::client`). A [`Dialer`] is built once per target listener at
//! start; [`Dialer::secure`] runs on each new connection of a `Link`.

use std::fmt;
use std::sync::Arc;

use bytes::BytesMut;
use kafka_protocol::messages::{
    ApiKey, RequestKind, ResponseKind, SaslAuthenticateRequest, SaslHandshakeRequest,
};
use kafka_protocol::protocol::StrBytes;
use tokio::io::AsyncWriteExt;

use super::{decode_response, encode_request};
use crate::config::Outbound;
use crate::io::{BoxStream, Io};
use crate::protocol::frame::{finish_frame, read_frame, start_frame};
use crate::security::sasl::client::{ClientStep, SaslClient};
use crate::security::sasl::Mechanism;
use crate::security::tls::stream::TlsStream;

const HANDSHAKE_VERSION: i16 = 1;
const AUTHENTICATE_VERSION: i16 = 2;
/// A SASL answer larger than this is not one.
const MAX_SASL_FRAME: usize = 1 << 20;

/// How to secure connections to one listener of the other nodes.
pub struct Dialer {
    listener: String,
    tls: Option<Arc<rustls::ClientConfig>>,
    sasl: Option<(Mechanism, String, String)>,
}

impl fmt::Debug for Dialer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dialer")
            .field("listener", &self.listener)
            .field("tls", &self.tls.is_some())
            .field("sasl", &self.sasl.as_ref().map(|(m, u, _)| (m.name(), u)))
            .finish()
    }
}

/// Why a connection could not be secured.
#[derive(Debug)]
pub enum DialError {
    /// The network or TLS: worth retrying at the usual pace.
    Io(std::io::Error),
    /// The other node refused this node's credentials (or its own did not check out): a
    /// configuration error, reported as such.
    Authentication(String),
}

impl fmt::Display for DialError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DialError::Io(e) => write!(f, "{e}"),
            DialError::Authentication(m) => write!(f, "authentication failed: {m}"),
        }
    }
}

impl From<std::io::Error> for DialError {
    fn from(e: std::io::Error) -> Self {
        DialError::Io(e)
    }
}

impl Dialer {
    /// `None` for a PLAINTEXT listener: connections are used as they are.
    pub fn new(outbound: &Outbound, io: &Io) -> Result<Option<Arc<Dialer>>, String> {
        if outbound.tls.is_none() && outbound.sasl.is_none() {
            return Ok(None);
        }
        let tls = match &outbound.tls {
            Some(settings) => Some(crate::security::tls::client_config(
                settings,
                io,
                outbound.verify_hostname,
            )?),
            None => None,
        };
        Ok(Some(Arc::new(Dialer {
            listener: outbound.listener.clone(),
            tls,
            sasl: outbound.sasl.clone(),
        })))
    }

    pub fn listener(&self) -> &str {
        &self.listener
    }

    /// Runs TLS (checking the certificate names `host`) and SASL on a new connection.
    pub async fn secure(
        &self,
        io: &Io,
        stream: BoxStream,
        host: &str,
    ) -> Result<BoxStream, DialError> {
        let mut stream = match &self.tls {
            None => stream,
            Some(config) => {
                let name =
                    rustls::pki_types::ServerName::try_from(host.to_string()).map_err(|e| {
                        DialError::Io(std::io::Error::other(format!(
                            "TLS server name '{host}': {e}"
                        )))
                    })?;
                let conn = rustls::ClientConnection::new(config.clone(), name)
                    .map_err(|e| DialError::Io(std::io::Error::other(format!("TLS: {e}"))))?;
                Box::new(TlsStream::connect(stream, conn).await?) as BoxStream
            }
        };
        if let Some((mechanism, user, password)) = &self.sasl {
            let mut client = SaslClient::new(*mechanism, user, password);
            authenticate(io, &mut stream, &mut client).await?;
        }
        Ok(stream)
    }
}

/// One request and its answer on a connection nothing else uses yet.
async fn exchange(
    stream: &mut BoxStream,
    correlation: i32,
    key: ApiKey,
    version: i16,
    body: RequestKind,
) -> Result<ResponseKind, DialError> {
    let mut frame = encode_request(key, version, "weir-broker", &body)
        .map_err(|e| DialError::Io(std::io::Error::other(e.to_string())))?;
    frame[4..8].copy_from_slice(&correlation.to_be_bytes());
    let mut out = BytesMut::with_capacity(frame.len() + 4);
    start_frame(&mut out);
    out.extend_from_slice(&frame);
    finish_frame(&mut out);
    stream.write_all(&out).await?;
    stream.flush().await?;
    let answer = match read_frame(stream, MAX_SASL_FRAME).await {
        Ok(Some(f)) => f.freeze(),
        Ok(None) => {
            return Err(DialError::Authentication(format!(
                "the other node closed the connection during {key:?} (a wrong mechanism, or \
                 credentials refused)"
            )))
        }
        Err(e) => return Err(DialError::Io(std::io::Error::other(e.to_string()))),
    };
    decode_response(key, version, answer)
        .map_err(|e| DialError::Io(std::io::Error::other(format!("{key:?} answer: {e}"))))
}

async fn authenticate(
    io: &Io,
    stream: &mut BoxStream,
    client: &mut SaslClient,
) -> Result<(), DialError> {
    let mechanism = client.mechanism().name();
    let request =
        SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(mechanism));
    let ResponseKind::SaslHandshake(answer) = exchange(
        stream,
        1,
        ApiKey::SaslHandshake,
        HANDSHAKE_VERSION,
        RequestKind::SaslHandshake(request),
    )
    .await?
    else {
        return Err(DialError::Io(std::io::Error::other(
            "not a SaslHandshake answer",
        )));
    };
    if answer.error_code != 0 {
        let enabled: Vec<String> = answer.mechanisms.iter().map(|m| m.to_string()).collect();
        return Err(DialError::Authentication(format!(
            "the other node does not enable {mechanism} (error {}; it enables {})",
            answer.error_code,
            enabled.join(",")
        )));
    }
    let entropy = crate::security::entropy(io);
    let mut step = client.start(&entropy);
    let mut correlation = 2;
    loop {
        let token = match step {
            ClientStep::Done => return Ok(()),
            ClientStep::Failed(m) => return Err(DialError::Authentication(m)),
            ClientStep::Send(token) => token,
        };
        let request = SaslAuthenticateRequest::default().with_auth_bytes(token.into());
        let ResponseKind::SaslAuthenticate(answer) = exchange(
            stream,
            correlation,
            ApiKey::SaslAuthenticate,
            AUTHENTICATE_VERSION,
            RequestKind::SaslAuthenticate(request),
        )
        .await?
        else {
            return Err(DialError::Io(std::io::Error::other(
                "not a SaslAuthenticate answer",
            )));
        };
        if answer.error_code != 0 {
            return Err(DialError::Authentication(format!(
                "{mechanism}: error {}: {}",
                answer.error_code,
                answer.error_message.as_deref().unwrap_or("")
            )));
        }
        correlation += 1;
        step = client.server_token(&answer.auth_bytes);
    }
}
