//! The validator and the first message as tables (`testdata/*.txt`, see `crate::data_driven`):
//!
//! - `options <JAAS options>`: the listener's `unsecuredValidator*` options from now on.
//! - `jws now=<ms> header=<json> claims=<json> [sig=<text>]`: a token of those parts (base64url,
//!   no padding) validated at `now`.
//! - `token now=<ms> value=<text>`: a token as written.
//! - `first <message>`: the client's first message, `^A` for `\x01`.
//! - `login now=<ms> jaas=<JAAS options>` / `login now=<ms> rdkafka=<config, `+` for spaces>`:
//!   the client's token, then validated with the current options.

use std::collections::BTreeMap;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

use super::login::UnsecuredLogin;
use super::validator::{validate, Invalid, ValidatorOptions};
use super::*;
use crate::data_driven::{args, num};
use crate::security::sasl::jaas;

struct Runner {
    options: ValidatorOptions,
}

fn jaas_options(text: &str) -> Result<BTreeMap<String, String>, String> {
    jaas::options(&format!("OAuthBearerLoginModule required {text};"))
}

fn verdict(result: Result<validator::Valid, Invalid>) -> String {
    match result {
        Ok(v) => format!(
            "valid principal={} expires_ms={} scope={:?}\n",
            v.principal, v.expires_ms, v.scope
        ),
        Err(e) => {
            let status = match e {
                Invalid::Token(_) => "invalid_token",
                Invalid::Scope { .. } => "insufficient_scope",
            };
            format!("{status}: {}\njson: {}\n", e.reason(), e.json())
        }
    }
}

impl Runner {
    fn run(&mut self, command: &str) -> String {
        let (verb, rest) = command.split_once(' ').unwrap_or((command, ""));
        let words: Vec<&str> = rest.split_whitespace().collect();
        let a = args(&words);
        match verb {
            "options" => match jaas_options(rest).and_then(|o| ValidatorOptions::from_jaas(&o)) {
                Ok(o) => {
                    self.options = o;
                    format!("{:?}\n", self.options)
                }
                Err(e) => format!("error: {e}\n"),
            },
            "jws" => {
                let part = |key: &str| URL_SAFE_NO_PAD.encode(a[key].as_bytes());
                let sig = a.get("sig").cloned().unwrap_or_default();
                let token = format!("{}.{}.{sig}", part("header"), part("claims"));
                verdict(validate(&token, &self.options, num(&a, "now")))
            }
            "token" => verdict(validate(&a["value"], &self.options, num(&a, "now"))),
            "first" => match message::parse(rest.replace("^A", "\u{1}").as_bytes()) {
                Ok(f) => format!(
                    "authzid={:?} token={:?} extensions={:?}\n",
                    f.authzid, f.token, f.extensions
                ),
                Err(e) => format!("error: {e}\n"),
            },
            "login" => {
                let login = match (a.get("jaas"), a.get("rdkafka")) {
                    (Some(_), _) => {
                        let text = rest.split_once("jaas=").unwrap().1;
                        jaas_options(text).and_then(|o| UnsecuredLogin::from_jaas(&o))
                    }
                    (None, Some(text)) => UnsecuredLogin::from_librdkafka(&text.replace('+', " ")),
                    _ => panic!("login needs jaas= or rdkafka="),
                };
                let login = match login {
                    Ok(l) => l,
                    Err(e) => return format!("error: {e}\n"),
                };
                let now = num(&a, "now");
                let first = login.first_message(now);
                let Ok(parsed) = message::parse(&first) else {
                    return "error: the client's own message does not parse\n".into();
                };
                let claims = parsed.token.split('.').nth(1).unwrap();
                let claims = String::from_utf8(URL_SAFE_NO_PAD.decode(claims).unwrap()).unwrap();
                format!(
                    "claims {claims}\nextensions {:?}\n{}",
                    parsed.extensions,
                    verdict(validate(&parsed.token, &self.options, now))
                )
            }
            other => panic!("unknown command {other}"),
        }
    }
}

#[test]
fn data_driven() {
    crate::data_driven::check_dir(
        "src/security/sasl/oauthbearer/testdata",
        || Runner {
            options: ValidatorOptions::default(),
        },
        |r, c| r.run(c),
    );
}

/// Whatever bytes come, the server answers without a panic, and only a message naming an
/// unexpired, unsigned token with a principal completes.
mod hostile {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn any_token_is_answered_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200), now in any::<i64>()) {
            let options = ValidatorOptions::default();
            match server_token(&bytes, None, &options, now) {
                Outcome::Done { principal, .. } => prop_assert!(!principal.trim().is_empty()),
                Outcome::Challenge(json) => prop_assert!(json.starts_with(r#"{"status":"#), "{}", json),
                Outcome::Fail(_) | Outcome::FailGeneric(_) => {}
            }
        }

        #[test]
        fn mangled_parts_never_pass(header in "[ -~]{0,40}", claims in "[ -~]{0,60}") {
            let token = format!("{}.{}.", URL_SAFE_NO_PAD.encode(&header), URL_SAFE_NO_PAD.encode(&claims));
            if let Ok(v) = validate(&token, &ValidatorOptions::default(), 0) {
                prop_assert!(header.contains("none"));
                prop_assert!(v.expires_ms > 0);
            }
        }
    }
}

/// The exchange's three shapes: done, challenge then `\x01`, and a malformed message.
#[test]
fn challenge_then_control_a_fails_with_the_json() {
    let options = ValidatorOptions::default();
    let login = UnsecuredLogin::from_librdkafka("principal=alice lifeSeconds=10").unwrap();
    let first = login.first_message(1_000_000);
    assert_eq!(
        server_token(&first, None, &options, 1_000_000),
        Outcome::Done {
            principal: "alice".into(),
            expires_ms: 1_010_000
        }
    );
    // Ten seconds later the same message is expired.
    let Outcome::Challenge(json) = server_token(&first, None, &options, 1_010_000) else {
        panic!("an expired token must be challenged")
    };
    assert_eq!(json, r#"{"status":"invalid_token"}"#);
    assert_eq!(
        server_token(&[1], Some(&json), &options, 1_010_000),
        Outcome::Fail(json.clone())
    );
    // A `\x01` with nothing challenged is a malformed message.
    assert!(matches!(
        server_token(&[1], None, &options, 0),
        Outcome::FailGeneric(_)
    ));
    // After a challenge a fresh token may still come (Kafka parses it anew).
    let fresh = login.first_message(1_010_000);
    assert!(matches!(
        server_token(&fresh, Some(&json), &options, 1_010_000),
        Outcome::Done { .. }
    ));
}

#[test]
fn authzid_must_name_the_principal() {
    let options = ValidatorOptions::default();
    let token = UnsecuredLogin::from_librdkafka("principal=alice")
        .unwrap()
        .token(0);
    let message = |authzid: &str| format!("n,a={authzid},\u{1}auth=Bearer {token}\u{1}\u{1}");
    assert!(matches!(
        server_token(message("alice").as_bytes(), None, &options, 0),
        Outcome::Done { .. }
    ));
    let Outcome::Fail(text) = server_token(message("bob").as_bytes(), None, &options, 0) else {
        panic!("another authzid must fail")
    };
    assert!(text.contains("(bob)") && text.contains("(alice)"), "{text}");
}
