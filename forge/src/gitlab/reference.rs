//! GitLab issue references and project ids: `https://HOST/GROUP/.../NAME/-/issues/N`,
//! `gitlab:GROUP/NAME#N`, and a project as a numeric id or a `group/subgroup/name` path.

use crate::error::{Error, Result};

/// A GitLab project: its numeric id, or its full path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProjectId {
    /// The numeric id (`42`).
    Id(u64),
    /// The full path (`group/subgroup/name`).
    Path(String),
}

impl ProjectId {
    /// An id (all digits) or a path of one or more `/`-separated segments, each of letters,
    /// digits, `_`, `-` and `.` (not `.` or `..` alone).
    pub fn parse(given: &str) -> Result<ProjectId> {
        let given = given.trim().trim_matches('/');
        if !given.is_empty() && given.bytes().all(|b| b.is_ascii_digit()) {
            return given.parse().map(ProjectId::Id).map_err(|_| Error::Config {
                problem: format!("project id {given} is too large"),
            });
        }
        let bad = |problem: &str| Error::Config {
            problem: format!(
                "project {given:?}: {problem}; give a numeric id or a path group/subgroup/name"
            ),
        };
        if given.is_empty() {
            return Err(bad("it is empty"));
        }
        let segments: Vec<&str> = given.split('/').collect();
        if segments.len() < 2 {
            return Err(bad("a path names at least a namespace and a project"));
        }
        for segment in &segments {
            if segment.is_empty() || *segment == "." || *segment == ".." {
                return Err(bad("a path segment is empty, `.` or `..`"));
            }
            if !segment
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
            {
                return Err(bad(
                    "a path segment holds a character GitLab paths do not have",
                ));
            }
        }
        Ok(ProjectId::Path(given.to_owned()))
    }

    /// The form a URL path takes: the id, or the path with `/` as `%2F`.
    pub fn url_segment(&self) -> String {
        match self {
            ProjectId::Id(id) => id.to_string(),
            ProjectId::Path(path) => percent_encode(path),
        }
    }
}

impl std::fmt::Display for ProjectId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProjectId::Id(id) => write!(f, "{id}"),
            ProjectId::Path(path) => f.write_str(path),
        }
    }
}

/// One GitLab issue, by project and number (`iid`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitLabIssueRef {
    /// The project's full path.
    pub project: ProjectId,
    /// The issue's project-scoped number.
    pub number: u64,
    /// `scheme://host[:port]` of the web URL given, when one was (a self-managed instance).
    pub web_base: Option<String>,
}

impl GitLabIssueRef {
    /// Parse `https://HOST/GROUP/.../NAME/-/issues/N` (any host: self-managed instances) or
    /// `gitlab:GROUP/.../NAME#N`.
    pub fn parse(given: &str) -> Result<GitLabIssueRef> {
        let bad = |problem: &str| Error::Reference {
            given: given.to_owned(),
            problem: format!(
                "{problem}; give https://HOST/GROUP/NAME/-/issues/N or gitlab:GROUP/NAME#N"
            ),
        };
        let trimmed = given.trim();
        if let Some(rest) = trimmed.strip_prefix("gitlab:") {
            let (path, number) = rest
                .split_once('#')
                .ok_or_else(|| bad("the issue number is missing after `#`"))?;
            return Ok(GitLabIssueRef {
                project: project_path(path, &bad)?,
                number: issue_number(number, &bad)?,
                web_base: None,
            });
        }
        let (scheme, rest) = trimmed
            .split_once("://")
            .ok_or_else(|| bad("not a gitlab: reference or a URL"))?;
        if scheme != "https" && scheme != "http" {
            return Err(bad("only https:// (or http://) issue URLs are understood"));
        }
        let rest = rest.split(['#', '?']).next().unwrap_or_default();
        let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
        if host.is_empty() || host.contains('@') {
            return Err(bad("the URL has no host (or carries credentials)"));
        }
        let (project, tail) = path
            .split_once("/-/")
            .ok_or_else(|| bad("the path has no /-/ before issues/N"))?;
        let tail: Vec<&str> = tail.split('/').filter(|s| !s.is_empty()).collect();
        match tail.as_slice() {
            ["issues", number] => Ok(GitLabIssueRef {
                project: project_path(project, &bad)?,
                number: issue_number(number, &bad)?,
                web_base: Some(format!("{scheme}://{host}")),
            }),
            ["merge_requests", ..] => {
                Err(bad("that is a merge request; airlock works from issues"))
            }
            _ => Err(bad("the path does not end in /-/issues/N")),
        }
    }

    /// The REST API base of the instance the web URL named (`https://HOST/api/v4`), when one
    /// was given.
    pub fn api_url(&self) -> Option<String> {
        self.web_base.as_ref().map(|base| format!("{base}/api/v4"))
    }
}

impl std::fmt::Display for GitLabIssueRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}#{}", self.project, self.number)
    }
}

fn project_path(path: &str, bad: &dyn Fn(&str) -> Error) -> Result<ProjectId> {
    match ProjectId::parse(path) {
        Ok(ProjectId::Path(p)) => Ok(ProjectId::Path(p)),
        _ => Err(bad("expected GROUP/.../NAME before the issue number")),
    }
}

fn issue_number(text: &str, bad: &dyn Fn(&str) -> Error) -> Result<u64> {
    match text.trim().parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(bad("the issue number is not a positive integer")),
    }
}

/// Percent-encode everything but RFC 3986's unreserved characters (so `/` becomes `%2F`).
pub(crate) fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn web_urls_and_short_references_parse_with_subgroups() {
        let r = GitLabIssueRef::parse("https://git.acme.test/plat/tools/airlock/-/issues/7#note_1")
            .unwrap();
        assert_eq!(r.project, ProjectId::Path("plat/tools/airlock".into()));
        assert_eq!(r.number, 7);
        assert_eq!(r.api_url().as_deref(), Some("https://git.acme.test/api/v4"));
        let r = GitLabIssueRef::parse("gitlab:plat/airlock#12").unwrap();
        assert_eq!(r.to_string(), "plat/airlock#12");
        assert_eq!(r.api_url(), None);
    }

    #[test]
    fn merge_requests_and_malformed_references_are_refused_with_the_reason() {
        for (given, says) in [
            ("https://gitlab.com/a/b/-/merge_requests/3", "merge request"),
            ("https://gitlab.com/a/b/issues/3", "/-/"),
            ("gitlab:a/b#x", "positive integer"),
            ("gitlab:a/b", "missing after `#`"),
            ("gitlab:solo#3", "GROUP/.../NAME"),
            ("https://u:p@gitlab.com/a/b/-/issues/3", "credentials"),
            ("ftp://gitlab.com/a/b/-/issues/3", "https://"),
        ] {
            let err = GitLabIssueRef::parse(given).unwrap_err().to_string();
            assert!(err.contains(says), "{given}: {err}");
        }
    }

    #[test]
    fn project_paths_are_encoded_and_ids_kept() {
        assert_eq!(ProjectId::parse("42").unwrap().url_segment(), "42");
        assert_eq!(
            ProjectId::parse("group/sub/name.js").unwrap().url_segment(),
            "group%2Fsub%2Fname.js"
        );
        assert!(ProjectId::parse("group/../x").is_err());
        assert!(ProjectId::parse("group/na me").is_err());
    }
}
