//! The summary of one sandboxed run: exactly what `airlock sandbox run --json` prints.

use crate::types::{Layer, NetworkAccess};
use serde::{Deserialize, Serialize};

/// What happened in one sandboxed run. A child that exits non-zero, is killed by a signal or
/// times out is reported here, not as an error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunSummary {
    /// The child's exit code, if it exited normally.
    pub exit_code: Option<i32>,
    /// The signal that killed the child, if it was killed (9 after a timeout).
    pub signal: Option<i32>,
    /// Whether the wall-clock timeout fired and the whole PID namespace was killed.
    pub timed_out: bool,
    /// Wall-clock time from spawning the helper to the sandbox being gone, in milliseconds.
    pub wall_ms: u64,
    /// User plus system CPU time of the whole tree (the processes that were reaped), in ms.
    pub cpu_ms: u64,
    /// Peak memory in bytes: the cgroup's high-water mark when the memory controller was
    /// used, otherwise the largest resident set of any one process.
    pub peak_memory_bytes: Option<u64>,
    /// Where `peak_memory_bytes` comes from: `"cgroup"` or `"max_rss"`.
    pub peak_memory_source: Option<String>,
    /// Bytes of stdout passed on to the caller.
    pub stdout_bytes: u64,
    /// Bytes of stderr passed on to the caller.
    pub stderr_bytes: u64,
    /// Bytes of output (stdout and stderr together) dropped because of the output cap.
    pub output_bytes_dropped: u64,
    /// Whether output was still arriving when the drain deadline after the child's exit passed.
    pub drain_timed_out: bool,
    /// Layers that were applied, sorted.
    pub layers_applied: Vec<Layer>,
    /// Layers that were missing and skipped (only non-empty for cgroup layers, or when
    /// degraded runs were allowed), sorted.
    pub layers_missing: Vec<Layer>,
    /// The landlock ABI version the kernel offered (0 when landlock is unavailable).
    pub landlock_abi: u32,
    /// The network access the run was granted (`"none"`, `"loopback"`, `"proxy"` or
    /// `"host"`). Landlock's TCP rules are left out on purpose with all but `"none"`, and the
    /// network namespace too with `"host"`; what is left out appears in neither
    /// `layers_applied` nor `layers_missing`.
    #[serde(default)]
    pub network: NetworkAccess,
    /// The uid the command ran as on the host (never 0: a root caller's command runs as its
    /// own identity, see [`crate::host_identity`]).
    #[serde(default)]
    pub host_uid: Option<u32>,
    /// The gid the command ran as on the host.
    #[serde(default)]
    pub host_gid: Option<u32>,
}

impl RunSummary {
    /// True when the child exited with code 0 and did not time out.
    pub fn success(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out
    }
}
