//! Builds the child's filesystem: a fresh tmpfs root holding only the granted paths.
//!
//! The plan ([`plan()`]) is made by the helper in the host's mount namespace, before the clone:
//! that is where the host's mount table is read (the mounts below a read-only directory grant
//! are shown too) and where, for a root caller, the detached idmapped mounts are made (only
//! root in the host's user namespace may idmap a host filesystem). The sandbox's init, a fork
//! of the helper, inherits the plan and builds the root from it ([`build_root`]), inside the
//! new user and mount namespaces, before the target is forked. The host's root stays
//! reachable under `/oldroot` only until the final `pivot_root`, after which it is detached.
//!
//! A read-only directory grant is never a plain bind of the host's directory: it is a
//! read-only overlayfs whose lower layer is that directory (idmapped for a root caller, so the
//! caller's files appear as the command's own). Its inodes are overlayfs' own, so a FIFO in
//! it is another pipe and a unix socket in it has no listener: the host's FIFOs and sockets
//! in a granted directory cannot be reached, whatever their mode, whatever landlock governs.
//! A file grant is a bind of that file: naming a socket or a FIFO is how the caller grants it.
//!
//! Grants at another path (`ro_at`, `rw_at`) may lie inside an overlay or another grant, so
//! they are mounted after everything shallower. Their mount point is found (and, where
//! missing, created) one component at a time without following a symlink, and the bind is
//! attached to that descriptor: a symlink in an untrusted tree (say `node_modules -> /`)
//! can never redirect it. Whatever had to be created lands in the filesystem the path lies
//! in: the root tmpfs, the private `/tmp` or an overlay's upper directory; `build()` has
//! already refused a missing mount point inside a host grant, so nothing is created on the
//! host.
//!
//! Layering, lowest first; a module imports only from those listed before it:
//! - `paths`: the set-up root's layout, and set-up failures naming paths as the caller does.
//! - `idmap`: user namespaces for idmapped mounts, and idmapped copies of host mounts.
//! - `plan`: the mount plan the helper makes ([`plan()`], [`MountPlan`]).
//! - `etc_files`: the sandbox's `/etc/passwd`, `/etc/group` and `/etc/hosts`.
//! - `build`: init's building of the new root from the plan ([`build_root`]).
//! - this file: the paths landlock grants for the mounted view ([`landlock_roots`]).

mod build;
mod etc_files;
mod idmap;
mod paths;
mod plan;

pub(crate) use build::build_root;
pub(crate) use idmap::idmapped_copy;
pub(crate) use plan::{MountPlan, plan};

use crate::spec::Spec;
use etc_files::IDENTITY_FILES;
use std::path::{Path, PathBuf};

/// The paths the child may use, for the landlock rules: (path, writable). The private `/tmp`
/// and `/dev/shm` exist only with a mount namespace; without one (a degraded run) those paths
/// would be the host's, so they are not granted.
pub(crate) fn landlock_roots(spec: &Spec, with_ns: bool) -> Vec<(PathBuf, bool)> {
    let mut roots: Vec<(PathBuf, bool)> = Vec::new();
    for path in &spec.ro {
        roots.push((path.clone(), false));
    }
    for path in &spec.rw {
        roots.push((path.clone(), true));
    }
    for o in &spec.overlays {
        roots.push((o.mountpoint.clone(), true));
    }
    if with_ns {
        // Mounted only with a mount namespace (a degraded run without one is refused).
        for b in &spec.binds_at {
            roots.push((b.target.clone(), b.writable));
        }
        roots.push((PathBuf::from("/tmp"), true));
        roots.push((PathBuf::from("/dev/shm"), true));
        // The user and group names (written by `identity_files`, or granted).
        for file in IDENTITY_FILES {
            if Path::new(file).is_file() {
                roots.push((PathBuf::from(file), false));
            }
        }
    }
    roots
}

#[cfg(test)]
mod tests;
