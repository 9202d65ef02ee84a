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
        mechanisms: vec![Mechanism::ScramSha512, Mechanism::Plain],
        plain_users: BTreeMap::from([("bob".to_string(), "bob-secret".to_string())]),
        max_receive_size: 524288,
        failed_delay: DELAY,
        reauth,
    }
}

fn token(bytes: &[u8]) -> Input<'_> {
    Input::Token {
        bytes,
        entropy: [7; 18],
        raw: false,
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
                mechanisms: vec!["SCRAM-SHA-512", "PLAIN"]
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

/// Hostile sequences: whatever a client sends in whatever order, the core answers without a
/// panic, never names a principal without a finished exchange, and stops at the first close.
mod hostile {
    use proptest::prelude::*;

    use super::*;

    fn input() -> impl Strategy<Value = (u8, i16, Vec<u8>)> {
        (
            0u8..5,
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
                    Some(b) if b % 3 == 0 => "PLAIN",
                    Some(b) if b % 3 == 1 => "SCRAM-SHA-512",
                    _ => text.as_str(),
                };
                let input = match kind {
                    0 => Input::ApiVersions,
                    1 => Input::Handshake { version: *version, mechanism },
                    2 => Input::Token { bytes, entropy: [1; 18], raw: auth.expects_raw_token() },
                    3 => Input::Token { bytes: b"\0bob\0bob-secret", entropy: [1; 18], raw: auth.expects_raw_token() },
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
