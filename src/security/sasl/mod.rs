//! The SASL server of one connection as a pure core: requests in (with `now`), steps out
//! (a reply, then go on or close after a delay). The driver (`broker::server`) decodes frames,
//! asks [`Authenticator::step`] and does what it says; nothing here does I/O or reads a clock.
//!
//! States follow Kafka's `SaslServerAuthenticator`: one ApiVersions, then SaslHandshake (v0:
//! raw tokens follow; v1: tokens inside SaslAuthenticate), then the mechanism's tokens, then
//! authenticated. Before that any other request closes the connection without a reply, after
//! `connection.failed.authentication.delay.ms` (KIP-306), and so does every failure, so no
//! handler ever sees an unauthenticated request. With `connections.max.reauth.ms` a session
//! expires (KIP-368): the client re-authenticates on the same connection with the same
//! mechanism and principal; any other request after expiry closes the connection. An
//! OAUTHBEARER session also ends with its token (`exp`), whichever comes first (KIP-368), so
//! the driver passes the wall clock with each token.
//!
//! Invariants (checked after every step): an authenticated state names an enabled mechanism
//! and a non-empty principal; a failed connection takes no further step.

pub mod client;
pub mod jaas;
pub mod oauthbearer;
pub mod plain;
pub mod scram;

use std::collections::BTreeMap;
use std::time::Duration;

pub use scram::Credential;

/// A mechanism Weir's server speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mechanism {
    Plain,
    ScramSha256,
    ScramSha512,
    /// Unsecured tokens only (KIP-255's default validator): for tests, as in Kafka.
    OAuthBearer,
}

impl Mechanism {
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::ScramSha256 => "SCRAM-SHA-256",
            Mechanism::ScramSha512 => "SCRAM-SHA-512",
            Mechanism::OAuthBearer => "OAUTHBEARER",
        }
    }

    pub fn parse(name: &str) -> Option<Mechanism> {
        [
            Mechanism::Plain,
            Mechanism::ScramSha256,
            Mechanism::ScramSha512,
            Mechanism::OAuthBearer,
        ]
        .into_iter()
        .find(|m| m.name() == name)
    }

    pub(crate) fn hash(self) -> Option<scram::Hash> {
        match self {
            Mechanism::Plain | Mechanism::OAuthBearer => None,
            Mechanism::ScramSha256 => Some(scram::Hash::Sha256),
            Mechanism::ScramSha512 => Some(scram::Hash::Sha512),
        }
    }
}

/// A listener's SASL settings.
#[derive(Clone, Debug, PartialEq)]
pub struct SaslSettings {
    /// `sasl.enabled.mechanisms`, in order.
    pub mechanisms: Vec<Mechanism>,
    /// PLAIN's users and passwords (`listener.name.X.plain.sasl.jaas.config`).
    pub plain_users: BTreeMap<String, String>,
    /// `sasl.server.max.receive.size`: the largest frame before authentication.
    pub max_receive_size: usize,
    /// `connection.failed.authentication.delay.ms`.
    pub failed_delay: Duration,
    /// `connections.max.reauth.ms`; `None`: sessions never expire (but for an OAUTHBEARER
    /// token's own expiry).
    pub reauth: Option<Duration>,
    /// OAUTHBEARER's `unsecuredValidator*` options (its JAAS entry on the listener).
    pub oauthbearer: oauthbearer::ValidatorOptions,
}

/// Where SCRAM credentials come from (the metadata image).
pub trait Credentials {
    fn scram(&self, user: &str, mechanism: Mechanism) -> Option<Credential>;
}

/// A request as the authenticator sees it.
pub enum Input<'a> {
    ApiVersions,
    Handshake {
        version: i16,
        mechanism: &'a str,
    },
    /// A SaslAuthenticate's bytes, or (after a v0 handshake) a raw token frame. `entropy`:
    /// fresh random bytes the driver drew, for a server nonce; `wall_ms`: the wall clock, for
    /// an OAUTHBEARER token's `iat` and `exp`.
    Token {
        bytes: &'a [u8],
        entropy: [u8; 18],
        raw: bool,
        wall_ms: i64,
    },
    /// Any other API.
    Other,
}

/// What to answer.
#[derive(Debug, PartialEq)]
pub enum Reply {
    /// Nothing.
    None,
    /// Hand the request to the router, as on an unsecured connection.
    Route,
    Handshake {
        error_code: i16,
        mechanisms: Vec<&'static str>,
    },
    Authenticate {
        error_code: i16,
        message: Option<String>,
        bytes: Vec<u8>,
        session_lifetime_ms: i64,
    },
    /// A raw token frame (v0 handshake).
    Raw(Vec<u8>),
}

#[derive(Debug, PartialEq)]
pub enum Then {
    Continue,
    /// Wait this long, send the reply (if any) and close.
    CloseAfter(Duration),
}

#[derive(Debug, PartialEq)]
pub struct Step {
    pub reply: Reply,
    pub then: Then,
}

pub const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
pub const ILLEGAL_SASL_STATE: i16 = 34;
pub const SASL_AUTHENTICATION_FAILED: i16 = 58;

/// Kafka's minimum time between two re-authentications.
const MIN_REAUTH_INTERVAL: Duration = Duration::from_secs(1);

/// How far a mechanism's exchange has come.
#[derive(Debug)]
enum Progress {
    Start,
    /// SCRAM's server-first is sent.
    Scram(scram::FirstDone),
    /// OAUTHBEARER's token failed and this JSON was answered; a lone `\x01` comes next.
    Challenged(String),
}

#[derive(Debug)]
enum State {
    Initial {
        api_versions_seen: bool,
    },
    Exchange {
        mechanism: Mechanism,
        raw: bool,
        progress: Progress,
    },
    Done {
        mechanism: Mechanism,
        /// `None`: no expiry.
        expires_at: Option<Duration>,
        authenticated_at: Duration,
    },
    Failed,
}

pub struct Authenticator {
    settings: SaslSettings,
    state: State,
    /// The authenticated principal (`User:name`), kept across re-authentication.
    principal: Option<String>,
    /// The principal re-authentication must confirm.
    reauthenticating: bool,
}

impl Authenticator {
    pub fn new(settings: SaslSettings) -> Authenticator {
        assert!(
            !settings.mechanisms.is_empty(),
            "SASL listener without mechanisms"
        );
        Authenticator {
            settings,
            state: State::Initial {
                api_versions_seen: false,
            },
            principal: None,
            reauthenticating: false,
        }
    }

    /// The principal once authenticated (`User:name`).
    pub fn principal(&self) -> Option<&str> {
        match self.state {
            State::Done { .. } => self.principal.as_deref(),
            _ if self.reauthenticating => self.principal.as_deref(),
            _ => None,
        }
    }

    /// Whether the session is authenticated and frames may be as large as any request.
    pub fn authenticated(&self) -> bool {
        matches!(self.state, State::Done { .. })
    }

    /// The largest frame to read next.
    pub fn max_frame(&self, after_auth: usize) -> usize {
        match self.state {
            State::Done { .. } => after_auth,
            _ => self.settings.max_receive_size,
        }
    }

    /// Whether the next frame is a raw token (after a v0 handshake).
    pub fn expects_raw_token(&self) -> bool {
        matches!(self.state, State::Exchange { raw: true, .. })
    }

    pub fn step(&mut self, now: Duration, input: Input<'_>, creds: &dyn Credentials) -> Step {
        assert!(!matches!(self.state, State::Failed), "step after failure");
        let step = self.decide(now, input, creds);
        if let Then::CloseAfter(_) = step.then {
            self.state = State::Failed;
        }
        self.check();
        step
    }

    fn check(&self) {
        if let State::Done { mechanism, .. } = self.state {
            assert!(self.settings.mechanisms.contains(&mechanism));
            assert!(self
                .principal
                .as_deref()
                .is_some_and(|p| p.len() > "User:".len()));
        }
    }

    fn fail(&self, reply: Reply) -> Step {
        Step {
            reply,
            then: Then::CloseAfter(self.settings.failed_delay),
        }
    }

    fn close_now() -> Step {
        Step {
            reply: Reply::None,
            then: Then::CloseAfter(Duration::ZERO),
        }
    }

    fn go_on(reply: Reply) -> Step {
        Step {
            reply,
            then: Then::Continue,
        }
    }

    fn decide(&mut self, now: Duration, input: Input<'_>, creds: &dyn Credentials) -> Step {
        match (&mut self.state, input) {
            (State::Initial { api_versions_seen }, Input::ApiVersions) => {
                if *api_versions_seen {
                    return Self::close_now();
                }
                *api_versions_seen = true;
                Self::go_on(Reply::Route)
            }
            (State::Initial { .. }, Input::Handshake { version, mechanism }) => {
                self.handshake(version, mechanism)
            }
            (State::Initial { .. }, _) => self.fail(Reply::None),
            (
                State::Exchange {
                    mechanism,
                    raw,
                    progress,
                },
                Input::Token {
                    bytes,
                    entropy,
                    raw: raw_in,
                    wall_ms,
                },
            ) if *raw == raw_in => {
                let (mechanism, raw) = (*mechanism, *raw);
                let progress = std::mem::replace(progress, Progress::Start);
                let at = Clocks { now, wall_ms };
                self.token(at, mechanism, raw, progress, bytes, &entropy, creds)
            }
            // After a v1 handshake only SaslAuthenticate may come.
            (State::Exchange { .. }, _) => self.fail(Reply::None),
            (
                State::Done {
                    mechanism,
                    expires_at,
                    authenticated_at,
                },
                input,
            ) => {
                let expired = expires_at.is_some_and(|at| now >= at);
                match input {
                    Input::Handshake {
                        version,
                        mechanism: name,
                    } if expires_at.is_some()
                        && now.saturating_sub(*authenticated_at) >= MIN_REAUTH_INTERVAL =>
                    {
                        if name != mechanism.name() || version == 0 {
                            return Self::close_now();
                        }
                        let mechanism = *mechanism;
                        self.reauthenticating = true;
                        self.state = State::Exchange {
                            mechanism,
                            raw: false,
                            progress: Progress::Start,
                        };
                        Self::go_on(Reply::Handshake {
                            error_code: 0,
                            mechanisms: self.names(),
                        })
                    }
                    _ if expired => Self::close_now(),
                    // The router answers ILLEGAL_SASL_STATE to a late handshake or token.
                    _ => Self::go_on(Reply::Route),
                }
            }
            (State::Failed, _) => Self::close_now(),
        }
    }

    fn names(&self) -> Vec<&'static str> {
        self.settings.mechanisms.iter().map(|m| m.name()).collect()
    }

    fn handshake(&mut self, version: i16, name: &str) -> Step {
        let enabled = Mechanism::parse(name).filter(|m| self.settings.mechanisms.contains(m));
        let Some(mechanism) = enabled else {
            return self.fail(Reply::Handshake {
                error_code: UNSUPPORTED_SASL_MECHANISM,
                mechanisms: self.names(),
            });
        };
        self.state = State::Exchange {
            mechanism,
            raw: version == 0,
            progress: Progress::Start,
        };
        Self::go_on(Reply::Handshake {
            error_code: 0,
            mechanisms: self.names(),
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn token(
        &mut self,
        at: Clocks,
        mechanism: Mechanism,
        raw: bool,
        progress: Progress,
        bytes: &[u8],
        entropy: &[u8],
        creds: &dyn Credentials,
    ) -> Step {
        if bytes.len() > self.settings.max_receive_size {
            return self.fail(Reply::None);
        }
        let generic = || {
            format!(
                "Authentication failed during authentication due to invalid credentials with SASL mechanism {}",
                mechanism.name()
            )
        };
        // (answer, user, the credential's expiry on the wall clock).
        type Finished = (Vec<u8>, String, Option<i64>);
        let outcome: Result<Finished, String> = match (mechanism, progress) {
            (Mechanism::Plain, _) => plain::authenticate(bytes, &self.settings.plain_users)
                .map(|user| (Vec::new(), user, None)),
            (Mechanism::OAuthBearer, progress) => {
                let challenged = match &progress {
                    Progress::Challenged(json) => Some(json.as_str()),
                    _ => None,
                };
                let options = &self.settings.oauthbearer;
                match oauthbearer::server_token(bytes, challenged, options, at.wall_ms) {
                    oauthbearer::Outcome::Done {
                        principal,
                        expires_ms,
                    } => Ok((Vec::new(), principal, Some(expires_ms))),
                    oauthbearer::Outcome::Challenge(json) => {
                        self.state = State::Exchange {
                            mechanism,
                            raw,
                            progress: Progress::Challenged(json.clone()),
                        };
                        return self.token_reply(raw, json.into_bytes(), 0);
                    }
                    oauthbearer::Outcome::Fail(message) => Err(message),
                    oauthbearer::Outcome::FailGeneric(_) => Err(generic()),
                }
            }
            (_, Progress::Scram(first)) => match scram::client_final(&first, bytes) {
                Ok(reply) => Ok((reply, first.username.clone(), None)),
                Err(scram::Failure::Credentials) => Err(generic()),
                Err(scram::Failure::Invalid(m)) => Err(m),
            },
            (_, _) => {
                let hash = mechanism.hash().expect("SCRAM mechanisms have a hash");
                let lookup = |user: &str| creds.scram(user, mechanism);
                match scram::client_first(hash, bytes, entropy, lookup) {
                    Ok((first, reply)) => {
                        self.state = State::Exchange {
                            mechanism,
                            raw,
                            progress: Progress::Scram(first),
                        };
                        return self.token_reply(raw, reply, 0);
                    }
                    Err(scram::Failure::Credentials) => Err(generic()),
                    Err(scram::Failure::Invalid(m)) => Err(m),
                }
            }
        };
        match outcome {
            Ok((reply, user, expires_ms)) => {
                let principal = format!("User:{user}");
                if self.reauthenticating && self.principal.as_deref() != Some(principal.as_str()) {
                    let message = format!(
                        "Cannot change principals during re-authentication from {}: {principal}",
                        self.principal.as_deref().unwrap_or("")
                    );
                    return self.fail(Reply::Authenticate {
                        error_code: SASL_AUTHENTICATION_FAILED,
                        message: Some(message),
                        bytes: Vec::new(),
                        session_lifetime_ms: 0,
                    });
                }
                self.principal = Some(principal);
                self.reauthenticating = false;
                let lifetime = session_lifetime(self.settings.reauth, expires_ms, at.wall_ms);
                self.state = State::Done {
                    mechanism,
                    expires_at: lifetime.map(|l| at.now + l),
                    authenticated_at: at.now,
                };
                let ms = lifetime.map_or(0, |l| l.as_millis() as i64);
                self.token_reply(raw, reply, ms)
            }
            Err(message) if raw => {
                // v0 has no error reply: the socket just closes.
                let _ = message;
                self.fail(Reply::None)
            }
            Err(message) => self.fail(Reply::Authenticate {
                error_code: SASL_AUTHENTICATION_FAILED,
                message: Some(message),
                bytes: Vec::new(),
                session_lifetime_ms: 0,
            }),
        }
    }

    fn token_reply(&self, raw: bool, bytes: Vec<u8>, session_lifetime_ms: i64) -> Step {
        Self::go_on(match raw {
            true => Reply::Raw(bytes),
            false => Reply::Authenticate {
                error_code: 0,
                message: None,
                bytes,
                session_lifetime_ms,
            },
        })
    }
}

/// The clocks of one step: monotonic (sessions) and wall (tokens).
#[derive(Clone, Copy)]
struct Clocks {
    now: Duration,
    wall_ms: i64,
}

/// A session's lifetime as Kafka's `ReauthInfo` computes it (KIP-368): the smaller of
/// `connections.max.reauth.ms` and the credential's remaining life (an OAUTHBEARER token's
/// `exp`), whichever are set; `None`: no expiry. A credential already past its expiry (within
/// the validator's clock skew) gives a session that has already ended.
fn session_lifetime(
    reauth: Option<Duration>,
    expires_ms: Option<i64>,
    wall_ms: i64,
) -> Option<Duration> {
    let remaining =
        expires_ms.map(|at| Duration::from_millis(at.saturating_sub(wall_ms).max(0) as u64));
    match (reauth, remaining) {
        (None, None) => None,
        (Some(r), None) => Some(r),
        (None, Some(c)) => Some(c),
        (Some(r), Some(c)) => Some(r.min(c)),
    }
}

#[cfg(test)]
mod tests;
