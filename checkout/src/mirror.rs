//! The mirror cache (one bare clone per source, reused across runs and issues), ref resolution
//! and per-run worktrees of a pinned commit.

use std::collections::HashSet;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use crate::read::BoundedReader;
use crate::tree::{FileTreeOptions, render_file_tree};
use crate::{CheckoutError, CommitId, Result, git_err, io_err};

/// File written inside a mirror once its first clone completed; its absence means "not cloned".
const MARKER_FILE: &str = "airlock-mirror.json";

/// Every ref of the source, as `git clone --mirror` takes them.
const MIRROR_REFSPEC: &str = "+refs/*:refs/*";

/// How [`MirrorCache::mirror_with`] treats an existing mirror.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct MirrorOptions {
    /// Fetch from the source when the mirror already exists (new commits, moved refs, pruned
    /// refs). Without it an existing mirror is used as it is, with no network or disk traffic.
    pub refresh: bool,
    /// A token for an HTTP(S) source (a forge's read token, user `x-access-token`): handed to
    /// the `git` child through a credential helper that reads it from a variable set on that
    /// child only, so it is never in an argv, a config, the cache or an error. Local sources
    /// ignore it.
    pub http_token: Option<String>,
}

impl std::fmt::Debug for MirrorOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MirrorOptions")
            .field("refresh", &self.refresh)
            .field("http_token", &self.http_token.as_ref().map(|_| "***"))
            .finish()
    }
}

/// The variable the credential helper of [`MirrorOptions::http_token`] reads.
const TOKEN_VAR: &str = "AIRLOCK_CHECKOUT_TOKEN";

/// What [`MirrorCache::mirror_with`] had to do to hand out the mirror.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MirrorOrigin {
    /// The source was cloned by this call.
    Cloned,
    /// An existing mirror was reused untouched.
    Reused,
    /// An existing mirror was fetched into (`refresh`).
    Refreshed,
    /// An existing repository opened with [`Mirror::open`], outside any cache.
    Opened,
}

/// A directory of bare mirrors, one per normalised source, named deterministically.
///
/// Concurrent calls (threads or processes) for the same source serialise on a lock file next
/// to the mirror, so a source is cloned exactly once and never observed half-cloned: a clone
/// is built in a `.partial` directory and renamed into place when complete.
#[derive(Debug, Clone)]
pub struct MirrorCache {
    dir: PathBuf,
}

impl MirrorCache {
    /// Uses `dir` as the cache, creating it if needed.
    pub fn new(dir: impl Into<PathBuf>) -> Result<MirrorCache> {
        let dir = dir.into();
        fs::create_dir_all(&dir).map_err(io_err("create mirror cache directory", &dir))?;
        Ok(MirrorCache { dir })
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The mirror for `source`, cloning it on first use and reusing it afterwards (no fetch).
    /// Same as [`MirrorCache::mirror_with`] with default options.
    pub fn mirror(&self, source: &str) -> Result<Mirror> {
        self.mirror_with(source, &MirrorOptions::default())
    }

    /// The mirror for `source`: a local path (a normal or bare repository; `file://` URLs too)
    /// or a remote URL (`https://`, `ssh://`, `git://`, or `user@host:path`).
    ///
    /// Local sources are cloned with libgit2. Remote URLs are cloned with the `git` CLI (this
    /// crate builds libgit2 without TLS or SSH), with terminal prompts disabled; credentials
    /// come from git's own credential helpers, or from the URL given on each call, and are
    /// never written into the cache's configs or its directory names.
    pub fn mirror_with(&self, source: &str, options: &MirrorOptions) -> Result<Mirror> {
        let source = Source::classify(source)?;
        let name = source.cache_name();
        let path = self.dir.join(&name);
        let lock_path = self.dir.join(format!("{name}.lock"));
        let lock = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(io_err("open mirror lock", &lock_path))?;
        lock.lock().map_err(io_err("lock mirror", &lock_path))?;
        // The lock is released when `lock` is dropped at the end of this function.
        let origin = if path.join(MARKER_FILE).is_file() {
            if options.refresh {
                source.fetch_into(&path, options.http_token.as_deref())?;
                MirrorOrigin::Refreshed
            } else {
                MirrorOrigin::Reused
            }
        } else {
            self.clone_fresh(&source, &path, &name, options.http_token.as_deref())?;
            MirrorOrigin::Cloned
        };
        let repo = git2::Repository::open_bare(&path)
            .map_err(git_err(format!("open mirror {}", path.display())))?;
        drop(lock);
        Ok(Mirror {
            path,
            source: source.display,
            origin,
            repo,
        })
    }

    fn clone_fresh(
        &self,
        source: &Source,
        path: &Path,
        name: &str,
        token: Option<&str>,
    ) -> Result<()> {
        let partial = self.dir.join(format!("{name}.partial"));
        // Leftovers of an interrupted clone: we hold the lock, so nobody else is using them.
        for stale in [&partial, &path.to_path_buf()] {
            if stale.exists() {
                fs::remove_dir_all(stale).map_err(io_err("remove incomplete mirror", stale))?;
            }
        }
        let cloned = match &source.kind {
            SourceKind::Local(src) => clone_local(src, &partial, &source.display),
            SourceKind::Remote(url) => clone_remote(url, &partial, &source.display, token),
        };
        if let Err(e) = cloned {
            // Best effort: the next attempt removes it anyway, under the lock.
            let _ = fs::remove_dir_all(&partial);
            return Err(e);
        }
        let marker = serde_json::json!({ "source": source.display });
        let marker_path = partial.join(MARKER_FILE);
        let mut file =
            fs::File::create(&marker_path).map_err(io_err("write mirror marker", &marker_path))?;
        file.write_all(format!("{marker}\n").as_bytes())
            .map_err(io_err("write mirror marker", &marker_path))?;
        fs::rename(&partial, path).map_err(io_err("move clone into place", path))?;
        Ok(())
    }

    /// The directory name a source is cached under: a readable slug of its last two path
    /// segments plus 16 hex of the SHA-256 of the normalised source (credentials removed).
    pub fn cache_name(source: &str) -> Result<String> {
        Ok(Source::classify(source)?.cache_name())
    }
}

/// A bare mirror of one source (or any repository opened with [`Mirror::open`]).
pub struct Mirror {
    path: PathBuf,
    source: String,
    origin: MirrorOrigin,
    repo: git2::Repository,
}

impl std::fmt::Debug for Mirror {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mirror")
            .field("path", &self.path)
            .field("source", &self.source)
            .field("origin", &self.origin)
            .finish()
    }
}

impl Mirror {
    /// Opens an existing repository (bare or with a work tree) as a read-only source of
    /// commits, outside any cache; for example a directory of mirrors prepared for an
    /// evaluation.
    pub fn open(path: &Path) -> Result<Mirror> {
        let repo = git2::Repository::open(path)
            .map_err(git_err(format!("open repository {}", path.display())))?;
        Ok(Mirror {
            path: path.to_path_buf(),
            source: path.display().to_string(),
            origin: MirrorOrigin::Opened,
            repo,
        })
    }

    /// Where the mirror lives.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The normalised source it mirrors, without credentials.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether this handle came from a fresh clone, a reuse or a refresh.
    pub fn origin(&self) -> MirrorOrigin {
        self.origin
    }

    /// The branch the repository's `HEAD` names (its default branch, for a mirror), without
    /// `refs/heads/`; `None` for a detached `HEAD`.
    pub fn head_branch(&self) -> Option<String> {
        let head = self.repo.find_reference("HEAD").ok()?;
        let target = head.symbolic_target().ok()??;
        Some(
            target
                .strip_prefix("refs/heads/")
                .unwrap_or(target)
                .to_owned(),
        )
    }

    /// Resolves `rev` (branch, tag, `HEAD`, short or full commit id, or any single-revision
    /// git syntax such as `main~2`) to the full id of the commit it names. Annotated tags are
    /// peeled. Ranges are rejected.
    pub fn resolve(&self, rev: &str) -> Result<CommitId> {
        let trimmed = rev.trim();
        let unknown = || CheckoutError::UnknownRevision {
            rev: rev.to_owned(),
            mirror: self.path.clone(),
        };
        if trimmed.is_empty() || trimmed.starts_with('-') || trimmed.contains("..") {
            return Err(unknown());
        }
        let object = match self.repo.revparse_single(trimmed) {
            Ok(object) => object,
            Err(e) if e.code() == git2::ErrorCode::Ambiguous => {
                return Err(CheckoutError::AmbiguousRevision {
                    rev: rev.to_owned(),
                    mirror: self.path.clone(),
                });
            }
            Err(e)
                if matches!(
                    e.code(),
                    git2::ErrorCode::NotFound
                        | git2::ErrorCode::InvalidSpec
                        | git2::ErrorCode::UnbornBranch
                ) =>
            {
                return Err(unknown());
            }
            Err(source) => {
                return Err(CheckoutError::Git {
                    op: format!("resolve `{rev}` in {}", self.path.display()),
                    source,
                });
            }
        };
        let kind = object
            .kind()
            .map_or_else(|| "unknown object".to_owned(), |k| k.to_string());
        let commit = object
            .peel_to_commit()
            .map_err(|_| CheckoutError::NotACommit {
                rev: rev.to_owned(),
                kind,
            })?;
        CommitId::from_oid(commit.id())
    }

    /// When `commit` was committed: its committer time, in seconds since the Unix epoch (what
    /// "as of the pin" means when an environment is resolved the way it was on that day).
    pub fn commit_time(&self, commit: &CommitId) -> Result<i64> {
        let oid = git2::Oid::from_str(commit.as_str()).map_err(|source| CheckoutError::Git {
            op: format!("read commit {commit}"),
            source,
        })?;
        let found = self
            .repo
            .find_commit(oid)
            .map_err(|source| CheckoutError::Git {
                op: format!("read commit {commit} in {}", self.path.display()),
                source,
            })?;
        Ok(found.committer().when().seconds())
    }

    /// The newest tag reachable from `commit` and how many commits lie between them
    /// (`git describe --tags`), what a version computed from git (`setuptools_scm`,
    /// versioneer) reads; `None` without a reachable tag. A worktree holds the pinned commit
    /// alone, so only the mirror can tell.
    pub fn describe(&self, commit: &CommitId) -> Option<(String, usize)> {
        let oid = git2::Oid::from_str(commit.as_str()).ok()?;
        let object = self.repo.find_object(oid, None).ok()?;
        let mut options = git2::DescribeOptions::new();
        options.describe_tags();
        let described = object.describe(&options).ok()?;
        let mut format = git2::DescribeFormatOptions::new();
        format.abbreviated_size(0);
        let tag = described.format(Some(&format)).ok()?;
        let tag_oid = self
            .repo
            .revparse_single(&tag)
            .ok()?
            .peel_to_commit()
            .ok()?
            .id();
        let mut walk = self.repo.revwalk().ok()?;
        walk.push(oid).ok()?;
        walk.hide(tag_oid).ok()?;
        Some((tag, walk.count()))
    }

    /// Every tracked file path of `commit`, `/`-separated, sorted bytewise. Submodules are
    /// listed as their path (they have no content here).
    pub fn tracked_files(&self, commit: &CommitId) -> Result<Vec<String>> {
        tracked_files_in(&self.repo, &self.path, commit)
    }

    /// The tracked file tree of `commit` rendered for a prompt (see [`render_file_tree`]).
    pub fn file_tree(&self, commit: &CommitId, options: &FileTreeOptions<'_>) -> Result<String> {
        Ok(render_file_tree(&self.tracked_files(commit)?, options))
    }

    /// Creates at `dest` (absent or empty) a normal git repository whose HEAD is `commit`,
    /// detached, with its files checked out and a clean status.
    ///
    /// The new repository holds only the objects of that commit (the commit and its trees and
    /// blobs) and records itself as shallow, so it is self-contained (no alternates pointing
    /// back at the cache), carries no history or refs newer than the pin, and its
    /// `.git/config` has no remote, URL or credential. No network is involved.
    pub fn materialize(&self, commit: &CommitId, dest: &Path) -> Result<Worktree> {
        let oid = commit.to_oid()?;
        let source_commit =
            self.repo
                .find_commit(oid)
                .map_err(|_| CheckoutError::CommitNotFound {
                    commit: commit.clone(),
                    mirror: self.path.clone(),
                })?;
        if dest.exists() {
            let mut entries = fs::read_dir(dest).map_err(io_err("read destination", dest))?;
            if entries.next().is_some() {
                return Err(CheckoutError::DestinationNotEmpty {
                    path: dest.to_path_buf(),
                });
            }
        }
        let mut init = git2::RepositoryInitOptions::new();
        init.bare(false)
            .mkdir(true)
            .no_reinit(true)
            .external_template(false);
        let repo = git2::Repository::init_opts(dest, &init)
            .map_err(git_err(format!("init worktree {}", dest.display())))?;

        copy_commit_objects(&self.repo, &repo, &source_commit)?;
        let shallow = repo.path().join("shallow");
        fs::write(&shallow, format!("{commit}\n")).map_err(io_err("write", &shallow))?;
        repo.set_head_detached(oid)
            .map_err(git_err(format!("detach HEAD at {commit}")))?;
        let mut checkout = git2::build::CheckoutBuilder::new();
        checkout.force();
        repo.checkout_head(Some(&mut checkout))
            .map_err(git_err(format!(
                "check out {commit} into {}",
                dest.display()
            )))?;
        Ok(Worktree {
            path: dest.to_path_buf(),
            commit: commit.clone(),
        })
    }
}

/// Copies the commit object and every tree and blob reachable from its root tree into `to`
/// as one pack. Submodule entries (commits of other repositories) are not included: they are
/// not in this object database.
///
/// The pack is written by hand, without delta compression and with zlib "stored" blocks, and
/// indexed by libgit2: libgit2's own pack builder spends most of its time searching for
/// deltas, which a throwaway per-run repository does not need (the pack is about the size
/// of the checked-out files).
fn copy_commit_objects(
    from: &git2::Repository,
    to: &git2::Repository,
    commit: &git2::Commit<'_>,
) -> Result<()> {
    let mut ids = vec![commit.id()];
    let root = commit.tree().map_err(git_err("read root tree"))?;
    let mut seen: HashSet<git2::Oid> = HashSet::new();
    seen.insert(root.id());
    ids.push(root.id());
    let mut pending = vec![root];
    while let Some(tree) = pending.pop() {
        for entry in tree.iter() {
            let id = entry.id();
            match entry.kind() {
                Some(git2::ObjectType::Tree) if seen.insert(id) => {
                    ids.push(id);
                    let sub = from
                        .find_tree(id)
                        .map_err(git_err(format!("read tree {id}")))?;
                    pending.push(sub);
                }
                Some(git2::ObjectType::Blob) if seen.insert(id) => ids.push(id),
                _ => {}
            }
        }
    }

    let src = from.odb().map_err(git_err("open mirror object database"))?;
    let dst = to.odb().map_err(git_err("open worktree object database"))?;
    let writer = dst
        .packwriter()
        .map_err(git_err("open worktree pack writer"))?;
    let mut pack = crate::pack::PackWriter::new(writer, ids.len())
        .map_err(io_err("write worktree pack", to.path()))?;
    for id in ids {
        let object = src.read(id).map_err(git_err(format!("read object {id}")))?;
        pack.object(object.kind(), object.data())
            .map_err(io_err("write worktree pack", to.path()))?;
    }
    let mut writer = pack
        .finish()
        .map_err(io_err("write worktree pack", to.path()))?;
    writer
        .commit()
        .map_err(git_err("index the worktree pack"))?;
    Ok(())
}

/// Every tracked path of `commit` in the repository at `repo_path` (bare or not), sorted.
pub fn tracked_files(repo_path: &Path, commit: &CommitId) -> Result<Vec<String>> {
    let repo = git2::Repository::open(repo_path)
        .map_err(git_err(format!("open repository {}", repo_path.display())))?;
    tracked_files_in(&repo, repo_path, commit)
}

fn tracked_files_in(
    repo: &git2::Repository,
    repo_path: &Path,
    commit: &CommitId,
) -> Result<Vec<String>> {
    let found = repo
        .find_commit(commit.to_oid()?)
        .map_err(|_| CheckoutError::CommitNotFound {
            commit: commit.clone(),
            mirror: repo_path.to_path_buf(),
        })?;
    let tree = found.tree().map_err(git_err("read root tree"))?;
    let mut files = Vec::new();
    tree.walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
        if entry.kind() != Some(git2::ObjectType::Tree) {
            let name = String::from_utf8_lossy(entry.name_bytes());
            files.push(format!("{dir}{name}"));
        }
        git2::TreeWalkResult::Ok
    })
    .map_err(git_err(format!("list files of {commit}")))?;
    files.sort();
    Ok(files)
}

/// Renders the tracked files of `commit` in the repository at `repo_path` (bare, or a work
/// tree: the commit's tree is listed, not the working files).
pub fn file_tree(
    repo_path: &Path,
    commit: &CommitId,
    options: &FileTreeOptions<'_>,
) -> Result<String> {
    let files = tracked_files(repo_path, commit)?;
    Ok(render_file_tree(&files, options))
}

/// Every tracked path of `commit` in the repository at `repo_path` with its git blob id (40
/// hex), sorted by path: what keys a triaged injection finding to one version of a file.
pub fn tracked_blobs(
    repo_path: &Path,
    commit: &CommitId,
) -> Result<std::collections::BTreeMap<String, String>> {
    let repo = git2::Repository::open(repo_path)
        .map_err(git_err(format!("open repository {}", repo_path.display())))?;
    let found = repo
        .find_commit(commit.to_oid()?)
        .map_err(|_| CheckoutError::CommitNotFound {
            commit: commit.clone(),
            mirror: repo_path.to_path_buf(),
        })?;
    let tree = found.tree().map_err(git_err("read root tree"))?;
    let mut blobs = std::collections::BTreeMap::new();
    tree.walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
        if entry.kind() == Some(git2::ObjectType::Blob) {
            let name = String::from_utf8_lossy(entry.name_bytes());
            blobs.insert(format!("{dir}{name}"), entry.id().to_string());
        }
        git2::TreeWalkResult::Ok
    })
    .map_err(git_err(format!("list blobs of {commit}")))?;
    Ok(blobs)
}

/// A checked-out pinned commit, created by [`Mirror::materialize`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Worktree {
    path: PathBuf,
    commit: CommitId,
}

impl Worktree {
    /// The worktree's root directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The commit it was materialised at (HEAD stays there: agents edit files, not history).
    pub fn commit(&self) -> &CommitId {
        &self.commit
    }

    /// Tracked files of the pinned commit, sorted (edits made since do not change it).
    pub fn tracked_files(&self) -> Result<Vec<String>> {
        tracked_files(&self.path, &self.commit)
    }

    /// Tracked files of the pinned commit with their blob ids (edits made since do not change
    /// it).
    pub fn tracked_blobs(&self) -> Result<std::collections::BTreeMap<String, String>> {
        tracked_blobs(&self.path, &self.commit)
    }

    /// The pinned commit's file tree rendered for a prompt.
    pub fn file_tree(&self, options: &FileTreeOptions<'_>) -> Result<String> {
        Ok(render_file_tree(&self.tracked_files()?, options))
    }

    /// A [`BoundedReader`] rooted at the worktree.
    pub fn reader(&self) -> Result<BoundedReader> {
        BoundedReader::open(&self.path)
    }
}

/// A source after normalisation: what to clone from, and the credential-free text that keys
/// the cache.
#[derive(Debug)]
struct Source {
    kind: SourceKind,
    /// Normalised, credential-free; the cache key is derived from it.
    display: String,
}

#[derive(Debug)]
enum SourceKind {
    /// Canonical path of a local repository.
    Local(PathBuf),
    /// URL exactly as given (it may carry credentials; never stored).
    Remote(String),
}

impl Source {
    fn classify(spec: &str) -> Result<Source> {
        let spec = spec.trim();
        let invalid = |reason: &str| CheckoutError::InvalidSource {
            spec: strip_userinfo(spec),
            reason: reason.to_owned(),
        };
        if spec.is_empty() {
            return Err(invalid("empty; give a local repository path or a URL"));
        }
        if let Some((scheme, rest)) = spec.split_once("://") {
            let scheme = scheme.to_ascii_lowercase();
            if scheme == "file" {
                return Source::local(Path::new(rest), spec);
            }
            if !matches!(
                scheme.as_str(),
                "http" | "https" | "ssh" | "git" | "git+ssh" | "ssh+git"
            ) {
                return Err(invalid(
                    "unsupported URL scheme; use https, ssh, git or file",
                ));
            }
            let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
            let host = authority
                .rsplit_once('@')
                .map_or(authority, |(_, host)| host)
                .to_ascii_lowercase();
            if host.is_empty() {
                return Err(invalid("URL has no host"));
            }
            let display = format!("{scheme}://{host}/{}", trim_repo_path(path));
            return Ok(Source {
                kind: SourceKind::Remote(spec.to_owned()),
                display,
            });
        }
        let local = Path::new(spec);
        if local.exists() {
            return Source::local(local, spec);
        }
        // scp-like `user@host:path`: a colon before the first slash.
        if let Some((authority, path)) = spec.split_once(':')
            && !authority.is_empty()
            && !authority.contains('/')
        {
            let host = authority
                .rsplit_once('@')
                .map_or(authority, |(_, host)| host)
                .to_ascii_lowercase();
            let display = format!("ssh://{host}/{}", trim_repo_path(path));
            return Ok(Source {
                kind: SourceKind::Remote(spec.to_owned()),
                display,
            });
        }
        Err(invalid("no such local path, and not a URL"))
    }

    fn local(path: &Path, spec: &str) -> Result<Source> {
        let mut canonical = path
            .canonicalize()
            .map_err(|e| CheckoutError::InvalidSource {
                spec: spec.to_owned(),
                reason: format!("cannot resolve local path: {e}"),
            })?;
        // `repo/.git` and `repo` are the same repository.
        if canonical.file_name().is_some_and(|n| n == ".git")
            && let Some(parent) = canonical.parent()
        {
            canonical = parent.to_path_buf();
        }
        Ok(Source {
            display: canonical.display().to_string(),
            kind: SourceKind::Local(canonical),
        })
    }

    fn cache_name(&self) -> String {
        let digest = Sha256::digest(self.display.as_bytes());
        let hash = hex::encode(&digest[..8]);
        let segments: Vec<&str> = self
            .display
            .rsplit('/')
            .filter(|s| !s.is_empty())
            .take(2)
            .collect();
        let slug: String = segments
            .iter()
            .rev()
            .copied()
            .collect::<Vec<_>>()
            .join("+")
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '+') {
                    c
                } else {
                    '_'
                }
            })
            .take(60)
            .collect();
        let slug = slug.trim_start_matches('.');
        format!("{slug}-{hash}.git")
    }

    fn fetch_into(&self, mirror: &Path, token: Option<&str>) -> Result<()> {
        match &self.kind {
            SourceKind::Local(src) => {
                let repo = git2::Repository::open_bare(mirror)
                    .map_err(git_err(format!("open mirror {}", mirror.display())))?;
                fetch_local(&repo, src, &self.display)
            }
            SourceKind::Remote(url) => run_git(
                &[
                    "-C",
                    &mirror.display().to_string(),
                    "fetch",
                    "--prune",
                    "--quiet",
                    "--",
                    url,
                    MIRROR_REFSPEC,
                ],
                &self.display,
                token,
            ),
        }
    }
}

/// Drops `user[:password]@` from a URL so it can be shown and hashed.
fn strip_userinfo(spec: &str) -> String {
    match spec.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
            let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
            format!("{scheme}://{host}/{path}")
        }
        None => spec.to_owned(),
    }
}

fn trim_repo_path(path: &str) -> String {
    let path = path.trim_matches('/');
    path.strip_suffix(".git").unwrap_or(path).to_owned()
}

/// A local clone copies (hard-links where possible) the source's object files, as
/// `git clone --local` does, instead of packing every object through the fetch protocol;
/// then drops the remote from the mirror's config (refreshes fetch from the source given on
/// that call).
fn clone_local(src: &Path, dest: &Path, display: &str) -> Result<()> {
    let url = src.display().to_string();
    let mut builder = git2::build::RepoBuilder::new();
    builder
        .bare(true)
        .clone_local(git2::build::CloneLocal::Local)
        .remote_create(|repo, name, url| repo.remote_with_fetch(name, url, MIRROR_REFSPEC));
    let repo = builder
        .clone(&url, dest)
        .map_err(|e| CheckoutError::CloneFailed {
            spec: display.to_owned(),
            detail: e.message().to_owned(),
        })?;
    let mut config = repo
        .config()
        .map_err(git_err(format!("open config of {}", dest.display())))?;
    config
        .remove_multivar("remote.origin.fetch", ".*")
        .map_err(git_err("remove the mirror's fetch refspec"))?;
    config
        .remove("remote.origin.url")
        .map_err(git_err("remove the mirror's remote URL"))?;
    sync_head(&repo, src)
}

/// Points the mirror's HEAD where the local source's HEAD points (a branch, or a detached
/// commit), so `HEAD` resolves as it would in the source. A source with an unborn HEAD
/// leaves the mirror's HEAD as it is.
fn sync_head(mirror: &git2::Repository, src: &Path) -> Result<()> {
    let source =
        git2::Repository::open(src).map_err(git_err(format!("open source {}", src.display())))?;
    let Ok(head) = source.find_reference("HEAD") else {
        return Ok(());
    };
    if let Ok(Some(target)) = head.symbolic_target() {
        if mirror.find_reference(target).is_ok() {
            mirror
                .set_head(target)
                .map_err(git_err(format!("set mirror HEAD to {target}")))?;
        }
    } else if let Some(oid) = head.target()
        && mirror.find_commit(oid).is_ok()
    {
        mirror
            .set_head_detached(oid)
            .map_err(git_err(format!("detach mirror HEAD at {oid}")))?;
    }
    Ok(())
}

fn fetch_local(repo: &git2::Repository, src: &Path, display: &str) -> Result<()> {
    let url = src.display().to_string();
    let mut remote = repo
        .remote_anonymous(&url)
        .map_err(git_err(format!("set up fetch from {display}")))?;
    let mut options = git2::FetchOptions::new();
    options
        .prune(git2::FetchPrune::On)
        .download_tags(git2::AutotagOption::None)
        .update_fetchhead(false);
    remote
        .fetch(&[MIRROR_REFSPEC], Some(&mut options), None)
        .map_err(|e| CheckoutError::CloneFailed {
            spec: display.to_owned(),
            detail: e.message().to_owned(),
        })?;
    sync_head(repo, src)
}

fn clone_remote(url: &str, dest: &Path, display: &str, token: Option<&str>) -> Result<()> {
    let dest_str = dest.display().to_string();
    run_git(
        &["clone", "--mirror", "--quiet", "--", url, &dest_str],
        display,
        token,
    )?;
    // `clone --mirror` records the URL (and any credential in it) as remote "origin"; the
    // cache keeps no URL: refreshes fetch from the URL given on that call.
    run_git(
        &[
            "-C",
            &dest_str,
            "config",
            "--remove-section",
            "remote.origin",
        ],
        display,
        None,
    )
}

/// Run the `git` CLI without prompts. With `token`, an empty `credential.helper` first drops
/// every configured helper, then one that answers with the token read from [`TOKEN_VAR`], set
/// on this child only; git keeps the `-c` values out of the clone's config.
fn run_git(args: &[&str], display: &str, token: Option<&str>) -> Result<()> {
    let mut cmd = Command::new("git");
    if let Some(token) = token.filter(|t| !t.is_empty()) {
        cmd.args([
            "-c",
            "credential.helper=",
            "-c",
            &format!(
                "credential.helper=!f() {{ test \"$1\" = get || exit 0; echo username=x-access-token; \
                 echo \"password=${TOKEN_VAR}\"; }}; f"
            ),
        ])
        .env(TOKEN_VAR, token);
    } else {
        cmd.env_remove(TOKEN_VAR);
    }
    let output = cmd
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_ASKPASS", "true")
        .output()
        .map_err(|e| CheckoutError::CloneFailed {
            spec: display.to_owned(),
            detail: format!("cannot run the `git` CLI (needed for URL sources): {e}"),
        })?;
    if output.status.success() {
        Ok(())
    } else {
        // git may echo the URL it was given; show the credential-free form only.
        let mut stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        if let Some(t) = token.filter(|t| !t.is_empty()) {
            stderr = stderr.replace(t, "***");
        }
        let detail = stderr
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(strip_userinfo_in_line)
            .collect::<Vec<_>>()
            .join("; ");
        Err(CheckoutError::CloneFailed {
            spec: display.to_owned(),
            detail: format!(
                "git {} exited with {}: {detail}",
                args_head(args),
                output.status
            ),
        })
    }
}

fn args_head(args: &[&str]) -> String {
    args.iter()
        .find(|a| matches!(**a, "clone" | "fetch" | "config"))
        .map_or_else(String::new, |a| (*a).to_owned())
}

fn strip_userinfo_in_line(line: &str) -> String {
    line.split(' ')
        .map(|word| {
            let trimmed = word.trim_matches(|c| c == '\'' || c == '"');
            if trimmed.contains("://") && trimmed.contains('@') {
                word.replace(trimmed, &strip_userinfo(trimmed))
            } else {
                word.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_normalise_without_credentials() {
        let a = Source::classify("https://user:secret@GitHub.com/Owner/Name.git/").unwrap();
        let b = Source::classify("https://github.com/Owner/Name").unwrap();
        assert_eq!(a.display, "https://github.com/Owner/Name");
        assert_eq!(a.cache_name(), b.cache_name());
        assert!(!a.cache_name().contains("secret"));
        assert!(a.cache_name().starts_with("Owner+Name-"));
        let scp = Source::classify("git@github.com:owner/name.git").unwrap();
        assert_eq!(scp.display, "ssh://github.com/owner/name");
        assert!(Source::classify("ftp://example.com/x").is_err());
        assert!(Source::classify("/definitely/not/a/path/here").is_err());
    }

    #[test]
    fn credentials_are_scrubbed_from_git_messages() {
        let line = "fatal: unable to access 'https://tok:pw@example.com/a/b.git/': failed";
        let clean = strip_userinfo_in_line(line);
        assert!(!clean.contains("tok"), "{clean}");
        assert!(clean.contains("https://example.com/a/b.git/"), "{clean}");
    }
}
