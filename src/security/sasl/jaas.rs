//! The part of a JAAS entry (`sasl.jaas.config`) Kafka's PLAIN server reads:
//! `<LoginModule> required key="value" ...;`. Only `user_<name>` options matter to the broker
//! (its own `username`/`password` are for outbound connections).

use std::collections::BTreeMap;

/// The options of one JAAS entry.
pub fn options(text: &str) -> Result<BTreeMap<String, String>, String> {
    let text = text.trim();
    let body = text
        .strip_suffix(';')
        .ok_or("a JAAS entry must end with ';'")?;
    let mut words = body.trim_start();
    let module_end = words
        .find(char::is_whitespace)
        .ok_or("no login module flag")?;
    words = words[module_end..].trim_start();
    let flag_end = words.find(char::is_whitespace).unwrap_or(words.len());
    let flag = &words[..flag_end];
    if !["required", "requisite", "sufficient", "optional"].contains(&flag) {
        return Err(format!("unknown JAAS control flag '{flag}'"));
    }
    let mut rest = words[flag_end..].trim_start();
    let mut out = BTreeMap::new();
    while !rest.is_empty() {
        let (key, after) = rest.split_once('=').ok_or("expected key=value")?;
        let key = key.trim();
        if key.is_empty() || key.contains(char::is_whitespace) {
            return Err(format!("bad JAAS option name '{key}'"));
        }
        let after = after.trim_start();
        let (value, after) = match after.strip_prefix('"') {
            Some(quoted) => {
                let end = quoted.find('"').ok_or("unterminated quoted value")?;
                (quoted[..end].to_string(), &quoted[end + 1..])
            }
            None => {
                let end = after.find(char::is_whitespace).unwrap_or(after.len());
                (after[..end].to_string(), &after[end..])
            }
        };
        out.insert(key.to_string(), value);
        rest = after.trim_start();
    }
    Ok(out)
}

/// The PLAIN users (`user_<name>="<password>"`) of a JAAS entry.
pub fn plain_users(text: &str) -> Result<BTreeMap<String, String>, String> {
    Ok(options(text)?
        .into_iter()
        .filter_map(|(k, v)| Some((k.strip_prefix("user_")?.to_string(), v)))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_doc_entry() {
        let users = plain_users(
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice secret";"#,
        )
        .unwrap();
        assert_eq!(users.len(), 2);
        assert_eq!(users["alice"], "alice secret");
        assert!(plain_users("x required a=\"b\"").is_err());
        assert!(plain_users("x maybe a=b;").is_err());
        assert!(plain_users("x required a=\"b;").is_err());
    }
}
