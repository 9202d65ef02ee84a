//! SASL/OAUTHBEARER (RFC 7628, KIP-255) with Kafka's default, unsecured token validator: the
//! server side as Kafka's `OAuthBearerSaslServer` runs it ([`server_token`]), the client's
//! first message ([`message`]), the validator ([`validator`]) and a client's unsecured token
//! ([`login`]). Pure: clocks come in as wall-clock milliseconds.
//!
//! The exchange: the client sends its one message with the token. A good token completes at
//! once (empty answer; the session may last until the token's `exp`, KIP-368). A bad one is
//! answered, with no error code, by the JSON status (`{"status":"invalid_token"}`); the client
//! then sends a lone `\x01` and the server fails with SASL_AUTHENTICATION_FAILED carrying that
//! JSON. A malformed message fails at once with Kafka's generic text.

pub mod login;
pub mod message;
pub mod validator;

pub use validator::ValidatorOptions;

/// What the server does with one token.
#[derive(Debug, PartialEq)]
pub enum Outcome {
    /// Authenticated as `principal`; the token expires at `expires_ms` (wall clock).
    Done { principal: String, expires_ms: i64 },
    /// Answer this JSON with no error code; the client's `\x01` comes next.
    Challenge(String),
    /// SASL_AUTHENTICATION_FAILED with this message.
    Fail(String),
    /// SASL_AUTHENTICATION_FAILED with Kafka's generic text; the reason is not sent.
    FailGeneric(String),
}

/// One token from the client. `challenged`: the JSON sent in answer to the previous token, if
/// that one failed.
pub fn server_token(
    bytes: &[u8],
    challenged: Option<&str>,
    options: &ValidatorOptions,
    now_ms: i64,
) -> Outcome {
    if let (Some(json), [1]) = (challenged, bytes) {
        return Outcome::Fail(json.to_string());
    }
    let first = match message::parse(bytes) {
        Ok(first) => first,
        Err(reason) => return Outcome::FailGeneric(reason),
    };
    let valid = match validator::validate(&first.token, options, now_ms) {
        Ok(valid) => valid,
        Err(invalid) => return Outcome::Challenge(invalid.json()),
    };
    if !first.authzid.is_empty() && first.authzid != valid.principal {
        return Outcome::Fail(format!(
            "Authentication failed: Client requested an authorization id ({}) that is different from the token's principal name ({})",
            first.authzid, valid.principal
        ));
    }
    // Kafka's unsecured validator accepts every extension; none changes the principal.
    Outcome::Done {
        principal: valid.principal,
        expires_ms: valid.expires_ms,
    }
}

#[cfg(test)]
mod tests;
