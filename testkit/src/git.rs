//! Fixture repositories built with the `git` command.
//!
//! Every call runs under an isolated configuration (no system or global config) with a fixed
//! identity and fixed dates, so the same steps give the same commit ids on every machine.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The author and committer name of fixture commits.
pub const NAME: &str = "t";
/// The author and committer email of fixture commits.
pub const EMAIL: &str = "t@example.invalid";
/// The author and committer date of fixture commits.
pub const DATE: &str = "2020-01-01T00:00:00Z";

/// A `git` command in `dir` with the isolated configuration, fixed identity and dates.
pub fn command(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", NAME)
        .env("GIT_AUTHOR_EMAIL", EMAIL)
        .env("GIT_COMMITTER_NAME", NAME)
        .env("GIT_COMMITTER_EMAIL", EMAIL)
        .env("GIT_AUTHOR_DATE", DATE)
        .env("GIT_COMMITTER_DATE", DATE);
    cmd
}

/// Runs `git args` in `dir`; panics with its stderr on failure; returns stdout, trimmed.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = git_output(dir, args);
    assert!(
        out.status.success(),
        "git {args:?} in {} failed: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Like [`git`] but returns the raw output, success or not.
pub fn git_output(dir: &Path, args: &[&str]) -> Output {
    command(dir)
        .args(args)
        .output()
        .expect("the git command is needed by these tests")
}

/// Writes `content` to `root/rel`, creating the parent directories.
pub fn write(root: &Path, rel: &str, content: impl AsRef<[u8]>) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().expect("a relative path has a parent"))
        .expect("create the parent directories");
    std::fs::write(&path, content).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// A new repository at `dir` (created if missing) on branch `main`.
pub fn init(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).expect("create the repository directory");
    git(dir, &["init", "--quiet", "--initial-branch=main"]);
    dir.to_path_buf()
}

/// Writes `files` (path, content) in `repo` and commits everything; returns the commit id.
pub fn commit(repo: &Path, files: &[(&str, &str)], message: &str) -> String {
    for (path, content) in files {
        write(repo, path, content);
    }
    commit_all(repo, message)
}

/// Commits everything in the work tree (empty commits allowed); returns the commit id.
pub fn commit_all(repo: &Path, message: &str) -> String {
    git(repo, &["add", "--all"]);
    git(repo, &["commit", "--quiet", "--allow-empty", "-m", message]);
    git(repo, &["rev-parse", "HEAD"])
}

/// A new repository at `dir` holding `files` in one commit; returns the commit id.
pub fn repo_with(dir: &Path, files: &[(&str, &str)]) -> String {
    init(dir);
    commit(dir, files, "initial")
}

/// A repository in its own temporary directory, removed when dropped.
pub struct Repo {
    dir: tempfile::TempDir,
}

impl Default for Repo {
    fn default() -> Self {
        Repo::new()
    }
}

impl Repo {
    /// An empty repository on branch `main`.
    pub fn new() -> Repo {
        let dir = tempfile::tempdir().expect("a temporary directory");
        init(dir.path());
        Repo { dir }
    }

    /// The work tree.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Runs `git args` in the work tree (see [`git`]).
    pub fn git(&self, args: &[&str]) -> String {
        git(self.path(), args)
    }

    /// Writes a file of the work tree.
    pub fn write(&self, rel: &str, content: impl AsRef<[u8]>) {
        write(self.path(), rel, content);
    }

    /// Removes a file of the work tree.
    pub fn remove(&self, rel: &str) {
        let path = self.path().join(rel);
        std::fs::remove_file(&path).unwrap_or_else(|e| panic!("remove {}: {e}", path.display()));
    }

    /// Commits everything; returns the commit id.
    pub fn commit(&self, message: &str) -> String {
        commit_all(self.path(), message)
    }
}

/// Every file below `root` (not `.git`) with its bytes, sorted by relative path; a symbolic
/// link appears with its target as content. A byte-level picture of a tree.
pub fn tree_bytes(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("read a directory of the tree") {
            let path = entry.expect("a directory entry").path();
            let rel = path
                .strip_prefix(root)
                .expect("below the root")
                .to_string_lossy()
                .into_owned();
            if rel == ".git" {
                continue;
            }
            let meta = std::fs::symlink_metadata(&path).expect("stat a tree entry");
            if meta.is_dir() {
                pending.push(path);
            } else if meta.is_symlink() {
                let target = std::fs::read_link(&path).expect("read a link");
                out.push((rel, target.to_string_lossy().into_owned().into_bytes()));
            } else {
                out.push((rel, std::fs::read(&path).expect("read a file")));
            }
        }
    }
    out.sort();
    out
}

/// The commits of [`merged_history`].
#[derive(Debug, Clone)]
pub struct MergedHistory {
    /// The pin: pull requests #12 (a merge commit) and #15 (a squash commit) are merged into it,
    /// besides a `Merge branch 'docs'` merge that is no pull request.
    pub pin: String,
    /// One commit after the pin: the squash commit of pull request #20.
    pub after_pin: String,
}

/// A repository at `dir` with known merged fixes: #12 "Stop following redirects in a loop"
/// (a GitHub merge commit touching `src/http/redirects.py`), #15 "Keep the cookie domain when
/// merging cookie jars" (a squash commit touching `src/http/cookies.py`), a non-pull-request
/// merge of `docs` (`README.md`), the pin, then #20 "Decode UTF-16 JSON bodies with a byte
/// order mark" (`src/json/decoder.py`) after it.
pub fn merged_history(dir: &Path) -> MergedHistory {
    init(dir);
    commit(
        dir,
        &[
            (
                "src/http/redirects.py",
                "def follow(response):\n    return response.location\n",
            ),
            (
                "src/http/cookies.py",
                "class CookieJar:\n    def update(self, other):\n        pass\n",
            ),
            (
                "src/json/decoder.py",
                "def decode(body):\n    return body.decode('utf-8')\n",
            ),
            ("README.md", "# client\n"),
        ],
        "initial",
    );
    git(dir, &["checkout", "--quiet", "-b", "fix-redirect"]);
    commit(
        dir,
        &[(
            "src/http/redirects.py",
            "def follow(response, seen=()):\n    if response.location in seen:\n        raise TooManyRedirects()\n    return response.location\n",
        )],
        "Stop at a redirect already seen",
    );
    git(dir, &["checkout", "--quiet", "main"]);
    git(
        dir,
        &[
            "merge",
            "--quiet",
            "--no-ff",
            "fix-redirect",
            "-m",
            "Merge pull request #12 from alice/fix-redirect",
            "-m",
            "Stop following redirects in a loop",
            "-m",
            "A 301 response that points to itself made the client follow it forever.",
        ],
    );
    commit(
        dir,
        &[(
            "src/http/cookies.py",
            "class CookieJar:\n    def update(self, other):\n        self.domain = other.domain\n",
        )],
        "Keep the cookie domain when merging cookie jars (#15)\n\nCookieJar.update dropped the domain attribute.",
    );
    git(dir, &["checkout", "--quiet", "-b", "docs"]);
    commit(
        dir,
        &[("README.md", "# client\n\nRedirects and cookies.\n")],
        "docs",
    );
    git(dir, &["checkout", "--quiet", "main"]);
    git(
        dir,
        &[
            "merge",
            "--quiet",
            "--no-ff",
            "docs",
            "-m",
            "Merge branch 'docs'",
        ],
    );
    let pin = git(dir, &["rev-parse", "HEAD"]);
    let after_pin = commit(
        dir,
        &[(
            "src/json/decoder.py",
            "def decode(body):\n    return body.decode('utf-8-sig')\n",
        )],
        "Decode UTF-16 JSON bodies with a byte order mark (#20)",
    );
    MergedHistory { pin, after_pin }
}
