//! The `unauthenticated` target: a client's first bytes on a SASL listener, before it has
//! authenticated: SaslHandshake and SaslAuthenticate frames (v0 raw tokens too), requests out
//! of turn, and TLS records (a ClientHello or garbage) on the SASL_SSL listener. A fresh broker
//! on a `MemDisk` serves the input as one connection through the whole connection loop
//! (`Broker::serve_replayed`: TLS, the SASL core, routing).
//!
//! Input: the first byte picks the listener (even: SASL_PLAINTEXT, odd: SASL_SSL); the rest is
//! what the client writes before it closes its side.
//!
//! What must hold, beyond "never panics, never hangs": nothing is carried out for a client
//! that has not authenticated. The only credentials the broker knows are PLAIN's
//! `alice`/`alice-secret` (no SCRAM credentials are stored) and, for OAUTHBEARER (unsecured
//! tokens, which anyone can write), a token whose scope holds [`SCOPE`]: an input with neither
//! creates no topic, through CreateTopics or a Metadata's auto-creation.

use std::collections::BTreeMap;

use bytes::Bytes;
use weir::broker::Broker;
use weir::config::ServerConfig;
use weir::io::memdisk::MemDisk;

use crate::harness_io::{block_on, io, kill_tasks};
use crate::requests::PEER;

/// The one password that authenticates (PLAIN, user `alice`).
pub const PASSWORD: &[u8] = b"alice-secret";

/// The scope an OAUTHBEARER token needs (`unsecuredValidatorRequiredScope`): the "password"
/// of unsecured tokens.
pub const SCOPE: &str = "fuzz-scope";

/// A self-signed certificate for 127.0.0.1 and its key (P-256, PKCS#8), for the SASL_SSL
/// listener: a fuzz input cannot complete a handshake without the client's randomness
/// anyway, so only the server side needs to be real.
const CERT: &str = "-----BEGIN CERTIFICATE-----
MIIBnDCCAUGgAwIBAgIUC+Fg14i1JkHSJoacIjM5b2hAgFEwCgYIKoZIzj0EAwIw
FDESMBAGA1UEAwwJbG9jYWxob3N0MCAXDTI2MTIwNjE0MDQ1OFoYDzIxMjYxMTEy
MTQwNDU4WjAUMRIwEAYDVQQDDAlsb2NhbGhvc3QwWTATBgcqhkjOPQIBBggqhkjO
PQMBBwNCAATdPdse4w1E6Z3Yw7s/XZ942ZqawpDMtqqONHN4UGMWQCxcoum61dXa
PqJ3p9cHNdPXmsplSUcjPr2KovpQxp7Mo28wbTAdBgNVHQ4EFgQUrHf3gbbC+zAO
1WJ4q0s/AFcMHmUwHwYDVR0jBBgwFoAUrHf3gbbC+zAO1WJ4q0s/AFcMHmUwDwYD
VR0TAQH/BAUwAwEB/zAaBgNVHREEEzARhwR/AAABgglsb2NhbGhvc3QwCgYIKoZI
zj0EAwIDSQAwRgIhAMq8c/M2dhGPKGj+e0PXEMRp8H9g1e8p+7EviUx56lCNAiEA
1IUtLQyvyIuyZF+X7jBgZD4Q5q3q9FIIOGBTg1Uuheo=
-----END CERTIFICATE-----";
const KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg9KlbXeB+WcMDBtYX
FvctMg+zWFApVp9ai+4fn49LakKhRANCAATdPdse4w1E6Z3Yw7s/XZ942ZqawpDM
tqqONHN4UGMWQCxcoum61dXaPqJ3p9cHNdPXmsplSUcjPr2KovpQxp7M
-----END PRIVATE KEY-----";

/// Bytes one input may carry: a client's opening exchange, bounded so one input stays fast.
const MAX_INPUT: usize = 16 * 1024;

pub fn config() -> ServerConfig {
    let jaas = format!(
        "org.apache.kafka.common.security.plain.PlainLoginModule required user_alice=\"{}\";",
        std::str::from_utf8(PASSWORD).unwrap()
    );
    let props = BTreeMap::from([
        (
            "listeners",
            "SASL_PLAINTEXT://127.0.0.1:9092,SECURE://127.0.0.1:9093,CONTROLLER://127.0.0.1:9094"
                .to_string(),
        ),
        (
            "listener.security.protocol.map",
            "SASL_PLAINTEXT:SASL_PLAINTEXT,SECURE:SASL_SSL,CONTROLLER:PLAINTEXT".to_string(),
        ),
        ("inter.broker.listener.name", "SASL_PLAINTEXT".to_string()),
        (
            "sasl.enabled.mechanisms",
            "PLAIN,SCRAM-SHA-256,OAUTHBEARER".to_string(),
        ),
        (
            "sasl.jaas.config",
            format!(
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \
                 unsecuredValidatorRequiredScope=\"{SCOPE}\";"
            ),
        ),
        ("sasl.mechanism.inter.broker.protocol", "PLAIN".to_string()),
        (
            "listener.name.sasl_plaintext.plain.sasl.jaas.config",
            jaas.clone(),
        ),
        ("listener.name.secure.plain.sasl.jaas.config", jaas),
        (
            "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config",
            "org.apache.kafka.common.security.scram.ScramLoginModule required;".to_string(),
        ),
        (
            "listener.name.secure.scram-sha-256.sasl.jaas.config",
            "org.apache.kafka.common.security.scram.ScramLoginModule required;".to_string(),
        ),
        ("ssl.keystore.type", "PEM".to_string()),
        ("ssl.keystore.certificate.chain", CERT.to_string()),
        ("ssl.keystore.key", KEY.to_string()),
        ("log.dirs", "/data".to_string()),
        ("weir.fsync.before.ack", "true".to_string()),
    ]);
    let props = props.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    ServerConfig::from_properties(&props)
        .expect("the harness config is valid")
        .0
}

/// Whether some base64 run of the input (either alphabet, as the broker decodes a token's
/// parts) decodes to text naming [`SCOPE`], or to JSON with a `\u` escape that might spell it.
fn carries_scope(input: &[u8]) -> bool {
    use weir::security::sasl::oauthbearer::validator::decode_any;
    let b64 = |b: &u8| b.is_ascii_alphanumeric() || b"+/-_".contains(b);
    input
        .split(|b| !b64(b))
        .filter(|run| !run.is_empty())
        .filter_map(|run| decode_any(std::str::from_utf8(run).ok()?))
        .any(|text| {
            text.windows(SCOPE.len()).any(|w| w == SCOPE.as_bytes())
                || text.windows(2).any(|w| w == b"\\u")
        })
}

/// How much of a plaintext input to serve: up to the first frame that asks for more partitions
/// than the harness affords (`requests::too_costly`: once authenticated, a CreateTopics for
/// thousands of partitions is a legitimate request that costs seconds on `MemDisk`, which
/// libFuzzer reports as a hang). On the TLS listener the bytes are records, never such frames.
fn affordable_prefix(input: &[u8]) -> usize {
    let mut at = 0;
    while input.len() - at >= 4 {
        let len = i32::from_be_bytes([input[at], input[at + 1], input[at + 2], input[at + 3]]);
        let Ok(len) = usize::try_from(len) else {
            break;
        };
        let end = (at + 4).saturating_add(len).min(input.len());
        if crate::requests::too_costly(&input[at + 4..end]) {
            return at;
        }
        at = end;
    }
    input.len()
}

pub fn run(data: &[u8]) {
    let Some((&pick, input)) = data.split_first() else {
        return;
    };
    let input = &input[..input.len().min(MAX_INPUT)];
    let input = &input[..affordable_prefix(input)];
    kill_tasks();
    let disk = MemDisk::new(7);
    let io = io(&disk);
    let running = block_on(Broker::start(config(), io)).expect("a fresh broker starts");
    let broker = running.broker;
    let listener = if pick % 2 == 0 {
        "SASL_PLAINTEXT"
    } else {
        "SECURE"
    };
    let served = block_on(broker.serve_replayed(listener, Bytes::copy_from_slice(input), PEER));
    served.expect("the listener's security is usable");
    let knows_password =
        input.windows(PASSWORD.len()).any(|w| w == PASSWORD) || carries_scope(input);
    if !knows_password {
        let topics: Vec<String> = broker.image().topics().map(|t| t.name.clone()).collect();
        assert!(
            topics.is_empty(),
            "a client that never authenticated created {topics:?}"
        );
    }
    drop(broker);
    kill_tasks();
}
