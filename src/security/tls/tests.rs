//! Handshakes between a rustls client and [`stream::TlsStream`] over an in-memory pipe, with
//! rcgen certificates: the good case, mTLS principals and the hostile ones.

use std::io::{Read, Write};
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

use super::stream::TlsStream;
use super::*;
use crate::security::principal::subject_dn;

struct Ca {
    params: CertificateParams,
    key: KeyPair,
    pem: String,
}

fn ca(name: &str) -> Ca {
    let mut params = CertificateParams::new(vec![]).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, name);
    let key = KeyPair::generate().unwrap();
    let pem = params.self_signed(&key).unwrap().pem();
    Ca { params, key, pem }
}

/// A leaf signed by `ca`: (certificate PEM, key PEM).
fn leaf(ca: &Ca, cn: &str, server: bool, expired: bool) -> (String, String) {
    let mut params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    params.distinguished_name = DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::OrganizationName, "Acme");
    params.distinguished_name.push(DnType::CommonName, cn);
    params.extended_key_usages = vec![match server {
        true => ExtendedKeyUsagePurpose::ServerAuth,
        false => ExtendedKeyUsagePurpose::ClientAuth,
    }];
    if expired {
        params.not_before = rcgen::date_time_ymd(2000, 1, 1);
        params.not_after = rcgen::date_time_ymd(2001, 1, 1);
    }
    let key = KeyPair::generate().unwrap();
    let issuer = Issuer::new(ca.params.clone(), &ca.key);
    let cert = params.signed_by(&key, &issuer).unwrap();
    (cert.pem(), key.serialize_pem())
}

fn server(ca: &Ca, client_auth: ClientAuth) -> Arc<rustls::ServerConfig> {
    let (cert, key) = leaf(ca, "broker", true, false);
    let settings = TlsSettings {
        chain: PemSource::Inline(cert),
        key: PemSource::Inline(key),
        truststore: Some(PemSource::Inline(ca.pem.clone())),
        client_auth,
    };
    server_config(&settings, &crate::io::Io::os()).unwrap()
}

fn client(ca: &Ca, identity: Option<(String, String)>) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca.pem.as_bytes()).unwrap())
        .unwrap();
    let provider = Arc::new(provider::provider(&crate::io::Io::os()));
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    Arc::new(match identity {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => builder
            .with_client_auth_cert(
                vec![CertificateDer::from_pem_slice(cert.as_bytes()).unwrap()],
                PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap(),
            )
            .unwrap(),
    })
}

/// A client that sends "ping" and waits for "pong".
async fn ping(mut io: DuplexStream, config: Arc<ClientConfig>) -> Result<(), String> {
    let name = ServerName::try_from("localhost").unwrap();
    let mut conn = ClientConnection::new(config, name).unwrap();
    conn.writer().write_all(b"ping").unwrap();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        while conn.wants_write() {
            let mut out = Vec::new();
            conn.write_tls(&mut out).unwrap();
            io.write_all(&out).await.map_err(|e| e.to_string())?;
        }
        let n = io.read(&mut buf).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("closed".into());
        }
        conn.read_tls(&mut &buf[..n]).unwrap();
        conn.process_new_packets().map_err(|e| e.to_string())?;
        let mut plain = [0u8; 4];
        if let Ok(4) = conn.reader().read(&mut plain) {
            assert_eq!(&plain, b"pong");
            return Ok(());
        }
    }
}

/// Runs a handshake; the server's outcome (the client's peer subject) and the client's.
async fn exchange(
    server: Arc<rustls::ServerConfig>,
    client: Arc<ClientConfig>,
) -> (Result<Option<String>, String>, Result<(), String>) {
    let (a, b) = tokio::io::duplex(64 * 1024);
    let serve = async move {
        let conn = rustls::ServerConnection::new(server).unwrap();
        let mut tls = TlsStream::accept(Box::new(a), conn)
            .await
            .map_err(|e| e.to_string())?;
        let subject = tls
            .peer_certificates()
            .and_then(|c| c.first())
            .and_then(|c| subject_dn(c));
        let mut msg = [0u8; 4];
        tls.read_exact(&mut msg).await.map_err(|e| e.to_string())?;
        tls.write_all(b"pong").await.map_err(|e| e.to_string())?;
        tls.flush().await.map_err(|e| e.to_string())?;
        Ok(subject)
    };
    let limit = std::time::Duration::from_secs(20);
    let both = async { tokio::join!(serve, ping(b, client)) };
    tokio::time::timeout(limit, both)
        .await
        .expect("handshake hung")
}

#[tokio::test]
async fn handshakes_and_client_certificates() {
    let ca = ca("Weir Test CA");
    let other = ca_other();
    // No client auth.
    let (s, c) = exchange(server(&ca, ClientAuth::None), client(&ca, None)).await;
    assert_eq!((s, c), (Ok(None), Ok(())));
    // mTLS: the subject reaches the server in Java's form.
    let alice = leaf(&ca, "alice", false, false);
    let (s, c) = exchange(server(&ca, ClientAuth::Required), client(&ca, Some(alice))).await;
    assert_eq!((s, c), (Ok(Some("CN=alice,O=Acme".into())), Ok(())));
    // Requested, none sent: anonymous.
    let (s, _) = exchange(server(&ca, ClientAuth::Requested), client(&ca, None)).await;
    assert_eq!(s, Ok(None));
    // Required, none sent; a certificate from another CA; an expired one: refused.
    let stranger = leaf(&other, "mallory", false, false);
    let expired = leaf(&ca, "old", false, true);
    for identity in [None, Some(stranger.clone()), Some(expired)] {
        let (s, c) = exchange(server(&ca, ClientAuth::Required), client(&ca, identity)).await;
        assert!(s.is_err() && c.is_err(), "{s:?} {c:?}");
    }
    // Requested does not downgrade a bad certificate to anonymous.
    let (s, _) = exchange(
        server(&ca, ClientAuth::Requested),
        client(&ca, Some(stranger)),
    )
    .await;
    assert!(s.is_err());
    // A client that trusts another CA refuses the broker (a self-signed or wrong-CA broker).
    let (s, c) = exchange(server(&ca, ClientAuth::None), client(&other, None)).await;
    assert!(s.is_err() && c.is_err());
}

fn ca_other() -> Ca {
    ca("Other CA")
}

#[tokio::test]
async fn plaintext_to_a_tls_port_fails_cleanly() {
    let ca = ca("Weir Test CA");
    let (a, mut b) = tokio::io::duplex(64 * 1024);
    let conn = rustls::ServerConnection::new(server(&ca, ClientAuth::None)).unwrap();
    // An ApiVersions request frame, as a PLAINTEXT client sends it.
    b.write_all(&[0, 0, 0, 10, 0, 18, 0, 3, 0, 0, 0, 1, 0, 0])
        .await
        .unwrap();
    let err = TlsStream::accept(Box::new(a), conn).await.err().unwrap();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
    // The alert went out before the error.
    let mut alert = [0u8; 7];
    b.read_exact(&mut alert).await.unwrap();
    assert_eq!(alert[0], 0x15);
    // A peer that hangs up mid-handshake ends it too.
    let (a, b) = tokio::io::duplex(1024);
    drop(b);
    let conn = rustls::ServerConnection::new(server(&ca, ClientAuth::None)).unwrap();
    assert!(TlsStream::accept(Box::new(a), conn).await.is_err());
}

#[test]
fn bad_stores_are_refused_with_a_reason() {
    let io = crate::io::Io::os;
    let _rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _guard = _rt.enter();
    let ca = ca("Weir Test CA");
    let (cert, key) = leaf(&ca, "broker", true, false);
    let with = |chain: &str, key: &str, auth, trust: Option<&str>| TlsSettings {
        chain: PemSource::Inline(chain.into()),
        key: PemSource::Inline(key.into()),
        truststore: trust.map(|t| PemSource::Inline(t.into())),
        client_auth: auth,
    };
    assert!(server_config(&with(&cert, &key, ClientAuth::None, None), &io()).is_ok());
    assert!(server_config(&with("junk", &key, ClientAuth::None, None), &io()).is_err());
    assert!(server_config(&with(&cert, "junk", ClientAuth::None, None), &io()).is_err());
    let enc = "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n";
    let e = server_config(&with(&cert, enc, ClientAuth::None, None), &io()).unwrap_err();
    assert!(e.contains("encrypted"), "{e}");
    assert!(server_config(&with(&cert, &key, ClientAuth::Required, None), &io()).is_err());
    let missing = TlsSettings {
        chain: PemSource::File("/nonexistent/broker.pem".into()),
        ..with(&cert, &key, ClientAuth::None, None)
    };
    assert!(server_config(&missing, &io())
        .unwrap_err()
        .contains("/nonexistent"));
}
