//! Test files that are test infrastructure, or that patch the code under test: rules over the
//! lines a change adds to a test file, read with the scope they run in (module level, a Go
//! `init`, anywhere). A rule either refuses the change (it decides which tests run, or what runs
//! before them) or flags it for the approver (the item is still queued).

use std::collections::{BTreeSet, HashMap};

use globset::GlobSet;
use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::Result;
use crate::languages::{Language, language_of};
use crate::locate::rule_error;

/// What a test-code rule does when it fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TestCodeAction {
    /// `POLICY_VIOLATION`: the change is refused.
    Refuse,
    /// A flag the approver sees; the item is still queued.
    Flag,
    /// A flag, and the item is routed to a senior approver: it needs two approvals by two
    /// named approvers, one of them senior.
    Senior,
}

/// Which changed files a rule reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Targets {
    /// Test files (the default).
    #[default]
    Tests,
    /// Every other file of the change: source that reaches into the test process.
    Source,
}

/// Which lines of a test file a rule reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scope {
    /// Every code line (Python: not blank, a comment or a docstring).
    Anywhere,
    /// Code that runs when the file is loaded: Python outside any `def`/`class` body; JS/TS at
    /// the top level or directly in a `describe`/`suite`/`context` callback; Go at package
    /// level, in `func init()` or in a package-level `var` initialiser.
    Module,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TestCodeSection {
    rule: String,
    action: TestCodeAction,
    reason: String,
    languages: Vec<Language>,
    #[serde(default)]
    files: Vec<String>,
    #[serde(default)]
    targets: Targets,
    scope: Scope,
    pattern: String,
    #[serde(default)]
    unless: Option<String>,
    #[serde(rename = "match")]
    must_match: Vec<String>,
    not_match: Vec<String>,
}

/// One test-code rule that fired.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct TestCodeFinding {
    /// Repository-relative path.
    pub file: String,
    /// 1-based line of the new version.
    pub line: usize,
    /// The rule id.
    pub rule: String,
    /// Refuse or flag.
    pub action: TestCodeAction,
    /// Why the rule exists, for a person.
    pub reason: String,
    /// The offending line, trimmed, at most 200 chars.
    pub excerpt: String,
}

#[derive(Debug, Clone)]
struct Rule {
    id: String,
    action: TestCodeAction,
    reason: String,
    languages: Vec<Language>,
    files: Option<GlobSet>,
    targets: Targets,
    scope: Scope,
    pattern: Regex,
    unless: Option<Regex>,
}

/// The compiled test-code rules.
#[derive(Debug, Clone, Default)]
pub(crate) struct TestCodeRules {
    rules: Vec<Rule>,
}

/// One line of a file as the rules read it.
#[derive(Debug, Clone)]
struct CodeLine<'a> {
    line: usize,
    text: &'a str,
    /// Not blank, not only a comment, not only a string (a docstring).
    code: bool,
    /// Runs when the file is loaded (see [`Scope::Module`]).
    module: bool,
}

impl TestCodeRules {
    pub(crate) fn build(
        sections: &[TestCodeSection],
        text: &str,
        file: &str,
    ) -> Result<TestCodeRules> {
        let mut rules = Vec::new();
        let mut seen = BTreeSet::new();
        for s in sections {
            let err = |m: String| rule_error(text, file, &s.rule, m);
            if !seen.insert(s.rule.clone()) {
                return Err(err("duplicate rule id".to_string()));
            }
            if s.languages.is_empty() {
                return Err(err("`languages` is empty".to_string()));
            }
            let regex = |field: &str, p: &str| {
                Regex::new(p).map_err(|e| err(format!("{field} regex does not compile: {e}")))
            };
            let files = if s.files.is_empty() {
                None
            } else {
                let mut builder = globset::GlobSetBuilder::new();
                for glob in &s.files {
                    let g = globset::GlobBuilder::new(glob)
                        .literal_separator(true)
                        .build()
                        .map_err(|e| err(format!("glob {glob:?} does not compile: {e}")))?;
                    builder.add(g);
                }
                Some(builder.build().map_err(|e| err(format!("glob set: {e}")))?)
            };
            let rule = Rule {
                id: s.rule.clone(),
                action: s.action,
                reason: s.reason.clone(),
                languages: s.languages.clone(),
                files,
                targets: s.targets,
                scope: s.scope,
                pattern: regex("pattern", &s.pattern)?,
                unless: s
                    .unless
                    .as_deref()
                    .map(|p| regex("unless", p))
                    .transpose()?,
            };
            if s.must_match.is_empty() || s.not_match.is_empty() {
                return Err(err(
                    "needs at least one `match` and one `not_match` example".to_string(),
                ));
            }
            let language = rule.languages[0];
            for (expected, examples) in [(true, &s.must_match), (false, &s.not_match)] {
                for example in examples {
                    let fired = !rule.fire(language, example, &|_| true).is_empty();
                    if fired != expected {
                        let which = if expected { "match" } else { "not_match" };
                        return Err(err(format!(
                            "{which} example {example:?} {} the rule",
                            if fired { "fires" } else { "does not fire" }
                        )));
                    }
                }
            }
            rules.push(rule);
        }
        Ok(TestCodeRules { rules })
    }

    /// Every rule that fires on a line `new` adds to `path` (`old` is its text at base, `None`
    /// for a new file), sorted by line: the rules for test files when `is_test`, else those
    /// for source.
    pub(crate) fn check(
        &self,
        path: &str,
        old: Option<&str>,
        new: &str,
        is_test: bool,
    ) -> Vec<TestCodeFinding> {
        let Some(language) = language_of(path) else {
            return Vec::new();
        };
        // A line counts as added unless the old text had as many identical lines.
        let mut before: HashMap<&str, usize> = HashMap::new();
        for l in old.unwrap_or("").lines() {
            *before.entry(l.trim()).or_default() += 1;
        }
        let mut added = BTreeSet::new();
        for (i, l) in new.lines().enumerate() {
            match before.get_mut(l.trim()) {
                Some(n) if *n > 0 => *n -= 1,
                _ => {
                    added.insert(i + 1);
                }
            }
        }
        let mut out = Vec::new();
        for rule in &self.rules {
            if !rule.languages.contains(&language)
                || (rule.targets == Targets::Tests) != is_test
                || rule.files.as_ref().is_some_and(|g| !g.is_match(path))
            {
                continue;
            }
            for (line, text) in rule.fire(language, new, &|n| added.contains(&n)) {
                out.push(TestCodeFinding {
                    file: path.to_string(),
                    line,
                    rule: rule.id.clone(),
                    action: rule.action,
                    reason: rule.reason.clone(),
                    excerpt: text.trim().chars().take(200).collect(),
                });
            }
        }
        out.sort();
        out
    }
}

impl Rule {
    /// The lines of `text` (those `counts` admits) this rule fires on.
    fn fire<'a>(
        &self,
        language: Language,
        text: &'a str,
        counts: &dyn Fn(usize) -> bool,
    ) -> Vec<(usize, &'a str)> {
        let imported = imported_names(language, text);
        code_lines(language, text)
            .into_iter()
            .filter(|l| l.code && counts(l.line))
            .filter(|l| self.scope == Scope::Anywhere || l.module)
            .filter(|l| self.unless.as_ref().is_none_or(|u| !u.is_match(l.text)))
            .filter(|l| {
                self.pattern.captures_iter(l.text).any(|c| {
                    self.pattern
                        .capture_names()
                        .flatten()
                        .filter(|n| n.starts_with("imported"))
                        .filter_map(|n| c.name(n))
                        .all(|name| imported.contains(name.as_str()))
                })
            })
            .map(|l| (l.line, l.text))
            .collect()
    }
}

/// The names a file binds by importing (Python `import a.b` binds `a`, `from m import x as
/// y` binds `y`; JS `import x`, `import {a as b}`, `import * as n`, `const {a} = require(..)`;
/// Go the last element of an import path or its alias).
fn imported_names(language: Language, text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let word = |s: &str| {
        let w: String = s
            .trim()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '$')
            .collect();
        (!w.is_empty()).then_some(w)
    };
    let alias_or = |item: &str, sep: &str| -> Option<String> {
        match item.split_once(sep) {
            Some((_, alias)) => word(alias),
            None => word(item),
        }
    };
    match language {
        Language::Python => {
            for l in text.lines() {
                let t = l.trim();
                if let Some(rest) = t.strip_prefix("import ") {
                    for item in rest.split(',') {
                        let item = item.trim();
                        match item.split_once(" as ") {
                            Some((_, alias)) => names.extend(word(alias)),
                            None => names.extend(word(item.split('.').next().unwrap_or(""))),
                        }
                    }
                } else if let Some(rest) = t.strip_prefix("from ")
                    && let Some((_, items)) = rest.split_once(" import ")
                {
                    for item in items.trim_matches(['(', ')', ' ']).split(',') {
                        names.extend(alias_or(item, " as "));
                    }
                }
            }
        }
        Language::Javascript | Language::Typescript => {
            for l in text.lines() {
                let t = l.trim();
                let binding = if let Some(rest) = t.strip_prefix("import ") {
                    rest.split(" from ").next()
                } else if t.contains("require(") {
                    t.split('=')
                        .next()
                        .map(|b| b.trim_start_matches(|c: char| c.is_alphabetic()).trim())
                        .filter(|_| {
                            t.starts_with("const ")
                                || t.starts_with("let ")
                                || t.starts_with("var ")
                        })
                } else {
                    None
                };
                let Some(binding) = binding else { continue };
                for item in binding.split([',', '{', '}']) {
                    let item = item.trim();
                    let item = item.strip_prefix("* as ").unwrap_or(item);
                    if item.contains(':') {
                        names.extend(alias_or(item, ":"));
                    } else {
                        names.extend(alias_or(item, " as "));
                    }
                }
            }
        }
        Language::Go => {
            let mut in_block = false;
            for l in text.lines() {
                let t = l.trim();
                let spec = if in_block {
                    if t.starts_with(')') {
                        in_block = false;
                        continue;
                    }
                    t
                } else if t == "import (" {
                    in_block = true;
                    continue;
                } else if let Some(rest) = t.strip_prefix("import ") {
                    rest
                } else {
                    continue;
                };
                let Some((alias, path)) = spec.split_once('"') else {
                    continue;
                };
                let path = path.trim_end_matches(['"', ' ']);
                match word(alias) {
                    Some(a) => {
                        names.insert(a);
                    }
                    None => names.extend(path.rsplit('/').next().and_then(word)),
                }
            }
        }
        Language::Rust | Language::Java | Language::Kotlin => {}
    }
    names
}

/// Per line: is it code, and does it run when the file is loaded. Lexical: strings and
/// comments are tracked so brackets inside them do not count.
fn code_lines(language: Language, text: &str) -> Vec<CodeLine<'_>> {
    match language {
        Language::Python => python_lines(text),
        _ => brace_lines(language, text),
    }
}

fn python_lines(text: &str) -> Vec<CodeLine<'_>> {
    let mut out = Vec::new();
    // (quote char, triple) of a string still open at the end of the previous line.
    let mut open: Option<(char, bool)> = None;
    let mut depth: i32 = 0;
    let mut continued = false;
    let mut scopes: Vec<usize> = Vec::new();
    let mut statement_module = true;
    for (i, raw) in text.lines().enumerate() {
        let starts_statement = open.is_none() && depth == 0 && !continued;
        let mut code = String::new();
        let chars: Vec<char> = raw.chars().collect();
        let mut k = 0;
        while k < chars.len() {
            let c = chars[k];
            if let Some((q, triple)) = open {
                if c == '\\' {
                    k += 2;
                    continue;
                }
                if c == q
                    && (!triple || (chars.get(k + 1) == Some(&q) && chars.get(k + 2) == Some(&q)))
                {
                    open = None;
                    k += if triple { 3 } else { 1 };
                    continue;
                }
                k += 1;
                continue;
            }
            match c {
                '#' => break,
                '\'' | '"' => {
                    let triple = chars.get(k + 1) == Some(&c) && chars.get(k + 2) == Some(&c);
                    open = Some((c, triple));
                    code.push('"');
                    k += if triple { 3 } else { 1 };
                    continue;
                }
                '(' | '[' | '{' => depth += 1,
                ')' | ']' | '}' => depth = (depth - 1).max(0),
                _ => {}
            }
            code.push(c);
            k += 1;
        }
        if open.is_some_and(|(_, triple)| !triple) {
            // An unterminated one-line string ends with its line.
            open = None;
        }
        continued = code.trim_end().ends_with('\\');
        let t = code.trim();
        let is_code = !t.is_empty() && !t.chars().all(|c| c == '"' || c.is_whitespace());
        if starts_statement && is_code {
            let indent = raw.len() - raw.trim_start().len();
            while scopes.last().is_some_and(|s| *s >= indent) {
                scopes.pop();
            }
            statement_module = scopes.is_empty();
            let head = t.trim_start_matches("async ").trim_start();
            if head.starts_with("def ") || head.starts_with("class ") {
                scopes.push(indent);
            }
        }
        out.push(CodeLine {
            line: i + 1,
            text: raw,
            code: is_code,
            module: statement_module,
        });
    }
    out
}

fn brace_lines(language: Language, text: &str) -> Vec<CodeLine<'_>> {
    let mut out = Vec::new();
    // Open brackets, each with whether code directly inside it still runs at load.
    let mut stack: Vec<bool> = Vec::new();
    let mut in_block_comment = false;
    let mut quote: Option<char> = None;
    // Go: a package-level `var` statement's brackets all run at load.
    let mut var_statement = false;
    for (i, raw) in text.lines().enumerate() {
        let module = stack.iter().all(|t| *t);
        let at_top = stack.is_empty();
        let trimmed = raw.trim_start();
        if at_top && language == Language::Go {
            var_statement = trimmed.starts_with("var ") || trimmed.starts_with("var(");
        }
        let mut code = String::new();
        let chars: Vec<char> = raw.chars().collect();
        let mut k = 0;
        while k < chars.len() {
            let c = chars[k];
            if in_block_comment {
                if c == '*' && chars.get(k + 1) == Some(&'/') {
                    in_block_comment = false;
                    k += 1;
                }
                k += 1;
                continue;
            }
            if let Some(q) = quote {
                if c == '\\' {
                    k += 2;
                    continue;
                }
                if c == q {
                    quote = None;
                    code.push(c);
                }
                k += 1;
                continue;
            }
            match c {
                '/' if chars.get(k + 1) == Some(&'/') => break,
                '/' if chars.get(k + 1) == Some(&'*') => {
                    in_block_comment = true;
                    k += 2;
                    continue;
                }
                '\'' | '"' | '`' => {
                    quote = Some(c);
                    code.push(c);
                }
                '(' | '[' => stack.push(stack.iter().all(|t| *t)),
                '{' => {
                    let inherited = stack.iter().all(|t| *t);
                    let transparent = match language {
                        Language::Go => {
                            inherited
                                && (var_statement
                                    || (at_top && trimmed.starts_with("func init("))
                                    || !stack.is_empty())
                        }
                        _ => {
                            inherited
                                && ["describe", "suite", "context"]
                                    .iter()
                                    .any(|w| code.contains(w))
                        }
                    };
                    stack.push(transparent);
                }
                ')' | ']' | '}' => {
                    stack.pop();
                }
                _ => {}
            }
            code.push(c);
            k += 1;
        }
        if quote.is_some_and(|q| q != '`') {
            quote = None;
        }
        let t = code.trim();
        out.push(CodeLine {
            line: i + 1,
            text: raw,
            code: !t.is_empty(),
            module,
        });
    }
    out
}
