//! Reference repositories: exemplars the operator lists (one YAML file each in a directory,
//! `.airlock/reference-repos/` by default) that an agent reads as patterns to follow and never
//! edits.
//!
//! [`collect`] is the one call (`airlock reference-repos` prints it; a run makes it once and
//! records it as a `skill_call` audit event): every file is parsed with unknown keys refused,
//! every repository is mirrored through `airlock-checkout` and its ref resolved to a commit id
//! before anything is read, and its structure comes from `airlock-codegraph`'s bounded walk at
//! that commit. Each repository ends in one status, `ok`, `fetch-error` (git's own words),
//! `mesh-config-malformed` or `ref-not-found`, and one failing repository never hides the
//! others. The JSON has every array sorted and nothing from the clock or the environment, so
//! the same (URL, ref, cap) gives the same bytes.
//!
//! In a run ([`ReferenceRepos`]) a repository's files are named `@reference/<slug>/<path>`
//! ([`READ_PREFIX`]): `read_file` reads them (materialised at the resolved commit, beside the
//! run's worktree) and `search_repo` with `reference: <slug>` searches them. Any write, edit or
//! `files_changed` path under that prefix is refused with
//! `cited-reference-repo-as-edit-target:<path>` ([`edit_target_refusal`]).

use crate::ports::{Hit, PortResult, ReadOutcome, ToolFailure, Worktree};
use airlock_checkout::{BoundedReader, CheckoutError, MirrorCache, MirrorOptions};
use airlock_codegraph::structure::{self, RepoStructure};
use airlock_reader::repo_tools::{CodegraphSearch, read_window, split_reference_path};
use serde::{Deserialize, Serialize};
use std::cell::OnceCell;
use std::path::{Path, PathBuf};

/// The skill name in the `skill_call` audit event.
pub const SKILL: &str = "knowledge-reference-repos";
/// The directory of the project that lists reference repositories, when none is named.
pub const DEFAULT_DIR: &str = crate::config::DEFAULT_REFERENCE_REPOS_DIR;
/// The `mode` of every answer.
pub const MODE: &str = "reference";
/// The reason of an answer with no repository configured.
pub const EMPTY_REASON: &str = "mesh-has-no-reference-repos";
/// The reason of the whole-call refusal.
pub const DIR_UNREADABLE: &str = "mesh-config-dir-unreadable";
/// The refusal of a write or a `files_changed` path inside a reference repository (followed by
/// `:<path>`).
pub const EDIT_TARGET_CODE: &str = "cited-reference-repo-as-edit-target";
/// The prefix under which a run's agent sees the reference repositories' files.
pub const READ_PREFIX: &str = airlock_reader::repo_tools::REFERENCE_PREFIX;

/// One repository's status. Never collapsed: each names its own fix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Mirrored, resolved and walked.
    Ok,
    /// git could not clone or fetch it (its own error in `reason`).
    FetchError,
    /// Its YAML file is not a valid entry (the parser's or the check's words in `reason`).
    MeshConfigMalformed,
    /// The ref (or, without one, the default branch) names no commit there.
    RefNotFound,
}

/// The repository as the answer names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RepoId {
    /// The owner (the path segment before the name; the host for a one-segment URL).
    pub owner: String,
    /// The name, without `.git`.
    pub name: String,
    /// The ref as configured, or the default branch when none is.
    #[serde(rename = "ref")]
    pub git_ref: String,
    /// The resolved commit id, once resolved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha: Option<String>,
}

/// A repository that was walked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReadyRepo {
    /// Always true.
    pub ok: bool,
    /// The file's stem: how the agent names it (`@reference/<slug>/...`).
    pub slug: String,
    /// Which repository, at which commit.
    pub repo: RepoId,
    /// Always `ok`.
    pub status: Status,
    /// Always true: an exemplar, never an edit target.
    pub reference: bool,
    /// Why the operator lists it.
    pub rationale: String,
    /// The operator's layer, when given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calm_layer: Option<String>,
    /// Its structure over the bounded walk.
    pub structure: RepoStructure,
    /// Every walked path, sorted.
    pub inventory_paths: Vec<String>,
}

/// A repository that failed, with its status and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FailedRepo {
    /// Always false.
    pub ok: bool,
    /// The file's stem.
    pub slug: String,
    /// Which repository, when the file named one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repo: Option<RepoId>,
    /// What went wrong.
    pub status: Status,
    /// The detail: git's error, the parser's message, the ref.
    pub reason: String,
}

/// One entry of `repos`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum RepoEntry {
    /// Walked.
    Ready(Box<ReadyRepo>),
    /// Failed.
    Failed(FailedRepo),
}

/// The whole answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Answer {
    /// The list (possibly empty, possibly with failed entries).
    Listed {
        /// Always true.
        ok: bool,
        /// Always `reference`.
        mode: &'static str,
        /// One entry per configured repository, in file-name order.
        repos: Vec<RepoEntry>,
        /// [`EMPTY_REASON`] when `repos` is empty.
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<&'static str>,
    },
    /// The directory cannot be read: nothing was attempted.
    Refused {
        /// Always false.
        ok: bool,
        /// Always [`DIR_UNREADABLE`].
        reason: &'static str,
        /// What to check.
        remediation: String,
    },
}

impl Answer {
    /// Whether the call succeeded (`ok: true`).
    pub fn ok(&self) -> bool {
        matches!(self, Answer::Listed { .. })
    }

    /// The answer as printed: pretty JSON and a newline.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default() + "\n"
    }

    /// The `skill_call` audit event of this answer: each configured repository's URL (without
    /// credentials) and resolved commit, or its failing status.
    pub fn skill_call_event(&self, pins: &[Pin]) -> airlock_audit::Event {
        let reason = match self {
            Answer::Listed { reason, .. } => reason.map(str::to_string),
            Answer::Refused { reason, .. } => Some((*reason).to_string()),
        };
        airlock_audit::Event::SkillCall {
            skill: SKILL.to_string(),
            ok: self.ok(),
            reference_repos: pins
                .iter()
                .map(|p| airlock_audit::ReferenceRepoPin {
                    url: p.url.clone(),
                    sha: p.sha.clone(),
                    status: (p.status != Status::Ok).then(|| status_name(p.status)),
                })
                .collect(),
            reason,
        }
    }
}

fn status_name(status: Status) -> String {
    serde_json::to_value(status)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// One configured repository's URL and what became of it (the audit event's entry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pin {
    /// The URL as configured, credentials removed.
    pub url: String,
    /// The resolved commit, when resolved.
    pub sha: Option<String>,
    /// Its status.
    pub status: Status,
}

/// What [`collect`] is asked.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// The directory of YAML files.
    pub dir: &'a Path,
    /// The most files walked per repository.
    pub max_files: usize,
    /// Keep only repositories whose `applies_to_languages` names this language (or that name
    /// none).
    pub language: Option<&'a str>,
    /// The mirror cache the repositories are fetched into.
    pub cache: &'a MirrorCache,
}

/// A walked repository's local handle: where its commit can be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkout {
    /// Its slug.
    pub slug: String,
    /// The mirror holding the commit.
    pub mirror: PathBuf,
    /// The resolved commit.
    pub sha: String,
    /// Why the operator lists it.
    pub rationale: String,
    /// The URL, credentials removed.
    pub url: String,
}

/// What [`collect`] returns: the answer, the audit entries (one per repository that named a
/// URL), and the walked repositories.
#[derive(Debug, Clone)]
pub struct Collected {
    /// The answer (printed by the CLI, recorded by a run).
    pub answer: Answer,
    /// One entry per configured repository, in the answer's order.
    pub pins: Vec<Pin>,
    /// The repositories that were walked.
    pub checkouts: Vec<Checkout>,
}

/// One YAML file: what an operator writes.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RepoFile {
    repo: String,
    #[serde(default, rename = "ref")]
    git_ref: Option<String>,
    rationale: String,
    #[serde(default)]
    calm_layer: Option<String>,
    #[serde(default)]
    applies_to_languages: Option<Vec<String>>,
}

/// List, fetch, resolve and walk every configured repository.
pub fn collect(request: &Request<'_>) -> Collected {
    let files = match list_dir(request.dir) {
        Ok(files) => files,
        Err(e) => {
            return Collected {
                answer: Answer::Refused {
                    ok: false,
                    reason: DIR_UNREADABLE,
                    remediation: format!(
                        "Check that `{}` is a readable directory (its permissions, and that it \
                         is not a file): {e}",
                        request.dir.display()
                    ),
                },
                pins: Vec::new(),
                checkouts: Vec::new(),
            };
        }
    };
    let mut repos = Vec::new();
    let mut pins = Vec::new();
    let mut checkouts = Vec::new();
    let mut slugs = std::collections::BTreeSet::new();
    for path in files {
        let slug = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let malformed = |reason: String| FailedRepo {
            ok: false,
            slug: slug.clone(),
            repo: None,
            status: Status::MeshConfigMalformed,
            reason,
        };
        let file_name = path
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let parsed = if !valid_slug(&slug) {
            Err(malformed(format!(
                "{file_name}: the file name must be a slug (letters, digits, `.`, `_`, `-`; not \
                 starting with `.`): it names the repository as `{READ_PREFIX}<slug>/`"
            )))
        } else if !slugs.insert(slug.clone()) {
            Err(malformed(format!(
                "{file_name}: another file already names the slug `{slug}` (keep one of \
                 `{slug}.yml` and `{slug}.yaml`)"
            )))
        } else {
            parse_file(&path).map_err(|reason| malformed(format!("{file_name}: {reason}")))
        };
        let file = match parsed {
            Ok(file) => file,
            Err(failed) => {
                // No URL to pin: the audit event lists repositories by URL.
                repos.push(RepoEntry::Failed(failed));
                continue;
            }
        };
        if let (Some(wanted), Some(languages)) = (request.language, &file.applies_to_languages)
            && !languages.iter().any(|l| l.eq_ignore_ascii_case(wanted))
        {
            continue;
        }
        let base = path.parent().unwrap_or(Path::new("."));
        let (entry, pin, checkout) = walk_one(request, &slug, file, base);
        pins.push(pin);
        repos.push(entry);
        checkouts.extend(checkout);
    }
    let reason = repos.is_empty().then_some(EMPTY_REASON);
    Collected {
        answer: Answer::Listed {
            ok: true,
            mode: MODE,
            repos,
            reason,
        },
        pins,
        checkouts,
    }
}

/// The YAML files of `dir`, sorted by name. A directory that does not exist lists none; one
/// that cannot be read is an error.
fn list_dir(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut files = Vec::new();
    for entry in entries {
        let path = entry?.path();
        let yaml = path.extension().is_some_and(|e| e == "yml" || e == "yaml");
        let hidden = path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with('.'));
        if yaml && !hidden {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

fn valid_slug(slug: &str) -> bool {
    !slug.is_empty()
        && !slug.starts_with('.')
        && slug
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// Parse and check one file; the error is the reason a person reads.
fn parse_file(path: &Path) -> Result<RepoFile, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read: {e}"))?;
    let file: RepoFile = serde_saphyr::from_str(&text).map_err(|e| {
        let message = e.to_string();
        message.lines().next().unwrap_or("").trim().to_string()
    })?;
    if file.repo.trim().is_empty() {
        return Err("`repo` is empty: give the repository's URL".into());
    }
    if file.rationale.trim().is_empty() {
        return Err("`rationale` is empty: say why this repository is an exemplar".into());
    }
    if let Some(r) = &file.git_ref
        && r.trim().is_empty()
    {
        return Err("`ref` is empty: give a branch, tag or commit id, or leave it out".into());
    }
    Ok(file)
}

/// Mirror, resolve and walk one repository.
fn walk_one(
    request: &Request<'_>,
    slug: &str,
    file: RepoFile,
    base: &Path,
) -> (RepoEntry, Pin, Option<Checkout>) {
    let url = strip_userinfo(file.repo.trim());
    let (owner, name) = owner_and_name(&url);
    let mut id = RepoId {
        owner,
        name,
        git_ref: file.git_ref.clone().unwrap_or_default(),
        sha: None,
    };
    let fail = |id: RepoId, status: Status, reason: String| {
        (
            RepoEntry::Failed(FailedRepo {
                ok: false,
                slug: slug.to_string(),
                repo: Some(id),
                status,
                reason,
            }),
            Pin {
                url: url.clone(),
                sha: None,
                status,
            },
            None,
        )
    };
    let source = local_source(file.repo.trim(), base);
    // Refreshed on every call: a branch means its head now, resolved to a commit before reading.
    let mirror = match request.cache.mirror_with(
        &source,
        &MirrorOptions {
            refresh: true,
            http_token: None,
        },
    ) {
        Ok(m) => m,
        Err(e) => {
            let reason = match e {
                CheckoutError::CloneFailed { detail, .. } => format!("git clone failed: {detail}"),
                other => format!("git clone failed: {other}"),
            };
            return fail(id, Status::FetchError, reason);
        }
    };
    let rev = match &file.git_ref {
        Some(r) => r.trim().to_string(),
        None => {
            id.git_ref = mirror.head_branch().unwrap_or_else(|| "HEAD".into());
            "HEAD".to_string()
        }
    };
    let commit = match mirror.resolve(&rev) {
        Ok(c) => c,
        Err(e) => {
            let reason = match &file.git_ref {
                Some(r) => format!("ref `{r}` names no commit in {url}: {e}"),
                None => format!("{url} has no default branch with a commit: {e}"),
            };
            return fail(id, Status::RefNotFound, reason);
        }
    };
    let sha = commit.as_str().to_string();
    id.sha = Some(sha.clone());
    match structure::repo_structure(mirror.path(), &sha, request.max_files) {
        Ok(walked) => (
            RepoEntry::Ready(Box::new(ReadyRepo {
                ok: true,
                slug: slug.to_string(),
                repo: id,
                status: Status::Ok,
                reference: true,
                rationale: file.rationale.trim().to_string(),
                calm_layer: file.calm_layer.clone(),
                structure: walked.structure,
                inventory_paths: walked.inventory_paths,
            })),
            Pin {
                url: url.clone(),
                sha: Some(sha.clone()),
                status: Status::Ok,
            },
            Some(Checkout {
                slug: slug.to_string(),
                mirror: mirror.path().to_path_buf(),
                sha,
                rationale: file.rationale.trim().to_string(),
                url: url.clone(),
            }),
        ),
        // The commit is in the mirror; a walk that fails is git failing to read it.
        Err(e) => fail(id, Status::FetchError, format!("reading {sha}: {e}")),
    }
}

/// A relative local path is relative to the YAML file's directory; URLs are kept.
fn local_source(repo: &str, base: &Path) -> String {
    let looks_remote = repo.contains("://")
        || repo
            .split_once(':')
            .is_some_and(|(host, _)| !host.is_empty() && !host.contains('/'));
    if looks_remote || Path::new(repo).is_absolute() {
        repo.to_string()
    } else {
        base.join(repo).display().to_string()
    }
}

/// `user[:password]@` removed from a URL, so neither the answer nor the audit log holds it.
fn strip_userinfo(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
            let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
            format!("{scheme}://{host}/{path}")
        }
        None => url.to_string(),
    }
}

/// The owner and name of a URL or path: its last two segments (the host when there is one
/// segment), `.git` dropped.
fn owner_and_name(url: &str) -> (String, String) {
    let (host, path) = match url.split_once("://") {
        Some((_, rest)) => rest.split_once('/').unwrap_or((rest, "")),
        None => match url.split_once(':') {
            Some((authority, path)) if !authority.contains('/') => (
                authority.rsplit_once('@').map_or(authority, |(_, h)| h),
                path,
            ),
            _ => ("", url),
        },
    };
    let mut segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let name = segments
        .pop()
        .map(|n| n.strip_suffix(".git").unwrap_or(n).to_string())
        .unwrap_or_default();
    let owner = segments.pop().unwrap_or(host).to_string();
    (owner, name)
}

/// The refusal text of a write or a `files_changed` path inside a reference repository, `None`
/// for any other path.
pub fn edit_target_refusal(path: &str) -> Option<String> {
    is_reference_path(path).then(|| format!("{EDIT_TARGET_CODE}:{path}"))
}

/// Whether `path` names a file under [`READ_PREFIX`] (leading `./` and `/` ignored, so a
/// spelling variant is caught too).
pub fn is_reference_path(path: &str) -> bool {
    let trimmed = path.trim_start_matches("./").trim_start_matches('/');
    trimmed.starts_with(READ_PREFIX) || trimmed == READ_PREFIX.trim_end_matches('/')
}

/// The reference repositories of one run: their checkouts, opened on first use and removed
/// when the run ends.
pub struct ReferenceRepos {
    repos: Vec<RunRepo>,
    /// The call's `skill_call` event, recorded once the run starts.
    skill_call: Option<airlock_audit::Event>,
    /// Where each repository's commit is materialised (`<dir>/<slug>`).
    dir: PathBuf,
    index_dir: PathBuf,
}

struct RunRepo {
    checkout: Checkout,
    reader: OnceCell<Result<BoundedReader, String>>,
    search: OnceCell<Result<CodegraphSearch, String>>,
}

impl ReferenceRepos {
    /// None: a run whose call listed no repository.
    pub fn none() -> ReferenceRepos {
        ReferenceRepos {
            repos: Vec::new(),
            skill_call: None,
            dir: PathBuf::new(),
            index_dir: PathBuf::new(),
        }
    }

    /// The walked repositories of a call, materialised under `dir` when first read and indexed
    /// under `index_dir` when first searched.
    pub fn new(collected: Collected, dir: &Path, index_dir: &Path) -> ReferenceRepos {
        ReferenceRepos {
            skill_call: Some(collected.answer.skill_call_event(&collected.pins)),
            repos: collected
                .checkouts
                .into_iter()
                .map(|checkout| RunRepo {
                    checkout,
                    reader: OnceCell::new(),
                    search: OnceCell::new(),
                })
                .collect(),
            dir: dir.to_path_buf(),
            index_dir: index_dir.to_path_buf(),
        }
    }

    /// The call's `skill_call` audit event (`None` for [`ReferenceRepos::none`]).
    pub fn skill_call(&self) -> Option<&airlock_audit::Event> {
        self.skill_call.as_ref()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.repos.is_empty()
    }

    /// The slugs, in the call's order.
    pub fn slugs(&self) -> Vec<&str> {
        self.repos
            .iter()
            .map(|r| r.checkout.slug.as_str())
            .collect()
    }

    fn find(&self, slug: &str) -> PortResult<&RunRepo> {
        self.repos
            .iter()
            .find(|r| r.checkout.slug == slug)
            .ok_or_else(|| {
                let known = self.slugs();
                ToolFailure::new(
                    "unknown_reference",
                    if known.is_empty() {
                        format!("no reference repository `{slug}`: this run has none")
                    } else {
                        format!(
                            "no reference repository `{slug}`; this run has {}",
                            known.join(", ")
                        )
                    },
                )
            })
    }

    /// Every repository materialised, for a reader worker to be granted read-only; one that
    /// cannot be is left out (with a warning: the agent's own read of it says why).
    pub fn mounts(&self) -> Vec<crate::delegate::ReferenceMount> {
        self.repos
            .iter()
            .filter_map(|repo| match self.reader_of(repo) {
                Ok(_) => Some(crate::delegate::ReferenceMount {
                    slug: repo.checkout.slug.clone(),
                    root: self.dir.join(&repo.checkout.slug),
                }),
                Err(e) => {
                    tracing::warn!("reference {} is not materialised: {e}", repo.checkout.slug);
                    None
                }
            })
            .collect()
    }

    /// The number of lines of `@reference/<slug>/<path>`, `None` when it is no readable file.
    pub fn line_count(&self, path: &str) -> Option<usize> {
        let read = self.read_lines(path, 1, 1).ok()?;
        usize::try_from(read.line_count).ok()
    }

    /// Lines `start..=end` of `@reference/<slug>/<path>`, through a bounded reader of that
    /// repository's commit. The outcome's path is the prefixed one.
    pub fn read_lines(&self, path: &str, start: usize, end: usize) -> PortResult<ReadOutcome> {
        let (slug, inner) = split_reference_path(path).ok_or_else(|| {
            ToolFailure::new(
                "not_found",
                format!("`{path}` names no file: use `{READ_PREFIX}<slug>/<path>`"),
            )
        })?;
        let repo = self.find(slug)?;
        let reader = self.reader_of(repo)?;
        let mut read = read_window(reader, inner, start, end)
            .map_err(|(code, message)| ToolFailure::new(code, message))?;
        read.path = format!("{READ_PREFIX}{slug}/{}", read.path);
        Ok(read)
    }

    /// The bounded reader of `repo`'s commit, materialised on first use.
    fn reader_of<'r>(&'r self, repo: &'r RunRepo) -> PortResult<&'r BoundedReader> {
        repo.reader
            .get_or_init(|| {
                let dest = self.dir.join(&repo.checkout.slug);
                // A resumed run materialises again, perhaps at another commit.
                if dest.exists() {
                    std::fs::remove_dir_all(&dest).map_err(|e| e.to_string())?;
                }
                let commit = airlock_checkout::CommitId::parse(&repo.checkout.sha)
                    .map_err(|e| e.to_string())?;
                let mirror = airlock_checkout::Mirror::open(&repo.checkout.mirror)
                    .map_err(|e| e.to_string())?;
                let worktree = mirror
                    .materialize(&commit, &dest)
                    .map_err(|e| e.to_string())?;
                worktree.reader().map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|e| ToolFailure::new("reference_unavailable", e.clone()))
    }

    /// Hits for `query` in the repository `slug`, their paths prefixed.
    pub fn search(&self, slug: &str, query: &str, limit: usize) -> PortResult<Vec<Hit>> {
        let repo = self.find(slug)?;
        let search = repo
            .search
            .get_or_init(|| {
                let key = airlock_codegraph::store::repo_key(&repo.checkout.mirror);
                let search = CodegraphSearch::open(
                    &repo.checkout.mirror,
                    &self.index_dir,
                    Some(&key),
                    &repo.checkout.sha,
                )?;
                search.prepare()?;
                Ok(search)
            })
            .as_ref()
            .map_err(|e| ToolFailure::new("reference_unavailable", e.clone()))?;
        let hits = search
            .search(query, limit)
            .map_err(|e| ToolFailure::new("search", e))?;
        Ok(hits
            .into_iter()
            .map(|mut h| {
                h.path = format!("{READ_PREFIX}{slug}/{}", h.path);
                h
            })
            .collect())
    }

    /// The warm start's section: each repository with its rationale and how to read it;
    /// empty when there is none.
    pub fn warm_start_section(&self) -> String {
        if self.repos.is_empty() {
            return String::new();
        }
        let mut text = format!(
            "## Reference repositories\nThe operator lists these repositories as exemplars: \
             follow their patterns where they apply, cite them by slug, and never edit them. \
             Read one with read_file on `{READ_PREFIX}<slug>/<path>` and search one with \
             search_repo and `reference: \"<slug>\"`. Any write or files_changed path under \
             `{READ_PREFIX}` is refused.\n"
        );
        for r in &self.repos {
            let c = &r.checkout;
            text.push_str(&format!(
                "- {} ({} at {}): {}\n",
                c.slug,
                c.url,
                &c.sha[..c.sha.len().min(12)],
                c.rationale
            ));
        }
        text
    }
}

/// The worktree with the run's reference repositories beside it, for checking what a reader
/// saw: a path under `@reference/` is read from the reference copy, any other from the
/// worktree. Nothing is written through it but to the worktree, where the policy decides.
pub struct WithReferences<'a> {
    /// The run's worktree.
    pub worktree: &'a dyn Worktree,
    /// The run's reference repositories.
    pub references: &'a ReferenceRepos,
}

impl Worktree for WithReferences<'_> {
    fn root(&self) -> &Path {
        self.worktree.root()
    }

    fn read_lines(&self, path: &str, start: usize, end: usize) -> PortResult<ReadOutcome> {
        if is_reference_path(path) {
            self.references.read_lines(path, start, end)
        } else {
            self.worktree.read_lines(path, start, end)
        }
    }

    fn read_for_edit(&self, path: &str) -> PortResult<String> {
        match edit_target_refusal(path) {
            Some(refusal) => Err(ToolFailure::new(EDIT_TARGET_CODE, refusal)),
            None => self.worktree.read_for_edit(path),
        }
    }

    fn write(&self, path: &str, content: &str) -> PortResult<()> {
        match edit_target_refusal(path) {
            Some(refusal) => Err(ToolFailure::new(EDIT_TARGET_CODE, refusal)),
            None => self.worktree.write(path, content),
        }
    }

    fn line_count(&self, path: &str) -> Option<usize> {
        if is_reference_path(path) {
            self.references.line_count(path)
        } else {
            self.worktree.line_count(path)
        }
    }

    fn file_tree(&self, query: &str, char_budget: usize) -> String {
        self.worktree.file_tree(query, char_budget)
    }
}

/// The materialised copies are the run's scratch, not its record (the audit log keeps the URL
/// and commit of each): they go when the run ends, parked or not. A resumed run materialises
/// again on its first read.
impl Drop for ReferenceRepos {
    fn drop(&mut self) {
        let materialised = self.repos.iter().any(|r| r.reader.get().is_some());
        if materialised
            && self.dir.exists()
            && let Err(e) = std::fs::remove_dir_all(&self.dir)
        {
            tracing::warn!(
                "cannot remove the reference copies {}: {e}",
                self.dir.display()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_and_names_come_from_the_last_two_segments() {
        let cases = [
            (
                "https://github.com/acme/auth-service.git",
                "acme",
                "auth-service",
            ),
            ("git@github.com:acme/bus.git", "acme", "bus"),
            ("file:///tmp/x/ref-repo", "x", "ref-repo"),
            ("http://127.0.0.1:1/one.git", "127.0.0.1:1", "one"),
        ];
        for (url, owner, name) in cases {
            assert_eq!(owner_and_name(url), (owner.into(), name.into()), "{url}");
        }
        assert_eq!(
            strip_userinfo("https://u:secret@github.com/a/b"),
            "https://github.com/a/b"
        );
    }

    #[test]
    fn only_paths_under_the_prefix_are_reference_paths() {
        assert_eq!(
            edit_target_refusal("@reference/auth/src/x.rs").as_deref(),
            Some("cited-reference-repo-as-edit-target:@reference/auth/src/x.rs")
        );
        assert!(is_reference_path("./@reference/auth/x"));
        assert!(is_reference_path("/@reference/auth/x"));
        assert!(!is_reference_path("reference/auth/x"));
        assert!(!is_reference_path("src/@reference/x"));
        assert_eq!(
            split_reference_path("@reference/auth/src/a.rs"),
            Some(("auth", "src/a.rs"))
        );
        assert_eq!(split_reference_path("@reference/auth"), None);
    }
}
