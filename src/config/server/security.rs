//! Listener security: each listener's protocol (`listener.security.protocol.map`) and, for TLS
//! and SASL listeners, Kafka's `ssl.*` and `sasl.*` keys, each read first under the listener's
//! prefix (`listener.name.<name>.`), then unprefixed. Files named here are read when the broker
//! starts (through the io layer), not now.

use std::collections::BTreeMap;
use std::time::Duration;

use super::super::{invalid, parse_int, ConfigError, Endpoint};
use super::parse::Props;
use crate::security::principal::MappingRules;
use crate::security::sasl::client::Login;
use crate::security::sasl::oauthbearer::login::UnsecuredLogin;
use crate::security::sasl::oauthbearer::ValidatorOptions;
use crate::security::sasl::{jaas, Mechanism, SaslSettings};
use crate::security::tls::{ClientAuth, PemSource, TlsSettings};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    fn parse(name: &str) -> SecurityProtocol {
        match name {
            "SSL" => SecurityProtocol::Ssl,
            "SASL_PLAINTEXT" => SecurityProtocol::SaslPlaintext,
            "SASL_SSL" => SecurityProtocol::SaslSsl,
            _ => SecurityProtocol::Plaintext,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    pub fn tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    pub fn sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }
}

/// One listener's security.
#[derive(Clone, Debug, PartialEq)]
pub struct ListenerSecurity {
    pub protocol: SecurityProtocol,
    pub tls: Option<TlsSettings>,
    pub sasl: Option<SaslSettings>,
    /// `ssl.principal.mapping.rules` (SSL listeners' certificate principals).
    pub principal_mapping: MappingRules,
    /// This node's own credentials towards the listener, per mechanism: the `username` and
    /// `password` of `listener.name.<name>.<mechanism>.sasl.jaas.config` (or the listener's
    /// `sasl.jaas.config`), or OAUTHBEARER's `unsecuredLogin*` claims, as a Kafka broker reads
    /// them for its outbound connections.
    pub client_credentials: BTreeMap<&'static str, Login>,
    /// `ssl.endpoint.identification.algorithm` is `https` (the default), not empty.
    pub verify_hostname: bool,
}

/// How this node dials a listener of the other nodes (the inter-broker listener for replica
/// fetches and transaction markers, the controller listener for the quorum and broker
/// sessions): that listener's security with the mechanism and credentials to log in with.
#[derive(Clone, Debug, PartialEq)]
pub struct Outbound {
    pub listener: String,
    pub protocol: SecurityProtocol,
    /// The listener's TLS settings: its trust store checks the other node, its key store is
    /// this node's client certificate.
    pub tls: Option<TlsSettings>,
    /// `ssl.endpoint.identification.algorithm=https` (the default): the certificate must name
    /// the host dialled.
    pub verify_hostname: bool,
    /// The mechanism and credentials to log in with.
    pub sasl: Option<Login>,
}

impl ListenerSecurity {
    pub fn plaintext() -> ListenerSecurity {
        ListenerSecurity {
            protocol: SecurityProtocol::Plaintext,
            tls: None,
            sasl: None,
            principal_mapping: MappingRules::default(),
            client_credentials: BTreeMap::new(),
            verify_hostname: true,
        }
    }
}

const SECURITY_KEYS: [&str; 17] = [
    "connection.failed.authentication.delay.ms",
    "connections.max.reauth.ms",
    "sasl.enabled.mechanisms",
    "sasl.jaas.config",
    "sasl.server.max.receive.size",
    "ssl.client.auth",
    "ssl.key.password",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.keystore.type",
    "ssl.principal.mapping.rules",
    "ssl.truststore.certificates",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.truststore.type",
];

/// Every listener's security, by listener name.
pub(super) fn read(
    p: &mut Props<'_>,
    listeners: &[Endpoint],
    protocols: &BTreeMap<String, (&'static str, String)>,
) -> Result<BTreeMap<String, ListenerSecurity>, ConfigError> {
    // Read whether or not a listener needs them, so a file setting them for later is quiet.
    for key in SECURITY_KEYS {
        p.get(key);
    }
    let mut out = BTreeMap::new();
    for listener in listeners {
        let name = &listener.listener_name;
        let protocol = SecurityProtocol::parse(&protocols[name].1);
        let mapping_text = p
            .listener_value(name, "ssl.principal.mapping.rules")
            .unwrap_or("DEFAULT");
        let principal_mapping = MappingRules::parse(mapping_text)
            .map_err(|e| invalid("ssl.principal.mapping.rules", mapping_text, e))?;
        let tls = match protocol.tls() {
            true => Some(tls_settings(p, name, protocol)?),
            false => None,
        };
        let sasl = match protocol.sasl() {
            true => Some(sasl_settings(p, name)?),
            false => None,
        };
        let key = "ssl.endpoint.identification.algorithm";
        let verify_hostname = match p.listener_value(name, key).map(str::trim) {
            None => true,
            Some(v) if v.eq_ignore_ascii_case("https") => true,
            Some("") => false,
            Some(v) => return Err(invalid(key, v, "must be https or empty")),
        };
        let client_credentials = match protocol.sasl() {
            true => client_credentials(p, name)?,
            false => BTreeMap::new(),
        };
        out.insert(
            name.clone(),
            ListenerSecurity {
                protocol,
                tls,
                sasl,
                principal_mapping,
                client_credentials,
                verify_hostname,
            },
        );
    }
    Ok(out)
}

/// The mechanisms a listener's JAAS entries may name, in the order they are read.
const JAAS_MECHANISMS: [Mechanism; 4] = [
    Mechanism::ScramSha256,
    Mechanism::ScramSha512,
    Mechanism::Plain,
    Mechanism::OAuthBearer,
];

const OAUTH_MODULE: &str = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule";

/// `mechanism`'s JAAS entry on listener `name`: its own key, else the listener's
/// `sasl.jaas.config` (for OAUTHBEARER only if that names OAUTHBEARER's login module, for the
/// others only if it does not).
fn jaas_text<'a>(p: &mut Props<'a>, name: &str, m: Mechanism) -> Option<&'a str> {
    if let Some(text) = p.dynamic(jaas_key(name, m)) {
        return Some(text);
    }
    let text = p.listener_value(name, "sasl.jaas.config")?;
    let oauth = text.split_whitespace().next() == Some(OAUTH_MODULE);
    (oauth == (m == Mechanism::OAuthBearer)).then_some(text)
}

/// Kafka's key of `mechanism`'s JAAS entry on `listener`:
/// `listener.name.<listener>.<mechanism>.sasl.jaas.config`, both lower-cased.
fn jaas_key(listener: &str, mechanism: Mechanism) -> String {
    format!(
        "listener.name.{}.{}.sasl.jaas.config",
        listener.to_ascii_lowercase(),
        mechanism.name().to_ascii_lowercase()
    )
}

/// The `username`/`password` of each mechanism's JAAS entry on listener `name`.
fn client_credentials(
    p: &mut Props<'_>,
    name: &str,
) -> Result<BTreeMap<&'static str, Login>, ConfigError> {
    let mut out = BTreeMap::new();
    for m in JAAS_MECHANISMS {
        let jaas_key = jaas_key(name, m);
        let Some(text) = jaas_text(p, name, m) else {
            continue;
        };
        let options = jaas::options(text).map_err(|e| invalid(&jaas_key, "[hidden]", e))?;
        if m == Mechanism::OAuthBearer {
            if options.keys().any(|k| k.starts_with("unsecuredLogin")) {
                let login = UnsecuredLogin::from_jaas(&options)
                    .map_err(|e| invalid(&jaas_key, "[hidden]", e))?;
                out.insert(m.name(), Login::OAuthBearer(login));
            }
        } else if let (Some(user), Some(password)) =
            (options.get("username"), options.get("password"))
        {
            // An empty user name is no login: `outbound` asks for one if it is needed.
            if !user.is_empty() {
                out.insert(m.name(), Login::password(m, user, password));
            }
        }
    }
    Ok(out)
}

/// The outbound side of listener `name`: `mechanism_key` names the SASL mechanism
/// (`sasl.mechanism.inter.broker.protocol` or `sasl.mechanism.controller.protocol`), checked
/// against the listener's enabled mechanisms and JAAS credentials now, so a node that could
/// never log in to its peers does not start.
pub(super) fn outbound(
    listener: &str,
    security: &ListenerSecurity,
    mechanism_key: &'static str,
    mechanism: Option<&str>,
) -> Result<Outbound, ConfigError> {
    let sasl = match &security.sasl {
        None => None,
        Some(settings) => {
            let name = mechanism.unwrap_or("GSSAPI").trim();
            let m = Mechanism::parse(&name.to_ascii_uppercase()).ok_or_else(|| {
                invalid(
                    mechanism_key,
                    name,
                    format!(
                        "listener '{listener}' ({}) is how this node reaches the others: set \
                         {mechanism_key} to PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER \
                         (no GSSAPI)",
                        security.protocol.name()
                    ),
                )
            })?;
            if !settings.mechanisms.contains(&m) {
                return Err(invalid(
                    mechanism_key,
                    name,
                    format!("not in listener '{listener}''s sasl.enabled.mechanisms"),
                ));
            }
            let jaas_key = jaas_key(listener, m);
            let needs = match m {
                Mechanism::OAuthBearer => {
                    "OAuthBearerLoginModule required \
                                           unsecuredLoginStringClaim_sub=\"...\""
                }
                _ => "username=\"...\" password=\"...\"",
            };
            let login = security
                .client_credentials
                .get(m.name())
                .cloned()
                .ok_or_else(|| {
                    invalid(
                        &jaas_key,
                        "",
                        format!(
                            "this node logs in to listener '{listener}' with {}: its JAAS entry \
                             needs {needs}",
                            m.name()
                        ),
                    )
                })?;
            Some(login)
        }
    };
    if let Some(tls) = &security.tls {
        if tls.truststore.is_none() {
            return Err(invalid(
                "ssl.truststore.location",
                "",
                format!(
                    "listener '{listener}' ({}) is how this node reaches the others: it needs a \
                     truststore (ssl.truststore.location or ssl.truststore.certificates, \
                     listener-prefixable) to check their certificates",
                    security.protocol.name()
                ),
            ));
        }
    }
    Ok(Outbound {
        listener: listener.to_string(),
        protocol: security.protocol,
        tls: security.tls.clone(),
        verify_hostname: security.verify_hostname,
        sasl,
    })
}

fn pem_type(p: &mut Props<'_>, name: &str, key: &'static str) -> Result<(), ConfigError> {
    match p.listener_value(name, key).map(str::trim) {
        None => Ok(()),
        Some(t) if t.eq_ignore_ascii_case("PEM") => Ok(()),
        Some(t) => Err(invalid(
            key,
            t,
            "Weir reads PEM stores only (KIP-651). Convert a JKS or PKCS12 store: \
             `keytool -importkeystore -srckeystore x.jks -srcstoretype JKS -destkeystore x.p12 \
             -deststoretype PKCS12`, then `openssl pkcs12 -in x.p12 -nodes -out x.pem`",
        )),
    }
}

fn tls_settings(
    p: &mut Props<'_>,
    name: &str,
    protocol: SecurityProtocol,
) -> Result<TlsSettings, ConfigError> {
    pem_type(p, name, "ssl.keystore.type")?;
    pem_type(p, name, "ssl.truststore.type")?;
    for key in ["ssl.keystore.password", "ssl.truststore.password"] {
        if let Some(v) = p.listener_value(name, key) {
            if !v.is_empty() {
                return Err(invalid(key, "[hidden]", "a PEM store takes no password"));
            }
        }
    }
    if let Some(v) = p.listener_value(name, "ssl.key.password") {
        if !v.is_empty() {
            return Err(invalid(
                "ssl.key.password",
                "[hidden]",
                "encrypted private keys are not supported: decrypt the key \
                 (`openssl pkcs8 -in enc.pem -out key.pem`)",
            ));
        }
    }
    let location = p.listener_value(name, "ssl.keystore.location");
    let chain = p.listener_value(name, "ssl.keystore.certificate.chain");
    let key = p.listener_value(name, "ssl.keystore.key");
    let (chain, key) = match (location, chain, key) {
        (Some(path), None, None) => (
            PemSource::File(path.trim().to_string()),
            PemSource::File(path.trim().to_string()),
        ),
        (None, Some(chain), Some(key)) => (
            PemSource::Inline(chain.to_string()),
            PemSource::Inline(key.to_string()),
        ),
        _ => {
            return Err(invalid(
                "ssl.keystore.location",
                location.unwrap_or(""),
                format!(
                    "listener '{name}' ({}) needs a key store: ssl.keystore.location (one PEM \
                     file with the key and the chain), or both ssl.keystore.certificate.chain \
                     and ssl.keystore.key",
                    protocol.name()
                ),
            ))
        }
    };
    let truststore = match (
        p.listener_value(name, "ssl.truststore.location"),
        p.listener_value(name, "ssl.truststore.certificates"),
    ) {
        (Some(path), None) => Some(PemSource::File(path.trim().to_string())),
        (None, Some(certs)) => Some(PemSource::Inline(certs.to_string())),
        (None, None) => None,
        (Some(path), Some(_)) => {
            return Err(invalid(
                "ssl.truststore.location",
                path,
                "set ssl.truststore.location or ssl.truststore.certificates, not both",
            ))
        }
    };
    // On SASL_SSL only the listener-prefixed key counts (KIP-684).
    let auth = match protocol {
        SecurityProtocol::SaslSsl => p.listener_only(name, "ssl.client.auth"),
        _ => p.listener_value(name, "ssl.client.auth"),
    };
    let client_auth = match auth {
        None => ClientAuth::None,
        Some(v) => ClientAuth::parse(v)
            .ok_or_else(|| invalid("ssl.client.auth", v, "must be none, requested or required"))?,
    };
    if client_auth != ClientAuth::None && truststore.is_none() {
        return Err(invalid(
            "ssl.client.auth",
            auth.unwrap_or_default(),
            format!("listener '{name}' checks client certificates: set ssl.truststore.location or ssl.truststore.certificates"),
        ));
    }
    Ok(TlsSettings {
        chain,
        key,
        truststore,
        client_auth,
    })
}

fn sasl_settings(p: &mut Props<'_>, name: &str) -> Result<SaslSettings, ConfigError> {
    let key = "sasl.enabled.mechanisms";
    let Some(list) = p.listener_value(name, key) else {
        return Err(invalid(
            key,
            "GSSAPI",
            format!("listener '{name}' uses SASL: set sasl.enabled.mechanisms (Weir has PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER with unsecured tokens; no GSSAPI)"),
        ));
    };
    let mut mechanisms = Vec::new();
    for item in list.split(',').map(str::trim).filter(|m| !m.is_empty()) {
        let m = Mechanism::parse(&item.to_ascii_uppercase()).ok_or_else(|| {
            invalid(
                key,
                list,
                format!(
                    "'{item}' is not supported: Weir has PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 \
                     and OAUTHBEARER"
                ),
            )
        })?;
        if !mechanisms.contains(&m) {
            mechanisms.push(m);
        }
    }
    if mechanisms.is_empty() {
        return Err(invalid(key, list, "no mechanism"));
    }
    let mut plain_users = BTreeMap::new();
    let mut oauthbearer = ValidatorOptions::default();
    for m in JAAS_MECHANISMS {
        let jaas_key = jaas_key(name, m);
        let text = match m {
            Mechanism::Plain | Mechanism::OAuthBearer => jaas_text(p, name, m),
            _ => p.dynamic(jaas_key.clone()),
        };
        if m == Mechanism::OAuthBearer && mechanisms.contains(&m) {
            oauthbearer = oauthbearer_validator(p, name, text)?;
        }
        if m == Mechanism::Plain && mechanisms.contains(&m) {
            let text = text.ok_or_else(|| {
                invalid(
                    &jaas_key,
                    "",
                    "PLAIN needs its users: PlainLoginModule required user_<name>=\"<password>\" ...;",
                )
            })?;
            plain_users = jaas::plain_users(text).map_err(|e| invalid(&jaas_key, "[hidden]", e))?;
        }
    }
    let int = |p: &mut Props<'_>, key: &'static str, default: i64, min: i64| {
        p.listener_value(name, key)
            .map(|v| parse_int(key, v, min, i32::MAX as i64))
            .transpose()
            .map(|v| v.unwrap_or(default))
    };
    let max_receive_size = int(p, "sasl.server.max.receive.size", 524288, 1)? as usize;
    let failed_delay = int(p, "connection.failed.authentication.delay.ms", 100, 0)? as u64;
    let reauth = p
        .listener_value(name, "connections.max.reauth.ms")
        .map(|v| parse_int("connections.max.reauth.ms", v, 0, i64::MAX))
        .transpose()?
        .unwrap_or(0);
    Ok(SaslSettings {
        mechanisms,
        plain_users,
        max_receive_size,
        failed_delay: Duration::from_millis(failed_delay),
        reauth: (reauth > 0).then(|| Duration::from_millis(reauth as u64)),
        oauthbearer,
    })
}

/// OAUTHBEARER's validator on listener `name`: Kafka's default, unsecured one, with the
/// `unsecuredValidator*` options of its JAAS entry (none: the defaults). A listener configured
/// for signed tokens (a server callback handler, a JWKS endpoint) is refused rather than
/// quietly served with a validator that accepts unsigned ones.
fn oauthbearer_validator(
    p: &mut Props<'_>,
    name: &str,
    jaas: Option<&str>,
) -> Result<ValidatorOptions, ConfigError> {
    const UNSECURED: &str = "org.apache.kafka.common.security.oauthbearer.internals.unsecured.\
                             OAuthBearerUnsecuredValidatorCallbackHandler";
    let prefix = format!("listener.name.{}.oauthbearer.", name.to_ascii_lowercase());
    for key in [
        "sasl.server.callback.handler.class",
        "sasl.oauthbearer.jwks.endpoint.url",
    ] {
        let value = p
            .dynamic(format!("{prefix}{key}"))
            .or_else(|| p.dynamic(key.to_string()));
        match value.map(str::trim) {
            None | Some("") | Some(UNSECURED) => {}
            Some(v) => {
                return Err(invalid(
                    key,
                    v,
                    format!(
                        "listener '{name}' enables OAUTHBEARER, and Weir validates only unsecured \
                         tokens (Kafka's default, for tests): signed tokens, JWKS and custom \
                         callback handlers are not supported"
                    ),
                ))
            }
        }
    }
    let key = jaas_key(name, Mechanism::OAuthBearer);
    let Some(text) = jaas else {
        return Ok(ValidatorOptions::default());
    };
    let options = jaas::options(text).map_err(|e| invalid(&key, "[hidden]", e))?;
    ValidatorOptions::from_jaas(&options).map_err(|e| invalid(&key, "[hidden]", e))
}
