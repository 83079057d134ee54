//! The demo's repositories on disk: each bundled example written out and committed as a git
//! repository, its bare stand-in of the forge and the broker's clone of that; and the git and
//! file helpers every step of the demo writes with.

use anyhow::{Context, bail};
use std::path::Path;
use std::process::Command;

use super::scenarios::REPOS;

/// Write every example repository under `workdir/repos/`, commit it, and make its forge
/// stand-in (`forge/<name>.git`) and the broker's clone (`clones/<name>/`), printing each.
pub(super) fn create_example_repos(workdir: &Path) -> anyhow::Result<()> {
    for repo in REPOS {
        let path = workdir.join("repos").join(repo.name);
        for (rel, text) in repo.files {
            let rel = rel
                .strip_prefix(repo.name)
                .and_then(|r| r.strip_prefix('/'))
                .unwrap_or(rel);
            let file = path.join(rel);
            if let Some(parent) = file.parent() {
                std::fs::create_dir_all(parent)
                    .with_context(|| format!("creating {}", parent.display()))?;
            }
            write(&file, text)?;
        }
        git(&path, &["init", "-q", "-b", "main"])?;
        git(&path, &["add", "-A"])?;
        git(&path, &["commit", "-q", "-m", "Initial commit"])?;
        // The forge stand-in the broker pushes approved branches to (bare, as a forge's
        // repositories are), and the broker's own clone of it.
        let forge = workdir.join("forge").join(format!("{}.git", repo.name));
        let clone = workdir.join("clones").join(repo.name);
        git(
            workdir,
            &[
                "clone",
                "-q",
                "--bare",
                &path.to_string_lossy(),
                &forge.to_string_lossy(),
            ],
        )?;
        git(
            workdir,
            &[
                "clone",
                "-q",
                &forge.to_string_lossy(),
                &clone.to_string_lossy(),
            ],
        )?;
        let commit = git(&path, &["rev-parse", "HEAD"])?;
        outln!("  demo/{:<6} {} at {}", repo.name, path.display(), &commit);
    }
    Ok(())
}

/// Write `text` to `path`, naming the path on failure.
pub(super) fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// Run git with a fixed identity (the demo's commits must not depend on the user's config);
/// its standard output, trimmed.
pub(super) fn git(dir: &Path, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "airlock demo")
        .env("GIT_AUTHOR_EMAIL", "demo@localhost")
        .env("GIT_COMMITTER_NAME", "airlock demo")
        .env("GIT_COMMITTER_EMAIL", "demo@localhost")
        .env("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
        .env("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z")
        .output()
        .with_context(|| format!("running git {} (is git installed?)", args.join(" ")))?;
    if !out.status.success() {
        bail!(
            "git {} in {} failed: {}",
            args.join(" "),
            dir.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}
