//! How this client secures its connections, from Kafka's client properties (what
//! `kafka-topics.sh --command-config client.properties` reads): `security.protocol`,
//! `sasl.mechanism`, `sasl.jaas.config` (PLAIN's and SCRAM's login modules, OAUTHBEARER's with
//! `unsecuredLoginStringClaim_sub`), librdkafka's `sasl.oauthbearer.config` (`principal=...`),
//! PEM trust and key stores (KIP-651) and `ssl.endpoint.identification.algorithm`. [`ClientSecurity::parse`] is
//! pure (the text of the properties in, settings and warnings out); [`ClientSecurity::build`]
//! reads the PEM files through the io layer. The connection then runs TLS
//! (`security::tls`), ApiVersions, and SaslHandshake v1 + SaslAuthenticate with the pure SASL
//! client core (`security::sasl::client`), as a Kafka client does.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::io::Io;
use crate::security::sasl::client::Login;
use crate::security::sasl::oauthbearer::login::UnsecuredLogin;
use crate::security::sasl::{jaas, Mechanism};
use crate::security::tls::PemSource;

/// `security.protocol` of a client.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Protocol {
    #[default]
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl Protocol {
    fn parse(value: &str) -> Option<Protocol> {
        // Kafka's SecurityProtocol.forName upper-cases the name.
        match value.trim().to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Some(Protocol::Plaintext),
            "SSL" => Some(Protocol::Ssl),
            "SASL_PLAINTEXT" => Some(Protocol::SaslPlaintext),
            "SASL_SSL" => Some(Protocol::SaslSsl),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Protocol::Plaintext => "PLAINTEXT",
            Protocol::Ssl => "SSL",
            Protocol::SaslPlaintext => "SASL_PLAINTEXT",
            Protocol::SaslSsl => "SASL_SSL",
        }
    }

    fn tls(self) -> bool {
        matches!(self, Protocol::Ssl | Protocol::SaslSsl)
    }

    fn sasl(self) -> bool {
        matches!(self, Protocol::SaslPlaintext | Protocol::SaslSsl)
    }
}

/// The parsed client properties.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClientSecurity {
    pub protocol: Protocol,
    /// With SASL: the mechanism and credentials (user name and password, or an unsecured
    /// OAUTHBEARER token's claims).
    pub sasl: Option<Login>,
    /// With TLS: the CAs the broker's certificate must chain to.
    pub truststore: Option<PemSource>,
    /// With TLS, for mTLS: this client's certificate chain and key.
    pub keystore: Option<(PemSource, PemSource)>,
    /// `ssl.endpoint.identification.algorithm=https` (the default): the certificate must name
    /// the host dialled.
    pub verify_hostname: bool,
}

/// Keys read here; the rest of Kafka's client keys are warned about (Kafka's tools log
/// "supplied but isn't a known config" for what the client does not use).
const KNOWN: &[&str] = &[
    "security.protocol",
    "sasl.mechanism",
    "sasl.jaas.config",
    "sasl.oauthbearer.config",
    "enable.sasl.oauthbearer.unsecure.jwt",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.certificates",
    "ssl.truststore.password",
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.keystore.password",
    "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
];

/// A bad value: the message names the key.
fn bad(key: &str, why: impl std::fmt::Display) -> String {
    format!("invalid value for {key}: {why}")
}

/// A PEM store's `type`: only PEM (KIP-651); Java's stores need converting first.
fn pem_type(props: &BTreeMap<String, String>, key: &str) -> Result<(), String> {
    match props.get(key).map(|v| v.trim().to_ascii_uppercase()) {
        None => Ok(()),
        Some(t) if t == "PEM" => Ok(()),
        Some(t) if t == "JKS" || t == "PKCS12" => Err(bad(
            key,
            format!(
                "{t} stores are not supported, only PEM: convert with `keytool \
                 -importkeystore -srckeystore x.jks -destkeystore x.p12 -deststoretype PKCS12` \
                 then `openssl pkcs12 -in x.p12 -nodes -out x.pem`"
            ),
        )),
        Some(t) => Err(bad(key, format!("unknown store type '{t}' (PEM)"))),
    }
}

impl ClientSecurity {
    /// The settings of client properties, with a warning for each key not used.
    pub fn parse(
        props: &BTreeMap<String, String>,
    ) -> Result<(ClientSecurity, Vec<String>), String> {
        let warnings = props
            .keys()
            .filter(|k| !KNOWN.contains(&k.as_str()))
            .map(|k| format!("The configuration '{k}' was supplied but isn't a known config."))
            .collect();
        let get = |k: &str| props.get(k).map(|v| v.trim()).filter(|v| !v.is_empty());
        let protocol = match get("security.protocol") {
            None => Protocol::Plaintext,
            Some(v) => Protocol::parse(v).ok_or_else(|| {
                bad(
                    "security.protocol",
                    format!("'{v}' (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)"),
                )
            })?,
        };
        let sasl = match protocol.sasl() {
            false => None,
            true => Some(sasl_login(props)?),
        };
        let mut out = ClientSecurity {
            protocol,
            sasl,
            verify_hostname: true,
            ..ClientSecurity::default()
        };
        if !protocol.tls() {
            return Ok((out, warnings));
        }
        pem_type(props, "ssl.truststore.type")?;
        pem_type(props, "ssl.keystore.type")?;
        if get("ssl.truststore.password").is_some() {
            return Err(bad(
                "ssl.truststore.password",
                "a PEM trust store takes no password",
            ));
        }
        if get("ssl.keystore.password").is_some() {
            return Err(bad(
                "ssl.keystore.password",
                "a PEM key store takes no password (an encrypted key's goes in ssl.key.password)",
            ));
        }
        out.truststore = match (
            get("ssl.truststore.location"),
            get("ssl.truststore.certificates"),
        ) {
            (Some(_), Some(_)) => {
                return Err(bad(
                    "ssl.truststore.certificates",
                    "give ssl.truststore.location or ssl.truststore.certificates, not both",
                ))
            }
            (Some(path), None) => Some(PemSource::File(path.to_string())),
            (None, Some(pem)) => Some(PemSource::Inline(pem.to_string())),
            (None, None) => {
                return Err(format!(
                    "security.protocol={} needs ssl.truststore.location or \
                     ssl.truststore.certificates (PEM) to check the broker's certificate",
                    protocol.name()
                ))
            }
        };
        out.keystore = match (
            get("ssl.keystore.location"),
            get("ssl.keystore.certificate.chain"),
            get("ssl.keystore.key"),
        ) {
            (None, None, None) => None,
            // One PEM file holding the key and the chain.
            (Some(path), None, None) => Some((
                PemSource::File(path.to_string()),
                PemSource::File(path.to_string()),
            )),
            (None, Some(chain), Some(key)) => Some((
                PemSource::Inline(chain.to_string()),
                PemSource::Inline(key.to_string()),
            )),
            (Some(_), _, _) => {
                return Err(bad(
                    "ssl.keystore.location",
                    "give ssl.keystore.location or ssl.keystore.certificate.chain with \
                     ssl.keystore.key, not both",
                ))
            }
            (None, Some(_), None) => {
                return Err(bad(
                    "ssl.keystore.certificate.chain",
                    "needs ssl.keystore.key",
                ))
            }
            (None, None, Some(_)) => {
                return Err(bad(
                    "ssl.keystore.key",
                    "needs ssl.keystore.certificate.chain",
                ))
            }
        };
        out.verify_hostname = match props
            .get("ssl.endpoint.identification.algorithm")
            .map(|v| v.trim())
        {
            None => true,
            Some("") => false,
            Some(v) if v.eq_ignore_ascii_case("https") => true,
            Some(v) => {
                return Err(bad(
                    "ssl.endpoint.identification.algorithm",
                    format!("'{v}' (https, or empty to turn host name checks off)"),
                ))
            }
        };
        Ok((out, warnings))
    }

    /// The TLS config (trust store, key store read now) and SASL login to dial with.
    pub fn build(&self, io: &Io) -> Result<Security, String> {
        let tls = match (&self.truststore, self.protocol.tls()) {
            (Some(trust), true) => Some(crate::security::tls::client_config_for(
                trust,
                self.keystore.as_ref().map(|(c, k)| (c, k)),
                io,
                self.verify_hostname,
            )?),
            (None, true) => return Err("TLS without a trust store".into()),
            (_, false) => None,
        };
        Ok(Security {
            tls,
            sasl: self.sasl.clone(),
        })
    }
}

/// `sasl.mechanism` and its credentials: the user name and password of `sasl.jaas.config`, or
/// for OAUTHBEARER librdkafka's `sasl.oauthbearer.config` or the JAAS `unsecuredLogin*` claims.
fn sasl_login(props: &BTreeMap<String, String>) -> Result<Login, String> {
    let mechanism = match props.get("sasl.mechanism").map(|m| m.trim()) {
        None | Some("") => {
            return Err(
                "a SASL security.protocol needs sasl.mechanism (PLAIN, SCRAM-SHA-256, \
                 SCRAM-SHA-512 or OAUTHBEARER; Kafka's default GSSAPI is not supported)"
                    .into(),
            )
        }
        Some(m) => Mechanism::parse(m).ok_or_else(|| {
            bad(
                "sasl.mechanism",
                format!(
                    "'{m}' is not supported (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER)"
                ),
            )
        })?,
    };
    let oauth_config = props
        .get("sasl.oauthbearer.config")
        .map(|c| c.trim())
        .filter(|c| !c.is_empty());
    if let (Mechanism::OAuthBearer, Some(config)) = (mechanism, oauth_config) {
        let login = UnsecuredLogin::from_librdkafka(config)
            .map_err(|e| bad("sasl.oauthbearer.config", e))?;
        return Ok(Login::OAuthBearer(login));
    }
    let text = props.get("sasl.jaas.config").ok_or(match mechanism {
        Mechanism::OAuthBearer => {
            "sasl.mechanism=OAUTHBEARER needs sasl.jaas.config (OAuthBearerLoginModule required \
             unsecuredLoginStringClaim_sub=\"<name>\";) or sasl.oauthbearer.config \
             (principal=<name>)"
        }
        _ => "a SASL security.protocol needs sasl.jaas.config with username and password",
    })?;
    let options = jaas::options(text).map_err(|e| bad("sasl.jaas.config", e))?;
    let module = text.split_whitespace().next().unwrap_or("");
    let expected = match mechanism {
        Mechanism::Plain => "org.apache.kafka.common.security.plain.PlainLoginModule",
        Mechanism::OAuthBearer => {
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
        }
        _ => "org.apache.kafka.common.security.scram.ScramLoginModule",
    };
    if module != expected {
        return Err(bad(
            "sasl.jaas.config",
            format!(
                "login module '{module}' does not go with sasl.mechanism={} (use {expected})",
                mechanism.name()
            ),
        ));
    }
    if mechanism == Mechanism::OAuthBearer {
        let login = UnsecuredLogin::from_jaas(&options).map_err(|e| bad("sasl.jaas.config", e))?;
        return Ok(Login::OAuthBearer(login));
    }
    let user = options
        .get("username")
        .filter(|u| !u.is_empty())
        .ok_or_else(|| bad("sasl.jaas.config", "no username=\"...\""))?;
    let password = options
        .get("password")
        .ok_or_else(|| bad("sasl.jaas.config", "no password=\"...\""))?;
    Ok(Login::password(mechanism, user, password))
}

/// What a connection is secured with: built once, cloned to every connection.
#[derive(Clone, Default)]
pub struct Security {
    pub(crate) tls: Option<Arc<rustls::ClientConfig>>,
    pub(crate) sasl: Option<Login>,
}

impl std::fmt::Debug for Security {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The password never reaches a log.
        f.debug_struct("Security")
            .field("tls", &self.tls.is_some())
            .field("sasl", &self.sasl)
            .finish()
    }
}

impl Security {
    /// PLAINTEXT.
    pub fn plaintext() -> Security {
        Security::default()
    }
}

#[cfg(test)]
mod tests;
