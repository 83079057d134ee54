//! Test recognition: which files are tests (the policy's `[tests.LANGUAGE]` globs), and which
//! lines of Rust source are test code.

use std::collections::BTreeMap;

use globset::GlobSet;
use serde::Deserialize;

use crate::Result;
use crate::languages::{Language, language_of};
use crate::locate::rule_error;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TestSection {
    pub(crate) globs: Vec<String>,
    #[serde(rename = "match")]
    pub(crate) must_match: Vec<String>,
    pub(crate) not_match: Vec<String>,
}

/// Compiled test-path rules.
#[derive(Debug, Clone)]
pub(crate) struct TestRules {
    by_language: BTreeMap<Language, GlobSet>,
}

impl TestRules {
    pub(crate) fn build(
        sections: &BTreeMap<Language, TestSection>,
        text: &str,
        file: &str,
    ) -> Result<TestRules> {
        let mut by_language = BTreeMap::new();
        for (language, section) in sections {
            let mut builder = globset::GlobSetBuilder::new();
            for glob in &section.globs {
                let g = globset::GlobBuilder::new(glob)
                    .literal_separator(true)
                    .case_insensitive(false)
                    .build()
                    .map_err(|e| {
                        rule_error(
                            text,
                            file,
                            &format!("tests.{}", language.as_str()),
                            format!("glob {glob:?} does not compile: {e}"),
                        )
                    })?;
                builder.add(g);
            }
            let set = builder
                .build()
                .map_err(|e| rule_error(text, file, language.as_str(), format!("glob set: {e}")))?;
            by_language.insert(*language, set);
        }
        let rules = TestRules { by_language };
        for (language, section) in sections {
            let rule = format!("tests.{}", language.as_str());
            if section.must_match.is_empty() || section.not_match.is_empty() {
                return Err(rule_error(
                    text,
                    file,
                    &rule,
                    "needs at least one `match` and one `not_match` example".to_string(),
                ));
            }
            for example in &section.must_match {
                if language_of(example) != Some(*language) && !example.contains("testdata/") {
                    return Err(rule_error(
                        text,
                        file,
                        &rule,
                        format!(
                            "match example {example:?} is not a {} file",
                            language.as_str()
                        ),
                    ));
                }
                if !rules.matches(*language, example) {
                    return Err(rule_error(
                        text,
                        file,
                        &rule,
                        format!("match example {example:?} is not recognised as a test"),
                    ));
                }
            }
            for example in &section.not_match {
                if rules.matches(*language, example) {
                    return Err(rule_error(
                        text,
                        file,
                        &rule,
                        format!("not_match example {example:?} is recognised as a test"),
                    ));
                }
            }
        }
        Ok(rules)
    }

    fn matches(&self, language: Language, path: &str) -> bool {
        self.by_language
            .get(&language)
            .is_some_and(|set| set.is_match(path))
    }

    pub(crate) fn is_test_path(&self, path: &str) -> bool {
        let path = path.replace('\\', "/");
        match language_of(&path) {
            Some(language) => self.matches(language, &path),
            // Fixtures under a Go testdata directory are test inputs whatever their type.
            None => self.matches(Language::Go, &path) && path.contains("testdata/"),
        }
    }
}

/// The 1-based inclusive line ranges of Rust `source` that are test code: `#[cfg(test)]`
/// items (usually `mod tests { ... }`) and `#[test]`-style functions, found with a small lexer
/// that skips strings, chars and comments. Sorted, non-overlapping.
pub fn rust_test_regions(source: &str) -> Vec<(usize, usize)> {
    let tokens = lex_rust(source);
    let mut regions: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let (line, ref tok) = tokens[i];
        if let Tok::InnerAttr(attr) = tok {
            let compact: String = attr.chars().filter(|c| !c.is_whitespace()).collect();
            // `#![cfg(test)]` at the top of a file makes the whole file test code.
            if compact == "cfg(test)" && depth_at(&tokens, i) == 0 {
                let last = source.lines().count().max(1);
                return vec![(1, last)];
            }
        }
        if let Tok::Attr(attr) = tok {
            let compact: String = attr.chars().filter(|c| !c.is_whitespace()).collect();
            let is_test_attr = compact == "cfg(test)"
                || compact == "test"
                || compact.ends_with("::test")
                || compact.starts_with("test_case(")
                || compact.starts_with("rstest")
                || compact.starts_with("proptest");
            if is_test_attr && let Some(end) = item_end(&tokens, i + 1) {
                regions.push((line, end));
            }
        }
        i += 1;
    }
    regions.sort_unstable();
    let mut merged: Vec<(usize, usize)> = Vec::new();
    for (start, end) in regions {
        match merged.last_mut() {
            Some(last) if start <= last.1 + 1 => last.1 = last.1.max(end),
            _ => merged.push((start, end)),
        }
    }
    merged
}

/// Brace depth just before token `index`.
fn depth_at(tokens: &[(usize, Tok)], index: usize) -> usize {
    let mut depth: usize = 0;
    for (_, tok) in tokens.iter().take(index) {
        match tok {
            Tok::Open => depth += 1,
            Tok::Close => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    depth
}

/// From token `from`, skip further attributes and find the end line of the item: the matching
/// close brace of its first `{`, or the first `;` at depth 0.
fn item_end(tokens: &[(usize, Tok)], from: usize) -> Option<usize> {
    let mut depth: usize = 0;
    let mut opened = false;
    for (line, tok) in tokens.get(from..)? {
        match tok {
            Tok::Attr(_) if !opened => {}
            Tok::Open => {
                depth += 1;
                opened = true;
            }
            Tok::Close => {
                if depth == 0 {
                    return Some(*line);
                }
                depth -= 1;
                if opened && depth == 0 {
                    return Some(*line);
                }
            }
            Tok::Semi if !opened => return Some(*line),
            _ => {}
        }
    }
    // Unbalanced: the item runs to the end of the file.
    tokens.last().map(|(line, _)| *line)
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Attr(String),
    InnerAttr(String),
    Open,
    Close,
    Semi,
    Other,
}

fn lex_rust(source: &str) -> Vec<(usize, Tok)> {
    let chars: Vec<char> = source.chars().collect();
    let mut out = Vec::new();
    let mut line = 1usize;
    let mut i = 0usize;
    let n = chars.len();
    let at = |k: usize| chars.get(k).copied().unwrap_or('\0');
    while i < n {
        let c = chars[i];
        match c {
            '\n' => {
                line += 1;
                i += 1;
            }
            '/' if at(i + 1) == '/' => {
                while i < n && chars[i] != '\n' {
                    i += 1;
                }
            }
            '/' if at(i + 1) == '*' => {
                let mut depth = 1usize;
                i += 2;
                while i < n && depth > 0 {
                    if chars[i] == '\n' {
                        line += 1;
                    }
                    if chars[i] == '/' && at(i + 1) == '*' {
                        depth += 1;
                        i += 1;
                    } else if chars[i] == '*' && at(i + 1) == '/' {
                        depth -= 1;
                        i += 1;
                    }
                    i += 1;
                }
            }
            'r' if at(i + 1) == '#' || at(i + 1) == '"' => {
                // Raw string r#"..."#, or an identifier starting with r.
                let mut j = i + 1;
                let mut hashes = 0usize;
                while at(j) == '#' {
                    hashes += 1;
                    j += 1;
                }
                if at(j) != '"' {
                    i += 1;
                    continue;
                }
                j += 1;
                loop {
                    if j >= n {
                        break;
                    }
                    if chars[j] == '\n' {
                        line += 1;
                    }
                    if chars[j] == '"' && (1..=hashes).all(|h| at(j + h) == '#') {
                        j += 1 + hashes;
                        break;
                    }
                    j += 1;
                }
                i = j;
                out.push((line, Tok::Other));
            }
            '"' => {
                i += 1;
                while i < n && chars[i] != '"' {
                    if chars[i] == '\\' {
                        i += 1;
                    }
                    if at(i) == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
                i += 1;
                out.push((line, Tok::Other));
            }
            '\'' => {
                // A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
                if at(i + 1) == '\\' {
                    let mut j = i + 2;
                    while j < n && chars[j] != '\'' && chars[j] != '\n' {
                        j += 1;
                    }
                    i = j + 1;
                } else if at(i + 2) == '\'' {
                    i += 3;
                } else {
                    i += 1;
                }
                out.push((line, Tok::Other));
            }
            '#' if at(i + 1) == '[' || (at(i + 1) == '!' && at(i + 2) == '[') => {
                let start_line = line;
                let mut j = if at(i + 1) == '!' { i + 3 } else { i + 2 };
                let mut depth = 1usize;
                let mut text = String::new();
                while j < n && depth > 0 {
                    match chars[j] {
                        '[' => depth += 1,
                        ']' => depth -= 1,
                        '\n' => line += 1,
                        _ => {}
                    }
                    if depth > 0 {
                        text.push(chars[j]);
                    }
                    j += 1;
                }
                let inner = at(i + 1) == '!';
                i = j;
                // Inner attributes (`#![...]`) apply to the enclosing item, not the next one.
                if inner {
                    out.push((start_line, Tok::InnerAttr(text)));
                } else {
                    out.push((start_line, Tok::Attr(text)));
                }
            }
            '{' => {
                out.push((line, Tok::Open));
                i += 1;
            }
            '}' => {
                out.push((line, Tok::Close));
                i += 1;
            }
            ';' => {
                out.push((line, Tok::Semi));
                i += 1;
            }
            _ => {
                if !c.is_whitespace() {
                    out.push((line, Tok::Other));
                }
                i += 1;
            }
        }
    }
    out
}
