//! The [`Engine`] value: the repository, the index store, the blob records loaded so far and
//! the current commit's snapshot; opening it on a repository and resolving revisions.

use super::git::{open_repository, resolve_reason};
use super::snapshot::Snapshot;
use crate::store::{BlobRecord, Store};
use crate::{Error, Result};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The retrieval engine over one git repository (bare or not) and one index directory.
pub struct Engine {
    pub(super) repo: git2::Repository,
    /// A second handle on the repository, opened on the first query, for the thread that
    /// reads half of the proximity stage's blobs (a `git2::Repository` serves one thread at a
    /// time).
    pub(super) second_repo: std::sync::Mutex<Option<git2::Repository>>,
    pub(super) repo_path: PathBuf,
    pub(super) store: Store,
    pub(super) records: HashMap<String, Arc<BlobRecord>>,
    pub(super) snapshot: Option<Arc<Snapshot>>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("repo_path", &self.repo_path)
            .field("store", &self.store.root())
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// Open the repository at `repo_path` (a bare repository, a `.git` directory or a work
    /// tree) with its index kept under `index_dir`.
    pub fn open(repo_path: &Path, index_dir: &Path) -> Result<Engine> {
        let repo = open_repository(repo_path)?;
        let store = Store::new(index_dir, repo.path());
        Ok(Engine::with_store(repo, store))
    }

    /// Open `repo_path` with its index stored under `key` instead of the repository's own
    /// path: a throwaway checkout of a project (a run's worktree) then shares the index of the
    /// project's mirror (`store::repo_key(mirror_path)`), which every run and reader on that
    /// project uses, so an index is built once and moved between commits by blob id.
    pub fn open_keyed(repo_path: &Path, index_dir: &Path, key: &str) -> Result<Engine> {
        if !crate::store::valid_key(key) {
            return Err(Error::InvalidIndexKey {
                key: key.to_string(),
            });
        }
        let repo = open_repository(repo_path)?;
        Ok(Engine::with_store(repo, Store::keyed(index_dir, key)))
    }

    fn with_store(repo: git2::Repository, store: Store) -> Engine {
        Engine {
            store,
            repo_path: repo.path().to_path_buf(),
            repo,
            second_repo: std::sync::Mutex::new(None),
            records: HashMap::new(),
            snapshot: None,
        }
    }

    /// Where this repository's index lives.
    pub fn store_dir(&self) -> &Path {
        self.store.root()
    }

    /// Resolve any revision (`HEAD`, a branch, a tag, a short or full id) to a full commit id.
    pub fn resolve(&self, reference: &str) -> Result<String> {
        let object = self
            .repo
            .revparse_single(reference)
            .and_then(|o| o.peel_to_commit())
            .map_err(|source| Error::Resolve {
                reference: reference.to_string(),
                repo: self.repo_path.clone(),
                reason: resolve_reason(&self.repo, &source),
            })?;
        Ok(object.id().to_string())
    }
}
