//! Reading the operands of one line of test code: bracket contents, top-level splits and a
//! normal form, so a detector can tell that an assertion compares an expression with itself.
//! Lexical only: string literals (`'`, `"`, `` ` ``) and brackets are tracked, nothing else.

use serde::{Deserialize, Serialize};

use crate::languages::Language;

/// Where a `same-operands` rule reads the two operands, after its `pattern` match.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Operands {
    /// The match ends at an opening bracket: the call's arguments, after `skip_arguments`
    /// leading ones, the next two compared (`assertEqual(a, b)`, `assert.Equal(t, a, b)`).
    Arguments,
    /// The expression after the match (the bracket's first argument when the match ends at
    /// one, else the rest of the line up to a top-level `,`, or a Go `if`'s ` {`), split at
    /// the first top-level operator of `operators` (`assert a == b`, `if got != want {`).
    Comparison,
    /// The match ends at an opening bracket holding the first operand; `after` matches right
    /// after its closing bracket and ends at the bracket holding the second
    /// (`expect(a).toBe(b)`).
    Chain,
}

/// Byte offsets of `text` at bracket depth 0 outside string literals.
fn top_level(text: &str) -> Vec<(usize, char)> {
    let mut out = Vec::new();
    let mut depth: i32 = 0;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '\'' | '"' | '`' => {
                if depth == 0 {
                    out.push((i, c));
                }
                quote = Some(c);
            }
            '(' | '[' | '{' => {
                if depth == 0 {
                    out.push((i, c));
                }
                depth += 1;
            }
            ')' | ']' | '}' => {
                depth -= 1;
                if depth < 0 {
                    // The closing bracket of an enclosing expression: stop here.
                    out.push((i, c));
                    return out;
                }
            }
            _ if depth == 0 => out.push((i, c)),
            _ => {}
        }
    }
    out
}

/// The contents of the bracket opened just before `text`, and the text after its close.
pub(crate) fn bracket_contents(text: &str) -> Option<(&str, &str)> {
    let mut depth: i32 = 0;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '\'' | '"' | '`' => quote = Some(c),
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => {
                if depth == 0 {
                    return Some((&text[..i], &text[i + c.len_utf8()..]));
                }
                depth -= 1;
            }
            _ => {}
        }
    }
    None
}

/// `text` cut at every top-level occurrence of `sep`.
pub(crate) fn split_top(text: &str, sep: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    for (i, c) in top_level(text) {
        if c == sep {
            parts.push(&text[start..i]);
            start = i + c.len_utf8();
        }
    }
    parts.push(&text[start..]);
    parts
}

/// `text` up to its first top-level `stop` character (or a closing bracket of an enclosing
/// expression).
fn until_top<'a>(text: &'a str, stop: &[char]) -> &'a str {
    for (i, c) in top_level(text) {
        if stop.contains(&c) || matches!(c, ')' | ']' | '}') {
            return &text[..i];
        }
    }
    text
}

/// The two sides of the first top-level operator of `operators` in `text`. Symbolic operators
/// must not be part of a longer one (`==` inside `===`); word operators (`is`) need spaces
/// around them and `is` followed by `not` is another operator.
fn split_comparison<'a>(text: &'a str, operators: &[String]) -> Option<(&'a str, &'a str)> {
    let top = top_level(text);
    let bytes = text.as_bytes();
    let symbolic = |b: u8| matches!(b, b'=' | b'!' | b'<' | b'>');
    for &(i, _) in &top {
        for op in operators {
            let Some(rest) = text.get(i..) else { continue };
            if !rest.starts_with(op.as_str()) {
                continue;
            }
            let end = i + op.len();
            let word = op.chars().all(|c| c.is_alphabetic() || c == ' ');
            let ok = if word {
                let before = i == 0 || bytes.get(i - 1).is_some_and(u8::is_ascii_whitespace);
                let after = bytes.get(end).is_some_and(u8::is_ascii_whitespace);
                let not_next = text
                    .get(end..)
                    .is_some_and(|r| r.trim_start().starts_with("not "));
                before && after && !(op == "is" && not_next)
            } else {
                let before = i.checked_sub(1).and_then(|k| bytes.get(k)).copied();
                let after = bytes.get(end).copied();
                !before.is_some_and(symbolic) && !after.is_some_and(symbolic)
            };
            if ok {
                return Some((&text[..i], &text[end..]));
            }
        }
    }
    None
}

/// The text with whitespace outside string literals removed, and a trailing `;` dropped.
pub(crate) fn normal_form(text: &str) -> String {
    let mut out = String::new();
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in text.chars() {
        if let Some(q) = quote {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        if matches!(c, '\'' | '"' | '`') {
            quote = Some(c);
        }
        if !c.is_whitespace() {
            out.push(c);
        }
    }
    while out.ends_with(';') {
        out.pop();
    }
    out
}

/// How one `same-operands` rule reads a line.
#[derive(Debug, Clone)]
pub(crate) struct OperandReader {
    pub(crate) shape: Operands,
    pub(crate) skip_arguments: usize,
    pub(crate) operators: Vec<String>,
    pub(crate) after: Option<regex::Regex>,
}

impl OperandReader {
    /// Whether the assertion starting at byte `end` of `line` (just after the rule's pattern
    /// match) compares two identical operands.
    pub(crate) fn identical(&self, language: Language, line: &str, end: usize) -> bool {
        let Some(rest) = line.get(end..) else {
            return false;
        };
        let opened = line
            .get(..end)
            .is_some_and(|head| head.trim_end().ends_with(['(', '[', '{']));
        let (a, b) = match self.shape {
            Operands::Arguments => {
                if !opened {
                    return false;
                }
                let Some((contents, _)) = bracket_contents(rest) else {
                    return false;
                };
                let args = split_top(contents, ',');
                match (
                    args.get(self.skip_arguments),
                    args.get(self.skip_arguments + 1),
                ) {
                    (Some(a), Some(b)) => (a.to_string(), b.to_string()),
                    _ => return false,
                }
            }
            Operands::Chain => {
                let (Some((first, after_first)), Some(after)) = (
                    opened.then(|| bracket_contents(rest)).flatten(),
                    &self.after,
                ) else {
                    return false;
                };
                let Some(m) = after.find(after_first).filter(|m| m.start() == 0) else {
                    return false;
                };
                let Some((second, _)) = bracket_contents(&after_first[m.end()..]) else {
                    return false;
                };
                let second = split_top(second, ',').first().copied().unwrap_or("");
                (first.to_string(), second.to_string())
            }
            Operands::Comparison => {
                let expression = if opened {
                    match bracket_contents(rest) {
                        Some((contents, _)) => {
                            split_top(contents, ',').first().copied().unwrap_or("")
                        }
                        None => return false,
                    }
                } else if language == Language::Go {
                    until_top(rest, &['{'])
                } else {
                    let cut = until_top(rest, &[',']);
                    cut.split(" #").next().unwrap_or(cut)
                };
                // Go: `if got := f(2); got != f(2) {` compares f(2) with itself.
                let parts = split_top(expression, ';');
                let (init, condition) = match parts.as_slice() {
                    [condition] => (None, *condition),
                    [init, condition] => (Some(*init), *condition),
                    _ => return false,
                };
                let mut condition = condition.trim();
                while let Some(inner) = condition.strip_prefix('(') {
                    match bracket_contents(inner) {
                        Some((contents, rest)) if rest.trim().is_empty() => {
                            condition = contents.trim();
                        }
                        _ => break,
                    }
                }
                let Some((a, b)) = split_comparison(condition, &self.operators) else {
                    return false;
                };
                let substitute = |side: &str| -> String {
                    if let Some((name, value)) = init.and_then(|i| i.split_once(":="))
                        && normal_form(side) == normal_form(name)
                    {
                        return value.to_string();
                    }
                    side.to_string()
                };
                (substitute(a), substitute(b))
            }
        };
        let (a, b) = (normal_form(&a), normal_form(&b));
        !a.is_empty() && a == b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_respect_strings_and_brackets() {
        assert_eq!(
            split_top("f(a, b), \"x, y\", [1, 2]", ','),
            ["f(a, b)", " \"x, y\"", " [1, 2]"]
        );
        assert_eq!(bracket_contents("a, (b)) + 1"), Some(("a, (b)", " + 1")));
        assert_eq!(normal_form(" f( 2 ) ;"), "f(2)");
        assert_eq!(normal_form("\"a b\""), "\"a b\"");
        let ops = vec!["==".to_string(), "is".to_string()];
        assert_eq!(split_comparison("a === b", &ops), None);
        assert_eq!(split_comparison("a is not b", &ops), None);
        assert_eq!(split_comparison("this == b", &ops), Some(("this ", " b")));
    }
}
