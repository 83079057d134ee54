//! airlock-sandbox: runs one command inside a locked-down Linux sandbox.
//!
//! This crate owns every layer that stands between an untrusted command and the host:
//! user, mount, PID, IPC, UTS and network namespaces (the child sees only the roots it was
//! granted, its own `/proc`, a private `/tmp`, a loopback-only network, and, unless `/etc` is
//! granted, an `/etc/passwd` and `/etc/group` that name its user `airlock`); landlock
//! (filesystem roots, TCP bind/connect, abstract unix sockets and signals, and pathname unix
//! sockets where the kernel's landlock governs them); a seccomp filter (set-id mode bits
//! refused); `no_new_privs`, dropped capabilities and an unprivileged uid, which on the host is
//! never root: a root caller's command runs as a [`HostIdentity`] of its own
//! ([`host_identity`]), and every read-only directory grant is a read-only overlayfs whose
//! FIFOs and sockets are not the host's;
//! default signal dispositions and an empty signal mask, as a freshly started program expects;
//! cgroup and rlimit limits; a wall-clock timeout that kills the whole PID namespace; an output
//! cap with a drain deadline; and copy-on-write overlays whose writes never reach the lower tree.
//! A granted path appears at its own path, or at another one ([`SandboxBuilder::ro_at`],
//! [`SandboxBuilder::rw_at`]), which may lie inside an overlay (a prepared `node_modules`
//! shown read-only inside an overlay of the worktree).
//!
//! The network is closed unless the caller opts in ([`SandboxBuilder::network`]):
//! [`NetworkAccess::Loopback`] gives the command a network namespace of its own with `lo` up
//! and inet sockets allowed (a test suite's own servers work; nothing else is reachable);
//! [`NetworkAccess::Proxy`] adds one way out, a loopback port on which the sandbox's init
//! listens and whose listener it hands to the caller's egress proxy
//! ([`SandboxBuilder::egress`]), which runs outside the sandbox and decides what passes; and
//! [`NetworkAccess::Host`] shares the host's network (no network namespace, no landlock TCP
//! rules) and reads the files name resolution and TLS need ([`NETWORK_ETC_RO`]). Every other
//! layer stays, the layers left out on purpose are not reported missing, and
//! [`RunSummary::network`] records the grant.
//!
//! It must never weaken a layer silently: if a layer cannot be applied the run is refused with
//! an error naming the missing kernel feature, unless the caller asked for
//! [`SandboxBuilder::allow_degraded`], in which case [`RunSummary::layers_missing`] says what
//! was skipped. It has no network code of its own beyond bringing `lo` up and opening the
//! proxy's loopback listener (the proxy is the caller's), and never runs set-up code after `fork()` in a
//! multi-threaded process: all namespace, mount, landlock and seccomp work happens in a freshly
//! executed, single-threaded helper: the small [`helper::HELPER_BIN`] binary when it sits
//! beside the caller's binary (it starts and forks faster), else the caller's own binary
//! re-executed under a hidden argv marker. That fallback is why every binary using this crate
//! must call [`helper::run_if_requested`] as the first line of `main`.
//!
//! # Use
//!
//! ```no_run
//! use airlock_sandbox::SandboxBuilder;
//! use std::time::Duration;
//!
//! # fn main() -> airlock_sandbox::Result<()> {
//! let captured = SandboxBuilder::new()
//!     .ro("/usr")
//!     .rw("/work/tree")
//!     .overlay("/work/worktree", "/work/tree-view")
//!     .timeout(Duration::from_secs(60))
//!     .memory_mb(2048)
//!     .cwd("/work/tree")
//!     .build()?
//!     .run_captured(&["python3", "-m", "unittest"])?;
//! println!("exit {:?}, dropped {}", captured.summary.exit_code, captured.summary.output_bytes_dropped);
//! # Ok(())
//! # }
//! ```
//!
//! A non-zero exit of the child is not an error: it is in the [`RunSummary`]. Errors are
//! refusals ([`Error::Refused`], a missing kernel feature) and set-up failures.
//!
//! # Layering
//!
//! Modules, lowest first; a module imports only from those listed before it:
//! - facts: `types` (the layers, the network grants, `REPORT_FD`, `SANDBOX_ID`, `DEVICES`;
//!   it imports nothing of the crate), `error`.
//! - system calls: `sys`, the only `unsafe`.
//! - the helper's vocabulary: `report` (report lines, set-up failures), `identity`, `program`,
//!   `services`, `spec` (what the caller sends), `summary`.
//! - mechanisms: `cgroup`, `egress`, `mounts`, `layers` (landlock, seccomp), then `target`
//!   (the last process before the command).
//! - on top: `doctor` (the probes), `helper` (the supervisor and init), `builder` (the
//!   caller's side).
mod builder;
mod cgroup;
mod doctor;
mod egress;
mod error;
pub mod helper;
mod identity;
mod layers;
mod mounts;
mod program;
mod report;
mod services;
mod spec;
mod summary;
#[allow(unsafe_code)]
mod sys;
mod target;
mod types;

pub use builder::{Captured, Sandbox, SandboxBuilder};
pub use builder::{
    DEFAULT_PATH, LOOPBACK_ETC_RO, NETWORK_ETC_RO, RESOLVER_ETC, SYSTEM_RO, valid_env_name,
};
pub use doctor::{DoctorReport, LayerStatus, PRETEND_MISSING_ENV, probe};
pub use egress::EgressServe;
pub use error::{Error, Result};
pub use identity::{
    HOST_ID_ENV, HostIdentity, IdRange, IdentitySource, NOBODY_ID, SubordinateIds, host_identity,
    subordinate_ids,
};
pub use services::{Readiness, Service};
pub use summary::RunSummary;
pub use types::{Layer, NetworkAccess};
