//! The two trees a gate may read: a fresh temporary folder with `base/` and `patched/`, holding
//! only the changed files, written by the host as plain files (never links) from the bytes the
//! broker computed. Both are preopened read-only; nothing else of the host is.

use std::path::{Component, Path, PathBuf};

use crate::request::GateFile;

/// A materialised view, removed when dropped.
pub struct TreeView {
    dir: tempfile::TempDir,
}

impl TreeView {
    /// Write every file's two sides. A path that is absolute, climbs with `..` or is empty is
    /// refused: it could never name a file inside the view.
    pub fn materialize(files: &[GateFile]) -> Result<Self, String> {
        let dir = tempfile::Builder::new()
            .prefix("airlock-gate-view-")
            .tempdir()
            .map_err(|e| format!("creating the gate's view: {e}"))?;
        let view = TreeView { dir };
        for side in [view.base(), view.patched()] {
            std::fs::create_dir(&side).map_err(|e| format!("creating {}: {e}", side.display()))?;
        }
        for file in files {
            let rel = relative(&file.path)?;
            for (root, content) in [(view.base(), &file.base), (view.patched(), &file.patched)] {
                if let Some(content) = content {
                    write_file(&root.join(rel), content)?;
                }
            }
        }
        Ok(view)
    }

    /// The pinned side, preopened as `/base`.
    pub fn base(&self) -> PathBuf {
        self.dir.path().join("base")
    }

    /// The patched side, preopened as `/patched`.
    pub fn patched(&self) -> PathBuf {
        self.dir.path().join("patched")
    }
}

fn relative(path: &str) -> Result<&Path, String> {
    let rel = Path::new(path);
    let plain = !path.is_empty() && rel.components().all(|c| matches!(c, Component::Normal(_)));
    if plain {
        Ok(rel)
    } else {
        Err(format!(
            "changed path {path:?} is not a plain relative path"
        ))
    }
}

fn write_file(path: &Path, content: &[u8]) -> Result<(), String> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("creating {}: {e}", parent.display()))?;
    }
    std::fs::write(path, content).map_err(|e| format!("writing {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::FileStatus;

    #[test]
    fn each_side_holds_only_what_it_had() {
        let files = vec![
            GateFile {
                path: "src/a.rs".into(),
                status: FileStatus::Modified,
                base: Some(b"old".to_vec()),
                patched: Some(b"new".to_vec()),
            },
            GateFile {
                path: "b.txt".into(),
                status: FileStatus::Added,
                base: None,
                patched: Some(b"b".to_vec()),
            },
        ];
        let view = TreeView::materialize(&files).unwrap();
        assert_eq!(std::fs::read(view.base().join("src/a.rs")).unwrap(), b"old");
        assert_eq!(
            std::fs::read(view.patched().join("src/a.rs")).unwrap(),
            b"new"
        );
        assert!(!view.base().join("b.txt").exists());
        assert_eq!(std::fs::read(view.patched().join("b.txt")).unwrap(), b"b");
    }

    #[test]
    fn paths_leaving_the_view_are_refused() {
        for path in ["../x", "/etc/passwd", "", "a/../../x"] {
            let files = vec![GateFile {
                path: path.into(),
                status: FileStatus::Added,
                base: None,
                patched: Some(Vec::new()),
            }];
            let err = TreeView::materialize(&files).err().unwrap();
            assert!(err.contains("not a plain relative path"), "{path}: {err}");
        }
    }
}
