//! AlterUserScramCredentials decided against the committed image (Kafka's
//! `ScramControlManager`): deletions first, then upsertions; a user named twice in one
//! request (in either list) fails DUPLICATE_RESOURCE for all its alterations; an empty user is
//! UNACCEPTABLE_CREDENTIAL, an unknown mechanism UNSUPPORTED_SASL_MECHANISM, iterations
//! outside 4096..=16384 UNACCEPTABLE_CREDENTIAL, deleting a missing credential
//! RESOURCE_NOT_FOUND. The salted password is the client's (KIP-554: the password never
//! reaches the broker).

use std::collections::BTreeMap;

use super::image::scram::ScramMechanism;
use super::{MetadataImage, MetadataRecord, ScramRecord};

/// SCRAM's iteration bounds (Kafka's `ScramMechanism.minIterations` and the controller's
/// `MAX_ITERATIONS`), the same for both mechanisms.
pub const MIN_ITERATIONS: i32 = 4096;
pub const MAX_ITERATIONS: i32 = 16384;

/// Why one user's alteration failed (each maps to one Kafka error code).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScramError {
    DuplicateResource(&'static str),
    UnacceptableCredential(&'static str),
    UnsupportedMechanism(&'static str),
    ResourceNotFound(&'static str),
}

pub struct Deletion {
    pub name: String,
    pub mechanism: i8,
}

pub struct Upsertion {
    pub name: String,
    pub mechanism: i8,
    pub iterations: i32,
    pub salt: Vec<u8>,
    pub salted_password: Vec<u8>,
}

const TWICE: &str = "A user credential cannot be altered twice in the same request";

fn check_user_and_mechanism(name: &str, mechanism: i8) -> Result<ScramMechanism, ScramError> {
    if name.is_empty() {
        return Err(ScramError::UnacceptableCredential(
            "Username must not be empty",
        ));
    }
    ScramMechanism::from_code(mechanism)
        .ok_or(ScramError::UnsupportedMechanism("Unknown SCRAM mechanism"))
}

/// One user's outcome.
pub type UserResult = (String, Result<(), ScramError>);

/// The records and each user's result: successful deletions, then successful upsertions, then
/// failures by user name (Kafka's order, made deterministic).
pub fn alter_credentials(
    image: &MetadataImage,
    deletions: Vec<Deletion>,
    upsertions: Vec<Upsertion>,
) -> (Vec<MetadataRecord>, Vec<UserResult>) {
    let mut deletes: BTreeMap<String, ScramMechanism> = BTreeMap::new();
    let mut upserts: BTreeMap<String, ScramRecord> = BTreeMap::new();
    let mut errors: BTreeMap<String, ScramError> = BTreeMap::new();
    let mut delete_order = Vec::new();
    let mut upsert_order = Vec::new();
    for d in deletions {
        if errors.contains_key(&d.name) {
            continue;
        }
        if deletes.remove(&d.name).is_some() {
            errors.insert(d.name, ScramError::DuplicateResource(TWICE));
            continue;
        }
        let checked = check_user_and_mechanism(&d.name, d.mechanism).and_then(|m| {
            match image.scram().get(&d.name, m) {
                Some(_) => Ok(m),
                None => Err(ScramError::ResourceNotFound(
                    "Attempt to delete a user credential that does not exist",
                )),
            }
        });
        match checked {
            Ok(m) => {
                delete_order.push(d.name.clone());
                deletes.insert(d.name, m);
            }
            Err(e) => {
                errors.insert(d.name, e);
            }
        }
    }
    for u in upsertions {
        if errors.contains_key(&u.name) {
            continue;
        }
        if deletes.remove(&u.name).is_some() || upserts.remove(&u.name).is_some() {
            errors.insert(u.name, ScramError::DuplicateResource(TWICE));
            continue;
        }
        let checked = check_user_and_mechanism(&u.name, u.mechanism).and_then(|m| {
            if u.iterations < MIN_ITERATIONS {
                Err(ScramError::UnacceptableCredential("Too few iterations"))
            } else if u.iterations > MAX_ITERATIONS {
                Err(ScramError::UnacceptableCredential("Too many iterations"))
            } else {
                Ok(m)
            }
        });
        match checked {
            Ok(mechanism) => {
                upsert_order.push(u.name.clone());
                upserts.insert(
                    u.name.clone(),
                    ScramRecord {
                        name: u.name,
                        mechanism,
                        salt: u.salt,
                        salted_password: u.salted_password,
                        iterations: u.iterations,
                    },
                );
            }
            Err(e) => {
                errors.insert(u.name, e);
            }
        }
    }
    let mut records = Vec::new();
    let mut results = Vec::new();
    for name in delete_order {
        // A later duplicate may have taken it out.
        if let Some(mechanism) = deletes.remove(&name) {
            records.push(MetadataRecord::RemoveUserScramCredential {
                name: name.clone(),
                mechanism,
            });
            results.push((name, Ok(())));
        }
    }
    for name in upsert_order {
        if let Some(record) = upserts.remove(&name) {
            records.push(MetadataRecord::UserScramCredential(record));
            results.push((name, Ok(())));
        }
    }
    results.extend(errors.into_iter().map(|(name, e)| (name, Err(e))));
    (records, results)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn up(name: &str, mechanism: i8, iterations: i32) -> Upsertion {
        Upsertion {
            name: name.into(),
            mechanism,
            iterations,
            salt: b"salt".to_vec(),
            salted_password: vec![1; 32],
        }
    }

    fn del(name: &str, mechanism: i8) -> Deletion {
        Deletion {
            name: name.into(),
            mechanism,
        }
    }

    #[test]
    fn validation_as_kafka_does_it() {
        let mut image = MetadataImage::default();
        let (records, results) = alter_credentials(
            &image,
            vec![del("ghost", 1)],
            vec![
                up("alice", 1, 10_000),
                up("", 1, 10_000),
                up("bob", 3, 10_000),
                up("carol", 2, 4095),
                up("dave", 2, 16385),
                up("erin", 1, 4096),
                up("erin", 2, 16384),
            ],
        );
        let get = |n: &str| results.iter().find(|(u, _)| u == n).unwrap().1.clone();
        assert_eq!(get("alice"), Ok(()));
        assert!(matches!(
            get(""),
            Err(ScramError::UnacceptableCredential(_))
        ));
        assert!(matches!(
            get("bob"),
            Err(ScramError::UnsupportedMechanism(_))
        ));
        assert!(matches!(
            get("carol"),
            Err(ScramError::UnacceptableCredential(_))
        ));
        assert!(matches!(
            get("dave"),
            Err(ScramError::UnacceptableCredential(_))
        ));
        assert!(matches!(get("erin"), Err(ScramError::DuplicateResource(_))));
        assert!(matches!(get("ghost"), Err(ScramError::ResourceNotFound(_))));
        assert_eq!(records.len(), 1);
        for r in &records {
            let offset = image.applied();
            image.apply(offset, r);
        }
        assert_eq!(
            image.scram().of_user("alice"),
            vec![(ScramMechanism::Sha256, 10_000)]
        );
        // Deleting it now works; deleting and upserting the same user is a duplicate.
        let (records, results) =
            alter_credentials(&image, vec![del("alice", 1)], vec![up("alice", 2, 5000)]);
        assert!(records.is_empty());
        assert!(matches!(
            results[0].1,
            Err(ScramError::DuplicateResource(_))
        ));
        let (records, results) = alter_credentials(&image, vec![del("alice", 1)], vec![]);
        assert_eq!(results, vec![("alice".to_string(), Ok(()))]);
        for r in &records {
            let offset = image.applied();
            image.apply(offset, r);
        }
        assert!(image.scram().users().is_empty());
    }
}
