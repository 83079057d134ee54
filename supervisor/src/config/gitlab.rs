//! `[gitlab]`: issue intake and triggers from GitLab (gitlab.com or a self-managed instance),
//! and the issue ids it gives.

use super::{ConfigError, Result};
use airlock_forge::gitlab::{ProjectId, api_base};
use airlock_policies::testrun::valid_env_name;
use serde::{Deserialize, Serialize};

/// GitLab's public instance's REST API base.
pub const GITLAB_COM_API: &str = "https://gitlab.com/api/v4";

/// `[gitlab]`: issues from GitLab (`--issue https://HOST/GROUP/NAME/-/issues/N` or
/// `gitlab:GROUP/NAME#N`), `airlock watch --repo gitlab:GROUP/NAME` and GitLab webhooks.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GitlabConfig {
    /// The REST API base, `https://HOST/api/v4` (`https://gitlab.com/api/v4` by default).
    pub api_url: String,
    /// The environment variable holding the token (sent as `PRIVATE-TOKEN`; `read_api` is
    /// enough to read issues); none is sent when absent. When named, it must be set.
    pub token_env: Option<String>,
    /// The issue id's prefix: GitLab issue N becomes `<project_key>-N` (2 to 6 capital
    /// letters). Defaults to the project name's first six letters, capitalised.
    pub project_key: Option<String>,
    /// Include the notes (system notes left out) in the text the run works from, each
    /// marked with its author.
    pub comments: bool,
    /// The most notes included when `comments` is on.
    pub max_comments: usize,
    /// The projects `airlock webhook` takes GitLab deliveries for (`group/name` paths or
    /// numeric ids); a delivery about any other project is refused.
    pub projects: Vec<String>,
}

impl Default for GitlabConfig {
    fn default() -> Self {
        GitlabConfig {
            api_url: GITLAB_COM_API.to_owned(),
            token_env: None,
            project_key: None,
            comments: false,
            max_comments: 50,
            projects: Vec::new(),
        }
    }
}

impl GitlabConfig {
    /// The issue-id prefix for issues of the project at `path` (`group/sub/name`):
    /// `project_key`, else the last segment's letters capitalised (the first six; `GL` when it
    /// has fewer than two).
    pub fn project_key_for(&self, path: &str) -> String {
        if let Some(key) = &self.project_key {
            return key.clone();
        }
        let name = path.rsplit('/').next().unwrap_or(path);
        let letters: String = name
            .chars()
            .filter(char::is_ascii_alphabetic)
            .take(6)
            .collect::<String>()
            .to_ascii_uppercase();
        if letters.len() < 2 {
            "GL".to_owned()
        } else {
            letters
        }
    }

    /// `api_url` checked as `[gitlab] api_url` is (`https://HOST/api/v4`, no credentials); the
    /// problem and what to write instead when it is not.
    pub fn check_api_url(api_url: &str) -> std::result::Result<(), String> {
        api_base(api_url)
            .map(drop)
            .map_err(|e| format!("{e} (gitlab.com's is {GITLAB_COM_API})"))
    }

    /// Whether `project` (a path or an id, as a delivery names it) is one of `projects`; a
    /// path is compared without regard to case, as GitLab does.
    pub fn knows_project(&self, path: Option<&str>, id: Option<u64>) -> bool {
        self.projects
            .iter()
            .filter_map(|p| ProjectId::parse(p).ok())
            .any(|known| match known {
                ProjectId::Id(n) => id == Some(n),
                ProjectId::Path(p) => path.is_some_and(|given| given.eq_ignore_ascii_case(&p)),
            })
    }

    /// The issue-id prefix, the token's variable, the API's address and the projects are well
    /// formed.
    pub(super) fn validate(&self, invalid: &dyn Fn(&str, &str) -> ConfigError) -> Result<()> {
        if let Some(key) = &self.project_key
            && !super::valid_project_key(key)
        {
            return Err(invalid(
                "gitlab.project_key",
                "must be 2 to 6 capital letters A-Z (issue ids are `KEY-123`)",
            ));
        }
        if let Some(var) = &self.token_env
            && !valid_env_name(var)
        {
            return Err(invalid(
                "gitlab.token_env",
                "must name an environment variable (letters, digits and `_`), not hold a token",
            ));
        }
        if let Err(problem) = Self::check_api_url(&self.api_url) {
            return Err(invalid("gitlab.api_url", &problem));
        }
        if self.max_comments == 0 {
            return Err(invalid("gitlab.max_comments", "must be at least 1"));
        }
        for project in &self.projects {
            if let Err(e) = ProjectId::parse(project) {
                return Err(invalid("gitlab.projects", &e.to_string()));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use std::path::Path;

    #[test]
    fn gitlab_keys_are_checked_and_each_error_names_its_key() {
        let c = Config::parse(
            "[gitlab]\napi_url = \"https://git.acme.test/api/v4/\"\ntoken_env = \"GITLAB_TOKEN\"\n\
             project_key = \"ACME\"\nprojects = [\"plat/tools/calc\", \"42\"]\n",
            Path::new("airlock.toml"),
        )
        .unwrap();
        assert_eq!(c.gitlab.project_key_for("plat/calc"), "ACME");
        assert!(c.gitlab.knows_project(Some("Plat/Tools/Calc"), None));
        assert!(c.gitlab.knows_project(None, Some(42)));
        assert!(!c.gitlab.knows_project(Some("plat/other"), Some(43)));
        let d = GitlabConfig::default();
        assert_eq!(d.api_url, "https://gitlab.com/api/v4");
        assert_eq!(d.project_key_for("plat/tools/widgets"), "WIDGET");
        assert_eq!(d.project_key_for("plat/x1"), "GL");
        assert!(!d.knows_project(Some("plat/calc"), Some(1)));
        for (text, key, says) in [
            ("project_key = \"acme\"", "gitlab.project_key", "capital"),
            (
                "token_env = \"glpat-abc\"",
                "gitlab.token_env",
                "environment",
            ),
            ("api_url = \"gitlab.com\"", "gitlab.api_url", "not a URL"),
            (
                "api_url = \"https://u:p@git.acme/api/v4\"",
                "gitlab.api_url",
                "credentials",
            ),
            (
                "api_url = \"https://gitlab.com\"",
                "gitlab.api_url",
                "/api/v4",
            ),
            ("max_comments = 0", "gitlab.max_comments", "at least 1"),
            ("projects = [\"solo\"]", "gitlab.projects", "namespace"),
            ("projets = []", "projets", "unknown field"),
        ] {
            let err = Config::parse(&format!("[gitlab]\n{text}\n"), Path::new("a.toml"))
                .unwrap_err()
                .to_string();
            assert!(err.contains(key) && err.contains(says), "{text}: {err}");
        }
    }
}
