//! `SubscribedTopicRegex` (KIP-848): a topic matches when the whole name matches, as Kafka's
//! RE2J `matches()`. The subset of RE2 syntax here: literals, `.`, escapes (`\d \w \s`, their
//! negations, escaped punctuation), classes (`[a-z_]`, `[^.]`), groups (`(…)`, `(?:…)`),
//! alternation, `* + ?` and `{n}`, `{n,}`, `{n,m}` (lazy forms match the same set), and the
//! assertions `^`/`$` anywhere (librdkafka sends `(^prefix.*)`). Anything else is INVALID_REGULAR_EXPRESSION. Matching runs a Thompson NFA, so
//! it is linear in the name's length whatever the pattern: no backtracking blow-up.

/// Bound on a pattern's length and on its compiled program (repeats expand it).
const MAX_PATTERN_LEN: usize = 1000;
const MAX_PROGRAM: usize = 10_000;
const MAX_REPEAT: u32 = 100;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Set {
    Any,
    Ranges {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
}

impl Set {
    fn lit(c: char) -> Set {
        Set::Ranges {
            negated: false,
            ranges: vec![(c, c)],
        }
    }

    fn contains(&self, c: char) -> bool {
        match self {
            Set::Any => c != '\n',
            Set::Ranges { negated, ranges } => {
                ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi) != *negated
            }
        }
    }
}

#[derive(Clone, Debug)]
enum Node {
    Set(Set),
    Concat(Vec<Node>),
    Alt(Vec<Node>),
    Repeat {
        node: Box<Node>,
        min: u32,
        max: Option<u32>,
    },
    /// `^`: only at the start of the name.
    Start,
    /// `$`: only at its end.
    End,
}

#[derive(Clone, Debug)]
enum Inst {
    Char(Set),
    Split(usize, usize),
    Jmp(usize),
    Start,
    End,
    Match,
}

#[derive(Clone, Debug)]
pub struct TopicRegex {
    program: Vec<Inst>,
}

struct Parser<'a> {
    chars: Vec<char>,
    at: usize,
    pattern: &'a str,
}

type Parsed<T> = Result<T, String>;

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn next(&mut self) -> Option<char> {
        let c = self.peek();
        self.at += 1;
        c
    }

    fn fail<T>(&self, why: &str) -> Parsed<T> {
        Err(format!("{why} at {} in {}", self.at, self.pattern))
    }

    fn alt(&mut self) -> Parsed<Node> {
        let mut branches = vec![self.concat()?];
        while self.peek() == Some('|') {
            self.at += 1;
            branches.push(self.concat()?);
        }
        Ok(if branches.len() == 1 {
            branches.pop().unwrap()
        } else {
            Node::Alt(branches)
        })
    }

    fn concat(&mut self) -> Parsed<Node> {
        let mut items = Vec::new();
        while let Some(c) = self.peek() {
            if c == '|' || c == ')' {
                break;
            }
            let atom = self.atom()?;
            items.push(self.quantified(atom)?);
        }
        Ok(Node::Concat(items))
    }

    fn quantified(&mut self, mut node: Node) -> Parsed<Node> {
        loop {
            let (min, max) = match self.peek() {
                Some('*') => (0, None),
                Some('+') => (1, None),
                Some('?') => (0, Some(1)),
                Some('{') => {
                    self.at += 1;
                    let min = self.number()?;
                    let max = match self.next() {
                        Some('}') => Some(min),
                        Some(',') if self.peek() == Some('}') => {
                            self.at += 1;
                            None
                        }
                        Some(',') => {
                            let max = self.number()?;
                            if self.next() != Some('}') {
                                return self.fail("unclosed repeat");
                            }
                            Some(max)
                        }
                        _ => return self.fail("bad repeat"),
                    };
                    if max.is_some_and(|m| m < min) || min > MAX_REPEAT {
                        return self.fail("bad repeat bounds");
                    }
                    self.at -= 1;
                    (min, max)
                }
                _ => return Ok(node),
            };
            self.at += 1;
            if self.peek() == Some('?') {
                self.at += 1; // lazy: the same set of full matches
            }
            node = Node::Repeat {
                node: Box::new(node),
                min,
                max,
            };
        }
    }

    fn number(&mut self) -> Parsed<u32> {
        let start = self.at;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.at += 1;
        }
        let digits: String = self.chars[start..self.at].iter().collect();
        match digits.parse::<u32>() {
            Ok(n) if n <= MAX_REPEAT => Ok(n),
            _ => self.fail("bad repeat count"),
        }
    }

    fn atom(&mut self) -> Parsed<Node> {
        match self.next() {
            Some('(') => {
                if self.peek() == Some('?') {
                    self.at += 1;
                    if self.next() != Some(':') {
                        return self.fail("unsupported group flag");
                    }
                }
                let inner = self.alt()?;
                if self.next() != Some(')') {
                    return self.fail("missing )");
                }
                Ok(inner)
            }
            Some('[') => self.class().map(Node::Set),
            Some('.') => Ok(Node::Set(Set::Any)),
            Some('\\') => self.escape().map(Node::Set),
            Some('^') => Ok(Node::Start),
            Some('$') => Ok(Node::End),
            Some(c @ ('*' | '+' | '?' | '{')) => {
                self.at -= 1;
                self.fail(&format!("unexpected {c}"))
            }
            Some(c) => Ok(Node::Set(Set::lit(c))),
            None => self.fail("unexpected end"),
        }
    }

    fn escape(&mut self) -> Parsed<Set> {
        let class = |negated, ranges: &[(char, char)]| Set::Ranges {
            negated,
            ranges: ranges.to_vec(),
        };
        const DIGIT: &[(char, char)] = &[('0', '9')];
        const WORD: &[(char, char)] = &[('0', '9'), ('A', 'Z'), ('_', '_'), ('a', 'z')];
        const SPACE: &[(char, char)] = &[('\t', '\r'), (' ', ' ')];
        match self.next() {
            Some('d') => Ok(class(false, DIGIT)),
            Some('D') => Ok(class(true, DIGIT)),
            Some('w') => Ok(class(false, WORD)),
            Some('W') => Ok(class(true, WORD)),
            Some('s') => Ok(class(false, SPACE)),
            Some('S') => Ok(class(true, SPACE)),
            Some(c) if c.is_ascii_punctuation() => Ok(Set::lit(c)),
            _ => self.fail("unsupported escape"),
        }
    }

    fn class(&mut self) -> Parsed<Set> {
        let negated = self.peek() == Some('^');
        if negated {
            self.at += 1;
        }
        let mut ranges = Vec::new();
        let mut first = true;
        loop {
            let lo = match self.next() {
                None => return self.fail("missing ]"),
                Some(']') if !first => break,
                Some('\\') => match self.escape()? {
                    Set::Ranges {
                        negated: false,
                        ranges: r,
                    } if r.len() == 1 && r[0].0 == r[0].1 => r[0].0,
                    Set::Ranges {
                        negated: false,
                        ranges: r,
                    } => {
                        ranges.extend(r);
                        first = false;
                        continue;
                    }
                    _ => return self.fail("negated escape in a class"),
                },
                Some(c) => c,
            };
            first = false;
            if self.peek() == Some('-') && self.chars.get(self.at + 1).is_some_and(|&c| c != ']') {
                self.at += 1;
                let hi = match self.next() {
                    Some('\\') => match self.escape()? {
                        Set::Ranges { ranges: r, .. } if r.len() == 1 && r[0].0 == r[0].1 => r[0].0,
                        _ => return self.fail("bad class range"),
                    },
                    Some(c) => c,
                    None => return self.fail("missing ]"),
                };
                if hi < lo {
                    return self.fail("bad class range");
                }
                ranges.push((lo, hi));
            } else {
                ranges.push((lo, lo));
            }
        }
        Ok(Set::Ranges { negated, ranges })
    }
}

fn compile(node: &Node, program: &mut Vec<Inst>) -> Parsed<()> {
    if program.len() > MAX_PROGRAM {
        return Err("the regular expression is too large".to_string());
    }
    match node {
        Node::Set(set) => program.push(Inst::Char(set.clone())),
        Node::Start => program.push(Inst::Start),
        Node::End => program.push(Inst::End),
        Node::Concat(items) => {
            for item in items {
                compile(item, program)?;
            }
        }
        Node::Alt(branches) => {
            // split L1, next; L1: branch; jmp end; next: ... (the last branch falls through)
            let mut jumps = Vec::new();
            for (i, branch) in branches.iter().enumerate() {
                if i + 1 < branches.len() {
                    let split = program.len();
                    program.push(Inst::Split(split + 1, 0));
                    compile(branch, program)?;
                    jumps.push(program.len());
                    program.push(Inst::Jmp(0));
                    let next = program.len();
                    program[split] = Inst::Split(split + 1, next);
                } else {
                    compile(branch, program)?;
                }
            }
            let end = program.len();
            for j in jumps {
                program[j] = Inst::Jmp(end);
            }
        }
        Node::Repeat { node, min, max } => {
            for _ in 0..*min {
                compile(node, program)?;
            }
            match max {
                None => {
                    let split = program.len();
                    program.push(Inst::Split(split + 1, 0));
                    compile(node, program)?;
                    program.push(Inst::Jmp(split));
                    let end = program.len();
                    program[split] = Inst::Split(split + 1, end);
                }
                Some(max) => {
                    let mut splits = Vec::new();
                    for _ in *min..*max {
                        splits.push(program.len());
                        program.push(Inst::Split(0, 0));
                        compile(node, program)?;
                    }
                    let end = program.len();
                    for s in splits {
                        program[s] = Inst::Split(s + 1, end);
                    }
                }
            }
        }
    }
    Ok(())
}

impl TopicRegex {
    pub fn parse(pattern: &str) -> Result<TopicRegex, String> {
        if pattern.len() > MAX_PATTERN_LEN {
            return Err("the regular expression is too long".to_string());
        }
        let mut p = Parser {
            chars: pattern.chars().collect(),
            at: 0,
            pattern,
        };
        let node = p.alt()?;
        if p.at < p.chars.len() {
            return p.fail("unbalanced )");
        }
        let mut program = Vec::new();
        compile(&node, &mut program)?;
        program.push(Inst::Match);
        Ok(TopicRegex { program })
    }

    /// Adds `pc` and everything reachable from it without reading a character, at character
    /// `pos` of a name `len` characters long.
    fn add(&self, list: &mut Vec<usize>, seen: &mut [bool], pc: usize, pos: usize, len: usize) {
        // An explicit stack: the closure is bounded by the program size.
        let mut stack = vec![pc];
        while let Some(pc) = stack.pop() {
            if std::mem::replace(&mut seen[pc], true) {
                continue;
            }
            match self.program[pc] {
                Inst::Jmp(to) => stack.push(to),
                Inst::Start if pos == 0 => stack.push(pc + 1),
                Inst::End if pos == len => stack.push(pc + 1),
                Inst::Start | Inst::End => {}
                Inst::Split(a, b) => {
                    stack.push(b);
                    stack.push(a);
                }
                Inst::Char(_) | Inst::Match => list.push(pc),
            }
        }
    }

    /// Whether the whole of `name` matches.
    pub fn matches(&self, name: &str) -> bool {
        let n = self.program.len();
        let len = name.chars().count();
        let mut current = Vec::new();
        let mut seen = vec![false; n];
        self.add(&mut current, &mut seen, 0, 0, len);
        for (i, c) in name.chars().enumerate() {
            let mut next = Vec::new();
            let mut seen = vec![false; n];
            for &pc in &current {
                if let Inst::Char(set) = &self.program[pc] {
                    if set.contains(c) {
                        self.add(&mut next, &mut seen, pc + 1, i + 1, len);
                    }
                }
            }
            if next.is_empty() {
                return false;
            }
            current = next;
        }
        current
            .iter()
            .any(|&pc| matches!(self.program[pc], Inst::Match))
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
    }

    #[test]
    fn unsupported_or_broken_patterns_are_refused() {
        for bad in [
            "(", "a)", "[a", "*a", "a{2,1}", "a{1000}", "(?i)a", "\\p{L}",
        ] {
            assert!(TopicRegex::parse(bad).is_err(), "{bad}");
        }
    }
}
