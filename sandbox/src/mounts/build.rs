//! Building the new root in the sandbox's init, from the spec and the helper's plan: the
//! mount primitives (binds, read-only overlayfs views, tmpfs, `/dev`, copy-on-write overlays,
//! grants at another path attached to a mount point opened without following a symlink) and
//! [`build_root`], which mounts every entry and pivots into the result.

use super::etc_files::identity_files;
use super::paths::{BASE, EMPTY_LAYER, LOWERS, NEW_ROOT, OLD_ROOT, fail, under};
use super::plan::{Entry, MountPlan};
use crate::report::Failure;
use crate::spec::{BindAtSpec, OverlaySpec, Spec};
use crate::sys;
use crate::types::{DEVICES, Layer};
use std::ffi::OsStr;
use std::fs;
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};

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
