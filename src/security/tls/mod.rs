//! TLS listeners on rustls (ring provider, no OpenSSL): the server config built from Kafka's
//! PEM key and trust stores (KIP-651), and the stream that runs it over the io layer.
//! Randomness and time come through [`crate::io`] so the simulator replays a handshake's
//! control flow from its seed (see [`provider`]).

mod provider;
pub mod stream;

use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::pki_types::{ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig};

use crate::io::Io;

/// PEM text, inline in the config or in a file.
#[derive(Clone, Debug, PartialEq)]
pub enum PemSource {
    File(String),
    Inline(String),
}

/// `ssl.client.auth`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    None,
    Requested,
    Required,
}

impl ClientAuth {
    pub fn parse(value: &str) -> Option<ClientAuth> {
        match value.trim().to_ascii_lowercase().as_str() {
            "none" | "" => Some(ClientAuth::None),
            "requested" => Some(ClientAuth::Requested),
            "required" => Some(ClientAuth::Required),
            _ => None,
        }
    }
}

/// One TLS listener's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct TlsSettings {
    /// The certificate chain, end entity first.
    pub chain: PemSource,
    pub key: PemSource,
    /// CAs a client certificate must chain to.
    pub truststore: Option<PemSource>,
    pub client_auth: ClientAuth,
}

fn load(io: &Io, source: &PemSource) -> Result<Vec<u8>, String> {
    match source {
        PemSource::Inline(text) => Ok(text.clone().into_bytes()),
        PemSource::File(path) => crate::io::read_file(io.disk.as_ref(), Path::new(path))
            .map_err(|e| format!("cannot read '{path}': {e}")),
    }
}

fn certificates(pem: &[u8], what: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<_> = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{what}: bad PEM: {e}"))?;
    if certs.is_empty() {
        return Err(format!("{what}: no CERTIFICATE in PEM"));
    }
    Ok(certs)
}

fn private_key(io: &Io, source: &PemSource) -> Result<PrivateKeyDer<'static>, String> {
    let key_pem = load(io, source)?;
    if key_pem
        .windows(b"ENCRYPTED PRIVATE KEY".len())
        .any(|w| w == b"ENCRYPTED PRIVATE KEY")
    {
        return Err(
            "encrypted private keys (ssl.key.password) are not supported: \
                    decrypt it with `openssl pkcs8 -in key.pem -out plain.pem`"
                .into(),
        );
    }
    PrivateKeyDer::from_pem_slice(&key_pem)
        .map_err(|e| format!("keystore key: no PKCS#8, SEC1 or PKCS#1 private key: {e}"))
}

fn roots(io: &Io, source: &PemSource) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    for ca in certificates(&load(io, source)?, "truststore")? {
        roots.add(ca).map_err(|e| format!("truststore: {e}"))?;
    }
    Ok(roots)
}

/// The rustls client config the broker dials a TLS listener of another node with, from that
/// listener's settings as Kafka reads them for its own clients: the trust store checks the
/// server, the key store is the client certificate (for `ssl.client.auth`). `verify_name`:
/// `ssl.endpoint.identification.algorithm=https` (Kafka's default); empty turns it off.
pub fn client_config(
    settings: &TlsSettings,
    io: &Io,
    verify_name: bool,
) -> Result<Arc<ClientConfig>, String> {
    let source = settings.truststore.as_ref().ok_or(
        "connecting to this TLS listener needs a truststore (ssl.truststore.location or \
         ssl.truststore.certificates) to check the other node's certificate",
    )?;
    client_config_for(
        source,
        Some((&settings.chain, &settings.key)),
        io,
        verify_name,
    )
}

/// A rustls client config from a trust store and, for mTLS, a key store (chain, key); without
/// one the client sends no certificate (what `weir`'s client commands do unless their
/// `--command-config` names a key store).
pub fn client_config_for(
    truststore: &PemSource,
    identity: Option<(&PemSource, &PemSource)>,
    io: &Io,
    verify_name: bool,
) -> Result<Arc<ClientConfig>, String> {
    let provider = Arc::new(provider::provider(io));
    let webpki = WebPkiServerVerifier::builder_with_provider(
        Arc::new(roots(io, truststore)?),
        provider.clone(),
    )
    .build()
    .map_err(|e| format!("TLS: {e}"))?;
    let builder = ClientConfig::builder_with_details(provider, provider::time(io))
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?;
    let builder = match verify_name {
        true => builder.with_webpki_verifier(webpki),
        false => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyName(webpki))),
    };
    let config = match identity {
        None => builder.with_no_client_auth(),
        Some((chain, key)) => {
            let chain = certificates(&load(io, chain)?, "keystore certificate chain")?;
            let key = private_key(io, key)?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| format!("keystore: {e}"))?
        }
    };
    Ok(Arc::new(config))
}

/// The trust store's checks without the host name's
/// (`ssl.endpoint.identification.algorithm=`, empty).
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        use rustls::CertificateError::{NotValidForName, NotValidForNameContext};
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                NotValidForName | NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// The rustls server config of a TLS listener.
pub fn server_config(settings: &TlsSettings, io: &Io) -> Result<Arc<ServerConfig>, String> {
    let chain = certificates(&load(io, &settings.chain)?, "keystore certificate chain")?;
    let key = private_key(io, &settings.key)?;
    let provider = Arc::new(provider::provider(io));
    let builder = ServerConfig::builder_with_details(provider.clone(), provider::time(io))
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?;
    let builder = match settings.client_auth {
        ClientAuth::None => builder.with_no_client_auth(),
        auth => {
            let source = settings
                .truststore
                .as_ref()
                .ok_or("ssl.client.auth needs a truststore (ssl.truststore.location or ssl.truststore.certificates)")?;
            let verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots(io, source)?), provider);
            let verifier = match auth {
                ClientAuth::Requested => verifier.allow_unauthenticated(),
                _ => verifier,
            };
            builder.with_client_cert_verifier(verifier.build().map_err(|e| format!("TLS: {e}"))?)
        }
    };
    let config = builder
        .with_single_cert(chain, key)
        .map_err(|e| format!("keystore: {e}"))?;
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests;
