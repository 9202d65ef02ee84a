//! `SubscribedTopicRegex` (KIP-848): a topic matches when the whole name matches, as Kafka's
//! RE2J `matches()`. The `regex` crate speaks RE2's syntax and, like RE2J, matches in time
//! linear in the name whatever the pattern (no backtracking blow-up); a pattern it refuses, or
//! one that would compile too large, is INVALID_REGULAR_EXPRESSION. librdkafka sends the
//! pattern wrapped as `(^prefix.*)`: `^` and `$` may appear anywhere.

/// Bounds on a pattern's length and on its compiled size (repeats expand it).
const MAX_PATTERN_LEN: usize = 1000;
const MAX_COMPILED_BYTES: usize = 1 << 20;

#[derive(Clone, Debug)]
pub struct TopicRegex {
    /// The pattern anchored at both ends: RE2J's `matches()` is a whole-name match.
    whole: ::regex::Regex,
}

impl TopicRegex {
    pub fn parse(pattern: &str) -> Result<TopicRegex, String> {
        if pattern.len() > MAX_PATTERN_LEN {
            return Err("the regular expression is too long".to_string());
        }
        let whole = ::regex::RegexBuilder::new(&format!("^(?:{pattern})$"))
            .size_limit(MAX_COMPILED_BYTES)
            .build()
            .map_err(|e| format!("invalid regular expression '{pattern}': {e}"))?;
        Ok(TopicRegex { whole })
    }

    /// Whether the whole of `name` matches.
    pub fn matches(&self, name: &str) -> bool {
        self.whole.is_match(name)
    }
}

#[cfg(test)]
mod tests {
    use super::TopicRegex;

    fn m(pattern: &str, name: &str) -> bool {
        TopicRegex::parse(pattern).unwrap().matches(name)
    }

    #[test]
    fn whole_names_match() {
        assert!(m("^orders.*", "orders-eu"));
        assert!(m("orders.*", "orders"));
        assert!(!m("orders", "orders-eu"), "matches() is a full match");
        assert!(m("a|b|cd", "cd"));
        assert!(!m("a|b|cd", "c"));
        assert!(
            !m("a|b", "ab"),
            "the anchors hold around the whole alternation"
        );
        assert!(m("(?:eu|us)-[0-9]{2,3}$", "eu-042"));
        assert!(!m("(eu|us)-[0-9]{2,3}", "eu-0423"));
        assert!(m("t\\.\\d+", "t.15"));
        assert!(!m("t\\.\\d+", "tx15"));
        assert!(m("[^_].*", "a_"));
        assert!(!m("[^_].*", "_a"));
        assert!(m("x[a-c_-]?y", "x-y"));
        assert!(m("(a*)*b", "aaab"));
        assert!(!m("(a*)*b", &"a".repeat(200)), "no backtracking blow-up");
        assert!(m("\\w+", "Topic_9"));
        // librdkafka wraps the pattern: `(^re-.*)`.
        assert!(m("(^re-.*)", "re-a"));
        assert!(!m("(^re-.*)", "xre-a"));
        assert!(!m("a^b", "ab"), "^ inside can never hold");
        assert!(m("(a$|ab)", "ab"));
        // RE2 syntax RE2J also takes: flags and Unicode classes.
        assert!(m("(?i)orders", "ORDERS"));
        assert!(m("\\p{L}+", "topic"));
    }

    #[test]
    fn broken_or_oversized_patterns_are_refused() {
        for bad in ["(", "a)", "[a", "*a", "a{2,1}", "(?<", "\\"] {
            assert!(TopicRegex::parse(bad).is_err(), "{bad}");
        }
        assert!(TopicRegex::parse(&"a".repeat(1001)).is_err());
        // Nested repeats expand past the compiled-size bound.
        assert!(TopicRegex::parse("((a{100}){100}){100}").is_err());
    }
}
