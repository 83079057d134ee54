//! `airlock doctor --config`: the test environment built and the base inventory taken at the
//! pin in the sandbox, exactly as `airlock run` will, with nothing sent to a model or a broker.

use super::{RunError, prepare_repo_key};
use crate::adapters::{PrepareKey, SandboxTestRunner};
use crate::config::Config;
use crate::ports::TestRunner;
use airlock_checkout::MirrorCache;
use std::path::PathBuf;

/// What `airlock doctor --config` was asked.
#[derive(Debug, Clone)]
pub struct TestsDoctorArgs {
    /// `airlock.toml`.
    pub config: PathBuf,
    /// Repository path or URL.
    pub repo: String,
    /// Any revision (default `HEAD`).
    pub commit: String,
}

/// What `airlock doctor --config` found: the environment built, the runner checked against the
/// command, the base inventory taken, at the pin, in the sandbox, exactly as `airlock run` will.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TestsDoctorReport {
    /// The pinned commit.
    pub base_commit: String,
    /// The runner named in `[tests]`.
    pub runner: airlock_policies::testrun::TestRunner,
    /// What the run will do: environment, command, prepare record, inventory.
    pub baseline: crate::ports::Baseline,
}

/// Run prepare and the full test command at the pin in the sandbox and report the inventory;
/// nothing is sent to a model or a broker. A config or prepare problem is an error naming the
/// `airlock.toml` key to fix.
pub fn doctor_tests(args: &TestsDoctorArgs) -> Result<TestsDoctorReport, RunError> {
    let config = Config::load(&args.config)?;
    let cache = MirrorCache::new(&config.paths.cache_dir)?;
    let mirror = cache.mirror(&args.repo)?;
    let commit = mirror.resolve(&args.commit)?;
    std::fs::create_dir_all(&config.paths.runs_root).map_err(|source| RunError::Write {
        path: config.paths.runs_root.clone(),
        source,
    })?;
    let scratch = tempfile::Builder::new()
        .prefix("doctor-")
        .tempdir_in(&config.paths.runs_root)
        .map_err(|source| RunError::Write {
            path: config.paths.runs_root.clone(),
            source,
        })?;
    let worktree = mirror.materialize(&commit, &scratch.path().join("worktree"))?;
    let tracked = worktree.tracked_files()?;
    let tests = SandboxTestRunner::new(
        worktree.path(),
        config.tests.clone(),
        PrepareKey {
            repo_key: prepare_repo_key(&config, &args.repo),
            commit: commit.as_str().to_string(),
            tracked,
            envs_dir: config.paths.envs_dir.clone(),
            commit_time: mirror.commit_time(&commit).ok(),
            describe: mirror.describe(&commit),
        },
    );
    let baseline = tests.baseline().map_err(|e| RunError::Setup {
        what: "the test environment",
        message: e.to_string(),
    })?;
    Ok(TestsDoctorReport {
        base_commit: commit.as_str().to_string(),
        runner: config.tests.runner,
        baseline,
    })
}
