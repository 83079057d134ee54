//! `airlock init`: a first `airlock.toml` for a repository, from what its working tree shows, and
//! the `[repositories."NAME"]` block of `broker.toml` that goes with it.
//!
//! Detection is a handful of plain rules, repeated in the header of every generated file
//! ([`DETECTION_RULES`]): `Cargo.toml` means `cargo test`, `go.mod` means `go test`, a
//! `package.json` naming vitest or jest means that runner, and a Python tree means pytest when it
//! is configured or imported, else unittest when it has test files. The toolchain is the one the
//! sandbox will find: a venv in the repository, else the host's, resolved to its real executable
//! and granted read-only when it lies outside the sandbox's system directories; a Python tree
//! gets the `[tests.prepare.python]` recipe (`python`), and what the project's CI files say is
//! read too (`ci`). What the host
//! offers is gathered once into [`HostFacts`], so the rules are tested on faked hosts; the output
//! depends only on the tree and those facts, and every list in it is sorted.
//!
//! This module never reads a network and never runs the repository's code: it asks `git` for the
//! work tree's top, the tracked files and the remote (`origin`, else the only one; with
//! `core.fsmonitor` off for the listing), `python3` and each
//! `python3.N` it finds (isolated, `-I`) and `go` where they live. It writes nothing but the one file it is asked to
//! ([`write_config`]), which must load with [`Config::parse`] first.
//!
//! Its parts, lowest first; each imports only parts listed before it:
//! - `proposal`: what detection proposes, as a typed value ([`Detected`]);
//! - `host`: what the host offers ([`HostFacts`]) and how it is asked;
//! - `tree`: the repository's files and name;
//! - `toolchains`, `python`, `ci`: the detection rules for Rust, Go and JavaScript, for Python,
//!   and from the project's CI;
//! - `render`: the proposal as the commented `airlock.toml` and the broker block, through
//!   `toml_edit`;
//! - this module: [`detect`], which runs the rules, and [`write_config`].

use crate::config::{Config, ConfigError, TestsConfig};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

mod ci;
mod host;
mod proposal;
mod python;
mod render;
mod toolchains;
mod tree;

pub use host::{GoFacts, HostFacts, PythonFacts};
pub use proposal::{Detected, Ecosystem, Layout, Remote, is_http_url};
pub use render::{DETECTION_RULES, render_airlock_toml, render_broker_block, render_broker_toml};
pub use tree::{
    ForgeApi, classify_remote, classify_remote_with, github_slug, host_and_project, host_and_slug,
};

use ci::{from_ci, read_ci};
use python::{configure_python, python_runner};
use toolchains::{
    allowlist, configure_go, configure_javascript, configure_rust, javascript_runner,
};
use tree::{Tree, read_remote, repository_name, work_tree_top};

/// Errors writing the generated configuration.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// The output file exists and `--force` was not given.
    #[error("{} already exists: pass --force to overwrite it", path.display())]
    Exists {
        /// The output file.
        path: PathBuf,
    },
    /// The output file could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The output file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// `--repo` is not the top of a git work tree; nothing was written.
    #[error("{}", not_a_work_tree(path, top.as_deref()))]
    NotAWorkTree {
        /// The directory given.
        path: PathBuf,
        /// The top of the work tree holding it, when it lies inside one.
        top: Option<PathBuf>,
    },
    /// The generated text does not load as an `airlock.toml`; nothing was written.
    #[error(
        "the generated configuration does not load, so it was not written (a bug in airlock init): {0}"
    )]
    Generated(#[from] ConfigError),
}

fn not_a_work_tree(path: &Path, top: Option<&Path>) -> String {
    match top {
        Some(top) => format!(
            "{} is inside the git repository {}, not its top: pass --repo {}",
            path.display(),
            top.display(),
            top.display()
        ),
        None => format!(
            "{} is not a git repository: airlock works on a repository's commits. Pass --repo \
             the repository's directory, or make this one a repository first (`git init && git \
             add -A && git commit -m initial`)",
            path.display()
        ),
    }
}

/// Check that `repo` is the top directory of a git work tree, the only kind `init` configures.
pub fn check_work_tree(repo: &Path) -> Result<()> {
    let path = std::path::absolute(repo).unwrap_or_else(|_| repo.to_path_buf());
    let real = path.canonicalize().unwrap_or_else(|_| path.clone());
    match work_tree_top(&path) {
        Some(top) if top.canonicalize().unwrap_or_else(|_| top.clone()) == real => Ok(()),
        top => Err(InitError::NotAWorkTree { path, top }),
    }
}

/// Result alias of this module.
pub type Result<T> = std::result::Result<T, InitError>;

/// Inspect the working tree at `repo` and propose its configuration. Never fails: what cannot
/// be read counts as absent, and what the operator must check is in [`Detected::warnings`].
pub fn detect(repo: &Path, host: &HostFacts) -> Detected {
    detect_for(repo, host, ForgeApi::FromHost)
}

/// [`detect`], a remote on any host counting as the forge's whose API `forge_api` names
/// (GitHub Enterprise's, a GitLab instance's).
pub fn detect_for(repo: &Path, host: &HostFacts, forge_api: ForgeApi<'_>) -> Detected {
    let repo = std::path::absolute(repo).unwrap_or_else(|_| repo.to_path_buf());
    // Both files name it: without `..` or a symlink, as the broker resolves paths.
    let repo = repo.canonicalize().unwrap_or(repo);
    let mut warnings = Vec::new();
    let tree = Tree::list(&repo, &mut warnings);
    let remote = read_remote(&repo, forge_api);
    let mut d = Detected {
        name: repository_name(&repo, &remote),
        layout: Layout::under(&host.data_dir),
        remote,
        repo,
        ecosystem: None,
        findings: Vec::new(),
        warnings,
        tests: TestsConfig::default(),
        comments: BTreeMap::new(),
        allowlist: Vec::new(),
        home: host.home.clone(),
        config_dir: host.config_dir.clone(),
    };

    let js = javascript_runner(&tree, &mut d);
    let python = python_runner(&tree);
    let mut candidates: Vec<(Ecosystem, String)> = Vec::new();
    if tree.has("Cargo.toml") {
        candidates.push((Ecosystem::Rust, "Cargo.toml".into()));
    }
    if tree.has("go.mod") {
        candidates.push((Ecosystem::Go, "go.mod".into()));
    }
    if let Some((runner, why)) = &js {
        candidates.push((Ecosystem::JavaScript, format!("{runner} ({why})")));
    }
    if let Some((runner, why)) = &python {
        candidates.push((Ecosystem::Python, format!("{runner} ({why})")));
    }
    let Some((ecosystem, why)) = candidates.first().cloned() else {
        d.warnings.push(
            "nothing was recognised (no Cargo.toml, go.mod, package.json naming vitest or jest, \
             nor Python tests): [tests] holds the default unittest command; set the command and \
             runner by hand"
                .into(),
        );
        return d;
    };
    d.ecosystem = Some(ecosystem);
    d.findings
        .push(format!("Recognised {}: {why}", ecosystem.name()));
    for (other, why) in candidates.iter().skip(1) {
        d.findings.push(format!(
            "Also found {}: {why} (airlock runs one test command; edit [tests] to choose it \
             instead)",
            other.name()
        ));
    }
    let ci = read_ci(&tree);
    match ecosystem {
        Ecosystem::Rust => configure_rust(&tree, host, &mut d),
        Ecosystem::Go => configure_go(host, &mut d),
        Ecosystem::JavaScript => {
            if let Some((runner, _)) = js {
                configure_javascript(&tree, host, runner, &mut d);
            }
        }
        Ecosystem::Python => {
            if let Some((runner, _)) = python {
                configure_python(&tree, host, runner, &ci.installs, &mut d);
            }
        }
    }
    d.allowlist = allowlist(&tree, ecosystem);
    from_ci(&tree, &ci, host, &mut d);
    d
}

/// Write `text` to `path` after checking it loads as an `airlock.toml`; an existing file is
/// refused unless `force`.
pub fn write_config(path: &Path, text: &str, force: bool) -> Result<()> {
    Config::parse(text, path)?;
    write_file(path, text, force)
}

/// Write `text` to `path`, synced; an existing file is refused unless `force`.
pub fn write_file(path: &Path, text: &str, force: bool) -> Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true);
    if force {
        options.create(true).truncate(true);
    } else {
        options.create_new(true);
    }
    let mut file = options.open(path).map_err(|source| {
        if source.kind() == std::io::ErrorKind::AlreadyExists {
            InitError::Exists {
                path: path.to_path_buf(),
            }
        } else {
            InitError::Write {
                path: path.to_path_buf(),
                source,
            }
        }
    })?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|source| InitError::Write {
            path: path.to_path_buf(),
            source,
        })
}

#[cfg(test)]
mod tests;
