//! Builds the child's filesystem: a fresh tmpfs root holding only the granted paths.
//!
//! Runs in the sandbox's init process, inside the new user and mount namespaces, before the
//! target is forked. The host's root stays reachable under `/oldroot` only until the final
//! `pivot_root`, after which it is detached.
//!
//! Grants at another path (`ro_at`, `rw_at`) may lie inside an overlay or another grant, so
//! they are mounted after everything shallower. Their mount point is found (and, where
//! missing, created) one component at a time without following a symlink, and the bind is
//! attached to that descriptor: a symlink in an untrusted tree (say `node_modules -> /`)
//! can never redirect it. Whatever had to be created lands in the filesystem the path lies
//! in: the root tmpfs, the private `/tmp` or an overlay's upper directory; `build()` has
//! already refused a missing mount point inside a host grant, so nothing is created on the
//! host.

use crate::layers::Failure;
use crate::spec::{BindAtSpec, Layer, OverlaySpec, Spec};
use crate::sys;
use std::ffi::OsStr;
use std::fs;
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};

const BASE: &str = "/tmp";
const NEW_ROOT: &str = "/newroot";
const OLD_ROOT: &str = "/oldroot";

/// Device nodes bind-mounted from the host into the child's `/dev`.
pub(crate) const DEVICES: [&str; 5] = ["null", "zero", "full", "random", "urandom"];

/// One step of building the new root.
#[derive(Debug, Clone)]
enum Entry {
    Bind { path: PathBuf, ro: bool },
    Symlink { path: PathBuf, target: PathBuf },
    Tmpfs { path: PathBuf, size_mb: u64 },
    Proc,
    Dev,
    Overlay(OverlaySpec),
    BindAt(BindAtSpec),
}

impl Entry {
    fn path(&self) -> &Path {
        match self {
            Entry::Bind { path, .. } | Entry::Symlink { path, .. } | Entry::Tmpfs { path, .. } => {
                path
            }
            Entry::Proc => Path::new("/proc"),
            Entry::Dev => Path::new("/dev"),
            Entry::Overlay(o) => &o.mountpoint,
            Entry::BindAt(b) => &b.target,
        }
    }
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

/// The mount plan, parents before children so a later mount never hides an earlier one.
fn plan(spec: &Spec, host_root: &str) -> Vec<Entry> {
    let mut entries = Vec::new();
    for path in &spec.ro {
        entries.push(grant(host_root, path, true));
    }
    for path in &spec.rw {
        entries.push(grant(host_root, path, false));
    }
    for overlay in &spec.overlays {
        entries.push(Entry::Overlay(overlay.clone()));
    }
    for bind in &spec.binds_at {
        entries.push(Entry::BindAt(bind.clone()));
    }
    entries.push(Entry::Proc);
    entries.push(Entry::Dev);
    if !entries.iter().any(|e| e.path() == Path::new("/tmp")) {
        entries.push(Entry::Tmpfs {
            path: PathBuf::from("/tmp"),
            size_mb: spec.limits.tmp_size_mb,
        });
    }
    // Stable sort: equal depths keep their order (ro before rw before overlays before grants
    // at another path), so a grant at another path is mounted after the overlay or grant it
    // lies in.
    entries.sort_by_key(|e| depth(e.path()));
    entries
}

fn grant(host_root: &str, path: &Path, ro: bool) -> Entry {
    let on_host = under(host_root, path);
    match fs::symlink_metadata(&on_host) {
        Ok(meta) if meta.file_type().is_symlink() => match fs::read_link(&on_host) {
            Ok(target) => Entry::Symlink {
                path: path.to_path_buf(),
                target,
            },
            Err(_) => Entry::Bind {
                path: path.to_path_buf(),
                ro,
            },
        },
        _ => Entry::Bind {
            path: path.to_path_buf(),
            ro,
        },
    }
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
fn bind_at(b: &BindAtSpec) -> Result<(), Failure> {
    let what = format!("{} at {}", b.source.display(), b.target.display());
    let source = under(OLD_ROOT, &b.source);
    let is_dir = fs::metadata(&source)
        .map_err(|e| fail(format!("stat {}", b.source.display()), e))?
        .is_dir();
    let mountpoint = open_mountpoint(&b.target, is_dir)?;
    let tree = sys::open_tree_clone(&source).map_err(|e| fail(format!("bind {what}"), e))?;
    let mut attrs = sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV;
    if !b.writable {
        attrs |= sys::MOUNT_ATTR_RDONLY;
    }
    sys::mount_setattr_fd(&tree, true, attrs)
        .map_err(|e| fail(format!("set the mount attributes of {what}"), e))?;
    sys::move_mount_onto(&tree, &mountpoint).map_err(|e| fail(format!("mount {what}"), e))
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
            false,
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

fn overlay(o: &OverlaySpec, pretend_missing: bool) -> Result<(), Failure> {
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
        under(OLD_ROOT, &o.lower).display(),
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
pub(crate) const IDENTITY_FILES: [&str; 2] = ["/etc/passwd", "/etc/group"];
/// The sandbox's `/etc/passwd` and `/etc/group`: its user and group `airlock` (id
/// [`crate::target::SANDBOX_ID`], home `/tmp`, the default `HOME`), plus root and nobody, which
/// owners outside the sandbox's id map show as.
fn identity_texts() -> [(&'static str, String); 2] {
    let id = crate::target::SANDBOX_ID;
    [
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
    ]
}

/// Name the sandbox's user and group for the programs that look them up (`id -un`, `whoami`,
/// Python's `getpass.getuser()`, `~` without `HOME`): a minimal `/etc/passwd` and `/etc/group`
/// written into the new root's own tmpfs, which becomes read-only with it. Only where no
/// granted path provides them, and never into a granted directory: `/etc` must be missing or a
/// directory of the root tmpfs itself.
fn identity_files(new_root: &Path) -> Result<(), Failure> {
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
    for (name, content) in identity_texts() {
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

/// Build the new root from the spec and `pivot_root` into it. Afterwards the process sees only
/// the granted paths, a fresh `/proc`, a minimal `/dev` and a private `/tmp`.
pub(crate) fn build_root(spec: &Spec) -> Result<(), Failure> {
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
    for dir in ["newroot", "oldroot"] {
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
    for entry in plan(spec, OLD_ROOT) {
        match &entry {
            Entry::Bind { path, ro } => {
                bind(&under(OLD_ROOT, path), &under(NEW_ROOT, path), *ro, false)?
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
            Entry::Overlay(o) => overlay(o, pretend_overlay)?,
            Entry::BindAt(b) => bind_at(b)?,
        }
    }
    identity_files(new_root)?;
    // The root tmpfs itself (mount points only) becomes read-only.
    sys::mount_setattr(new_root, false, sys::MOUNT_ATTR_RDONLY)
        .map_err(|e| fail("make the new root read-only", e))?;
    std::env::set_current_dir(new_root).map_err(|e| fail("chdir to the new root", e))?;
    sys::pivot_root(Path::new("."), Path::new(".")).map_err(|e| fail("pivot_root", e))?;
    sys::umount_detach(Path::new(".")).map_err(|e| fail("detach the host root", e))?;
    std::env::set_current_dir(root).map_err(|e| fail("chdir /", e))?;
    Ok(())
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
        }
    }

    #[test]
    fn parents_are_mounted_before_children() {
        let entries = plan(&spec(&["/definitely/not/here/a/b", "/"], &["/tmp/x"]), "/");
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
        let entries = plan(&s, "/");
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
            Entry::BindAt(BindAtSpec {
                writable: false,
                ..
            })
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
        let entries = plan(&spec(&[], &["/tmp"]), "/");
        let tmp: Vec<_> = entries
            .iter()
            .filter(|e| e.path() == Path::new("/tmp"))
            .collect();
        assert_eq!(tmp.len(), 1);
        assert!(matches!(tmp[0], Entry::Bind { ro: false, .. }));
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
