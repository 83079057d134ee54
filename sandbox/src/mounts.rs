//! Builds the child's filesystem: a fresh tmpfs root holding only the granted paths.
//!
//! The plan ([`plan`]) is made by the helper in the host's mount namespace, before the clone:
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

use crate::identity::HostIdentity;
use crate::layers::Failure;
use crate::spec::NetworkAccess;
use crate::spec::{BindAtSpec, Layer, OverlaySpec, Spec};
use crate::sys;
use std::ffi::OsStr;
use std::fs;
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};

const BASE: &str = "/tmp";
const NEW_ROOT: &str = "/newroot";
const OLD_ROOT: &str = "/oldroot";
/// In init's set-up root: where each lower layer is attached before its overlay is mounted.
const LOWERS: &str = "/lowers";
/// In init's set-up root: the empty second layer of every read-only overlay (overlayfs
/// without an upper directory needs two lower layers).
const EMPTY_LAYER: &str = "/empty";

/// Device nodes bind-mounted (read-only: writable as devices, but no chmod or chown reaches
/// the host's inode) from the host into the child's `/dev`.
pub(crate) const DEVICES: [&str; 5] = ["null", "zero", "full", "random", "urandom"];

/// Filesystem types never shown below a read-only directory grant: the kernel's interfaces
/// (the sandbox has its own `/proc` and `/dev`, and no `/sys`).
const PSEUDO_FILESYSTEMS: [&str; 22] = [
    "proc",
    "sysfs",
    "cgroup",
    "cgroup2",
    "devpts",
    "devtmpfs",
    "mqueue",
    "debugfs",
    "tracefs",
    "securityfs",
    "pstore",
    "bpf",
    "configfs",
    "fusectl",
    "hugetlbfs",
    "binfmt_misc",
    "autofs",
    "efivarfs",
    "selinuxfs",
    "rpc_pipefs",
    "nsfs",
    "nfsd",
];

/// One step of building the new root.
#[derive(Debug, Clone)]
enum Entry {
    /// A bind of the host path at the same path: a read-write grant, or a read-only grant of
    /// a file (idmapped when `idmapped` names a prepared mount).
    Bind {
        path: PathBuf,
        ro: bool,
        idmapped: Option<usize>,
    },
    /// A read-only directory: a read-only overlayfs over the host directory `source`, lower
    /// layer number `lower`, at `path` inside. With `at_descriptor` the mount point is found
    /// as a grant at another path's is (never through a symlink).
    ReadOnlyDir {
        path: PathBuf,
        source: PathBuf,
        lower: usize,
        at_descriptor: bool,
    },
    Symlink {
        path: PathBuf,
        target: PathBuf,
    },
    Tmpfs {
        path: PathBuf,
        size_mb: u64,
    },
    Proc,
    Dev,
    /// A copy-on-write overlay; its lower layer is number `lower`.
    Overlay {
        spec: OverlaySpec,
        lower: usize,
    },
    /// A grant at another path of a file, or a read-write one (a read-only directory at
    /// another path is a [`Entry::ReadOnlyDir`]).
    BindAt {
        spec: BindAtSpec,
        idmapped: Option<usize>,
    },
}

impl Entry {
    fn path(&self) -> &Path {
        match self {
            Entry::Bind { path, .. }
            | Entry::ReadOnlyDir { path, .. }
            | Entry::Symlink { path, .. }
            | Entry::Tmpfs { path, .. } => path,
            Entry::Proc => Path::new("/proc"),
            Entry::Dev => Path::new("/dev"),
            Entry::Overlay { spec, .. } => &spec.mountpoint,
            Entry::BindAt { spec, .. } => &spec.target,
        }
    }
}

/// A host path whose mount the helper may prepare as a detached idmapped copy.
#[derive(Debug, Clone)]
struct Lower {
    /// The host path.
    source: PathBuf,
    /// For an overlay's lower directory: without the idmapped copy, a root caller's command
    /// could not write the view, so the run is refused.
    required: bool,
    /// A FIFO granted read-only: shown with only the command's own id mapped, so that no
    /// mode lets it write the host's FIFO (landlock's rule for a writable directory it lies
    /// in, such as the private `/tmp`, would).
    fifo: bool,
}

/// How init builds the new root: the entries, parents before children, and the layers the
/// helper prepared.
#[derive(Debug)]
pub(crate) struct MountPlan {
    entries: Vec<Entry>,
    lowers: Vec<Lower>,
    /// One slot per lower: the detached idmapped mount the helper made (root callers only).
    idmapped: Vec<Option<OwnedFd>>,
    /// The entries that show a mount below a read-only directory grant: left out when their
    /// mount point is not in the view (the host's mount table and the view can disagree, and
    /// a read-only view can create nothing).
    below_grants: Vec<PathBuf>,
}

fn depth(path: &Path) -> usize {
    path.components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .count()
}

/// Where `path` (absolute, as the child sees it) lives under `root`.
pub(crate) fn under(root: &str, path: &Path) -> PathBuf {
    let mut out = PathBuf::from(root);
    for c in path.components() {
        if let Component::Normal(part) = c {
            out.push(part);
        }
    }
    out
}

/// The mount plan of `spec`, made in the host's mount namespace, where `mountinfo` is the
/// text of `/proc/self/mountinfo`. For a root caller (`host` not the caller) the lower
/// layers are prepared as idmapped mounts; without one, a read-only grant is shown as it is
/// on the host (its files read by their mode's "other" bits), and an overlay is refused.
pub(crate) fn plan(
    spec: &Spec,
    host: &HostIdentity,
    mountinfo: &str,
) -> Result<MountPlan, Failure> {
    let (entries, lowers, below_grants) = plan_entries(spec, mountinfo);
    let mut idmapped: Vec<Option<OwnedFd>> = lowers.iter().map(|_| None).collect();
    if !host.is_caller() && !lowers.is_empty() {
        let userns_failed = |e: std::io::Error| {
            Failure::missing(
                Layer::UnprivilegedUid,
                "create the user namespace of the idmapped mounts",
                e.to_string(),
            )
        };
        let userns = caller_to_sandbox_userns(sys::ids(), host).map_err(userns_failed)?;
        let sandbox_only = if lowers.iter().any(|l| l.fifo) {
            let (uid, gid) = (host.uid, host.gid);
            Some(
                idmap_userns(&format!("{uid} {uid} 1\n"), &format!("{gid} {gid} 1\n"))
                    .map_err(userns_failed)?,
            )
        } else {
            None
        };
        for (slot, lower) in idmapped.iter_mut().zip(&lowers) {
            let userns = match (&sandbox_only, lower.fifo) {
                (Some(only), true) => only,
                _ => &userns,
            };
            match idmapped_with(&lower.source, userns) {
                Ok(fd) => *slot = Some(fd),
                Err(e) if lower.required => {
                    return Err(Failure::missing(
                        Layer::Overlay,
                        format!(
                            "idmap the overlay's lower directory {}",
                            lower.source.display()
                        ),
                        format!(
                            "{e}: as root, the sandbox's command runs as host uid {} and writes \
                             the overlay only through an idmapped mount of its lower \
                             directory, which this filesystem does not support; put the \
                             directory on one that does (ext4, xfs, btrfs, tmpfs)",
                            host.uid
                        ),
                    ));
                }
                Err(_) => {}
            }
        }
    }
    Ok(MountPlan {
        entries,
        lowers,
        idmapped,
        below_grants,
    })
}

/// The user namespace of the idmapped mounts: the caller's ids (`caller`, uid and gid) become
/// `host`'s, every other id stays itself (but `host`'s own, left unmapped).
fn caller_to_sandbox_userns(caller: (u32, u32), host: &HostIdentity) -> std::io::Result<OwnedFd> {
    idmap_userns(
        &crate::identity::caller_to_sandbox_map(caller.0, host.uid),
        &crate::identity::caller_to_sandbox_map(caller.1, host.gid),
    )
}

/// A detached, read-only, idmapped copy of the one mount at `path` (no mount below it).
fn idmapped_with(path: &Path, userns: &OwnedFd) -> std::io::Result<OwnedFd> {
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

/// The entries of the plan, parents before children so a later mount never hides an earlier
/// one, the lower layers they name, and the inside paths of the entries that show a mount
/// below a read-only directory grant.
fn plan_entries(spec: &Spec, mountinfo: &str) -> (Vec<Entry>, Vec<Lower>, Vec<PathBuf>) {
    let mut entries = Vec::new();
    let mut lowers = Vec::new();
    let mut lower = |source: &Path, required: bool| {
        use std::os::unix::fs::FileTypeExt;
        lowers.push(Lower {
            source: source.to_path_buf(),
            required,
            fifo: fs::symlink_metadata(source).is_ok_and(|m| m.file_type().is_fifo()),
        });
        lowers.len() - 1
    };
    // Read-only directories (inside path, host path, at a descriptor), whose submounts follow.
    let mut ro_dirs: Vec<(PathBuf, PathBuf, bool)> = Vec::new();
    for path in &spec.ro {
        match kind_on_host(path) {
            Kind::Symlink(target) => entries.push(Entry::Symlink {
                path: path.clone(),
                target,
            }),
            Kind::Dir => {
                entries.push(Entry::ReadOnlyDir {
                    path: path.clone(),
                    source: path.clone(),
                    lower: lower(path, false),
                    at_descriptor: false,
                });
                ro_dirs.push((path.clone(), path.clone(), false));
            }
            Kind::Other => entries.push(Entry::Bind {
                path: path.clone(),
                ro: true,
                idmapped: Some(lower(path, false)),
            }),
        }
    }
    for path in &spec.rw {
        entries.push(match kind_on_host(path) {
            Kind::Symlink(target) => Entry::Symlink {
                path: path.clone(),
                target,
            },
            _ => Entry::Bind {
                path: path.clone(),
                ro: false,
                idmapped: None,
            },
        });
    }
    for overlay in &spec.overlays {
        entries.push(Entry::Overlay {
            spec: overlay.clone(),
            lower: lower(&overlay.lower, true),
        });
    }
    for bind in &spec.binds_at {
        if !bind.writable && bind.source.is_dir() {
            entries.push(Entry::ReadOnlyDir {
                path: bind.target.clone(),
                source: bind.source.clone(),
                lower: lower(&bind.source, false),
                at_descriptor: true,
            });
            ro_dirs.push((bind.target.clone(), bind.source.clone(), true));
        } else {
            let idmapped = (!bind.writable).then(|| lower(&bind.source, false));
            entries.push(Entry::BindAt {
                spec: bind.clone(),
                idmapped,
            });
        }
    }
    entries.push(Entry::Proc);
    entries.push(Entry::Dev);
    if !entries.iter().any(|e| e.path() == Path::new("/tmp")) {
        entries.push(Entry::Tmpfs {
            path: PathBuf::from("/tmp"),
            size_mb: spec.limits.tmp_size_mb,
        });
    }
    // The mounts below a read-only directory, shown read-only as it is, unless something
    // the plan mounts itself lies between (a grant inside it, the sandbox's /proc, /dev and
    // /tmp): what the host mounted there stays hidden under that.
    let explicit: Vec<PathBuf> = entries.iter().map(|e| e.path().to_path_buf()).collect();
    let mut seen: Vec<PathBuf> = Vec::new();
    let mut left_out: Vec<PathBuf> = Vec::new();
    for (inside, source, at_descriptor) in &ro_dirs {
        for (mountpoint, fstype) in submounts(mountinfo, source) {
            let rest = mountpoint.strip_prefix(source).unwrap_or(Path::new(""));
            let target = inside.join(rest);
            let hidden = explicit
                .iter()
                .any(|e| e.starts_with(inside) && e != inside && target.starts_with(e));
            if hidden || seen.contains(&target) {
                continue;
            }
            // Nor anything mounted below a filesystem left out: its mount point is not there.
            if PSEUDO_FILESYSTEMS.contains(&fstype.as_str())
                || left_out.iter().any(|l| target.starts_with(l))
            {
                left_out.push(target);
                continue;
            }
            let Ok(meta) = fs::symlink_metadata(&mountpoint) else {
                continue; // hidden on the host too, under a later mount
            };
            seen.push(target.clone());
            if meta.is_dir() {
                entries.push(Entry::ReadOnlyDir {
                    path: target,
                    source: mountpoint.clone(),
                    lower: lower(&mountpoint, false),
                    at_descriptor: *at_descriptor,
                });
            } else if *at_descriptor {
                entries.push(Entry::BindAt {
                    spec: BindAtSpec {
                        source: mountpoint.clone(),
                        target,
                        writable: false,
                    },
                    idmapped: Some(lower(&mountpoint, false)),
                });
            } else {
                entries.push(Entry::Bind {
                    path: target,
                    ro: true,
                    idmapped: Some(lower(&mountpoint, false)),
                });
            }
        }
    }
    // Stable sort: equal depths keep their order (ro before rw before overlays before grants
    // at another path before the mounts below a grant), so a grant at another path is
    // mounted after the overlay or grant it lies in.
    entries.sort_by_key(|e| depth(e.path()));
    (entries, lowers, seen)
}

/// What a granted host path is.
enum Kind {
    Symlink(PathBuf),
    Dir,
    Other,
}

fn kind_on_host(path: &Path) -> Kind {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => match fs::read_link(path) {
            Ok(target) => Kind::Symlink(target),
            Err(_) => Kind::Other,
        },
        Ok(meta) if meta.is_dir() => Kind::Dir,
        _ => Kind::Other,
    }
}

/// The mount points strictly below `dir` in `mountinfo` (the text of
/// `/proc/self/mountinfo`), with their filesystem types, shallowest first.
fn submounts(mountinfo: &str, dir: &Path) -> Vec<(PathBuf, String)> {
    let mut found: Vec<(PathBuf, String)> = mountinfo
        .lines()
        .filter_map(|line| {
            let (before, after) = line.split_once(" - ")?;
            let mountpoint = PathBuf::from(unescape_mountinfo(before.split(' ').nth(4)?));
            let fstype = after.split(' ').next()?.to_string();
            (mountpoint.starts_with(dir) && mountpoint != dir).then_some((mountpoint, fstype))
        })
        .collect();
    found.sort_by_key(|(p, _)| depth(p));
    found
}

/// A path field of mountinfo, whose space, tab, newline and backslash are octal escapes.
fn unescape_mountinfo(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && bytes[i + 1..i + 4]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b))
        {
            let code = bytes[i + 1..i + 4]
                .iter()
                .fold(0u32, |acc, b| acc * 8 + u32::from(b - b'0'));
            out.push(code as u8);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A user namespace whose id maps are `uid_map` and `gid_map`, for idmapped mounts: a forked
/// child enters a new one, its maps are written from here, and the namespace outlives the
/// child through the returned descriptor.
fn idmap_userns(uid_map: &str, gid_map: &str) -> std::io::Result<OwnedFd> {
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

fn fail(stage: impl Into<String>, err: std::io::Error) -> Failure {
    // Stages name paths as init sees them while it builds the root; the caller knows them
    // without the new root's prefix.
    let stage: String = stage.into();
    let stage = stage.replace(&format!("{NEW_ROOT}/"), "/");
    let hint = if err.raw_os_error() == Some(libc::EROFS) {
        " (the path lies inside a read-only grant; grant a writable directory or pick a \
         mountpoint outside the --ro paths)"
    } else {
        ""
    };
    Failure::setup(format!("{stage}{hint}"), err)
}

/// Create a mount point for `src` at `dst`: a directory for a directory, an empty file otherwise.
fn make_mountpoint(src: &Path, dst: &Path) -> Result<(), Failure> {
    let is_dir = fs::metadata(src)
        .map_err(|e| fail(format!("stat {}", src.display()), e))?
        .is_dir();
    if is_dir {
        if !dst.is_dir() {
            fs::create_dir_all(dst).map_err(|e| fail(format!("mkdir {}", dst.display()), e))?;
        }
    } else {
        if let Some(parent) = dst.parent()
            && !parent.is_dir()
        {
            fs::create_dir_all(parent)
                .map_err(|e| fail(format!("mkdir {}", parent.display()), e))?;
        }
        if fs::symlink_metadata(dst).is_err() {
            fs::File::create(dst).map_err(|e| fail(format!("create {}", dst.display()), e))?;
        }
    }
    Ok(())
}

fn bind(src: &Path, dst: &Path, ro: bool, device: bool) -> Result<(), Failure> {
    make_mountpoint(src, dst)?;
    sys::mount(Some(src), dst, None, libc::MS_BIND | libc::MS_REC, None)
        .map_err(|e| fail(format!("bind {}", src.display()), e))?;
    let mut attrs = sys::MOUNT_ATTR_NOSUID;
    if !device {
        attrs |= sys::MOUNT_ATTR_NODEV;
    }
    if ro {
        attrs |= sys::MOUNT_ATTR_RDONLY;
    }
    sys::mount_setattr(dst, true, attrs)
        .map_err(|e| fail(format!("make {} read-only", dst.display()), e))
}

/// Open the mount point of `target` (a path inside) beneath the new root, creating what is
/// missing (directories, and for a file source an empty file), one component at a time and
/// never through a symlink.
fn open_mountpoint(target: &Path, is_dir: bool) -> Result<OwnedFd, Failure> {
    let refuse = |detail: String| Failure {
        feature: None,
        stage: format!("mount point {}", target.display()),
        detail,
    };
    let parts: Vec<&OsStr> = target
        .components()
        .filter_map(|c| match c {
            Component::Normal(part) => Some(part),
            _ => None,
        })
        .collect();
    let mut dir =
        sys::open_dir_path(Path::new(NEW_ROOT)).map_err(|e| fail("open the new root", e))?;
    let mut walked = PathBuf::from("/");
    for (i, part) in parts.iter().enumerate() {
        walked.push(part);
        let want_dir = is_dir || i + 1 < parts.len();
        let fd = match sys::open_path_nofollow_at(&dir, part) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                let made = if want_dir {
                    sys::mkdir_at(&dir, part, 0o755)
                } else {
                    sys::create_file_at(&dir, part, 0o644)
                };
                match made {
                    Ok(()) => {}
                    Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {}
                    Err(e) => return Err(fail(format!("create {}", walked.display()), e)),
                }
                sys::open_path_nofollow_at(&dir, part)
                    .map_err(|e| fail(format!("open {}", walked.display()), e))?
            }
            Err(e) => return Err(fail(format!("open {}", walked.display()), e)),
        };
        let kind = sys::fstat_mode(&fd)
            .map_err(|e| fail(format!("stat {}", walked.display()), e))?
            & libc::S_IFMT;
        if kind == libc::S_IFLNK {
            return Err(refuse(format!(
                "{} is a symlink inside the sandbox; a grant at another path is never mounted \
                 through one (name a path without symlinks)",
                walked.display()
            )));
        }
        if want_dir && kind != libc::S_IFDIR {
            return Err(refuse(format!(
                "{} is not a directory inside the sandbox",
                walked.display()
            )));
        }
        if !want_dir && kind == libc::S_IFDIR {
            return Err(refuse(format!(
                "{} is a directory inside the sandbox, but the host path mounted there is a \
                 file",
                walked.display()
            )));
        }
        dir = fd;
    }
    Ok(dir)
}

/// Mount the host path `b.source` at `b.target`: a recursive bind, read-only unless
/// `b.writable`, never setuid or device-bearing, attached to the mount point's descriptor.
/// `idmapped` is the helper's idmapped copy of it, used instead of a bind when there is one.
fn bind_at(b: &BindAtSpec, idmapped: Option<OwnedFd>) -> Result<(), Failure> {
    let what = format!("{} at {}", b.source.display(), b.target.display());
    let source = under(OLD_ROOT, &b.source);
    let is_dir = fs::metadata(&source)
        .map_err(|e| fail(format!("stat {}", b.source.display()), e))?
        .is_dir();
    let mountpoint = open_mountpoint(&b.target, is_dir)?;
    let tree = match idmapped {
        Some(tree) => tree,
        None => {
            let tree =
                sys::open_tree_clone(&source).map_err(|e| fail(format!("bind {what}"), e))?;
            let mut attrs = sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV;
            if !b.writable {
                attrs |= sys::MOUNT_ATTR_RDONLY;
            }
            sys::mount_setattr_fd(&tree, true, attrs)
                .map_err(|e| fail(format!("set the mount attributes of {what}"), e))?;
            tree
        }
    };
    sys::move_mount_onto(&tree, &mountpoint).map_err(|e| fail(format!("mount {what}"), e))
}

/// Attach lower layer `index` at `/lowers/<index>` of init's set-up root (the helper's
/// idmapped copy when there is one, else a bind of the host directory, without the mounts
/// below it) and return that path.
fn attach_lower(plan: &mut MountPlan, index: usize) -> std::io::Result<PathBuf> {
    let at = Path::new(LOWERS).join(index.to_string());
    fs::create_dir_all(&at)?;
    let source = plan.lowers[index].source.clone();
    match take_idmapped(plan, Some(index)) {
        Some(tree) => sys::move_mount_to_path(&tree, &at)?,
        None => sys::mount(
            Some(&under(OLD_ROOT, &source)),
            &at,
            None,
            libc::MS_BIND,
            None,
        )?,
    }
    Ok(at)
}

fn take_idmapped(plan: &mut MountPlan, index: Option<usize>) -> Option<OwnedFd> {
    plan.idmapped.get_mut(index?).and_then(Option::take)
}

/// Show the host directory of lower layer `lower` read-only at `path` (inside): a read-only
/// overlayfs over it, whose FIFOs and sockets are overlayfs' own, never the host's. Returns
/// false when, as a degraded run allows, it fell back to a plain read-only bind.
fn read_only_dir(
    plan: &mut MountPlan,
    entry: (&Path, &Path, usize, bool),
    spec: &Spec,
) -> Result<bool, Failure> {
    let (path, source, lower, at_descriptor) = entry;
    let attrs = sys::MOUNT_ATTR_RDONLY | sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV;
    let mounted = if spec.pretend_missing.contains(&Layer::GrantOverlay) {
        Err(std::io::Error::other(
            "treated as unavailable (AIRLOCK_SANDBOX_PRETEND_MISSING)",
        ))
    } else {
        attach_lower(plan, lower).and_then(|layer| {
            let lowerdir = format!("{}:{EMPTY_LAYER}", layer.display());
            sys::fs_mount("overlay", &[("lowerdir", &lowerdir)], attrs)
        })
    };
    let (tree, isolated) = match mounted {
        Ok(tree) => (tree, true),
        Err(_) if spec.allow_degraded => {
            // A plain read-only bind, the mounts below it included.
            let tree = sys::open_tree_clone(&under(OLD_ROOT, source))
                .map_err(|e| fail(format!("bind {}", source.display()), e))?;
            sys::mount_setattr_fd(&tree, true, attrs)
                .map_err(|e| fail(format!("make {} read-only", source.display()), e))?;
            (tree, false)
        }
        Err(e) => {
            let hint = if e.raw_os_error() == Some(libc::EINVAL) && spec.host.is_caller() {
                "; as a non-root caller the sandbox cannot put overlayfs over a directory with \
                 mounts below it (the kernel locks them in the sandbox's namespace): grant the \
                 directories needed below it instead"
            } else {
                ""
            };
            return Err(Failure::missing(
                Layer::GrantOverlay,
                format!("show {} read-only through overlayfs", path.display()),
                format!("{e}{hint}"),
            ));
        }
    };
    let what = format!("mount {} at {}", source.display(), path.display());
    if at_descriptor {
        let mountpoint = open_mountpoint(path, true)?;
        sys::move_mount_onto(&tree, &mountpoint).map_err(|e| fail(what, e))?;
    } else {
        let dst = under(NEW_ROOT, path);
        make_mountpoint(&under(OLD_ROOT, source), &dst)?;
        sys::move_mount_to_path(&tree, &dst).map_err(|e| fail(what, e))?;
    }
    Ok(isolated)
}

fn tmpfs(dst: &Path, size_mb: u64, mode: &str) -> Result<(), Failure> {
    if !dst.is_dir() {
        fs::create_dir_all(dst).map_err(|e| fail(format!("mkdir {}", dst.display()), e))?;
    }
    let data = format!("mode={mode},size={size_mb}m");
    sys::mount(
        Some(Path::new("tmpfs")),
        dst,
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some(&data),
    )
    .map_err(|e| fail(format!("mount tmpfs at {}", dst.display()), e))
}

fn dev(new_root: &Path) -> Result<(), Failure> {
    let dev = new_root.join("dev");
    tmpfs(&dev, 1, "0755")?;
    for name in DEVICES {
        bind(
            &Path::new(OLD_ROOT).join("dev").join(name),
            &dev.join(name),
            true,
            true,
        )?;
    }
    for (name, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        std::os::unix::fs::symlink(target, dev.join(name))
            .map_err(|e| fail(format!("symlink /dev/{name}"), e))?;
    }
    tmpfs(&dev.join("shm"), 64, "1777")?;
    sys::mount_setattr(&dev, false, sys::MOUNT_ATTR_RDONLY)
        .map_err(|e| fail("make /dev read-only", e))
}

/// Mount the overlay `o`; its lower layer is `lower` when the helper idmapped it (attached
/// in init's set-up root), else the host directory itself.
fn overlay(o: &OverlaySpec, lower: Option<&Path>, pretend_missing: bool) -> Result<(), Failure> {
    let dst = under(NEW_ROOT, &o.mountpoint);
    if !dst.is_dir() {
        fs::create_dir_all(&dst).map_err(|e| fail(format!("mkdir {}", dst.display()), e))?;
    }
    if pretend_missing {
        return Err(Failure::missing(
            Layer::Overlay,
            "overlay",
            "treated as unavailable (AIRLOCK_SANDBOX_PRETEND_MISSING)".into(),
        ));
    }
    // `volatile`: the upper layer is scratch space, so unmounting must not wait for it to be
    // synced to disk (a journal commit on the host's filesystem, tens of milliseconds).
    let data = format!(
        "lowerdir={},upperdir={},workdir={},userxattr,volatile",
        lower
            .map_or_else(|| under(OLD_ROOT, &o.lower), Path::to_path_buf)
            .display(),
        under(OLD_ROOT, &o.upper).display(),
        under(OLD_ROOT, &o.work).display(),
    );
    sys::mount(
        Some(Path::new("overlay")),
        &dst,
        Some("overlay"),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some(&data),
    )
    .map_err(|e| {
        Failure::missing(
            Layer::Overlay,
            format!("mount overlay at {}", o.mountpoint.display()),
            e.to_string(),
        )
    })
}

/// The files that name the sandbox's user and group, as the child sees them.
pub(crate) const IDENTITY_FILES: [&str; 3] = ["/etc/passwd", "/etc/group", "/etc/hosts"];
/// The sandbox's `/etc/passwd` and `/etc/group`: its user and group `airlock` (id
/// [`crate::target::SANDBOX_ID`], home `/tmp`, the default `HOME`), plus root and nobody, which
/// owners outside the sandbox's id map show as; and, when the command has a loopback of its
/// own with inet sockets, its `/etc/hosts`, which names loopback `localhost` (a test suite's
/// own server is reached by that name, and there is no resolver).
fn identity_texts(network: NetworkAccess) -> Vec<(&'static str, String)> {
    let id = crate::target::SANDBOX_ID;
    let mut texts = vec![
        (
            "passwd",
            format!(
                "root:x:0:0:root:/root:/usr/sbin/nologin\n\
                 airlock:x:{id}:{id}:airlock sandbox:/tmp:/bin/sh\n\
                 nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
            ),
        ),
        (
            "group",
            format!("root:x:0:\nairlock:x:{id}:\nnogroup:x:65534:\n"),
        ),
    ];
    if matches!(network, NetworkAccess::Loopback | NetworkAccess::Proxy) {
        texts.push((
            "hosts",
            "127.0.0.1\tlocalhost airlock\n::1\tlocalhost ip6-localhost ip6-loopback\n".into(),
        ));
    }
    texts
}

/// Name the sandbox's user and group for the programs that look them up (`id -un`, `whoami`,
/// Python's `getpass.getuser()`, `~` without `HOME`): a minimal `/etc/passwd` and `/etc/group`
/// written into the new root's own tmpfs, which becomes read-only with it. Only where no
/// granted path provides them, and never into a granted directory: `/etc` must be missing or a
/// directory of the root tmpfs itself.
fn identity_files(new_root: &Path, network: NetworkAccess) -> Result<(), Failure> {
    use std::io::Write as _;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let root_dev = fs::metadata(new_root)
        .map_err(|e| fail("stat the new root", e))?
        .dev();
    let etc = new_root.join("etc");
    match fs::symlink_metadata(&etc) {
        Ok(meta) if meta.is_dir() && meta.dev() == root_dev => {}
        Ok(_) => return Ok(()),
        Err(_) => fs::create_dir(&etc).map_err(|e| fail("mkdir /etc", e))?,
    }
    for (name, content) in identity_texts(network) {
        let path = etc.join(name);
        if fs::symlink_metadata(&path).is_ok() {
            continue;
        }
        fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&path)
            .and_then(|mut f| f.write_all(content.as_bytes()))
            .map_err(|e| fail(format!("write /etc/{name}"), e))?;
    }
    Ok(())
}

/// Build the new root from the spec and its plan, and `pivot_root` into it. Afterwards the
/// process sees only the granted paths, a fresh `/proc`, a minimal `/dev` and a private
/// `/tmp`. Returns the layers a degraded run went without.
pub(crate) fn build_root(spec: &Spec, mut plan: MountPlan) -> Result<Vec<Layer>, Failure> {
    let root = Path::new("/");
    sys::mount(None, root, None, libc::MS_REC | libc::MS_PRIVATE, None)
        .map_err(|e| fail("make / private", e))?;
    let base = Path::new(BASE);
    sys::mount(
        Some(Path::new("tmpfs")),
        base,
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some("mode=0755,size=1m"),
    )
    .map_err(|e| fail("mount the set-up tmpfs", e))?;
    std::env::set_current_dir(base).map_err(|e| fail("chdir to the set-up tmpfs", e))?;
    for dir in ["newroot", "oldroot", "lowers", "empty"] {
        fs::create_dir(dir).map_err(|e| fail(format!("mkdir {dir}"), e))?;
    }
    sys::pivot_root(Path::new("."), Path::new("oldroot")).map_err(|e| fail("pivot_root", e))?;
    std::env::set_current_dir(root).map_err(|e| fail("chdir /", e))?;
    let new_root = Path::new(NEW_ROOT);
    sys::mount(
        Some(Path::new("tmpfs")),
        new_root,
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some("mode=0755,size=1m"),
    )
    .map_err(|e| fail("mount the new root", e))?;

    let pretend_overlay = spec.pretend_missing.contains(&Layer::Overlay);
    let mut missing = Vec::new();
    let entries = std::mem::take(&mut plan.entries);
    for entry in &entries {
        if plan.below_grants.iter().any(|p| p == entry.path())
            && fs::symlink_metadata(under(NEW_ROOT, entry.path())).is_err()
        {
            continue;
        }
        match entry {
            Entry::Bind { path, ro, idmapped } => {
                let (src, dst) = (under(OLD_ROOT, path), under(NEW_ROOT, path));
                match take_idmapped(&mut plan, *idmapped) {
                    Some(tree) => {
                        make_mountpoint(&src, &dst)?;
                        sys::move_mount_to_path(&tree, &dst)
                            .map_err(|e| fail(format!("mount {}", path.display()), e))?;
                    }
                    None => bind(&src, &dst, *ro, false)?,
                }
            }
            Entry::ReadOnlyDir {
                path,
                source,
                lower,
                at_descriptor,
            } => {
                if !read_only_dir(&mut plan, (path, source, *lower, *at_descriptor), spec)?
                    && !missing.contains(&Layer::GrantOverlay)
                {
                    missing.push(Layer::GrantOverlay);
                }
            }
            Entry::Symlink { path, target } => {
                let dst = under(NEW_ROOT, path);
                if fs::symlink_metadata(&dst).is_err() {
                    if let Some(parent) = dst.parent() {
                        fs::create_dir_all(parent)
                            .map_err(|e| fail(format!("mkdir {}", parent.display()), e))?;
                    }
                    std::os::unix::fs::symlink(target, &dst)
                        .map_err(|e| fail(format!("symlink {}", path.display()), e))?;
                }
            }
            Entry::Tmpfs { path, size_mb } => tmpfs(&under(NEW_ROOT, path), *size_mb, "1777")?,
            Entry::Proc => {
                let dst = new_root.join("proc");
                fs::create_dir_all(&dst).map_err(|e| fail("mkdir /proc", e))?;
                sys::mount(
                    Some(Path::new("proc")),
                    &dst,
                    Some("proc"),
                    libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    None,
                )
                .map_err(|e| fail("mount /proc", e))?;
            }
            Entry::Dev => dev(new_root)?,
            Entry::Overlay { spec: o, lower } => {
                let lower = if plan.idmapped.get(*lower).is_some_and(Option::is_some) {
                    let source = o.lower.display();
                    Some(attach_lower(&mut plan, *lower).map_err(|e| {
                        fail(format!("attach the idmapped overlay lower {source}"), e)
                    })?)
                } else {
                    None
                };
                overlay(o, lower.as_deref(), pretend_overlay)?
            }
            Entry::BindAt { spec: b, idmapped } => {
                let tree = take_idmapped(&mut plan, *idmapped);
                bind_at(b, tree)?
            }
        }
    }
    identity_files(new_root, spec.network)?;
    // The root tmpfs itself (mount points only) becomes read-only.
    sys::mount_setattr(new_root, false, sys::MOUNT_ATTR_RDONLY)
        .map_err(|e| fail("make the new root read-only", e))?;
    std::env::set_current_dir(new_root).map_err(|e| fail("chdir to the new root", e))?;
    sys::pivot_root(Path::new("."), Path::new(".")).map_err(|e| fail("pivot_root", e))?;
    sys::umount_detach(Path::new(".")).map_err(|e| fail("detach the host root", e))?;
    std::env::set_current_dir(root).map_err(|e| fail("chdir /", e))?;
    Ok(missing)
}

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
mod tests {
    use super::*;
    use crate::spec::Limits;

    fn spec(ro: &[&str], rw: &[&str]) -> Spec {
        Spec {
            argv: vec!["true".into()],
            ro: ro.iter().map(PathBuf::from).collect(),
            rw: rw.iter().map(PathBuf::from).collect(),
            overlays: Vec::new(),
            binds_at: Vec::new(),
            network: crate::spec::NetworkAccess::None,
            env: Vec::new(),
            cwd: PathBuf::from("/"),
            limits: Limits {
                timeout_ms: 1000,
                memory_mb: 64,
                max_procs: 8,
                cpu_secs: 1,
                open_files: 64,
                file_size_mb: 1,
                tmp_size_mb: 1,
            },
            allow_degraded: false,
            pretend_missing: Vec::new(),
            services: Vec::new(),
            host: crate::identity::HostIdentity {
                uid: 1000,
                gid: 1000,
                source: crate::identity::IdentitySource::Caller,
            },
        }
    }

    #[test]
    fn parents_are_mounted_before_children() {
        let (entries, _, _) =
            plan_entries(&spec(&["/definitely/not/here/a/b", "/"], &["/tmp/x"]), "");
        let paths: Vec<_> = entries.iter().map(|e| e.path().to_path_buf()).collect();
        let pos = |p: &str| paths.iter().position(|x| x == Path::new(p)).unwrap();
        assert!(pos("/") < pos("/tmp"));
        assert!(pos("/tmp") < pos("/tmp/x"));
        assert!(pos("/tmp/x") < pos("/definitely/not/here/a/b"));
    }

    #[test]
    fn grants_at_another_path_come_after_the_overlays_and_grants_they_lie_in() {
        let mut s = spec(&["/cache/env1", "/x/wt/node_modules/.bin"], &["/x"]);
        s.overlays.push(OverlaySpec {
            lower: PathBuf::from("/work/wt"),
            mountpoint: PathBuf::from("/x/wt"),
            upper: PathBuf::from("/scratch/upper"),
            work: PathBuf::from("/scratch/work"),
        });
        for target in ["/x/wt/node_modules", "/x/wt/Cargo.lock"] {
            s.binds_at.push(BindAtSpec {
                source: PathBuf::from("/cache/env1").join(Path::new(target).file_name().unwrap()),
                target: PathBuf::from(target),
                writable: false,
            });
        }
        let (entries, _, _) = plan_entries(&s, "");
        let pos = |p: &str| {
            entries
                .iter()
                .position(|e| e.path() == Path::new(p))
                .unwrap()
        };
        assert!(pos("/x") < pos("/x/wt"));
        assert!(pos("/x/wt") < pos("/x/wt/node_modules"));
        assert!(pos("/x/wt") < pos("/x/wt/Cargo.lock"));
        assert!(pos("/x/wt/node_modules") < pos("/x/wt/node_modules/.bin"));
        assert!(matches!(
            entries[pos("/x/wt/node_modules")],
            Entry::BindAt {
                spec: BindAtSpec {
                    writable: false,
                    ..
                },
                ..
            }
        ));
        let roots = landlock_roots(&s, true);
        assert!(roots.contains(&(PathBuf::from("/x/wt/node_modules"), false)));
        // Without a mount namespace nothing is mounted there, so nothing is granted.
        let roots = landlock_roots(&s, false);
        assert!(
            !roots
                .iter()
                .any(|(p, _)| p == Path::new("/x/wt/node_modules"))
        );
    }

    #[test]
    fn granting_tmp_replaces_the_private_tmp() {
        let (entries, _, _) = plan_entries(&spec(&[], &["/tmp"]), "");
        let tmp: Vec<_> = entries
            .iter()
            .filter(|e| e.path() == Path::new("/tmp"))
            .collect();
        assert_eq!(tmp.len(), 1);
        assert!(matches!(tmp[0], Entry::Bind { ro: false, .. }));
    }

    #[test]
    fn read_only_directories_are_overlays_and_files_binds_with_their_lower_layers() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("dir");
        let file = d.path().join("file");
        let fifo = d.path().join("fifo");
        let rw = d.path().join("rw");
        for p in [&dir, &rw] {
            std::fs::create_dir(p).unwrap();
        }
        std::fs::write(&file, "").unwrap();
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        let text = |p: &Path| p.to_str().unwrap().to_string();
        let mut s = spec(&[&text(&dir), &text(&file), &text(&fifo)], &[&text(&rw)]);
        s.overlays.push(OverlaySpec {
            lower: dir.clone(),
            mountpoint: PathBuf::from("/work/tree"),
            upper: d.path().join("upper"),
            work: d.path().join("work"),
        });
        let (entries, lowers, _) = plan_entries(&s, "");
        let find = |p: &Path| entries.iter().find(|e| e.path() == p).unwrap();
        let Entry::ReadOnlyDir { lower, source, .. } = find(&dir) else {
            panic!("{:?}", find(&dir))
        };
        assert_eq!(source, &dir);
        assert_eq!(lowers[*lower].source, dir);
        assert!(!lowers[*lower].required && !lowers[*lower].fifo);
        let Entry::Bind {
            ro: true,
            idmapped: Some(file_lower),
            ..
        } = find(&file)
        else {
            panic!("{:?}", find(&file))
        };
        assert!(!lowers[*file_lower].fifo);
        let Entry::Bind {
            idmapped: Some(fifo_lower),
            ..
        } = find(&fifo)
        else {
            panic!("{:?}", find(&fifo))
        };
        assert!(
            lowers[*fifo_lower].fifo,
            "a FIFO is shown with only the command's id"
        );
        assert!(matches!(
            find(&rw),
            Entry::Bind {
                ro: false,
                idmapped: None,
                ..
            }
        ));
        let Entry::Overlay { lower, .. } = find(Path::new("/work/tree")) else {
            panic!()
        };
        assert!(
            lowers[*lower].required,
            "an overlay needs its idmapped lower"
        );
    }

    #[test]
    fn the_mounts_below_a_read_only_directory_follow_it_unless_hidden() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("g");
        for sub in [
            "data",
            "data/deeper",
            "proc",
            "granted",
            "granted/inner",
            "with space",
        ] {
            std::fs::create_dir_all(root.join(sub)).unwrap();
        }
        std::fs::write(root.join("hosts"), "").unwrap();
        let g = root.to_str().unwrap();
        let line = |id: u32, point: &str, fstype: &str| {
            format!("{id} 1 0:1 / {point} rw,relatime shared:1 - {fstype} none rw\n")
        };
        let mountinfo = [
            line(20, "/", "ext4"),
            line(21, g, "ext4"),
            line(22, &format!("{g}/data"), "tmpfs"),
            line(23, &format!("{g}/data/deeper"), "xfs"),
            line(24, &format!("{g}/proc"), "proc"),
            line(25, &format!("{g}/hosts"), "ext4"),
            line(26, &format!("{g}/granted/inner"), "tmpfs"),
            line(27, &format!("{g}/with\\040space"), "tmpfs"),
            line(28, &format!("{g}/gone"), "tmpfs"),
            line(29, &format!("{g}x/sibling"), "tmpfs"),
            // Below a left-out filesystem (as cgroup v1's tmpfs lies below /sys): left out.
            line(30, &format!("{g}/proc/sub"), "tmpfs"),
        ]
        .concat();
        let granted = format!("{g}/granted");
        let (entries, lowers, below) = plan_entries(&spec(&[g], &[&granted]), &mountinfo);
        let shown: Vec<String> = entries
            .iter()
            .map(|e| e.path().to_str().unwrap().to_string())
            .filter(|p| p.starts_with(g))
            .collect();
        assert_eq!(
            shown,
            vec![
                g.to_string(),
                format!("{g}/granted"),
                format!("{g}/data"),
                format!("{g}/hosts"),
                format!("{g}/with space"),
                format!("{g}/data/deeper"),
            ]
        );
        assert!(matches!(
            entries.iter().find(|e| e.path() == root.join("hosts")),
            Some(Entry::Bind { ro: true, .. })
        ));
        assert!(lowers.iter().any(|l| l.source == root.join("data/deeper")));
        // The mounts below the grant, and only those, may be left out at set-up.
        assert_eq!(below.len(), 4, "{below:?}");
        assert!(!below.contains(&root));
    }

    #[test]
    fn mountinfo_paths_are_unescaped() {
        assert_eq!(unescape_mountinfo(r"/a\040b\011c\134d"), "/a b\tc\\d");
        assert_eq!(unescape_mountinfo(r"/trailing\04"), r"/trailing\04");
        assert_eq!(unescape_mountinfo("/plain"), "/plain");
    }

    #[test]
    fn under_strips_the_leading_slash_and_dots() {
        assert_eq!(
            under("/oldroot", Path::new("/a/b")),
            PathBuf::from("/oldroot/a/b")
        );
        assert_eq!(under("/newroot", Path::new("/")), PathBuf::from("/newroot"));
    }
}
