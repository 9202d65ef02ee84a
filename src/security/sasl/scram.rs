//! SCRAM-SHA-256/512 (RFC 5802, RFC 7677) as Kafka's `ScramSaslServer` runs it: no channel
//! binding, the name unescaped (`=2C`, `=3D`), the credential looked up at client-first, the
//! proof checked at client-final in constant time. Pure: the server nonce comes in as bytes.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use ring::{digest, hmac};

/// Kafka's bounds on a credential's iteration count.
pub const MIN_ITERATIONS: i32 = 4096;
pub const MAX_ITERATIONS: i32 = 16384;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hash {
    Sha256,
    Sha512,
}

impl Hash {
    pub(super) fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        let alg = match self {
            Hash::Sha256 => hmac::HMAC_SHA256,
            Hash::Sha512 => hmac::HMAC_SHA512,
        };
        hmac::sign(&hmac::Key::new(alg, key), data)
            .as_ref()
            .to_vec()
    }

    pub(super) fn digest(self, data: &[u8]) -> Vec<u8> {
        let alg = match self {
            Hash::Sha256 => &digest::SHA256,
            Hash::Sha512 => &digest::SHA512,
        };
        digest::digest(alg, data).as_ref().to_vec()
    }
}

/// What the server keeps of a user's password for one mechanism.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credential {
    pub salt: Vec<u8>,
    pub salted_password: Vec<u8>,
    pub iterations: i32,
}

impl Credential {
    pub fn stored_key(&self, hash: Hash) -> Vec<u8> {
        hash.digest(&hash.hmac(&self.salted_password, b"Client Key"))
    }

    pub fn server_key(&self, hash: Hash) -> Vec<u8> {
        hash.hmac(&self.salted_password, b"Server Key")
    }
}

/// Why an exchange failed. `Credentials` is reported with Kafka's generic text (it must not
/// reveal whether the user exists); the others with their own.
#[derive(Debug, PartialEq, Eq)]
pub enum Failure {
    Credentials,
    Invalid(String),
}

/// After client-first: what client-final is checked against.
#[derive(Debug)]
pub struct FirstDone {
    pub username: String,
    hash: Hash,
    gs2_header: String,
    nonce: String,
    client_first_bare: String,
    server_first: String,
    credential: Credential,
}

/// Parses client-first and answers server-first. `lookup` gives the user's credential.
pub fn client_first(
    hash: Hash,
    message: &[u8],
    snonce: &[u8],
    lookup: impl FnOnce(&str) -> Option<Credential>,
) -> Result<(FirstDone, Vec<u8>), Failure> {
    let text = std::str::from_utf8(message)
        .map_err(|_| Failure::Invalid("Invalid SCRAM client first message: not UTF-8".into()))?;
    let bad = |why: &str| Failure::Invalid(format!("Invalid SCRAM client first message: {why}"));
    let (flag, rest) = text.split_once(',').ok_or_else(|| bad("no GS2 header"))?;
    if flag != "n" {
        return Err(bad("channel binding is not supported"));
    }
    let (authzid, bare) = rest.split_once(',').ok_or_else(|| bad("no GS2 header"))?;
    let authzid = match authzid {
        "" => None,
        a => Some(
            a.strip_prefix("a=")
                .ok_or_else(|| bad("bad authorization id"))?,
        ),
    };
    let gs2_header = format!(
        "{flag},{authzid},",
        authzid = authzid.map_or(String::new(), |a| format!("a={a}"))
    );
    let mut attrs = bare.split(',');
    let name = attrs
        .next()
        .and_then(|a| a.strip_prefix("n="))
        .ok_or_else(|| bad("no user name"))?;
    let cnonce = attrs
        .next()
        .and_then(|a| a.strip_prefix("r="))
        .ok_or_else(|| bad("no nonce"))?;
    if cnonce.is_empty()
        || !cnonce
            .bytes()
            .all(|b| (0x21..=0x7e).contains(&b) && b != b',')
    {
        return Err(bad("bad nonce"));
    }
    // Extensions (`tokenauth`...) are ignored, as Kafka ignores unknown ones.
    let username = unescape(name).ok_or_else(|| bad("bad user name escape"))?;
    if username.is_empty() {
        return Err(bad("empty user name"));
    }
    if let Some(a) = authzid {
        if unescape(a).as_deref() != Some(username.as_str()) {
            return Err(Failure::Invalid(
                "Authentication failed: Client requested an authorization id that is different from username".into(),
            ));
        }
    }
    let credential = lookup(&username).ok_or(Failure::Credentials)?;
    if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&credential.iterations) {
        return Err(Failure::Credentials);
    }
    let nonce = format!("{cnonce}{}", B64.encode(snonce).replace('=', ""));
    let server_first = format!(
        "r={nonce},s={},i={}",
        B64.encode(&credential.salt),
        credential.iterations
    );
    let reply = server_first.clone().into_bytes();
    Ok((
        FirstDone {
            username,
            hash,
            gs2_header,
            nonce,
            client_first_bare: bare.to_string(),
            server_first,
            credential,
        },
        reply,
    ))
}

/// Checks client-final and answers server-final (`v=` the server signature).
pub fn client_final(state: &FirstDone, message: &[u8]) -> Result<Vec<u8>, Failure> {
    let bad = |why: &str| Failure::Invalid(format!("Invalid SCRAM client final message: {why}"));
    let text = std::str::from_utf8(message).map_err(|_| bad("not UTF-8"))?;
    let (without_proof, proof) = text.rsplit_once(",p=").ok_or_else(|| bad("no proof"))?;
    let mut attrs = without_proof.split(',');
    let binding = attrs
        .next()
        .and_then(|a| a.strip_prefix("c="))
        .ok_or_else(|| bad("no channel binding"))?;
    let nonce = attrs
        .next()
        .and_then(|a| a.strip_prefix("r="))
        .ok_or_else(|| bad("no nonce"))?;
    if B64.decode(binding).ok().as_deref() != Some(state.gs2_header.as_bytes()) {
        return Err(bad("channel binding does not match"));
    }
    if nonce != state.nonce {
        return Err(Failure::Invalid(
            "Invalid SCRAM client final message: nonce does not match this exchange".into(),
        ));
    }
    let proof = B64.decode(proof).map_err(|_| bad("proof is not base64"))?;
    let hash = state.hash;
    let auth_message = format!(
        "{},{},{}",
        state.client_first_bare, state.server_first, without_proof
    );
    let stored_key = state.credential.stored_key(hash);
    let signature = hash.hmac(&stored_key, auth_message.as_bytes());
    if proof.len() != signature.len() {
        return Err(Failure::Credentials);
    }
    let client_key: Vec<u8> = proof.iter().zip(&signature).map(|(a, b)| a ^ b).collect();
    if !constant_time_eq(&hash.digest(&client_key), &stored_key) {
        return Err(Failure::Credentials);
    }
    let server_signature = hash.hmac(&state.credential.server_key(hash), auth_message.as_bytes());
    Ok(format!("v={}", B64.encode(server_signature)).into_bytes())
}

/// `=2C` → `,`, `=3D` → `=`; any other `=` is an error.
fn unescape(name: &str) -> Option<String> {
    let mut out = String::new();
    let mut rest = name;
    while let Some(i) = rest.find('=') {
        out.push_str(&rest[..i]);
        let code = rest.get(i + 1..i + 3)?;
        out.push(match code {
            "2C" => ',',
            "3D" => '=',
            _ => return None,
        });
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    Some(out)
}

pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The salted password for `password` (what AlterUserScramCredentials carries).
    pub(crate) fn salted(hash: Hash, password: &str, salt: &[u8], iterations: u32) -> Vec<u8> {
        let (alg, len) = match hash {
            Hash::Sha256 => (ring::pbkdf2::PBKDF2_HMAC_SHA256, 32),
            Hash::Sha512 => (ring::pbkdf2::PBKDF2_HMAC_SHA512, 64),
        };
        let mut out = vec![0u8; len];
        ring::pbkdf2::derive(
            alg,
            std::num::NonZeroU32::new(iterations).unwrap(),
            salt,
            password.as_bytes(),
            &mut out,
        );
        out
    }

    /// A client's proof for `auth_message`.
    pub(crate) fn proof(hash: Hash, salted_password: &[u8], auth_message: &str) -> Vec<u8> {
        let client_key = hash.hmac(salted_password, b"Client Key");
        let stored = hash.digest(&client_key);
        let sig = hash.hmac(&stored, auth_message.as_bytes());
        client_key.iter().zip(&sig).map(|(a, b)| a ^ b).collect()
    }

    /// The RFC 7677 vector, with the server nonce this exchange would draw.
    #[test]
    fn rfc7677_vector() {
        let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let credential = Credential {
            salted_password: salted(Hash::Sha256, "pencil", &salt, 4096),
            salt,
            iterations: 4096,
        };
        assert_eq!(
            B64.encode(credential.stored_key(Hash::Sha256)),
            "WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY="
        );
        let (mut state, reply) = client_first(
            Hash::Sha256,
            b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
            b"x",
            |u| (u == "user").then(|| credential.clone()),
        )
        .unwrap();
        assert!(String::from_utf8(reply)
            .unwrap()
            .starts_with("r=rOprNGfwEbeRWgbNEkqO"));
        // The RFC's server nonce, to reuse its proof.
        let nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
        state.nonce = nonce.into();
        state.server_first = format!("r={nonce},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096");
        let final_msg = format!("c=biws,r={nonce},p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=");
        let server_final = client_final(&state, final_msg.as_bytes()).unwrap();
        assert_eq!(
            String::from_utf8(server_final).unwrap(),
            "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
        );
        let wrong = format!("c=biws,r={nonce},p=AHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=");
        assert_eq!(
            client_final(&state, wrong.as_bytes()),
            Err(Failure::Credentials)
        );
    }

    #[test]
    fn hostile_first_messages() {
        let lookup = |_: &str| None;
        for msg in [
            &b"y,,n=user,r=abc"[..],
            b"p=tls-unique,,n=user,r=abc",
            b"n,,n=us=er,r=abc",
            b"n,,r=abc",
            b"n,,n=user",
            b"",
            b"\xff\xfe",
            b"n,a=other,n=user,r=abc",
        ] {
            assert!(matches!(
                client_first(Hash::Sha512, msg, b"s", lookup),
                Err(Failure::Invalid(_))
            ));
        }
        assert_eq!(
            client_first(Hash::Sha512, b"n,,n=nobody,r=abc", b"s", lookup).unwrap_err(),
            Failure::Credentials
        );
        assert_eq!(unescape("a=2Cb=3Dc").as_deref(), Some("a,b=c"));
    }
}
