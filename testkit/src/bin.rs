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
