//! The metric names and label names a PromQL expression refers to, for checking a Grafana
//! dashboard against what the server exports.
//!
//! A scanner, not a parser: it finds every series selector (`name`, `name{...}`,
//! `{__name__="name",...}`) and every label list after `by`, `without`, `on`, `ignoring`,
//! `group_left` and `group_right`. An identifier followed by `(` is a function or an
//! aggregation; keywords (`and`, `offset`, ...), numbers and durations, strings, range
//! brackets and Grafana's `$variables` are skipped. It does not check that the expression
//! would evaluate; Prometheus does that.

/// One series selector: its metric and its label matchers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selector {
    pub metric: String,
    /// `(label, operator, value)` for each matcher, `__name__` left out.
    pub matchers: Vec<(String, String, String)>,
}

/// What an expression refers to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Refs {
    pub selectors: Vec<Selector>,
    /// Labels named in `by (...)`, `on (...)` and the like, in order.
    pub grouping: Vec<String>,
}

impl Refs {
    /// The metric of each selector, in order.
    pub fn metrics(&self) -> Vec<&str> {
        self.selectors.iter().map(|s| s.metric.as_str()).collect()
    }
}

/// Words that are PromQL's own, never a metric, even when no `(` follows.
const KEYWORDS: [&str; 14] = [
    "and",
    "or",
    "unless",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "offset",
    "bool",
    "atan2",
    "inf",
    "nan",
];

/// The keywords a parenthesised list of label names may follow.
const GROUPING: [&str; 6] = [
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

struct Scanner<'a> {
    chars: Vec<char>,
    at: usize,
    expr: &'a str,
}

impl Scanner<'_> {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn skip_space(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.at += 1;
        }
    }

    fn error(&self, what: &str) -> String {
        format!("{what} at character {} of `{}`", self.at, self.expr)
    }

    fn identifier(&mut self) -> String {
        let start = self.at;
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
        {
            self.at += 1;
        }
        self.chars[start..self.at].iter().collect()
    }

    /// A quoted string starting at the current quote, without its quotes, escapes kept.
    fn string(&mut self) -> Result<String, String> {
        let quote = self.peek().unwrap();
        let start = self.at;
        self.at += 1;
        while let Some(c) = self.peek() {
            self.at += 1;
            if c == '\\' && quote != '`' {
                self.at += 1;
            } else if c == quote {
                return Ok(self.chars[start + 1..self.at - 1].iter().collect());
            }
        }
        self.at = start;
        Err(self.error("an unterminated string"))
    }

    /// Skips from an opening `open` to its matching `close`.
    fn skip_past(&mut self, open: char, close: char) -> Result<(), String> {
        let start = self.at;
        let mut depth = 0;
        while let Some(c) = self.peek() {
            if c == '"' || c == '\'' || c == '`' {
                self.string()?;
                continue;
            }
            self.at += 1;
            if c == open {
                depth += 1;
            } else if c == close {
                depth -= 1;
                if depth == 0 {
                    return Ok(());
                }
            }
        }
        self.at = start;
        Err(self.error(&format!("a `{open}` never closed")))
    }

    /// `{a="x", b=~"y"}` from its `{`: the matchers in order.
    fn matchers(&mut self) -> Result<Vec<(String, String, String)>, String> {
        self.at += 1;
        let mut out = Vec::new();
        loop {
            self.skip_space();
            match self.peek() {
                Some('}') => {
                    self.at += 1;
                    return Ok(out);
                }
                Some(c) if c.is_ascii_alphabetic() || c == '_' => {}
                _ => return Err(self.error("a label name expected")),
            }
            let label = self.identifier();
            self.skip_space();
            let op = ["=~", "!~", "!=", "="]
                .into_iter()
                .find(|op| {
                    op.chars()
                        .enumerate()
                        .all(|(i, c)| self.chars.get(self.at + i) == Some(&c))
                })
                .ok_or_else(|| self.error("a matcher operator expected"))?;
            self.at += op.len();
            self.skip_space();
            if !matches!(self.peek(), Some('"' | '\'' | '`')) {
                return Err(self.error("a quoted label value expected"));
            }
            let value = self.string()?;
            out.push((label, op.to_string(), value));
            self.skip_space();
            match self.peek() {
                Some(',') => self.at += 1,
                Some('}') => {}
                _ => return Err(self.error("`,` or `}` expected")),
            }
        }
    }

    /// `(a, b)` from its `(`: the label names.
    fn label_list(&mut self) -> Result<Vec<String>, String> {
        self.at += 1;
        let mut out = Vec::new();
        loop {
            self.skip_space();
            match self.peek() {
                Some(')') => {
                    self.at += 1;
                    return Ok(out);
                }
                Some(',') => self.at += 1,
                Some(c) if c.is_ascii_alphabetic() || c == '_' => out.push(self.identifier()),
                _ => return Err(self.error("a label name expected")),
            }
        }
    }
}

/// The selectors and grouping labels of `expr`, or where it could not be scanned.
pub fn refs(expr: &str) -> Result<Refs, String> {
    let mut s = Scanner {
        chars: expr.chars().collect(),
        at: 0,
        expr,
    };
    let mut out = Refs::default();
    while let Some(c) = s.peek() {
        match c {
            c if c.is_whitespace() => s.at += 1,
            '#' => {
                while s.peek().is_some_and(|c| c != '\n') {
                    s.at += 1;
                }
            }
            '"' | '\'' | '`' => {
                s.string()?;
            }
            '[' => s.skip_past('[', ']')?,
            '{' => {
                let matchers = s.matchers()?;
                let metric = matchers
                    .iter()
                    .find(|(l, op, _)| l == "__name__" && op == "=")
                    .map(|(_, _, v)| v.clone())
                    .ok_or_else(|| s.error("a selector without a metric name"))?;
                out.selectors.push(Selector {
                    metric,
                    matchers: matchers.into_iter().filter(|m| m.0 != "__name__").collect(),
                });
            }
            '$' => {
                // A Grafana variable: `$name` or `${name}` / `${name:format}`.
                s.at += 1;
                if s.peek() == Some('{') {
                    s.skip_past('{', '}')?;
                } else {
                    s.identifier();
                }
            }
            c if c.is_ascii_digit()
                || (c == '.' && s.chars.get(s.at + 1).is_some_and(char::is_ascii_digit)) =>
            {
                // A number, a duration (5m30s) or hex (0x1f); a decimal exponent may carry
                // a sign.
                let start = s.at;
                let hex = matches!(s.chars.get(start + 1), Some('x' | 'X'));
                while let Some(c) = s.peek() {
                    let exponent_sign = (c == '+' || c == '-')
                        && !hex
                        && matches!(s.chars.get(s.at - 1), Some('e' | 'E'));
                    if c.is_ascii_alphanumeric() || c == '.' || c == '_' || exponent_sign {
                        s.at += 1;
                    } else {
                        break;
                    }
                }
            }
            c if c.is_ascii_alphabetic() || c == '_' || c == ':' => {
                let word = s.identifier();
                let lower = word.to_ascii_lowercase();
                s.skip_space();
                let paren = s.peek() == Some('(');
                // `sum by (le) (...)`: an aggregation whose grouping comes before its body.
                let grouped = {
                    let at = s.at;
                    let next = s.identifier().to_ascii_lowercase();
                    s.at = at;
                    next == "by" || next == "without"
                };
                if GROUPING.contains(&lower.as_str()) {
                    if paren {
                        out.grouping.extend(s.label_list()?);
                    }
                } else if paren || grouped || KEYWORDS.contains(&lower.as_str()) {
                    // A function or aggregation call; its `(` is read next as punctuation.
                } else {
                    let matchers = if s.peek() == Some('{') {
                        s.matchers()?
                    } else {
                        Vec::new()
                    };
                    out.selectors.push(Selector {
                        metric: word,
                        matchers,
                    });
                }
            }
            '(' | ')' | ',' | '+' | '-' | '*' | '/' | '%' | '^' | '=' | '!' | '<' | '>' | '@' => {
                s.at += 1
            }
            _ => return Err(s.error(&format!("unexpected `{c}`"))),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metrics(expr: &str) -> Vec<String> {
        refs(expr)
            .unwrap()
            .metrics()
            .into_iter()
            .map(String::from)
            .collect()
    }

    #[test]
    fn a_bare_metric_is_one_selector() {
        let r = refs("tickforge_ticks_total").unwrap();
        assert_eq!(
            r.selectors,
            [Selector {
                metric: "tickforge_ticks_total".into(),
                matchers: vec![]
            }]
        );
        assert!(r.grouping.is_empty());
    }

    #[test]
    fn functions_aggregations_and_grouping_labels_are_not_metrics() {
        let r = refs(
            r#"histogram_quantile(0.99, sum by (le, category) (rate(tickforge_frame_seconds_bucket{instance=~"$instance", le!="+Inf"}[$__rate_interval])))"#,
        )
        .unwrap();
        assert_eq!(r.metrics(), ["tickforge_frame_seconds_bucket"]);
        assert_eq!(
            r.selectors[0].matchers,
            [
                ("instance".into(), "=~".into(), "$instance".into()),
                ("le".into(), "!=".into(), "+Inf".into())
            ]
        );
        assert_eq!(r.grouping, ["le", "category"]);
        // The grouping clause after the body, and upper-case aggregations.
        let r = refs("SUM(rate(a[1m])) BY (le)").unwrap();
        assert_eq!(r.metrics(), ["a"]);
        assert_eq!(r.grouping, ["le"]);
    }

    #[test]
    fn both_sides_of_binary_operators_and_vector_matching() {
        let r = refs("a / on (instance) group_left (x) b and c or d unless e").unwrap();
        assert_eq!(r.metrics(), ["a", "b", "c", "d", "e"]);
        assert_eq!(r.grouping, ["instance", "x"]);
        assert_eq!(metrics("a > bool 3 * -b"), ["a", "b"]);
        assert_eq!(metrics("a * ignoring (code) group_right b"), ["a", "b"]);
    }

    #[test]
    fn strings_numbers_durations_and_modifiers_are_skipped() {
        assert_eq!(
            metrics(r#"label_replace(up, "dst", "tickforge_fake $1", "src", "(.*)")"#),
            ["up"]
        );
        assert_eq!(metrics("1e-3 * a + 0x1f + .5 - Inf + NaN + 2E+3"), ["a"]);
        assert_eq!(metrics("rate(a[5m:30s] offset 1h)"), ["a"]);
        assert_eq!(metrics("a @ start() + b @ 1609746000"), ["a", "b"]);
        assert_eq!(metrics("a # b is a comment\n+ c"), ["a", "c"]);
        assert_eq!(metrics("topk($k, a) / ${scale}"), ["a"]);
        assert_eq!(metrics("recorded:rate5m"), ["recorded:rate5m"]);
    }

    #[test]
    fn a_name_matcher_names_the_metric() {
        let r = refs(r#"{__name__="tickforge_matches", job="gs"}"#).unwrap();
        assert_eq!(r.metrics(), ["tickforge_matches"]);
        assert_eq!(
            r.selectors[0].matchers,
            [("job".into(), "=".into(), "gs".into())]
        );
    }

    #[test]
    fn what_cannot_be_scanned_is_an_error() {
        for bad in [
            r#"a{job="x""#,
            r#"a{job}"#,
            r#"a{job=x}"#,
            r#"{job="x"}"#,
            r#"rate(a[5m)"#,
            r#"label_replace(a, "x)"#,
            "sum by (1) (a)",
            "a ; b",
        ] {
            assert!(refs(bad).is_err(), "{bad} scanned");
        }
    }
}
