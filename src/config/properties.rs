//! Java `.properties` syntax, as `java.util.Properties.load` reads it, because that is what
//! Kafka uses for `server.properties` and what its users' files rely on.

use std::collections::BTreeMap;

use super::ConfigError;

/// Parses `.properties` text into a map; a key given twice keeps its last value.
///
/// Follows `java.util.Properties.load`: lines whose first non-blank character is `#` or `!` are
/// comments; the key ends at the first unescaped `=`, `:` or blank, and one `=`/`:` after blanks
/// also separates; an odd number of trailing backslashes joins the next line (minus its leading
/// blanks); `\t \n \r \f \uXXXX` are escapes and a backslash before any other character stands
/// for that character. Unlike Java, unescaped trailing blanks of a value are dropped: Kafka trims
/// every value it parses, and invisible trailing spaces should not make `PLAINTEXT ` a different
/// listener name from `PLAINTEXT`.
pub fn parse_properties(text: &str) -> Result<BTreeMap<String, String>, ConfigError> {
    let lines = natural_lines(text);
    let mut map = BTreeMap::new();
    let mut i = 0;
    while i < lines.len() {
        let line_no = i + 1;
        let first = lines[i].trim_start_matches(is_blank);
        i += 1;
        // Comment lines are never continued, even when they end in a backslash (as in Java).
        if first.is_empty() || first.starts_with('#') || first.starts_with('!') {
            continue;
        }
        let mut logical = String::new();
        let mut segment = first;
        loop {
            if trailing_backslashes(segment).is_multiple_of(2) {
                logical.push_str(segment);
                break;
            }
            logical.push_str(&segment[..segment.len() - 1]);
            // A continuation at end of input just drops the backslash, as Java does.
            let Some(next) = lines.get(i) else { break };
            i += 1;
            segment = next.trim_start_matches(is_blank);
        }
        let (key, value) = split_entry(&logical, line_no)?;
        map.insert(key, value);
    }
    Ok(map)
}

/// The "white space" of the properties format (line terminators are handled separately).
fn is_blank(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\u{c}')
}

/// Splits on `\n`, `\r` and `\r\n`, like Java's line reader.
fn natural_lines(text: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let bytes = text.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\n' => {
                lines.push(&text[start..i]);
                i += 1;
                start = i;
            }
            b'\r' => {
                lines.push(&text[start..i]);
                i += if bytes.get(i + 1) == Some(&b'\n') {
                    2
                } else {
                    1
                };
                start = i;
            }
            _ => i += 1,
        }
    }
    if start < text.len() {
        lines.push(&text[start..]);
    }
    lines
}

fn trailing_backslashes(s: &str) -> usize {
    s.bytes().rev().take_while(|&b| b == b'\\').count()
}

/// Splits a logical line into its unescaped key and value.
fn split_entry(line: &str, line_no: usize) -> Result<(String, String), ConfigError> {
    let chars: Vec<char> = line.chars().collect();
    let mut key_end = chars.len();
    let mut has_separator = false;
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            '=' | ':' => {
                key_end = i;
                has_separator = true;
                break;
            }
            c if is_blank(c) => {
                key_end = i;
                break;
            }
            _ => i += 1,
        }
    }
    let key_end = key_end.min(chars.len());
    let mut value_start = if has_separator { key_end + 1 } else { key_end };
    while value_start < chars.len() {
        let c = chars[value_start];
        if is_blank(c) {
            value_start += 1;
        } else if !has_separator && (c == '=' || c == ':') {
            has_separator = true;
            value_start += 1;
        } else {
            break;
        }
    }
    let key = unescape(&chars[..key_end], line_no)?;
    let value = unescape(&chars[value_start.min(chars.len())..], line_no)?;
    Ok((key, value))
}

/// Resolves escapes and drops unescaped trailing blanks.
fn unescape(chars: &[char], line_no: usize) -> Result<String, ConfigError> {
    let syntax = |reason: &str| ConfigError::Syntax {
        line: line_no,
        reason: reason.to_string(),
    };
    let mut out = String::with_capacity(chars.len());
    // Length of `out` up to its last character that is not an unescaped blank.
    let mut keep = 0;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        if c != '\\' {
            out.push(c);
            if !is_blank(c) {
                keep = out.len();
            }
            continue;
        }
        let Some(&e) = chars.get(i) else { break };
        i += 1;
        let decoded = match e {
            't' => '\t',
            'n' => '\n',
            'r' => '\r',
            'f' => '\u{c}',
            'u' => {
                let high = hex4(chars, i).ok_or_else(|| syntax("malformed \\uXXXX escape"))?;
                i += 4;
                match high {
                    0xD800..=0xDBFF => {
                        // Java strings are UTF-16, so characters beyond the BMP arrive as a pair.
                        let low = if chars.get(i) == Some(&'\\') && chars.get(i + 1) == Some(&'u') {
                            hex4(chars, i + 2).filter(|l| (0xDC00..=0xDFFF).contains(l))
                        } else {
                            None
                        };
                        let low =
                            low.ok_or_else(|| syntax("unpaired UTF-16 surrogate in \\u escape"))?;
                        i += 6;
                        let code = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
                        char::from_u32(code).ok_or_else(|| syntax("invalid \\u escape"))?
                    }
                    _ => char::from_u32(high)
                        .ok_or_else(|| syntax("unpaired UTF-16 surrogate in \\u escape"))?,
                }
            }
            other => other,
        };
        out.push(decoded);
        keep = out.len();
    }
    out.truncate(keep);
    Ok(out)
}

fn hex4(chars: &[char], at: usize) -> Option<u32> {
    let digits = chars.get(at..at + 4)?;
    digits
        .iter()
        .try_fold(0u32, |acc, c| Some(acc * 16 + c.to_digit(16)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> BTreeMap<String, String> {
        parse_properties(text).unwrap()
    }

    fn one(text: &str) -> (String, String) {
        let map = parse(text);
        assert_eq!(map.len(), 1, "{map:?}");
        map.into_iter().next().unwrap()
    }

    fn kv(k: &str, v: &str) -> (String, String) {
        (k.to_string(), v.to_string())
    }

    #[test]
    fn separators_and_whitespace() {
        assert_eq!(one("a=b"), kv("a", "b"));
        assert_eq!(one("a:b"), kv("a", "b"));
        assert_eq!(one("a b"), kv("a", "b"));
        assert_eq!(one("  a  =  b  "), kv("a", "b"));
        assert_eq!(one("\ta\t:\tb"), kv("a", "b"));
        assert_eq!(one("a \t b c"), kv("a", "b c"));
        assert_eq!(one("a = = b"), kv("a", "= b"));
        assert_eq!(one("a==b"), kv("a", "=b"));
        assert_eq!(one("a=b=c:d"), kv("a", "b=c:d"));
        assert_eq!(one("a"), kv("a", ""));
        assert_eq!(one("a="), kv("a", ""));
        assert_eq!(one("a   "), kv("a", ""));
        assert_eq!(one("=b"), kv("", "b"));
        assert_eq!(
            one("listeners=PLAINTEXT://:9092"),
            kv("listeners", "PLAINTEXT://:9092")
        );
    }

    #[test]
    fn comments_and_blank_lines() {
        let map = parse("# c\n! c\n   # indented\n\n   \n\t\na=1\n#b=2\nc=3 # not a comment\n");
        assert_eq!(map.len(), 2);
        assert_eq!(map["a"], "1");
        assert_eq!(map["c"], "3 # not a comment");
        assert!(parse("").is_empty());
        assert!(parse("\n\n\r\n").is_empty());
        // A comment ending in a backslash does not swallow the next line.
        assert_eq!(parse("# comment \\\na=1")["a"], "1");
    }

    #[test]
    fn later_keys_override() {
        assert_eq!(parse("a=1\na=2\nb=3\na=4")["a"], "4");
    }

    #[test]
    fn line_endings() {
        let map = parse("a=1\r\nb=2\rc=3\nd=4");
        assert_eq!(map.len(), 4);
        assert_eq!(map["b"], "2");
        assert_eq!(map["d"], "4");
    }

    #[test]
    fn continuation() {
        assert_eq!(
            one("a=one,\\\n    two,\\\n\tthree"),
            kv("a", "one,two,three")
        );
        assert_eq!(one("a=x\\\r\n  y"), kv("a", "xy"));
        // An even number of backslashes is an escaped backslash, not a continuation.
        assert_eq!(
            parse("a=x\\\\\nb=y"),
            BTreeMap::from([kv("a", "x\\"), kv("b", "y")])
        );
        // Three: escaped backslash plus continuation.
        assert_eq!(one("a=x\\\\\\\ny"), kv("a", "x\\y"));
        // The continued line is not a comment even if it starts with '#'.
        assert_eq!(one("a=x\\\n  #y"), kv("a", "x#y"));
        // An empty continuation line ends the logical line.
        assert_eq!(
            parse("a=x\\\n\nb=y"),
            BTreeMap::from([kv("a", "x"), kv("b", "y")])
        );
        // Continuation at end of input.
        assert_eq!(one("a=x\\"), kv("a", "x"));
        // The key itself may be continued.
        assert_eq!(one("log.\\\n  dirs=/d"), kv("log.dirs", "/d"));
    }

    #[test]
    fn escapes() {
        assert_eq!(one(r"a=x\\y"), kv("a", r"x\y"));
        assert_eq!(one(r"a=x\ty\nz\rw\f"), kv("a", "x\ty\nz\rw\u{c}"));
        assert_eq!(one(r"a=\u0041\u00e9\u20AC"), kv("a", "Aé€"));
        assert_eq!(one(r"a=\uD83D\uDE00"), kv("a", "😀"));
        assert_eq!(one(r"a\=b\:c\ d=e"), kv("a=b:c d", "e"));
        assert_eq!(one(r"a=\q\#"), kv("a", "q#"));
        // Escaped trailing blanks survive the trim, unescaped ones do not.
        assert_eq!(one("a=x\\ \t "), kv("a", "x "));
        assert_eq!(one("a=\\  x"), kv("a", "  x"));
        assert_eq!(one("a=é ü"), kv("a", "é ü"));
    }

    #[test]
    fn malformed_unicode_escapes() {
        for (text, line) in [
            ("a=\\u12", 1),
            ("x=1\na=\\u12G4", 2),
            ("a=\\u", 1),
            ("a=\\uD83D", 1),
            ("a=\\uD83Dx", 1),
            ("a=\\uD83D\\u0041", 1),
            ("a=\\uDE00", 1),
            ("#\n\n b=1\\\n  \\uZZZZ", 3),
            ("\\u00=1", 1),
        ] {
            match parse_properties(text) {
                Err(ConfigError::Syntax { line: l, .. }) => assert_eq!(l, line, "{text:?}"),
                other => panic!("{text:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn odd_inputs_do_not_panic() {
        for text in [
            "\\",
            "\\\\",
            "=",
            ":",
            " = ",
            "\\\n",
            "\u{0}",
            "a=\\\u{0}",
            "é=ü\\",
            "\\é",
            "\\uéééé",
            "\r",
            "\r\r\n\\\r",
            "a\\",
            "\\\\\\",
            "\\u00e",
            "!",
            "#\\",
        ] {
            let _ = parse_properties(text);
        }
    }
}
