//! The granted paths as [`super::SandboxBuilder::build`] checks and resolves them: a grant made
//! absolute and canonical (a symlink mirrored, its target granted too), never `/proc` or
//! `/dev`; an overlay's directories; and the refusals that keep a grant from reaching what it
//! should not (a path granted twice, a read-write grant a root caller's command could not
//! write, a read-only FIFO inside a place the command may write).

use crate::error::{Error, Result};
use crate::spec::BindAtSpec;
use std::path::{Path, PathBuf};

/// Resolve one granted path into `grants`. A symlink is granted as itself (mirrored) and its
/// target is granted too, with the same access, unless a grant already covers the target (as
/// `/usr` covers `/bin -> usr/bin`).
pub(super) fn grant(path: &Path, grants: &mut Vec<PathBuf>) -> Result<()> {
    let resolved = grant_path(path)?;
    let is_link = resolved
        .symlink_metadata()
        .is_ok_and(|m| m.file_type().is_symlink());
    if !grants.contains(&resolved) {
        grants.push(resolved.clone());
    }
    if is_link && let Ok(target) = resolved.canonicalize() {
        let covered = grants
            .iter()
            .any(|g| g != &resolved && target.starts_with(g));
        if !covered {
            // Checked like any grant (never /proc or /dev).
            let target = grant_path(&target)?;
            if !grants.contains(&target) {
                grants.push(target);
            }
        }
    }
    Ok(())
}

fn grant_path(path: &Path) -> Result<PathBuf> {
    let abs = absolute_inside(path)?;
    let meta = abs.symlink_metadata().map_err(|e| Error::Path {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    // A symlink is mirrored as a symlink (its target must be granted on its own); anything
    // else is resolved so that a bind never follows a link planted later.
    if meta.file_type().is_symlink() {
        return Ok(abs);
    }
    let canonical = abs.canonicalize().map_err(|e| Error::Path {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    for forbidden in ["/proc", "/dev"] {
        if canonical.starts_with(forbidden) {
            return Err(Error::Path {
                path: path.to_path_buf(),
                reason: format!("{forbidden} is provided by the sandbox and cannot be granted"),
            });
        }
    }
    Ok(canonical)
}

/// Refuse a read-write grant that a root caller's command could not write: it writes as its
/// own host identity, so the granted directory or file must belong to that identity.
pub(super) fn check_handed_over(path: &Path, host: &crate::identity::HostIdentity) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    if host.is_caller() {
        return Ok(());
    }
    let Ok(meta) = path.symlink_metadata() else {
        return Ok(()); // refused elsewhere
    };
    if meta.file_type().is_symlink() || meta.uid() == host.uid {
        return Ok(());
    }
    Err(Error::Path {
        path: path.to_path_buf(),
        reason: format!(
            "granted read-write, but owned by uid {}: as root, the sandbox's command runs as \
             host uid {} (gid {}) and writes only what that identity owns; hand it over first \
             (`chown {}:{} {}`, or HostIdentity::hand_over), or grant it read-only",
            meta.uid(),
            host.uid,
            host.gid,
            host.uid,
            host.gid,
            path.display()
        ),
    })
}

/// For a non-root caller: refuse a FIFO granted read-only (as a file) inside a place the
/// command may write. Landlock's rule for that place reaches every grant mounted beneath it,
/// the read-only mount does not stop a FIFO's writer, and the command, being the caller, may
/// own the FIFO, so nothing would keep it from writing. (A root caller's command sees such a
/// FIFO through an idmapped mount that maps no owner but its own, so it cannot.)
pub(super) fn check_read_only_fifos(
    ro: &[PathBuf],
    rw: &[PathBuf],
    overlays: &[(PathBuf, PathBuf, Option<PathBuf>)],
    binds_at: &[BindAtSpec],
) -> Result<()> {
    use std::os::unix::fs::FileTypeExt;
    let is_fifo = |p: &Path| p.symlink_metadata().is_ok_and(|m| m.file_type().is_fifo());
    let tmp = Path::new("/tmp");
    let mut writable: Vec<&Path> = rw
        .iter()
        .map(PathBuf::as_path)
        .filter(|p| p.is_dir())
        .collect();
    writable.extend(overlays.iter().map(|o| o.1.as_path()));
    writable.extend(
        binds_at
            .iter()
            .filter(|b| b.writable && b.source.is_dir())
            .map(|b| b.target.as_path()),
    );
    let tmp_granted = ro.iter().chain(rw).any(|p| p == tmp)
        || binds_at.iter().any(|b| b.target == tmp)
        || overlays.iter().any(|o| o.1 == tmp);
    if !tmp_granted {
        writable.push(tmp);
    }
    let fifos = ro.iter().filter(|p| is_fifo(p)).map(|p| p.as_path()).chain(
        binds_at
            .iter()
            .filter(|b| !b.writable && is_fifo(&b.source))
            .map(|b| b.target.as_path()),
    );
    for fifo in fifos {
        if let Some(place) = writable.iter().find(|w| fifo.starts_with(w) && fifo != **w) {
            let what = if *place == tmp && !tmp_granted {
                "the sandbox's private /tmp".to_string()
            } else {
                place.display().to_string()
            };
            return Err(Error::Path {
                path: fifo.to_path_buf(),
                reason: format!(
                    "a FIFO granted read-only inside {what}, which the command may write: \
                     landlock's rule there reaches every grant beneath it, so the command \
                     could write the FIFO; show it elsewhere (ro_at / --ro-at SRC:/run/NAME)"
                ),
            });
        }
    }
    Ok(())
}

/// Refuse a path granted both read-only and read-write.
pub(super) fn check_granted_once(ro: &[PathBuf], rw: &[PathBuf]) -> Result<()> {
    match ro.iter().find(|p| rw.contains(p)) {
        Some(both) => Err(Error::Path {
            path: both.clone(),
            reason: "granted both read-only and read-write; grant it once".into(),
        }),
        None => Ok(()),
    }
}

pub(super) fn existing_dir(path: &Path) -> Result<PathBuf> {
    let canonical = absolute_inside(path)?
        .canonicalize()
        .map_err(|e| Error::Path {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
    if !canonical.is_dir() {
        return Err(Error::Path {
            path: path.to_path_buf(),
            reason: "not a directory".into(),
        });
    }
    Ok(canonical)
}

pub(super) fn absolute_inside(path: &Path) -> Result<PathBuf> {
    if path.as_os_str().is_empty() {
        return Err(Error::Path {
            path: path.to_path_buf(),
            reason: "is empty; give a path".into(),
        });
    }
    if !path.is_absolute() {
        return match std::env::current_dir() {
            Ok(cwd) => absolute_inside(&cwd.join(path)),
            Err(e) => Err(Error::Path {
                path: path.to_path_buf(),
                reason: e.to_string(),
            }),
        };
    }
    if path
        .components()
        .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err(Error::Path {
            path: path.to_path_buf(),
            reason: "must not contain `..`".into(),
        });
    }
    Ok(path.to_path_buf())
}

pub(super) fn check_overlay_chars(path: &Path) -> Result<()> {
    let s = path.to_string_lossy();
    if s.contains(',') || s.contains(':') || s.contains('\\') {
        return Err(Error::Path {
            path: path.to_path_buf(),
            reason: "overlay paths may not contain `,`, `:` or `\\`".into(),
        });
    }
    Ok(())
}
