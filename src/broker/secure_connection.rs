//! The driver of a connection's security: the TLS handshake (rustls over the io stream), the
//! principal it gives, and the SASL core (`security::sasl`) in front of the router, so no
//! handler sees a request before authentication. The connection loop (`server`) asks
//! [`Session::admit`] for every frame and does what it answers.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, RequestKind, ResponseKind, SaslAuthenticateResponse, SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::api::{self, encode_response, Decoded, ListenerKind};
use super::handlers::ROUTES;
use super::shared::Broker;
use crate::config::{SecurityProtocol, ServerConfig};
use crate::controller::image::scram::ScramMechanism;
use crate::io::{BoxStream, Io};
use crate::security::principal::{subject_dn, MappingRules};
use crate::security::sasl::{self, Authenticator, Credential, Input, Mechanism, Reply, Then};
use crate::security::tls::stream::TlsStream;

/// A listener's security, ready to serve connections.
pub(super) struct Secure {
    /// The listener's name (`listeners`).
    name: String,
    protocol: SecurityProtocol,
    tls: Option<Arc<rustls::ServerConfig>>,
    sasl: Option<sasl::SaslSettings>,
    mapping: MappingRules,
}

impl Secure {
    /// Listener `name`'s security (`listener.security.protocol.map` and its prefixed keys).
    pub(super) fn for_listener(
        config: &ServerConfig,
        io: &Io,
        name: &str,
    ) -> Result<Secure, String> {
        let security = config.security_of(name);
        let tls = match &security.tls {
            Some(settings) => Some(crate::security::tls::server_config(settings, io)?),
            None => None,
        };
        Ok(Secure {
            name: name.to_string(),
            protocol: security.protocol,
            tls,
            sasl: security.sasl,
            mapping: security.principal_mapping,
        })
    }

    pub(super) fn name(&self) -> &str {
        &self.name
    }

    /// Runs the TLS handshake (if any) within `limit` and starts the session; `None`: the
    /// connection is to be dropped (the reason is logged).
    pub(super) async fn open(
        &self,
        io: &Io,
        stream: BoxStream,
        peer: SocketAddr,
        limit: Duration,
    ) -> Option<(BoxStream, Session)> {
        let mut principal = crate::acl::ANONYMOUS.to_string();
        let stream = match &self.tls {
            None => stream,
            Some(config) => {
                let conn = match rustls::ServerConnection::new(config.clone()) {
                    Ok(conn) => conn,
                    Err(e) => {
                        tracing::warn!(%peer, error = %e, "TLS session setup failed");
                        return None;
                    }
                };
                let tls = match io.timeout(limit, TlsStream::accept(stream, conn)).await {
                    Some(Ok(tls)) => tls,
                    // A port probe (connect, then close) is not worth a line.
                    Some(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                        tracing::debug!(%peer, error = %e, "TLS handshake: peer left");
                        return None;
                    }
                    Some(Err(e)) => {
                        tracing::info!(%peer, error = %e, "TLS handshake failed; closing");
                        return None;
                    }
                    None => {
                        tracing::info!(%peer, "TLS handshake timed out; closing");
                        return None;
                    }
                };
                if self.protocol == SecurityProtocol::Ssl {
                    if let Some(cert) = tls.peer_certificates().and_then(|c| c.first()) {
                        let Some(dn) = subject_dn(cert) else {
                            tracing::info!(%peer, "client certificate subject unreadable; closing");
                            return None;
                        };
                        let Some(name) = self.mapping.map(&dn) else {
                            tracing::info!(%peer, %dn, "no ssl.principal.mapping.rules rule matches; closing");
                            return None;
                        };
                        principal = format!("User:{name}");
                    }
                }
                Box::new(tls)
            }
        };
        let sasl = self.sasl.clone().map(Authenticator::new);
        Some((stream, Session { principal, sasl }))
    }
}

/// One connection's security state.
pub(super) struct Session {
    principal: String,
    sasl: Option<Authenticator>,
}

/// What to do with a frame.
pub(super) enum Admit {
    /// Hand it to the router.
    Route,
    /// The answer is in `out`: send it.
    Answered,
    /// Wait, send what is in `out` (if anything), close.
    Close(Duration),
}

struct ImageCredentials(Arc<crate::controller::MetadataImage>);

impl sasl::Credentials for ImageCredentials {
    fn scram(&self, user: &str, mechanism: Mechanism) -> Option<Credential> {
        let mechanism = match mechanism {
            Mechanism::ScramSha256 => ScramMechanism::Sha256,
            Mechanism::ScramSha512 => ScramMechanism::Sha512,
            Mechanism::Plain | Mechanism::OAuthBearer => return None,
        };
        let record = self.0.scram().get(user, mechanism)?;
        Some(Credential {
            salt: record.salt.clone(),
            salted_password: record.salted_password.clone(),
            iterations: record.iterations,
        })
    }
}

impl Session {
    /// `User:ANONYMOUS`, the certificate's principal, or the SASL one once authenticated.
    pub(super) fn principal(&self) -> &str {
        match &self.sasl {
            Some(auth) => auth.principal().unwrap_or(crate::acl::ANONYMOUS),
            None => &self.principal,
        }
    }

    /// The largest frame to read next.
    pub(super) fn max_frame(&self, after_auth: usize) -> usize {
        self.sasl
            .as_ref()
            .map_or(after_auth, |a| a.max_frame(after_auth))
    }

    /// Decides about one frame; answers SASL requests into `out`.
    pub(super) fn admit(
        &mut self,
        broker: &Broker,
        kind: ListenerKind,
        frame: &Bytes,
        out: &mut BytesMut,
    ) -> Admit {
        let Some(auth) = self.sasl.as_mut() else {
            return Admit::Route;
        };
        let now = broker.io.clock.monotonic();
        let wall_ms = broker.io.clock.wall_ms();
        let creds = ImageCredentials(broker.image());
        let entropy = || crate::security::entropy(&broker.io);
        if auth.expects_raw_token() {
            let input = Input::Token {
                bytes: frame,
                entropy: entropy(),
                raw: true,
                wall_ms,
            };
            let step = auth.step(now, input, &creds);
            return finish(step.then, step.reply, out, None);
        }
        let key = (frame.len() >= 2).then(|| i16::from_be_bytes([frame[0], frame[1]]));
        // Once authenticated only a handshake (re-authentication) needs decoding here.
        if auth.authenticated() && key != Some(ApiKey::SaslHandshake as i16) {
            let step = auth.step(now, Input::Other, &creds);
            return finish(step.then, step.reply, out, None);
        }
        let request = match api::decode(frame.clone(), ROUTES, kind) {
            Ok(Decoded::Request(request)) => request,
            // An ApiVersions of a version not spoken: the router answers it.
            Ok(Decoded::Answer(..)) => return Admit::Route,
            Err(reason) => {
                tracing::info!(reason, "undecodable request before authentication; closing");
                let step = auth.step(now, Input::Other, &creds);
                return finish(step.then, Reply::None, out, None);
            }
        };
        let header = Some((request.correlation_id, request.key, request.version));
        let step = match &request.body {
            RequestKind::ApiVersions(_) => auth.step(now, Input::ApiVersions, &creds),
            RequestKind::SaslHandshake(r) => {
                let input = Input::Handshake {
                    version: request.version,
                    mechanism: r.mechanism.as_str(),
                };
                auth.step(now, input, &creds)
            }
            RequestKind::SaslAuthenticate(r) => {
                let input = Input::Token {
                    bytes: &r.auth_bytes,
                    entropy: entropy(),
                    raw: false,
                    wall_ms,
                };
                auth.step(now, input, &creds)
            }
            _ => auth.step(now, Input::Other, &creds),
        };
        finish(step.then, step.reply, out, header)
    }
}

/// Encodes the core's reply into `out` and says what the loop does next.
fn finish(
    then: Then,
    reply: Reply,
    out: &mut BytesMut,
    header: Option<(i32, ApiKey, i16)>,
) -> Admit {
    out.clear();
    let body = match reply {
        Reply::None => None,
        Reply::Route => return Admit::Route,
        Reply::Raw(bytes) => {
            out.put_u32(bytes.len() as u32);
            out.extend_from_slice(&bytes);
            None
        }
        Reply::Handshake {
            error_code,
            mechanisms,
        } => Some(ResponseKind::SaslHandshake(
            SaslHandshakeResponse::default()
                .with_error_code(error_code)
                .with_mechanisms(
                    mechanisms
                        .into_iter()
                        .map(StrBytes::from_static_str)
                        .collect(),
                ),
        )),
        Reply::Authenticate {
            error_code,
            message,
            bytes,
            session_lifetime_ms,
        } => Some(ResponseKind::SaslAuthenticate(
            SaslAuthenticateResponse::default()
                .with_error_code(error_code)
                .with_error_message(message.map(StrBytes::from_string))
                .with_auth_bytes(Bytes::from(bytes))
                .with_session_lifetime_ms(session_lifetime_ms),
        )),
    };
    if let (Some(body), Some((correlation_id, key, version))) = (body, header) {
        let header_version = key.response_header_version(version);
        if let Err(e) = encode_response(out, correlation_id, header_version, &body, version) {
            tracing::warn!(error = %e, "SASL response encoding failed");
            out.clear();
            return Admit::Close(Duration::ZERO);
        }
    }
    match then {
        Then::Continue if out.is_empty() => Admit::Close(Duration::ZERO),
        Then::Continue => Admit::Answered,
        Then::CloseAfter(delay) => Admit::Close(delay),
    }
}
