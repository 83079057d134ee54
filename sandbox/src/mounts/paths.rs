//! The layout of init's set-up root (where the new root, the host's old root and the lower
//! layers are mounted while the new root is built), mapping a path inside to where it lives
//! there, and the set-up failure that names such a path as the caller knows it.

use crate::report::Failure;
use std::path::{Component, Path, PathBuf};

pub(super) const BASE: &str = "/tmp";
pub(super) const NEW_ROOT: &str = "/newroot";
pub(super) const OLD_ROOT: &str = "/oldroot";
/// In init's set-up root: where each lower layer is attached before its overlay is mounted.
pub(super) const LOWERS: &str = "/lowers";
/// In init's set-up root: the empty second layer of every read-only overlay (overlayfs
/// without an upper directory needs two lower layers).
pub(super) const EMPTY_LAYER: &str = "/empty";

pub(super) fn depth(path: &Path) -> usize {
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

pub(super) fn fail(stage: impl Into<String>, err: std::io::Error) -> Failure {
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
