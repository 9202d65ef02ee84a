//! The SASL client of one outbound connection as a pure core (the broker's own connections to
//! other brokers and controllers, as Kafka's `SaslClientAuthenticator` runs them): the
//! mechanism's tokens out, the server's tokens in. The driver (`broker::peer::dial`) wraps
//! them in SaslHandshake v1 and SaslAuthenticate and does the I/O; the client nonce comes in
//! as bytes the driver drew, so nothing here reads a clock or a random source.
//!
//! PLAIN sends one token; SCRAM-SHA-256/512 (RFC 5802, no channel binding) sends client-first,
//! answers server-first with client-final, and checks the server's signature in server-final,
//! so a server that does not know the password is refused too. OAUTHBEARER sends one message
//! with an unsecured token made now (the wall clock comes in); a JSON status in answer means
//! the token was refused: the client sends `\x01` and the server fails the login.
//!
//! Invariants (checked after every step): a finished or failed client takes no further token;
//! client-final is sent only once the server's nonce extends ours.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;

use super::oauthbearer::login::UnsecuredLogin;
use super::scram::{self, Hash};
use super::Mechanism;

/// How a client logs in.
#[derive(Clone, PartialEq)]
pub enum Login {
    /// PLAIN or SCRAM-SHA-256/512.
    Password {
        mechanism: Mechanism,
        username: String,
        password: String,
    },
    /// OAUTHBEARER with an unsecured token made at each login.
    OAuthBearer(UnsecuredLogin),
}

impl Login {
    pub fn password(mechanism: Mechanism, username: &str, password: &str) -> Login {
        assert!(
            mechanism != Mechanism::OAuthBearer,
            "OAUTHBEARER has no password"
        );
        Login::Password {
            mechanism,
            username: username.to_string(),
            password: password.to_string(),
        }
    }

    pub fn mechanism(&self) -> Mechanism {
        match self {
            Login::Password { mechanism, .. } => *mechanism,
            Login::OAuthBearer(_) => Mechanism::OAuthBearer,
        }
    }

    /// The user name, or the principal the token names.
    pub fn user(&self) -> &str {
        match self {
            Login::Password { username, .. } => username,
            Login::OAuthBearer(login) => login.principal(),
        }
    }
}

impl std::fmt::Debug for Login {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The password never reaches a log.
        write!(f, "{} as {}", self.mechanism().name(), self.user())
    }
}

/// What the client sends next, or how the exchange ended.
#[derive(Debug, PartialEq, Eq)]
pub enum ClientStep {
    /// Send these bytes (a SaslAuthenticate's auth_bytes) and pass the answer to
    /// [`SaslClient::server_token`].
    Send(Vec<u8>),
    /// Authenticated: nothing more to send.
    Done,
    /// The server's answer does not check out (never the password or a proof in the text).
    Failed(String),
}

#[derive(Debug)]
enum State {
    Start,
    /// PLAIN's token is sent: the server's (empty) answer ends it.
    PlainSent,
    /// OAUTHBEARER's message is sent: an empty answer ends it, a JSON status refuses it.
    BearerSent,
    /// The token was refused with this JSON and `\x01` sent: the server fails the login.
    BearerRefused(String),
    /// SCRAM's client-first is sent.
    FirstSent {
        cnonce: String,
        client_first_bare: String,
    },
    /// Client-final is sent: server-final must carry this signature.
    FinalSent {
        server_signature: Vec<u8>,
    },
    Done,
    Failed,
}

pub struct SaslClient {
    login: Login,
    /// The wall clock at the login (an OAUTHBEARER token's `iat`).
    wall_ms: i64,
    state: State,
}

impl std::fmt::Debug for SaslClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslClient")
            .field("login", &self.login)
            .field("state", &self.state)
            .finish()
    }
}

impl SaslClient {
    pub fn new(mechanism: Mechanism, username: &str, password: &str) -> SaslClient {
        SaslClient::for_login(&Login::password(mechanism, username, password), 0)
    }

    /// A client logging in as `login` now (`wall_ms`, the wall clock).
    pub fn for_login(login: &Login, wall_ms: i64) -> SaslClient {
        assert!(!login.user().is_empty(), "SASL client without a user name");
        SaslClient {
            login: login.clone(),
            wall_ms,
            state: State::Start,
        }
    }

    pub fn mechanism(&self) -> Mechanism {
        self.login.mechanism()
    }

    /// The first token. `entropy`: fresh random bytes for SCRAM's client nonce.
    pub fn start(&mut self, entropy: &[u8]) -> ClientStep {
        assert!(matches!(self.state, State::Start), "started twice");
        let (username, password) = match &self.login {
            Login::OAuthBearer(login) => {
                self.state = State::BearerSent;
                return ClientStep::Send(login.first_message(self.wall_ms));
            }
            Login::Password {
                username, password, ..
            } => (username, password),
        };
        let step = match self.mechanism().hash() {
            None => {
                self.state = State::PlainSent;
                let token = format!("\0{username}\0{password}");
                ClientStep::Send(token.into_bytes())
            }
            Some(_) => {
                // Printable, no ',' (RFC 5802's `printable`): base64 without padding.
                let cnonce = B64.encode(entropy).replace('=', "");
                assert!(!cnonce.is_empty(), "SCRAM client nonce from no entropy");
                let bare = format!("n={},r={cnonce}", escape(username));
                let first = format!("n,,{bare}");
                self.state = State::FirstSent {
                    cnonce,
                    client_first_bare: bare,
                };
                ClientStep::Send(first.into_bytes())
            }
        };
        self.check();
        step
    }

    /// The server's answer to the last token sent.
    pub fn server_token(&mut self, bytes: &[u8]) -> ClientStep {
        let state = std::mem::replace(&mut self.state, State::Failed);
        let step = match (state, self.mechanism().hash()) {
            (State::PlainSent, _) => ClientStep::Done,
            (State::BearerSent, _) if bytes.is_empty() => ClientStep::Done,
            (State::BearerSent, _) => {
                // RFC 7628 §3.2.3: acknowledge the error so the server can fail the login.
                let json = String::from_utf8_lossy(bytes).into_owned();
                self.state = State::BearerRefused(json);
                ClientStep::Send(vec![1])
            }
            (State::BearerRefused(json), _) => {
                ClientStep::Failed(format!("the server refused the OAUTHBEARER token: {json}"))
            }
            (
                State::FirstSent {
                    cnonce,
                    client_first_bare,
                },
                Some(hash),
            ) => self.client_final(hash, &cnonce, &client_first_bare, bytes),
            (State::FinalSent { server_signature }, Some(_)) => {
                Self::server_final(&server_signature, bytes)
            }
            (state, _) => panic!("SASL client token in state {state:?}"),
        };
        match &step {
            ClientStep::Done => self.state = State::Done,
            ClientStep::Failed(_) => self.state = State::Failed,
            // `client_final` or the refused token set the next state.
            ClientStep::Send(_) => {}
        }
        self.check();
        step
    }

    fn check(&self) {
        if let State::FinalSent { server_signature } = &self.state {
            assert!(!server_signature.is_empty());
        }
    }

    fn client_final(
        &mut self,
        hash: Hash,
        cnonce: &str,
        client_first_bare: &str,
        bytes: &[u8],
    ) -> ClientStep {
        let Ok(server_first) = std::str::from_utf8(bytes) else {
            return ClientStep::Failed("SCRAM server-first message is not UTF-8".into());
        };
        let mut nonce = None;
        let mut salt = None;
        let mut iterations = None;
        for attr in server_first.split(',') {
            match attr.split_once('=') {
                Some(("r", v)) => nonce = Some(v),
                Some(("s", v)) => salt = B64.decode(v).ok(),
                Some(("i", v)) => iterations = v.parse::<u32>().ok(),
                Some(("e", v)) => return ClientStep::Failed(format!("SCRAM server error: {v}")),
                _ => {}
            }
        }
        let (Some(nonce), Some(salt), Some(iterations)) = (nonce, salt, iterations) else {
            return ClientStep::Failed(
                "invalid SCRAM server-first message (needs r=, s= and i=)".into(),
            );
        };
        if !nonce.starts_with(cnonce) || nonce.len() == cnonce.len() {
            return ClientStep::Failed("SCRAM server nonce does not extend the client's".into());
        }
        let min = scram::MIN_ITERATIONS as u32;
        let max = scram::MAX_ITERATIONS as u32;
        if !(min..=max).contains(&iterations) {
            return ClientStep::Failed(format!(
                "SCRAM iteration count {iterations} outside {min}..={max}"
            ));
        }
        let Login::Password { password, .. } = &self.login else {
            unreachable!("SCRAM logs in with a password")
        };
        let salted = salted_password(hash, password, &salt, iterations);
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{client_first_bare},{server_first},{without_proof}");
        let client_key = hash.hmac(&salted, b"Client Key");
        let stored_key = hash.digest(&client_key);
        let signature = hash.hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(a, b)| a ^ b)
            .collect();
        let server_key = hash.hmac(&salted, b"Server Key");
        let server_signature = hash.hmac(&server_key, auth_message.as_bytes());
        self.state = State::FinalSent { server_signature };
        ClientStep::Send(format!("{without_proof},p={}", B64.encode(proof)).into_bytes())
    }

    fn server_final(expected: &[u8], bytes: &[u8]) -> ClientStep {
        let text = String::from_utf8_lossy(bytes);
        if let Some(e) = text.strip_prefix("e=") {
            return ClientStep::Failed(format!("SCRAM server error: {e}"));
        }
        let signature = text.strip_prefix("v=").and_then(|v| B64.decode(v).ok());
        match signature {
            Some(s) if scram::constant_time_eq(&s, expected) => ClientStep::Done,
            _ => ClientStep::Failed(
                "the server's SCRAM signature is wrong: it does not know this user's credential"
                    .into(),
            ),
        }
    }
}

/// When a client re-authenticates (KIP-368) after a login whose SaslAuthenticate answer gave
/// `session_lifetime_ms`: as Kafka's clients (`SaslClientAuthenticator.ReauthInfo`), at 85 %
/// of the lifetime plus up to 10 % jitter (`draw`, a random u64), so that the connections of
/// many nodes logged in at once do not re-authenticate at once, and well before the server
/// closes the connection at 100 %. `None`: the session does not expire.
pub fn reauthenticate_after(session_lifetime_ms: i64, draw: u64) -> Option<std::time::Duration> {
    if session_lifetime_ms <= 0 {
        return None;
    }
    // In hundredths of a percent: 85.00 % to 94.99 %.
    let basis_points = 8_500 + draw % 1_000;
    let micros = session_lifetime_ms as u128 * 1_000 * basis_points as u128 / 10_000;
    let after = std::time::Duration::from_micros(micros.min(u64::MAX as u128) as u64);
    assert!(after.as_millis() < session_lifetime_ms as u128);
    Some(after)
}

/// SaltedPassword := Hi(password, salt, i) (PBKDF2 with the mechanism's HMAC).
pub fn salted_password(hash: Hash, password: &str, salt: &[u8], iterations: u32) -> Vec<u8> {
    let (alg, len) = match hash {
        Hash::Sha256 => (ring::pbkdf2::PBKDF2_HMAC_SHA256, 32),
        Hash::Sha512 => (ring::pbkdf2::PBKDF2_HMAC_SHA512, 64),
    };
    let mut out = vec![0u8; len];
    let iterations = std::num::NonZeroU32::new(iterations.max(1)).expect("max(1) is non-zero");
    ring::pbkdf2::derive(alg, iterations, salt, password.as_bytes(), &mut out);
    out
}

/// RFC 5802's saslname: `,` → `=2C`, `=` → `=3D`.
fn escape(name: &str) -> String {
    name.replace('=', "=3D").replace(',', "=2C")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::sasl::scram::{client_final, client_first, Credential};

    fn credential(hash: Hash, password: &str) -> Credential {
        let salt = b"salt-of-the-earth".to_vec();
        Credential {
            salted_password: salted_password(hash, password, &salt, 4096),
            salt,
            iterations: 4096,
        }
    }

    /// The client core against the server core: the right password passes both ways, a wrong
    /// one fails at the server, a server without the credential fails at the client.
    #[test]
    fn scram_against_the_server_core() {
        for (mechanism, hash) in [
            (Mechanism::ScramSha256, Hash::Sha256),
            (Mechanism::ScramSha512, Hash::Sha512),
        ] {
            for (client_pw, server_pw, ok) in
                [("s3cret", "s3cret", true), ("wrong", "s3cret", false)]
            {
                let stored = credential(hash, server_pw);
                let mut client = SaslClient::new(mechanism, "broker,=1", client_pw);
                let ClientStep::Send(first) = client.start(b"client-entropy") else {
                    panic!("no client-first")
                };
                let (state, server_first) = client_first(hash, &first, b"server-entropy", |u| {
                    (u == "broker,=1").then(|| stored.clone())
                })
                .unwrap();
                let ClientStep::Send(last) = client.server_token(&server_first) else {
                    panic!("no client-final")
                };
                match client_final(&state, &last) {
                    Ok(server_final) => {
                        assert!(ok);
                        assert_eq!(client.server_token(&server_final), ClientStep::Done);
                    }
                    Err(_) => assert!(!ok),
                }
            }
            // A server answering with a signature from another credential.
            let mut client = SaslClient::new(mechanism, "u", "pw");
            let ClientStep::Send(first) = client.start(b"e") else {
                panic!()
            };
            let other = credential(hash, "other");
            let (_, server_first) =
                client_first(hash, &first, b"s", |_| Some(other.clone())).unwrap();
            assert!(matches!(
                client.server_token(&server_first),
                ClientStep::Send(_)
            ));
            assert!(matches!(
                client.server_token(b"v=AAAA"),
                ClientStep::Failed(_)
            ));
        }
    }

    #[test]
    fn hostile_server_first() {
        for answer in [
            &b"r=someone-elses-nonce,s=c2FsdA==,i=4096"[..],
            b"s=c2FsdA==,i=4096",
            b"\xff",
            b"e=unknown-user",
        ] {
            let mut client = SaslClient::new(Mechanism::ScramSha512, "u", "pw");
            client.start(b"e");
            assert!(
                matches!(client.server_token(answer), ClientStep::Failed(_)),
                "{answer:?}"
            );
        }
        // An iteration count that would stall the broker is refused.
        let mut client = SaslClient::new(Mechanism::ScramSha256, "u", "pw");
        let ClientStep::Send(first) = client.start(b"e") else {
            panic!()
        };
        let cnonce = String::from_utf8(first)
            .unwrap()
            .rsplit_once("r=")
            .unwrap()
            .1
            .to_string();
        let answer = format!("r={cnonce}x,s=c2FsdA==,i=100000000");
        assert!(matches!(
            client.server_token(answer.as_bytes()),
            ClientStep::Failed(_)
        ));
    }

    /// 85 % to 95 % of the lifetime, never at or past it; no re-authentication without one.
    #[test]
    fn reauthentication_comes_before_the_session_ends() {
        assert_eq!(reauthenticate_after(0, 7), None);
        assert_eq!(reauthenticate_after(-1, 7), None);
        let ms = |draw| reauthenticate_after(10_000, draw).unwrap().as_millis();
        assert_eq!(ms(0), 8_500);
        assert_eq!(ms(500), 9_000);
        assert_eq!(ms(999), 9_499);
        assert_eq!(ms(1_000), 8_500);
        assert_eq!(reauthenticate_after(1, 999).unwrap().as_micros(), 949);
        for draw in [1, 1 << 40, u64::MAX - 1, u64::MAX] {
            let after = reauthenticate_after(2_000, draw).unwrap().as_millis();
            assert!((1_700..1_900).contains(&after), "{after}");
        }
    }

    /// OAUTHBEARER against the server's exchange: a fresh token passes; a stale one is
    /// refused with a JSON status, acknowledged with `\x01`, and failed by the server.
    #[test]
    fn oauthbearer_against_the_server_core() {
        use crate::security::sasl::oauthbearer::{self, Outcome, ValidatorOptions};
        let login = Login::OAuthBearer(
            UnsecuredLogin::from_librdkafka("principal=broker lifeSeconds=60").unwrap(),
        );
        assert_eq!(format!("{login:?}"), "OAUTHBEARER as broker");
        let options = ValidatorOptions::default();
        let mut client = SaslClient::for_login(&login, 5_000_000);
        let ClientStep::Send(first) = client.start(b"") else {
            panic!()
        };
        let Outcome::Done { principal, .. } =
            oauthbearer::server_token(&first, None, &options, 5_000_000)
        else {
            panic!("a fresh token passes")
        };
        assert_eq!(principal, "broker");
        assert_eq!(client.server_token(b""), ClientStep::Done);

        let mut client = SaslClient::for_login(&login, 0);
        let ClientStep::Send(first) = client.start(b"") else {
            panic!()
        };
        let Outcome::Challenge(json) = oauthbearer::server_token(&first, None, &options, 60_000)
        else {
            panic!("an expired token is challenged")
        };
        assert_eq!(
            client.server_token(json.as_bytes()),
            ClientStep::Send(vec![1])
        );
        assert_eq!(
            oauthbearer::server_token(&[1], Some(&json), &options, 60_000),
            Outcome::Fail(json)
        );
        assert!(matches!(client.server_token(b""), ClientStep::Failed(_)));
    }

    #[test]
    fn plain_token() {
        let mut client = SaslClient::new(Mechanism::Plain, "admin", "pw");
        let ClientStep::Send(token) = client.start(&[]) else {
            panic!()
        };
        let users = [("admin".to_string(), "pw".to_string())].into();
        assert_eq!(
            super::super::plain::authenticate(&token, &users).unwrap(),
            "admin"
        );
        assert_eq!(client.server_token(&[]), ClientStep::Done);
    }
}
