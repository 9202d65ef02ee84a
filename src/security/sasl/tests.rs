use std::collections::BTreeMap;
use std::time::Duration;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;

use super::scram::tests::{proof, salted};
use super::scram::Hash;
use super::*;

const DELAY: Duration = Duration::from_millis(100);

struct Users(BTreeMap<String, Credential>);

impl Credentials for Users {
    fn scram(&self, user: &str, mechanism: Mechanism) -> Option<Credential> {
        (mechanism == Mechanism::ScramSha512)
            .then(|| self.0.get(user).cloned())
            .flatten()
    }
}

/// Built once: PBKDF2 at 4096 rounds is slow in a debug build.
fn users() -> Users {
    static USERS: std::sync::OnceLock<BTreeMap<String, Credential>> = std::sync::OnceLock::new();
    Users(USERS.get_or_init(|| build_users().0).clone())
}

fn build_users() -> Users {
    let salt = b"QSXCR+Q6sek8bf92".to_vec();
    let salted_password = salted(Hash::Sha512, "alice-secret", &salt, 4096);
    let alice = Credential {
        salt,
        salted_password,
        iterations: 4096,
    };
    Users(BTreeMap::from([("alice".to_string(), alice)]))
}

fn settings(reauth: Option<Duration>) -> SaslSettings {
    SaslSettings {
        mechanisms: vec![
            Mechanism::ScramSha512,
            Mechanism::Plain,
            Mechanism::OAuthBearer,
        ],
        plain_users: BTreeMap::from([("bob".to_string(), "bob-secret".to_string())]),
        max_receive_size: 524288,
        failed_delay: DELAY,
        reauth,
        oauthbearer: oauthbearer::ValidatorOptions::default(),
    }
}

fn token(bytes: &[u8]) -> Input<'_> {
    Input::Token {
        bytes,
        entropy: [7; 18],
        raw: false,
        wall_ms: 0,
    }
}

fn handshake(mechanism: &str) -> Input<'_> {
    Input::Handshake {
        version: 1,
        mechanism,
    }
}

fn ok_bytes(step: Step) -> Vec<u8> {
    assert_eq!(step.then, Then::Continue, "{step:?}");
    match step.reply {
        Reply::Authenticate {
            error_code: 0,
            bytes,
            ..
        } => bytes,
        other => panic!("{other:?}"),
    }
}

fn failed(step: &Step) -> bool {
    step.then == Then::CloseAfter(DELAY)
        && matches!(
            step.reply,
            Reply::Authenticate {
                error_code: SASL_AUTHENTICATION_FAILED,
                ..
            }
        )
}

/// A SCRAM-SHA-512 client: client-first and, given server-first, client-final.
fn scram_login(auth: &mut Authenticator, creds: &Users, password: &str, now: Duration) -> Step {
    let first = b"n,,n=alice,r=fyko+d2lbbFgONRv9qkxdawL";
    let server_first = String::from_utf8(ok_bytes(auth.step(now, token(first), creds))).unwrap();
    let nonce = server_first[2..server_first.find(",s=").unwrap()].to_string();
    let salt = b"QSXCR+Q6sek8bf92";
    let salted_password = salted(Hash::Sha512, password, salt, 4096);
    let without_proof = format!("c=biws,r={nonce}");
    let auth_message = format!("n=alice,r=fyko+d2lbbFgONRv9qkxdawL,{server_first},{without_proof}");
    let p = B64.encode(proof(Hash::Sha512, &salted_password, &auth_message));
    let final_msg = format!("{without_proof},p={p}");
    auth.step(now, token(final_msg.as_bytes()), creds)
}

#[test]
fn scram_sha512_exchange_names_the_principal() {
    let creds = users();
    let mut auth = Authenticator::new(settings(None));
    let now = Duration::ZERO;
    assert_eq!(
        auth.step(now, Input::ApiVersions, &creds).reply,
        Reply::Route
    );
    let step = auth.step(now, handshake("SCRAM-SHA-512"), &creds);
    assert!(matches!(step.reply, Reply::Handshake { error_code: 0, .. }));
    assert_eq!(auth.principal(), None);
    let last = ok_bytes(scram_login(&mut auth, &creds, "alice-secret", now));
    assert!(last.starts_with(b"v="));
    assert_eq!(auth.principal(), Some("User:alice"));
    assert_eq!(auth.step(now, Input::Other, &creds).reply, Reply::Route);
    // A late handshake goes to the router (ILLEGAL_SASL_STATE), the connection stays.
    assert_eq!(
        auth.step(now, handshake("PLAIN"), &creds).reply,
        Reply::Route
    );
}

#[test]
fn wrong_password_unknown_user_and_replay_fail_after_the_delay() {
    let creds = users();
    let mut auth = Authenticator::new(settings(None));
    auth.step(Duration::ZERO, handshake("SCRAM-SHA-512"), &creds);
    assert!(failed(&scram_login(
        &mut auth,
        &creds,
        "wrong",
        Duration::ZERO
    )));
    assert_eq!(auth.principal(), None);

    let mut auth = Authenticator::new(settings(None));
    auth.step(Duration::ZERO, handshake("SCRAM-SHA-512"), &creds);
    let step = auth.step(Duration::ZERO, token(b"n,,n=mallory,r=abc"), &creds);
    assert!(failed(&step));
    let Reply::Authenticate { message, .. } = step.reply else {
        unreachable!()
    };
    assert!(message.unwrap().contains("invalid credentials"));

    // A client-final recorded from another session (another server nonce) is refused.
    let mut first = Authenticator::new(settings(None));
    first.step(Duration::ZERO, handshake("SCRAM-SHA-512"), &creds);
    let c1 = b"n,,n=alice,r=abc";
    let sf = String::from_utf8(ok_bytes(first.step(Duration::ZERO, token(c1), &creds))).unwrap();
    let nonce = &sf[2..sf.find(",s=").unwrap()];
    let mut second = Authenticator::new(settings(None));
    second.step(Duration::ZERO, handshake("SCRAM-SHA-512"), &creds);
    let entropy = [9; 18];
    let input = Input::Token {
        bytes: c1,
        entropy,
        raw: false,
        wall_ms: 0,
    };
    ok_bytes(second.step(Duration::ZERO, input, &creds));
    let replay = format!("c=biws,r={nonce},p=AAAA");
    assert!(failed(&second.step(
        Duration::ZERO,
        token(replay.as_bytes()),
        &creds
    )));
}

#[test]
fn requests_before_authentication_close_without_reaching_a_handler() {
    let creds = users();
    let mut auth = Authenticator::new(settings(None));
    let step = auth.step(Duration::ZERO, Input::Other, &creds);
    assert_eq!(
        step,
        Step {
            reply: Reply::None,
            then: Then::CloseAfter(DELAY)
        }
    );

    let mut auth = Authenticator::new(settings(None));
    auth.step(Duration::ZERO, Input::ApiVersions, &creds);
    let step = auth.step(Duration::ZERO, Input::ApiVersions, &creds);
    assert_eq!(step.then, Then::CloseAfter(Duration::ZERO));

    let mut auth = Authenticator::new(settings(None));
    let step = auth.step(Duration::ZERO, token(b"n,,n=alice,r=abc"), &creds);
    assert_eq!(step.then, Then::CloseAfter(DELAY));

    // After the handshake, only tokens.
    let mut auth = Authenticator::new(settings(None));
    auth.step(Duration::ZERO, handshake("PLAIN"), &creds);
    assert_eq!(
        auth.step(Duration::ZERO, Input::Other, &creds).then,
        Then::CloseAfter(DELAY)
    );
}

#[test]
fn unsupported_mechanism_lists_the_enabled_ones() {
    let creds = users();
    for name in ["GSSAPI", "SCRAM-SHA-256", "plain", ""] {
        let mut auth = Authenticator::new(settings(None));
        let step = auth.step(Duration::ZERO, handshake(name), &creds);
        assert_eq!(
            step.reply,
            Reply::Handshake {
                error_code: UNSUPPORTED_SASL_MECHANISM,
                mechanisms: vec!["SCRAM-SHA-512", "PLAIN", "OAUTHBEARER"]
            }
        );
        assert_eq!(step.then, Then::CloseAfter(DELAY));
    }
}

#[test]
fn oversized_and_garbage_tokens_fail() {
    let creds = users();
    for bytes in [vec![0u8; 524289], vec![0xff; 10], vec![], b"n,,".to_vec()] {
        for mechanism in ["PLAIN", "SCRAM-SHA-512"] {
            let mut auth = Authenticator::new(settings(None));
            auth.step(Duration::ZERO, handshake(mechanism), &creds);
            let step = auth.step(Duration::ZERO, token(&bytes), &creds);
            assert_eq!(step.then, Then::CloseAfter(DELAY), "{mechanism}");
        }
    }
}

#[test]
fn plain_over_a_v0_handshake_uses_raw_tokens() {
    let creds = users();
    let mut auth = Authenticator::new(settings(None));
    auth.step(
        Duration::ZERO,
        Input::Handshake {
            version: 0,
            mechanism: "PLAIN",
        },
        &creds,
    );
    assert!(auth.expects_raw_token());
    let input = Input::Token {
        bytes: b"\0bob\0bob-secret",
        entropy: [0; 18],
        raw: true,
        wall_ms: 0,
    };
    let step = auth.step(Duration::ZERO, input, &creds);
    assert_eq!(
        step,
        Step {
            reply: Reply::Raw(vec![]),
            then: Then::Continue
        }
    );
    assert_eq!(auth.principal(), Some("User:bob"));
}

#[test]
fn sessions_expire_and_reauthenticate_as_the_same_principal() {
    let creds = users();
    let lifetime = Duration::from_secs(10);
    let mut auth = Authenticator::new(settings(Some(lifetime)));
    auth.step(Duration::ZERO, handshake("PLAIN"), &creds);
    let step = auth.step(Duration::ZERO, token(b"\0bob\0bob-secret"), &creds);
    assert!(matches!(
        step.reply,
        Reply::Authenticate {
            session_lifetime_ms: 10000,
            ..
        }
    ));
    let t = Duration::from_secs(9);
    assert_eq!(auth.step(t, Input::Other, &creds).reply, Reply::Route);
    let step = auth.step(t, handshake("PLAIN"), &creds);
    assert!(matches!(step.reply, Reply::Handshake { error_code: 0, .. }));
    assert_eq!(auth.principal(), Some("User:bob"));
    ok_bytes(auth.step(t, token(b"\0bob\0bob-secret"), &creds));
    // Expired: a request closes the connection without an answer.
    let late = t + lifetime;
    assert_eq!(
        auth.step(late, Input::Other, &creds).then,
        Then::CloseAfter(Duration::ZERO)
    );

    // Re-authenticating as someone else fails.
    let mut plain = settings(Some(lifetime));
    plain.plain_users.insert("eve".into(), "eve-secret".into());
    let mut auth = Authenticator::new(plain);
    auth.step(Duration::ZERO, handshake("PLAIN"), &creds);
    auth.step(Duration::ZERO, token(b"\0bob\0bob-secret"), &creds);
    auth.step(t, handshake("PLAIN"), &creds);
    assert!(failed(&auth.step(t, token(b"\0eve\0eve-secret"), &creds)));
}

/// OAUTHBEARER message by message: a token at wall time `wall_ms` from `config`
/// (librdkafka's `sasl.oauthbearer.config`).
fn bearer(config: &str, issued_ms: i64) -> Vec<u8> {
    oauthbearer::login::UnsecuredLogin::from_librdkafka(config)
        .unwrap()
        .first_message(issued_ms)
}

fn bearer_input(bytes: &[u8], wall_ms: i64) -> Input<'_> {
    Input::Token {
        bytes,
        entropy: [0; 18],
        raw: false,
        wall_ms,
    }
}

/// The wall clock of these tests: 2026-12-06, in ms.
const WALL: i64 = 1_796_000_000_000;

#[test]
fn oauthbearer_token_names_the_principal_and_bounds_the_session() {
    let creds = users();
    // (connections.max.reauth.ms, token lifetime s) → session_lifetime_ms, for a token issued
    // 250 ms before the login.
    for (reauth, life, expected) in [
        (None, 60, 59_750),
        (Some(10_000), 60, 10_000),
        (Some(10_000), 5, 4_750),
    ] {
        let mut auth = Authenticator::new(settings(reauth.map(Duration::from_millis)));
        auth.step(Duration::ZERO, Input::ApiVersions, &creds);
        let step = auth.step(Duration::ZERO, handshake("OAUTHBEARER"), &creds);
        assert!(matches!(step.reply, Reply::Handshake { error_code: 0, .. }));
        let first = bearer(&format!("principal=alice lifeSeconds={life}"), WALL);
        let step = auth.step(Duration::ZERO, bearer_input(&first, WALL + 250), &creds);
        assert_eq!(
            step,
            Step {
                reply: Reply::Authenticate {
                    error_code: 0,
                    message: None,
                    bytes: vec![],
                    session_lifetime_ms: expected,
                },
                then: Then::Continue
            },
            "{reauth:?} {life}"
        );
        assert_eq!(auth.principal(), Some("User:alice"));
    }
}

#[test]
fn oauthbearer_bad_token_is_challenged_then_fails_with_the_json() {
    let creds = users();
    let expired = bearer("principal=alice lifeSeconds=1", WALL - 1_000);
    let no_sub = oauthbearer::message::write(
        "eyJhbGciOiJub25lIn0.eyJleHAiOjk5OTk5OTk5OTl9.",
        &BTreeMap::new(),
    );
    for token in [expired, no_sub] {
        let mut auth = Authenticator::new(settings(None));
        auth.step(Duration::ZERO, handshake("OAUTHBEARER"), &creds);
        let step = auth.step(Duration::ZERO, bearer_input(&token, WALL), &creds);
        let json = br#"{"status":"invalid_token"}"#.to_vec();
        assert_eq!(
            step,
            Step {
                reply: Reply::Authenticate {
                    error_code: 0,
                    message: None,
                    bytes: json.clone(),
                    session_lifetime_ms: 0
                },
                then: Then::Continue
            }
        );
        assert_eq!(auth.principal(), None);
        let step = auth.step(Duration::ZERO, bearer_input(&[1], WALL), &creds);
        assert_eq!(
            step,
            Step {
                reply: Reply::Authenticate {
                    error_code: SASL_AUTHENTICATION_FAILED,
                    message: Some(String::from_utf8(json).unwrap()),
                    bytes: vec![],
                    session_lifetime_ms: 0
                },
                then: Then::CloseAfter(DELAY)
            }
        );
    }
    // A required scope the token lacks: insufficient_scope, naming the scope.
    let mut scoped = settings(None);
    scoped.oauthbearer.required_scope = vec!["produce".into()];
    let mut auth = Authenticator::new(scoped);
    auth.step(Duration::ZERO, handshake("OAUTHBEARER"), &creds);
    let first = bearer("principal=alice scope=consume", WALL);
    let bytes = ok_bytes(auth.step(Duration::ZERO, bearer_input(&first, WALL), &creds));
    assert_eq!(
        bytes,
        br#"{"status":"insufficient_scope", "scope":"[produce]"}"#
    );
}

#[test]
fn oauthbearer_malformed_and_oversized_messages_fail_at_once() {
    let creds = users();
    let huge = bearer(&format!("principal={}", "a".repeat(600_000)), WALL);
    for bytes in [
        &b"n,,\x01auth=Bearer x\x01"[..],
        b"\x01",
        b"",
        b"\xff\xfe",
        &huge,
    ] {
        let mut auth = Authenticator::new(settings(None));
        auth.step(Duration::ZERO, handshake("OAUTHBEARER"), &creds);
        let step = auth.step(Duration::ZERO, bearer_input(bytes, WALL), &creds);
        assert_eq!(
            step.then,
            Then::CloseAfter(DELAY),
            "{:?}",
            &bytes[..bytes.len().min(20)]
        );
        if bytes.len() < 1000 {
            let Reply::Authenticate { message, .. } = step.reply else {
                panic!("{:?}", step.reply)
            };
            assert!(message
                .unwrap()
                .contains("invalid credentials with SASL mechanism OAUTHBEARER"));
        }
    }
}

#[test]
fn oauthbearer_session_ends_with_the_token_and_reauthenticates_with_a_new_one() {
    let creds = users();
    let mut auth = Authenticator::new(settings(None));
    auth.step(Duration::ZERO, handshake("OAUTHBEARER"), &creds);
    let first = bearer("principal=alice lifeSeconds=4", WALL);
    ok_bytes(auth.step(Duration::ZERO, bearer_input(&first, WALL), &creds));
    // At 3.6 s (librdkafka's 90 %) a new token, on the same connection.
    let t = Duration::from_millis(3_600);
    assert_eq!(auth.step(t, Input::Other, &creds).reply, Reply::Route);
    let step = auth.step(t, handshake("OAUTHBEARER"), &creds);
    assert!(matches!(step.reply, Reply::Handshake { error_code: 0, .. }));
    let again = bearer("principal=alice lifeSeconds=4", WALL + 3_600);
    let step = auth.step(t, bearer_input(&again, WALL + 3_600), &creds);
    assert!(matches!(
        step.reply,
        Reply::Authenticate {
            error_code: 0,
            session_lifetime_ms: 4_000,
            ..
        }
    ));
    // Past the first token's end, the second one's session goes on...
    let later = Duration::from_millis(7_000);
    assert_eq!(auth.step(later, Input::Other, &creds).reply, Reply::Route);
    // ...until its own end: then a request closes the connection without an answer.
    let end = Duration::from_millis(7_600);
    assert_eq!(
        auth.step(end, Input::Other, &creds),
        Step {
            reply: Reply::None,
            then: Then::CloseAfter(Duration::ZERO)
        }
    );

    // Re-authenticating as someone else fails; so does another mechanism.
    let mut auth = Authenticator::new(settings(None));
    auth.step(Duration::ZERO, handshake("OAUTHBEARER"), &creds);
    ok_bytes(auth.step(Duration::ZERO, bearer_input(&first, WALL), &creds));
    auth.step(t, handshake("OAUTHBEARER"), &creds);
    let mallory = bearer("principal=mallory", WALL + 3_600);
    assert!(failed(&auth.step(
        t,
        bearer_input(&mallory, WALL + 3_600),
        &creds
    )));
    let mut auth = Authenticator::new(settings(None));
    auth.step(Duration::ZERO, handshake("OAUTHBEARER"), &creds);
    ok_bytes(auth.step(Duration::ZERO, bearer_input(&first, WALL), &creds));
    assert_eq!(
        auth.step(t, handshake("PLAIN"), &creds).then,
        Then::CloseAfter(Duration::ZERO)
    );
}

/// Hostile sequences: whatever a client sends in whatever order, the core answers without a
/// panic, never names a principal without a finished exchange, and stops at the first close.
mod hostile {
    use proptest::prelude::*;

    use super::*;

    fn input() -> impl Strategy<Value = (u8, i16, Vec<u8>)> {
        (
            0u8..7,
            0i16..3,
            proptest::collection::vec(any::<u8>(), 0..64),
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn any_sequence_is_answered_without_panic(steps in proptest::collection::vec(input(), 1..12)) {
            let creds = users();
            let mut auth = Authenticator::new(settings(Some(Duration::from_secs(5))));
            for (i, (kind, version, bytes)) in steps.iter().enumerate() {
                let now = Duration::from_millis(i as u64 * 700);
                let text = String::from_utf8_lossy(bytes).into_owned();
                let mechanism = match bytes.first() {
                    Some(b) if b % 4 == 0 => "PLAIN",
                    Some(b) if b % 4 == 1 => "SCRAM-SHA-512",
                    Some(b) if b % 4 == 2 => "OAUTHBEARER",
                    _ => text.as_str(),
                };
                // Bob's token, good for 2 s from the start.
                let wall_ms = now.as_millis() as i64;
                let bob_token = oauthbearer::login::UnsecuredLogin::from_librdkafka("principal=bob lifeSeconds=2")
                    .unwrap()
                    .first_message(0);
                let input = match kind {
                    0 => Input::ApiVersions,
                    1 => Input::Handshake { version: *version, mechanism },
                    2 => Input::Token { bytes, entropy: [1; 18], raw: auth.expects_raw_token(), wall_ms },
                    3 => Input::Token { bytes: b"\0bob\0bob-secret", entropy: [1; 18], raw: auth.expects_raw_token(), wall_ms },
                    4 => Input::Token { bytes: &bob_token, entropy: [1; 18], raw: auth.expects_raw_token(), wall_ms },
                    5 => Input::Token { bytes: &[1], entropy: [1; 18], raw: auth.expects_raw_token(), wall_ms },
                    _ => Input::Other,
                };
                let step = auth.step(now, input, &creds);
                if let Some(p) = auth.principal() {
                    prop_assert_eq!(p, "User:bob");
                }
                if matches!(step.then, Then::CloseAfter(_)) {
                    break;
                }
            }
        }
    }
}
