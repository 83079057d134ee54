//! The workspace's built binaries, found next to the running test executable.
//!
//! Cargo sets `CARGO_BIN_EXE_<name>` only for the binaries of the package under test; a test
//! that needs another package's binary (the broker from the root tests, say) finds it here. The
//! binary must have been built (`cargo test --workspace` builds them all).

use std::path::PathBuf;

/// The path of the workspace binary `name` in this test's target directory (`target/debug`).
pub fn path(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    // target/debug/deps/it-HASH -> target/debug
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("the test executable is in target/<profile>/deps");
    let bin = dir.join(name);
    assert!(
        bin.is_file(),
        "{} is not built; run `cargo build --workspace --bins` (or `cargo test --workspace`) first",
        bin.display()
    );
    bin
}

/// Check a binary's `--version` output: `NAME VERSION (HASH DATE)`, HASH a commit of the
/// checkout the test runs in (built from it, so HEAD or an ancestor: others may commit while
/// the tests run) and DATE that commit's date; `NAME VERSION (unknown)` outside a checkout.
pub fn assert_version_line(name: &str, version: &str, shown: &str) {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    let line = shown.trim_end();
    let prefix = format!("{name} {version} (");
    let build = line
        .strip_prefix(&prefix)
        .and_then(|rest| rest.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{line:?} is not `{prefix}...)`"));
    if git(&["rev-parse", "--git-dir"]).is_none() {
        assert_eq!(build, "unknown", "{line}");
        return;
    }
    let (hash, date) = build
        .split_once(' ')
        .unwrap_or_else(|| panic!("{line:?}: no commit hash and date"));
    assert!(
        hash.len() >= 7 && hash.chars().all(|c| c.is_ascii_hexdigit()),
        "{line}"
    );
    assert!(
        git(&["merge-base", "--is-ancestor", hash, "HEAD"]).is_some(),
        "{line}: {hash} is not HEAD or an ancestor of it"
    );
    assert_eq!(
        git(&["log", "-1", "--format=%cs", hash]).as_deref(),
        Some(date),
        "{line}: not the commit's date"
    );
}
