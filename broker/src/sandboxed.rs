//! The production [`TestExecutor`]: every witness command runs in `airlock-sandbox`, with the
//! host's program directories read-only, the witness tree behind a copy-on-write overlay (the
//! run cannot change the tree it is judged on), no network and the configured time limit.

use std::path::{Path, PathBuf};
use std::time::Duration;

use airlock_sandbox::SandboxBuilder;

use crate::error::{Error, Result};
use crate::witness::{CapturedRun, TestExecutor};

/// Runs witness commands in the sandbox.
pub struct SandboxExecutor {
    extra_ro: Vec<PathBuf>,
    env: Vec<(String, String)>,
}

impl SandboxExecutor {
    /// An executor granting `extra_ro` read-only beside the system directories and setting
    /// `env` (operator configuration) for every command.
    pub fn new(extra_ro: Vec<PathBuf>, env: Vec<(String, String)>) -> Self {
        SandboxExecutor { extra_ro, env }
    }
}

impl TestExecutor for SandboxExecutor {
    fn run(&self, tree: &Path, argv: &[String], timeout: Duration) -> Result<CapturedRun> {
        let mut builder = SandboxBuilder::new().system_ro();
        for path in &self.extra_ro {
            builder = builder.ro(path.clone());
        }
        builder = builder
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("CARGO_TARGET_DIR", "/tmp/airlock-witness-target")
            .env("CI", "true");
        for (name, value) in &self.env {
            builder = builder.env(name.clone(), value.clone());
        }
        let captured = builder
            .overlay(tree, tree)
            .cwd(tree)
            .timeout(timeout)
            .build()
            .and_then(|sandbox| sandbox.run_captured(argv))
            .map_err(|e| Error::Witness(format!("sandbox: {e}")))?;
        Ok(CapturedRun {
            exit_code: if captured.summary.timed_out {
                None
            } else {
                captured.summary.exit_code
            },
            stdout: String::from_utf8_lossy(&captured.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&captured.stderr).into_owned(),
        })
    }
}
