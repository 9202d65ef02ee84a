//! The client's one message of OAUTHBEARER (RFC 7628 §3.1, KIP-342 extensions), read as
//! Kafka's `OAuthBearerClientInitialResponse` reads it and written as its clients write it:
//!
//! `n,[a=<authzid>],` `\x01auth=Bearer <token>\x01` `[<key>=<value>\x01]*` `\x01`
//!
//! Keys are ASCII letters; values printable ASCII, space, tab, CR or LF; `auth` is the token,
//! every other key an extension. The authzid stays escaped (`=2C`, `=3D`), as in Kafka.

use std::collections::BTreeMap;

/// `\x01`, the separator (RFC 7628's `kvsep`).
pub const SEPARATOR: char = '\u{1}';

/// A parsed first message.
#[derive(Debug, PartialEq, Eq)]
pub struct InitialResponse {
    /// Empty when the client sent none.
    pub authzid: String,
    /// The bearer token (for Kafka's default validator, an unsecured JWS).
    pub token: String,
    /// SASL extensions (KIP-342), by name.
    pub extensions: BTreeMap<String, String>,
}

fn saslname_ok(name: &str) -> bool {
    let mut rest = name;
    while let Some(c) = rest.chars().next() {
        if let Some(after) = rest
            .strip_prefix("=2C")
            .or_else(|| rest.strip_prefix("=3D"))
        {
            rest = after;
            continue;
        }
        if !('\u{1}'..='\u{7f}').contains(&c) || c == '=' || c == ',' {
            return false;
        }
        rest = &rest[c.len_utf8()..];
    }
    !name.is_empty()
}

pub fn key_ok(key: &str) -> bool {
    !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphabetic())
}

pub fn value_ok(value: &str) -> bool {
    !value.is_empty()
        && value
            .bytes()
            .all(|b| (0x21..=0x7e).contains(&b) || matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
}

/// The token of `auth=<scheme> <token>`: scheme `Bearer` (any case), one or more spaces, then
/// base64url-ish characters with optional trailing `=` padding.
fn bearer_token(auth: &str) -> Result<&str, String> {
    let invalid = || "Invalid OAUTHBEARER client first message: invalid 'auth' format".to_string();
    let space = auth.find(' ').ok_or_else(invalid)?;
    let (scheme, rest) = auth.split_at(space);
    let token = rest.trim_start_matches(' ');
    let scheme_ok = !scheme.is_empty()
        && scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_');
    let body = token.trim_end_matches('=');
    let token_ok = !body.is_empty()
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_~+/.".contains(&b));
    if !scheme_ok || !token_ok {
        return Err(invalid());
    }
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(format!(
            "Invalid scheme in OAUTHBEARER client first message: {scheme}"
        ));
    }
    Ok(token)
}

/// Parses the client's first message; the error says why (Kafka sends the client only its
/// generic failure text for these).
pub fn parse(bytes: &[u8]) -> Result<InitialResponse, String> {
    let invalid = || "Invalid OAUTHBEARER client first message".to_string();
    let text = std::str::from_utf8(bytes).map_err(|_| invalid())?;
    let rest = text.strip_prefix("n,").ok_or_else(invalid)?;
    let (authzid, rest) = match rest.strip_prefix("a=") {
        Some(after) => {
            let end = after.find(',').ok_or_else(invalid)?;
            if !saslname_ok(&after[..end]) {
                return Err(invalid());
            }
            (after[..end].to_string(), &after[end..])
        }
        None => (String::new(), rest),
    };
    let mut rest = rest
        .strip_prefix(',')
        .and_then(|r| r.strip_prefix(SEPARATOR))
        .ok_or_else(invalid)?;
    let mut pairs = BTreeMap::new();
    while rest != "\u{1}" {
        let end = rest.find(SEPARATOR).ok_or_else(invalid)?;
        let (key, value) = rest[..end].split_once('=').ok_or_else(invalid)?;
        if !key_ok(key) || !value_ok(value) {
            return Err(invalid());
        }
        // A repeated key: the last one counts (Kafka's `Utils.parseMap`).
        pairs.insert(key.to_string(), value.to_string());
        rest = &rest[end + 1..];
    }
    let auth = pairs
        .remove("auth")
        .ok_or("Invalid OAUTHBEARER client first message: 'auth' not specified")?;
    let token = bearer_token(&auth)?.to_string();
    Ok(InitialResponse {
        authzid,
        token,
        extensions: pairs,
    })
}

/// The message a client sends: no authzid, the token, then the extensions (their names and
/// values checked by the caller).
pub fn write(token: &str, extensions: &BTreeMap<String, String>) -> Vec<u8> {
    let mut out = format!("n,,{SEPARATOR}auth=Bearer {token}");
    for (k, v) in extensions {
        out.push(SEPARATOR);
        out.push_str(&format!("{k}={v}"));
    }
    out.push(SEPARATOR);
    out.push(SEPARATOR);
    out.into_bytes()
}
