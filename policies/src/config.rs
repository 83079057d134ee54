//! The policy file's shape, and compiling it (globs, regexes) with every example checked.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::testfiles::Language;
use crate::{Error, Policy, Result};

/// The six forbidden moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MoveKind {
    /// An assertion deleted.
    AssertionRemoved,
    /// A comparison loosened: tolerance raised, equality turned into inequality/approximation.
    ComparisonLoosened,
    /// An except or catch widened.
    CatchWidened,
    /// A skip, xfail or ignore marker added (or a test disabled).
    SkipMarkerAdded,
    /// A test input shrunk.
    TestInputShrunk,
    /// A timeout raised (or removed).
    TimeoutRaised,
}

impl MoveKind {
    /// The kebab-case name used in policy files and findings.
    pub fn as_str(self) -> &'static str {
        match self {
            MoveKind::AssertionRemoved => "assertion-removed",
            MoveKind::ComparisonLoosened => "comparison-loosened",
            MoveKind::CatchWidened => "catch-widened",
            MoveKind::SkipMarkerAdded => "skip-marker-added",
            MoveKind::TestInputShrunk => "test-input-shrunk",
            MoveKind::TimeoutRaised => "timeout-raised",
        }
    }
}

/// How a detector rule looks at a diff.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Removed lines matching `pattern`, net of moves and same-file replacements.
    Removed,
    /// Added lines matching `pattern`, net of moves and same-file removals.
    Added,
    /// A removed line matching `before` replaced by an added line matching `after`.
    Pair,
    /// An added line matching `pattern` (a `return`) followed, in the new file, by a code
    /// line of the same block: the rest of the test can never run. Net of identical moves.
    Unreachable,
    /// An added line where `pattern` finds an assertion whose two operands (read after the
    /// match as `operands` says) are the same text: it can never fail. Netted like `added`.
    SameOperands,
}

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

/// Which way the numbers of a `numeric` pair rule must move to count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Direction {
    /// Some number grew and none shrank.
    Increase,
    /// Some number shrank and none grew.
    Decrease,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    version: u32,
    write: WriteSection,
    #[serde(default)]
    repos: BTreeMap<String, RepoSection>,
    tests: BTreeMap<Language, TestSection>,
    #[serde(default, rename = "detector")]
    detectors: Vec<DetectorSection>,
    #[serde(default)]
    test_code: Vec<crate::testcode::TestCodeSection>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteSection {
    allow: Vec<String>,
    #[serde(default)]
    refuse: Vec<RefuseSection>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RefuseSection {
    pub(crate) rule: String,
    pub(crate) reason: String,
    pub(crate) globs: Vec<String>,
    #[serde(rename = "match")]
    pub(crate) must_match: Vec<String>,
    pub(crate) not_match: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RepoSection {
    allow: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TestSection {
    pub(crate) globs: Vec<String>,
    #[serde(rename = "match")]
    pub(crate) must_match: Vec<String>,
    pub(crate) not_match: Vec<String>,
}

/// An example of a detector rule: one line, or a `[before, after]` pair.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum Example {
    Line(String),
    Pair(Vec<String>),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DetectorSection {
    pub(crate) id: String,
    pub(crate) kind: MoveKind,
    pub(crate) languages: Vec<Language>,
    pub(crate) mode: Mode,
    #[serde(default)]
    pub(crate) pattern: Option<String>,
    #[serde(default)]
    pub(crate) before: Option<String>,
    #[serde(default)]
    pub(crate) after: Option<String>,
    #[serde(default)]
    pub(crate) numeric: Option<Direction>,
    #[serde(default)]
    pub(crate) operands: Option<Operands>,
    #[serde(default)]
    pub(crate) skip_arguments: usize,
    #[serde(default)]
    pub(crate) operators: Vec<String>,
    #[serde(rename = "match")]
    pub(crate) must_match: Vec<Example>,
    pub(crate) not_match: Vec<Example>,
}

/// 1-based (line, column) of a byte offset in `text`.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or("");
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// Best-effort line of the first occurrence of `needle` (e.g. a rule id) in `text`.
pub(crate) fn line_of(text: &str, needle: &str) -> usize {
    text.find(needle).map_or(0, |at| line_col(text, at).0)
}

/// A rule error located at the line where the rule's id first appears.
pub(crate) fn rule_error(text: &str, file: &str, rule: &str, message: String) -> Error {
    let quoted = format!("\"{rule}\"");
    Error::Rule {
        file: file.to_string(),
        line: line_of(text, &quoted),
        rule: rule.to_string(),
        message,
    }
}

pub(crate) fn build(text: &str, file: &str) -> Result<Policy> {
    let parsed: PolicyFile = toml::from_str(text).map_err(|e| {
        let (line, column) = e.span().map_or((0, 0), |span| line_col(text, span.start));
        Error::Toml {
            file: file.to_string(),
            line,
            column,
            message: e.message().to_string(),
        }
    })?;
    if parsed.version != 1 {
        return Err(Error::Toml {
            file: file.to_string(),
            line: line_of(text, "version"),
            column: 1,
            message: format!("unsupported policy version {}; expected 1", parsed.version),
        });
    }
    let write =
        crate::paths::WritePolicy::build(&parsed.write.allow, &parsed.write.refuse, text, file)?;
    let tests = crate::testfiles::TestRules::build(&parsed.tests, text, file)?;
    let detectors = crate::detect::Detectors::build(&parsed.detectors, text, file)?;
    let test_code = crate::testcode::TestCodeRules::build(&parsed.test_code, text, file)?;
    let mut repos = BTreeMap::new();
    for (slug, section) in parsed.repos {
        // Compile now so a bad per-repository glob is a load error, not a surprise later.
        let mut probe = write.clone();
        probe
            .set_allowlist(&section.allow, file)
            .map_err(|e| match e {
                Error::Rule { message, .. } => rule_error(text, file, &slug, message),
                other => other,
            })?;
        repos.insert(slug, section.allow);
    }
    Ok(Policy {
        write,
        tests,
        detectors,
        test_code,
        repos,
        origin: file.to_string(),
    })
}
