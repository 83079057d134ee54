//! airlock-policies owns the shared rules both untrusting processes apply: the write policy
//! (an allowlist of globs plus classes refused whatever the allowlist says), test recognition
//! per language, detectors for the six forbidden test-weakening moves, the diff digest
//! that the broker recomputes to check a model's `open_pr` claim, and the test rules of
//! [`testrun`] (runners, result parsing, the base inventory, the test environment), and how
//! agent or repository text is shown on a terminal ([`terminal`]).
//!
//! The rules live in `policies/default.toml`, embedded at build time ([`Policy::default`]);
//! an operator may load another file ([`Policy::load`]) or narrow the allowlist. Every rule
//! carries `match`/`not_match` examples checked at load time, so a rule that does not do what
//! it says cannot be loaded. This crate must never write to a repository, run tests, talk to a
//! network or a model, or restate a JSON schema (those live in `airlock-schemas`); the only
//! I/O it does is reading a policy file and reading a repository in [`compute_digest`] and
//! [`diffmap::pull_request_diff`] (the lines a review comment may sit on, [`diffmap`]).
//!
//! ```
//! use airlock_policies::{Policy, WriteDecision};
//! let policy = Policy::default()?;
//! assert_eq!(policy.check_write("src/parse.py"), WriteDecision::Allowed);
//! assert!(matches!(policy.check_write(".GITHUB/workflows/x.yml"), WriteDecision::Refused { .. }));
//! assert!(policy.is_test_path("tests/test_parse.py"));
//! # Ok::<(), airlock_policies::Error>(())
//! ```

mod config;
mod content;
mod detect;
mod diff;
pub mod diffmap;
mod digest;
pub mod languages;
mod locate;
pub mod network;
mod operands;
mod paths;
mod shadow;
pub mod terminal;
mod testcode;
mod testfiles;
pub mod testrun;

pub use content::{BINARY_SNIFF_BYTES, check_change, check_content, is_binary};
pub use detect::{Direction, Mode, MoveKind};
pub use detect::{Finding, Side};
pub use diff::{DiffLine, FileDiff, Hunk, LineKind, files_of_git_diff, parse_unified_diff};
pub use digest::{DigestReport, change_patch, compute_digest};
pub use languages::{Language, is_test_file, language_name, language_of};
pub use operands::Operands;
pub use paths::{MAX_PATH_BYTES, MAX_SYMLINK_HOPS, WriteDecision, normalize_path};
pub use shadow::shadowed_python_module;
pub use testcode::{Scope, TestCodeAction, TestCodeFinding};
pub use testfiles::rust_test_regions;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Errors of this crate.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The policy file could not be read.
    #[error("cannot read policy file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The policy file is not valid TOML or does not have the expected shape (unknown keys
    /// included).
    #[error("{file}:{line}:{column}: {message}")]
    Toml {
        /// The file (or `<embedded default.toml>`).
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What was expected.
        message: String,
    },
    /// A rule is well-formed TOML but wrong: a glob or regex that does not compile, a missing
    /// field, or an example the rule does not classify as it claims.
    #[error("{file}:{line}: rule {rule:?}: {message}")]
    Rule {
        /// The file (or `<embedded default.toml>`).
        file: String,
        /// 1-based line where the rule is defined (best effort, 0 if unknown).
        line: usize,
        /// The rule id.
        rule: String,
        /// What is wrong and what was expected.
        message: String,
    },
    /// The diff text could not be parsed.
    #[error("diff line {line}: {message}")]
    Diff {
        /// 1-based line in the diff text.
        line: usize,
        /// What was expected.
        message: String,
    },
    /// `base_commit` is not a full 40-hex commit id.
    #[error("base commit {0:?} is not a full 40-character lowercase hex commit id")]
    BaseCommit(String),
    /// A git operation failed.
    #[error("git: {context}: {source}")]
    Git {
        /// What was being done.
        context: String,
        /// The libgit2 error.
        source: git2::Error,
    },
    /// Reading a file of the working tree failed.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// Result of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// The loaded, compiled and self-checked policy.
#[derive(Debug, Clone)]
pub struct Policy {
    pub(crate) write: paths::WritePolicy,
    pub(crate) tests: testfiles::TestRules,
    pub(crate) detectors: detect::Detectors,
    pub(crate) test_code: testcode::TestCodeRules,
    pub(crate) repos: std::collections::BTreeMap<String, Vec<String>>,
    pub(crate) origin: String,
}

const EMBEDDED_NAME: &str = "<embedded policies/default.toml>";

impl Policy {
    /// The built-in policy (`policies/default.toml`, embedded at build time), as an owned
    /// copy to narrow with [`Policy::for_repo`] or [`Policy::with_allowlist`].
    #[allow(clippy::should_implement_trait)]
    pub fn default() -> Result<Policy> {
        Policy::builtin().cloned()
    }

    /// The built-in policy, loaded and self-checked once per process. Prefer this on hot
    /// paths: a copy starts with cold regex caches.
    pub fn builtin() -> Result<&'static Policy> {
        static DEFAULT: OnceLock<std::result::Result<Policy, String>> = OnceLock::new();
        DEFAULT
            .get_or_init(|| {
                Policy::from_toml_str(Policy::default_toml(), EMBEDDED_NAME)
                    .map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|message| Error::Rule {
                file: EMBEDDED_NAME.to_string(),
                line: 0,
                rule: "<default>".to_string(),
                message: message.clone(),
            })
    }

    /// The text of the built-in policy file.
    pub fn default_toml() -> &'static str {
        include_str!("../default.toml")
    }

    /// Load a policy file; errors name the file and the line.
    pub fn load(path: &Path) -> Result<Policy> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Policy::from_toml_str(&text, &path.display().to_string())
    }

    /// Parse, compile and self-check a policy from TOML text. `file` names the source in errors.
    pub fn from_toml_str(text: &str, file: &str) -> Result<Policy> {
        config::build(text, file)
    }

    /// Where this policy came from (a path or the embedded default).
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// A copy whose allowlist is replaced by `globs` (an operator override). The refused
    /// classes are untouched: they win whatever the allowlist says.
    pub fn with_allowlist<S: AsRef<str>>(&self, globs: &[S]) -> Result<Policy> {
        let mut out = self.clone();
        let globs: Vec<String> = globs.iter().map(|g| g.as_ref().to_string()).collect();
        out.write.set_allowlist(&globs, &self.origin)?;
        Ok(out)
    }

    /// A copy with the allowlist the policy file sets for `repo` (`[repos."owner/name"]`), or
    /// an unchanged copy when the file names no such repository.
    pub fn for_repo(&self, repo: &str) -> Result<Policy> {
        match self.repos.get(repo) {
            Some(globs) => self.with_allowlist(globs),
            None => Ok(self.clone()),
        }
    }

    /// The allowlist globs in force.
    pub fn allowlist(&self) -> &[String] {
        self.write.allowlist()
    }

    /// Whether the agent may create, edit or delete `path` (repository-relative, as a model
    /// wrote it). Purely lexical: see [`Policy::check_write_in_root`] for symlinks.
    pub fn check_write(&self, path: &str) -> WriteDecision {
        self.write.check(path)
    }

    /// Like [`Policy::check_write`], and additionally resolves symlinks under `root`: a path
    /// that reaches outside `root`, through a dangling link, or into a refused class through a
    /// link is refused.
    pub fn check_write_in_root(&self, root: &Path, path: &str) -> WriteDecision {
        self.write.check_in_root(root, path)
    }

    /// Whether a symlink at `link` may point to `target` (its text, as the tree stores it).
    /// The link's own path is checked first, as [`Policy::check_write`] does; then it is
    /// refused with the rule `symlink-target` when the target is absolute, climbs above the
    /// repository root, goes round more than [`MAX_SYMLINK_HOPS`] links, is the root itself,
    /// or resolves to a path this policy refuses (or to a directory whose files it refuses);
    /// the reason names the link, its target (escaped) and what it resolves to.
    /// `link_at(path)` gives the target of another symlink of the same tree, so chains are
    /// followed. Purely lexical over that tree: nothing is read from a disk.
    pub fn check_symlink(
        &self,
        link: &str,
        target: &str,
        link_at: &dyn Fn(&str) -> Option<String>,
    ) -> WriteDecision {
        self.write.check_symlink(link, target, link_at)
    }

    /// Every path of `paths` the policy refuses, with the decision, in input order. The broker
    /// runs this over [`DigestReport::files_changed`]: deleting a refused file is refused like
    /// editing or creating it. Pass `root` to also resolve symlinks inside the tree.
    pub fn refused_paths<'a, S: AsRef<str>>(
        &self,
        paths: &'a [S],
        root: Option<&Path>,
    ) -> Vec<(&'a str, WriteDecision)> {
        paths
            .iter()
            .map(|p| {
                let p = p.as_ref();
                let decision = match root {
                    Some(root) => self.check_write_in_root(root, p),
                    None => self.check_write(p),
                };
                (p, decision)
            })
            .filter(|(_, d)| !d.is_allowed())
            .collect()
    }

    /// Whether `path` is a test file for its language (by path alone).
    pub fn is_test_path(&self, path: &str) -> bool {
        self.tests.is_test_path(path)
    }

    /// The test-code rules (`[[test_code]]`) that fire on the lines a change adds to `path`:
    /// for a test file, test infrastructure written as a test file (code in a test package's
    /// `__init__.py`, a Go `TestMain` or `init`, pytest hooks) to refuse, and code patched at
    /// import time to flag; for any other file, the `targets = "source"` rules (source that
    /// reaches into the test process: the framework, `sys.modules`, builtins, import hooks).
    /// `old` is the file at base (`None` when new).
    pub fn check_test_code(
        &self,
        path: &str,
        old: Option<&str>,
        new: &str,
    ) -> Vec<TestCodeFinding> {
        self.test_code
            .check(path, old, new, self.is_test_path(path))
    }

    /// Digest of a unified diff text (no repository needed). Rust `#[cfg(test)]` regions are
    /// recognised from hunk headers and hunk lines only; [`Policy::compute_digest`] reads the
    /// full sources instead.
    pub fn digest_from_unified_diff(&self, text: &str) -> Result<DigestReport> {
        digest::from_unified_diff(self, text)
    }

    /// The digest of the working tree of `repo` against `base_commit` (40 hex): tracked
    /// changes and untracked files, ignored files excluded. Deterministic.
    pub fn compute_digest(&self, repo: &Path, base_commit: &str) -> Result<DigestReport> {
        digest::compute(self, repo, base_commit)
    }
}

/// [`Policy::digest_from_unified_diff`] with the built-in policy.
pub fn digest_from_unified_diff(text: &str) -> Result<DigestReport> {
    Policy::builtin()?.digest_from_unified_diff(text)
}

/// [`Policy::is_test_path`] with the built-in policy (false if it failed to load, which the
/// crate's tests rule out).
pub fn is_test_path(path: &str) -> bool {
    Policy::builtin().is_ok_and(|p| p.is_test_path(path))
}
