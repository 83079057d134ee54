//! `[github]`: issue intake from GitHub, and the issue ids it gives.

use super::{ConfigError, Result};
use airlock_policies::testrun::valid_env_name;
use serde::{Deserialize, Serialize};

/// `[github]`: issue intake from GitHub (`--issue https://github.com/OWNER/REPO/issues/N`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GithubConfig {
    /// The REST API base: `https://api.github.com`, or a GitHub Enterprise
    /// `https://HOST/api/v3`.
    pub api_url: String,
    /// The environment variable holding the token (a read-only scope is enough for a private
    /// repository); none is sent when absent. When named, it must be set.
    pub token_env: Option<String>,
    /// The issue id's prefix: GitHub issue N becomes `<project_key>-N` (2 to 6 capital
    /// letters, the `open_pr` pattern). Defaults to the repository name's first six letters,
    /// capitalised.
    pub project_key: Option<String>,
    /// Include the comments in the text the run works from, each marked with its
    /// author.
    pub comments: bool,
    /// The most comments included when `comments` is on.
    pub max_comments: usize,
}

impl Default for GithubConfig {
    fn default() -> Self {
        GithubConfig {
            api_url: "https://api.github.com".to_owned(),
            token_env: None,
            project_key: None,
            comments: false,
            max_comments: 50,
        }
    }
}

impl GithubConfig {
    /// The issue-id prefix for issues of repository `repo`: `project_key`, else the repository
    /// name's letters capitalised (the first six; `GH` when it has fewer than two).
    pub fn project_key_for(&self, repo: &str) -> String {
        if let Some(key) = &self.project_key {
            return key.clone();
        }
        let letters: String = repo
            .chars()
            .filter(char::is_ascii_alphabetic)
            .take(6)
            .collect::<String>()
            .to_ascii_uppercase();
        if letters.len() < 2 {
            "GH".to_owned()
        } else {
            letters
        }
    }
}

/// Whether `key` fits the issue-id prefix of the `open_pr` pattern (2 to 6 capital letters).
pub fn valid_project_key(key: &str) -> bool {
    (2..=6).contains(&key.len()) && key.bytes().all(|b| b.is_ascii_uppercase())
}

impl GithubConfig {
    /// The issue-id prefix, the token's variable and the API's address are well formed.
    pub(super) fn validate(&self, invalid: &dyn Fn(&str, &str) -> ConfigError) -> Result<()> {
        if let Some(key) = &self.project_key
            && !valid_project_key(key)
        {
            return Err(invalid(
                "github.project_key",
                "must be 2 to 6 capital letters A-Z (issue ids are `KEY-123`)",
            ));
        }
        if let Some(var) = &self.token_env
            && !valid_env_name(var)
        {
            return Err(invalid(
                "github.token_env",
                "must name an environment variable (letters, digits and `_`), not hold a token",
            ));
        }
        let api = self.api_url.trim();
        if !(api.starts_with("https://") || api.starts_with("http://")) || api.contains('@') {
            return Err(invalid(
                "github.api_url",
                "must be an http(s) URL without credentials, e.g. https://api.github.com",
            ));
        }
        Ok(())
    }
}

/// `[questions]`: whether a triggered run that escalates on an ambiguous issue asks its
/// question on the issue (through the broker), and how many times per issue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct QuestionsConfig {
    /// Ask at all (default on; only triggered runs ask).
    pub enabled: bool,
    /// The most questions asked on one issue; past it an escalation stays a plain one.
    pub max_rounds: u32,
}

impl Default for QuestionsConfig {
    fn default() -> Self {
        QuestionsConfig {
            enabled: true,
            max_rounds: 2,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use std::path::Path;

    #[test]
    fn github_keys_are_checked() {
        let c = Config::parse(
            "[github]\napi_url = \"https://ghe.acme.test/api/v3\"\ntoken_env = \"GITHUB_TOKEN\"\nproject_key = \"ACME\"\ncomments = true\n",
            Path::new("airlock.toml"),
        )
        .unwrap();
        assert_eq!(c.github.project_key_for("widgets"), "ACME");
        assert!(c.github.comments);
        let d = GithubConfig::default();
        assert_eq!(d.project_key_for("widgets"), "WIDGET");
        assert_eq!(d.project_key_for("go-x"), "GOX");
        assert_eq!(d.project_key_for("x1"), "GH");
        for (text, key) in [
            ("project_key = \"acme\"", "github.project_key"),
            ("project_key = \"ABCDEFG\"", "github.project_key"),
            ("token_env = \"ghp_abc-123\"", "github.token_env"),
            ("api_url = \"api.github.com\"", "github.api_url"),
            ("api_url = \"https://u:p@ghe/api/v3\"", "github.api_url"),
            ("max_comments = 0", "github.max_comments"),
        ] {
            let err = Config::parse(&format!("[github]\n{text}\n"), Path::new("a.toml"))
                .unwrap_err()
                .to_string();
            assert!(err.contains(key), "{text}: {err}");
        }
    }
}
