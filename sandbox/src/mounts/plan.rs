//! The mount plan, made by the helper in the host's mount namespace: the entries of the new
//! root, parents before children (the mounts below a read-only directory grant, read from the
//! host's mount table, included), the lower layers they name, and, for a root caller, the
//! detached idmapped copies of those layers.

use super::idmap::{caller_to_sandbox_userns, idmap_userns, idmapped_with};
use super::paths::depth;
use crate::identity::HostIdentity;
use crate::report::Failure;
use crate::spec::{BindAtSpec, OverlaySpec, Spec};
use crate::sys;
use crate::types::Layer;
use std::fs;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

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
pub(super) enum Entry {
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
    pub(super) fn path(&self) -> &Path {
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
pub(super) struct Lower {
    /// The host path.
    pub(super) source: PathBuf,
    /// For an overlay's lower directory: without the idmapped copy, a root caller's command
    /// could not write the view, so the run is refused.
    pub(super) required: bool,
    /// A FIFO granted read-only: shown with only the command's own id mapped, so that no
    /// mode lets it write the host's FIFO (landlock's rule for a writable directory it lies
    /// in, such as the private `/tmp`, would).
    pub(super) fifo: bool,
}

/// How init builds the new root: the entries, parents before children, and the layers the
/// helper prepared.
#[derive(Debug)]
pub(crate) struct MountPlan {
    pub(super) entries: Vec<Entry>,
    pub(super) lowers: Vec<Lower>,
    /// One slot per lower: the detached idmapped mount the helper made (root callers only).
    pub(super) idmapped: Vec<Option<OwnedFd>>,
    /// The entries that show a mount below a read-only directory grant: left out when their
    /// mount point is not in the view (the host's mount table and the view can disagree, and
    /// a read-only view can create nothing).
    pub(super) below_grants: Vec<PathBuf>,
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

/// The entries of the plan, parents before children so a later mount never hides an earlier
/// one, the lower layers they name, and the inside paths of the entries that show a mount
/// below a read-only directory grant.
pub(super) fn plan_entries(spec: &Spec, mountinfo: &str) -> (Vec<Entry>, Vec<Lower>, Vec<PathBuf>) {
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
pub(super) fn unescape_mountinfo(field: &str) -> String {
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
