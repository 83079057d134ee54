//! Thin wrappers over the system calls the sandbox needs, each returning `io::Result`.
//!
//! All `unsafe` of the crate lives here, one small block per call.

use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

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
pub(crate) fn cstr(path: impl AsRef<OsStr>) -> io::Result<CString> {
    CString::new(path.as_ref().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
}

/// A close-on-exec pipe: (read end, write end).
pub(crate) fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
    cvt(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: pipe2 succeeded, so both descriptors are open and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// `clone(2)` without a new stack, i.e. `fork()` with namespace flags. Returns 0 in the child.
///
/// Only called from the single-threaded helper, where forking is safe.
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

/// `fork(2)`; only called from the single-threaded helper.
pub(crate) fn fork() -> io::Result<libc::pid_t> {
    // SAFETY: the helper is single-threaded, so the child's address space is consistent.
    cvt(unsafe { libc::fork() })
}

/// `waitpid(2)`, retrying on EINTR; returns (pid, raw status).
pub(crate) fn waitpid(pid: libc::pid_t, flags: libc::c_int) -> io::Result<(libc::pid_t, i32)> {
    loop {
        let mut status = 0;
        // SAFETY: `status` is a valid out pointer.
        let ret = unsafe { libc::waitpid(pid, &mut status, flags) };
        if ret < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        return Ok((ret, status));
    }
}

/// `wait4(2)` on one pid, retrying on EINTR; returns the raw status and resource usage.
pub(crate) fn wait4(pid: libc::pid_t) -> io::Result<(i32, libc::rusage)> {
    loop {
        let mut status = 0;
        // SAFETY: rusage is plain old data; zeroed is a valid value.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: both out pointers are valid.
        let ret = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if ret < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        return Ok((status, usage));
    }
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

/// `poll(2)` on raw descriptors for readability; returns the revents per descriptor.
pub(crate) fn poll_readable(fds: &[RawFd], timeout_ms: i32) -> io::Result<Vec<libc::c_short>> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: `pfds` is a valid array of `pfds.len()` pollfd structs.
    let ret = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, timeout_ms) };
    if ret < 0 {
        let err = io::Error::last_os_error();
        if err.kind() == io::ErrorKind::Interrupted {
            return Ok(vec![0; fds.len()]);
        }
        return Err(err);
    }
    Ok(pfds.iter().map(|p| p.revents).collect())
}

/// `kill(2)`.
pub(crate) fn kill(pid: libc::pid_t, sig: libc::c_int) -> io::Result<()> {
    // SAFETY: plain syscall with integer arguments.
    cvt(unsafe { libc::kill(pid, sig) }).map(|_| ())
}

/// `prctl(2)` with up to two integer arguments.
pub(crate) fn prctl(
    option: libc::c_int,
    arg2: libc::c_ulong,
    arg3: libc::c_ulong,
) -> io::Result<libc::c_int> {
    // SAFETY: every prctl option used by this crate takes integer arguments only.
    cvt(unsafe { libc::prctl(option, arg2, arg3, 0 as libc::c_ulong, 0 as libc::c_ulong) })
}

/// `unshare(2)`.
pub(crate) fn unshare(flags: libc::c_int) -> io::Result<()> {
    // SAFETY: plain syscall with an integer argument.
    cvt(unsafe { libc::unshare(flags) }).map(|_| ())
}

/// `mount(2)`.
pub(crate) fn mount(
    source: Option<&Path>,
    target: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> io::Result<()> {
    let source = source.map(cstr).transpose()?;
    let target = cstr(target)?;
    let fstype = fstype.map(cstr).transpose()?;
    let data = data.map(cstr).transpose()?;
    // SAFETY: every pointer is either null or a valid NUL-terminated string that outlives the call.
    cvt(unsafe {
        libc::mount(
            source.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
            target.as_ptr(),
            fstype.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
            flags,
            data.as_ref()
                .map_or(std::ptr::null(), |s| s.as_ptr().cast()),
        )
    })
    .map(|_| ())
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
    let mut attr = MountAttr {
        attr_set: set,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    let flags = if recursive { libc::AT_RECURSIVE } else { 0 } as libc::c_uint;
    // SAFETY: `path` is NUL-terminated and `attr` is a valid mount_attr of the size passed.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            flags,
            &mut attr as *mut MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    cvt_long(ret).map(|_| ())
}

/// `open_tree(2)` flag: clone the tree instead of opening it in place (a detached bind mount).
const OPEN_TREE_CLONE: libc::c_uint = 0x1;
/// `move_mount(2)` flag: the source is the descriptor itself.
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
/// `move_mount(2)` flag: the target is the descriptor itself.
const MOVE_MOUNT_T_EMPTY_PATH: libc::c_uint = 0x40;

/// An `O_PATH` descriptor of the directory `path` (which must not be a symlink).
pub(crate) fn open_dir_path(path: &Path) -> io::Result<OwnedFd> {
    let path = cstr(path)?;
    // SAFETY: `path` is a valid NUL-terminated string; the flags take no mode.
    let fd = cvt(unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: open returned a new descriptor that nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// An `O_PATH` descriptor of the entry `name` (one path component) of the directory `dir`,
/// never following a symlink: a symlink comes back as a descriptor of the link itself, which
/// [`fstat_mode`] tells apart.
pub(crate) fn open_path_nofollow_at(dir: &OwnedFd, name: &OsStr) -> io::Result<OwnedFd> {
    let name = cstr(name)?;
    // SAFETY: `dir` is an open descriptor and `name` a valid NUL-terminated string.
    let fd = cvt(unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: openat returned a new descriptor that nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `mkdirat(2)` of the entry `name` (one path component) of the directory `dir`.
pub(crate) fn mkdir_at(dir: &OwnedFd, name: &OsStr, mode: libc::mode_t) -> io::Result<()> {
    let name = cstr(name)?;
    // SAFETY: `dir` is an open descriptor and `name` a valid NUL-terminated string.
    cvt(unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), mode) }).map(|_| ())
}

/// Create the empty regular file `name` (one path component) in the directory `dir`; fails
/// if anything, a symlink included, already has that name.
pub(crate) fn create_file_at(dir: &OwnedFd, name: &OsStr, mode: libc::mode_t) -> io::Result<()> {
    let name = cstr(name)?;
    // SAFETY: `dir` is an open descriptor, `name` a valid NUL-terminated string, and O_CREAT
    // takes the mode as its third argument.
    let fd = cvt(unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            mode as libc::c_uint,
        )
    })?;
    // SAFETY: openat returned a new descriptor that nobody else owns; dropping closes it.
    drop(unsafe { OwnedFd::from_raw_fd(fd) });
    Ok(())
}

/// The file type and mode bits (`st_mode`) of what `fd` refers to (an `O_PATH` descriptor
/// will do).
pub(crate) fn fstat_mode(fd: &OwnedFd) -> io::Result<libc::mode_t> {
    // SAFETY: stat is plain old data; zeroed is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is open and `st` a valid, writable stat struct.
    cvt(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) })?;
    Ok(st.st_mode)
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
    mount_setattr_fd_with(fd, recursive, set, None)
}

/// Like [`mount_setattr_fd`], and make the (detached, never attached) mount idmapped by the
/// user namespace `userns`: a file owned by id N on disk appears owned by what `userns` maps
/// N to, and one it leaves unmapped can be read by its mode's "other" bits but not written.
pub(crate) fn mount_setattr_idmap(fd: &OwnedFd, set: u64, userns: &OwnedFd) -> io::Result<()> {
    mount_setattr_fd_with(fd, false, set | MOUNT_ATTR_IDMAP, Some(userns))
}

fn mount_setattr_fd_with(
    fd: &OwnedFd,
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
    let mut flags = libc::AT_EMPTY_PATH as libc::c_uint;
    if recursive {
        flags |= libc::AT_RECURSIVE as libc::c_uint;
    }
    // SAFETY: `fd` is open, the empty path is a valid NUL-terminated string and `attr` a valid
    // mount_attr of the size passed.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            fd.as_raw_fd(),
            c"".as_ptr(),
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
    let path = cstr(path)?;
    // SAFETY: `path` is a valid NUL-terminated string; the flags take no mode.
    let fd = cvt(unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) })?;
    // SAFETY: open returned a new descriptor that nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `pivot_root(2)`.
pub(crate) fn pivot_root(new_root: &Path, put_old: &Path) -> io::Result<()> {
    let new_root = cstr(new_root)?;
    let put_old = cstr(put_old)?;
    // SAFETY: both pointers are valid NUL-terminated strings.
    cvt_long(unsafe { libc::syscall(libc::SYS_pivot_root, new_root.as_ptr(), put_old.as_ptr()) })
        .map(|_| ())
}

/// `umount2(2)` with `MNT_DETACH`.
pub(crate) fn umount_detach(target: &Path) -> io::Result<()> {
    let target = cstr(target)?;
    // SAFETY: `target` is a valid NUL-terminated string.
    cvt(unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) }).map(|_| ())
}

/// `sethostname(2)`.
pub(crate) fn sethostname(name: &str) -> io::Result<()> {
    // SAFETY: the pointer and length describe `name`'s bytes.
    cvt(unsafe { libc::sethostname(name.as_ptr().cast(), name.len()) }).map(|_| ())
}

/// `setresuid(2)` with one uid for real, effective and saved.
pub(crate) fn setresuid(uid: libc::uid_t) -> io::Result<()> {
    // SAFETY: plain syscall with integer arguments.
    cvt(unsafe { libc::setresuid(uid, uid, uid) }).map(|_| ())
}

/// `setresgid(2)` with one gid for real, effective and saved.
pub(crate) fn setresgid(gid: libc::gid_t) -> io::Result<()> {
    // SAFETY: plain syscall with integer arguments.
    cvt(unsafe { libc::setresgid(gid, gid, gid) }).map(|_| ())
}

/// `setgroups(2)` with an empty list.
pub(crate) fn clear_groups() -> io::Result<()> {
    // SAFETY: a zero-length list with a null pointer is valid.
    cvt(unsafe { libc::setgroups(0, std::ptr::null()) }).map(|_| ())
}

/// `setrlimit(2)` of both the soft and the hard limit to `value`, or to the hard limit already
/// in force when that is lower (a process without `CAP_SYS_RESOURCE` cannot raise it, and the
/// stricter limit then holds anyway).
pub(crate) fn setrlimit(resource: libc::__rlimit_resource_t, value: u64) -> io::Result<()> {
    let mut current = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `current` is a valid, writable rlimit struct.
    cvt(unsafe { libc::getrlimit(resource, &mut current) })?;
    let value = value.min(current.rlim_max);
    let lim = libc::rlimit {
        rlim_cur: value,
        rlim_max: value,
    };
    // SAFETY: `lim` is a valid rlimit struct.
    cvt(unsafe { libc::setrlimit(resource, &lim) }).map(|_| ())
}

/// `setsid(2)`.
pub(crate) fn setsid() -> io::Result<()> {
    // SAFETY: plain syscall.
    cvt(unsafe { libc::setsid() }).map(|_| ())
}

/// Put every signal back to its default disposition and empty the signal mask, the state a
/// freshly started program expects. Both survive `execve`: without this the command would
/// inherit the ignored `SIGPIPE` of every Rust program on its way (a `yes | head` that reports
/// "Broken pipe" instead of ending quietly), the glibc-internal signals that `posix_spawn`
/// leaves ignored, and whatever the caller blocked.
pub(crate) fn reset_signals() -> io::Result<()> {
    // SAFETY: an all-zero set is a valid, empty sigset_t; sigprocmask only reads it.
    let empty: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: plain syscall with a valid set and no old-set pointer.
    cvt(unsafe { libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut()) })?;
    // The kernel's `struct sigaction` with every field zero is SIG_DFL, no flags, empty mask,
    // whatever the architecture's field layout; the raw call also reaches the signals that
    // glibc's wrapper refuses to touch (32 and 33).
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
    let mut argv_ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    argv_ptrs.push(std::ptr::null());
    let mut envp_ptrs: Vec<*const libc::c_char> = envp.iter().map(|a| a.as_ptr()).collect();
    envp_ptrs.push(std::ptr::null());
    // SAFETY: both arrays are NUL-terminated arrays of valid C strings that outlive the call.
    unsafe { libc::execve(path.as_ptr(), argv_ptrs.as_ptr(), envp_ptrs.as_ptr()) };
    io::Error::last_os_error()
}

/// Close every descriptor from `first` upwards.
pub(crate) fn close_from(first: u32) -> io::Result<()> {
    // SAFETY: plain syscall with integer arguments; the helper owns no Rust objects over those fds.
    cvt_long(unsafe { libc::syscall(libc::SYS_close_range, first, u32::MAX, 0u32) }).map(|_| ())
}

/// `dup2(2)`.
pub(crate) fn dup2(from: RawFd, to: RawFd) -> io::Result<()> {
    // SAFETY: plain syscall with integer arguments.
    cvt(unsafe { libc::dup2(from, to) }).map(|_| ())
}

/// Set or clear `FD_CLOEXEC`.
pub(crate) fn set_cloexec(fd: RawFd, on: bool) -> io::Result<()> {
    // SAFETY: plain fcntl calls with integer arguments.
    let flags = cvt(unsafe { libc::fcntl(fd, libc::F_GETFD) })?;
    let flags = if on {
        flags | libc::FD_CLOEXEC
    } else {
        flags & !libc::FD_CLOEXEC
    };
    // SAFETY: as above.
    cvt(unsafe { libc::fcntl(fd, libc::F_SETFD, flags) }).map(|_| ())
}

/// Put a descriptor in non-blocking mode.
pub(crate) fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: plain fcntl calls with integer arguments.
    let flags = cvt(unsafe { libc::fcntl(fd, libc::F_GETFL) })?;
    // SAFETY: as above.
    cvt(unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) }).map(|_| ())
}

/// `read(2)` into `buf`; returns 0 at end of file.
pub(crate) fn read(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for writes of `buf.len()` bytes.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Write all of `buf` to a raw descriptor.
pub(crate) fn write_all(fd: RawFd, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        // SAFETY: `buf` is valid for reads of `buf.len()` bytes.
        let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        buf = &buf[n as usize..];
    }
    Ok(())
}

/// Leave the process immediately with `code`, without running destructors or atexit handlers
/// (the right way out of a forked child).
pub(crate) fn exit_now(code: i32) -> ! {
    // SAFETY: _exit never returns and is always safe to call.
    unsafe { libc::_exit(code) }
}

/// Bring the loopback interface of the current network namespace up.
pub(crate) fn loopback_up() -> io::Result<()> {
    // SAFETY: plain socket syscall.
    let fd = cvt(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: the socket was just created and is owned by nobody else.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ifreq is plain old data; zeroed is valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
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

/// The landlock ABI version the kernel offers (0 when landlock is unavailable).
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
    let path = cstr(path)?;
    // SAFETY: `path` is a valid NUL-terminated string; the flags take no mode.
    let fd = cvt(unsafe { libc::open(path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) })?;
    // SAFETY: open returned a new descriptor that nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The effective uid and gid of the calling process.
pub(crate) fn ids() -> (libc::uid_t, libc::gid_t) {
    // SAFETY: geteuid/getegid cannot fail.
    unsafe { (libc::geteuid(), libc::getegid()) }
}

/// The calling process's pid.
pub(crate) fn getpid() -> libc::pid_t {
    // SAFETY: getpid cannot fail.
    unsafe { libc::getpid() }
}
