//! Kafka's default OAUTHBEARER validator (`OAuthBearerUnsecuredValidatorCallbackHandler` with
//! `OAuthBearerUnsecuredJws` and `OAuthBearerValidationUtils`), checks in its order: an
//! unsigned JWS (`header.claims.`, `alg` `none`, no signature) whose claims carry a string
//! principal (`sub`, or `unsecuredValidatorPrincipalClaimName`), a numeric `exp` in the future
//! and an optional numeric `iat` not in the future (both in seconds, fractions allowed, within
//! `unsecuredValidatorAllowableClockSkewMs`), `exp` after `iat`, and every scope of
//! `unsecuredValidatorRequiredScope` in the token's scope claim (`scope`, or
//! `unsecuredValidatorScopeClaimName`; a string is one scope, a list several).
//!
//! Anyone can write such a token: it proves nothing. Kafka ships it for tests, as Weir does.
//!
//! Pure: the wall clock comes in as `now_ms`. Deviation: the base64 of the parts may use either
//! alphabet (Kafka's validator decodes the standard one, while clients write base64url).

use std::collections::BTreeMap;

use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine;
use serde_json::Value;

/// The `unsecuredValidator*` options of the listener's OAUTHBEARER JAAS entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidatorOptions {
    pub principal_claim: String,
    pub scope_claim: String,
    pub required_scope: Vec<String>,
    pub allowable_clock_skew_ms: i64,
}

impl Default for ValidatorOptions {
    fn default() -> ValidatorOptions {
        ValidatorOptions {
            principal_claim: "sub".into(),
            scope_claim: "scope".into(),
            required_scope: Vec::new(),
            allowable_clock_skew_ms: 0,
        }
    }
}

impl ValidatorOptions {
    /// From a JAAS entry's options (other options are ignored, as Kafka ignores them).
    pub fn from_jaas(options: &BTreeMap<String, String>) -> Result<ValidatorOptions, String> {
        let mut out = ValidatorOptions::default();
        let given = |key: &str| options.get(key).map(|v| v.trim()).filter(|v| !v.is_empty());
        if let Some(v) = given("unsecuredValidatorPrincipalClaimName") {
            out.principal_claim = v.to_string();
        }
        if let Some(v) = given("unsecuredValidatorScopeClaimName") {
            out.scope_claim = v.to_string();
        }
        if let Some(v) = given("unsecuredValidatorRequiredScope") {
            out.required_scope = parse_scope(v)?;
        }
        if let Some(v) = given("unsecuredValidatorAllowableClockSkewMs") {
            out.allowable_clock_skew_ms =
                v.parse::<i32>().ok().filter(|n| *n >= 0).ok_or_else(|| {
                    format!("unsecuredValidatorAllowableClockSkewMs must be an int ≥ 0: {v}")
                })? as i64;
        }
        Ok(out)
    }
}

/// Kafka's `OAuthBearerScopeUtils.parseScope`: space-separated items of RFC 6749's NQCHAR
/// (printable ASCII but `"` and `\`).
pub fn parse_scope(text: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for item in text.split(' ').filter(|s| !s.is_empty()) {
        let ok = item
            .bytes()
            .all(|b| b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b));
        if !ok {
            return Err(format!("Invalid scope value: {item}"));
        }
        out.push(item.to_string());
    }
    Ok(out)
}

/// A token that passed.
#[derive(Debug, PartialEq)]
pub struct Valid {
    pub principal: String,
    /// `exp` in ms (rounded): the credential's expiry for the session lifetime (KIP-368).
    pub expires_ms: i64,
    /// The token's scope, sorted.
    pub scope: Vec<String>,
}

/// Why a token failed: Kafka answers the client only the status (and the required scope),
/// never the reason, which is for the broker's log.
#[derive(Debug, PartialEq)]
pub enum Invalid {
    /// `invalid_token`.
    Token(String),
    /// `insufficient_scope`, with the required scope.
    Scope {
        reason: String,
        required: Vec<String>,
    },
}

impl Invalid {
    /// The JSON the server sends in place of success (RFC 7628 §3.2.2), as Kafka formats it.
    pub fn json(&self) -> String {
        match self {
            Invalid::Token(_) => r#"{"status":"invalid_token"}"#.to_string(),
            // Java's `List.toString()` of the required scope.
            Invalid::Scope { required, .. } => format!(
                r#"{{"status":"insufficient_scope", "scope":"[{}]"}}"#,
                required.join(", ")
            ),
        }
    }

    pub fn reason(&self) -> &str {
        match self {
            Invalid::Token(r) | Invalid::Scope { reason: r, .. } => r,
        }
    }
}

/// A claim as Kafka's Jackson conversion leaves it: numbers stay numbers, arrays become lists
/// of their elements' text, anything else its text.
#[derive(Debug)]
enum Claim {
    Number(f64),
    List(Vec<String>),
    Text(String),
}

fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Null => "null".into(),
        // Jackson's `asText()` of a container is empty.
        Value::Array(_) | Value::Object(_) => String::new(),
    }
}

fn claim_of(v: &Value) -> Claim {
    match v {
        Value::Number(n) => Claim::Number(n.as_f64().unwrap_or(f64::NAN)),
        Value::Array(items) => Claim::List(items.iter().map(text_of).collect()),
        other => Claim::Text(text_of(other)),
    }
}

fn type_name(c: &Claim) -> &'static str {
    match c {
        Claim::Number(_) => "Number",
        Claim::List(_) => "List",
        Claim::Text(_) => "String",
    }
}

fn bad(reason: impl Into<String>) -> Invalid {
    Invalid::Token(reason.into())
}

/// Base64 with either alphabet, padded or not.
pub fn decode_any(part: &str) -> Option<Vec<u8>> {
    const ENGINE: GeneralPurpose = GeneralPurpose::new(
        &alphabet::URL_SAFE,
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
    );
    let url: String = part
        .chars()
        .map(|c| match c {
            '+' => '-',
            '/' => '_',
            c => c,
        })
        .collect();
    ENGINE.decode(url).ok()
}

fn decode_part(part: &str) -> Result<Vec<u8>, Invalid> {
    decode_any(part).ok_or_else(|| bad("malformed Base64 URL encoded value"))
}

fn json_object(part: &str) -> Result<BTreeMap<String, Claim>, Invalid> {
    let bytes = decode_part(part)?;
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(map)) => Ok(map.iter().map(|(k, v)| (k.clone(), claim_of(v))).collect()),
        Ok(_) => Err(bad("malformed JSON: not an object")),
        Err(_) => Err(bad("malformed JSON")),
    }
}

fn number(claims: &BTreeMap<String, Claim>, name: &str) -> Result<Option<f64>, Invalid> {
    match claims.get(name) {
        None => Ok(None),
        Some(Claim::Number(n)) => Ok(Some(*n)),
        Some(other) => Err(bad(format!(
            "The '{name}' claim was not of type Number: {}",
            type_name(other)
        ))),
    }
}

/// Validates `token` at wall-clock time `now_ms`.
pub fn validate(token: &str, options: &ValidatorOptions, now_ms: i64) -> Result<Valid, Invalid> {
    if token.contains("..") {
        return Err(bad("Malformed compact serialization contains '..'"));
    }
    let parts: Vec<&str> = token.split('.').collect();
    if parts.len() != 3 {
        return Err(bad(
            "Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values",
        ));
    }
    let header = json_object(parts[0])?;
    let claims = json_object(parts[1])?;
    match header.get("alg") {
        None => return Err(bad("JWS header must have an Algorithm value")),
        Some(Claim::Text(alg)) if alg == "none" => {}
        Some(_) => return Err(bad("Unsecured JWS must have 'none' for an algorithm")),
    }
    if !parts[2].is_empty() {
        return Err(bad("Unsecured JWS must not contain a digital signature"));
    }
    let mut scope: Vec<String> = match claims.get(&options.scope_claim) {
        None => Vec::new(),
        Some(Claim::Text(s)) if s.trim().is_empty() => Vec::new(),
        // A string is one scope, spaces and all (Kafka does not split it).
        Some(Claim::Text(s)) => vec![s.trim().to_string()],
        Some(Claim::List(items)) => items
            .iter()
            .map(|s| s.trim())
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect(),
        Some(other) => {
            return Err(bad(format!(
                "The '{}' claim was not of type List: {}",
                options.scope_claim,
                type_name(other)
            )))
        }
    };
    scope.sort();
    scope.dedup();
    let exp = number(&claims, "exp")?.ok_or_else(|| bad("No expiration time in JWT"))?;
    let principal = match claims.get(&options.principal_claim) {
        Some(Claim::Text(p)) if !p.trim().is_empty() => p.clone(),
        Some(Claim::Text(_)) | None => {
            return Err(bad(format!(
                "No principal name in JWT claim: {}",
                options.principal_claim
            )))
        }
        Some(other) => {
            return Err(bad(format!(
                "The '{}' claim was not of type String: {}",
                options.principal_claim,
                type_name(other)
            )))
        }
    };
    let iat = number(&claims, "iat")?;
    let now = now_ms as f64;
    let skew = options.allowable_clock_skew_ms as f64;
    if let Some(iat) = iat {
        if 1000.0 * iat > now + skew {
            return Err(bad(format!(
                "The Issued At value ({iat} seconds) was after the indicated time ({now_ms} ms) plus allowable clock skew ({skew} ms)"
            )));
        }
    }
    // NaN compares false both ways: a NaN `exp` is not live, so it counts as expired.
    let live = now - skew < 1000.0 * exp;
    if !live {
        return Err(bad(format!(
            "The indicated time ({now_ms} ms) minus allowable clock skew ({skew} ms) was on or after the Expiration Time value ({exp} seconds)"
        )));
    }
    if let Some(iat) = iat {
        if exp <= iat {
            return Err(bad(format!(
                "The Expiration Time time ({exp} seconds) was not after the Issued At time ({iat} seconds)"
            )));
        }
    }
    for required in &options.required_scope {
        if !scope.contains(required) {
            return Err(Invalid::Scope {
                reason: format!(
                    "The provided scope ({scope:?}) was missing a required scope ({required})"
                ),
                required: options.required_scope.clone(),
            });
        }
    }
    let expires_ms = (exp * 1000.0).round();
    let expires_ms = expires_ms.clamp(i64::MIN as f64, i64::MAX as f64) as i64;
    Ok(Valid {
        principal,
        expires_ms,
        scope,
    })
}
