//! Users' SCRAM credentials: DescribeUserScramCredentials and AlterUserScramCredentials
//! (KIP-554), for `weir configs --entity-type users`. As Kafka's admin client does, the
//! password is salted here (PBKDF2 with a fresh random salt from the io layer's generator)
//! and only the salt and salted password travel.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest,
};
use kafka_protocol::protocol::StrBytes;

use super::{check, Client, ClientError, Result};
use crate::controller::image::scram::ScramMechanism;
use crate::io::Io;
use crate::security::sasl::client::salted_password;
use crate::security::sasl::scram::Hash;

const VERSION: i16 = 0;
/// Kafka's salt: 130 random bits; 32 bytes is at least as good.
const SALT_LEN: usize = 32;

/// One credential of a user as Describe lists it (never the salt or the key).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ScramCredentialInfo {
    pub mechanism: String,
    pub iterations: i32,
}

/// A credential to set: the password is salted before it leaves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScramUpsertion {
    pub mechanism: ScramMechanism,
    pub iterations: i32,
    pub password: String,
}

/// `SCRAM-SHA-256` / `SCRAM-SHA-512`.
pub fn mechanism_name(m: ScramMechanism) -> &'static str {
    match m {
        ScramMechanism::Sha256 => "SCRAM-SHA-256",
        ScramMechanism::Sha512 => "SCRAM-SHA-512",
    }
}

/// The salt and salted password of `password` (PBKDF2 with the mechanism's HMAC).
pub fn salt_password(
    io: &Io,
    mechanism: ScramMechanism,
    password: &str,
    iterations: i32,
) -> (Vec<u8>, Vec<u8>) {
    let mut salt = vec![0u8; SALT_LEN];
    crate::io::secure_random(io.rng.as_ref(), &mut salt);
    let hash = match mechanism {
        ScramMechanism::Sha256 => Hash::Sha256,
        ScramMechanism::Sha512 => Hash::Sha512,
    };
    let salted = salted_password(hash, password, &salt, iterations.max(1) as u32);
    (salt, salted)
}

impl Client {
    /// Each user's credentials (every user with one when `users` is empty). A user without
    /// any is RESOURCE_NOT_FOUND in Kafka's answer: listed here with none.
    pub async fn describe_user_scram_credentials(
        &mut self,
        users: &[String],
    ) -> Result<Vec<(String, Vec<ScramCredentialInfo>)>> {
        let names = (!users.is_empty()).then(|| {
            users
                .iter()
                .map(|u| UserName::default().with_name(StrBytes::from_string(u.clone())))
                .collect()
        });
        let request = DescribeUserScramCredentialsRequest::default().with_users(names);
        let response = self.call(&request, VERSION).await?;
        check(response.error_code, response.error_message.as_ref())?;
        let mut out = Vec::new();
        for r in response.results {
            match ResponseError::try_from_code(r.error_code) {
                None => {}
                Some(ResponseError::ResourceNotFound) => {
                    out.push((r.user.to_string(), Vec::new()));
                    continue;
                }
                Some(e) => {
                    return Err(ClientError::Kafka(
                        e,
                        r.error_message.map(|m| m.to_string()).unwrap_or_default(),
                    ))
                }
            }
            let infos = r
                .credential_infos
                .iter()
                .map(|c| ScramCredentialInfo {
                    mechanism: ScramMechanism::from_code(c.mechanism)
                        .map(mechanism_name)
                        .unwrap_or("UNKNOWN")
                        .to_string(),
                    iterations: c.iterations,
                })
                .collect();
            out.push((r.user.to_string(), infos));
        }
        Ok(out)
    }

    /// Deletes then sets `user`'s credentials in one request (applied together by the
    /// controller); the first user error is returned.
    pub async fn alter_user_scram_credentials(
        &mut self,
        user: &str,
        deletions: &[ScramMechanism],
        upsertions: &[ScramUpsertion],
    ) -> Result<()> {
        let name = || StrBytes::from_string(user.to_string());
        let request = AlterUserScramCredentialsRequest::default()
            .with_deletions(
                deletions
                    .iter()
                    .map(|m| {
                        ScramCredentialDeletion::default()
                            .with_name(name())
                            .with_mechanism(m.code())
                    })
                    .collect(),
            )
            .with_upsertions(
                upsertions
                    .iter()
                    .map(|u| {
                        let (salt, salted) =
                            salt_password(&self.io, u.mechanism, &u.password, u.iterations);
                        ScramCredentialUpsertion::default()
                            .with_name(name())
                            .with_mechanism(u.mechanism.code())
                            .with_iterations(u.iterations)
                            .with_salt(salt.into())
                            .with_salted_password(salted.into())
                    })
                    .collect(),
            );
        let response = self.call(&request, VERSION).await?;
        for r in &response.results {
            check(r.error_code, r.error_message.as_ref())?;
        }
        Ok(())
    }
}
