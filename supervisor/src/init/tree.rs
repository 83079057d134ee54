//! The repository as `airlock init` sees it: its files ([`Tree`], git's tracked files or a walk
//! of the directory), its name (`owner/name` of a GitHub `origin`), and the small path rules the
//! detection shares (file names, globs, a venv's `pyvenv.cfg`). It never runs the repository's
//! code; `git` is asked with `core.fsmonitor` off.

use super::host::command_lines;
use super::proposal::Remote;
use airlock_policies::{Language, language_of};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Most files listed from a tree that is not a git work tree (the rest are not looked at).
const MAX_WALK_FILES: usize = 100_000;
/// Most bytes of one file read for a detection rule.
const MAX_READ_BYTES: u64 = 256 * 1024;
/// Most Python test files scanned for `import pytest`.
pub(super) const MAX_SCANNED_TEST_FILES: usize = 200;
/// Directories never listed when walking a tree: dependencies and build output.
pub(super) const SKIPPED_DIRS: [&str; 4] = ["node_modules", "target", "__pycache__", "vendor"];
/// Venv directories looked for at the top of the repository, in order.
pub(super) const VENV_DIRS: [&str; 2] = [".venv", "venv"];

/// The files of a tree, as `/`-separated paths relative to its root.
pub(super) struct Tree {
    pub(super) root: PathBuf,
    pub(super) files: BTreeSet<String>,
}

impl Tree {
    /// The tracked files of a git work tree, else every file found by walking it (dot-directories,
    /// venvs, dependencies and build output left out).
    pub(super) fn list(root: &Path, warnings: &mut Vec<String>) -> Tree {
        let files = git_tracked_files(root).unwrap_or_else(|| walk(root, warnings));
        Tree {
            root: root.to_path_buf(),
            files,
        }
    }

    pub(super) fn has(&self, path: &str) -> bool {
        self.files.contains(path)
    }

    /// The text of a listed file (its first [`MAX_READ_BYTES`]), if it reads as UTF-8.
    pub(super) fn read(&self, path: &str) -> Option<String> {
        use std::io::Read;
        let file = std::fs::File::open(self.root.join(path)).ok()?;
        let mut bytes = Vec::new();
        file.take(MAX_READ_BYTES).read_to_end(&mut bytes).ok()?;
        String::from_utf8(bytes).ok()
    }

    pub(super) fn contains(&self, path: &str, needle: &str) -> bool {
        self.has(path) && self.read(path).is_some_and(|t| t.contains(needle))
    }

    /// Files of `languages`.
    pub(super) fn sources<'a>(
        &'a self,
        languages: &'a [Language],
    ) -> impl Iterator<Item = &'a String> + 'a {
        self.files
            .iter()
            .filter(move |f| language_of(f).is_some_and(|l| languages.contains(&l)))
    }
}

/// `owner/name` of a GitHub remote URL (`https://github.com/o/n.git`, `git@github.com:o/n`,
/// `ssh://git@github.com/o/n`), `None` for any other URL.
pub fn github_slug(url: &str) -> Option<String> {
    let (host, slug) = host_and_slug(url)?;
    (host.eq_ignore_ascii_case("github.com") || host.eq_ignore_ascii_case("www.github.com"))
        .then_some(slug)
}

/// The host and `owner/name` of a remote URL on any host (`https://HOST/o/n.git`,
/// `git@HOST:o/n`, `ssh://git@HOST:22/o/n`); `None` for a path or a URL of another shape.
pub fn host_and_slug(url: &str) -> Option<(String, String)> {
    let (host, path) = host_and_path(url)?;
    let parts: Vec<&str> = path.split('/').collect();
    let valid = |p: &str| {
        !p.is_empty()
            && p != "."
            && p != ".."
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    };
    match parts.as_slice() {
        [owner, name] if valid(owner) && valid(name) => Some((host, format!("{owner}/{name}"))),
        _ => None,
    }
}

/// The host and the GitLab project path (`group/subgroup/name`, subgroups allowed) of a remote
/// URL; `None` for a path or a URL of another shape.
pub fn host_and_project(url: &str) -> Option<(String, String)> {
    let (host, path) = host_and_path(url)?;
    match airlock_forge::gitlab::ProjectId::parse(&path) {
        Ok(airlock_forge::gitlab::ProjectId::Path(project)) => Some((host, project)),
        _ => None,
    }
}

/// The host (no user, no port) and the path (no `.git`, no surrounding `/`) of a remote URL.
fn host_and_path(url: &str) -> Option<(String, String)> {
    let url = url.trim();
    let (host, path) = match url.split_once("://") {
        Some((_, rest)) => {
            let (authority, path) = rest.split_once('/')?;
            let host = authority.rsplit('@').next().unwrap_or(authority);
            (host.split(':').next().unwrap_or(host), path)
        }
        // scp-like syntax: `user@host:path` (a colon before any slash).
        None => {
            let (authority, path) = url.split_once(':')?;
            if authority.contains('/') || !authority.contains('@') {
                return None;
            }
            (authority.rsplit('@').next().unwrap_or(authority), path)
        }
    };
    if host.is_empty() {
        return None;
    }
    let path = path.trim_matches('/');
    let path = path.strip_suffix(".git").unwrap_or(path);
    Some((host.to_owned(), path.to_owned()))
}

/// The remote approved branches go to: `origin`, else the only remote (`None` when there are
/// several and none is `origin`, or none at all), classified with `forge_api` (an API base:
/// then a remote on any host is that forge's).
pub(super) fn read_remote(repo: &Path, forge_api: ForgeApi<'_>) -> Remote {
    let Some(names) = command_lines(Command::new("git").arg("-C").arg(repo).arg("remote")) else {
        return Remote::None;
    };
    let name = if names.iter().any(|n| n == "origin") {
        "origin".to_owned()
    } else if let [only] = names.as_slice() {
        only.clone()
    } else {
        return Remote::None;
    };
    let Some(url) = command_lines(
        Command::new("git")
            .arg("-C")
            .arg(repo)
            .args(["remote", "get-url", &name]),
    )
    .and_then(|lines| lines.into_iter().next()) else {
        return Remote::None;
    };
    classify_remote_with(name, url, forge_api)
}

/// The API base the operator named for the remote's forge (`airlock init --github-api` or
/// `--gitlab-api`): with one, a remote on any host is that forge's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ForgeApi<'a> {
    /// None named: the remote's host decides.
    #[default]
    FromHost,
    /// A GitHub Enterprise REST API (`https://HOST/api/v3`).
    GitHub(&'a str),
    /// A GitLab instance's REST API (`https://HOST/api/v4`).
    GitLab(&'a str),
}

/// A remote named `name` at `url`, as GitHub (github.com, or any host with `github_api`) or
/// another forge.
pub fn classify_remote(name: String, url: String, github_api: Option<&str>) -> Remote {
    classify_remote_with(
        name,
        url,
        github_api.map_or(ForgeApi::FromHost, ForgeApi::GitHub),
    )
}

/// A remote named `name` at `url`: GitHub's when `forge_api` names GitHub or the host is
/// github.com; GitLab's when `forge_api` names GitLab or the host's name contains `gitlab`
/// (gitlab.com, gitlab.acme.test, code-gitlab.example: the rule, not a list of hosts), its API
/// then `https://HOST/api/v4` (`http://` for an `http://` remote); another forge otherwise.
pub fn classify_remote_with(name: String, url: String, forge_api: ForgeApi<'_>) -> Remote {
    let slug = match forge_api {
        ForgeApi::GitHub(_) => host_and_slug(&url).map(|(_, slug)| slug),
        ForgeApi::FromHost => github_slug(&url),
        ForgeApi::GitLab(_) => None,
    };
    if let Some(slug) = slug {
        let api = match forge_api {
            ForgeApi::GitHub(api) => Some(api.trim_end_matches('/').to_owned()),
            _ => None,
        };
        return Remote::GitHub {
            name,
            url,
            slug,
            api,
        };
    }
    let gitlab = host_and_project(&url).and_then(|(host, project)| match forge_api {
        ForgeApi::GitLab(api) => Some((api.trim_end_matches('/').to_owned(), project)),
        ForgeApi::FromHost if host.to_ascii_lowercase().contains("gitlab") => {
            let scheme = if url.trim().to_ascii_lowercase().starts_with("http://") {
                "http"
            } else {
                "https"
            };
            Some((format!("{scheme}://{host}/api/v4"), project))
        }
        _ => None,
    });
    match gitlab {
        Some((api, project)) => Remote::GitLab {
            name,
            url,
            project,
            api,
        },
        None => Remote::Other { name, url },
    }
}

/// The repository's name in both files: `owner/name` of a GitHub remote, else the directory's
/// name.
pub(super) fn repository_name(repo: &Path, remote: &Remote) -> String {
    if let Remote::GitHub { slug: name, .. } | Remote::GitLab { project: name, .. } = remote {
        return name.clone();
    }
    let real = repo.canonicalize().unwrap_or_else(|_| repo.to_path_buf());
    real.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "repository".into())
}

/// The top directory of the git work tree holding `dir`, as git reports it; `None` when `dir`
/// is in none.
pub(super) fn work_tree_top(dir: &Path) -> Option<PathBuf> {
    command_lines(
        Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["rev-parse", "--show-toplevel"]),
    )
    .and_then(|lines| lines.into_iter().next())
    .map(PathBuf::from)
}

/// The tracked files of the git work tree whose top is `root`; `None` when it is not one.
fn git_tracked_files(root: &Path) -> Option<BTreeSet<String>> {
    if !root.join(".git").exists() {
        return None;
    }
    let output = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["-c", "core.fsmonitor=false", "ls-files", "-z"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    Some(
        output
            .stdout
            .split(|b| *b == 0)
            .filter(|p| !p.is_empty())
            .filter_map(|p| std::str::from_utf8(p).ok())
            .map(String::from)
            .collect(),
    )
}

/// Every file under `root`, without following symlinks, leaving out dot-directories, venvs,
/// [`SKIPPED_DIRS`] and names that are not UTF-8; at most [`MAX_WALK_FILES`].
fn walk(root: &Path, warnings: &mut Vec<String>) -> BTreeSet<String> {
    let mut files = BTreeSet::new();
    let mut pending = vec![String::new()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(root.join(&dir)) else {
            continue;
        };
        for entry in entries.flatten() {
            let Some(name) = entry.file_name().to_str().map(String::from) else {
                continue;
            };
            let rel = if dir.is_empty() {
                name.clone()
            } else {
                format!("{dir}/{name}")
            };
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                if name.starts_with('.')
                    || SKIPPED_DIRS.contains(&name.as_str())
                    || entry.path().join("pyvenv.cfg").exists()
                {
                    continue;
                }
                pending.push(rel);
            } else {
                if files.len() >= MAX_WALK_FILES {
                    warnings.push(format!(
                        "the tree has more than {MAX_WALK_FILES} files; only the first were \
                         looked at"
                    ));
                    return files;
                }
                files.insert(rel);
            }
        }
    }
    files
}

/// `home = ...` of a venv's `pyvenv.cfg`.
pub(super) fn read_pyvenv_home(cfg: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(cfg).ok()?;
    text.lines().find_map(|line| {
        let (key, value) = line.split_once('=')?;
        (key.trim() == "home")
            .then(|| PathBuf::from(value.trim()))
            .filter(|p| p.is_absolute())
    })
}

pub(super) fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

pub(super) fn has_glob_meta(text: &str) -> bool {
    text.contains(['*', '?', '[', ']', '{', '}', '\\', '!'])
}

/// A file name as a glob matching only itself.
pub(super) fn glob_literal(path: &str) -> String {
    path.chars()
        .map(|c| {
            if "*?[]{}".contains(c) {
                format!("[{c}]")
            } else {
                c.to_string()
            }
        })
        .collect()
}
