//! SASL/PLAIN (RFC 4616) as Kafka's `PlainSaslServer`: one token `authzid NUL user NUL
//! password`, checked against the listener's JAAS `user_<name>="<password>"` entries.

use std::collections::BTreeMap;

use super::scram::constant_time_eq;

/// The user name, or the message Kafka sends with SASL_AUTHENTICATION_FAILED.
pub fn authenticate(token: &[u8], users: &BTreeMap<String, String>) -> Result<String, String> {
    let text = std::str::from_utf8(token)
        .map_err(|_| "Invalid SASL/PLAIN response: not UTF-8".to_string())?;
    let parts: Vec<&str> = text.split('\0').collect();
    let [authzid, username, password] = parts[..] else {
        return Err(format!(
            "Invalid SASL/PLAIN response: expected 3 tokens, got {}",
            parts.len()
        ));
    };
    if username.is_empty() {
        return Err("Authentication failed: username not specified".into());
    }
    if password.is_empty() {
        return Err("Authentication failed: password not specified".into());
    }
    if !authzid.is_empty() && authzid != username {
        return Err("Authentication failed: Client requested an authorization id that is different from username".into());
    }
    match users.get(username) {
        Some(expected) if constant_time_eq(expected.as_bytes(), password.as_bytes()) => {
            Ok(username.to_string())
        }
        _ => Err("Authentication failed: Invalid username or password".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_tokens() {
        let users = BTreeMap::from([("alice".to_string(), "alice-secret".to_string())]);
        assert_eq!(
            authenticate(b"\0alice\0alice-secret", &users),
            Ok("alice".into())
        );
        assert_eq!(
            authenticate(b"alice\0alice\0alice-secret", &users),
            Ok("alice".into())
        );
        for bad in [
            &b"\0alice\0wrong"[..],
            b"\0bob\0alice-secret",
            b"\0\0x",
            b"\0alice\0",
            b"bob\0alice\0alice-secret",
            b"alice\0alice-secret",
            b"\0alice\0alice-secret\0x",
            b"\xff",
        ] {
            assert!(authenticate(bad, &users).is_err(), "{bad:?}");
        }
    }
}
