//! `weir format --add-scram 'SCRAM-SHA-256=[name=alice,password=alice-secret]'`
//! (`kafka-storage.sh format`'s option): a user's credential salted now and written as a
//! bootstrap record, so the cluster's first metadata holds it.

use weir::client::salt_password;
use weir::controller::image::scram::ScramMechanism;
use weir::controller::scram::{MAX_ITERATIONS, MIN_ITERATIONS};
use weir::controller::{MetadataRecord, ScramRecord};
use weir::io::Io;

/// Kafka's default iteration count.
const DEFAULT_ITERATIONS: i32 = 4096;

/// A parsed `--add-scram`: (mechanism, user, password, iterations).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct AddScram {
    pub mechanism: ScramMechanism,
    pub name: String,
    pub password: String,
    pub iterations: i32,
}

pub(super) fn parse(spec: &str) -> Result<AddScram, String> {
    let (mechanism, body) = spec.trim().split_once('=').ok_or_else(|| {
        format!("--add-scram wants MECHANISM=[name=...,password=...], got '{spec}'")
    })?;
    let mechanism = match mechanism.trim() {
        "SCRAM-SHA-256" => ScramMechanism::Sha256,
        "SCRAM-SHA-512" => ScramMechanism::Sha512,
        other => {
            return Err(format!(
                "--add-scram: unknown SCRAM mechanism '{other}' (SCRAM-SHA-256 or SCRAM-SHA-512)"
            ))
        }
    };
    let body = body
        .trim()
        .strip_prefix('[')
        .and_then(|b| b.strip_suffix(']'))
        .ok_or_else(|| format!("--add-scram: the value goes in square brackets, got '{body}'"))?;
    let (mut name, mut password, mut iterations) = (None, None, DEFAULT_ITERATIONS);
    for item in body.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (k, v) = item
            .split_once('=')
            .ok_or_else(|| format!("--add-scram: expected key=value, got '{item}'"))?;
        let v = v.trim().trim_matches('"');
        match k.trim() {
            "name" => name = Some(v.to_string()),
            "password" => password = Some(v.to_string()),
            "iterations" => {
                iterations = v
                    .parse()
                    .map_err(|_| format!("--add-scram: iterations must be a number, not '{v}'"))?
            }
            "salt" | "saltedpassword" => {
                return Err(format!(
                    "--add-scram: '{}' is not supported: give the password",
                    k.trim()
                ))
            }
            other => {
                return Err(format!(
                    "--add-scram: unknown key '{other}' (name, password, iterations)"
                ))
            }
        }
    }
    let name = name
        .filter(|n| !n.is_empty())
        .ok_or("--add-scram needs name=USER")?;
    let password = password
        .filter(|p| !p.is_empty())
        .ok_or("--add-scram needs password=PASSWORD")?;
    if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations) {
        return Err(format!(
            "--add-scram: iterations {iterations} is outside {MIN_ITERATIONS}..={MAX_ITERATIONS}"
        ));
    }
    Ok(AddScram {
        mechanism,
        name,
        password,
        iterations,
    })
}

/// The bootstrap records of the `--add-scram` options (a later one for the same user and
/// mechanism wins, as the records apply in order).
pub(super) fn records(io: &Io, specs: &[String]) -> anyhow::Result<Vec<MetadataRecord>> {
    specs
        .iter()
        .map(|spec| {
            let a = parse(spec).map_err(|e| anyhow::anyhow!(e))?;
            let (salt, salted_password) = salt_password(io, a.mechanism, &a.password, a.iterations);
            Ok(MetadataRecord::UserScramCredential(ScramRecord {
                name: a.name,
                mechanism: a.mechanism,
                salt,
                salted_password,
                iterations: a.iterations,
            }))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_scram_grammar() {
        let ok = |m, n: &str, p: &str, i| {
            Ok(AddScram {
                mechanism: m,
                name: n.into(),
                password: p.into(),
                iterations: i,
            })
        };
        let cases: Vec<(&str, Result<AddScram, String>)> = vec![
            (
                "SCRAM-SHA-256=[name=alice,password=alice-secret]",
                ok(ScramMechanism::Sha256, "alice", "alice-secret", 4096),
            ),
            (
                "SCRAM-SHA-512=[name=\"bob\",password=\"b\",iterations=8192]",
                ok(ScramMechanism::Sha512, "bob", "b", 8192),
            ),
            (
                "SCRAM-SHA-1=[name=a,password=b]",
                Err("--add-scram: unknown SCRAM mechanism 'SCRAM-SHA-1' (SCRAM-SHA-256 or SCRAM-SHA-512)".into()),
            ),
            (
                "SCRAM-SHA-256=[password=b]",
                Err("--add-scram needs name=USER".into()),
            ),
            (
                "SCRAM-SHA-256=[name=a]",
                Err("--add-scram needs password=PASSWORD".into()),
            ),
            (
                "SCRAM-SHA-256=name=a,password=b",
                Err("--add-scram: the value goes in square brackets, got 'name=a,password=b'".into()),
            ),
            (
                "SCRAM-SHA-256=[name=a,password=b,iterations=2]",
                Err("--add-scram: iterations 2 is outside 4096..=16384".into()),
            ),
            (
                "SCRAM-SHA-256=[name=a,salt=c2FsdA==,saltedpassword=x]",
                Err("--add-scram: 'salt' is not supported: give the password".into()),
            ),
            ("alice", Err("--add-scram wants MECHANISM=[name=...,password=...], got 'alice'".into())),
        ];
        for (spec, expected) in cases {
            assert_eq!(parse(spec), expected, "{spec}");
        }
    }
}
