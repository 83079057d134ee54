//! The proposal `airlock init` makes, as a typed value: the ecosystem a tree was recognised as,
//! the `[tests]` section and `[write]` allowlist it proposes, why (findings), what the operator
//! must check (warnings), and the extra comments to write above its keys. Detection fills it in;
//! rendering reads it. It depends on no other part of `init`.

use crate::config::{PathsConfig, TestsConfig};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The ecosystem a tree was recognised as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Ecosystem {
    /// `Cargo.toml`.
    Rust,
    /// `go.mod`.
    Go,
    /// `package.json` naming vitest or jest.
    JavaScript,
    /// Python test files or pytest configuration.
    Python,
}

impl Ecosystem {
    /// A person's name for it.
    pub fn name(self) -> &'static str {
        match self {
            Ecosystem::Rust => "Rust",
            Ecosystem::Go => "Go",
            Ecosystem::JavaScript => "JavaScript",
            Ecosystem::Python => "Python",
        }
    }
}

/// Where publication goes: the repository's remote as `init` found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Remote {
    /// The work tree has no remote: approved branches can only be pushed into a local
    /// repository (no pull request).
    None,
    /// A remote on GitHub (github.com, or the GitHub Enterprise `--github-api` names).
    GitHub {
        /// The remote's name in the work tree (`origin`).
        name: String,
        /// Its URL.
        url: String,
        /// `owner/name` on GitHub.
        slug: String,
        /// The REST API base, when it is not `https://api.github.com`.
        api: Option<String>,
    },
    /// A remote on GitLab (a host whose name contains `gitlab`, or the instance `--gitlab-api`
    /// names).
    GitLab {
        /// The remote's name in the work tree (`origin`).
        name: String,
        /// Its URL.
        url: String,
        /// `group/subgroup/name` on GitLab.
        project: String,
        /// The instance's REST API base (`https://HOST/api/v4`).
        api: String,
    },
    /// A remote on another forge or host: branches are pushed there, no pull request is opened.
    Other {
        /// The remote's name in the work tree.
        name: String,
        /// Its URL.
        url: String,
    },
}

impl Remote {
    /// Whether a push to it goes over HTTP(S), where the forge token is the credential.
    pub fn is_https(&self) -> bool {
        match self {
            Remote::None => false,
            Remote::GitHub { url, .. } | Remote::GitLab { url, .. } | Remote::Other { url, .. } => {
                is_http_url(url)
            }
        }
    }
}

/// Whether `url` is an `http://` or `https://` URL.
pub fn is_http_url(url: &str) -> bool {
    let lower = url.trim().to_ascii_lowercase();
    lower.starts_with("https://") || lower.starts_with("http://")
}

/// Where both configuration files put the records, derived from one data directory
/// ([`airlock_audit::data_dir`]): `airlock.toml`'s `[paths]` and `[broker] socket`, and
/// `broker.toml`'s `socket`, `runs_root`, `state_db`, `audit_log` and `allow_ro`.
#[derive(Debug, Clone)]
pub struct Layout {
    /// `[paths]` of `airlock.toml`; `runs_root` is the broker's too.
    pub paths: PathsConfig,
    /// The broker's Unix socket, in both files.
    pub socket: PathBuf,
    /// The broker's state database (SQLite).
    pub state_db: PathBuf,
    /// The broker's own audit log (the runs keep theirs in `paths.audit_log`).
    pub broker_audit_log: PathBuf,
}

impl Layout {
    /// The layout under the data directory `data_dir`.
    pub fn under(data_dir: &Path) -> Layout {
        Layout {
            paths: PathsConfig::under(data_dir),
            socket: data_dir.join("broker.sock"),
            state_db: data_dir.join("broker.db"),
            broker_audit_log: data_dir.join("broker-audit.jsonl"),
        }
    }
}

/// What [`detect`](super::detect) found, and the configuration it proposes.
#[derive(Debug, Clone)]
pub struct Detected {
    /// The repository's working tree, absolute.
    pub repo: PathBuf,
    /// The default repository name: `owner/name` of a GitHub `origin`, else the directory's name.
    pub name: String,
    /// What the tree was recognised as; `None` when nothing was.
    pub ecosystem: Option<Ecosystem>,
    /// Why, one line per finding (written in the file's header).
    pub findings: Vec<String>,
    /// What the operator must check (written in the header and printed on stderr).
    pub warnings: Vec<String>,
    /// The proposed `[tests]` section.
    pub tests: TestsConfig,
    /// Extra comment lines above keys of `[tests]`, by dotted key (`tests.ro`,
    /// `tests.env.PYTHONPATH`, `tests.prepare.command`).
    pub comments: BTreeMap<String, Vec<String>>,
    /// The proposed `[write] allowlist`, sorted (empty: the policy's default).
    pub allowlist: Vec<String>,
    /// The operator's home, to expand `~` for `broker.toml` (which does not).
    pub home: Option<PathBuf>,
    /// The directory the file is written to ([`HostFacts::config_dir`](super::HostFacts::config_dir)).
    pub config_dir: PathBuf,
    /// Where both files put the records ([`HostFacts::data_dir`](super::HostFacts::data_dir)).
    pub layout: Layout,
    /// Where approved branches are pushed.
    pub remote: Remote,
}

impl Detected {
    /// Every host path the proposed configuration grants test runs read-only, absolute and sorted:
    /// `[tests] ro` with `~` expanded, and the prepared environments' directory.
    pub fn granted_paths(&self) -> Vec<String> {
        let mut out: BTreeSet<String> = self
            .tests
            .ro
            .iter()
            .map(|p| expand_home(p, self.home.as_deref()))
            .collect();
        out.insert(path_text(
            &self.config_dir.join(&self.layout.paths.envs_dir),
        ));
        out.into_iter().collect()
    }

    /// What the operator must know about publication when it is not a draft pull request on
    /// GitHub: no remote, or a remote on another forge; `None` for GitHub.
    pub fn publication_note(&self) -> Option<String> {
        match &self.remote {
            Remote::None => Some(
                "the repository has no git remote: approved branches are pushed into the \
                 repository itself (local-only publication, no pull request). To publish on \
                 GitHub, add one (`git remote add origin https://github.com/OWNER/NAME.git`) and \
                 run `airlock init --broker --force` again"
                    .into(),
            ),
            Remote::Other { name, url } => Some(format!(
                "the remote {name} ({url}) is not on GitHub, nor on GitLab as far as its host's \
                 name says: approved branches are pushed to {name} with no pull request. For \
                 GitHub Enterprise, pass --github-api https://HOST/api/v3; for a GitLab instance \
                 whose host name does not say gitlab, --gitlab-api https://HOST/api/v4"
            )),
            Remote::GitLab { project, .. } => Some(format!(
                "the remote is GitLab's project {project}: airlock.toml's [gitlab] reads its \
                 issues, and the repository's [repositories.\"NAME\".forge] table in \
                 broker.toml (kind = \"gitlab\") opens draft merge requests there with the \
                 token in its token_env (docs/publication.md)"
            )),
            Remote::GitHub { .. } => None,
        }
    }

    pub(super) fn comment(&mut self, key: &str, line: impl Into<String>) {
        self.comments
            .entry(key.to_string())
            .or_default()
            .push(line.into());
    }
}

pub(super) fn path_text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// `~` or a leading `~/` replaced by `home`, as `airlock.toml` reads it.
pub(super) fn expand_home(value: &str, home: Option<&Path>) -> String {
    match home {
        Some(home) if value == "~" || value.starts_with("~/") => {
            format!("{}{}", home.display(), &value[1..])
        }
        _ => value.to_string(),
    }
}
