//! DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554). Describe reads the
//! local image (mechanism and iterations only, never salts or keys); Alter is decided by the
//! active controller (`controller::scram`, forwarded like other metadata writes) and
//! committed as `UserScramCredential` records. With an authorizer they need DESCRIBE and ALTER
//! on the cluster. SASL listeners check SCRAM logins against them (`security::sasl::scram`).

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use kafka_protocol::protocol::StrBytes;

use crate::acl::Operation;
use crate::broker::api::RequestContext;
use crate::broker::{errors, shared::Broker};
use crate::controller::scram::{self as decide, Deletion, ScramError, Upsertion};

const NOT_FOUND: &str = "Attempt to describe a user credential that does not exist: ";
const TWICE: &str =
    "Cannot describe SCRAM credentials for the same user twice in a single request: ";

fn text(s: impl Into<String>) -> Option<StrBytes> {
    Some(StrBytes::from_string(s.into()))
}

pub(crate) fn describe(
    broker: &Broker,
    ctx: &RequestContext,
    req: DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    if !broker.authz(ctx).cluster(Operation::Describe) {
        return DescribeUserScramCredentialsResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code())
            .with_error_message(text("Cluster authorization failed."));
    }
    let image = broker.image();
    let credentials = image.scram();
    // Users in request order, once each, with whether the request named them twice; no
    // users (null or empty) means every user with a credential.
    let mut named: Vec<String> = Vec::new();
    let mut twice: BTreeMap<String, bool> = BTreeMap::new();
    match req.users.as_ref().filter(|u| !u.is_empty()) {
        None => named.extend(credentials.users().into_iter().map(str::to_string)),
        Some(users) => {
            for u in users {
                let name = u.name.to_string();
                match twice.get_mut(&name) {
                    Some(seen) => *seen = true,
                    None => {
                        twice.insert(name.clone(), false);
                        named.push(name);
                    }
                }
            }
        }
    }
    let results = named
        .into_iter()
        .map(|user| {
            let result = DescribeUserScramCredentialsResult::default()
                .with_user(StrBytes::from_string(user.clone()));
            if twice.get(&user).copied().unwrap_or(false) {
                return result
                    .with_error_code(ResponseError::DuplicateResource.code())
                    .with_error_message(text(format!("{TWICE}{user}")));
            }
            let infos = credentials.of_user(&user);
            if infos.is_empty() {
                return result
                    .with_error_code(ResponseError::ResourceNotFound.code())
                    .with_error_message(text(format!("{NOT_FOUND}{user}")));
            }
            result.with_credential_infos(
                infos
                    .into_iter()
                    .map(|(m, iterations)| {
                        CredentialInfo::default()
                            .with_mechanism(m.code())
                            .with_iterations(iterations)
                    })
                    .collect(),
            )
        })
        .collect();
    DescribeUserScramCredentialsResponse::default().with_results(results)
}

fn code(e: &ScramError) -> (ResponseError, &'static str) {
    match e {
        ScramError::DuplicateResource(m) => (ResponseError::DuplicateResource, m),
        ScramError::UnacceptableCredential(m) => (ResponseError::UnacceptableCredential, m),
        ScramError::UnsupportedMechanism(m) => (ResponseError::UnsupportedSaslMechanism, m),
        ScramError::ResourceNotFound(m) => (ResponseError::ResourceNotFound, m),
    }
}

pub(crate) async fn alter(
    broker: &Broker,
    ctx: &RequestContext,
    req: AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    // Every user the request names, once, in order: what a request-wide refusal answers.
    let mut users: Vec<String> = Vec::new();
    for name in req
        .deletions
        .iter()
        .map(|d| &d.name)
        .chain(req.upsertions.iter().map(|u| &u.name))
    {
        if !users.iter().any(|u| u == name.as_str()) {
            users.push(name.to_string());
        }
    }
    let all = |code: ResponseError, message: String| {
        AlterUserScramCredentialsResponse::default().with_results(
            users
                .iter()
                .map(|u| {
                    AlterUserScramCredentialsResult::default()
                        .with_user(StrBytes::from_string(u.clone()))
                        .with_error_code(code.code())
                        .with_error_message(text(message.clone()))
                })
                .collect(),
        )
    };
    if !broker.authz(ctx).cluster(Operation::Alter) {
        return all(
            ResponseError::ClusterAuthorizationFailed,
            "Cluster authorization failed.".into(),
        );
    }
    let deletions = req
        .deletions
        .iter()
        .map(|d| Deletion {
            name: d.name.to_string(),
            mechanism: d.mechanism,
        })
        .collect();
    let upsertions = req
        .upsertions
        .iter()
        .map(|u| Upsertion {
            name: u.name.to_string(),
            mechanism: u.mechanism,
            iterations: u.iterations,
            salt: u.salt.to_vec(),
            salted_password: u.salted_password.to_vec(),
        })
        .collect();
    let decided = broker
        .change_metadata_until(Some(ctx.deadline), false, move |_, image| {
            Ok(decide::alter_credentials(image, deletions, upsertions))
        })
        .await;
    match decided {
        Ok(results) => AlterUserScramCredentialsResponse::default().with_results(
            results
                .into_iter()
                .map(|(user, r)| {
                    let result = AlterUserScramCredentialsResult::default()
                        .with_user(StrBytes::from_string(user));
                    match r {
                        Ok(()) => result,
                        Err(e) => {
                            let (code, message) = code(&e);
                            result
                                .with_error_code(code.code())
                                .with_error_message(text(message))
                        }
                    }
                })
                .collect(),
        ),
        Err(e) => all(errors::commit(&e), e.to_string()),
    }
}
