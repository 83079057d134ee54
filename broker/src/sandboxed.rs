//! The production [`TestExecutor`]: every witness command runs in `airlock-sandbox`, with the
//! host's program directories read-only, the witness tree behind a copy-on-write overlay (the
//! run cannot change the tree it is judged on), the run's network (loopback unless it
//! registered another within `witness_network`) and the configured time limit, in
//! the run's test environment (the same grants, variables and network as the supervisor's test runs)
//! plus the broker's own `witness_ro` and `witness_env`.
//!
//! The tests are not the run's to change: each test file the witness protects (pinned and
//! newly added ones, or a directory holding nothing else) is bind-mounted read-only onto the
//! overlay at its own path, and the `__pycache__` beside each is an empty read-only directory.
//! Inside, that is a read-only mount the command cannot remove or remount (seccomp refuses
//! `mount`, `umount2` and the new mount API, and the command holds no capability): `chmod`,
//! writing, truncating and reopening it for write through `/proc/self/fd` fail with `EROFS`;
//! `rename`/`unlink` of it or over it fail with `EBUSY`; a hard link of it is another mount
//! (`EXDEV`). A directory above one cannot be renamed away either: overlayfs refuses to
//! rename a directory of its lower layer without redirects (`EXDEV`), and the sandbox's
//! overlays are mounted with `userxattr`, with which the kernel never creates redirects
//! (`redirect_dir=nofollow` whatever its default; asking for another mode is `EINVAL`). Python neither writes bytecode nor reads it from the
//! tree (`PYTHONDONTWRITEBYTECODE`, `PYTHONPYCACHEPREFIX`), set after every other variable.

use std::path::{Path, PathBuf};
use std::time::Duration;

use airlock_policies::testrun::{NO_BYTECODE_DIR, SANDBOX_TREE, TestEnvironment};
use airlock_sandbox::SandboxBuilder;

use crate::error::{Error, Result};
use crate::witness::{CapturedRun, CommandGuard, TestExecutor};

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
    /// The run's variables (fixed ones last), then the broker's own, which win; bytecode is
    /// neither written nor read from the tree, whatever the operator set.
    fn variables(&self, test_env: &TestEnvironment) -> std::collections::BTreeMap<String, String> {
        let mut vars: std::collections::BTreeMap<String, String> = test_env
            .variables()
            .into_iter()
            .chain(self.env.clone())
            .collect();
        vars.insert("PYTHONDONTWRITEBYTECODE".to_owned(), "1".to_owned());
        vars.insert("PYTHONPYCACHEPREFIX".to_owned(), NO_BYTECODE_DIR.to_owned());
        vars
    }

    fn run(
        &self,
        tree: &Path,
        argv: &[String],
        timeout: Duration,
        test_env: &TestEnvironment,
        guard: &CommandGuard,
    ) -> Result<CapturedRun> {
        // The run's network, within what broker.toml allowed at registration; a `proxy`
        // network gets a proxy of its own for this one command.
        let (mut builder, proxy) =
            airlock_egress::with_network(SandboxBuilder::new(), &test_env.network);
        // The run's services, started inside before each witness command.
        builder = airlock_egress::with_services(builder, &test_env.services);
        builder = builder.system_ro();
        for path in self.extra_ro.iter().chain(test_env.ro.iter()) {
            builder = builder.ro(path.clone());
        }
        // The run's variables (fixed ones last), then the broker's own, which win.
        for (name, value) in self.variables(test_env) {
            builder = builder.env(name, value);
        }
        // The tree is seen at the one path every test command sees its tree at.
        let at = Path::new(SANDBOX_TREE);
        builder = builder.overlay(tree, at);
        for link in &test_env.links {
            builder = builder.ro_at(link.source.clone(), at.join(&link.path));
        }
        for path in &guard.read_only {
            builder = builder.ro_at(tree.join(path), at.join(path));
        }
        if let Some(empty) = &guard.empty_dir {
            for dir in &guard.no_pycache {
                builder = builder.ro_at(empty.clone(), at.join(dir).join("__pycache__"));
            }
        }
        if let Some(dir) = &guard.report_dir {
            airlock_sandbox::host_identity()
                .and_then(|host| host.hand_over(dir))
                .map_err(|e| Error::Witness(format!("sandbox: {e}")))?;
            builder = builder.rw(dir.clone());
        }
        let captured = builder
            .cwd(at)
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
            blocked: proxy.map(|p| p.blocked()).unwrap_or_default(),
        })
    }
}
