//! A client's unsecured OAUTHBEARER token, as Kafka's `OAuthBearerUnsecuredLoginCallbackHandler`
//! makes it from the JAAS options of `OAuthBearerLoginModule` (`unsecuredLoginStringClaim_sub`
//! and the rest), or librdkafka from `sasl.oauthbearer.config` (`principal=alice scope=a,b
//! lifeSeconds=60 extension_traceId=x`): header `{"alg":"none"}`, claims with `iat` now and
//! `exp` a lifetime later (seconds, with fractions), base64url without padding, no signature.
//! A fresh token is made at each login, so re-authentication carries a new expiry.
//!
//! Pure: the wall clock comes in as `now_ms`.

use std::collections::BTreeMap;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde_json::{Map, Number, Value};

use super::message;

#[derive(Clone, Debug, PartialEq)]
enum ClaimValue {
    Text(String),
    Number(f64),
    List(Vec<String>),
}

/// What to put in each token.
#[derive(Clone, Debug, PartialEq)]
pub struct UnsecuredLogin {
    principal_claim: String,
    claims: BTreeMap<String, ClaimValue>,
    lifetime_s: f64,
    extensions: BTreeMap<String, String>,
}

const RESERVED: [&str; 2] = ["iat", "exp"];

impl UnsecuredLogin {
    /// Kafka's `unsecuredLogin*` JAAS options.
    pub fn from_jaas(options: &BTreeMap<String, String>) -> Result<UnsecuredLogin, String> {
        let mut claims = BTreeMap::new();
        let mut extensions = BTreeMap::new();
        let mut principal_claim = "sub".to_string();
        let mut lifetime_s = 3600.0;
        for (key, value) in options {
            let claim = |prefix: &str| key.strip_prefix(prefix).filter(|n| !n.is_empty());
            if let Some(name) = claim("unsecuredLoginStringClaim_") {
                claims.insert(name.to_string(), ClaimValue::Text(value.clone()));
            } else if let Some(name) = claim("unsecuredLoginNumberClaim_") {
                let n = value
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|n| n.is_finite())
                    .ok_or_else(|| format!("{key}: not a number: {value}"))?;
                claims.insert(name.to_string(), ClaimValue::Number(n));
            } else if let Some(name) = claim("unsecuredLoginListClaim_") {
                claims.insert(name.to_string(), ClaimValue::List(list(value)));
            } else if let Some(name) = claim("unsecuredLoginExtension_") {
                extensions.insert(name.to_string(), value.clone());
            } else if key == "unsecuredLoginPrincipalClaimName" && !value.trim().is_empty() {
                principal_claim = value.trim().to_string();
            } else if key == "unsecuredLoginLifetimeSeconds" {
                lifetime_s = value
                    .trim()
                    .parse::<i64>()
                    .map_err(|_| format!("{key}: not an integer: {value}"))?
                    as f64;
            }
        }
        UnsecuredLogin::checked(principal_claim, claims, lifetime_s, extensions)
    }

    /// librdkafka's `sasl.oauthbearer.config`: space-separated `principal=` (required),
    /// `principalClaimName=`, `scope=` (comma-separated), `scopeClaimName=`, `lifeSeconds=`,
    /// `extension_<name>=`.
    pub fn from_librdkafka(text: &str) -> Result<UnsecuredLogin, String> {
        let mut principal = None;
        let mut principal_claim = "sub".to_string();
        let mut scope = None;
        let mut scope_claim = "scope".to_string();
        let mut lifetime_s = 3600.0;
        let mut extensions = BTreeMap::new();
        for word in text.split(' ').filter(|w| !w.is_empty()) {
            let (key, value) = word.split_once('=').ok_or_else(|| {
                format!("Unrecognized sasl.oauthbearer.config beginning at: {word}")
            })?;
            match key {
                "principal" => principal = Some(value.to_string()),
                "principalClaimName" => principal_claim = value.to_string(),
                "scope" => scope = Some(value.to_string()),
                "scopeClaimName" => scope_claim = value.to_string(),
                "lifeSeconds" => {
                    lifetime_s = value
                        .parse::<u32>()
                        .ok()
                        .filter(|s| *s > 0)
                        .ok_or_else(|| format!("lifeSeconds must be a positive integer: {value}"))?
                        as f64
                }
                _ => match key.strip_prefix("extension_") {
                    Some(name) if !name.is_empty() => {
                        extensions.insert(name.to_string(), value.to_string());
                    }
                    _ => {
                        return Err(format!(
                            "Unrecognized sasl.oauthbearer.config beginning at: {word}"
                        ))
                    }
                },
            }
        }
        let principal = principal
            .filter(|p| !p.is_empty())
            .ok_or("sasl.oauthbearer.config needs principal=<name>")?;
        let mut claims = BTreeMap::new();
        claims.insert(principal_claim.clone(), ClaimValue::Text(principal));
        if let Some(scope) = scope {
            let mut items: Vec<String> = Vec::new();
            for s in scope.split(',').filter(|s| !s.is_empty()) {
                if !items.iter().any(|i| i == s) {
                    items.push(s.to_string());
                }
            }
            claims.insert(scope_claim, ClaimValue::List(items));
        }
        UnsecuredLogin::checked(principal_claim, claims, lifetime_s, extensions)
    }

    fn checked(
        principal_claim: String,
        claims: BTreeMap<String, ClaimValue>,
        lifetime_s: f64,
        extensions: BTreeMap<String, String>,
    ) -> Result<UnsecuredLogin, String> {
        if let Some(name) = RESERVED.iter().find(|r| claims.contains_key(**r)) {
            return Err(format!("Cannot explicitly set the '{name}' claim"));
        }
        match claims.get(&principal_claim) {
            Some(ClaimValue::Text(p)) if !p.trim().is_empty() => {}
            _ => {
                return Err(format!(
                    "No principal name in JWT claim: {principal_claim} (set \
                     unsecuredLoginStringClaim_{principal_claim}=\"<name>\")"
                ))
            }
        }
        for (k, v) in &extensions {
            if k == "auth" || !message::key_ok(k) {
                return Err(format!("Extension name {k} is invalid"));
            }
            if !message::value_ok(v) {
                return Err(format!(
                    "Extension value ({v}) for extension {k} is invalid"
                ));
            }
        }
        Ok(UnsecuredLogin {
            principal_claim,
            claims,
            lifetime_s,
            extensions,
        })
    }

    /// The principal the token names.
    pub fn principal(&self) -> &str {
        match self.claims.get(&self.principal_claim) {
            Some(ClaimValue::Text(p)) => p,
            _ => unreachable!("checked at construction"),
        }
    }

    /// A token issued at `now_ms`.
    pub fn token(&self, now_ms: i64) -> String {
        let seconds = |s: f64| Value::Number(Number::from_f64(s).unwrap_or_else(|| 0.into()));
        let now_s = now_ms as f64 / 1000.0;
        let mut claims = Map::new();
        claims.insert("iat".into(), seconds(now_s));
        claims.insert("exp".into(), seconds(now_s + self.lifetime_s));
        for (k, v) in &self.claims {
            let value = match v {
                ClaimValue::Text(s) => Value::String(s.clone()),
                ClaimValue::Number(n) => seconds(*n),
                ClaimValue::List(items) => {
                    Value::Array(items.iter().cloned().map(Value::String).collect())
                }
            };
            claims.insert(k.clone(), value);
        }
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#);
        let body = URL_SAFE_NO_PAD.encode(Value::Object(claims).to_string());
        format!("{header}.{body}.")
    }

    /// The client's first message with a token issued at `now_ms`.
    pub fn first_message(&self, now_ms: i64) -> Vec<u8> {
        message::write(&self.token(now_ms), &self.extensions)
    }
}

/// Kafka's `unsecuredLoginListClaim_` value: the first character is the delimiter of the rest
/// (`,a,b` is `["a", "b"]`); an empty element between delimiters is kept.
fn list(value: &str) -> Vec<String> {
    let mut chars = value.chars();
    let Some(delimiter) = chars.next() else {
        return Vec::new();
    };
    let rest = chars.as_str();
    if rest.is_empty() {
        return Vec::new();
    }
    rest.split(delimiter).map(str::to_string).collect()
}
