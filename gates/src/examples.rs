//! A gate's examples: the diffs it must catch (`match`, each with the verdict it must give) and
//! the ones it must let through (`not_match`, allowed), checked every time the gate is loaded,
//! as `policies/default.toml` checks its rules' examples. The file is TOML:
//!
//! ```toml
//! [[match]]
//! name = "a new migration goes to the database reviewers"
//! verdict = "route"            # flag, route or deny
//! message = "database"         # optional: the exact message, group or reason
//! files = [
//!   { path = "migrations/0002_index.sql", status = "added", patched = "CREATE INDEX i ON t (c);\n" },
//! ]
//!
//! [[not_match]]
//! name = "a source change"
//! files = [
//!   { path = "src/lib.rs", status = "modified", base = "fn a() {}\n", patched = "fn b() {}\n" },
//! ]
//! ```
//!
//! An example may also set `title` and `body` (the `open_pr` text the gate is shown). `base` is
//! the file at the pin (required for modified and deleted files, absent for added ones),
//! `patched` the file after the change (required for added and modified, absent for deleted).
//! The example's digest lists the changed paths, with zero line counts.

use std::collections::BTreeSet;

use serde::Deserialize;

use crate::request::{FileStatus, GateFile, GateRequest, Verdict, VerdictKind};
use crate::runtime::{GateRun, LoadedGate};

/// Which list an example is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    /// Must get its expected verdict (flag, route or deny).
    Match,
    /// Must be allowed.
    NotMatch,
}

impl Section {
    /// As written in the file.
    pub fn as_str(self) -> &'static str {
        match self {
            Section::Match => "match",
            Section::NotMatch => "not_match",
        }
    }
}

/// One example, ready to run.
#[derive(Debug, Clone, PartialEq)]
pub struct Example {
    /// Its name (unique in the file).
    pub name: String,
    /// `match` or `not_match`.
    pub section: Section,
    /// The verdict kind it must get (allow for `not_match`).
    pub kind: VerdictKind,
    /// The exact message, group or reason it must get, when the file says.
    pub message: Option<String>,
    /// What the gate is asked.
    pub request: GateRequest,
}

impl Example {
    /// The expected verdict as a person reads it: `route("database")`, `flag`, `allow`.
    pub fn expected(&self) -> String {
        match &self.message {
            Some(m) => format!("{}({m:?})", self.kind.as_str()),
            None => self.kind.as_str().to_owned(),
        }
    }

    /// Whether `verdict` is what this example expects.
    pub fn accepts(&self, verdict: &Verdict) -> bool {
        verdict.kind() == self.kind
            && self
                .message
                .as_deref()
                .is_none_or(|m| verdict.message() == Some(m))
    }
}

/// One example's run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExampleOutcome {
    /// The example's name.
    pub name: String,
    /// Its section.
    pub section: Section,
    /// What it expects, as [`Example::expected`] writes it.
    pub expected: String,
    /// What the gate did.
    pub run: GateRun,
    /// Whether that is what it expects.
    pub passed: bool,
}

/// Run every example through `gate`, in file order (`match` first).
pub fn run_examples(gate: &LoadedGate, examples: &[Example]) -> Vec<ExampleOutcome> {
    examples
        .iter()
        .map(|example| {
            let run = gate.check(&example.request);
            ExampleOutcome {
                name: example.name.clone(),
                section: example.section,
                expected: example.expected(),
                passed: example.accepts(&run.verdict),
                run,
            }
        })
        .collect()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFileSet {
    #[serde(default, rename = "match")]
    matches: Vec<RawExample>,
    #[serde(default)]
    not_match: Vec<RawExample>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExample {
    name: String,
    #[serde(default)]
    verdict: Option<VerdictKind>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    body: Option<String>,
    files: Vec<RawFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    path: String,
    status: FileStatus,
    #[serde(default)]
    base: Option<String>,
    #[serde(default)]
    patched: Option<String>,
}

/// Parse an examples file; the error names the example and what is wrong with it.
pub fn parse_examples(text: &str) -> Result<Vec<Example>, String> {
    let raw: RawFileSet = toml::from_str(text).map_err(|e| e.to_string())?;
    if raw.matches.is_empty() || raw.not_match.is_empty() {
        return Err("a gate ships at least one [[match]] and one [[not_match]] example".to_owned());
    }
    let mut names = BTreeSet::new();
    let sections = raw
        .matches
        .into_iter()
        .map(|e| (Section::Match, e))
        .chain(raw.not_match.into_iter().map(|e| (Section::NotMatch, e)));
    let mut examples = Vec::new();
    for (section, raw) in sections {
        let at = format!("{} example {:?}", section.as_str(), raw.name);
        if raw.name.trim().is_empty() {
            return Err(format!("a {} example has an empty name", section.as_str()));
        }
        if !names.insert(raw.name.clone()) {
            return Err(format!("{at}: the name is used twice"));
        }
        let kind = match (section, raw.verdict) {
            (Section::Match, Some(VerdictKind::Allow) | None) => {
                return Err(format!(
                    "{at}: a match example names the verdict it must get: verdict = \"flag\", \"route\" or \"deny\""
                ));
            }
            (Section::Match, Some(kind)) => kind,
            (Section::NotMatch, None) if raw.message.is_none() => VerdictKind::Allow,
            (Section::NotMatch, _) => {
                return Err(format!(
                    "{at}: a not_match example must be allowed; it takes no verdict or message"
                ));
            }
        };
        if raw.files.is_empty() {
            return Err(format!("{at}: files: at least one changed file"));
        }
        let mut files = Vec::new();
        for file in raw.files {
            let sides = (file.base.is_some(), file.patched.is_some());
            let expected = match file.status {
                FileStatus::Added => (false, true),
                FileStatus::Modified => (true, true),
                FileStatus::Deleted => (true, false),
            };
            if sides != expected {
                return Err(format!(
                    "{at}: file {:?} is {:?}: it needs {}",
                    file.path,
                    file.status,
                    match file.status {
                        FileStatus::Added => "patched and no base",
                        FileStatus::Modified => "both base and patched",
                        FileStatus::Deleted => "base and no patched",
                    }
                ));
            }
            files.push(GateFile {
                path: file.path,
                status: file.status,
                base: file.base.map(String::into_bytes),
                patched: file.patched.map(String::into_bytes),
            });
        }
        examples.push(Example {
            name: raw.name,
            section,
            kind,
            message: raw.message,
            request: example_request(raw.title, raw.body, files),
        });
    }
    Ok(examples)
}

fn example_request(
    title: Option<String>,
    body: Option<String>,
    files: Vec<GateFile>,
) -> GateRequest {
    let mut paths: Vec<String> = files.iter().map(|f| f.path.clone()).collect();
    paths.sort();
    let mut files = files;
    files.sort_by(|a, b| a.path.cmp(&b.path));
    GateRequest {
        repository: "example/repository".to_owned(),
        issue_id: "GATE-1".to_owned(),
        base_commit: "0".repeat(40),
        title: title.unwrap_or_else(|| "fix: the change this example shows".to_owned()),
        body: body.unwrap_or_default(),
        scope: "source-only".to_owned(),
        test_change_reason: "none".to_owned(),
        before_failing_test: String::new(),
        digest: airlock_schemas::DiffDigest {
            files_changed: paths,
            ..Default::default()
        },
        files,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[[match]]
name = "m"
verdict = "route"
message = "database"
files = [{ path = "migrations/1.sql", status = "added", patched = "x" }]

[[not_match]]
name = "n"
files = [{ path = "src/a.rs", status = "modified", base = "a", patched = "b" }]
"#;

    #[test]
    fn parses_both_sections() {
        let examples = parse_examples(GOOD).unwrap();
        assert_eq!(examples.len(), 2);
        assert_eq!(examples[0].expected(), "route(\"database\")");
        assert!(examples[0].accepts(&Verdict::Route("database".into())));
        assert!(!examples[0].accepts(&Verdict::Route("senior".into())));
        assert!(!examples[0].accepts(&Verdict::Flag("database".into())));
        assert_eq!(examples[1].kind, VerdictKind::Allow);
        assert!(examples[1].accepts(&Verdict::Allow));
        assert_eq!(examples[1].request.digest.files_changed, vec!["src/a.rs"]);
    }

    #[test]
    fn bad_files_are_refused_with_the_example_named() {
        let cases = [
            (
                GOOD.replace("verdict = \"route\"\n", ""),
                "names the verdict",
            ),
            (GOOD.replace("name = \"n\"", "name = \"m\""), "used twice"),
            (
                GOOD.replace("status = \"added\"", "status = \"modified\""),
                "both base and patched",
            ),
            (
                GOOD.replace("name = \"n\"", "name = \"n\"\nverdict = \"deny\""),
                "must be allowed",
            ),
            (
                GOOD.split("[[not_match]]").next().unwrap().to_owned(),
                "at least one",
            ),
            (
                GOOD.replace("status = \"added\"", "status = \"renamed\""),
                "renamed",
            ),
        ];
        for (text, needle) in cases {
            let err = parse_examples(&text).unwrap_err();
            assert!(err.contains(needle), "{needle}: {err}");
        }
    }
}
