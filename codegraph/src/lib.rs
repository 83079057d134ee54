//! airlock-codegraph: zero-LLM retrieval over one pinned commit of a git repository.
//!
//! It owns the retrieval index and everything ranked from it: a lexical channel (BM25 over
//! file text and path, code-aware tokenizer), a structural channel (BM25 over the
//! signatures, docstrings, imports and called names that tree-sitter extracts; both BM25
//! channels are one tantivy index per commit, see [`fulltext`]), a symbol
//! channel (files whose path, module path or defined names the query mentions), their
//! reciprocal rank fusion, a proximity stage (the fused top files re-ranked by the densest
//! window of query terms in their text, see [`window`], joined to the fusion), and the
//! repository map (PageRank over a definitions/references
//! graph, personalised by the query, rendered as a signature outline within a token budget).
//!
//! It reads repositories through git objects only (never a work tree, never the network) and
//! writes only under its index directory. It must never modify a repository, call a model
//! or emit anything non-deterministic in search results or maps (ties are broken by path).
//!
//! # Use
//! ```no_run
//! # fn main() -> airlock_codegraph::Result<()> {
//! use airlock_codegraph::{Engine, default_index_dir};
//! let mut engine = Engine::open("/path/to/repo.git".as_ref(), &default_index_dir())?;
//! let stats = engine.index("HEAD")?;            // incremental by blob id
//! let hits = engine.search(&stats.commit, "TypeError in parse_header", 10)?;
//! let map = engine.repo_map(&stats.commit, "parse_header", 1024)?;
//! # let _ = (hits, map);
//! # Ok(()) }
//! ```
//! `search` and `repo_map` index the commit themselves when it was never indexed.
//!
//! # Index layout
//! See [`store`]: per-blob records shared by all commits plus a per-commit manifest, under
//! `<index-dir>/v1/<repo-key>/`. Moving from commit A to commit B extracts only the blobs B
//! has that no indexed commit had. The tantivy index of a commit is built in memory from the
//! records when the commit is first searched (one segment, documents in path order), so it
//! holds exactly that commit's statistics, and saved beside them as a cache named after a
//! digest of its documents: a later process opens it instead of rebuilding, and a damaged or
//! outdated one is rebuilt. Its bytes carry tantivy's random segment id; what it answers does
//! not depend on them.

mod engine;
pub mod eval;
pub mod extract;
pub mod files;
pub mod fulltext;
pub mod history;
pub mod map;
mod query;
pub mod rank;
pub mod store;
pub mod structure;
pub mod tokenize;
pub mod window;

pub use engine::{
    CHANNEL_WEIGHTS, ChannelRankings, DOCS_FACTOR, Engine, Hit, IndexProgress, IndexStats,
    PROXIMITY_DEPTH, PROXIMITY_LINES, PROXIMITY_WEIGHT, TEST_FACTOR, VENDORED_FACTOR, WINDOW_LINES,
};
pub use files::Language;
pub use map::estimate_tokens;
pub use query::QueryAnalysis;

use std::path::PathBuf;

/// Errors of the retrieval engine.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The path is not a git repository git can open.
    #[error("cannot open git repository {path}: {source}")]
    OpenRepo {
        /// The path given.
        path: PathBuf,
        /// git's reason.
        source: git2::Error,
    },
    /// An index key (the directory naming a repository's index) that cannot be one.
    #[error(
        "invalid index key {key:?}: use letters, digits, '.', '_', '+' and '-' only (at most \
         200), not '.' or '..'; `airlock_codegraph::store::repo_key` makes one from a path"
    )]
    InvalidIndexKey {
        /// The key given.
        key: String,
    },
    /// A revision does not name a commit.
    #[error("cannot resolve {reference:?} to a commit in {repo}: {reason}")]
    Resolve {
        /// The revision given.
        reference: String,
        /// The repository's git directory.
        repo: PathBuf,
        /// Why, and how to name a commit instead (git's own words included).
        reason: String,
    },
    /// A git operation failed.
    #[error("git failed while {action}: {source}")]
    Git {
        /// What was being done.
        action: String,
        /// git's reason.
        source: git2::Error,
    },
    /// A file-system operation failed.
    #[error("cannot {action} {path}: {source}{}", io_hint(source))]
    Io {
        /// What was being done.
        action: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// An index file could not be decoded (or encoded).
    #[error("index file {path} is corrupt ({source}); delete it and run the command again")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// The decoding error.
        source: serde_json::Error,
    },
    /// A commit's manifest vanished between indexing and loading.
    #[error("commit {commit} is not indexed; run `airlock index` on it")]
    NotIndexed {
        /// The commit id.
        commit: String,
    },
    /// A tree-sitter grammar or tags query did not load (a build problem, not an input one).
    #[error("tree-sitter grammar for {language} did not load: {message}")]
    Grammar {
        /// Language name.
        language: &'static str,
        /// tree-sitter's message.
        message: String,
    },
    /// A line of an instances file is not a valid instance.
    #[error(
        "{path}:{line}: not a valid instance ({message}); each line needs instance_id, repo, base_commit, problem_statement and patch"
    )]
    Instance {
        /// The instances file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The JSON error.
        message: String,
    },
    /// The in-memory full-text index failed (a bug or memory exhaustion, not an input problem).
    #[error("full-text index failed: {source}")]
    FullText {
        /// tantivy's reason.
        source: tantivy::TantivyError,
    },
    /// No mirror of a repository was found.
    #[error("no mirror of {repo}; tried {tried}")]
    MissingMirror {
        /// `owner/name`.
        repo: String,
        /// The paths tried.
        tried: String,
    },
}

/// Result of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// The default index directory: `$AIRLOCK_HOME/codegraph`, else
/// `$XDG_CACHE_HOME/airlock/codegraph`, else `~/.cache/airlock/codegraph`, else a folder in
/// the system temporary directory.
pub fn default_index_dir() -> PathBuf {
    let non_empty = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(home) = non_empty("AIRLOCK_HOME") {
        return home.join("codegraph");
    }
    if let Some(cache) = non_empty("XDG_CACHE_HOME") {
        return cache.join("airlock").join("codegraph");
    }
    if let Some(home) = non_empty("HOME") {
        return home.join(".cache").join("airlock").join("codegraph");
    }
    std::env::temp_dir().join("airlock").join("codegraph")
}

impl Error {
    /// Whether this is a stored file that is damaged or gone (which a rebuild repairs).
    pub(crate) fn is_lost_record(&self) -> bool {
        match self {
            Error::Corrupt { .. } => true,
            Error::Io { source, .. } => source.kind() == std::io::ErrorKind::NotFound,
            _ => false,
        }
    }
}

/// How to get past a file-system error of the index directory.
fn io_hint(err: &std::io::Error) -> &'static str {
    match err.kind() {
        std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem => {
            " (choose a writable index directory with --index-dir or AIRLOCK_HOME)"
        }
        _ => "",
    }
}
