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
            &self.config_dir.join(PathsConfig::default().envs_dir),
        ));
        out.into_iter().collect()
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
