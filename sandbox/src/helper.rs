//! The freshly executed set-up helper.
//!
//! The dedicated [`HELPER_BIN`] binary (or, without it, the caller's own binary) is started
//! with a hidden first argument and the protocol string. In that fresh, single-threaded
//! process the helper (the *supervisor*) creates the cgroups, clones the
//! sandbox's *init* into new user, mount, PID, network (unless the run was granted the host's
//! network), IPC and UTS namespaces, writes its uid map, releases it, and enforces the
//! wall-clock timeout by killing it (which kills the whole PID namespace). Before the clone it
//! plans the mounts (reading the host's mount table) and, for a root caller, makes the
//! detached idmapped mounts only root in the host's user namespace may make; init inherits
//! both. Init builds the new root, brings loopback up and forks the *target*, which drops
//! privileges, applies landlock and seccomp, and execs the command.

use crate::cgroup::Cgroups;
use crate::identity::{HostIdentity, write_outer_maps};
use crate::report::{Failure, Report, report};
use crate::spec::Spec;
use crate::sys::Signal;
use crate::types::{Layer, NetworkAccess, REPORT_FD};
use crate::{doctor, mounts, sys, target};
use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

/// First argument that makes the binary act as the run helper.
pub(crate) const RUN_MARKER: &str = "__airlock-sandbox-helper";
/// Second argument of a run: the caller's protocol, the crate version and a hash of this
/// crate's sources (see `build.rs`). The spec and report formats may change between builds, so
/// a helper binary from another build refuses to run.
pub(crate) const PROTOCOL: &str = concat!(
    "airlock-sandbox/",
    env!("CARGO_PKG_VERSION"),
    "/",
    env!("AIRLOCK_SANDBOX_SOURCE_HASH")
);
/// Exit code of a helper that refused the caller's protocol (before it wrote anything).
pub(crate) const PROTOCOL_MISMATCH: i32 = 126;
/// File name of the dedicated helper binary built from this crate.
pub const HELPER_BIN: &str = "airlock-sandbox-helper";

/// If this process was started as the sandbox set-up helper, run it and never return.
///
/// Call it as the very first statement of `main` in every binary that uses this crate, before
/// any thread is started: the helper relies on being single-threaded. (Runs prefer the small
/// dedicated helper binary, [`HELPER_BIN`], when it sits next to the caller's binary: a small
/// binary starts and forks faster. Every binary still carries the helper as the fallback.)
pub fn run_if_requested() {
    let mut args = std::env::args_os().skip(1);
    let Some(first) = args.next() else {
        return;
    };
    if first == RUN_MARKER {
        if args.next().is_none_or(|p| p != PROTOCOL) {
            sys::exit_now(PROTOCOL_MISMATCH)
        }
        supervise()
    } else if first == doctor::PROBE_MARKER {
        doctor::probe_main()
    }
}

/// The dedicated helper next to `exe` (or, for a test or example binary in
/// `target/<profile>/{deps,examples}`, in the profile directory above it), if there is one.
pub(crate) fn find_dedicated(exe: &std::path::Path) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let dir = exe.parent()?;
    let mut candidates = vec![dir.join(HELPER_BIN)];
    if dir
        .file_name()
        .is_some_and(|n| n == "deps" || n == "examples")
        && let Some(profile) = dir.parent()
    {
        candidates.push(profile.join(HELPER_BIN));
    }
    candidates.into_iter().find(|c| {
        c.as_path() != exe
            && std::fs::metadata(c)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

fn abort(failure: Failure) -> ! {
    report(&failure.into_report());
    sys::exit_now(125)
}

fn read_spec() -> Result<Spec, Failure> {
    let mut buf = Vec::new();
    std::io::stdin()
        .lock()
        .read_to_end(&mut buf)
        .map_err(|e| Failure::setup("read the run specification", e))?;
    serde_json::from_slice(&buf).map_err(|e| Failure {
        feature: None,
        stage: "parse the run specification".into(),
        detail: e.to_string(),
    })
}

/// Descriptor hygiene: stdin becomes /dev/null, the report descriptor is close-on-exec and
/// nothing else the caller may have leaked survives.
fn tidy_descriptors() -> Result<(), Failure> {
    let null = std::fs::File::open("/dev/null").map_err(|e| Failure::setup("open /dev/null", e))?;
    sys::stdin_from(&null).map_err(|e| Failure::setup("stdin to /dev/null", e))?;
    drop(null);
    sys::set_cloexec(sys::report_fd(), true).map_err(|e| Failure::setup("report descriptor", e))?;
    sys::close_from(REPORT_FD as u32 + 1).map_err(|e| Failure::setup("close_range", e))
}

const NAMESPACES: [Layer; 6] = [
    Layer::UserNamespace,
    Layer::MountNamespace,
    Layer::PidNamespace,
    Layer::NetNamespace,
    Layer::IpcNamespace,
    Layer::UtsNamespace,
];

/// All namespace flags the sandbox's init is cloned with.
pub(crate) const CLONE_FLAGS: libc::c_int = libc::CLONE_NEWUSER
    | libc::CLONE_NEWNS
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWCGROUP;

/// The namespace flags of a run with this network access: every one of [`CLONE_FLAGS`], less
/// the network namespace when the host's network is granted.
fn clone_flags(network: NetworkAccess) -> libc::c_int {
    if network.waives(Layer::NetNamespace) {
        CLONE_FLAGS & !libc::CLONE_NEWNET
    } else {
        CLONE_FLAGS
    }
}

/// The namespace layers of a run with this network access (applied, or missing when degraded).
fn namespaces(network: NetworkAccess) -> Vec<Layer> {
    NAMESPACES
        .into_iter()
        .filter(|l| !network.waives(*l))
        .collect()
}

/// Refuse a specification whose host identity this process cannot give: never the host's
/// root, and no other id than its own unless it is root.
fn check_host_identity(host: &HostIdentity, uid: u32) -> Result<(), Failure> {
    let refuse = |detail: String| Failure::missing(Layer::UnprivilegedUid, "host identity", detail);
    match (uid == 0, host.is_caller()) {
        (true, true) => Err(refuse(
            "the run would be root on the host; a root caller's command runs as its own host \
             identity"
                .into(),
        )),
        (true, false) if host.uid == 0 || host.gid == 0 => {
            Err(refuse("the host identity is root".into()))
        }
        (false, false) => Err(refuse(format!(
            "only root can run the command as host uid {}",
            host.uid
        ))),
        _ => Ok(()),
    }
}

fn supervise() -> ! {
    // Standard input is a socket: the spec comes in on it, and the reports go out on it, from
    // the report descriptor. Whatever the caller left open at that number is replaced.
    if sys::dup_stdin_to(REPORT_FD).is_err() {
        sys::exit_now(125)
    }
    let spec = match read_spec() {
        Ok(spec) => spec,
        Err(failure) => abort(failure),
    };
    if let Err(failure) = tidy_descriptors() {
        abort(failure)
    }
    // Die with the caller, so a killed caller never leaves a sandbox behind.
    let _ = sys::die_with_parent();

    let (uid, gid) = sys::ids();
    if let Err(failure) = check_host_identity(&spec.host, uid) {
        abort(failure)
    }
    if uid == 0 {
        // Supplementary groups survive into user namespaces; a root caller drops them.
        let _ = sys::clear_groups();
    }
    // Planned here, in the host's mount namespace (see `mounts`); init inherits it.
    let with_userns = !spec.pretend_missing.contains(&Layer::UserNamespace);
    let plan = if with_userns {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        match mounts::plan(&spec, &spec.host, &mountinfo) {
            Ok(plan) => Some(plan),
            Err(failure) => abort(failure),
        }
    } else {
        None
    };
    let mut cgroups = Cgroups::create(&spec.limits, &spec.pretend_missing);
    // Enter the cgroups so that init is born in them (see `cgroup` for why not move it).
    cgroups.enter_self();
    // Decided before the clone, so init inherits it: with the memory controller in force no
    // address-space rlimit is set (it is the only memory limit without it).
    let cgroup_memory = cgroups.applied().contains(&Layer::CgroupMemory);
    let (sync_r, sync_w) = match sys::pipe() {
        Ok(p) => p,
        Err(e) => abort(Failure::setup("pipe", e)),
    };

    let cloned = if with_userns {
        sys::clone_fork(clone_flags(spec.network))
    } else {
        Err(std::io::Error::from_raw_os_error(libc::EPERM))
    };
    let (pid, with_ns) = match cloned {
        Ok(pid) => (pid, true),
        Err(e) if spec.allow_degraded => match sys::fork() {
            Ok(pid) => {
                let _ = e;
                (pid, false)
            }
            Err(e) => {
                cgroups.remove();
                abort(Failure::setup("fork", e))
            }
        },
        Err(e) => {
            cgroups.remove();
            abort(Failure::missing(
                Layer::UserNamespace,
                "clone the sandbox's namespaces",
                e.to_string(),
            ))
        }
    };
    if pid == 0 {
        drop(sync_w);
        init(&spec, plan, sync_r, with_ns, cgroup_memory)
    }
    // Init holds its own copies of the idmapped mounts.
    drop(plan);
    cgroups.leave_self();
    drop(sync_r);
    if with_ns && let Err(e) = write_outer_maps(pid, uid, gid, &spec.host) {
        let _ = sys::kill(pid, Signal::SIGKILL);
        let _ = sys::waitpid(pid, 0);
        cgroups.remove();
        abort(Failure::missing(
            Layer::UserNamespace,
            "write the uid map",
            e.to_string(),
        ))
    }
    // Release: init builds its root and starts the target. Init was born inside the cgroups, so
    // every process of the target is too.
    if let Err(e) = sys::write_all(&sync_w, b"1") {
        let _ = sys::kill(pid, Signal::SIGKILL);
        abort(Failure::setup("release the sandbox", e))
    }
    drop(sync_w);
    report(&Report::Layers {
        applied: cgroups.applied(),
        missing: cgroups.missing.clone(),
        landlock_abi: None,
    });
    // While the sandbox starts: tidy up after helpers that were killed.
    crate::cgroup::sweep_stale();

    let timed_out = wait_with_timeout(pid, Duration::from_millis(spec.limits.timeout_ms), &cgroups);
    let status = sys::waitpid(pid, 0).map(|(_, s)| s).unwrap_or(0);
    let peak = cgroups.peak_memory();
    cgroups.remove();
    report(&Report::Supervisor {
        timed_out,
        peak_memory_bytes: peak,
        init_signal: sys::decode_status(status).1,
    });
    sys::exit_now(0)
}

/// Wait until `pid` exits or the timeout passes; on timeout kill it (and, through the PID
/// namespace or the cgroup, everything it started). Returns whether the timeout fired.
fn wait_with_timeout(pid: libc::pid_t, timeout: Duration, cgroups: &Cgroups) -> bool {
    let deadline = Instant::now() + timeout;
    let pidfd = sys::pidfd_open(pid).ok();
    loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            stop(pid, pidfd.as_ref(), cgroups);
            return true;
        }
        let slice = remaining.as_millis().min(i32::MAX as u128) as i32;
        match &pidfd {
            Some(fd) => {
                if let Ok(revents) = sys::poll_readable(&[fd.as_fd()], slice.max(1))
                    && revents[0] != 0
                {
                    return false;
                }
            }
            None => {
                if let Ok((p, _)) = sys::waitpid(pid, libc::WNOHANG)
                    && p == pid
                {
                    // Reaped already: the supervisor's own waitpid then sees ECHILD.
                    return false;
                }
                std::thread::sleep(Duration::from_millis(5).min(remaining));
            }
        }
    }
}

/// Stop the sandbox: ask init (SIGTERM) to kill and reap every process, so that their CPU time
/// is accounted; if it is not gone within [`STOP_GRACE`], kill it and everything in the
/// cgroups outright.
fn stop(pid: libc::pid_t, pidfd: Option<&OwnedFd>, cgroups: &Cgroups) {
    let _ = sys::kill(pid, Signal::SIGTERM);
    if let Some(fd) = pidfd
        && let Ok(revents) = sys::poll_readable(&[fd.as_fd()], STOP_GRACE.as_millis() as i32)
        && revents[0] != 0
    {
        return;
    }
    let _ = sys::kill(pid, Signal::SIGKILL);
    cgroups.kill_all();
}

/// How long init gets to kill and reap the sandbox's processes on a timeout.
const STOP_GRACE: Duration = Duration::from_millis(500);

/// The sandbox's init: PID 1 of the new PID namespace.
fn init(
    spec: &Spec,
    plan: Option<mounts::MountPlan>,
    sync_r: OwnedFd,
    with_ns: bool,
    cgroup_memory: bool,
) -> ! {
    let _ = sys::die_with_parent();
    let mut byte = [0u8; 1];
    if !matches!(sys::read(&sync_r, &mut byte), Ok(1)) {
        sys::exit_now(1)
    }
    drop(sync_r);
    let mut applied = Vec::new();
    let mut missing = Vec::new();
    if with_ns {
        applied.extend(namespaces(spec.network));
        let Some(plan) = plan else {
            abort(Failure::setup(
                "plan the mounts",
                std::io::Error::other("no mount plan"),
            ))
        };
        match mounts::build_root(spec, plan) {
            Ok(went_without) => {
                if !went_without.contains(&Layer::GrantOverlay) {
                    applied.push(Layer::GrantOverlay);
                }
                missing.extend(went_without);
            }
            Err(failure) => abort(failure),
        }
        if !spec.overlays.is_empty() {
            applied.push(Layer::Overlay);
        }
        let _ = sys::sethostname("airlock");
        // With the host's network there is no namespace of our own to bring up.
        if !spec.network.waives(Layer::NetNamespace)
            && let Err(e) = sys::loopback_up()
        {
            abort(Failure::missing(
                Layer::NetNamespace,
                "bring loopback up",
                e.to_string(),
            ))
        }
    } else {
        drop(plan);
        missing.extend(namespaces(spec.network));
        missing.push(Layer::GrantOverlay);
        if !spec.overlays.is_empty() {
            abort(Failure::missing(
                Layer::Overlay,
                "overlay",
                "an overlay needs user and mount namespaces; it is never degraded".into(),
            ))
        }
        if let Some(bind) = spec.binds_at.first() {
            // Without a mount namespace the command would see the host's own path instead.
            abort(Failure::missing(
                Layer::MountNamespace,
                format!(
                    "mount {} at {}",
                    bind.source.display(),
                    bind.target.display()
                ),
                "a grant at another path needs user and mount namespaces; it is never \
                 degraded"
                    .into(),
            ))
        }
    }
    report(&Report::Layers {
        applied,
        missing,
        landlock_abi: None,
    });
    // With the proxy network: a loopback listener inside, handed to the caller's egress
    // proxy, and the command told where it is.
    let with_proxy;
    let spec = if spec.network == NetworkAccess::Proxy && with_ns {
        match egress_listener() {
            Ok(port) => {
                let mut own = spec.clone();
                own.env
                    .retain(|(name, _)| !PROXY_VARIABLES.contains(&name.as_str()));
                own.env.extend(proxy_env(port));
                own.env.sort();
                with_proxy = own;
                &with_proxy
            }
            Err(e) => abort(Failure::setup("listen for the egress proxy on loopback", e)),
        }
    } else {
        spec
    };
    let child = match sys::fork() {
        Ok(0) => target::run(spec, with_ns, cgroup_memory),
        Ok(pid) => pid,
        Err(e) => abort(Failure::setup("fork the target", e)),
    };
    // The supervisor asks for a stop (on timeout) with SIGTERM; as PID 1, init only receives
    // the signals it handles: SIGTERM sets a flag and interrupts init's `wait4`.
    let _ = sys::catch_sigterm();
    loop {
        if sys::sigterm_caught() {
            kill_and_reap_all();
            sys::exit_now(0)
        }
        match sys::wait4_once(-1) {
            Ok((pid, status, usage)) if pid == child => {
                let (code, signal) = sys::decode_status(status);
                report(&Report::Exited {
                    code,
                    signal,
                    max_rss_bytes: Some(usage.ru_maxrss.max(0) as u64 * 1024),
                });
                kill_and_reap_all();
                sys::exit_now(0)
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => sys::exit_now(1),
        }
    }
}

/// The variables that point a command at the egress proxy, set by the sandbox (the
/// operator's values of the same names are replaced).
pub(crate) const PROXY_VARIABLES: [&str; 8] = [
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
];

/// The proxy variables for a proxy on loopback `port`: every scheme through it, loopback
/// never.
fn proxy_env(port: u16) -> Vec<(String, String)> {
    let url = format!("http://127.0.0.1:{port}");
    let no_proxy = "localhost,127.0.0.1,::1".to_string();
    PROXY_VARIABLES
        .iter()
        .map(|name| {
            let value = if name.eq_ignore_ascii_case("NO_PROXY") {
                no_proxy.clone()
            } else {
                url.clone()
            };
            (name.to_string(), value)
        })
        .collect()
}

/// Listen on a free loopback port of the sandbox's network namespace and send the listener
/// to the caller with a [`Report::Proxy`] line. Init keeps no copy: the caller's proxy
/// accepts on it from outside, so the command reaches the proxy, and only the proxy, at
/// `127.0.0.1:PORT`.
fn egress_listener() -> std::io::Result<u16> {
    let listener = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))?;
    let port = listener.local_addr()?.port();
    let mut line = serde_json::to_vec(&Report::Proxy { port }).map_err(std::io::Error::other)?;
    line.push(b'\n');
    sys::send_with_fd(sys::report_fd(), &line, &listener)?;
    Ok(port)
}

/// Kill every other process of the PID namespace and reap them all. Reaped here, their CPU
/// time counts in init's and so in the run's; left to the kernel's teardown of the namespace,
/// they would be reaped unaccounted. A process being killed cannot fork, so `kill(-1)` leaves
/// none behind; it is repeated after each reap all the same.
fn kill_and_reap_all() {
    loop {
        // In a PID namespace, -1 is every process but init itself.
        let _ = sys::kill(-1, Signal::SIGKILL);
        match sys::waitpid_once(-1, libc::__WALL) {
            Err(e) if e.kind() != std::io::ErrorKind::Interrupted => return,
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn executable(path: &std::path::Path) {
        std::fs::write(path, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn the_host_network_leaves_out_only_the_network_namespace() {
        assert_eq!(clone_flags(NetworkAccess::None), CLONE_FLAGS);
        assert_eq!(
            clone_flags(NetworkAccess::Host),
            CLONE_FLAGS & !libc::CLONE_NEWNET
        );
        assert_eq!(namespaces(NetworkAccess::None), NAMESPACES.to_vec());
        let host = namespaces(NetworkAccess::Host);
        assert_eq!(host.len(), NAMESPACES.len() - 1);
        assert!(!host.contains(&Layer::NetNamespace));
    }

    #[test]
    fn the_dedicated_helper_is_found_next_to_the_binary_or_above_deps() {
        let d = tempfile::tempdir().unwrap();
        let exe = d.path().join("airlock");
        executable(&exe);
        assert_eq!(find_dedicated(&exe), None, "no helper yet");
        let helper = d.path().join(HELPER_BIN);
        std::fs::write(&helper, "not executable").unwrap();
        assert_eq!(
            find_dedicated(&exe),
            None,
            "a non-executable file is not a helper"
        );
        executable(&helper);
        assert_eq!(find_dedicated(&exe), Some(helper.clone()));

        let deps = d.path().join("deps");
        std::fs::create_dir(&deps).unwrap();
        let test_exe = deps.join("it-0123");
        executable(&test_exe);
        assert_eq!(
            find_dedicated(&test_exe),
            Some(helper),
            "a test binary in deps/"
        );
        // The helper itself never re-executes itself as "the dedicated helper".
        assert_eq!(find_dedicated(&d.path().join(HELPER_BIN)), None);
    }

    fn identity(uid: u32, gid: u32, source: crate::identity::IdentitySource) -> HostIdentity {
        HostIdentity { uid, gid, source }
    }

    #[test]
    fn the_helper_never_runs_the_command_as_host_root() {
        use crate::identity::IdentitySource::{Caller, Configured};
        // Root with a specification that says "the caller": the command would be root.
        assert!(check_host_identity(&identity(0, 0, Caller), 0).is_err());
        assert!(check_host_identity(&identity(0, 5, Configured), 0).is_err());
        assert!(check_host_identity(&identity(5, 0, Configured), 0).is_err());
        assert!(check_host_identity(&identity(5, 5, Configured), 0).is_ok());
        // A non-root helper cannot map another id, and runs as itself.
        assert!(check_host_identity(&identity(5, 5, Configured), 1000).is_err());
        assert!(check_host_identity(&identity(1000, 1000, Caller), 1000).is_ok());
    }

    #[test]
    fn the_protocol_names_the_version_and_the_sources() {
        let parts: Vec<&str> = PROTOCOL.split('/').collect();
        assert_eq!(parts.len(), 3, "{PROTOCOL}");
        assert_eq!(parts[0], "airlock-sandbox");
        assert_eq!(parts[1], env!("CARGO_PKG_VERSION"));
        assert_eq!(parts[2].len(), 16, "a 64-bit source hash: {PROTOCOL}");
        assert!(parts[2].chars().all(|c| c.is_ascii_hexdigit()));
    }
}
