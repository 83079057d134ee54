//! `[agent]`, `[write]`, `[docs]` and `[reference_repos]`: which agent runs, where it may write,
//! the documentation it keeps and the exemplar repositories it may read.

use super::{ConfigError, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The directory of the project that lists reference repositories, when none is named.
pub const DEFAULT_REFERENCE_REPOS_DIR: &str = ".airlock/reference-repos";

/// Whether `spec` names a definition file rather than a built-in agent: it has a path
/// separator or ends in `.toml`.
pub fn is_definition_path(spec: &str) -> bool {
    spec.contains('/') || spec.ends_with(".toml")
}

/// `[write]`: where the agent may write; handed to `airlock-policies`, which owns the rules.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WriteConfig {
    /// Glob patterns of writable paths; empty means the policy's default allowlist.
    pub allowlist: Vec<String>,
}

/// `[agent]`: which agent `airlock run` runs when `--agent` does not say.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgentConfig {
    /// A built-in agent's name (`issue-fixer`, `docs-writer`) or the path of a definition
    /// file (relative to this file); the issue fixer when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub definition: Option<String>,
    /// The other agents `airlock watch`, `airlock webhook` and `airlock batch --label` start,
    /// each by its definition's `[trigger]`: built-in names or definition files (relative to
    /// this file). The default agent is always started by the trigger label.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub triggered: Vec<String>,
}

/// `[docs]`: the documentation the docs writer (any agent with `docs_dirs = true`) may write
/// besides `**/*.md`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DocsConfig {
    /// Documentation directories, relative to the repository root: every file below each is
    /// writable (the policy's refused classes still win).
    pub dirs: Vec<String>,
    /// The learnings file the docs writer keeps (durable facts about the repository for the
    /// next agent), relative to the repository root. It must not be a path the policy refuses
    /// (`AGENTS.md` is agent configuration): `docs/LEARNINGS.md`, say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub learnings: Option<String>,
}

/// `[reference_repos]`: the operator's exemplar repositories (`crate::reference_repos`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReferenceReposConfig {
    /// The directory of one YAML file per reference repository; relative to the config file's
    /// directory (default `.airlock/reference-repos`). A missing directory means none.
    pub dir: PathBuf,
    /// The most files walked per repository for its structure.
    pub max_files: usize,
}

impl Default for ReferenceReposConfig {
    fn default() -> Self {
        ReferenceReposConfig {
            dir: PathBuf::from(DEFAULT_REFERENCE_REPOS_DIR),
            max_files: airlock_codegraph::structure::DEFAULT_MAX_FILES,
        }
    }
}

impl DocsConfig {
    /// `dirs` and `learnings` must be plain paths relative to the repository root.
    pub(super) fn validate(&self, invalid: &dyn Fn(&str, &str) -> ConfigError) -> Result<()> {
        let repo_relative = |p: &str| {
            let path = Path::new(p);
            !p.is_empty()
                && !p.contains(['*', '?', '[', ']', '{', '}'])
                && path
                    .components()
                    .all(|c| matches!(c, std::path::Component::Normal(_)))
        };
        for dir in &self.dirs {
            if !repo_relative(dir.trim_end_matches('/')) {
                return Err(invalid(
                    "docs.dirs",
                    &format!(
                        "{dir:?} must be a directory relative to the repository root, without `..` or glob characters (e.g. \"docs\")"
                    ),
                ));
            }
        }
        if let Some(learnings) = &self.learnings
            && !repo_relative(learnings)
        {
            return Err(invalid(
                "docs.learnings",
                &format!(
                    "{learnings:?} must be a file path relative to the repository root, without `..` or glob characters (e.g. \"docs/LEARNINGS.md\")"
                ),
            ));
        }
        Ok(())
    }
}

impl AgentConfig {
    /// No agent is named by an empty string.
    pub(super) fn validate(&self, invalid: &dyn Fn(&str, &str) -> ConfigError) -> Result<()> {
        if let Some(definition) = &self.definition
            && definition.trim().is_empty()
        {
            return Err(invalid(
                "agent.definition",
                "is empty; name a built-in agent (issue-fixer, docs-writer) or a definition file",
            ));
        }
        if self.triggered.iter().any(|spec| spec.trim().is_empty()) {
            return Err(invalid(
                "agent.triggered",
                "lists an empty name; list built-in agents (docs-writer, pr-reviewer) or \
                 definition files",
            ));
        }
        Ok(())
    }
}
