//! The webhook's work queue on disk ([`WorkQueue`]): what it accepted survives a restart and a
//! kill -9.

use std::path::{Path, PathBuf};

use super::{Result, TriggerError, WorkItem};

/// The webhook's work queue, kept on disk so that neither a restart nor a kill -9 loses a
/// delivery it accepted: one JSON file per work item, named `<arrival>-<delivery>.json` (so the
/// names sort in arrival order), written under a temporary name and renamed, so a reader never
/// sees half an item. A worker moves the file to `taken/` while it works on it and removes it
/// when done; at start, whatever a dead process left in `taken/` goes back to the queue.
#[derive(Debug, Clone)]
pub struct WorkQueue {
    dir: PathBuf,
}

impl WorkQueue {
    /// The queue in `dir` (created, with its `taken/`).
    pub fn open(dir: &Path) -> Result<WorkQueue> {
        let taken = dir.join("taken");
        std::fs::create_dir_all(&taken)
            .map_err(TriggerError::io(format!("creating {}", taken.display())))?;
        Ok(WorkQueue {
            dir: dir.to_path_buf(),
        })
    }

    /// Write `item` as `<arrival>-<name>.json`; returns its path.
    pub fn push(&self, name: &str, item: &WorkItem) -> Result<PathBuf> {
        let arrival = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let file = format!("{arrival:020}-{name}.json");
        let path = self.dir.join(&file);
        let tmp = self.dir.join(format!(".{file}.tmp"));
        let text = serde_json::to_string_pretty(item).map_err(|e| TriggerError::Io {
            context: "encoding a work item".to_owned(),
            source: std::io::Error::other(e),
        })?;
        std::fs::write(&tmp, text + "\n")
            .map_err(TriggerError::io(format!("writing {}", tmp.display())))?;
        std::fs::rename(&tmp, &path)
            .map_err(TriggerError::io(format!("moving {}", path.display())))?;
        Ok(path)
    }

    /// Put back what a dead process was working on, then every waiting item's path, oldest
    /// first.
    pub fn recover(&self) -> Result<Vec<PathBuf>> {
        for taken in json_files(&self.dir.join("taken"))? {
            if let Some(name) = taken.file_name() {
                std::fs::rename(&taken, self.dir.join(name))
                    .map_err(TriggerError::io(format!("requeueing {}", taken.display())))?;
            }
        }
        json_files(&self.dir)
    }

    /// Take the item at `path` (moved to `taken/`): the taken path and the item, or `None`
    /// when another thread took it first. A file that does not parse is set aside as
    /// `<name>.bad` with the reason in the error.
    pub fn take(&self, path: &Path) -> Result<Option<(PathBuf, WorkItem)>> {
        let Some(name) = path.file_name() else {
            return Ok(None);
        };
        let taken = self.dir.join("taken").join(name);
        if std::fs::rename(path, &taken).is_err() {
            return Ok(None);
        }
        let text = std::fs::read_to_string(&taken)
            .map_err(TriggerError::io(format!("reading {}", taken.display())))?;
        match serde_json::from_str(&text) {
            Ok(item) => Ok(Some((taken, item))),
            Err(e) => {
                let bad = taken.with_extension("bad");
                let _ = std::fs::rename(&taken, &bad);
                Err(TriggerError::Io {
                    context: format!("{} is not a work item (set aside)", bad.display()),
                    source: std::io::Error::other(e),
                })
            }
        }
    }

    /// Put a taken item back in the queue (to be tried again); its path there.
    pub fn put_back(&self, taken: &Path) -> Result<PathBuf> {
        let back = self.dir.join(taken.file_name().unwrap_or_default());
        std::fs::rename(taken, &back)
            .map_err(TriggerError::io(format!("requeueing {}", taken.display())))?;
        Ok(back)
    }

    /// The item at `taken` is done.
    pub fn done(&self, taken: &Path) -> Result<()> {
        std::fs::remove_file(taken)
            .map_err(TriggerError::io(format!("removing {}", taken.display())))
    }

    /// Every item waiting (not taken), by file name.
    pub fn items(&self) -> Result<Vec<(PathBuf, WorkItem)>> {
        let mut items = Vec::new();
        for path in json_files(&self.dir)? {
            let text = std::fs::read_to_string(&path)
                .map_err(TriggerError::io(format!("reading {}", path.display())))?;
            if let Ok(item) = serde_json::from_str(&text) {
                items.push((path, item));
            }
        }
        Ok(items)
    }
}

/// The `*.json` files directly in `dir`, sorted by name.
fn json_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let entries =
        std::fs::read_dir(dir).map_err(TriggerError::io(format!("listing {}", dir.display())))?;
    let mut out: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "json"))
        .collect();
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::triggers::IssueTrigger;

    #[test]
    fn the_queue_keeps_arrival_order_and_gives_back_what_a_dead_process_was_working_on() {
        let dir = tempfile::tempdir().unwrap();
        let queue = WorkQueue::open(dir.path()).unwrap();
        let item = |n: u64| WorkItem::Issue {
            repository: "acme/calc".to_owned(),
            number: n,
            trigger: IssueTrigger::Labelled,
            agent: None,
            delivery: Some(format!("d{n}")),
        };
        let first = queue.push("d1", &item(1)).unwrap();
        let second = queue.push("d2", &item(2)).unwrap();
        assert!(first < second, "names sort in arrival order");
        // A worker takes the first; a second take of the same path finds nothing.
        let (taken, got) = queue.take(&first).unwrap().unwrap();
        assert_eq!(got, item(1));
        assert!(queue.take(&first).unwrap().is_none());
        assert_eq!(queue.items().unwrap().len(), 1);
        // The process dies: a new one gets both back, oldest first.
        drop(queue);
        let queue = WorkQueue::open(dir.path()).unwrap();
        let waiting = queue.recover().unwrap();
        assert_eq!(waiting.len(), 2);
        assert_eq!(waiting[0].file_name(), taken.file_name());
        let (taken, _) = queue.take(&waiting[0]).unwrap().unwrap();
        queue.done(&taken).unwrap();
        assert_eq!(queue.recover().unwrap(), vec![second]);
        // A damaged file is set aside with the reason, not retried forever.
        let bad = dir.path().join("00000000000000000000-bad.json");
        std::fs::write(&bad, "{not json").unwrap();
        let err = queue.take(&bad).unwrap_err().to_string();
        assert!(err.contains("is not a work item"), "{err}");
        assert!(
            dir.path()
                .join("taken/00000000000000000000-bad.bad")
                .exists()
        );
    }
}
