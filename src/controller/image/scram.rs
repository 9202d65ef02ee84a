//! SCRAM credentials (KIP-554) as the image holds them: one per (user, mechanism), with the
//! salt, the client-computed salted password and the iteration count. Describe answers with
//! mechanism and iterations only, as Kafka does.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::records::ScramRecord;

/// Kafka's `ScramMechanism` (1 SCRAM-SHA-256, 2 SCRAM-SHA-512).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ScramMechanism {
    #[serde(rename = "SCRAM-SHA-256")]
    Sha256,
    #[serde(rename = "SCRAM-SHA-512")]
    Sha512,
}

impl ScramMechanism {
    pub fn from_code(code: i8) -> Option<ScramMechanism> {
        match code {
            1 => Some(ScramMechanism::Sha256),
            2 => Some(ScramMechanism::Sha512),
            _ => None,
        }
    }

    pub fn code(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => 1,
            ScramMechanism::Sha512 => 2,
        }
    }
}

/// The credentials, by (user, mechanism).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScramCredentials {
    by_user: BTreeMap<(String, ScramMechanism), ScramRecord>,
}

impl ScramCredentials {
    pub fn upsert(&mut self, record: &ScramRecord) {
        assert!(!record.name.is_empty(), "SCRAM credential without a user");
        self.by_user
            .insert((record.name.clone(), record.mechanism), record.clone());
    }

    /// Removes a credential (the controller checked it exists).
    pub fn remove(&mut self, name: &str, mechanism: ScramMechanism) {
        let removed = self.by_user.remove(&(name.to_string(), mechanism));
        assert!(
            removed.is_some(),
            "removal of unknown SCRAM credential {name}"
        );
    }

    pub fn get(&self, name: &str, mechanism: ScramMechanism) -> Option<&ScramRecord> {
        self.by_user.get(&(name.to_string(), mechanism))
    }

    /// A user's (mechanism, iterations), by mechanism.
    pub fn of_user(&self, name: &str) -> Vec<(ScramMechanism, i32)> {
        self.by_user
            .range(
                (name.to_string(), ScramMechanism::Sha256)
                    ..=(name.to_string(), ScramMechanism::Sha512),
            )
            .map(|((_, m), r)| (*m, r.iterations))
            .collect()
    }

    /// Every user with a credential, in name order, once each.
    pub fn users(&self) -> Vec<&str> {
        let mut users: Vec<&str> = self.by_user.keys().map(|(u, _)| u.as_str()).collect();
        users.dedup();
        users
    }

    pub fn all(&self) -> impl Iterator<Item = &ScramRecord> {
        self.by_user.values()
    }
}
