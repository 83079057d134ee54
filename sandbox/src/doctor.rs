//! What this host supports, layer by layer (`airlock doctor`).
//!
//! The probes fork and unshare, so they run in the re-executed helper (never in the caller's
//! possibly multi-threaded process), which prints a [`DoctorReport`] as JSON.

use crate::error::{Error, Result};
use crate::identity::{HostIdentity, SubordinateIds};
use crate::report::Failure;
use crate::sys;
use crate::types::{Layer, NetworkAccess, SANDBOX_ID};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// First argument that makes the binary act as the capability probe of `airlock doctor`
/// ([`crate::helper::run_if_requested`] dispatches it to [`probe_main`]).
pub(crate) const PROBE_MARKER: &str = "__airlock-sandbox-probe";

/// Environment variable naming layers (comma-separated snake_case names) to treat as missing.
/// It can only take protection away, which makes runs refused; it exists so the refusal paths
/// can be tested on a host that has every feature.
pub const PRETEND_MISSING_ENV: &str = "AIRLOCK_SANDBOX_PRETEND_MISSING";

/// The layers named in [`PRETEND_MISSING_ENV`].
pub(crate) fn pretend_missing_from_env() -> Vec<Layer> {
    std::env::var(PRETEND_MISSING_ENV)
        .map(|v| {
            v.split(',')
                .filter_map(|n| Layer::from_name(n.trim()))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether one layer is available on this host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayerStatus {
    /// The layer.
    pub layer: Layer,
    /// The kernel feature behind it.
    pub feature: String,
    /// Whether the probe succeeded.
    pub available: bool,
    /// Whether runs are refused (without `--allow-degraded`) when it is missing.
    pub required: bool,
    /// What the probe found.
    pub detail: String,
}

/// Who a run's command would be on the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostIdentityReport {
    /// The identity (none when [`crate::HOST_ID_ENV`] is set to something unusable, which
    /// refuses every run).
    pub identity: Option<HostIdentity>,
    /// What it is and where it comes from, or what is wrong with the configuration.
    pub detail: String,
    /// For a root caller: whether a directory under the temporary directory could be shown
    /// through an idmapped mount, which overlays need (none for a non-root caller, whose
    /// command is the caller and needs none).
    pub idmapped_mounts: Option<bool>,
    /// The caller's subordinate ids.
    pub subordinate_ids: SubordinateIds,
}

/// The host's support for every layer, and whether runs would be refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DoctorReport {
    /// `uname -r`.
    pub kernel: String,
    /// The landlock ABI the kernel offers (0 when none).
    pub landlock_abi: u32,
    /// One entry per layer, in [`Layer::ALL`] order.
    pub layers: Vec<LayerStatus>,
    /// Who a run's command would be on the host.
    pub host: HostIdentityReport,
    /// True when a required layer is missing (or the host identity is misconfigured), so runs
    /// without `--allow-degraded` are refused.
    pub runs_refused: bool,
}

impl DoctorReport {
    /// True when every layer, required or not, is available.
    pub fn all_available(&self) -> bool {
        self.layers.iter().all(|l| l.available)
    }
}

/// Probe the host by running `helper_exe` (a binary that calls
/// [`crate::helper::run_if_requested`] first thing) in probe mode.
pub fn probe(helper_exe: Option<&Path>) -> Result<DoctorReport> {
    let exe = match helper_exe {
        Some(p) => p.to_path_buf(),
        None => std::env::current_exe().map_err(|source| Error::Helper {
            exe: PathBuf::from("(current executable)"),
            source,
        })?,
    };
    let output = Command::new(&exe)
        .arg(PROBE_MARKER)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|source| Error::Helper {
            exe: exe.clone(),
            source,
        })?;
    serde_json::from_slice(&output.stdout).map_err(|e| {
        Error::Protocol(format!(
            "probe output of {} is not a report ({e}); does its main call run_if_requested()?",
            exe.display()
        ))
    })
}

/// Run `f` in a forked child and return its exit code (or -signal).
fn in_child(f: impl FnOnce() -> i32) -> std::result::Result<i32, String> {
    match sys::fork() {
        Ok(0) => sys::exit_now(f()),
        Ok(pid) => match sys::waitpid(pid, 0) {
            Ok((_, status)) => match sys::decode_status(status) {
                (Some(code), _) => Ok(code),
                (_, Some(sig)) => Ok(-sig),
                _ => Err("unknown wait status".into()),
            },
            Err(e) => Err(e.to_string()),
        },
        Err(e) => Err(e.to_string()),
    }
}

fn errno_text(code: i32) -> String {
    std::io::Error::from_raw_os_error(code).to_string()
}

fn probe_unshare(flags: libc::c_int) -> (bool, String) {
    match in_child(|| match sys::unshare(flags) {
        Ok(()) => 0,
        Err(e) => e.raw_os_error().unwrap_or(255),
    }) {
        Ok(0) => (true, "unshare succeeded".into()),
        Ok(code) if code > 0 => (false, format!("unshare failed: {}", errno_text(code))),
        Ok(code) => (false, format!("probe killed by signal {}", -code)),
        Err(e) => (false, e),
    }
}

/// Drop privileges as the target does, in a child that first enters a user namespace where it
/// is root, its maps written from here as the helper writes init's (for a root caller they map
/// the command's id to `host`): `step` is the step under test.
fn probe_privilege_drop(
    host: &HostIdentity,
    step: &dyn Fn() -> std::result::Result<(), Failure>,
    ok: &str,
) -> (bool, String) {
    let (uid, gid) = sys::ids();
    let pipes = sys::pipe().and_then(|a| sys::pipe().map(|b| (a, b)));
    let Ok(((ready_r, ready_w), (go_r, go_w))) = pipes else {
        return (false, "pipe failed".into());
    };
    let child = match sys::fork() {
        Ok(0) => {
            drop(ready_r);
            drop(go_w);
            let unshared = sys::unshare(libc::CLONE_NEWUSER).is_ok();
            let _ = sys::write_all(&ready_w, if unshared { b"1" } else { b"0" });
            let mut byte = [0u8; 1];
            if !unshared || !matches!(sys::read(&go_r, &mut byte), Ok(1)) {
                sys::exit_now(2)
            }
            sys::exit_now(i32::from(step().is_err()))
        }
        Ok(pid) => pid,
        Err(e) => return (false, e.to_string()),
    };
    drop(ready_w);
    drop(go_r);
    let mut byte = [0u8; 1];
    if matches!(sys::read(&ready_r, &mut byte), Ok(1))
        && byte[0] == b'1'
        && crate::identity::write_outer_maps(child, uid, gid, host).is_ok()
    {
        let _ = sys::write_all(&go_w, b"1");
    }
    drop(go_w);
    let status = sys::waitpid(child, 0).map(|(_, status)| sys::decode_status(status));
    match status {
        Ok((Some(0), _)) => (true, ok.to_string()),
        Ok((Some(1), _)) => (
            false,
            "failed; `airlock sandbox run -- true` shows the error".to_string(),
        ),
        Ok((Some(2), _)) => (false, "needs user namespaces".to_string()),
        Ok((_, Some(signal))) => (false, format!("probe killed by signal {signal}")),
        Ok((code, _)) => (false, format!("probe exited with {code:?}")),
        Err(e) => (false, e.to_string()),
    }
}

fn probe_overlay() -> (bool, String) {
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => return (false, format!("temporary directory: {e}")),
    };
    for sub in ["lower", "upper", "work", "merged"] {
        if let Err(e) = std::fs::create_dir(dir.path().join(sub)) {
            return (false, format!("temporary directory: {e}"));
        }
    }
    let root = dir.path().to_path_buf();
    let (uid, gid) = sys::ids();
    let result = in_child(|| {
        if sys::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS).is_err() {
            return 10;
        }
        let _ = std::fs::write("/proc/self/setgroups", "deny");
        if std::fs::write("/proc/self/uid_map", format!("0 {uid} 1")).is_err()
            || std::fs::write("/proc/self/gid_map", format!("0 {gid} 1")).is_err()
        {
            return 11;
        }
        if sys::mount(
            None,
            Path::new("/"),
            None,
            libc::MS_REC | libc::MS_PRIVATE,
            None,
        )
        .is_err()
        {
            return 12;
        }
        let data = format!(
            "lowerdir={},upperdir={},workdir={},userxattr",
            root.join("lower").display(),
            root.join("upper").display(),
            root.join("work").display()
        );
        let merged = root.join("merged");
        if let Err(e) = sys::mount(
            Some(Path::new("overlay")),
            &merged,
            Some("overlay"),
            0,
            Some(&data),
        ) {
            return 100 + e.raw_os_error().unwrap_or(0).min(100);
        }
        if std::fs::write(merged.join("probe"), "x").is_err() {
            return 13;
        }
        if root.join("lower/probe").exists() || !root.join("upper/probe").exists() {
            return 14;
        }
        0
    });
    overlay_verdict(
        result,
        "overlayfs mounted in a user namespace; writes reached only the upper layer",
    )
}

/// A read-only overlayfs of two lower layers, as each read-only directory grant is shown,
/// mounted in a user namespace, and a file of the lower layer read through it.
/// The verdict of an overlay probe child: 0 is `ok`, 10 and 11 the user namespace, 100 + errno
/// the mount, anything else the step that failed.
fn overlay_verdict(result: std::result::Result<i32, String>, ok: &str) -> (bool, String) {
    match result {
        Ok(0) => (true, ok.to_owned()),
        Ok(10) => (false, "no user namespace".into()),
        Ok(11) => (false, "cannot write uid map".into()),
        Ok(code) if code >= 100 => (
            false,
            format!("overlay mount failed: {}", errno_text(code - 100)),
        ),
        Ok(code) => (false, format!("overlay probe failed (step {code})")),
        Err(e) => (false, e),
    }
}

fn probe_grant_overlay() -> (bool, String) {
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => return (false, format!("temporary directory: {e}")),
    };
    let root = dir.path().to_path_buf();
    for sub in ["lower", "empty", "view"] {
        if let Err(e) = std::fs::create_dir(root.join(sub)) {
            return (false, format!("temporary directory: {e}"));
        }
    }
    if let Err(e) = std::fs::write(root.join("lower/probe"), "x") {
        return (false, format!("temporary directory: {e}"));
    }
    let (uid, gid) = sys::ids();
    let result = in_child(|| {
        if sys::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS).is_err() {
            return 10;
        }
        let _ = std::fs::write("/proc/self/setgroups", "deny");
        if std::fs::write("/proc/self/uid_map", format!("0 {uid} 1")).is_err()
            || std::fs::write("/proc/self/gid_map", format!("0 {gid} 1")).is_err()
        {
            return 11;
        }
        let lowerdir = format!(
            "{}:{}",
            root.join("lower").display(),
            root.join("empty").display()
        );
        let attrs = sys::MOUNT_ATTR_RDONLY | sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV;
        match sys::fs_mount("overlay", &[("lowerdir", &lowerdir)], attrs)
            .and_then(|tree| sys::move_mount_to_path(&tree, &root.join("view")))
        {
            Ok(()) => {}
            Err(e) => return 100 + e.raw_os_error().unwrap_or(0).min(100),
        }
        match std::fs::read_to_string(root.join("view/probe")) {
            Ok(text) if text == "x" => 0,
            _ => 12,
        }
    });
    overlay_verdict(
        result,
        "a read-only overlayfs of two lower layers mounted in a user namespace",
    )
}

/// For a root caller: whether a fresh directory under the temporary directory can be idmapped
/// as overlay lowers are.
fn probe_idmapped_mount(host: &HostIdentity) -> Option<bool> {
    if host.is_caller() {
        return None;
    }
    let dir = tempfile::tempdir().ok()?;
    let (uid, gid) = sys::ids();
    let ok = crate::mounts::idmapped_copy(dir.path(), (uid, gid), host).is_ok();
    Some(ok)
}

fn probe_seccomp() -> (bool, String) {
    let programs = match crate::layers::seccomp_programs(NetworkAccess::None) {
        Ok(p) => p,
        Err(f) => return (false, f.detail),
    };
    let result = in_child(|| {
        if sys::set_no_new_privs().is_err() {
            return 10;
        }
        if crate::layers::apply_seccomp(&programs).is_err() {
            return 11;
        }
        // The descriptor, if any, is closed right away.
        if sys::inet_stream_socket().is_ok() {
            return 12;
        }
        0
    });
    match result {
        Ok(0) => (true, "filter installed; socket(AF_INET) refused".into()),
        Ok(10) => (false, "prctl(PR_SET_NO_NEW_PRIVS) failed".into()),
        Ok(11) => (false, "seccomp(SECCOMP_SET_MODE_FILTER) failed".into()),
        Ok(12) => (
            false,
            "filter installed but socket(AF_INET) was allowed".into(),
        ),
        Ok(code) => (false, format!("probe failed ({code})")),
        Err(e) => (false, e),
    }
}

fn probe_cgroup(controller: &str) -> (bool, String) {
    let base = Path::new("/sys/fs/cgroup").join(controller);
    if !base.join("cgroup.procs").is_file() {
        return (
            false,
            format!("{} is not a cgroup v1 hierarchy", base.display()),
        );
    }
    let dir = base.join(format!("airlock-probe-{}", sys::getpid()));
    match std::fs::create_dir(&dir) {
        Ok(()) => {
            let _ = std::fs::remove_dir(&dir);
            (true, format!("{} writable", base.display()))
        }
        Err(e) => (
            false,
            format!("cannot create a cgroup in {}: {e}", base.display()),
        ),
    }
}

/// Entry point of the probe helper: print the report as JSON and exit.
pub(crate) fn probe_main() -> ! {
    let pretend = pretend_missing_from_env();
    let abi = if pretend.contains(&Layer::LandlockFs) {
        0
    } else {
        sys::landlock_abi()
    };
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let userns = probe_unshare(libc::CLONE_NEWUSER);
    let with_user = |flag| {
        if userns.0 {
            probe_unshare(libc::CLONE_NEWUSER | flag)
        } else {
            (false, "needs user namespaces".to_string())
        }
    };
    let nnp = match in_child(|| i32::from(sys::set_no_new_privs().is_err())) {
        Ok(0) => (true, "prctl succeeded".to_string()),
        _ => (false, "prctl(PR_SET_NO_NEW_PRIVS) failed".to_string()),
    };
    let identity = crate::identity::host_identity();
    let host = match &identity {
        Ok(host) => *host,
        // Probed as a root caller's default would be; the report says what is wrong.
        Err(_) => HostIdentity {
            uid: crate::identity::NOBODY_ID,
            gid: crate::identity::NOBODY_ID,
            source: crate::identity::IdentitySource::Nobody,
        },
    };
    let mut layers = Vec::new();
    for layer in Layer::ALL {
        let (available, detail) = match layer {
            Layer::UserNamespace => userns.clone(),
            Layer::UnprivilegedUid => probe_privilege_drop(
                &host,
                &|| crate::target::become_unprivileged(true, &host),
                &format!(
                    "uid and gid {} in a nested user namespace; on the host {}",
                    SANDBOX_ID,
                    host.describe()
                ),
            ),
            Layer::DropCapabilities => probe_privilege_drop(
                &host,
                &|| {
                    crate::target::become_unprivileged(true, &host)?;
                    crate::target::drop_bounding_set()?;
                    crate::target::drop_capabilities()
                },
                "every capability set empty after dropping",
            ),
            Layer::GrantOverlay => probe_grant_overlay(),
            Layer::MountNamespace => with_user(libc::CLONE_NEWNS),
            Layer::PidNamespace => with_user(libc::CLONE_NEWPID),
            Layer::NetNamespace => with_user(libc::CLONE_NEWNET),
            Layer::IpcNamespace => with_user(libc::CLONE_NEWIPC),
            Layer::UtsNamespace => with_user(libc::CLONE_NEWUTS),
            Layer::LandlockFs => (abi >= 1, format!("landlock ABI {abi}")),
            Layer::LandlockNet => (abi >= 4, format!("landlock ABI {abi} (needs 4)")),
            Layer::LandlockScope => (abi >= 6, format!("landlock ABI {abi} (needs 6)")),
            Layer::Seccomp => probe_seccomp(),
            Layer::NoNewPrivs => nnp.clone(),
            Layer::Rlimits => (true, "setrlimit is always available".into()),
            Layer::CgroupPids => probe_cgroup("pids"),
            Layer::CgroupMemory => probe_cgroup("memory"),
            Layer::Overlay => probe_overlay(),
        };
        let (available, detail) = if pretend.contains(&layer) {
            (
                false,
                format!("treated as unavailable ({PRETEND_MISSING_ENV})"),
            )
        } else {
            (available, detail)
        };
        layers.push(LayerStatus {
            layer,
            feature: layer.kernel_feature().to_string(),
            available,
            required: layer.required(),
            detail,
        });
    }
    let runs_refused = layers.iter().any(|l| l.required && !l.available) || identity.is_err();
    let report = DoctorReport {
        kernel,
        landlock_abi: abi,
        layers,
        host: HostIdentityReport {
            detail: match &identity {
                Ok(host) => host.describe(),
                Err(e) => e.to_string(),
            },
            identity: identity.ok(),
            idmapped_mounts: probe_idmapped_mount(&host),
            subordinate_ids: crate::identity::subordinate_ids(),
        },
        runs_refused,
    };
    let code = match serde_json::to_vec(&report) {
        Ok(json) => i32::from(sys::write_all(std::io::stdout(), &json).is_err()),
        Err(_) => 1,
    };
    sys::exit_now(code)
}
