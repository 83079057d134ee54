//! Repository access for the engine: opening a repository, resolving a revision (with a
//! reason a person can act on when it does not resolve) and walking a commit's tree.

use crate::{Error, Result};
use std::path::Path;

pub(super) fn git_err(action: &str) -> impl FnOnce(git2::Error) -> Error + '_ {
    move |source| Error::Git {
        action: action.to_string(),
        source,
    }
}

pub(crate) fn open_repository(repo_path: &Path) -> Result<git2::Repository> {
    git2::Repository::open(repo_path).map_err(|source| Error::OpenRepo {
        path: repo_path.to_path_buf(),
        source,
    })
}

/// Why a revision did not resolve, in words that say what to give instead.
pub(crate) fn resolve_reason(repo: &git2::Repository, err: &git2::Error) -> String {
    let hint = if repo.is_empty().unwrap_or(false) {
        "the repository has no commits yet"
    } else {
        match (err.code(), err.class()) {
            (git2::ErrorCode::Ambiguous, _) => "the short id is ambiguous; give more hex digits",
            (git2::ErrorCode::NotFound, _) => {
                "no branch, tag or commit has that name (see `git log --oneline`)"
            }
            (_, git2::ErrorClass::Object | git2::ErrorClass::Invalid) => {
                "it does not name a commit (a tree or blob id, or a malformed revision)"
            }
            _ => "",
        }
    };
    if hint.is_empty() {
        err.message().to_string()
    } else {
        format!("{hint} (git: {})", err.message())
    }
}

/// Every blob of `tree` (not symlinks, not submodules) as (path, blob, path is UTF-8). Names
/// that are not UTF-8 are kept under a lossy name (git2's own walk stops at them).
pub(crate) fn walk_tree(
    repo: &git2::Repository,
    tree: &git2::Tree<'_>,
    prefix: &str,
    prefix_utf8: bool,
    out: &mut Vec<(String, git2::Oid, bool)>,
) -> std::result::Result<(), git2::Error> {
    for entry in tree.iter() {
        let name = String::from_utf8_lossy(entry.name_bytes());
        let utf8 = prefix_utf8 && matches!(name, std::borrow::Cow::Borrowed(_));
        match entry.kind() {
            // Symlinks (0o120000) hold a target path, not content.
            Some(git2::ObjectType::Blob) if entry.filemode() != 0o120000 => {
                out.push((format!("{prefix}{name}"), entry.id(), utf8));
            }
            Some(git2::ObjectType::Tree) => {
                let sub = repo.find_tree(entry.id())?;
                walk_tree(repo, &sub, &format!("{prefix}{name}/"), utf8, out)?;
            }
            _ => {}
        }
    }
    Ok(())
}
