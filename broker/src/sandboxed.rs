//! The production [`TestExecutor`]: every witness command runs in `airlock-sandbox`, with the
//! host's program directories read-only, the witness tree behind a copy-on-write overlay (the
//! run cannot change the tree it is judged on), no network and the configured time limit, in
//! the run's test environment (the same grants and variables as the supervisor's test runs)
//! plus the broker's own `witness_ro` and `witness_env`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use airlock_policies::testrun::TestEnvironment;
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
    /// `env` (operator configuration of the broker) for every command.
    pub fn new(extra_ro: Vec<PathBuf>, env: Vec<(String, String)>) -> Self {
        SandboxExecutor { extra_ro, env }
    }
}

impl TestExecutor for SandboxExecutor {
    fn run(
        &self,
        tree: &Path,
        argv: &[String],
        timeout: Duration,
        test_env: &TestEnvironment,
    ) -> Result<CapturedRun> {
        let mut builder = SandboxBuilder::new().system_ro();
        for path in self.extra_ro.iter().chain(test_env.ro.iter()) {
            builder = builder.ro(path.clone());
        }
        // The run's variables (fixed ones last), then the broker's own, which win.
        for (name, value) in test_env.variables().into_iter().chain(self.env.clone()) {
            builder = builder.env(name, value);
        }
        builder = builder.overlay(tree, tree);
        for link in &test_env.links {
            builder = builder.ro_at(link.source.clone(), tree.join(&link.path));
        }
        let captured = builder
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
