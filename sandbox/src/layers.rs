//! The landlock and seccomp layers.

use crate::report::Failure;
use crate::types::{DEVICES, Layer, NetworkAccess};
use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope,
};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What the landlock layer managed to apply.
pub(crate) struct LandlockOutcome {
    pub applied: Vec<Layer>,
    pub missing: Vec<Layer>,
}

fn ll_err(stage: &str, err: impl std::fmt::Display) -> Failure {
    Failure::missing(Layer::LandlockFs, stage, err.to_string())
}

/// Restrict the calling process with landlock: filesystem access only beneath `roots`
/// (read-only or read-write), the device nodes and `/proc` readable, TCP bind/connect denied
/// (unless the run was granted the host's network, when landlock's network rules are left
/// out and [`Layer::LandlockNet`] is neither applied nor missing) and abstract unix sockets
/// and signals scoped when the ABI has them.
///
/// `abi` is the kernel's landlock ABI (possibly lowered to pretend a feature is missing).
pub(crate) fn apply_landlock(
    abi_version: u32,
    roots: &[(PathBuf, bool)],
    with_ns: bool,
    network: NetworkAccess,
) -> Result<LandlockOutcome, Failure> {
    let mut applied = Vec::new();
    let mut missing = Vec::new();
    if abi_version == 0 {
        return Err(Failure::missing(
            Layer::LandlockFs,
            "landlock",
            "the kernel offers no landlock ABI".into(),
        ));
    }
    let abi = ABI::from(abi_version as i32);
    let mut ruleset = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))
        .map_err(|e| ll_err("landlock handle fs", e))?;
    if network.waives(Layer::LandlockNet) {
        // Granted a network: TCP is the point of the run (the namespace bounds it).
    } else if abi_version >= 4 {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi))
            .map_err(|e| ll_err("landlock handle net", e))?;
        applied.push(Layer::LandlockNet);
    } else {
        missing.push(Layer::LandlockNet);
    }
    if abi_version >= 6 {
        ruleset = ruleset
            .scope(Scope::from_all(abi))
            .map_err(|e| ll_err("landlock scope", e))?;
        applied.push(Layer::LandlockScope);
    } else {
        missing.push(Layer::LandlockScope);
    }
    let mut created = ruleset.create().map_err(|e| ll_err("landlock create", e))?;

    let read = AccessFs::from_read(abi);
    let all = AccessFs::from_all(abi);
    let file_only = AccessFs::from_file(abi);
    let mut rules: Vec<(PathBuf, BitFlags<AccessFs>)> = Vec::new();
    for (path, writable) in roots {
        rules.push((path.clone(), if *writable { all } else { read }));
    }
    if with_ns {
        // Our own /proc, of the sandbox's PID namespace; the host's is never granted.
        rules.push((PathBuf::from("/proc"), read & !AccessFs::Execute));
    }
    for dev in DEVICES {
        rules.push((Path::new("/dev").join(dev), file_only & !AccessFs::Execute));
    }
    rules.push((PathBuf::from("/dev"), AccessFs::ReadDir.into()));
    for (path, access) in rules {
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(_) => continue, // not mounted (for example /proc in a degraded run)
        };
        if meta.file_type().is_symlink() {
            continue; // its target is granted (or not) on its own
        }
        let access = if meta.is_dir() {
            access
        } else {
            access & file_only
        };
        let fd = PathFd::new(&path)
            .map_err(|e| ll_err(&format!("landlock open {}", path.display()), e))?;
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .map_err(|e| ll_err(&format!("landlock rule {}", path.display()), e))?;
    }
    let status = created
        .restrict_self()
        .map_err(|e| ll_err("landlock restrict_self", e))?;
    match status.ruleset {
        RulesetStatus::FullyEnforced | RulesetStatus::PartiallyEnforced => {
            applied.push(Layer::LandlockFs)
        }
        RulesetStatus::NotEnforced => {
            return Err(Failure::missing(
                Layer::LandlockFs,
                "landlock",
                "the ruleset was not enforced".into(),
            ));
        }
    }
    Ok(LandlockOutcome { applied, missing })
}

/// The landlock ABI from which connecting to a pathname unix socket is an access right
/// (`LANDLOCK_ACCESS_FS_RESOLVE_UNIX`, Linux 7.1).
pub(crate) const LANDLOCK_UNIX_ABI: u32 = 9;

/// On a kernel whose landlock governs pathname unix sockets, a second ruleset that refuses
/// connecting or sending to any such socket the sandbox did not create itself, except the
/// socket files granted on their own among `roots`. Returns whether it was applied. (Raw
/// calls: the `landlock` crate names the right, `AccessFs::ResolveUnix`, since 0.4.8, but its
/// ruleset is best-effort and checks rules against the ABIs it knows; moving to it waits for
/// a kernel with ABI 9 to test that it behaves the same.) Below that ABI the
/// host's sockets in granted directories are out of reach through the overlayfs they are
/// shown through (see `mounts`).
pub(crate) fn apply_landlock_unix(abi: u32, roots: &[(PathBuf, bool)]) -> Result<bool, Failure> {
    use crate::sys::{LANDLOCK_ACCESS_FS_REFER as REFER, LANDLOCK_ACCESS_FS_RESOLVE_UNIX as UNIX};
    if abi < LANDLOCK_UNIX_ABI {
        return Ok(false);
    }
    let failed = |stage: &str, e: std::io::Error| ll_err(stage, e);
    let ruleset = crate::sys::landlock_ruleset(UNIX | REFER)
        .map_err(|e| failed("landlock unix sockets: create", e))?;
    // Every ruleset denies REFER unless it grants it; the first one is the one that governs it.
    let root = crate::sys::open_path(Path::new("/"))
        .map_err(|e| failed("landlock unix sockets: open /", e))?;
    crate::sys::landlock_allow_beneath(&ruleset, &root, REFER)
        .map_err(|e| failed("landlock unix sockets: rule /", e))?;
    for (path, _) in roots {
        use std::os::unix::fs::FileTypeExt;
        let is_socket = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket());
        if !is_socket {
            continue;
        }
        // A granted socket the rule cannot name stays out of reach: refused, never widened
        // to its directory.
        if let Ok(fd) = crate::sys::open_path(path) {
            let _ = crate::sys::landlock_allow_beneath(&ruleset, &fd, UNIX);
        }
    }
    crate::sys::landlock_restrict_self(&ruleset)
        .map_err(|e| failed("landlock unix sockets: restrict", e))?;
    Ok(true)
}

/// The mode bits that would let a file run with its owner's or group's ids.
const SET_ID_BITS: [u64; 2] = [libc::S_ISUID as u64, libc::S_ISGID as u64];

/// Syscalls that set a file's mode, with the index of their mode argument and, for the ones
/// whose mode only counts when they create a file, of their flags argument. The sandbox
/// refuses a mode with a set-id bit: on the host, a file the command wrote in a read-write
/// grant must not run with its owner's ids for someone else (inside, `nosuid` and
/// `no_new_privs` already make such bits inert).
const MODE_SETTERS: [(libc::c_long, u8, Option<u8>); 9] = [
    (libc::SYS_chmod, 1, None),
    (libc::SYS_fchmod, 1, None),
    (libc::SYS_fchmodat, 2, None),
    (libc::SYS_fchmodat2, 2, None),
    (libc::SYS_mknod, 1, None),
    (libc::SYS_mknodat, 2, None),
    (libc::SYS_creat, 1, None),
    (libc::SYS_open, 2, Some(1)),
    (libc::SYS_openat, 3, Some(2)),
];

/// Syscalls refused outright (with EPERM) once the sandbox is set up.
const DENIED_SYSCALLS: &[libc::c_long] = &[
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_userfaultfd,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_acct,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_syslog,
    libc::SYS_quotactl,
    libc::SYS_vhangup,
    libc::SYS_iopl,
    libc::SYS_ioperm,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_clock_adjtime,
    libc::SYS_adjtimex,
    libc::SYS_pidfd_getfd,
];

/// Namespace flags that `clone()` may not use inside the sandbox.
const NAMESPACE_FLAGS: [libc::c_int; 7] = [
    libc::CLONE_NEWNS,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWCGROUP,
];

fn sc_err(err: impl std::fmt::Display) -> Failure {
    Failure::missing(Layer::Seccomp, "seccomp filter", err.to_string())
}

fn cond(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, Failure> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value).map_err(sc_err)
}

/// Socket families the main filter lets `socket()` create: unix sockets only, plus IPv4 and
/// IPv6 when the run was granted a network (loopback, proxy or the host's; never netlink,
/// packet or raw families).
fn allowed_socket_families(network: NetworkAccess) -> &'static [libc::c_int] {
    if network.inet_sockets() {
        &[libc::AF_UNIX, libc::AF_INET, libc::AF_INET6]
    } else {
        &[libc::AF_UNIX]
    }
}

/// The two filters: the main one (EPERM) and one making `clone3` fail with ENOSYS, so that
/// libc falls back to `clone`, whose flags the main filter can inspect.
pub(crate) fn seccomp_programs(network: NetworkAccess) -> Result<[BpfProgram; 2], Failure> {
    let arch = std::env::consts::ARCH.try_into().map_err(sc_err)?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for &nr in DENIED_SYSCALLS {
        rules.insert(nr, Vec::new());
    }
    // One rule whose conditions all hold (a family none of the allowed ones) refuses.
    let other_family = allowed_socket_families(network)
        .iter()
        .map(|family| cond(0, SeccompCmpOp::Ne, *family as u64))
        .collect::<Result<Vec<_>, _>>()?;
    rules.insert(
        libc::SYS_socket,
        vec![SeccompRule::new(other_family).map_err(sc_err)?],
    );
    let mut clone_rules = Vec::new();
    for flag in NAMESPACE_FLAGS {
        clone_rules.push(
            SeccompRule::new(vec![cond(
                0,
                SeccompCmpOp::MaskedEq(flag as u64),
                flag as u64,
            )?])
            .map_err(sc_err)?,
        );
    }
    rules.insert(libc::SYS_clone, clone_rules);
    rules.insert(
        libc::SYS_ioctl,
        vec![SeccompRule::new(vec![cond(1, SeccompCmpOp::Eq, libc::TIOCSTI)?]).map_err(sc_err)?],
    );
    for (nr, mode_arg, flags_arg) in MODE_SETTERS {
        let mut mode_rules = Vec::new();
        for bit in SET_ID_BITS {
            let set = cond(mode_arg, SeccompCmpOp::MaskedEq(bit), bit)?;
            match flags_arg {
                None => mode_rules.push(SeccompRule::new(vec![set]).map_err(sc_err)?),
                Some(flags) => {
                    // open and openat read the mode only when they create a file.
                    for creating in [libc::O_CREAT as u64, libc::O_TMPFILE as u64] {
                        let creates = cond(flags, SeccompCmpOp::MaskedEq(creating), creating)?;
                        mode_rules
                            .push(SeccompRule::new(vec![creates, set.clone()]).map_err(sc_err)?);
                    }
                }
            }
        }
        rules.insert(nr, mode_rules);
    }
    let main = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(sc_err)?;
    // ENOSYS makes libc fall back to a call whose arguments the main filter can read: clone
    // for clone3, openat for openat2 (whose mode lies in a struct).
    let mut clone3 = BTreeMap::new();
    clone3.insert(libc::SYS_clone3, Vec::new());
    clone3.insert(libc::SYS_openat2, Vec::new());
    let clone3 = SeccompFilter::new(
        clone3,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )
    .map_err(sc_err)?;
    Ok([
        main.try_into().map_err(sc_err)?,
        clone3.try_into().map_err(sc_err)?,
    ])
}

/// Install the seccomp filters on the calling thread (requires `no_new_privs`).
pub(crate) fn apply_seccomp(programs: &[BpfProgram; 2]) -> Result<(), Failure> {
    for program in programs {
        seccompiler::apply_filter(program).map_err(sc_err)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seccomp_programs_compile_for_this_architecture() {
        let [main, clone3] = seccomp_programs(NetworkAccess::None).unwrap();
        // Every denied syscall and the socket/clone/ioctl rules make it into the main program.
        assert!(main.len() > DENIED_SYSCALLS.len() * 2, "{}", main.len());
        assert!(!clone3.is_empty());
        // With the host's network the socket rule checks two more families; nothing else
        // changes.
        let [with_network, clone3_with_network] = seccomp_programs(NetworkAccess::Host).unwrap();
        assert!(with_network.len() > main.len(), "{}", with_network.len());
        assert_eq!(clone3_with_network, clone3);
    }

    #[test]
    fn every_mode_setter_refuses_set_id_bits() {
        // Two rules (S_ISUID, S_ISGID) per call, doubled for the creating flags of open(at).
        let [main, _] = seccomp_programs(NetworkAccess::None).unwrap();
        // The same filter with only the outright denials: far fewer instructions.
        let mut denied: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
        for &nr in DENIED_SYSCALLS {
            denied.insert(nr, Vec::new());
        }
        let without: BpfProgram = SeccompFilter::new(
            denied,
            SeccompAction::Allow,
            SeccompAction::Errno(libc::EPERM as u32),
            std::env::consts::ARCH.try_into().unwrap(),
        )
        .unwrap()
        .try_into()
        .unwrap();
        assert!(
            main.len() > without.len() + MODE_SETTERS.len() * 4,
            "{}",
            main.len()
        );
        for (nr, mode_arg, flags_arg) in MODE_SETTERS {
            assert!(
                mode_arg <= 3 && flags_arg.is_none_or(|f| f < mode_arg),
                "{nr}"
            );
        }
    }

    #[test]
    fn the_unix_socket_ruleset_waits_for_landlock_abi_9() {
        for abi in 0..LANDLOCK_UNIX_ABI {
            assert!(!apply_landlock_unix(abi, &[]).unwrap(), "ABI {abi}");
        }
    }

    #[test]
    fn only_the_host_network_allows_inet_sockets() {
        assert_eq!(
            allowed_socket_families(NetworkAccess::None),
            &[libc::AF_UNIX]
        );
        let host = allowed_socket_families(NetworkAccess::Host);
        for family in [libc::AF_UNIX, libc::AF_INET, libc::AF_INET6] {
            assert!(host.contains(&family));
        }
        for family in [libc::AF_NETLINK, libc::AF_PACKET] {
            assert!(!host.contains(&family));
        }
    }
}
