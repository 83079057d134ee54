//! The last process before the target: drops to an unprivileged uid, drops every capability,
//! applies rlimits, `no_new_privs`, landlock and seccomp, then execs the command.

use crate::identity::HostIdentity;
use crate::layers;
use crate::program::resolve_program;
use crate::report::{Failure, Report, report};
use crate::spec::Spec;
use crate::sys::{self, Resource};
use crate::types::{Layer, SANDBOX_ID};
use std::ffi::CString;
use std::fs;
use std::path::Path;

struct Progress {
    applied: Vec<Layer>,
    missing: Vec<Layer>,
    allow_degraded: bool,
}

impl Progress {
    /// Record a layer's outcome: a failure is fatal unless degraded runs are allowed.
    fn layer(&mut self, layer: Layer, outcome: Result<(), Failure>) -> Result<(), Failure> {
        match outcome {
            Ok(()) => {
                self.applied.push(layer);
                Ok(())
            }
            Err(failure) if self.allow_degraded && failure.feature.is_some() => {
                self.missing.push(layer);
                Ok(())
            }
            Err(failure) => Err(failure),
        }
    }
}

fn io_missing(layer: Layer, stage: &str) -> impl Fn(std::io::Error) -> Failure + '_ {
    move |e| Failure::missing(layer, stage, e.to_string())
}

/// Become `SANDBOX_ID` in a nested user namespace, whose id on the host is `host`.
///
/// For a root caller the outer user namespace (its maps written by the helper) maps its root
/// to the caller and `SANDBOX_ID` to `host`: this process first becomes `SANDBOX_ID` there,
/// and so `host` on the host, then enters a nested namespace mapping `SANDBOX_ID` to itself.
/// For a non-root caller the outer namespace maps only its root, to the caller, and the
/// nested one maps `SANDBOX_ID` to that root. Either way the command holds no capability over
/// the mount or network namespaces, which belong to the outer user namespace.
pub(crate) fn become_unprivileged(with_ns: bool, host: &HostIdentity) -> Result<(), Failure> {
    let stage = "unprivileged uid";
    let missing = |stage: &'static str| io_missing(Layer::UnprivilegedUid, stage);
    if with_ns {
        // Drop the bounding set while we still hold CAP_SETPCAP in the outer namespace.
        drop_bounding_set()?;
        let outer_id = if host.is_caller() {
            0
        } else {
            sys::setresgid(SANDBOX_ID).map_err(missing("setresgid in the outer namespace"))?;
            sys::setresuid(SANDBOX_ID).map_err(missing("setresuid in the outer namespace"))?;
            // A change of uid makes the process non-dumpable, which gives its /proc/self
            // files to root, and clears the parent-death signal.
            let _ = sys::set_dumpable();
            let _ = sys::die_with_parent();
            SANDBOX_ID
        };
        sys::unshare(libc::CLONE_NEWUSER).map_err(missing(stage))?;
        let _ = fs::write("/proc/self/setgroups", "deny");
        fs::write("/proc/self/uid_map", format!("{SANDBOX_ID} {outer_id} 1"))
            .map_err(missing("write the nested uid_map"))?;
        fs::write("/proc/self/gid_map", format!("{SANDBOX_ID} {outer_id} 1"))
            .map_err(missing("write the nested gid_map"))?;
        drop_bounding_set()?;
        sys::setresgid(SANDBOX_ID).map_err(missing("setresgid"))?;
        sys::setresuid(SANDBOX_ID).map_err(missing("setresuid"))?;
    } else if !host.is_caller() {
        drop_bounding_set()?;
        sys::clear_groups().map_err(missing("setgroups"))?;
        sys::setresgid(host.gid).map_err(missing("setresgid"))?;
        sys::setresuid(host.uid).map_err(missing("setresuid"))?;
        let _ = sys::die_with_parent();
    }
    if sys::ids().0 == 0 {
        return Err(Failure::missing(
            Layer::UnprivilegedUid,
            stage,
            "still uid 0 after dropping privileges".into(),
        ));
    }
    Ok(())
}

fn last_cap() -> u64 {
    fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(40)
}

pub(crate) fn drop_bounding_set() -> Result<(), Failure> {
    for cap in 0..=last_cap() {
        // EINVAL for capabilities the kernel does not know; EPERM without CAP_SETPCAP, in which
        // case the final check below catches a non-empty set.
        let _ = sys::capbset_drop(cap as u32);
    }
    Ok(())
}

/// Clear the ambient, effective, permitted and inheritable sets and check every set is empty.
pub(crate) fn drop_capabilities() -> Result<(), Failure> {
    let stage = "drop capabilities";
    let _ = sys::clear_ambient_caps();
    sys::capset_clear().map_err(io_missing(Layer::DropCapabilities, stage))?;
    let status = fs::read_to_string("/proc/self/status").map_err(io_missing(
        Layer::DropCapabilities,
        "read /proc/self/status",
    ))?;
    for line in status.lines() {
        for set in ["CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"] {
            if let Some(value) = line.strip_prefix(set)
                && value.trim().chars().any(|c| c != '0')
            {
                return Err(Failure::missing(
                    Layer::DropCapabilities,
                    stage,
                    format!("{set} is {} after dropping", value.trim()),
                ));
            }
        }
    }
    Ok(())
}

fn apply_rlimits(spec: &Spec, cgroup_memory: bool) -> Result<(), Failure> {
    let l = &spec.limits;
    let mb = 1024 * 1024;
    // With the memory cgroup in force it is the limit, and no address-space limit is set:
    // runtimes reserve far more virtual memory than they touch (a WebAssembly instance in
    // Node.js reserves about 10 GB, Go and the JVM their heaps' arenas), and an address-space
    // limit breaks them whatever they use. Without the cgroup it is the only memory limit.
    let address_space = (!cgroup_memory).then_some(l.memory_mb);
    let mut limits = vec![
        (Resource::RLIMIT_CPU, l.cpu_secs),
        (Resource::RLIMIT_NOFILE, l.open_files),
        (Resource::RLIMIT_FSIZE, l.file_size_mb.saturating_mul(mb)),
        (Resource::RLIMIT_NPROC, u64::from(l.max_procs)),
        (Resource::RLIMIT_CORE, 0),
    ];
    if let Some(address_space) = address_space {
        limits.push((Resource::RLIMIT_AS, address_space.saturating_mul(mb)));
    }
    for (resource, value) in limits {
        sys::setrlimit(resource, value).map_err(io_missing(Layer::Rlimits, "setrlimit"))?;
    }
    Ok(())
}

fn cstrings(items: impl Iterator<Item = String>) -> Result<Vec<CString>, Failure> {
    items
        .map(|s| {
            CString::new(s).map_err(|_| Failure {
                feature: None,
                stage: "exec".into(),
                detail: "an argument or variable contains a NUL byte".into(),
            })
        })
        .collect()
}

/// What an `execve` failure means, in words that say how to fix the call.
fn exec_failure(path: &Path, err: &std::io::Error) -> String {
    let meta = fs::metadata(path);
    let hint = match (err.raw_os_error(), &meta) {
        (Some(libc::ENOENT), Ok(_)) => {
            " (the file exists: its #! interpreter or its dynamic loader is not in the \
             sandbox; grant it with --ro)"
        }
        (Some(libc::ENOENT), Err(_)) => {
            " (not found inside the sandbox; is its directory granted with --ro?)"
        }
        (Some(libc::EACCES), Ok(m)) if m.is_dir() => " (it is a directory)",
        (Some(libc::EACCES), Ok(_)) => " (not executable, or on a noexec mount)",
        _ => "",
    };
    format!("{}: {err}{hint}", path.display())
}

/// Set up the target process and exec the command. Never returns: on failure it reports and
/// exits with 127.
pub(crate) fn run(spec: &Spec, with_ns: bool, cgroup_memory: bool) -> ! {
    match prepare_and_exec(spec, with_ns, cgroup_memory) {
        Ok(never) => match never {},
        Err(failure) => {
            report(&failure.into_report());
            sys::exit_now(127)
        }
    }
}

enum Never {}

fn prepare_and_exec(spec: &Spec, with_ns: bool, cgroup_memory: bool) -> Result<Never, Failure> {
    let _ = sys::die_with_parent();
    sys::setsid().map_err(|e| Failure::setup("setsid", e))?;
    sys::reset_signals().map_err(|e| Failure::setup("reset signal dispositions and mask", e))?;
    let mut progress = Progress {
        applied: Vec::new(),
        missing: Vec::new(),
        allow_degraded: spec.allow_degraded,
    };
    let pretend = |layer: Layer| spec.pretend_missing.contains(&layer);

    progress.layer(
        Layer::UnprivilegedUid,
        become_unprivileged(with_ns, &spec.host),
    )?;
    progress.layer(Layer::DropCapabilities, drop_capabilities())?;
    progress.layer(Layer::Rlimits, apply_rlimits(spec, cgroup_memory))?;
    std::env::set_current_dir(&spec.cwd)
        .map_err(|e| Failure::setup(format!("chdir {}", spec.cwd.display()), e))?;
    progress.layer(
        Layer::NoNewPrivs,
        sys::set_no_new_privs()
            .map_err(io_missing(Layer::NoNewPrivs, "prctl(PR_SET_NO_NEW_PRIVS)")),
    )?;

    let mut abi = if pretend(Layer::LandlockFs) {
        0
    } else {
        sys::landlock_abi()
    };
    // With the host's network the TCP rules are left out, so there is nothing to pretend.
    if pretend(Layer::LandlockNet) && !spec.network.waives(Layer::LandlockNet) {
        abi = abi.min(3);
    }
    if pretend(Layer::LandlockScope) {
        abi = abi.min(5);
    }
    let roots = crate::mounts::landlock_roots(spec, with_ns);
    match layers::apply_landlock(abi, &roots, with_ns, spec.network) {
        Ok(outcome) => {
            // Pathname unix sockets, where landlock governs them; a failure is the same
            // refusal as the first ruleset's.
            layers::apply_landlock_unix(abi, &roots)?;
            for layer in outcome.missing {
                progress.layer(
                    layer,
                    Err(Failure::missing(
                        layer,
                        "landlock",
                        format!("the kernel offers landlock ABI {abi}"),
                    )),
                )?;
            }
            progress.applied.extend(outcome.applied);
        }
        Err(failure) => {
            for layer in [Layer::LandlockFs, Layer::LandlockNet, Layer::LandlockScope] {
                if !progress.allow_degraded {
                    return Err(failure);
                }
                if !spec.network.waives(layer) {
                    progress.missing.push(layer);
                }
            }
        }
    }

    let program = resolve_program(&spec.argv[0], &spec.env)?;
    let path = CString::new(program.as_os_str().as_encoded_bytes()).map_err(|_| Failure {
        feature: None,
        stage: "exec".into(),
        detail: "program path contains a NUL byte".into(),
    })?;
    let argv = cstrings(spec.argv.iter().cloned())?;

    let seccomp = if pretend(Layer::Seccomp) {
        Err(Failure::missing(
            Layer::Seccomp,
            "seccomp",
            "treated as unavailable (AIRLOCK_SANDBOX_PRETEND_MISSING)".into(),
        ))
    } else {
        layers::seccomp_programs(spec.network)
    };
    // Report before the filter goes on: after it, nothing but the exec should run.
    match seccomp {
        Ok(programs) => {
            progress.applied.push(Layer::Seccomp);
            report(&Report::Layers {
                applied: progress.applied.clone(),
                missing: progress.missing.clone(),
                landlock_abi: Some(sys::landlock_abi()),
            });
            layers::apply_seccomp(&programs)?;
        }
        Err(failure) => {
            progress.layer(Layer::Seccomp, Err(failure))?;
            report(&Report::Layers {
                applied: progress.applied.clone(),
                missing: progress.missing.clone(),
                landlock_abi: Some(sys::landlock_abi()),
            });
        }
    }
    // The services start behind every layer, the command's seccomp filter included.
    let mut env = spec.env.clone();
    env.extend(crate::services::start_all(&spec.services, &spec.env)?);
    let envp = cstrings(env.iter().map(|(k, v)| format!("{k}={v}")))?;
    let err = sys::execve(&path, &argv, &envp);
    Err(Failure {
        feature: None,
        stage: "exec".into(),
        detail: exec_failure(&program, &err),
    })
}
