//! The trajectory: one JSON line per message, tool call, tool result and loop event of a run,
//! in order. No clock values, so two runs of the same script compare equal line by line.

use serde_json::{Value, json};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Errors writing the trajectory (a run without its record is not allowed to continue).
#[derive(Debug, thiserror::Error)]
#[error("cannot write trajectory {path}: {source}")]
pub struct TrajectoryError {
    /// The file.
    pub path: PathBuf,
    /// The I/O error.
    pub source: std::io::Error,
}

/// An append-only JSONL trajectory file.
#[derive(Debug)]
pub struct Trajectory {
    path: PathBuf,
    file: std::io::BufWriter<std::fs::File>,
    seq: u64,
}

impl Trajectory {
    /// Create (truncate) the trajectory file.
    pub fn create(path: &Path) -> Result<Trajectory, TrajectoryError> {
        let err = |source| TrajectoryError {
            path: path.to_path_buf(),
            source,
        };
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(err)?;
        }
        let file = std::fs::File::create(path).map_err(err)?;
        Ok(Trajectory {
            path: path.to_path_buf(),
            file: std::io::BufWriter::new(file),
            seq: 0,
        })
    }

    /// Open an existing trajectory to go on appending (a resumed run): numbering continues
    /// after its last entry.
    pub fn append(path: &Path) -> Result<Trajectory, TrajectoryError> {
        let err = |source| TrajectoryError {
            path: path.to_path_buf(),
            source,
        };
        let existing = std::fs::read_to_string(path).map_err(err)?;
        let seq = existing.lines().filter(|l| !l.trim().is_empty()).count() as u64;
        let file = std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(err)?;
        Ok(Trajectory {
            path: path.to_path_buf(),
            file: std::io::BufWriter::new(file),
            seq,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Append one entry `{"seq": n, "kind": kind, ...data}` and flush it.
    pub fn record(&mut self, kind: &str, data: Value) -> Result<(), TrajectoryError> {
        self.seq += 1;
        let mut entry = json!({"seq": self.seq, "kind": kind});
        if let (Some(obj), Value::Object(extra)) = (entry.as_object_mut(), data) {
            for (k, v) in extra {
                obj.insert(k, v);
            }
        }
        let err = |source| TrajectoryError {
            path: self.path.clone(),
            source,
        };
        let line = entry.to_string();
        self.file.write_all(line.as_bytes()).map_err(err)?;
        self.file.write_all(b"\n").map_err(err)?;
        self.file.flush().map_err(err)
    }
}
