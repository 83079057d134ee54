//! Build script of the two binaries' packages (`airlock` here; `airlock-broker` takes this
//! file as a module): `AIRLOCK_VERSION` is what `--version` prints, the package's version and
//! the commit the binary was built from, `0.1.0 (abc1234 2026-12-06)` (short hash and commit
//! date), or `0.1.0 (unknown)` outside a git checkout or without git.
//!
//! Cargo runs this again only when `HEAD` or the ref it points to moves (a new commit, another
//! branch checked out), never for an edit of a file.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Set `AIRLOCK_VERSION` and say when cargo must run this again.
pub fn main() {
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let commit = git(&dir, &["log", "-1", "--format=%h %cs"]).unwrap_or_else(|| "unknown".into());
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    println!("cargo:rustc-env=AIRLOCK_VERSION={version} ({commit})");
    println!("cargo:rerun-if-changed=build.rs");
    let mut watched = vec!["HEAD".to_owned(), "packed-refs".to_owned()];
    if let Some(reference) = git(&dir, &["symbolic-ref", "-q", "HEAD"]) {
        watched.push(reference);
    }
    for name in watched {
        // A path that does not exist would make cargo run this script on every build.
        if let Some(path) = git(&dir, &["rev-parse", "--git-path", &name])
            .map(|p| dir.join(p))
            .filter(|p| p.exists())
        {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
}

/// `git ARGS` in `dir`: its first line of output, or `None` when git is missing or fails.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let output = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let text = String::from_utf8(output.stdout).ok()?;
    let line = text.lines().next()?.trim().to_owned();
    (!line.is_empty()).then_some(line)
}
