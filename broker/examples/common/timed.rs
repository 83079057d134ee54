//! The benches' witness executor: the sandbox's, with the wall time of each command it runs
//! recorded, in order, for the bench to read and clear around each intake.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use airlock_broker::sandboxed::SandboxExecutor;
use airlock_broker::witness::{CapturedRun, CommandGuard, TestExecutor};
use airlock_protocol::TestEnvironment;

pub struct Timed {
    pub inner: SandboxExecutor,
    pub commands: Arc<Mutex<Vec<Duration>>>,
}

impl TestExecutor for Timed {
    fn run(
        &self,
        tree: &Path,
        argv: &[String],
        timeout: Duration,
        env: &TestEnvironment,
        guard: &CommandGuard,
    ) -> airlock_broker::Result<CapturedRun> {
        let t = Instant::now();
        let out = self.inner.run(tree, argv, timeout, env, guard);
        self.commands.lock().unwrap().push(t.elapsed());
        out
    }
}
