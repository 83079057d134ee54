//! A repository's forge in `broker.toml`: the sub-table `[repositories."NAME".forge]` (`kind =
//! "github" | "gitlab"`, `api_url`, `project`, `token_env`, and GitLab's
//! `feedback_min_access`), or GitHub's flat keys (`forge_token_env`, `forge_repo`,
//! `github_api`) as before. Either form resolves to the flat keys the rest of the broker reads
//! (the token variable, the forge's name of the project), plus, for GitLab, its
//! [`GitLabSettings`]. A table and flat keys that say different things are an error naming both.

use airlock_forge::AccessLevel;
use airlock_forge::gitlab::ProjectId;
use serde::Deserialize;

use crate::config::RepositoryConfig;

/// Which forge a repository is published to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ForgeKind {
    /// GitHub (github.com or GitHub Enterprise), the default.
    #[default]
    GitHub,
    /// GitLab (gitlab.com or a self-managed instance).
    GitLab,
}

/// `[repositories."NAME".forge]` as written.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForgeTable {
    /// `github` or `gitlab`.
    pub kind: ForgeKind,
    /// The REST API's base: `https://api.github.com` (GitHub's default) or
    /// `https://HOST/api/v4` (GitLab's; `https://gitlab.com/api/v4` by default).
    #[serde(default)]
    pub api_url: Option<String>,
    /// GitHub's `owner/name`; GitLab's `group/subgroup/name` path or numeric project id.
    #[serde(default)]
    pub project: Option<String>,
    /// The environment variable holding the token (push credential and API token).
    #[serde(default)]
    pub token_env: Option<String>,
    /// GitLab: the lowest access level whose review comments start a follow-up (`guest`,
    /// `reporter`, `developer`, `maintainer`, `owner`; `developer` by default).
    #[serde(default)]
    pub feedback_min_access: Option<String>,
}

/// A GitLab repository's resolved settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitLabSettings {
    /// `https://HOST/api/v4`.
    pub api_url: String,
    /// The project.
    pub project: ProjectId,
    /// Review comments start a follow-up only from members at or above this level.
    pub feedback_min_access: AccessLevel,
}

/// GitLab's API on gitlab.com.
pub const GITLAB_COM_API: &str = "https://gitlab.com/api/v4";

/// The user name an HTTPS push presents with the token: GitLab takes `oauth2` for any token,
/// GitHub `x-access-token`.
pub fn push_user(kind: ForgeKind) -> &'static str {
    match kind {
        ForgeKind::GitHub => "x-access-token",
        ForgeKind::GitLab => "oauth2",
    }
}

/// The access levels `feedback_min_access` names, lowest first.
const ACCESS_NAMES: [(&str, AccessLevel); 5] = [
    ("guest", AccessLevel::GUEST),
    ("reporter", AccessLevel::REPORTER),
    ("developer", AccessLevel::DEVELOPER),
    ("maintainer", AccessLevel::MAINTAINER),
    ("owner", AccessLevel::OWNER),
];

/// The name of `level` on GitLab's scale (`developer`), or its number when it has none.
pub fn access_name(level: AccessLevel) -> String {
    ACCESS_NAMES
        .iter()
        .rev()
        .find(|(_, l)| *l == level)
        .map(|(n, _)| (*n).to_owned())
        .unwrap_or_else(|| format!("access level {}", level.0))
}

fn parse_access(text: &str) -> Option<AccessLevel> {
    ACCESS_NAMES
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(text.trim()))
        .map(|(_, l)| *l)
}

impl RepositoryConfig {
    /// Which forge the repository is published to.
    pub fn forge_kind(&self) -> ForgeKind {
        if self.gitlab.is_some() {
            ForgeKind::GitLab
        } else {
            ForgeKind::GitHub
        }
    }
}

/// Resolve `repo.forge` (when given) into the flat keys and, for GitLab, `repo.gitlab`; `at` is
/// `repositories."NAME"`. The error names the key and what to write instead.
pub(crate) fn resolve(at: &str, repo: &mut RepositoryConfig) -> Result<(), String> {
    let Some(table) = repo.forge.clone() else {
        return Ok(());
    };
    let key = |k: &str| format!("{at}.forge.{k}");
    let agree = |flat: &str, flat_value: &Option<String>, k: &str, value: &Option<String>| match (
        flat_value, value,
    ) {
        (Some(a), Some(b)) if a != b => Err(format!(
            "{at}.{flat} ({a:?}) and {} ({b:?}) disagree: give it once, in the forge table",
            key(k)
        )),
        _ => Ok(()),
    };
    agree(
        "forge_token_env",
        &repo.forge_token_env,
        "token_env",
        &table.token_env,
    )?;
    if let Some(token_env) = &table.token_env {
        if token_env.trim().is_empty() || token_env.contains('=') {
            return Err(format!(
                "{}: is not an environment variable name (empty, or with a '='): name the \
                 variable that holds the token, never the token itself (not repeated here)",
                key("token_env")
            ));
        }
        repo.forge_token_env = Some(token_env.clone());
    }
    let default_github_api = crate::config::default_github_api();
    match table.kind {
        ForgeKind::GitHub => {
            if table.feedback_min_access.is_some() {
                return Err(format!(
                    "{}: is GitLab's; with kind = \"github\" a reviewer's standing is held to \
                     {at}.feedback_from (author_association values)",
                    key("feedback_min_access")
                ));
            }
            agree("forge_repo", &repo.forge_repo, "project", &table.project)?;
            if let Some(project) = &table.project {
                repo.forge_repo = Some(project.clone());
            }
            if let Some(api) = &table.api_url {
                if repo.github_api != default_github_api && &repo.github_api != api {
                    return Err(format!(
                        "{at}.github_api ({:?}) and {} ({api:?}) disagree: give it once, in the \
                         forge table",
                        repo.github_api,
                        key("api_url")
                    ));
                }
                repo.github_api = api.clone();
            }
        }
        ForgeKind::GitLab => {
            if repo.github_api != default_github_api {
                return Err(format!(
                    "{at}.github_api: is GitHub's API; with kind = \"gitlab\" give {} = \
                     \"https://HOST/api/v4\"",
                    key("api_url")
                ));
            }
            if repo.feedback_from != crate::config::default_feedback_from() {
                return Err(format!(
                    "{at}.feedback_from: holds GitHub's author_association values; with kind = \
                     \"gitlab\" set {} (guest, reporter, developer, maintainer or owner)",
                    key("feedback_min_access")
                ));
            }
            agree("forge_repo", &repo.forge_repo, "project", &table.project)?;
            let project_text = table
                .project
                .clone()
                .or_else(|| repo.forge_repo.clone())
                .ok_or_else(|| {
                    format!(
                        "{}: missing: name the GitLab project as \"group/name\" (or \
                         \"group/subgroup/name\") or by its numeric id",
                        key("project")
                    )
                })?;
            let project =
                ProjectId::parse(&project_text).map_err(|e| format!("{}: {e}", key("project")))?;
            let api_url = table
                .api_url
                .clone()
                .unwrap_or_else(|| GITLAB_COM_API.to_owned());
            // A client is only built to check the address; it holds no token and sends nothing.
            airlock_forge::gitlab::GitLab::new(
                &api_url,
                project.clone(),
                Box::new(airlock_forge::token::NoToken),
            )
            .map_err(|e| format!("{}: {e}", key("api_url")))?;
            let feedback_min_access = match &table.feedback_min_access {
                None => AccessLevel::DEVELOPER,
                Some(text) => parse_access(text).ok_or_else(|| {
                    format!(
                        "{}: {text:?} is no GitLab access level: write guest, reporter, \
                         developer, maintainer or owner",
                        key("feedback_min_access")
                    )
                })?,
            };
            repo.forge_repo = Some(project_text);
            repo.gitlab = Some(GitLabSettings {
                api_url: api_url.trim().trim_end_matches('/').to_owned(),
                project,
                feedback_min_access,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn config(repo: &str) -> Result<crate::config::BrokerConfig, String> {
        let text = format!(
            "socket = \"s\"\nstate_db = \"db\"\nruns_root = \"r\"\naudit_log = \"a\"\n\
             queue_max_age = \"72h\"\n[repositories.\"plat/app\"]\nclone = \"c\"\n\
             remote = \"https://gitlab.example/plat/app.git\"\n{repo}"
        );
        crate::config::BrokerConfig::parse(&text, Path::new("/etc/airlock"))
    }

    #[test]
    fn a_gitlab_table_resolves_its_project_token_and_feedback_level() {
        let c = config(
            "[repositories.\"plat/app\".forge]\nkind = \"gitlab\"\n\
             api_url = \"https://gitlab.example/api/v4/\"\nproject = \"plat/tools/app\"\n\
             token_env = \"GL_TOKEN\"\nfeedback_min_access = \"Maintainer\"\n",
        )
        .unwrap();
        let r = &c.repositories["plat/app"];
        assert_eq!(r.forge_kind(), ForgeKind::GitLab);
        assert_eq!(r.forge_token_env.as_deref(), Some("GL_TOKEN"));
        assert_eq!(r.forge_slug("plat/app"), "plat/tools/app");
        let gl = r.gitlab.as_ref().unwrap();
        assert_eq!(gl.api_url, "https://gitlab.example/api/v4");
        assert_eq!(gl.project, ProjectId::Path("plat/tools/app".to_owned()));
        assert_eq!(gl.feedback_min_access, AccessLevel::MAINTAINER);
        assert_eq!(push_user(r.forge_kind()), "oauth2");

        let c = config("[repositories.\"plat/app\".forge]\nkind = \"gitlab\"\nproject = \"42\"\n")
            .unwrap();
        let gl = c.repositories["plat/app"].gitlab.clone().unwrap();
        assert_eq!(gl.api_url, GITLAB_COM_API);
        assert_eq!(gl.project, ProjectId::Id(42));
        assert_eq!(gl.feedback_min_access, AccessLevel::DEVELOPER);
        assert_eq!(c.repositories["plat/app"].forge_token_env, None);
    }

    #[test]
    fn a_github_table_is_the_flat_keys_and_the_flat_keys_still_work() {
        let table = config(
            "[repositories.\"plat/app\".forge]\nkind = \"github\"\nproject = \"acme/app\"\n\
             token_env = \"GH_TOKEN\"\napi_url = \"http://127.0.0.1:9/\"\n",
        )
        .unwrap();
        let flat = config(
            "forge_repo = \"acme/app\"\nforge_token_env = \"GH_TOKEN\"\n\
             github_api = \"http://127.0.0.1:9/\"\n",
        )
        .unwrap();
        let (t, f) = (
            &table.repositories["plat/app"],
            &flat.repositories["plat/app"],
        );
        assert_eq!(t.forge_kind(), ForgeKind::GitHub);
        assert_eq!(f.forge_kind(), ForgeKind::GitHub);
        assert_eq!(
            (&t.forge_token_env, &t.forge_repo, &t.github_api),
            (&f.forge_token_env, &f.forge_repo, &f.github_api)
        );
        // The same value in both forms is no conflict.
        config(
            "forge_token_env = \"GH_TOKEN\"\n[repositories.\"plat/app\".forge]\nkind = \
             \"github\"\ntoken_env = \"GH_TOKEN\"\nproject = \"acme/app\"\n",
        )
        .unwrap();
    }

    #[test]
    fn a_bad_or_conflicting_forge_is_an_error_naming_the_keys_and_the_fix() {
        let cases = [
            (
                "forge_token_env = \"A\"\n[repositories.\"plat/app\".forge]\nkind = \"gitlab\"\n\
                 project = \"plat/app\"\ntoken_env = \"B\"\n",
                &[
                    "repositories.\"plat/app\".forge_token_env",
                    "repositories.\"plat/app\".forge.token_env",
                    "disagree",
                ][..],
            ),
            (
                "forge_repo = \"acme/app\"\n[repositories.\"plat/app\".forge]\nkind = \"github\"\n\
                 project = \"acme/other\"\n",
                &["forge_repo", "forge.project", "disagree"][..],
            ),
            (
                "[repositories.\"plat/app\".forge]\nkind = \"gitlab\"\n",
                &[
                    "repositories.\"plat/app\".forge.project: missing",
                    "group/name",
                ][..],
            ),
            (
                "[repositories.\"plat/app\".forge]\nkind = \"gitlab\"\nproject = \"plat/app\"\n\
                 api_url = \"https://gitlab.example/api/v3\"\n",
                &["forge.api_url", "/api/v4"][..],
            ),
            (
                "[repositories.\"plat/app\".forge]\nkind = \"gitlab\"\nproject = \"plat/app\"\n\
                 feedback_min_access = \"admin\"\n",
                &[
                    "forge.feedback_min_access",
                    "\"admin\"",
                    "developer, maintainer",
                ][..],
            ),
            (
                "[repositories.\"plat/app\".forge]\nkind = \"github\"\n\
                 feedback_min_access = \"developer\"\n",
                &["forge.feedback_min_access", "feedback_from"][..],
            ),
            (
                "github_api = \"https://ghe.example/api/v3\"\n[repositories.\"plat/app\".forge]\n\
                 kind = \"gitlab\"\nproject = \"plat/app\"\n",
                &["github_api", "forge.api_url"][..],
            ),
            (
                "feedback_from = [\"OWNER\"]\n[repositories.\"plat/app\".forge]\n\
                 kind = \"gitlab\"\nproject = \"plat/app\"\n",
                &["feedback_from", "forge.feedback_min_access"][..],
            ),
            (
                "[repositories.\"plat/app\".forge]\nkind = \"gitlab\"\nproject = \"plat/app\"\n\
                 token_env = \"glpat=abc\"\n",
                &[
                    "repositories.\"plat/app\".forge.token_env",
                    "not an environment variable",
                ][..],
            ),
            (
                "[repositories.\"plat/app\".forge]\nkind = \"gitea\"\nproject = \"plat/app\"\n",
                &["gitea", "github", "gitlab"][..],
            ),
            (
                "[repositories.\"plat/app\".forge]\nkind = \"gitlab\"\nproject = \"plat/app\"\n\
                 token = \"glpat-literal\"\n",
                &["unknown field", "token_env"][..],
            ),
        ];
        for (repo, needles) in cases {
            let err = config(repo).unwrap_err();
            for needle in needles {
                assert!(err.contains(needle), "{needle:?} not in {err}");
            }
        }
        // A token written where its variable's name belongs is not repeated in the error.
        let err = config(
            "[repositories.\"plat/app\".forge]\nkind = \"gitlab\"\nproject = \"plat/app\"\n\
             token_env = \"glpat=abc\"\n",
        )
        .unwrap_err();
        assert!(!err.contains("glpat"), "{err}");
    }

    #[test]
    fn access_levels_have_their_gitlab_names() {
        assert_eq!(access_name(AccessLevel::DEVELOPER), "developer");
        assert_eq!(access_name(AccessLevel(15)), "access level 15");
        assert_eq!(parse_access(" guest "), Some(AccessLevel::GUEST));
        assert_eq!(parse_access("admin"), None);
    }
}
