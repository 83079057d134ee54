//! Idmapped mounts: the user namespaces whose id maps they apply (made by a forked child the
//! namespace outlives), and detached, read-only, idmapped copies of a host mount.

use crate::identity::HostIdentity;
use crate::sys;
use std::fs;
use std::os::fd::OwnedFd;
use std::path::Path;

/// The user namespace of the idmapped mounts: the caller's ids (`caller`, uid and gid) become
/// `host`'s, every other id stays itself (but `host`'s own, left unmapped).
pub(super) fn caller_to_sandbox_userns(
    caller: (u32, u32),
    host: &HostIdentity,
) -> std::io::Result<OwnedFd> {
    idmap_userns(
        &crate::identity::caller_to_sandbox_map(caller.0, host.uid),
        &crate::identity::caller_to_sandbox_map(caller.1, host.gid),
    )
}

/// A detached, read-only, idmapped copy of the one mount at `path` (no mount below it).
pub(super) fn idmapped_with(path: &Path, userns: &OwnedFd) -> std::io::Result<OwnedFd> {
    let attrs = sys::MOUNT_ATTR_RDONLY | sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV;
    let tree = sys::open_tree_clone_flat(path)?;
    sys::mount_setattr_idmap(&tree, attrs, userns)?;
    Ok(tree)
}

/// [`idmapped_with`] a namespace of its own (for `airlock doctor`'s probe).
pub(crate) fn idmapped_copy(
    path: &Path,
    caller: (u32, u32),
    host: &HostIdentity,
) -> std::io::Result<OwnedFd> {
    idmapped_with(path, &caller_to_sandbox_userns(caller, host)?)
}

/// A user namespace whose id maps are `uid_map` and `gid_map`, for idmapped mounts: a forked
/// child enters a new one, its maps are written from here, and the namespace outlives the
/// child through the returned descriptor.
pub(super) fn idmap_userns(uid_map: &str, gid_map: &str) -> std::io::Result<OwnedFd> {
    let (ready_r, ready_w) = sys::pipe()?;
    let (done_r, done_w) = sys::pipe()?;
    let pid = sys::fork()?;
    if pid == 0 {
        drop(ready_r);
        drop(done_w);
        let ok = sys::unshare(libc::CLONE_NEWUSER).is_ok();
        let _ = sys::write_all(&ready_w, if ok { b"1" } else { b"0" });
        // Wait until the parent holds the namespace (or gives up).
        let mut byte = [0u8; 1];
        let _ = sys::read(&done_r, &mut byte);
        sys::exit_now(0)
    }
    drop(ready_w);
    drop(done_r);
    let result = (|| {
        let mut byte = [0u8; 1];
        if !matches!(sys::read(&ready_r, &mut byte), Ok(1)) || byte[0] != b'1' {
            return Err(std::io::Error::other(
                "the child could not unshare its user namespace",
            ));
        }
        fs::write(format!("/proc/{pid}/uid_map"), uid_map)?;
        fs::write(format!("/proc/{pid}/setgroups"), "deny")?;
        fs::write(format!("/proc/{pid}/gid_map"), gid_map)?;
        sys::open_read(Path::new(&format!("/proc/{pid}/ns/user")))
    })();
    drop(done_w);
    let _ = sys::waitpid(pid, 0);
    result
}
