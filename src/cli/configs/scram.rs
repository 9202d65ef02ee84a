//! `weir configs --entity-type users --entity-name U --alter --add-config
//! 'SCRAM-SHA-256=[iterations=8192,password=P]' --delete-config SCRAM-SHA-512` and the
//! describe line, as `kafka-configs.sh` manages users' SCRAM credentials (KIP-554): the
//! `SCRAM-*` keys of `--add-config`/`--delete-config` become one AlterUserScramCredentials
//! (the password salted by the client), the other keys stay quotas.

use std::collections::BTreeMap;

use weir::client::{mechanism_name, ScramCredentialInfo, ScramUpsertion};
use weir::controller::image::scram::ScramMechanism;
use weir::controller::scram::{MAX_ITERATIONS, MIN_ITERATIONS};

/// Kafka's default iteration count when `iterations=` is not given.
pub(super) const DEFAULT_ITERATIONS: i32 = 4096;

/// A user's SCRAM changes: credentials to delete and to set.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct ScramChanges {
    pub deletions: Vec<ScramMechanism>,
    pub upsertions: Vec<ScramUpsertion>,
}

impl ScramChanges {
    pub fn is_empty(&self) -> bool {
        self.deletions.is_empty() && self.upsertions.is_empty()
    }
}

fn is_scram_key(key: &str) -> bool {
    key.to_ascii_uppercase().starts_with("SCRAM-")
}

fn mechanism(key: &str) -> Result<ScramMechanism, String> {
    match key {
        "SCRAM-SHA-256" => Ok(ScramMechanism::Sha256),
        "SCRAM-SHA-512" => Ok(ScramMechanism::Sha512),
        other => Err(format!(
            "unknown SCRAM mechanism '{other}' (SCRAM-SHA-256 or SCRAM-SHA-512)"
        )),
    }
}

/// One mechanism's `iterations=N,password=P` (brackets already removed).
fn upsertion(m: ScramMechanism, value: &str) -> Result<ScramUpsertion, String> {
    let name = mechanism_name(m);
    let mut iterations = None;
    let mut password = None;
    for item in value.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (k, v) = item
            .split_once('=')
            .ok_or_else(|| format!("{name}: expected key=value, got '{item}'"))?;
        match k.trim() {
            "iterations" => {
                let n: i32 = v.trim().parse().map_err(|_| {
                    format!("{name}: iterations must be a number, not '{}'", v.trim())
                })?;
                iterations = Some(n);
            }
            "password" => password = Some(v.to_string()),
            other => {
                return Err(format!(
                    "{name}: unknown key '{other}' (iterations, password)"
                ))
            }
        }
    }
    let password = password
        .ok_or_else(|| format!("{name} needs a password: {name}=[iterations=8192,password=...]"))?;
    if password.is_empty() {
        return Err(format!("{name}: the password must not be empty"));
    }
    let iterations = iterations.unwrap_or(DEFAULT_ITERATIONS);
    if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations) {
        return Err(format!(
            "{name}: iterations {iterations} is outside {MIN_ITERATIONS}..={MAX_ITERATIONS}"
        ));
    }
    Ok(ScramUpsertion {
        mechanism: m,
        iterations,
        password,
    })
}

/// Takes the `SCRAM-*` keys out of `changes` (`None`: delete) and parses them.
pub(super) fn take_scram(
    changes: &mut BTreeMap<String, Option<String>>,
) -> Result<ScramChanges, String> {
    let keys: Vec<String> = changes
        .keys()
        .filter(|k| is_scram_key(k))
        .cloned()
        .collect();
    let mut out = ScramChanges::default();
    for key in keys {
        let m = mechanism(&key)?;
        match changes.remove(&key).flatten() {
            None => out.deletions.push(m),
            Some(value) => out.upsertions.push(upsertion(m, &value)?),
        }
    }
    Ok(out)
}

/// Kafka's describe line.
pub(super) fn line(user: &str, infos: &[ScramCredentialInfo]) -> String {
    let listed: Vec<String> = infos
        .iter()
        .map(|c| format!("{}=iterations={}", c.mechanism, c.iterations))
        .collect();
    format!(
        "SCRAM credential configs for user-principal '{user}' are {}",
        listed.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::super::changes;
    use super::*;

    /// `--add-config` / `--delete-config` → (SCRAM changes, quota keys left) or the error.
    fn outcome(add: &str, delete: &[&str]) -> String {
        let delete: Vec<String> = delete.iter().map(|s| s.to_string()).collect();
        let mut parsed = match changes(Some(add), &delete) {
            Ok(p) => p,
            Err(e) => return format!("error: {e}"),
        };
        match take_scram(&mut parsed) {
            Err(e) => format!("error: {e}"),
            Ok(s) => {
                let mut words: Vec<String> = s
                    .deletions
                    .iter()
                    .map(|m| format!("-{}", mechanism_name(*m)))
                    .collect();
                words.extend(s.upsertions.iter().map(|u| {
                    format!(
                        "+{}:{}:{}",
                        mechanism_name(u.mechanism),
                        u.iterations,
                        u.password
                    )
                }));
                words.extend(parsed.keys().map(|k| format!("quota:{k}")));
                words.join(" ")
            }
        }
    }

    #[test]
    fn add_config_scram_grammar() {
        let cases: &[(&str, &[&str], &str)] = &[
            (
                "SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=x]",
                &[],
                "+SCRAM-SHA-256:8192:alice-secret +SCRAM-SHA-512:4096:x",
            ),
            ("", &["SCRAM-SHA-512"], "-SCRAM-SHA-512"),
            (
                "SCRAM-SHA-256=[password=p w],producer_byte_rate=1024",
                &["consumer_byte_rate"],
                "+SCRAM-SHA-256:4096:p w quota:consumer_byte_rate quota:producer_byte_rate",
            ),
            (
                "SCRAM-SHA-256=[password=a=b]",
                &[],
                "+SCRAM-SHA-256:4096:a=b",
            ),
            (
                "SCRAM-SHA-1=[password=x]",
                &[],
                "error: unknown SCRAM mechanism 'SCRAM-SHA-1' (SCRAM-SHA-256 or SCRAM-SHA-512)",
            ),
            (
                "SCRAM-SHA-256=[iterations=8192]",
                &[],
                "error: SCRAM-SHA-256 needs a password: SCRAM-SHA-256=[iterations=8192,password=...]",
            ),
            (
                "SCRAM-SHA-256=[iterations=100,password=x]",
                &[],
                "error: SCRAM-SHA-256: iterations 100 is outside 4096..=16384",
            ),
            (
                "SCRAM-SHA-512=[iterations=many,password=x]",
                &[],
                "error: SCRAM-SHA-512: iterations must be a number, not 'many'",
            ),
            (
                "SCRAM-SHA-512=[salt=abc,password=x]",
                &[],
                "error: SCRAM-SHA-512: unknown key 'salt' (iterations, password)",
            ),
            (
                "SCRAM-SHA-512=[password=]",
                &[],
                "error: SCRAM-SHA-512: the password must not be empty",
            ),
            (
                "SCRAM-SHA-256=[password=x]",
                &["SCRAM-SHA-256"],
                "error: 'SCRAM-SHA-256' is both added and deleted",
            ),
        ];
        let mut failures = Vec::new();
        for (add, delete, expected) in cases {
            let got = outcome(add, delete);
            if got != *expected {
                failures.push(format!(
                    "{add:?} {delete:?}\n  expected {expected}\n  got      {got}"
                ));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    #[test]
    fn describe_line_reads_as_kafka_configs_prints_it() {
        let infos = vec![
            ScramCredentialInfo {
                mechanism: "SCRAM-SHA-256".into(),
                iterations: 8192,
            },
            ScramCredentialInfo {
                mechanism: "SCRAM-SHA-512".into(),
                iterations: 4096,
            },
        ];
        assert_eq!(
            line("alice", &infos),
            "SCRAM credential configs for user-principal 'alice' are \
             SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096"
        );
    }
}
