//! Indexing a commit: listing its files, extracting the records of the blobs the store has not
//! seen (in parallel, each thread with its own repository handle), writing the commit's
//! manifest; and loading a commit's snapshot from its manifest and records, indexing it first
//! if needed.

use super::git::{git_err, open_repository, walk_tree};
use super::handle::Engine;
use super::snapshot::{SnapFile, Snapshot, build_snapshot, term_counts};
use crate::extract::Extractor;
use crate::files::{self, Language};
use crate::store::{
    BlobRecord, FORMAT_VERSION, Manifest, ManifestEntry, SkipReason, Store, blob_key,
};
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// What an index run did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexStats {
    /// The full commit id indexed.
    pub commit: String,
    /// Tracked regular files in the commit.
    pub files: usize,
    /// Files searchable (not skipped).
    pub indexed: usize,
    /// Files skipped as binary or huge.
    pub skipped: usize,
    /// Files with a structural channel (a supported language).
    pub structural: usize,
    /// Blobs extracted by this run.
    pub blobs_new: usize,
    /// Blobs whose stored record was reused.
    pub blobs_reused: usize,
    /// Wall time of the run in milliseconds (informational; not deterministic).
    pub elapsed_ms: u64,
}

/// Progress of extraction during [`Engine::index_with_progress`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexProgress {
    /// New blobs extracted so far.
    pub done: usize,
    /// New blobs to extract in this run.
    pub total: usize,
}

struct WorkItem {
    path: String,
    blob: git2::Oid,
    key: String,
    language: Option<Language>,
}

enum Extracted {
    Record(String, BlobRecord),
    Skip(String, SkipReason),
}

/// Build the record of one blob. Returns a skip reason for binary or huge content.
fn extract_blob(
    extractor: &mut Extractor,
    content: &[u8],
    language: Option<Language>,
) -> Result<std::result::Result<BlobRecord, SkipReason>> {
    if content.len() > files::MAX_FILE_BYTES {
        return Ok(Err(SkipReason::Huge));
    }
    if files::looks_binary(content) {
        return Ok(Err(SkipReason::Binary));
    }
    let text = String::from_utf8_lossy(content);
    let lines = text.lines().count() as u32;
    let lexical = term_counts(&text);
    let (structural, symbols) = match language {
        Some(lang) if content.len() <= files::MAX_PARSE_BYTES => {
            let symbols = extractor.extract(lang, &text)?;
            (term_counts(&symbols.structural_text()), Some(symbols))
        }
        _ => (Vec::new(), None),
    };
    Ok(Ok(BlobRecord {
        lines,
        bytes: content.len() as u64,
        lexical,
        structural,
        symbols,
    }))
}

impl Engine {
    /// Extract one blob again and store its record (the stored one was damaged or gone).
    fn reextract(&self, blob: &str, language: Option<Language>, key: &str) -> Result<BlobRecord> {
        let oid = git2::Oid::from_str(blob).map_err(git_err("parsing a blob id"))?;
        let found = self
            .repo
            .find_blob(oid)
            .map_err(git_err("reading a blob"))?;
        let mut extractor = Extractor::new()?;
        match extract_blob(&mut extractor, found.content(), language)? {
            Ok(record) => {
                self.store.save_record(key, &record)?;
                Ok(record)
            }
            Err(reason) => Err(Error::Git {
                action: format!(
                    "re-extracting blob {blob}: it is now {reason:?}, but the commit's \
                     manifest lists it as searchable; delete the index directory"
                ),
                source: git2::Error::from_str("inconsistent index"),
            }),
        }
    }

    /// Index a commit (see [`Engine::index_with_progress`]).
    pub fn index(&mut self, commit: &str) -> Result<IndexStats> {
        self.index_with_progress(commit, &mut |_| {})
    }

    /// Index a commit: list its files, extract every blob the store has not seen (in
    /// parallel), then write the commit's manifest. Re-running on an indexed commit, or moving
    /// to a nearby one, only pays for blobs never seen before.
    pub fn index_with_progress(
        &mut self,
        commit: &str,
        progress: &mut dyn FnMut(IndexProgress),
    ) -> Result<IndexStats> {
        let started = Instant::now();
        let sha = self.resolve(commit)?;
        // Concurrent builders of one index: one extracts, the others wait here and then find
        // every blob's record already written.
        let _build = self.store.lock_build()?;
        let tree = self
            .repo
            .find_commit(git2::Oid::from_str(&sha).map_err(git_err("parsing a commit id"))?)
            .and_then(|c| c.tree())
            .map_err(git_err("reading the commit's tree"))?;
        // (path, blob, whether the path is valid UTF-8)
        let mut entries: Vec<(String, git2::Oid, bool)> = Vec::new();
        walk_tree(&self.repo, &tree, "", true, &mut entries)
            .map_err(git_err("walking the commit's tree"))?;
        drop(tree);
        entries.sort();

        let mut manifest_files = Vec::with_capacity(entries.len());
        let mut work: Vec<WorkItem> = Vec::new();
        let mut queued: std::collections::HashSet<String> = std::collections::HashSet::new();
        let mut reused = 0usize;
        for (path, oid, utf8) in &entries {
            let blob = oid.to_string();
            let language = Language::from_path(path);
            let mut entry = ManifestEntry {
                path: path.clone(),
                blob: blob.clone(),
                language,
                skipped: None,
            };
            if !utf8 {
                // Listed, so the count of skipped files tells; not searchable, as no read could
                // name it.
                entry.skipped = Some(SkipReason::NonUtf8Path);
            } else if files::has_binary_extension(path) {
                entry.skipped = Some(SkipReason::Binary);
            } else {
                let key = blob_key(&blob, language);
                if self.records.contains_key(&key) || self.store.has_record(&key) {
                    reused += 1;
                } else if let Some(reason) = self.store.skip_reason(&blob) {
                    entry.skipped = Some(reason);
                    reused += 1;
                } else if queued.insert(key.clone()) {
                    work.push(WorkItem {
                        path: path.clone(),
                        blob: *oid,
                        key,
                        language,
                    });
                }
            }
            manifest_files.push(entry);
        }

        let total = work.len();
        if total > 0 {
            // Writing in this format from now on: the older formats' copies are dead weight.
            self.store.remove_older_formats();
        }
        let skipped_now = self.extract_all(work, progress)?;
        for entry in &mut manifest_files {
            if entry.skipped.is_none()
                && let Some(reason) = skipped_now.get(&entry.blob)
            {
                entry.skipped = Some(*reason);
            }
        }
        let manifest = Manifest {
            format: FORMAT_VERSION,
            commit: sha.clone(),
            files: manifest_files,
        };
        self.store.save_manifest(&manifest)?;
        let skipped = manifest
            .files
            .iter()
            .filter(|f| f.skipped.is_some())
            .count();
        let structural = manifest
            .files
            .iter()
            .filter(|f| f.skipped.is_none() && f.language.is_some())
            .count();
        Ok(IndexStats {
            commit: sha,
            files: manifest.files.len(),
            indexed: manifest.files.len() - skipped,
            skipped,
            structural,
            blobs_new: total,
            blobs_reused: reused,
            elapsed_ms: started.elapsed().as_millis() as u64,
        })
    }

    /// Extract `work` on all cores; store each record (or skip marker) as it completes.
    fn extract_all(
        &mut self,
        work: Vec<WorkItem>,
        progress: &mut dyn FnMut(IndexProgress),
    ) -> Result<HashMap<String, SkipReason>> {
        let total = work.len();
        let mut skipped = HashMap::new();
        if total == 0 {
            return Ok(skipped);
        }
        let threads = std::thread::available_parallelism()
            .map(usize::from)
            .unwrap_or(1)
            .clamp(1, 8)
            .min(total);
        let mut buckets: Vec<Vec<WorkItem>> = (0..threads).map(|_| Vec::new()).collect();
        for (i, item) in work.into_iter().enumerate() {
            buckets[i % threads].push(item);
        }
        let repo_path = self.repo_path.clone();
        let store = self.store.clone();
        let (tx, rx) = std::sync::mpsc::channel::<Result<Extracted>>();
        let mut done = 0usize;
        let mut first_error: Option<Error> = None;
        std::thread::scope(|scope| {
            for bucket in buckets {
                let tx = tx.clone();
                let repo_path = repo_path.clone();
                let store = store.clone();
                scope.spawn(move || {
                    let result = extract_bucket(&repo_path, &store, bucket, &tx);
                    if let Err(e) = result {
                        let _ = tx.send(Err(e));
                    }
                });
            }
            drop(tx);
            for message in rx {
                match message {
                    Ok(Extracted::Record(key, record)) => {
                        self.records.insert(key, Arc::new(record));
                        done += 1;
                        progress(IndexProgress { done, total });
                    }
                    Ok(Extracted::Skip(blob, reason)) => {
                        skipped.insert(blob, reason);
                        done += 1;
                        progress(IndexProgress { done, total });
                    }
                    Err(e) => {
                        if first_error.is_none() {
                            first_error = Some(e);
                        }
                    }
                }
            }
        });
        match first_error {
            Some(e) => Err(e),
            None => Ok(skipped),
        }
    }

    /// The snapshot of a commit, indexing it first if needed.
    pub(crate) fn snapshot(&mut self, commit: &str) -> Result<Arc<Snapshot>> {
        let sha = self.resolve(commit)?;
        if let Some(snap) = &self.snapshot
            && snap.commit == sha
        {
            return Ok(Arc::clone(snap));
        }
        let manifest = match self.store.load_manifest(&sha)? {
            Some(m) => m,
            None => {
                self.index(&sha)?;
                self.store
                    .load_manifest(&sha)?
                    .ok_or_else(|| Error::NotIndexed {
                        commit: sha.clone(),
                    })?
            }
        };
        let mut snap_files = Vec::new();
        for entry in manifest.files {
            if entry.skipped.is_some() {
                continue;
            }
            let key = blob_key(&entry.blob, entry.language);
            let record = match self.records.get(&key) {
                Some(r) => Arc::clone(r),
                None => {
                    let r = match self.store.load_record(&key) {
                        // A damaged or vanished record is rebuilt from its blob.
                        Err(e) if e.is_lost_record() => {
                            self.reextract(&entry.blob, entry.language, &key)?
                        }
                        r => r?,
                    };
                    let r = Arc::new(r);
                    self.records.insert(key, Arc::clone(&r));
                    r
                }
            };
            snap_files.push(SnapFile {
                is_test: files::is_test_path(&entry.path),
                is_vendored: files::is_vendored_path(&entry.path),
                is_docs: files::is_docs_path(&entry.path),
                path: entry.path,
                blob: entry.blob,
                language: entry.language,
                record,
            });
        }
        let snap = Arc::new(build_snapshot(&self.store, sha, snap_files)?);
        self.snapshot = Some(Arc::clone(&snap));
        Ok(snap)
    }
}

fn extract_bucket(
    repo_path: &Path,
    store: &Store,
    bucket: Vec<WorkItem>,
    tx: &std::sync::mpsc::Sender<Result<Extracted>>,
) -> Result<()> {
    let repo = open_repository(repo_path)?;
    let mut extractor = Extractor::new()?;
    for item in bucket {
        let blob = match repo.find_blob(item.blob) {
            Ok(blob) => blob,
            // Partial clones lack some blobs: such files are listed as missing, and not
            // remembered, so a later fetch makes them searchable.
            Err(e) if e.code() == git2::ErrorCode::NotFound => {
                let message = Extracted::Skip(item.blob.to_string(), SkipReason::Missing);
                if tx.send(Ok(message)).is_err() {
                    break;
                }
                continue;
            }
            Err(e) => {
                let action = format!("reading {} to index it", item.path);
                return Err(git_err(&action)(e));
            }
        };
        let message = match extract_blob(&mut extractor, blob.content(), item.language)? {
            Ok(record) => {
                store.save_record(&item.key, &record)?;
                Extracted::Record(item.key, record)
            }
            Err(reason) => {
                store.save_skip(&item.blob.to_string(), reason)?;
                Extracted::Skip(item.blob.to_string(), reason)
            }
        };
        if tx.send(Ok(message)).is_err() {
            break;
        }
    }
    Ok(())
}
