//! airlock-checkout owns the read side of a run's repository: it clones a source (local path
//! or URL) once into a bare mirror cache, resolves any ref to a full [`CommitId`], materialises
//! a worktree of that pinned commit whose git config has no remote and no credentials, renders
//! the tracked file tree for prompts within a character budget, and is the one safe way to read
//! (and write) a file inside a tree: [`BoundedReader`] opens the root once with ambient
//! authority and every later access goes through a `cap_std` directory handle, so no path,
//! `..` segment or symlink can leave the tree.
//!
//! It must never: store a credential or remote URL in a worktree; clone the same source twice
//! into the cache; follow a path outside the tree; return more than [`READ_CAP_BYTES`] of
//! content from one read; or put a clock value, random id or unsorted collection in an output
//! (same repository, commit and input give byte-identical results). It decides nothing about
//! which paths an agent may write: that policy lives in `airlock-policies` and is checked by
//! the supervisor before it calls [`BoundedReader::write`].
//!
//! A run uses it in this order (errors elided):
//!
//! ```text
//! let cache = MirrorCache::new("/var/cache/airlock/mirrors")?;
//! let mirror = cache.mirror("https://github.com/owner/name")?;   // cloned once, then reused
//! let commit: CommitId = mirror.resolve("v1.2.3")?;              // pinned from here on
//! let worktree = mirror.materialize(&commit, &run_dir.join("wt"))?;
//! let tree = worktree.file_tree(&FileTreeOptions { char_budget: 4000, query: Some(issue) })?;
//! let reader = worktree.reader()?;
//! match reader.read("src/lib.rs", Some((1, 80))) {
//!     Ok(outcome) => { /* ReadOutcome: content <= 10 KB, line window, sizes */ }
//!     Err(refusal) => { /* refusal.code(): absolute_path, parent_segment, escapes_root, ... */ }
//! }
//! ```

mod commit;
mod mirror;
mod pack;
mod read;
mod tree;

use std::path::PathBuf;

pub use commit::CommitId;
pub use mirror::{
    Mirror, MirrorCache, MirrorOptions, MirrorOrigin, Worktree, file_tree, tracked_blobs,
    tracked_files,
};
pub use read::{
    BINARY_SNIFF_BYTES, BoundedReader, READ_CAP_BYTES, ReadOutcome, ReadRefusal, RefusalCode,
    WriteOutcome,
};
pub use tree::{FileTreeOptions, render_file_tree};

/// Everything that can go wrong in this crate outside a bounded read (reads and writes refuse
/// with [`ReadRefusal`] instead, which the agent sees).
#[derive(Debug, thiserror::Error)]
pub enum CheckoutError {
    /// A string that should have been a full commit id was not.
    #[error("`{value}` is not a full commit id: expected exactly 40 lowercase hex characters")]
    InvalidCommitId {
        /// The rejected text.
        value: String,
    },
    /// A filesystem operation failed.
    #[error("{op} {}: {source}", path.display())]
    Io {
        /// What was being done, e.g. "create mirror cache directory".
        op: &'static str,
        /// The path it was done to.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A libgit2 operation failed.
    #[error("git {op}: {source}")]
    Git {
        /// What was being done, with the object or path involved.
        op: String,
        /// The underlying error.
        source: git2::Error,
    },
    /// The source given to [`MirrorCache::mirror`] is neither a URL nor an existing path.
    #[error("source `{spec}` is not usable: {reason}")]
    InvalidSource {
        /// The source as given (credentials removed).
        spec: String,
        /// Why, and what to give instead.
        reason: String,
    },
    /// Cloning or fetching the source failed.
    #[error("cloning or fetching `{spec}` failed: {detail}")]
    CloneFailed {
        /// The source (credentials removed).
        spec: String,
        /// What git reported.
        detail: String,
    },
    /// No ref, tag or commit matches the revision.
    #[error(
        "revision `{rev}` not found in {}: give a branch, tag, `HEAD`, or a full or short \
         commit id that exists there (refresh the mirror if the commit is newer than the clone)",
        mirror.display()
    )]
    UnknownRevision {
        /// The revision as given.
        rev: String,
        /// The repository searched.
        mirror: PathBuf,
    },
    /// A short commit id matches more than one object.
    #[error(
        "revision `{rev}` is ambiguous in {}: it is a prefix of several objects; give more hex \
         digits or the full 40-character commit id",
        mirror.display()
    )]
    AmbiguousRevision {
        /// The revision as given.
        rev: String,
        /// The repository searched.
        mirror: PathBuf,
    },
    /// The revision names an object that does not peel to a commit (a tree or blob).
    #[error("revision `{rev}` names a {kind}, not a commit: give a branch, tag or commit id")]
    NotACommit {
        /// The revision as given.
        rev: String,
        /// The kind of object it names.
        kind: String,
    },
    /// A pinned commit is not present in the repository it was asked of.
    #[error(
        "commit {commit} is not in {}: resolve it from this mirror, or refresh the mirror",
        mirror.display()
    )]
    CommitNotFound {
        /// The pinned commit.
        commit: CommitId,
        /// The repository searched.
        mirror: PathBuf,
    },
    /// [`Mirror::materialize`] was pointed at a directory that already has content.
    #[error(
        "destination {} exists and is not empty: materialise each run into a fresh directory",
        path.display()
    )]
    DestinationNotEmpty {
        /// The destination given.
        path: PathBuf,
    },
}

/// Result type of this crate.
pub type Result<T> = std::result::Result<T, CheckoutError>;

pub(crate) fn git_err(op: impl Into<String>) -> impl FnOnce(git2::Error) -> CheckoutError {
    let op = op.into();
    move |source| CheckoutError::Git { op, source }
}

pub(crate) fn io_err(
    op: &'static str,
    path: impl Into<PathBuf>,
) -> impl FnOnce(std::io::Error) -> CheckoutError {
    let path = path.into();
    move |source| CheckoutError::Io { op, path, source }
}
