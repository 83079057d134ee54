//! Grants at another path (`ro_at`, `rw_at`) as [`super::SandboxBuilder::build`] checks
//! them: the inside path's shape, the host source resolved once, and where the mount point
//! lies, which inside a host grant must already exist on the host with the source's kind.

use super::grants::absolute_inside;
use crate::error::{Error, Result};
use crate::spec::BindAtSpec;
use std::path::{Path, PathBuf};

/// The inside path of a grant at another path: absolute, without `..`, not the root, `/proc`
/// or `/dev`.
pub(super) fn bind_at_target(target: &Path) -> Result<PathBuf> {
    let shape = |problem: &str| {
        Error::Config(format!(
            "grant at another path {}: the path inside {problem}; give an absolute path \
             such as /work/tree/node_modules",
            target.display()
        ))
    };
    if target.as_os_str().is_empty() {
        return Err(shape("is empty"));
    }
    if !target.is_absolute() {
        return Err(shape("is relative"));
    }
    if target
        .components()
        .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err(shape("contains `..`"));
    }
    let target: PathBuf = target.components().collect();
    let refuse = |reason: &str| Error::Path {
        path: target.clone(),
        reason: format!("cannot be the inside path of a grant at another path: {reason}"),
    };
    if target == Path::new("/") {
        return Err(refuse("the sandbox's root is its own"));
    }
    if ["/proc", "/dev"].iter().any(|f| target.starts_with(f)) {
        return Err(refuse("/proc and /dev are provided by the sandbox"));
    }
    Ok(target)
}

/// The host side of a grant at another path: an existing path, resolved (the bind follows
/// symlinks, so it is resolved once, here), never under `/proc` or `/dev`.
pub(super) fn bind_at_source(source: &Path) -> Result<PathBuf> {
    let canonical = absolute_inside(source)?
        .canonicalize()
        .map_err(|e| Error::Path {
            path: source.to_path_buf(),
            reason: e.to_string(),
        })?;
    for forbidden in ["/proc", "/dev"] {
        if canonical.starts_with(forbidden) {
            return Err(Error::Path {
                path: source.to_path_buf(),
                reason: format!("{forbidden} is provided by the sandbox and cannot be granted"),
            });
        }
    }
    Ok(canonical)
}

/// What holds the mount point of a grant at another path: the mount it lies in.
enum Holder<'a> {
    /// A filesystem of the sandbox's own (its root, its `/tmp`, an overlay): a missing mount
    /// point is created there when the run sets up.
    Sandbox,
    /// A host directory shown inside at `inside`: the mount point must exist on the host.
    Host {
        inside: &'a Path,
        host: &'a Path,
        what: &'static str,
    },
    /// A granted symlink, mirrored as a symlink: a mount point is never reached through one.
    Symlink(&'a Path),
}

/// Check where `binds[index]` is mounted: not where something else is mounted already, and,
/// inside a host grant (another grant at another path included, whatever order they were
/// given in), on a mount point that exists on the host (the sandbox never creates one there)
/// and has the source's kind.
pub(super) fn check_bind_at(
    index: usize,
    binds: &[BindAtSpec],
    ro: &[PathBuf],
    rw: &[PathBuf],
    overlays: &[(PathBuf, PathBuf, Option<PathBuf>)],
) -> Result<()> {
    let bind = &binds[index];
    let others = || {
        binds
            .iter()
            .enumerate()
            .filter(move |(i, _)| *i != index)
            .map(|(_, b)| b)
    };
    let target = &bind.target;
    let refuse = |reason: String| Error::Path {
        path: target.clone(),
        reason,
    };
    if ro.contains(target) || rw.contains(target) {
        return Err(refuse(
            "is also granted with ro or rw; a grant at another path needs a path of its own".into(),
        ));
    }
    if overlays.iter().any(|o| &o.1 == target) {
        return Err(refuse(
            "is an overlay's mount point; mount the grant inside the overlay instead".into(),
        ));
    }
    if others().any(|b| &b.target == target) {
        return Err(refuse(
            "another grant at another path already mounts there".into(),
        ));
    }
    let mut holders: Vec<(&Path, Holder<'_>)> = Vec::new();
    for (paths, what) in [(ro, "read-only grant"), (rw, "read-write grant")] {
        for g in paths {
            let holder = if g
                .symlink_metadata()
                .is_ok_and(|m| m.file_type().is_symlink())
            {
                Holder::Symlink(g)
            } else {
                Holder::Host {
                    inside: g,
                    host: g,
                    what,
                }
            };
            holders.push((g, holder));
        }
    }
    for o in overlays {
        holders.push((&o.1, Holder::Sandbox));
    }
    for b in others() {
        holders.push((
            &b.target,
            Holder::Host {
                inside: &b.target,
                host: &b.source,
                what: "grant at another path",
            },
        ));
    }
    let tmp = Path::new("/tmp");
    if !holders.iter().any(|(p, _)| *p == tmp) {
        // The private tmpfs.
        holders.push((tmp, Holder::Sandbox));
    }
    let deepest = holders
        .into_iter()
        .filter(|(p, _)| target.starts_with(p) && target != p)
        .max_by_key(|(p, _)| p.components().count())
        .map(|(_, h)| h);
    match deepest {
        None | Some(Holder::Sandbox) => Ok(()),
        Some(Holder::Symlink(link)) => Err(refuse(format!(
            "lies beneath {}, a symlink inside the sandbox; name the path through its target",
            link.display()
        ))),
        Some(Holder::Host { inside, host, what }) => {
            let rest = target.strip_prefix(inside).unwrap_or(target);
            let on_host = host.join(rest);
            let meta = on_host.symlink_metadata().map_err(|_| {
                refuse(format!(
                    "lies inside the {what} {}, so its mount point would have to be created \
                     on the host at {}; the sandbox creates mount points only in its own \
                     filesystems (its root, its /tmp, an overlay): create {} first, or mount \
                     the grant elsewhere",
                    inside.display(),
                    on_host.display(),
                    on_host.display()
                ))
            })?;
            if meta.file_type().is_symlink()
                || on_host.canonicalize().ok().as_deref() != Some(on_host.as_path())
            {
                return Err(refuse(format!(
                    "its mount point {} inside the {what} {} passes through a symlink; a grant \
                     at another path is never mounted through one",
                    on_host.display(),
                    inside.display()
                )));
            }
            let source_is_dir = bind.source.is_dir();
            if meta.is_dir() != source_is_dir {
                let kind = |dir: bool| if dir { "a directory" } else { "a file" };
                return Err(refuse(format!(
                    "its mount point {} is {}, but {} is {}",
                    on_host.display(),
                    kind(meta.is_dir()),
                    bind.source.display(),
                    kind(source_is_dir)
                )));
            }
            Ok(())
        }
    }
}
