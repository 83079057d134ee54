//! Thin wrappers over the system calls the sandbox needs, each returning `io::Result`.
//!
//! Most go through `nix`, which wraps them safely. All `unsafe` of the crate lives here, one
//! small block per call, each with its `SAFETY` note, and only where `nix` has no safe wrapper:
//! `fork` (unsafe in `nix` too), `clone` with namespace flags and no new stack, `waitpid` and
//! `wait4` with the raw status (`nix`'s `WaitStatus` cannot hold a real-time signal and fails
//! after the child is reaped), `pidfd_open`, the new mount API (`open_tree`, `move_mount`,
//! `mount_setattr`, `fsopen`/`fsconfig`/`fsmount`), `close_range`, `dup2` onto a reserved
//! descriptor number, a signal handler and the raw `rt_sigaction` reset, `capset` and the
//! capability `prctl`s, the loopback `ioctl`s, landlock (the ABI probe and the unix-socket
//! ruleset) and `_exit`.

use std::ffi::{CStr, CString, OsStr};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use nix::errno::Errno;
use nix::fcntl::{FcntlArg, FdFlag, OFlag};
use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, SigmaskHow};
use nix::sys::stat::Mode;
use nix::unistd::{Gid, Pid, Uid};

pub(crate) use nix::sys::resource::Resource;
pub(crate) use nix::sys::signal::Signal;

fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn cvt_long(ret: libc::c_long) -> io::Result<libc::c_long> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// A path as a C string; paths with interior NUL bytes are refused.
fn cstr(path: impl AsRef<OsStr>) -> io::Result<CString> {
    CString::new(path.as_ref().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
}

/// A close-on-exec pipe: (read end, write end).
pub(crate) fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    Ok(nix::unistd::pipe2(OFlag::O_CLOEXEC)?)
}

/// `clone(2)` without a new stack, i.e. `fork()` with namespace flags. Returns 0 in the child.
///
/// Only called from the single-threaded helper, where forking is safe. (`nix::sched::clone`
/// always runs the child on a new stack, which is not what this wants.)
pub(crate) fn clone_fork(flags: libc::c_int) -> io::Result<libc::pid_t> {
    // SAFETY: with a null stack pointer clone behaves like fork; the helper is single-threaded,
    // so the child's copy of the address space is consistent.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_clone,
            (flags | libc::SIGCHLD) as libc::c_ulong,
            0usize,
            0usize,
            0usize,
            0usize,
        )
    };
    cvt_long(ret).map(|pid| pid as libc::pid_t)
}

/// `fork(2)`; returns 0 in the child. Only called from the single-threaded helper and probe
/// processes, where forking is safe.
pub(crate) fn fork() -> io::Result<libc::pid_t> {
    // SAFETY: the caller is single-threaded, so the child's address space is consistent
    // (nix's `fork` is unsafe for that reason alone).
    match unsafe { nix::unistd::fork() }? {
        nix::unistd::ForkResult::Child => Ok(0),
        nix::unistd::ForkResult::Parent { child } => Ok(child.as_raw()),
    }
}

/// `waitpid(2)`, retrying on EINTR; returns (pid, raw status).
pub(crate) fn waitpid(pid: libc::pid_t, flags: libc::c_int) -> io::Result<(libc::pid_t, i32)> {
    loop {
        match waitpid_once(pid, flags) {
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            result => return result,
        }
    }
}

/// One `waitpid(2)` for `pid` (-1: any child), an EINTR included; returns (pid, raw status).
pub(crate) fn waitpid_once(pid: libc::pid_t, flags: libc::c_int) -> io::Result<(libc::pid_t, i32)> {
    let mut status = 0;
    // SAFETY: `status` is a valid out pointer. (`nix::sys::wait::waitpid` decodes the status
    // into a `Signal`, which fails, after reaping, for a real-time signal.)
    let ret = cvt(unsafe { libc::waitpid(pid, &mut status, flags) })?;
    Ok((ret, status))
}

/// `wait4(2)` on one pid, retrying on EINTR; returns the raw status and resource usage.
pub(crate) fn wait4(pid: libc::pid_t) -> io::Result<(i32, libc::rusage)> {
    loop {
        match wait4_once(pid) {
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(err),
            Ok((_, status, usage)) => return Ok((status, usage)),
        }
    }
}

/// One `wait4(2)` for `pid` (-1: any child), an EINTR included; returns (pid, raw status,
/// resource usage).
pub(crate) fn wait4_once(pid: libc::pid_t) -> io::Result<(libc::pid_t, i32, libc::rusage)> {
    let mut status = 0;
    // SAFETY: rusage is plain old data; zeroed is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: both out pointers are valid. (`nix` has no wait4.)
    let ret = cvt(unsafe { libc::wait4(pid, &mut status, 0, &mut usage) })?;
    Ok((ret, status, usage))
}

/// Split a raw wait status into (exit code, signal).
pub(crate) fn decode_status(status: i32) -> (Option<i32>, Option<i32>) {
    if libc::WIFEXITED(status) {
        (Some(libc::WEXITSTATUS(status)), None)
    } else if libc::WIFSIGNALED(status) {
        (None, Some(libc::WTERMSIG(status)))
    } else {
        (None, None)
    }
}

/// `pidfd_open(2)`.
pub(crate) fn pidfd_open(pid: libc::pid_t) -> io::Result<OwnedFd> {
    // SAFETY: plain syscall with integer arguments.
    let fd = cvt_long(unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) })?;
    // SAFETY: the syscall returned a new descriptor that nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// `poll(2)` on descriptors for readability; returns the revents per descriptor (all zero
/// when a signal interrupted the wait).
pub(crate) fn poll_readable(fds: &[BorrowedFd<'_>], timeout_ms: i32) -> io::Result<Vec<i16>> {
    use nix::poll::{PollFd, PollFlags, PollTimeout};
    let timeout = PollTimeout::try_from(timeout_ms).map_err(|_| Errno::EINVAL)?;
    let mut pfds: Vec<PollFd<'_>> = fds
        .iter()
        .map(|fd| PollFd::new(*fd, PollFlags::POLLIN))
        .collect();
    match nix::poll::poll(&mut pfds, timeout) {
        Err(Errno::EINTR) => Ok(vec![0; fds.len()]),
        Err(err) => Err(err.into()),
        Ok(_) => Ok(pfds
            .iter()
            .map(|p| p.revents().map_or(0, |r| r.bits()))
            .collect()),
    }
}

/// `kill(2)`; `pid` -1 is every process the caller may signal.
pub(crate) fn kill(pid: libc::pid_t, sig: Signal) -> io::Result<()> {
    Ok(nix::sys::signal::kill(Pid::from_raw(pid), sig)?)
}

/// `prctl(PR_SET_NO_NEW_PRIVS, 1)`.
pub(crate) fn set_no_new_privs() -> io::Result<()> {
    Ok(nix::sys::prctl::set_no_new_privs()?)
}

/// `prctl(PR_SET_DUMPABLE, 1)`.
pub(crate) fn set_dumpable() -> io::Result<()> {
    Ok(nix::sys::prctl::set_dumpable(true)?)
}

/// `prctl(PR_SET_PDEATHSIG, SIGKILL)`: die with the parent.
pub(crate) fn die_with_parent() -> io::Result<()> {
    Ok(nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?)
}

/// `prctl(PR_CAPBSET_DROP, cap)`: drop one capability from the bounding set.
pub(crate) fn capbset_drop(cap: u32) -> io::Result<()> {
    // SAFETY: PR_CAPBSET_DROP takes one integer argument (nix has no wrapper for it).
    cvt(unsafe { libc::prctl(libc::PR_CAPBSET_DROP, libc::c_ulong::from(cap), 0, 0, 0) })
        .map(|_| ())
}

/// `prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)`: empty the ambient capability set.
pub(crate) fn clear_ambient_caps() -> io::Result<()> {
    let clear_all = libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong;
    // SAFETY: PR_CAP_AMBIENT takes integer arguments only (nix has no wrapper for it).
    cvt(unsafe { libc::prctl(libc::PR_CAP_AMBIENT, clear_all, 0, 0, 0) }).map(|_| ())
}

/// `unshare(2)` with `CLONE_*` flags.
pub(crate) fn unshare(flags: libc::c_int) -> io::Result<()> {
    Ok(nix::sched::unshare(
        nix::sched::CloneFlags::from_bits_retain(flags),
    )?)
}

/// `mount(2)` with `MS_*` flags.
pub(crate) fn mount(
    source: Option<&Path>,
    target: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> io::Result<()> {
    Ok(nix::mount::mount(
        source,
        target,
        fstype,
        nix::mount::MsFlags::from_bits_retain(flags),
        data,
    )?)
}

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// Read-only mount attribute for [`mount_setattr`].
pub(crate) const MOUNT_ATTR_RDONLY: u64 = 0x1;
/// No-setuid mount attribute for [`mount_setattr`].
pub(crate) const MOUNT_ATTR_NOSUID: u64 = 0x2;
/// No-devices mount attribute for [`mount_setattr`].
pub(crate) const MOUNT_ATTR_NODEV: u64 = 0x4;
/// Idmapped-mount attribute (set with a user namespace descriptor).
const MOUNT_ATTR_IDMAP: u64 = 0x0010_0000;

/// `mount_setattr(2)`: add attributes to a mount (and, if `recursive`, every mount below it).
pub(crate) fn mount_setattr(path: &Path, recursive: bool, set: u64) -> io::Result<()> {
    let path = cstr(path)?;
    mount_setattr_raw((libc::AT_FDCWD, &path), recursive, set, None)
}

/// `open_tree(2)` flag: clone the tree instead of opening it in place (a detached bind mount).
const OPEN_TREE_CLONE: libc::c_uint = 0x1;
/// `move_mount(2)` flag: the source is the descriptor itself.
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
/// `move_mount(2)` flag: the target is the descriptor itself.
const MOVE_MOUNT_T_EMPTY_PATH: libc::c_uint = 0x40;

/// An `O_PATH` descriptor of the directory `path` (which must not be a symlink).
pub(crate) fn open_dir_path(path: &Path) -> io::Result<OwnedFd> {
    let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    Ok(nix::fcntl::open(path, flags, Mode::empty())?)
}

/// An `O_PATH` descriptor of the entry `name` (one path component) of the directory `dir`,
/// never following a symlink: a symlink comes back as a descriptor of the link itself, which
/// [`fstat_mode`] tells apart.
pub(crate) fn open_path_nofollow_at(dir: &OwnedFd, name: &OsStr) -> io::Result<OwnedFd> {
    let flags = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    Ok(nix::fcntl::openat(dir, name, flags, Mode::empty())?)
}

/// `mkdirat(2)` of the entry `name` (one path component) of the directory `dir`.
pub(crate) fn mkdir_at(dir: &OwnedFd, name: &OsStr, mode: libc::mode_t) -> io::Result<()> {
    Ok(nix::sys::stat::mkdirat(
        dir,
        name,
        Mode::from_bits_retain(mode),
    )?)
}

/// Create the empty regular file `name` (one path component) in the directory `dir`; fails
/// if anything, a symlink included, already has that name.
pub(crate) fn create_file_at(dir: &OwnedFd, name: &OsStr, mode: libc::mode_t) -> io::Result<()> {
    let flags =
        OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_WRONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    // Dropping the descriptor closes it.
    nix::fcntl::openat(dir, name, flags, Mode::from_bits_retain(mode))?;
    Ok(())
}

/// The file type and mode bits (`st_mode`) of what `fd` refers to (an `O_PATH` descriptor
/// will do).
pub(crate) fn fstat_mode(fd: &OwnedFd) -> io::Result<libc::mode_t> {
    Ok(nix::sys::stat::fstat(fd)?.st_mode)
}

/// `open_tree(2)` with `OPEN_TREE_CLONE | AT_RECURSIVE`: a detached copy of the mount tree at
/// `path`, as a recursive bind would make, not yet attached anywhere.
pub(crate) fn open_tree_clone(path: &Path) -> io::Result<OwnedFd> {
    open_tree_clone_with(path, true)
}

/// `open_tree(2)` with `OPEN_TREE_CLONE`: a detached copy of the one mount at `path` (a bind
/// of it, without the mounts below it), not yet attached anywhere.
pub(crate) fn open_tree_clone_flat(path: &Path) -> io::Result<OwnedFd> {
    open_tree_clone_with(path, false)
}

fn open_tree_clone_with(path: &Path, recursive: bool) -> io::Result<OwnedFd> {
    let path = cstr(path)?;
    let mut flags = OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint;
    if recursive {
        flags |= libc::AT_RECURSIVE as libc::c_uint;
    }
    // SAFETY: `path` is a valid NUL-terminated string; the other arguments are integers.
    let fd = cvt_long(unsafe {
        libc::syscall(libc::SYS_open_tree, libc::AT_FDCWD, path.as_ptr(), flags)
    })?;
    // SAFETY: open_tree returned a new descriptor that nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// `mount_setattr(2)` on the mount `fd` refers to (for example a detached tree from
/// [`open_tree_clone`]) and, if `recursive`, every mount below it.
pub(crate) fn mount_setattr_fd(fd: &OwnedFd, recursive: bool, set: u64) -> io::Result<()> {
    mount_setattr_raw((fd.as_raw_fd(), c""), recursive, set, None)
}

/// Like [`mount_setattr_fd`], and make the (detached, never attached) mount idmapped by the
/// user namespace `userns`: a file owned by id N on disk appears owned by what `userns` maps
/// N to, and one it leaves unmapped can be read by its mode's "other" bits but not written.
pub(crate) fn mount_setattr_idmap(fd: &OwnedFd, set: u64, userns: &OwnedFd) -> io::Result<()> {
    mount_setattr_raw(
        (fd.as_raw_fd(), c""),
        false,
        set | MOUNT_ATTR_IDMAP,
        Some(userns),
    )
}

/// `mount_setattr(2)` of `path` relative to `dirfd` (`AT_FDCWD` or a descriptor), or of the
/// mount the descriptor `dirfd` refers to when `path` is empty (`AT_EMPTY_PATH`).
fn mount_setattr_raw(
    (dirfd, path): (RawFd, &CStr),
    recursive: bool,
    set: u64,
    userns: Option<&OwnedFd>,
) -> io::Result<()> {
    let mut attr = MountAttr {
        attr_set: set,
        attr_clr: 0,
        propagation: 0,
        userns_fd: userns.map_or(0, |u| u.as_raw_fd() as u64),
    };
    let mut flags = if dirfd != libc::AT_FDCWD && path.is_empty() {
        libc::AT_EMPTY_PATH as libc::c_uint
    } else {
        0
    };
    if recursive {
        flags |= libc::AT_RECURSIVE as libc::c_uint;
    }
    // SAFETY: `dirfd` is AT_FDCWD or an open descriptor, `path` a valid NUL-terminated string
    // and `attr` a valid mount_attr of the size passed; all outlive the call.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            dirfd,
            path.as_ptr(),
            flags,
            &mut attr as *mut MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    cvt_long(ret).map(|_| ())
}

/// `move_mount(2)`: attach the detached mount `from` on top of what `onto` refers to (an
/// `O_PATH` descriptor of the mount point, so no path is resolved again).
pub(crate) fn move_mount_onto(from: &OwnedFd, onto: &OwnedFd) -> io::Result<()> {
    // SAFETY: both descriptors are open and both paths are the empty NUL-terminated string.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            from.as_raw_fd(),
            c"".as_ptr(),
            onto.as_raw_fd(),
            c"".as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH,
        )
    };
    cvt_long(ret).map(|_| ())
}

/// `move_mount(2)`: attach the detached mount `from` at `to` (a path, resolved as usual).
pub(crate) fn move_mount_to_path(from: &OwnedFd, to: &Path) -> io::Result<()> {
    let to = cstr(to)?;
    // SAFETY: the descriptor is open and both paths are valid NUL-terminated strings.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            from.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    };
    cvt_long(ret).map(|_| ())
}

/// `fsopen(2)` + `fsconfig(2)` + `fsmount(2)`: a new, detached mount of the filesystem
/// `fstype` configured with the `options` (key, value) strings, with the mount attributes
/// `attrs` (`MOUNT_ATTR_*`).
pub(crate) fn fs_mount(fstype: &str, options: &[(&str, &str)], attrs: u64) -> io::Result<OwnedFd> {
    const FSOPEN_CLOEXEC: libc::c_uint = 0x1;
    const FSCONFIG_SET_STRING: libc::c_uint = 1;
    const FSCONFIG_CMD_CREATE: libc::c_uint = 6;
    const FSMOUNT_CLOEXEC: libc::c_uint = 0x1;
    let fstype = cstr(fstype)?;
    // SAFETY: `fstype` is a valid NUL-terminated string.
    let fs = cvt_long(unsafe { libc::syscall(libc::SYS_fsopen, fstype.as_ptr(), FSOPEN_CLOEXEC) })?;
    // SAFETY: fsopen returned a new descriptor that nobody else owns.
    let fs = unsafe { OwnedFd::from_raw_fd(fs as RawFd) };
    for (key, value) in options {
        let (key, value) = (cstr(key)?, cstr(value)?);
        // SAFETY: `fs` is open and both strings are valid and NUL-terminated.
        cvt_long(unsafe {
            libc::syscall(
                libc::SYS_fsconfig,
                fs.as_raw_fd(),
                FSCONFIG_SET_STRING,
                key.as_ptr(),
                value.as_ptr(),
                0,
            )
        })?;
    }
    // SAFETY: `fs` is open; the command takes no key or value.
    cvt_long(unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            fs.as_raw_fd(),
            FSCONFIG_CMD_CREATE,
            std::ptr::null::<libc::c_char>(),
            std::ptr::null::<libc::c_void>(),
            0,
        )
    })?;
    // SAFETY: `fs` is an open filesystem context; the other arguments are integers.
    let mnt = cvt_long(unsafe {
        libc::syscall(libc::SYS_fsmount, fs.as_raw_fd(), FSMOUNT_CLOEXEC, attrs)
    })?;
    // SAFETY: fsmount returned a new descriptor that nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(mnt as RawFd) })
}

/// `open(2)` of `path` read-only, for a descriptor such as `/proc/<pid>/ns/user`.
pub(crate) fn open_read(path: &Path) -> io::Result<OwnedFd> {
    let flags = OFlag::O_RDONLY | OFlag::O_CLOEXEC;
    Ok(nix::fcntl::open(path, flags, Mode::empty())?)
}

/// `pivot_root(2)`.
pub(crate) fn pivot_root(new_root: &Path, put_old: &Path) -> io::Result<()> {
    Ok(nix::unistd::pivot_root(new_root, put_old)?)
}

/// `umount2(2)` with `MNT_DETACH`.
pub(crate) fn umount_detach(target: &Path) -> io::Result<()> {
    Ok(nix::mount::umount2(
        target,
        nix::mount::MntFlags::MNT_DETACH,
    )?)
}

/// `sethostname(2)`.
pub(crate) fn sethostname(name: &str) -> io::Result<()> {
    Ok(nix::unistd::sethostname(name)?)
}

/// `setresuid(2)` with one uid for real, effective and saved.
pub(crate) fn setresuid(uid: libc::uid_t) -> io::Result<()> {
    let uid = Uid::from_raw(uid);
    Ok(nix::unistd::setresuid(uid, uid, uid)?)
}

/// `setresgid(2)` with one gid for real, effective and saved.
pub(crate) fn setresgid(gid: libc::gid_t) -> io::Result<()> {
    let gid = Gid::from_raw(gid);
    Ok(nix::unistd::setresgid(gid, gid, gid)?)
}

/// `setgroups(2)` with an empty list.
pub(crate) fn clear_groups() -> io::Result<()> {
    Ok(nix::unistd::setgroups(&[])?)
}

/// `setrlimit(2)` of both the soft and the hard limit to `value`, or to the hard limit already
/// in force when that is lower (a process without `CAP_SYS_RESOURCE` cannot raise it, and the
/// stricter limit then holds anyway).
pub(crate) fn setrlimit(resource: Resource, value: u64) -> io::Result<()> {
    let (_, hard) = nix::sys::resource::getrlimit(resource)?;
    let value = value.min(hard);
    Ok(nix::sys::resource::setrlimit(resource, value, value)?)
}

/// `setsid(2)`.
pub(crate) fn setsid() -> io::Result<()> {
    nix::unistd::setsid()?;
    Ok(())
}

/// Put every signal back to its default disposition and empty the signal mask, the state a
/// freshly started program expects. Both survive `execve`: without this the command would
/// inherit the ignored `SIGPIPE` of every Rust program on its way (a `yes | head` that reports
/// "Broken pipe" instead of ending quietly), the glibc-internal signals that `posix_spawn`
/// leaves ignored, and whatever the caller blocked.
pub(crate) fn reset_signals() -> io::Result<()> {
    nix::sys::signal::sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None)?;
    // The kernel's `struct sigaction` with every field zero is SIG_DFL, no flags, empty mask,
    // whatever the architecture's field layout; the raw call also reaches the real-time
    // signals, which `nix`'s `Signal` does not name, and the two (32 and 33) that glibc's
    // wrapper refuses to touch.
    let default = [0u64; 4];
    for signal in 1..=64 {
        if signal == libc::SIGKILL || signal == libc::SIGSTOP {
            continue;
        }
        // SAFETY: `default` is at least as large as the kernel's struct sigaction; no old
        // action is asked for; the set size is the kernel's (64 signals, 8 bytes).
        let rc = cvt_long(unsafe {
            libc::syscall(
                libc::SYS_rt_sigaction,
                signal,
                default.as_ptr(),
                std::ptr::null_mut::<libc::c_void>(),
                8usize,
            )
        });
        // EINVAL: a signal number this kernel does not have.
        if let Err(err) = rc
            && err.raw_os_error() != Some(libc::EINVAL)
        {
            return Err(err);
        }
    }
    Ok(())
}

/// Set by the handler [`catch_sigterm`] installs.
static SIGTERM_CAUGHT: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigterm(_: libc::c_int) {
    SIGTERM_CAUGHT.store(true, Ordering::SeqCst);
}

/// Catch SIGTERM: from now on [`sigterm_caught`] says whether one arrived. The handler has no
/// `SA_RESTART`, so a SIGTERM also interrupts a blocking call (such as [`wait4_once`]).
pub(crate) fn catch_sigterm() -> io::Result<()> {
    let action = SigAction::new(
        SigHandler::Handler(on_sigterm),
        SaFlags::empty(),
        SigSet::empty(),
    );
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe, and no
    // previous handler is kept to be chained to.
    unsafe { nix::sys::signal::sigaction(Signal::SIGTERM, &action) }?;
    Ok(())
}

/// Whether a SIGTERM arrived since [`catch_sigterm`].
pub(crate) fn sigterm_caught() -> bool {
    SIGTERM_CAUGHT.load(Ordering::SeqCst)
}

/// Clear every capability set of the calling thread (`capset` with all-zero sets).
pub(crate) fn capset_clear() -> io::Result<()> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;
    let mut header = Header {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let data = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: header and data have the layout capset(2) expects for version 3.
    cvt_long(unsafe { libc::syscall(libc::SYS_capset, &mut header as *mut Header, data.as_ptr()) })
        .map(|_| ())
}

/// `execve(2)`; only returns on failure.
pub(crate) fn execve(path: &CString, argv: &[CString], envp: &[CString]) -> io::Error {
    match nix::unistd::execve(path, argv, envp) {
        Err(errno) => errno.into(),
        Ok(never) => match never {},
    }
}

/// Close every descriptor from `first` upwards.
pub(crate) fn close_from(first: u32) -> io::Result<()> {
    // SAFETY: plain syscall with integer arguments (nix has no close_range); the helper owns
    // no Rust objects over those fds.
    cvt_long(unsafe { libc::syscall(libc::SYS_close_range, first, u32::MAX, 0u32) }).map(|_| ())
}

/// Standard output and standard error become duplicates of `fd`.
pub(crate) fn stdout_stderr_to(fd: impl AsFd) -> io::Result<()> {
    nix::unistd::dup2_stdout(&fd)?;
    Ok(nix::unistd::dup2_stderr(&fd)?)
}

/// Standard input becomes a duplicate of `fd`.
pub(crate) fn stdin_from(fd: impl AsFd) -> io::Result<()> {
    Ok(nix::unistd::dup2_stdin(fd)?)
}

/// `dup2(2)` of standard input onto the descriptor number `to`, replacing whatever was open
/// there; the new descriptor stays open for the life of the process (see [`report_fd`]).
pub(crate) fn dup_stdin_to(to: RawFd) -> io::Result<()> {
    // SAFETY: plain syscall with integer arguments. `to` is a number the caller reserves for
    // itself: no Rust object owns it, so replacing it closes nothing behind anyone's back.
    // (nix's `dup2` wants an `OwnedFd` for `to`, `dup2_raw` is unsafe as well.)
    cvt(unsafe { libc::dup2(libc::STDIN_FILENO, to) }).map(|_| ())
}

/// The helper's report descriptor, [`crate::types::REPORT_FD`], borrowed.
///
/// Only called in the helper and its children, after [`dup_stdin_to`] opened it.
pub(crate) fn report_fd() -> BorrowedFd<'static> {
    // SAFETY: the helper opens the report descriptor before anything reports (first thing in
    // `helper::supervise`) and nothing closes it while the process image lives: no Rust
    // object owns the number, `close_from` closes only the descriptors above it, and
    // close-on-exec takes it away only with the image.
    unsafe { BorrowedFd::borrow_raw(crate::types::REPORT_FD) }
}

/// Set or clear `FD_CLOEXEC`.
pub(crate) fn set_cloexec(fd: impl AsFd, on: bool) -> io::Result<()> {
    let fd = fd.as_fd();
    let mut flags = FdFlag::from_bits_retain(nix::fcntl::fcntl(fd, FcntlArg::F_GETFD)?);
    flags.set(FdFlag::FD_CLOEXEC, on);
    nix::fcntl::fcntl(fd, FcntlArg::F_SETFD(flags))?;
    Ok(())
}

/// Put a descriptor in non-blocking mode.
pub(crate) fn set_nonblocking(fd: impl AsFd) -> io::Result<()> {
    let fd = fd.as_fd();
    let flags = OFlag::from_bits_retain(nix::fcntl::fcntl(fd, FcntlArg::F_GETFL)?);
    nix::fcntl::fcntl(fd, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
    Ok(())
}

/// `read(2)` into `buf`; returns 0 at end of file.
pub(crate) fn read(fd: impl AsFd, buf: &mut [u8]) -> io::Result<usize> {
    Ok(nix::unistd::read(fd, buf)?)
}

/// Write all of `buf` to a descriptor (without allocating, so a forked child may call it).
pub(crate) fn write_all(fd: impl AsFd, mut buf: &[u8]) -> io::Result<()> {
    let fd = fd.as_fd();
    while !buf.is_empty() {
        match nix::unistd::write(fd, buf) {
            Err(Errno::EINTR) => continue,
            Err(err) => return Err(err.into()),
            Ok(n) => buf = &buf[n..],
        }
    }
    Ok(())
}

/// Send all of `buf` on a unix stream socket with one descriptor attached (`SCM_RIGHTS`).
/// The descriptor travels with the first byte; the rest, if the send was short, follows
/// plainly.
pub(crate) fn send_with_fd(sock: impl AsFd, buf: &[u8], fd: impl AsFd) -> io::Result<()> {
    use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
    let sock = sock.as_fd();
    let fds = [fd.as_fd().as_raw_fd()];
    let cmsg = [ControlMessage::ScmRights(&fds)];
    let sent = loop {
        match sendmsg::<()>(
            sock.as_raw_fd(),
            &[std::io::IoSlice::new(buf)],
            &cmsg,
            MsgFlags::empty(),
            None,
        ) {
            Err(Errno::EINTR) => continue,
            Err(err) => return Err(err.into()),
            Ok(n) => break n,
        }
    };
    write_all(sock, &buf[sent..])
}

/// `recvmsg(2)` into `buf` on a unix stream socket, taking the descriptors that came with
/// the bytes (close-on-exec). Returns 0 bytes at end of file.
pub(crate) fn recv_with_fds(sock: impl AsFd, buf: &mut [u8]) -> io::Result<(usize, Vec<OwnedFd>)> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    let mut space = nix::cmsg_space!([RawFd; 4]);
    let mut iov = [std::io::IoSliceMut::new(buf)];
    let msg = recvmsg::<()>(
        sock.as_fd().as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )?;
    let mut fds = Vec::new();
    for cmsg in msg.cmsgs()? {
        if let ControlMessageOwned::ScmRights(raw) = cmsg {
            for fd in raw {
                // SAFETY: the kernel installed these descriptors in this process for this
                // message; nothing else owns them.
                fds.push(unsafe { OwnedFd::from_raw_fd(fd) });
            }
        }
    }
    Ok((msg.bytes, fds))
}

/// Shut a socket down both ways; on a listening socket this wakes a blocked `accept`.
pub(crate) fn shutdown(sock: impl AsFd) -> io::Result<()> {
    Ok(nix::sys::socket::shutdown(
        sock.as_fd().as_raw_fd(),
        nix::sys::socket::Shutdown::Both,
    )?)
}

/// Leave the process immediately with `code`, without running destructors or atexit handlers
/// (the right way out of a forked child).
pub(crate) fn exit_now(code: i32) -> ! {
    // SAFETY: _exit never returns and is always safe to call (nix has no wrapper; std's
    // `process::exit` would run the atexit handlers).
    unsafe { libc::_exit(code) }
}

/// A TCP/IPv4 socket, or the error that refused it (a probe of the seccomp filter).
pub(crate) fn inet_stream_socket() -> io::Result<OwnedFd> {
    use nix::sys::socket::{AddressFamily, SockFlag, SockType};
    Ok(nix::sys::socket::socket(
        AddressFamily::Inet,
        SockType::Stream,
        SockFlag::empty(),
        None,
    )?)
}

/// Bring the loopback interface of the current network namespace up.
pub(crate) fn loopback_up() -> io::Result<()> {
    use nix::sys::socket::{AddressFamily, SockFlag, SockType};
    let sock = nix::sys::socket::socket(
        AddressFamily::Inet,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    // SAFETY: ifreq is plain old data; zeroed is valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    // nix wraps no interface ioctl (only macros that generate unsafe functions).
    // SAFETY: `req` is a valid ifreq naming an interface; the ioctl fills the flags.
    cvt(unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) })?;
    // SAFETY: SIOCGIFFLAGS filled the flags member of the union.
    unsafe {
        req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
    }
    // SAFETY: `req` is a valid ifreq with the new flags.
    cvt(unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req) })?;
    Ok(())
}

/// The landlock ABI version the kernel offers (0 when landlock is unavailable). The raw
/// number: the `landlock` crate only names the versions it knows.
pub(crate) fn landlock_abi() -> u32 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a null attribute pointer and the VERSION flag this only queries the ABI.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if ret < 0 { 0 } else { ret as u32 }
}

/// The landlock access right over connecting to a pathname unix socket (ABI 9).
pub(crate) const LANDLOCK_ACCESS_FS_RESOLVE_UNIX: u64 = 1 << 16;
/// The landlock access right over linking or renaming a file into another directory (ABI 2).
pub(crate) const LANDLOCK_ACCESS_FS_REFER: u64 = 1 << 13;

/// `landlock_create_ruleset(2)` handling the filesystem access rights `handled_fs` (and no
/// network rights or scopes).
pub(crate) fn landlock_ruleset(handled_fs: u64) -> io::Result<OwnedFd> {
    // The first member of `struct landlock_ruleset_attr`; the kernel takes a shorter struct.
    let attr: u64 = handled_fs;
    // SAFETY: `attr` is a valid 8-byte prefix of the attribute struct, its size passed.
    let fd = cvt_long(unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            &attr as *const u64,
            std::mem::size_of::<u64>(),
            0u32,
        )
    })?;
    // SAFETY: the syscall returned a new descriptor that nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// `landlock_add_rule(2)` of a path-beneath rule: `allowed` beneath what `parent` refers to.
pub(crate) fn landlock_allow_beneath(
    ruleset: &OwnedFd,
    parent: &OwnedFd,
    allowed: u64,
) -> io::Result<()> {
    #[repr(C, packed)]
    struct PathBeneath {
        allowed_access: u64,
        parent_fd: i32,
    }
    const LANDLOCK_RULE_PATH_BENEATH: libc::c_int = 1;
    let rule = PathBeneath {
        allowed_access: allowed,
        parent_fd: parent.as_raw_fd(),
    };
    // SAFETY: `rule` has the layout of `struct landlock_path_beneath_attr`; both descriptors
    // are open.
    cvt_long(unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset.as_raw_fd(),
            LANDLOCK_RULE_PATH_BENEATH,
            &rule as *const PathBeneath,
            0u32,
        )
    })
    .map(|_| ())
}

/// `landlock_restrict_self(2)`: enforce `ruleset` on the calling thread (needs
/// `no_new_privs`).
pub(crate) fn landlock_restrict_self(ruleset: &OwnedFd) -> io::Result<()> {
    // SAFETY: plain syscall with a descriptor and an integer.
    cvt_long(unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0u32) })
        .map(|_| ())
}

/// An `O_PATH` descriptor of `path`, following symlinks (for a landlock rule).
pub(crate) fn open_path(path: &Path) -> io::Result<OwnedFd> {
    Ok(nix::fcntl::open(
        path,
        OFlag::O_PATH | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?)
}

/// The effective uid and gid of the calling process.
pub(crate) fn ids() -> (libc::uid_t, libc::gid_t) {
    (
        nix::unistd::geteuid().as_raw(),
        nix::unistd::getegid().as_raw(),
    )
}

/// The calling process's pid.
pub(crate) fn getpid() -> libc::pid_t {
    nix::unistd::getpid().as_raw()
}
