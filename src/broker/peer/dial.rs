//! Securing an outbound connection as a Kafka broker does towards another node's listener:
//! the TLS client handshake (that listener's trust store checks the other node; its key store
//! is this node's certificate for `ssl.client.auth`), then SASL: SaslHandshake v1 with the
//! configured mechanism and the mechanism's tokens in SaslAuthenticate, driven by the pure
//! client core (`security::sasl::client`). A [`Dialer`] is built once per target listener at
//! start; [`Dialer::secure`] runs on each new connection of a `Link`, and
//! [`Dialer::reauthenticate`] again on that connection before the session the other node
//! granted ends (KIP-368, `connections.max.reauth.ms` on its listener), through whatever
//! carries the link's requests ([`Exchange`]).

use std::fmt;
use std::sync::Arc;

use bytes::BytesMut;
use kafka_protocol::messages::{
    ApiKey, RequestKind, ResponseKind, SaslAuthenticateRequest, SaslHandshakeRequest,
};
use kafka_protocol::protocol::StrBytes;
use tokio::io::AsyncWriteExt;

use super::codec::{decode_response, encode_request};
use crate::config::Outbound;
use crate::io::{BoxStream, Io};
use crate::protocol::frame::{finish_frame, read_frame, start_frame};
use crate::security::sasl::client::{ClientStep, Login, SaslClient};
use crate::security::tls::stream::TlsStream;

const HANDSHAKE_VERSION: i16 = 1;
const AUTHENTICATE_VERSION: i16 = 2;
/// A SASL answer larger than this is not one.
const MAX_SASL_FRAME: usize = 1 << 20;

/// How to secure connections to one listener of the other nodes.
pub struct Dialer {
    listener: String,
    tls: Option<Arc<rustls::ClientConfig>>,
    sasl: Option<Login>,
}

impl fmt::Debug for Dialer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dialer")
            .field("listener", &self.listener)
            .field("tls", &self.tls.is_some())
            .field("sasl", &self.sasl)
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

    /// Runs TLS (checking the certificate names `host`) and SASL on a new connection. With
    /// the stream comes the SASL session's lifetime (`session_lifetime_ms`, 0: no expiry).
    pub async fn secure(
        &self,
        io: &Io,
        stream: BoxStream,
        host: &str,
    ) -> Result<(BoxStream, i64), DialError> {
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
        let mut lifetime = 0;
        if let Some(login) = &self.sasl {
            let mut client = SaslClient::for_login(login, io.clock.wall_ms());
            let mut fresh = Fresh {
                stream: &mut stream,
                correlation: 0,
            };
            lifetime = authenticate(io, &mut fresh, &mut client).await?;
        }
        Ok((stream, lifetime))
    }

    /// KIP-368: logs in again on a connection whose session is about to end, with the same
    /// mechanism and user (the other node refuses a change), SaslHandshake v1 then
    /// SaslAuthenticate, as a Kafka client does. The caller has no request in flight on it.
    /// Returns the new session's lifetime.
    pub async fn reauthenticate(
        &self,
        io: &Io,
        exchange: &mut impl Exchange,
    ) -> Result<i64, DialError> {
        let Some(login) = &self.sasl else {
            return Ok(0);
        };
        let mut client = SaslClient::for_login(login, io.clock.wall_ms());
        authenticate(io, exchange, &mut client).await
    }
}

/// Carries one SASL request to the other node and brings back its answer.
pub trait Exchange {
    fn exchange(
        &mut self,
        key: ApiKey,
        version: i16,
        body: RequestKind,
    ) -> impl std::future::Future<Output = Result<ResponseKind, DialError>> + Send;
}

/// A connection nothing else uses yet: write one request, read its answer.
struct Fresh<'a> {
    stream: &'a mut BoxStream,
    correlation: i32,
}

impl Exchange for Fresh<'_> {
    async fn exchange(
        &mut self,
        key: ApiKey,
        version: i16,
        body: RequestKind,
    ) -> Result<ResponseKind, DialError> {
        self.correlation += 1;
        let frame = sasl_frame(key, version, self.correlation, &body)?;
        let mut out = BytesMut::with_capacity(frame.len() + 4);
        start_frame(&mut out);
        out.extend_from_slice(&frame);
        finish_frame(&mut out);
        self.stream.write_all(&out).await?;
        self.stream.flush().await?;
        let answer = read_answer(key, read_frame(self.stream, MAX_SASL_FRAME).await)?;
        decode_answer(key, version, answer)
    }
}

/// A SASL request's frame (without its size prefix) with this correlation id.
pub fn sasl_frame(
    key: ApiKey,
    version: i16,
    correlation: i32,
    body: &RequestKind,
) -> Result<Vec<u8>, DialError> {
    let mut frame = encode_request(key, version, "weir-broker", body)
        .map_err(|e| DialError::Io(std::io::Error::other(e.to_string())))?;
    frame[4..8].copy_from_slice(&correlation.to_be_bytes());
    Ok(frame)
}

/// Decodes the answer to a SASL request (its frame, correlation id first).
pub fn decode_answer(
    key: ApiKey,
    version: i16,
    answer: bytes::Bytes,
) -> Result<ResponseKind, DialError> {
    decode_response(key, version, answer)
        .map_err(|e| DialError::Io(std::io::Error::other(format!("{key:?} answer: {e}"))))
}

fn read_answer(
    key: ApiKey,
    read: Result<Option<BytesMut>, impl std::fmt::Display>,
) -> Result<bytes::Bytes, DialError> {
    let answer = match read {
        Ok(Some(f)) => f.freeze(),
        Ok(None) => {
            return Err(DialError::Authentication(format!(
                "the other node closed the connection during {key:?} (a wrong mechanism, or \
                 credentials refused)"
            )))
        }
        Err(e) => return Err(DialError::Io(std::io::Error::other(e.to_string()))),
    };
    Ok(answer)
}

/// SaslHandshake v1 and the mechanism's tokens; the session's lifetime (ms, 0: none) from the
/// last SaslAuthenticate answer.
async fn authenticate(
    io: &Io,
    exchange: &mut impl Exchange,
    client: &mut SaslClient,
) -> Result<i64, DialError> {
    let mechanism = client.mechanism().name();
    let request =
        SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(mechanism));
    let ResponseKind::SaslHandshake(answer) = exchange
        .exchange(
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
    let mut lifetime = 0;
    loop {
        let token = match step {
            ClientStep::Done => return Ok(lifetime),
            ClientStep::Failed(m) => return Err(DialError::Authentication(m)),
            ClientStep::Send(token) => token,
        };
        let request = SaslAuthenticateRequest::default().with_auth_bytes(token.into());
        let ResponseKind::SaslAuthenticate(answer) = exchange
            .exchange(
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
        lifetime = answer.session_lifetime_ms;
        step = client.server_token(&answer.auth_bytes);
    }
}

/// A peer link to a single node's SASL_SSL listener (rcgen certificates, PLAIN): the login
/// succeeds with the right password and the link carries requests; a wrong password or an
/// untrusted certificate fails the call with the reason, never hangs; with a session lifetime
/// the link re-authenticates in time.
#[cfg(all(test, not(madsim)))]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use kafka_protocol::messages::ApiVersionsRequest;
    use rcgen::{
        BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair,
    };

    use super::*;
    use crate::broker::peer::Link;
    use crate::broker::shared::Broker;
    use crate::config::{SecurityProtocol, ServerConfig};
    use crate::security::sasl::Mechanism;
    use crate::security::tls::{ClientAuth, PemSource, TlsSettings};

    /// (CA PEM, server chain PEM, server key PEM).
    fn certificates() -> (String, String, String) {
        let mut ca = CertificateParams::new(vec![]).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name = DistinguishedName::new();
        ca.distinguished_name.push(DnType::CommonName, "test CA");
        let ca_key = KeyPair::generate().unwrap();
        let ca_pem = ca.self_signed(&ca_key).unwrap().pem();
        let mut leaf = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        leaf.distinguished_name.push(DnType::CommonName, "node");
        let key = KeyPair::generate().unwrap();
        let cert = leaf.signed_by(&key, &Issuer::new(ca, &ca_key)).unwrap();
        (ca_pem, cert.pem(), key.serialize_pem())
    }

    fn api_versions() -> Vec<u8> {
        let body = RequestKind::ApiVersions(ApiVersionsRequest::default());
        encode_request(ApiKey::ApiVersions, 0, "test", &body).unwrap()
    }

    /// A single node with a SASL_SSL listener named SECURE (PLAIN, user `broker`, password
    /// `right`), plus `extra` properties.
    async fn secure_node(
        chain: &str,
        key: &str,
        extra: &[(&str, &str)],
    ) -> (crate::broker::RunningBroker, Io) {
        let jaas = "org.apache.kafka.common.security.plain.PlainLoginModule required \
                    user_broker=\"right\";";
        let mut props = BTreeMap::from([
            (
                "listeners".to_string(),
                "SECURE://127.0.0.1:0,CONTROLLER://127.0.0.1:0".to_string(),
            ),
            (
                "listener.security.protocol.map".to_string(),
                "SECURE:SASL_SSL,CONTROLLER:PLAINTEXT".to_string(),
            ),
            (
                "inter.broker.listener.name".to_string(),
                "SECURE".to_string(),
            ),
            ("sasl.enabled.mechanisms".to_string(), "PLAIN".to_string()),
            (
                "listener.name.secure.plain.sasl.jaas.config".to_string(),
                jaas.to_string(),
            ),
            ("ssl.keystore.type".to_string(), "PEM".to_string()),
            (
                "ssl.keystore.certificate.chain".to_string(),
                chain.to_string(),
            ),
            ("ssl.keystore.key".to_string(), key.to_string()),
            ("log.dirs".to_string(), "/data".to_string()),
        ]);
        props.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let config = ServerConfig::from_properties(&props).unwrap().0;
        let io = Io::os();
        let io = Io {
            disk: Arc::new(crate::io::memdisk::MemDisk::new(3)),
            ..io
        };
        (Broker::start(config, io.clone()).await.unwrap(), io)
    }

    fn outbound(chain: &str, key: &str, password: &str, trusted: &str) -> Outbound {
        Outbound {
            listener: "SECURE".into(),
            protocol: SecurityProtocol::SaslSsl,
            tls: Some(TlsSettings {
                chain: PemSource::Inline(chain.to_string()),
                key: PemSource::Inline(key.to_string()),
                truststore: Some(PemSource::Inline(trusted.to_string())),
                client_auth: ClientAuth::None,
            }),
            verify_hostname: true,
            sasl: Some(Login::password(Mechanism::Plain, "broker", password)),
        }
    }

    #[tokio::test]
    async fn links_log_in_over_tls_and_sasl() {
        let (ca, chain, key) = certificates();
        let (running, io) = secure_node(&chain, &key, &[]).await;
        let (_stop, shutdown) = crate::sync::watch::channel(false);
        let outbound = |password: &str, trusted: &str| outbound(&chain, &key, password, trusted);
        let call = |outbound: Outbound, host: &str| {
            let dialer = Dialer::new(&outbound, &io).unwrap().unwrap();
            let link = Link::secured(
                &io,
                running.local_addr,
                shutdown.clone(),
                Some((dialer, host.into())),
            );
            async move {
                tokio::time::timeout(Duration::from_secs(10), link.call(api_versions()))
                    .await
                    .expect("the link hung")
                    .unwrap()
            }
        };
        let answer = call(outbound("right", &ca), "localhost").await.unwrap();
        let ResponseKind::ApiVersions(r) = decode_response(ApiKey::ApiVersions, 0, answer).unwrap()
        else {
            panic!()
        };
        assert_eq!(r.error_code, 0);
        let refused = call(outbound("wrong", &ca), "localhost").await.unwrap_err();
        assert_eq!(
            refused.kind(),
            std::io::ErrorKind::PermissionDenied,
            "{refused}"
        );
        assert!(refused.to_string().contains("error 58"), "{refused}");
        // A certificate from a CA the node does not trust, or not naming the host dialled.
        let (other_ca, _, _) = certificates();
        assert!(call(outbound("right", &other_ca), "localhost")
            .await
            .is_err());
        assert!(call(outbound("right", &ca), "elsewhere.example")
            .await
            .is_err());
        let mut any_name = outbound("right", &ca);
        any_name.verify_hostname = false;
        assert!(call(any_name, "elsewhere.example").await.is_ok());
        running.broker.halt();
    }

    /// KIP-368 on the node's own connections: the listener grants 1.5 s sessions and closes a
    /// connection at its first request past the session's end (no answer). The link logs in
    /// again on the same connection before that (at 85–95 %), so a call after 2 s is answered;
    /// without re-authentication it fails ("peer connection lost").
    #[tokio::test]
    async fn links_reauthenticate_before_the_session_ends() {
        let (ca, chain, key) = certificates();
        let (running, io) =
            secure_node(&chain, &key, &[("connections.max.reauth.ms", "1500")]).await;
        let (_stop, shutdown) = crate::sync::watch::channel(false);
        let dialer = Dialer::new(&outbound(&chain, &key, "right", &ca), &io)
            .unwrap()
            .unwrap();
        let link = Link::secured(
            &io,
            running.local_addr,
            shutdown,
            Some((dialer, "localhost".into())),
        );
        let call = || async {
            let answer = tokio::time::timeout(Duration::from_secs(10), link.call(api_versions()))
                .await
                .expect("the link hung")
                .unwrap()
                .expect("the call failed: the session ended without re-authentication");
            let ResponseKind::ApiVersions(r) =
                decode_response(ApiKey::ApiVersions, 0, answer).unwrap()
            else {
                panic!()
            };
            assert_eq!(r.error_code, 0);
        };
        call().await;
        tokio::time::sleep(Duration::from_millis(2_000)).await;
        call().await;
        running.broker.halt();
    }
}
