//! Principals from TLS client certificates, as Kafka's `DefaultKafkaPrincipalBuilder` derives
//! them: the subject DN in Java's RFC 2253 form (`X500Principal.getName()`), then
//! `ssl.principal.mapping.rules`. Pure: bytes and strings in, a name out.

use regex::{Captures, Regex};

/// One `ssl.principal.mapping.rules` entry.
#[derive(Clone, Debug)]
enum Rule {
    /// `DEFAULT`: the DN unchanged.
    Default,
    Pattern {
        /// `^(?:pattern)$`: Java's `matches()`, the whole DN.
        whole: Regex,
        /// The pattern as written, for `replaceAll`.
        find: Regex,
        replacement: String,
        case: Case,
    },
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Case {
    Keep,
    Lower,
    Upper,
}

/// `ssl.principal.mapping.rules`, parsed: tried in order, the first whose pattern matches the
/// whole DN names the principal.
#[derive(Clone, Debug)]
pub struct MappingRules {
    rules: Vec<Rule>,
    /// As written (rules compare by it).
    text: String,
}

impl PartialEq for MappingRules {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Default for MappingRules {
    fn default() -> Self {
        MappingRules {
            rules: vec![Rule::Default],
            text: "DEFAULT".into(),
        }
    }
}

impl MappingRules {
    /// Parses Kafka's syntax: `DEFAULT` or `RULE:pattern/replacement/[LU]`, comma-separated (a
    /// pattern may itself hold commas; `\/` is a slash inside a pattern or replacement).
    pub fn parse(text: &str) -> Result<MappingRules, String> {
        let mut rules = Vec::new();
        let mut rest = text.trim();
        while !rest.is_empty() {
            rest = rest.trim_start_matches(|c: char| c == ',' || c.is_whitespace());
            if rest.is_empty() {
                break;
            }
            if let Some(after) = rest.strip_prefix("DEFAULT") {
                rules.push(Rule::Default);
                rest = after;
                continue;
            }
            let Some(after) = rest.strip_prefix("RULE:") else {
                return Err(format!("expected DEFAULT or RULE: at '{rest}'"));
            };
            let (pattern, after) = until_slash(after).ok_or("a rule needs pattern/replacement/")?;
            let (replacement, after) =
                until_slash(after).ok_or("a rule needs pattern/replacement/")?;
            let (case, after) = match after.chars().next() {
                Some('L') => (Case::Lower, &after[1..]),
                Some('U') => (Case::Upper, &after[1..]),
                _ => (Case::Keep, after),
            };
            let compile = |p: &str| {
                Regex::new(p).map_err(|e| {
                    format!("pattern '{pattern}' is not supported (no back-references or lookaround): {e}")
                })
            };
            rules.push(Rule::Pattern {
                whole: compile(&format!("^(?:{pattern})$"))?,
                find: compile(&pattern)?,
                replacement,
                case,
            });
            rest = after;
            if !(rest.is_empty() || rest.starts_with(',') || rest.starts_with(char::is_whitespace))
            {
                return Err(format!("unexpected text after a rule: '{rest}'"));
            }
        }
        if rules.is_empty() {
            return Err("no rules".into());
        }
        Ok(MappingRules {
            rules,
            text: text.to_string(),
        })
    }

    /// The principal name for `dn`, or `None` when no rule matches (Kafka then refuses the
    /// connection).
    pub fn map(&self, dn: &str) -> Option<String> {
        for rule in &self.rules {
            match rule {
                Rule::Default => return Some(dn.to_string()),
                Rule::Pattern {
                    whole,
                    find,
                    replacement,
                    case,
                } => {
                    if !whole.is_match(dn) {
                        continue;
                    }
                    let mapped = find
                        .replace_all(dn, |caps: &Captures| java_expand(caps, replacement))
                        .into_owned();
                    return Some(match case {
                        Case::Keep => mapped,
                        Case::Lower => mapped.to_lowercase(),
                        Case::Upper => mapped.to_uppercase(),
                    });
                }
            }
        }
        None
    }
}

/// Text up to the next unescaped `/` (with `\/` unescaped), and what follows that slash.
fn until_slash(text: &str) -> Option<(String, &str)> {
    let mut out = String::new();
    let mut chars = text.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' if text[i + 1..].starts_with('/') => {
                out.push('/');
                chars.next();
            }
            '/' => return Some((out, &text[i + 1..])),
            c => out.push(c),
        }
    }
    None
}

/// Java's `Matcher.appendReplacement`: `$n` is a group (digits taken while the group exists),
/// `\x` is a literal `x`; a `$n` past the groups stays literal, as Kafka's mapper leaves it.
fn java_expand(caps: &Captures, replacement: &str) -> String {
    let mut out = String::new();
    let bytes = replacement.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' if i + 1 < bytes.len() => {
                let c = replacement[i + 1..].chars().next().unwrap_or('\\');
                out.push(c);
                i += 1 + c.len_utf8();
            }
            b'$' if i + 1 < bytes.len() && bytes[i + 1].is_ascii_digit() => {
                let mut end = i + 2;
                let mut group = (bytes[i + 1] - b'0') as usize;
                while end < bytes.len() && bytes[end].is_ascii_digit() {
                    let longer = group * 10 + (bytes[end] - b'0') as usize;
                    if longer >= caps.len() {
                        break;
                    }
                    group = longer;
                    end += 1;
                }
                match (group < caps.len(), caps.get(group)) {
                    (true, Some(m)) => out.push_str(m.as_str()),
                    (true, None) => {}
                    (false, _) => out.push_str(&replacement[i..end]),
                }
                i = end;
            }
            _ => {
                let c = replacement[i..].chars().next().unwrap_or(' ');
                out.push(c);
                i += c.len_utf8();
            }
        }
    }
    out
}

/// A DER element: its tag, its whole encoding and its content.
struct Der<'a> {
    tag: u8,
    whole: &'a [u8],
    content: &'a [u8],
}

/// The first DER element of `input` and what follows it.
fn der(input: &[u8]) -> Option<(Der<'_>, &[u8])> {
    let tag = *input.first()?;
    let first = *input.get(1)? as usize;
    let (len, header) = if first < 0x80 {
        (first, 2)
    } else {
        let n = first & 0x7f;
        if n == 0 || n > 4 {
            return None;
        }
        let mut len = 0usize;
        for k in 0..n {
            len = (len << 8) | *input.get(2 + k)? as usize;
        }
        (len, 2 + n)
    };
    let end = header.checked_add(len)?;
    let whole = input.get(..end)?;
    Some((
        Der {
            tag,
            whole,
            content: &whole[header..],
        },
        &input[end..],
    ))
}

/// The subject DN of a DER certificate in Java's RFC 2253 form, or `None` if it does not parse.
pub fn subject_dn(cert: &[u8]) -> Option<String> {
    let (certificate, _) = der(cert)?;
    let (tbs, _) = der(certificate.content)?;
    let mut fields = tbs.content;
    let (first, rest) = der(fields)?;
    fields = if first.tag == 0xa0 { rest } else { fields }; // [0] version
    let (_serial, rest) = der(fields)?;
    let (_signature, rest) = der(rest)?;
    let (_issuer, rest) = der(rest)?;
    let (_validity, rest) = der(rest)?;
    let (subject, _) = der(rest)?;
    if subject.tag != 0x30 {
        return None;
    }
    let mut rdns = Vec::new();
    let mut rest = subject.content;
    while !rest.is_empty() {
        let (set, after) = der(rest)?;
        rest = after;
        let mut atvs = Vec::new();
        let mut inner = set.content;
        while !inner.is_empty() {
            let (atv, after) = der(inner)?;
            inner = after;
            let (oid, after_oid) = der(atv.content)?;
            let (value, _) = der(after_oid)?;
            atvs.push(attribute(oid.content, &value));
        }
        rdns.push(atvs.join("+"));
    }
    rdns.reverse();
    Some(rdns.join(","))
}

/// One `type=value`: a keyword Java knows with its string value escaped, else `OID=#hex`.
fn attribute(oid: &[u8], value: &Der<'_>) -> String {
    let keyword = match oid {
        [0x55, 0x04, 0x03] => Some("CN"),
        [0x55, 0x04, 0x06] => Some("C"),
        [0x55, 0x04, 0x07] => Some("L"),
        [0x55, 0x04, 0x08] => Some("ST"),
        [0x55, 0x04, 0x09] => Some("STREET"),
        [0x55, 0x04, 0x0a] => Some("O"),
        [0x55, 0x04, 0x0b] => Some("OU"),
        [0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x19] => Some("DC"),
        [0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x01] => Some("UID"),
        _ => None,
    };
    let text = match value.tag {
        0x0c | 0x13 | 0x16 | 0x14 => std::str::from_utf8(value.content).ok().map(str::to_string),
        0x1e => {
            let units: Vec<u16> = value
                .content
                .chunks_exact(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]))
                .collect();
            String::from_utf16(&units).ok()
        }
        _ => None,
    };
    match (keyword, text) {
        (Some(k), Some(t)) => format!("{k}={}", escape(&t)),
        _ => {
            let hex: String = value.whole.iter().map(|b| format!("{b:02x}")).collect();
            format!("{}=#{hex}", oid_text(oid))
        }
    }
}

fn escape(value: &str) -> String {
    let mut out = String::new();
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        let edge_space = c == ' ' && (i == 0 || i == last);
        if matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';' | '=' | '#') || edge_space {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Dotted form of a DER OID.
fn oid_text(oid: &[u8]) -> String {
    let mut parts: Vec<u64> = Vec::new();
    let mut acc = 0u64;
    for (i, b) in oid.iter().enumerate() {
        acc = (acc << 7) | (b & 0x7f) as u64;
        if b & 0x80 == 0 {
            if parts.is_empty() && i < oid.len() {
                let first = (acc / 40).min(2);
                parts.push(first);
                parts.push(acc - first * 40);
            } else {
                parts.push(acc);
            }
            acc = 0;
        }
    }
    parts
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(".")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_doc_rules() {
        let rules = MappingRules::parse(
            r"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,DEFAULT",
        )
        .unwrap();
        assert_eq!(
            rules.map("CN=serviceuser,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown"),
            Some("serviceuser".into())
        );
        assert_eq!(
            rules.map("CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown"),
            Some("adminuser@admin".into())
        );
        assert_eq!(rules.map("CN=other"), Some("CN=other".into()));
    }

    #[test]
    fn no_match_and_bad_rules() {
        let rules = MappingRules::parse(r"RULE:^CN=([a-z]+)$/$1/U").unwrap();
        assert_eq!(rules.map("CN=alice"), Some("ALICE".into()));
        assert_eq!(rules.map("CN=alice,O=x"), None);
        assert!(MappingRules::parse("RULE:(a)\\1/x/").is_err());
        assert!(MappingRules::parse("NOPE").is_err());
        assert!(MappingRules::parse("RULE:abc").is_err());
        assert!(MappingRules::parse("").is_err());
    }

    #[test]
    fn subject_in_java_form() {
        let mut params = rcgen::CertificateParams::new(vec![]).unwrap();
        let mut dn = rcgen::DistinguishedName::new();
        dn.push(rcgen::DnType::CountryName, "US");
        dn.push(rcgen::DnType::OrganizationName, "Acme, Inc.");
        dn.push(rcgen::DnType::OrganizationalUnitName, "eng");
        dn.push(rcgen::DnType::CommonName, " bob;x=1 ");
        params.distinguished_name = dn;
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        assert_eq!(
            subject_dn(cert.der()).unwrap(),
            r"CN=\ bob\;x\=1\ ,OU=eng,O=Acme\, Inc.,C=US"
        );
        assert_eq!(subject_dn(&cert.der()[..40]), None);
        assert_eq!(subject_dn(b""), None);
    }

    #[test]
    fn unknown_attributes_in_hex() {
        assert_eq!(
            oid_text(&[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x01]),
            "1.2.840.113549.1.9.1"
        );
        let value = [0x0c, 0x03, b'S', b'N', b'1'];
        let (d, _) = der(&value).unwrap();
        assert_eq!(attribute(&[0x55, 0x04, 0x05], &d), "2.5.4.5=#0c03534e31");
    }
}
