//! airlock-gates at its boundary: the example gates of `examples/gates/` built from their text
//! and run with their examples, and hostile gates, each refused by the host.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod examples;
mod hostile;

use std::path::{Path, PathBuf};
use std::time::Duration;

use airlock_gates::{FileStatus, GateEngine, GateFile, GateLimits, GateRequest, GateSpec};

/// The repository's `examples/gates/<name>` folder.
pub fn example_gate_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/gates")
        .join(name)
}

/// Small limits, so a runaway gate is stopped quickly.
pub fn test_limits() -> GateLimits {
    GateLimits {
        fuel: 50_000_000,
        memory_bytes: 16 << 20,
        timeout: Duration::from_secs(10),
    }
}

/// A request changing `files`, as the broker would build it.
pub fn request(files: Vec<GateFile>) -> GateRequest {
    GateRequest {
        repository: "acme/widgets".into(),
        issue_id: "GATE-7".into(),
        base_commit: "a".repeat(40),
        title: "fix: the thing".into(),
        body: "Fixes it.".into(),
        scope: "source-only".into(),
        test_change_reason: "none".into(),
        before_failing_test: "tests/test_x.py::test_x".into(),
        digest: airlock_schemas::DiffDigest {
            files_changed: files.iter().map(|f| f.path.clone()).collect(),
            ..Default::default()
        },
        files,
    }
}

/// A modified file with both sides.
pub fn modified(path: &str, base: &str, patched: &str) -> GateFile {
    GateFile {
        path: path.into(),
        status: FileStatus::Modified,
        base: Some(base.as_bytes().to_vec()),
        patched: Some(patched.as_bytes().to_vec()),
    }
}

/// Write `text` as a gate file and a minimal valid examples file into `dir`; the spec to load
/// them.
pub fn spec_in(dir: &Path, name: &str, text: &str, examples: &str, limits: GateLimits) -> GateSpec {
    let component = dir.join(format!("{name}.wat"));
    std::fs::write(&component, text).unwrap();
    let examples_path = dir.join(format!("{name}.examples.toml"));
    std::fs::write(&examples_path, examples).unwrap();
    GateSpec {
        name: name.into(),
        component,
        examples: examples_path,
        limits,
    }
}

/// A fresh engine.
pub fn engine() -> GateEngine {
    GateEngine::new().unwrap()
}
