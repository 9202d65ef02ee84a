//! `ClientSecurity::parse` over a table of client properties files (as `--command-config`
//! reads them): what each gives, or the error, which must name the key at fault.

use super::*;
use crate::config::parse_properties;

const SCRAM: &str = r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="alice-secret";"#;
const PLAIN: &str = r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="bob" password="bob secret";"#;

/// The outcome in one line: `protocol sasl=… trust=… key=… verify=…`, or `error: …`.
fn outcome(text: &str) -> String {
    let props = parse_properties(text).unwrap();
    match ClientSecurity::parse(&props) {
        Err(e) => format!("error: {e}"),
        Ok((s, warnings)) => {
            let sasl = s
                .sasl
                .as_ref()
                .map(|login| match login {
                    Login::Password {
                        mechanism,
                        username,
                        password,
                    } => format!("{}:{username}:{password}", mechanism.name()),
                    Login::OAuthBearer(l) => format!("OAUTHBEARER:{}", l.principal()),
                })
                .unwrap_or_else(|| "-".into());
            let pem = |p: &PemSource| match p {
                PemSource::File(f) => format!("file:{f}"),
                PemSource::Inline(t) => format!("inline:{}", t.len()),
            };
            let trust = s.truststore.as_ref().map(pem).unwrap_or_else(|| "-".into());
            let key = s
                .keystore
                .as_ref()
                .map(|(c, k)| format!("{}+{}", pem(c), pem(k)))
                .unwrap_or_else(|| "-".into());
            let mut line = format!(
                "{:?} sasl={sasl} trust={trust} key={key} verify={}",
                s.protocol, s.verify_hostname
            );
            for w in warnings {
                line.push_str(&format!(" | {w}"));
            }
            line
        }
    }
}

#[test]
fn client_properties_table() {
    let scram = format!("sasl.jaas.config={SCRAM}");
    let plain = format!("sasl.jaas.config={PLAIN}");
    let cases: Vec<(String, &str)> = vec![
        ("".into(), "Plaintext sasl=- trust=- key=- verify=true"),
        (
            "security.protocol=plaintext".into(),
            "Plaintext sasl=- trust=- key=- verify=true",
        ),
        (
            format!("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\n{scram}\nssl.truststore.type=PEM\nssl.truststore.location=/ca.pem"),
            "SaslSsl sasl=SCRAM-SHA-256:alice:alice-secret trust=file:/ca.pem key=- verify=true",
        ),
        (
            format!("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n{plain}"),
            "SaslPlaintext sasl=PLAIN:bob:bob secret trust=- key=- verify=true",
        ),
        (
            "security.protocol=SSL\nssl.truststore.certificates=-----BEGIN CERTIFICATE-----\nssl.keystore.type=PEM\nssl.keystore.location=/me.pem\nssl.endpoint.identification.algorithm=".into(),
            "Ssl sasl=- trust=inline:27 key=file:/me.pem+file:/me.pem verify=false",
        ),
        (
            "security.protocol=SSL\nssl.truststore.location=/ca.pem\nssl.keystore.certificate.chain=abc\nssl.keystore.key=de".into(),
            "Ssl sasl=- trust=file:/ca.pem key=inline:3+inline:2 verify=true",
        ),
        (
            "client.id=x\nsecurity.protocol=PLAINTEXT".into(),
            "Plaintext sasl=- trust=- key=- verify=true | The configuration 'client.id' was supplied but isn't a known config.",
        ),
        (
            "security.protocol=TLS".into(),
            "error: invalid value for security.protocol: 'TLS' (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)",
        ),
        (
            format!("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\n{scram}"),
            "error: invalid value for sasl.mechanism: 'GSSAPI' is not supported (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER)",
        ),
        (
            format!("security.protocol=SASL_PLAINTEXT\n{scram}"),
            "error: a SASL security.protocol needs sasl.mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER; Kafka's default GSSAPI is not supported)",
        ),
        // OAUTHBEARER: librdkafka's sasl.oauthbearer.config, or Kafka's unsecured login module.
        (
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\nenable.sasl.oauthbearer.unsecure.jwt=true\nsasl.oauthbearer.config=principal=alice scope=read".into(),
            "SaslPlaintext sasl=OAUTHBEARER:alice trust=- key=- verify=true",
        ),
        (
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\nsasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub=\"carol\";".into(),
            "SaslPlaintext sasl=OAUTHBEARER:carol trust=- key=- verify=true",
        ),
        (
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER".into(),
            "error: sasl.mechanism=OAUTHBEARER needs sasl.jaas.config (OAuthBearerLoginModule required unsecuredLoginStringClaim_sub=\"<name>\";) or sasl.oauthbearer.config (principal=<name>)",
        ),
        (
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\nsasl.oauthbearer.config=scope=read".into(),
            "error: invalid value for sasl.oauthbearer.config: sasl.oauthbearer.config needs principal=<name>",
        ),
        (
            format!("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n{plain}"),
            "error: invalid value for sasl.jaas.config: login module 'org.apache.kafka.common.security.plain.PlainLoginModule' does not go with sasl.mechanism=OAUTHBEARER (use org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule)",
        ),
        (
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\nsasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_user=\"carol\";".into(),
            "error: invalid value for sasl.jaas.config: No principal name in JWT claim: sub (set unsecuredLoginStringClaim_sub=\"<name>\")",
        ),
        (
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN".into(),
            "error: a SASL security.protocol needs sasl.jaas.config with username and password",
        ),
        (
            format!("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n{scram}"),
            "error: invalid value for sasl.jaas.config: login module 'org.apache.kafka.common.security.scram.ScramLoginModule' does not go with sasl.mechanism=PLAIN (use org.apache.kafka.common.security.plain.PlainLoginModule)",
        ),
        (
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"a\"".into(),
            "error: invalid value for sasl.jaas.config: a JAAS entry must end with ';'",
        ),
        (
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"a\";".into(),
            "error: invalid value for sasl.jaas.config: no password=\"...\"",
        ),
        (
            "security.protocol=SSL".into(),
            "error: security.protocol=SSL needs ssl.truststore.location or ssl.truststore.certificates (PEM) to check the broker's certificate",
        ),
        (
            "security.protocol=SSL\nssl.truststore.type=JKS\nssl.truststore.location=/x.jks".into(),
            "error: invalid value for ssl.truststore.type: JKS stores are not supported, only PEM: convert with `keytool -importkeystore -srckeystore x.jks -destkeystore x.p12 -deststoretype PKCS12` then `openssl pkcs12 -in x.p12 -nodes -out x.pem`",
        ),
        (
            "security.protocol=SSL\nssl.truststore.location=/ca.pem\nssl.truststore.password=s".into(),
            "error: invalid value for ssl.truststore.password: a PEM trust store takes no password",
        ),
        (
            "security.protocol=SSL\nssl.truststore.location=/ca.pem\nssl.keystore.key=k".into(),
            "error: invalid value for ssl.keystore.key: needs ssl.keystore.certificate.chain",
        ),
        (
            "security.protocol=SSL\nssl.truststore.location=/ca.pem\nssl.endpoint.identification.algorithm=dns".into(),
            "error: invalid value for ssl.endpoint.identification.algorithm: 'dns' (https, or empty to turn host name checks off)",
        ),
    ];
    let mut failures = Vec::new();
    for (text, expected) in &cases {
        let got = outcome(text);
        if got != *expected {
            failures.push(format!("{text:?}\n  expected {expected}\n  got      {got}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The client's secured connections against an in-process broker with a SASL_SSL listener
/// (rcgen certificates): PLAIN from the listener's JAAS users; a SCRAM credential created
/// through the client (salted here) then used to log in; a wrong password is Kafka's error
/// 58; a certificate from another CA fails the handshake.
#[cfg(not(madsim))]
mod live {
    use std::collections::BTreeMap;
    use std::sync::Arc;
    use std::time::Duration;

    use kafka_protocol::error::ResponseError;
    use rcgen::{
        BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair,
    };

    use crate::broker::Broker;
    use crate::client::{Client, ClientError, ClientSecurity, ScramUpsertion};
    use crate::config::ServerConfig;
    use crate::controller::image::scram::ScramMechanism;
    use crate::io::Io;

    /// (CA PEM, server chain PEM, server key PEM).
    fn certificates() -> (String, String, String) {
        let mut ca = CertificateParams::new(vec![]).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name = DistinguishedName::new();
        ca.distinguished_name.push(DnType::CommonName, "test CA");
        let ca_key = KeyPair::generate().unwrap();
        let ca_pem = ca.self_signed(&ca_key).unwrap().pem();
        let leaf = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        let key = KeyPair::generate().unwrap();
        let cert = leaf.signed_by(&key, &Issuer::new(ca, &ca_key)).unwrap();
        (ca_pem, cert.pem(), key.serialize_pem())
    }

    fn security(
        io: &Io,
        ca: &str,
        mechanism: &str,
        module: &str,
        user: &str,
        pw: &str,
    ) -> crate::client::Security {
        let props = BTreeMap::from([
            ("security.protocol".to_string(), "SASL_SSL".to_string()),
            ("sasl.mechanism".to_string(), mechanism.to_string()),
            (
                "sasl.jaas.config".to_string(),
                format!(
                    "org.apache.kafka.common.security.{module} required username=\"{user}\" \
                     password=\"{pw}\";"
                ),
            ),
            ("ssl.truststore.certificates".to_string(), ca.to_string()),
        ]);
        ClientSecurity::parse(&props).unwrap().0.build(io).unwrap()
    }

    #[tokio::test]
    async fn logs_in_with_plain_and_a_scram_credential_it_created() {
        let (ca, chain, key) = certificates();
        let jaas = "org.apache.kafka.common.security.plain.PlainLoginModule required \
                    user_admin=\"admin-secret\";";
        let props = BTreeMap::from([
            ("listeners".to_string(), "SECURE://127.0.0.1:0".to_string()),
            (
                "listener.security.protocol.map".to_string(),
                "SECURE:SASL_SSL".to_string(),
            ),
            (
                "inter.broker.listener.name".to_string(),
                "SECURE".to_string(),
            ),
            (
                "sasl.enabled.mechanisms".to_string(),
                "PLAIN,SCRAM-SHA-512".to_string(),
            ),
            (
                "listener.name.secure.plain.sasl.jaas.config".to_string(),
                jaas.to_string(),
            ),
            ("ssl.keystore.type".to_string(), "PEM".to_string()),
            ("ssl.keystore.certificate.chain".to_string(), chain),
            ("ssl.keystore.key".to_string(), key),
            ("log.dirs".to_string(), "/data".to_string()),
        ]);
        let config = ServerConfig::from_properties(&props).unwrap().0;
        let io = Io {
            disk: Arc::new(crate::io::memdisk::MemDisk::new(3)),
            ..Io::os()
        };
        let running = Broker::start(config, io.clone()).await.unwrap();
        let addr = running.local_addr;
        let connect = |sec: crate::client::Security| {
            let io = io.clone();
            async move {
                tokio::time::timeout(
                    Duration::from_secs(10),
                    Client::connect_secure(&io, addr, "localhost", &sec),
                )
                .await
                .expect("the connection hung")
            }
        };
        let plain = "plain.PlainLoginModule";
        let scram = "scram.ScramLoginModule";
        let mut admin = connect(security(&io, &ca, "PLAIN", plain, "admin", "admin-secret"))
            .await
            .unwrap();
        admin
            .alter_user_scram_credentials(
                "alice",
                &[],
                &[ScramUpsertion {
                    mechanism: ScramMechanism::Sha512,
                    iterations: 4096,
                    password: "alice-secret".into(),
                }],
            )
            .await
            .unwrap();
        let described = admin
            .describe_user_scram_credentials(&["alice".to_string()])
            .await
            .unwrap();
        assert_eq!(described[0].1[0].mechanism, "SCRAM-SHA-512");
        let mut alice = connect(security(
            &io,
            &ca,
            "SCRAM-SHA-512",
            scram,
            "alice",
            "alice-secret",
        ))
        .await
        .unwrap();
        alice.metadata(None).await.unwrap();
        let wrong = connect(security(&io, &ca, "SCRAM-SHA-512", scram, "alice", "nope")).await;
        assert!(
            matches!(
                wrong,
                Err(ClientError::Kafka(
                    ResponseError::SaslAuthenticationFailed,
                    _
                ))
            ),
            "{:?}",
            wrong.err()
        );
        let (other_ca, _, _) = certificates();
        let untrusted = connect(security(
            &io,
            &other_ca,
            "PLAIN",
            plain,
            "admin",
            "admin-secret",
        ))
        .await;
        assert!(
            matches!(untrusted, Err(ClientError::Io(_))),
            "{:?}",
            untrusted.err()
        );
        running.broker.halt();
    }

    /// OAUTHBEARER end to end with Weir's own client: librdkafka's `sasl.oauthbearer.config`
    /// and Kafka's unsecured login module both log in; a token without the listener's required
    /// scope gets error 58 with Kafka's JSON status.
    #[tokio::test]
    async fn logs_in_with_an_unsecured_oauthbearer_token() {
        let (ca, chain, key) = certificates();
        let jaas = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \
                    unsecuredValidatorRequiredScope=\"kafka\";";
        let props = BTreeMap::from([
            ("listeners".to_string(), "SECURE://127.0.0.1:0".to_string()),
            (
                "listener.security.protocol.map".to_string(),
                "SECURE:SASL_SSL".to_string(),
            ),
            (
                "inter.broker.listener.name".to_string(),
                "SECURE".to_string(),
            ),
            (
                "sasl.enabled.mechanisms".to_string(),
                "OAUTHBEARER".to_string(),
            ),
            (
                "listener.name.secure.oauthbearer.sasl.jaas.config".to_string(),
                jaas.to_string(),
            ),
            ("ssl.keystore.type".to_string(), "PEM".to_string()),
            ("ssl.keystore.certificate.chain".to_string(), chain),
            ("ssl.keystore.key".to_string(), key),
            ("log.dirs".to_string(), "/data".to_string()),
        ]);
        let config = ServerConfig::from_properties(&props).unwrap().0;
        let io = Io {
            disk: Arc::new(crate::io::memdisk::MemDisk::new(3)),
            ..Io::os()
        };
        let running = Broker::start(config, io.clone()).await.unwrap();
        let addr = running.local_addr;
        let login = |extra: (&str, &str)| {
            let props = BTreeMap::from([
                ("security.protocol".to_string(), "SASL_SSL".to_string()),
                ("sasl.mechanism".to_string(), "OAUTHBEARER".to_string()),
                (extra.0.to_string(), extra.1.to_string()),
                ("ssl.truststore.certificates".to_string(), ca.clone()),
            ]);
            let sec = ClientSecurity::parse(&props).unwrap().0.build(&io).unwrap();
            let io = io.clone();
            async move {
                tokio::time::timeout(
                    Duration::from_secs(10),
                    Client::connect_secure(&io, addr, "localhost", &sec),
                )
                .await
                .expect("the connection hung")
            }
        };
        let mut alice = login(("sasl.oauthbearer.config", "principal=alice scope=kafka"))
            .await
            .unwrap();
        alice.metadata(None).await.unwrap();
        let module = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \
                      unsecuredLoginStringClaim_sub=\"bob\" unsecuredLoginListClaim_scope=\",kafka\";";
        let mut bob = login(("sasl.jaas.config", module)).await.unwrap();
        bob.metadata(None).await.unwrap();
        let refused = login(("sasl.oauthbearer.config", "principal=carol scope=other")).await;
        match refused {
            Err(ClientError::Kafka(ResponseError::SaslAuthenticationFailed, message)) => {
                assert_eq!(
                    message,
                    r#"{"status":"insufficient_scope", "scope":"[kafka]"}"#
                )
            }
            other => panic!("{:?}", other.err()),
        }
        running.broker.halt();
    }
}
