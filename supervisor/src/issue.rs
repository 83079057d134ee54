//! The issue file: one issue (id, title, body, labels) as JSON or as Markdown with front matter.
//!
//! Markdown form:
//!
//! ```text
//! ---
//! id: CALC-7
//! title: add() returns the wrong sign for negative numbers
//! labels: [bug, ready-for-agent]
//! ---
//! The body, free Markdown.
//! ```
//!
//! The front matter is YAML (read by `serde-saphyr`), or TOML between `+++` fences; its keys are
//! `id`, `title` and `labels` (a list, or one comma-separated text), any other is an error that
//! names its line. A missing `title` falls back to the body's first `# heading`.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Errors reading an issue file.
#[derive(Debug, thiserror::Error)]
pub enum IssueError {
    /// The file could not be read.
    #[error("cannot read issue {origin}: {source}")]
    Read {
        /// The file (or `-` for stdin).
        origin: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The text is not a valid issue; `line` is 1-based when known.
    #[error("invalid issue {origin}{}: {problem}", line.map(|l| format!(" line {l}")).unwrap_or_default())]
    Invalid {
        /// The file (or `-` for stdin).
        origin: PathBuf,
        /// The offending line, when there is one.
        line: Option<usize>,
        /// What is wrong.
        problem: String,
    },
}

/// Result alias for issue parsing.
pub type Result<T> = std::result::Result<T, IssueError>;

/// One issue, as the run sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Issue {
    /// The issue id, e.g. `CALC-7` (it becomes `open_pr.issue_id`).
    pub id: String,
    /// One-line title.
    pub title: String,
    /// Free-text body.
    #[serde(default)]
    pub body: String,
    /// Labels, as given.
    #[serde(default)]
    pub labels: Vec<String>,
    /// The issue's number on its forge (GitHub), kept beside the id: the draft pull request
    /// says `Closes #N`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub number: Option<u64>,
    /// Who opened it (a forge login), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
    /// Its state on the forge (`open`, `closed`), when known; a closed issue is not ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Its web address, when it came from a forge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// The longest issue text given to retrieval (a bound on pathological input, far above real
/// issues: the longest of the SWE-bench Lite dev set is 6.5 KB).
pub const MAX_QUERY_CHARS: usize = 64 * 1024;

impl Issue {
    /// The text retrieval is asked about: the title on its own first line, then the body, the
    /// layout of a SWE-bench problem statement (the engine weighs the first line as the
    /// title). Long issues are kept whole up to [`MAX_QUERY_CHARS`]: the traceback or the
    /// configuration at the end of a long report is often what names the file.
    pub fn query(&self) -> String {
        let mut text = format!("{}\n{}", self.title, self.body);
        if text.len() > MAX_QUERY_CHARS {
            let mut end = MAX_QUERY_CHARS;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text.truncate(end);
        }
        text
    }

    /// Parse issue text; JSON when it starts with `{`, otherwise Markdown with front matter.
    /// `origin` only names the source in errors.
    pub fn parse(text: &str, origin: &std::path::Path) -> Result<Issue> {
        let trimmed = text.trim_start_matches('\u{feff}');
        let issue = if trimmed.trim_start().starts_with('{') {
            serde_json::from_str::<Issue>(trimmed).map_err(|e| IssueError::Invalid {
                origin: origin.to_path_buf(),
                line: Some(e.line()),
                problem: e.to_string(),
            })?
        } else {
            parse_markdown(trimmed, origin)?
        };
        issue.checked(origin)
    }

    /// Read an issue from a file, or from stdin when `path` is `-`.
    pub fn read(path: &std::path::Path) -> Result<Issue> {
        let text = if path.as_os_str() == "-" {
            let mut s = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut s).map(|_| s)
        } else {
            std::fs::read_to_string(path)
        };
        let text = text.map_err(|source| IssueError::Read {
            origin: path.to_path_buf(),
            source,
        })?;
        Issue::parse(&text, path)
    }

    /// The issue with its id, title and labels trimmed and checked; `origin` only names the
    /// source in errors.
    pub fn checked(mut self, origin: &std::path::Path) -> Result<Issue> {
        self.id = self.id.trim().to_string();
        self.title = self.title.trim().to_string();
        let invalid = |problem: &str| IssueError::Invalid {
            origin: origin.to_path_buf(),
            line: None,
            problem: problem.to_string(),
        };
        if self.id.is_empty() {
            return Err(invalid("the issue has no id"));
        }
        if self.id.chars().any(|c| c.is_whitespace() || c == '/') {
            return Err(invalid("the issue id may not contain whitespace or '/'"));
        }
        if self.title.is_empty() {
            return Err(invalid("the issue has no title"));
        }
        self.labels = self
            .labels
            .iter()
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty())
            .collect();
        Ok(self)
    }
}

fn parse_markdown(text: &str, origin: &std::path::Path) -> Result<Issue> {
    let invalid = |line: usize, problem: String| IssueError::Invalid {
        origin: origin.to_path_buf(),
        line: Some(line),
        problem,
    };
    let lines: Vec<&str> = text.lines().collect();
    let fence = match lines.first().map(|l| l.trim_end()) {
        Some("---") => "---",
        Some("+++") => "+++",
        _ => {
            return Err(invalid(
                1,
                "expected front matter starting with `---` (or `+++`)".into(),
            ));
        }
    };
    let end = lines
        .iter()
        .enumerate()
        .skip(1)
        .find(|(_, l)| l.trim_end() == fence)
        .map(|(i, _)| i)
        .ok_or_else(|| {
            invalid(
                1,
                format!("front matter opened with `{fence}` is never closed"),
            )
        })?;
    let body_text = lines[end + 1..].join("\n");
    let front = lines[1..end].join("\n");
    // The front matter starts on the file's line 2.
    let matter: FrontMatter = if fence == "+++" {
        toml::from_str(&front).map_err(|e| {
            let line = e
                .span()
                .map_or(0, |span| front[..span.start].matches('\n').count());
            invalid(line + 2, e.message().trim_end().to_string())
        })?
    } else if front.trim().is_empty() {
        FrontMatter::default()
    } else {
        serde_saphyr::from_str(&front).map_err(|e| {
            let line = e.location().map_or(0, |l| {
                usize::try_from(l.line()).unwrap_or(0).saturating_sub(1)
            });
            invalid(line + 2, yaml_problem(&e))
        })?
    };
    let mut issue = Issue {
        id: matter.id.map(Scalar::into_string).unwrap_or_default(),
        title: matter.title.map(Scalar::into_string).unwrap_or_default(),
        body: body_text.trim().to_string(),
        labels: matter.labels.map(Labels::into_vec).unwrap_or_default(),
        ..Issue::default()
    };
    if issue.title.is_empty()
        && let Some(heading) = issue.body.lines().find_map(|l| l.strip_prefix("# "))
    {
        issue.title = heading.trim().to_string();
    }
    Ok(issue)
}

/// The front matter's keys, YAML (`---`) or TOML (`+++`); any other key is an error.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FrontMatter {
    #[serde(default)]
    id: Option<Scalar>,
    #[serde(default)]
    title: Option<Scalar>,
    #[serde(default)]
    labels: Option<Labels>,
}

/// A text or a number (`id: 42` is the id `42`).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Scalar {
    Text(String),
    Integer(i64),
    Float(f64),
}

impl Scalar {
    fn into_string(self) -> String {
        match self {
            Scalar::Text(s) => s,
            Scalar::Integer(i) => i.to_string(),
            Scalar::Float(f) => f.to_string(),
        }
    }
}

/// Labels as a list, or as one comma-separated text (`labels: bug, ready-for-agent`).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Labels {
    List(Vec<Scalar>),
    Text(String),
}

impl Labels {
    fn into_vec(self) -> Vec<String> {
        match self {
            Labels::List(items) => items.into_iter().map(Scalar::into_string).collect(),
            Labels::Text(text) => text.split(',').map(|l| l.trim().to_string()).collect(),
        }
    }
}

/// The YAML parser's message, first line only (the error names the line itself).
fn yaml_problem(e: &serde_saphyr::Error) -> String {
    e.to_string()
        .lines()
        .next()
        .unwrap_or("")
        .trim()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn the_retrieval_query_is_the_title_line_then_the_whole_body() {
        let issue = |body: String| Issue {
            id: "X-1".into(),
            title: "add is wrong".into(),
            body,
            ..Issue::default()
        };
        let long = format!("{}\nFile \"calc/ops.py\", line 6", "word ".repeat(1000));
        let q = issue(long.clone()).query();
        assert_eq!(q, format!("add is wrong\n{long}"));
        // Past the bound the text is cut on a character boundary.
        let q = issue("é".repeat(MAX_QUERY_CHARS)).query();
        assert!(q.len() <= MAX_QUERY_CHARS && q.len() > MAX_QUERY_CHARS - 4);
        assert!(q.starts_with("add is wrong\né"));
    }

    #[test]
    fn json_issue() {
        let i = Issue::parse(
            r#"{"id":"CALC-7","title":"add is wrong","body":"b","labels":["bug"]}"#,
            Path::new("i.json"),
        )
        .unwrap();
        assert_eq!(i.id, "CALC-7");
        assert_eq!(i.labels, vec!["bug"]);
    }

    #[test]
    fn markdown_issue_with_inline_and_block_labels() {
        let i = Issue::parse(
            "---\nid: CALC-7\ntitle: \"add() is wrong\"\nlabels: [bug, ready-for-agent]\n---\nBody line.\n",
            Path::new("i.md"),
        )
        .unwrap();
        assert_eq!(i.title, "add() is wrong");
        assert_eq!(i.labels, vec!["bug", "ready-for-agent"]);
        assert_eq!(i.body, "Body line.");
        let j = Issue::parse(
            "---\nid: CALC-8\nlabels:\n  - needs-info\n  - question\n---\n# Heading title\nmore\n",
            Path::new("i.md"),
        )
        .unwrap();
        assert_eq!(j.labels, vec!["needs-info", "question"]);
        assert_eq!(j.title, "Heading title");
    }

    #[test]
    fn toml_front_matter() {
        let i = Issue::parse(
            "+++\nid = \"AB-1\"\ntitle = \"t\"\nlabels = [\"x\"]\n+++\nbody",
            Path::new("i.md"),
        )
        .unwrap();
        assert_eq!(i.id, "AB-1");
        assert_eq!(i.labels, vec!["x"]);
    }

    #[test]
    fn errors_name_the_line() {
        let err = Issue::parse("---\nid: A-1\nnonsense\n---\n", Path::new("i.md"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("i.md line 3"), "{err}");
        let err = Issue::parse("---\nid: A-1\n", Path::new("i.md"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("never closed"), "{err}");
        let err = Issue::parse("{\"id\": \"A-1\",\n\"title\": 3}", Path::new("i.json"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 2"), "{err}");
    }

    #[test]
    fn yaml_front_matter_is_yaml() {
        // Quoting, comments, numbers, block lists and comma-separated labels.
        let i = Issue::parse(
            "---\n# a comment\nid: 42\ntitle: 'fix: add() subtracts'\nlabels: bug, ready-for-agent\n---\nbody",
            Path::new("i.md"),
        )
        .unwrap();
        assert_eq!(i.id, "42");
        assert_eq!(i.title, "fix: add() subtracts");
        assert_eq!(i.labels, vec!["bug", "ready-for-agent"]);
        let err = Issue::parse(
            "---\nid: A-1\ntitle: t\nassignee: me\n---\n",
            Path::new("i.md"),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("i.md line 4") && err.contains("assignee"),
            "{err}"
        );
        let err = Issue::parse("---\nid: A-1\nlabels: [bug\n---\n", Path::new("i.md"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("invalid issue i.md line"), "{err}");
    }

    #[test]
    fn missing_id_is_refused() {
        let err = Issue::parse("---\ntitle: x\n---\n", Path::new("i.md"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("no id"), "{err}");
    }
}
