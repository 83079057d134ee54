//! The engine: indexing a commit (incrementally, by blob id), searching it through the
//! lexical, structural and symbol channels fused by RRF, and handing snapshots to the map.

use crate::extract::Extractor;
use crate::files::{self, Language};
use crate::fulltext::{Channel, EncodedDocs, FullText, TermCounts};
use crate::query::QueryAnalysis;
use crate::rank::{RRF_K, reciprocal_rank_fusion};
use crate::store::{
    BlobRecord, FORMAT_VERSION, Manifest, ManifestEntry, SkipReason, Store, blob_key,
};
use crate::tokenize::for_each_term;
use crate::window::{Block, Occurrence, TermMatcher};
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// How deep each channel's ranking goes into the fusion.
pub const FUSION_DEPTH: usize = 100;
/// Weight of each channel in the fusion: lexical, structural, symbol. The structural channel
/// outranks plain BM25 on issue-to-file retrieval (the reference A/B measured 0.78 against
/// 0.67 recall@10), and a file the issue names by path, module or defined symbol is the
/// strongest evidence there is. Chosen on the dev set among simple ratios; recall@1 was the
/// same for RRF constants 10 to 60, so the usual 60 is kept.
pub const CHANNEL_WEIGHTS: [f64; 3] = [0.5, 1.0, 2.0];
/// Fused-score multiplier for test files (indexed, but callers usually want source).
pub const TEST_FACTOR: f64 = 0.5;
/// Fused-score multiplier for vendored files.
pub const VENDORED_FACTOR: f64 = 0.5;
/// Fused-score multiplier for documentation, examples and benchmarks.
pub const DOCS_FACTOR: f64 = 0.6;
/// Path terms count this many times in a file's lexical document.
pub const PATH_TERM_BOOST: u32 = 2;
/// Lines in a hit's best-matching window.
pub const WINDOW_LINES: u32 = 30;
/// Extra window weight of a definition whose name the query gives as an identifier.
const NAMED_DEF_BONUS: f64 = 10.0;
/// The proximity stage re-ranks this many of the fused files by how many distinct query
/// terms (weighted by idf and query weight) their best window of [`PROXIMITY_LINES`] lines
/// holds, and adds that ranking to the fusion with [`PROXIMITY_WEIGHT`]. A file whose terms
/// meet in one function outranks one that spreads them over a thousand lines. Chosen on the
/// dev set and on 240 changelog-derived instances of three other repositories (see the
/// README): dev MRR 0.755 -> 0.763, held-out MRR 0.611 -> 0.658, recall unchanged or better.
pub const PROXIMITY_DEPTH: usize = 60;
/// Lines in a proximity window.
pub const PROXIMITY_LINES: u32 = 40;
/// Weight of the proximity ranking in the fusion (the channels weigh 0.5, 1 and 2).
pub const PROXIMITY_WEIGHT: f64 = 1.5;
/// Fewest files the proximity stage reads before a second thread shares the reading.
const PARALLEL_SCAN_MIN: usize = 8;

/// One search result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hit {
    /// Path relative to the repository root.
    pub path: String,
    /// Fused score (RRF, after the test/vendored/docs factors); higher is better.
    pub score: f64,
    /// 1-based rank in the lexical (BM25 over text and path) channel, if ranked there.
    pub lexical_rank: Option<u32>,
    /// 1-based rank in the structural (BM25 over signatures, docs, imports, calls) channel.
    pub structural_rank: Option<u32>,
    /// 1-based rank in the symbol channel (paths, modules and defined names the query names).
    pub symbol_rank: Option<u32>,
    /// 1-based rank in the proximity stage (the top fused files re-ranked by their densest
    /// window of query terms), if the file was among them and holds a query term.
    #[serde(default)]
    pub proximity_rank: Option<u32>,
    /// First line of the best-matching window, 1-based.
    pub line_start: u32,
    /// Last line of the best-matching window, 1-based, inclusive.
    pub line_end: u32,
    /// The definition the window starts in, dotted from the outermost (`Rule_L031._eval`),
    /// when the window starts inside one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbol: Option<String>,
    /// Language with a structural channel, if any.
    pub language: Option<Language>,
    /// The file is a test file.
    pub is_test: bool,
    /// The file is vendored or third-party.
    pub is_vendored: bool,
}

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

/// Each channel's ranking of a query, best first (paths), for evaluation and debugging.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChannelRankings {
    /// Lexical channel.
    pub lexical: Vec<String>,
    /// Structural channel.
    pub structural: Vec<String>,
    /// Symbol channel.
    pub symbol: Vec<String>,
    /// Proximity stage (only files among the first-stage fused top [`PROXIMITY_DEPTH`]).
    pub proximity: Vec<String>,
    /// Fused ranking (what [`Engine::search`] returns).
    pub fused: Vec<String>,
}

/// One searchable file of a snapshot.
#[derive(Debug)]
pub(crate) struct SnapFile {
    pub path: String,
    pub blob: String,
    pub language: Option<Language>,
    pub is_test: bool,
    pub is_vendored: bool,
    pub is_docs: bool,
    pub record: Arc<BlobRecord>,
}

/// Everything needed to answer queries on one commit, built from stored records.
#[derive(Debug)]
pub(crate) struct Snapshot {
    pub commit: String,
    pub files: Vec<SnapFile>,
    /// BM25 (tantivy) over the lexical and structural channels; document id = file index.
    pub fulltext: FullText,
    /// Defined name -> files defining it (sorted ids).
    pub defs_by_name: HashMap<String, Vec<u32>>,
    /// Lowercased file stem -> files with that stem.
    pub by_stem: HashMap<String, Vec<u32>>,
    /// Each file's path components, lowercased.
    pub components: Vec<Vec<String>>,
}

/// The retrieval engine over one git repository (bare or not) and one index directory.
pub struct Engine {
    repo: git2::Repository,
    /// A second handle on the repository, opened on the first query, for the thread that
    /// reads half of the proximity stage's blobs (a `git2::Repository` serves one thread at a
    /// time).
    second_repo: std::sync::Mutex<Option<git2::Repository>>,
    repo_path: PathBuf,
    store: Store,
    records: HashMap<String, Arc<BlobRecord>>,
    snapshot: Option<Arc<Snapshot>>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("repo_path", &self.repo_path)
            .field("store", &self.store.root())
            .finish_non_exhaustive()
    }
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

fn term_counts(text: &str) -> Vec<(String, u32)> {
    let mut counts: BTreeMap<String, u32> = BTreeMap::new();
    for_each_term(text, |t| {
        if let Some(c) = counts.get_mut(t) {
            *c += 1;
        } else {
            counts.insert(t.to_string(), 1);
        }
    });
    counts.into_iter().collect()
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

fn git_err(action: &str) -> impl FnOnce(git2::Error) -> Error + '_ {
    move |source| Error::Git {
        action: action.to_string(),
        source,
    }
}

impl Engine {
    /// Open the repository at `repo_path` (a bare repository, a `.git` directory or a work
    /// tree) with its index kept under `index_dir`.
    pub fn open(repo_path: &Path, index_dir: &Path) -> Result<Engine> {
        let repo = open_repository(repo_path)?;
        let store = Store::new(index_dir, repo.path());
        Ok(Engine::with_store(repo, store))
    }

    /// Open `repo_path` with its index stored under `key` instead of the repository's own
    /// path: a throwaway checkout of a project (a run's worktree) then shares the index of the
    /// project's mirror (`store::repo_key(mirror_path)`), which every run and reader on that
    /// project uses, so an index is built once and moved between commits by blob id.
    pub fn open_keyed(repo_path: &Path, index_dir: &Path, key: &str) -> Result<Engine> {
        if !crate::store::valid_key(key) {
            return Err(Error::InvalidIndexKey {
                key: key.to_string(),
            });
        }
        let repo = open_repository(repo_path)?;
        Ok(Engine::with_store(repo, Store::keyed(index_dir, key)))
    }

    fn with_store(repo: git2::Repository, store: Store) -> Engine {
        Engine {
            store,
            repo_path: repo.path().to_path_buf(),
            repo,
            second_repo: std::sync::Mutex::new(None),
            records: HashMap::new(),
            snapshot: None,
        }
    }

    /// Where this repository's index lives.
    pub fn store_dir(&self) -> &Path {
        self.store.root()
    }

    /// Resolve any revision (`HEAD`, a branch, a tag, a short or full id) to a full commit id.
    pub fn resolve(&self, reference: &str) -> Result<String> {
        let object = self
            .repo
            .revparse_single(reference)
            .and_then(|o| o.peel_to_commit())
            .map_err(|source| Error::Resolve {
                reference: reference.to_string(),
                repo: self.repo_path.clone(),
                reason: resolve_reason(&self.repo, &source),
            })?;
        Ok(object.id().to_string())
    }

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

    /// Make sure a commit is indexed and loaded, so the next queries on it are fast.
    pub fn prepare(&mut self, commit: &str) -> Result<()> {
        self.snapshot(commit).map(|_| ())
    }

    /// Search a commit with the fused channels; at most `k` hits, best first, ties by path.
    /// Indexes the commit first if it was never indexed.
    pub fn search(&mut self, commit: &str, query: &str, k: usize) -> Result<Vec<Hit>> {
        let snap = self.snapshot(commit)?;
        let analysis = QueryAnalysis::new(query);
        let matcher = term_matcher(&snap, &analysis);
        let (ranked, mut scanned) = self.rank_with_proximity(&snap, &analysis, &matcher)?;
        let mut hits = Vec::new();
        for &(doc, score) in ranked.fused.iter().take(k) {
            let file = &snap.files[doc as usize];
            let occurrences = scanned
                .remove(&doc)
                .or_else(|| scan_blob(&self.repo, file, &matcher));
            let ((line_start, line_end), symbol) =
                best_window(file, &analysis, &matcher, occurrences);
            let position = |list: &[u32]| list.iter().position(|&d| d == doc).map(|p| p as u32 + 1);
            hits.push(Hit {
                path: file.path.clone(),
                score,
                lexical_rank: position(&ranked.lexical),
                structural_rank: position(&ranked.structural),
                symbol_rank: position(&ranked.symbol),
                proximity_rank: position(&ranked.proximity),
                line_start,
                line_end,
                symbol,
                language: file.language,
                is_test: file.is_test,
                is_vendored: file.is_vendored,
            });
        }
        Ok(hits)
    }

    /// Every channel's ranking of a query (paths, at most `depth` each), for evaluation.
    pub fn channel_rankings(
        &mut self,
        commit: &str,
        query: &str,
        depth: usize,
    ) -> Result<ChannelRankings> {
        let snap = self.snapshot(commit)?;
        let analysis = QueryAnalysis::new(query);
        let matcher = term_matcher(&snap, &analysis);
        let (ranked, _) = self.rank_with_proximity(&snap, &analysis, &matcher)?;
        let paths = |list: &[u32]| -> Vec<String> {
            list.iter()
                .take(depth)
                .map(|&d| snap.files[d as usize].path.clone())
                .collect()
        };
        let fused: Vec<u32> = ranked.fused.iter().map(|&(d, _)| d).collect();
        Ok(ChannelRankings {
            lexical: paths(&ranked.lexical),
            structural: paths(&ranked.structural),
            symbol: paths(&ranked.symbol),
            proximity: paths(&ranked.proximity),
            fused: paths(&fused),
        })
    }

    /// Render the repository map of a commit within `token_budget` tokens (see
    /// [`crate::map`]), personalised by the identifiers and paths in `query`.
    pub fn repo_map(&mut self, commit: &str, query: &str, token_budget: usize) -> Result<String> {
        let snap = self.snapshot(commit)?;
        crate::map::render(&snap, &QueryAnalysis::new(query), token_budget)
    }

    /// The files [`Engine::repo_map`] shows for the same arguments, in its order.
    pub fn repo_map_files(
        &mut self,
        commit: &str,
        query: &str,
        token_budget: usize,
    ) -> Result<Vec<String>> {
        let snap = self.snapshot(commit)?;
        crate::map::files(&snap, &QueryAnalysis::new(query), token_budget)
    }

    /// The first-stage ranking ([`rank`]) with the proximity stage applied: the top
    /// [`PROXIMITY_DEPTH`] fused files are ranked by their densest window of query terms
    /// ([`TermMatcher::densest_window`]; files without a query term are left out) and that
    /// ranking joins the fusion with [`PROXIMITY_WEIGHT`] and the same test/vendored/docs
    /// factors. Also returns the occurrences found in each file scanned.
    fn rank_with_proximity(
        &self,
        snap: &Snapshot,
        analysis: &QueryAnalysis,
        matcher: &TermMatcher,
    ) -> Result<(Ranked, HashMap<u32, Vec<Occurrence>>)> {
        let mut ranked = rank(snap, analysis)?;
        let docs: Vec<u32> = ranked
            .fused
            .iter()
            .take(PROXIMITY_DEPTH)
            .map(|&(doc, _)| doc)
            .collect();
        let mut scanned = HashMap::new();
        let mut scored: Vec<(u32, f64)> = Vec::new();
        for (doc, occurrences) in self.scan_all(snap, &docs, matcher) {
            let Some(occurrences) = occurrences else {
                continue;
            };
            let density = matcher.densest_window(&occurrences, PROXIMITY_LINES);
            if density > 0.0 {
                scored.push((doc, density));
            }
            scanned.insert(doc, occurrences);
        }
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        ranked.proximity = scored.iter().map(|&(doc, _)| doc).collect();
        let extra: HashMap<u32, f64> =
            reciprocal_rank_fusion(&[(&ranked.proximity[..], PROXIMITY_WEIGHT)], RRF_K)
                .into_iter()
                .collect();
        for (doc, score) in &mut ranked.fused {
            if let Some(add) = extra.get(doc) {
                *score += add * file_factor(&snap.files[*doc as usize]);
            }
        }
        sort_fused(snap, &mut ranked.fused);
        Ok((ranked, scanned))
    }

    /// [`scan_blob`] of each of `docs`, in their order. Reading the blobs out of the pack
    /// (inflating and applying deltas) is most of a query's time, so two threads share the
    /// work: this one with the engine's repository handle, a second one with its own handle.
    fn scan_all(
        &self,
        snap: &Snapshot,
        docs: &[u32],
        matcher: &TermMatcher,
    ) -> Vec<(u32, Option<Vec<Occurrence>>)> {
        let scan_with = |repo: &git2::Repository, part: &[u32]| -> Vec<Option<Vec<Occurrence>>> {
            part.iter()
                .map(|&doc| scan_blob(repo, &snap.files[doc as usize], matcher))
                .collect()
        };
        let sequential = || {
            docs.iter()
                .copied()
                .zip(scan_with(&self.repo, docs))
                .collect()
        };
        if docs.len() < PARALLEL_SCAN_MIN {
            return sequential();
        }
        let mut second = match self.second_repo.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        if second.is_none() {
            *second = git2::Repository::open(&self.repo_path).ok();
        }
        let Some(other) = second.as_mut() else {
            return sequential();
        };
        // Alternate files between the threads, so that each gets a share of the large ones
        // (the best-ranked files tend to be the larger): this one reads the even places.
        let mine: Vec<u32> = docs.iter().step_by(2).copied().collect();
        let theirs: Vec<u32> = docs.iter().skip(1).step_by(2).copied().collect();
        let (mine_found, their_found) = std::thread::scope(|scope| {
            // Moved, not shared: a repository handle may go to another thread, one at a time.
            let part = &theirs;
            let helper = std::thread::Builder::new()
                .name("codegraph-read".into())
                .spawn_scoped(scope, move || scan_with(&*other, part));
            let mine_found = scan_with(&self.repo, &mine);
            // Without a thread (the system refused one), or after a panic in it (a bug), this
            // thread reads the other half too: the query still gets its answer.
            let their_found = match helper.map(|h| h.join()) {
                Ok(Ok(found)) => found,
                _ => scan_with(&self.repo, &theirs),
            };
            (mine_found, their_found)
        });
        let (mut mine_found, mut their_found) = (mine_found.into_iter(), their_found.into_iter());
        docs.iter()
            .enumerate()
            .map(|(i, &doc)| {
                let found = if i % 2 == 0 {
                    mine_found.next()
                } else {
                    their_found.next()
                };
                (doc, found.flatten())
            })
            .collect()
    }
}

pub(crate) fn open_repository(repo_path: &Path) -> Result<git2::Repository> {
    git2::Repository::open(repo_path).map_err(|source| Error::OpenRepo {
        path: repo_path.to_path_buf(),
        source,
    })
}

/// The query terms' occurrences in a file's blob read through `repo`; `None` if the blob is
/// not in the repository (a partial clone).
fn scan_blob(
    repo: &git2::Repository,
    file: &SnapFile,
    matcher: &TermMatcher,
) -> Option<Vec<Occurrence>> {
    let oid = git2::Oid::from_str(&file.blob).ok()?;
    let blob = repo.find_blob(oid).ok()?;
    Some(matcher.occurrences(blob.content()))
}

/// A hit's window of [`WINDOW_LINES`] lines ([`TermMatcher::best_window`]: aligned to the
/// function whose lines hold the most query terms; a line defining an identifier the query
/// names counts extra); the file's first lines when nothing matches or the blob is missing.
/// The dotted name of definition `index` of `defs` (its enclosing definitions first).
fn dotted_name(defs: &[crate::extract::Def], index: usize) -> String {
    let mut names = vec![defs[index].name.as_str()];
    let mut depth = defs[index].depth;
    for def in defs[..index].iter().rev() {
        if depth == 0 {
            break;
        }
        if def.depth < depth && def.end_line >= defs[index].line {
            names.push(&def.name);
            depth = def.depth;
        }
    }
    names.reverse();
    names.join(".")
}

/// A hit's window (see [`TermMatcher::best_window`]) and the definition it shows, dotted: the
/// function or method the window was aligned to, else the innermost definition holding the
/// whole window, else none.
fn best_window(
    file: &SnapFile,
    analysis: &QueryAnalysis,
    matcher: &TermMatcher,
    occurrences: Option<Vec<Occurrence>>,
) -> ((u32, u32), Option<String>) {
    let lines_total = file.record.lines.max(1);
    let fallback = (1, lines_total.min(WINDOW_LINES));
    let defs: &[crate::extract::Def] = file
        .record
        .symbols
        .as_ref()
        .map_or(&[], |s| s.defs.as_slice());
    let holding = |(first, last): (u32, u32)| -> Option<String> {
        let index = defs
            .iter()
            .enumerate()
            .filter(|(_, d)| d.line <= first && d.end_line >= last)
            .max_by_key(|(i, d)| (d.depth, *i))?
            .0;
        Some(dotted_name(defs, index))
    };
    let Some(occurrences) = occurrences else {
        return (fallback, holding(fallback));
    };
    let lines = file.record.lines as usize;
    let named = |name: &str| analysis.identifiers.iter().any(|(i, _)| i == name);
    let mut extra = vec![0.0; lines];
    let mut blocks = Vec::new();
    let mut block_defs = Vec::new();
    for (index, def) in defs.iter().enumerate() {
        let bonus = if named(&def.name) {
            NAMED_DEF_BONUS
        } else {
            0.0
        };
        if let Some(slot) = extra.get_mut((def.line as usize).wrapping_sub(1)) {
            *slot += bonus;
        }
        if matches!(def.kind.as_str(), "function" | "method") {
            blocks.push(Block {
                first: def.line,
                last: def.end_line,
                bonus,
            });
            block_defs.push(index);
        }
    }
    match matcher.best_window_in(&occurrences, lines, &extra, &blocks, WINDOW_LINES) {
        Some((window, Some(block))) => (window, Some(dotted_name(defs, block_defs[block]))),
        Some((window, None)) => (window, holding(window)),
        None => (fallback, holding(fallback)),
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

fn path_terms(path: &str) -> Vec<(String, u32)> {
    term_counts(path)
}

fn stem_of(path: &str) -> String {
    let name = path.rsplit('/').next().unwrap_or(path);
    let stem = name.split_once('.').map_or(name, |(s, _)| s);
    stem.to_lowercase()
}

/// The query's terms compiled for scanning, each weighted by its lexical idf times its query
/// weight.
fn term_matcher(snap: &Snapshot, analysis: &QueryAnalysis) -> TermMatcher {
    TermMatcher::new(
        analysis
            .terms
            .iter()
            .map(|(t, w)| (t.as_str(), snap.fulltext.idf(Channel::Lexical, t) * w)),
    )
}

/// Build a commit's snapshot. The commit's tantivy index is opened from its saved
/// bundle when one exists for exactly these documents, and saved after a build otherwise (a
/// failure to save only costs the next process a rebuild).
fn build_snapshot(store: &Store, commit: String, files: Vec<SnapFile>) -> Result<Snapshot> {
    let path_tf: Vec<Vec<(String, u32)>> = files.iter().map(|f| path_terms(&f.path)).collect();
    let docs = files.iter().zip(&path_tf).map(|(f, p)| {
        let record = &f.record;
        let lexical: TermCounts<'_> = record
            .lexical
            .iter()
            .map(|(t, c)| (t.as_str(), *c))
            .chain(p.iter().map(|(t, c)| (t.as_str(), c * PATH_TERM_BOOST)))
            .collect();
        let mut structural: TermCounts<'_> = record
            .structural
            .iter()
            .map(|(t, c)| (t.as_str(), *c))
            .collect();
        if record.symbols.is_some() {
            structural.extend(p.iter().map(|(t, c)| (t.as_str(), *c)));
        }
        (lexical, structural)
    });
    let encoded = EncodedDocs::new(docs);
    let load_saved = || {
        store
            .load_fulltext(&commit, encoded.digest())
            .and_then(|bundle| FullText::from_bundle(&bundle).ok())
            .filter(|fulltext| fulltext.len() == encoded.len())
    };
    // A saved index is loaded without the build lock, so runs that start together on a built
    // commit do not wait on each other; only a build takes the lock: one process builds and
    // saves, the others wait, then load what it saved.
    let fulltext = match load_saved() {
        Some(fulltext) => fulltext,
        None => {
            let _build = store.lock_build()?;
            match load_saved() {
                Some(fulltext) => fulltext,
                None => {
                    let fulltext = FullText::build_encoded(&encoded)
                        .map_err(|source| Error::FullText { source })?;
                    if let Ok(bundle) = fulltext.to_bundle() {
                        let _ = store.save_fulltext(&commit, encoded.digest(), &bundle);
                    }
                    fulltext
                }
            }
        }
    };
    let mut defs_by_name: HashMap<String, Vec<u32>> = HashMap::new();
    let mut by_stem: HashMap<String, Vec<u32>> = HashMap::new();
    for (id, file) in files.iter().enumerate() {
        let id = id as u32;
        if let Some(symbols) = &file.record.symbols {
            for def in &symbols.defs {
                let list = defs_by_name.entry(def.name.clone()).or_default();
                if list.last() != Some(&id) {
                    list.push(id);
                }
            }
        }
        by_stem.entry(stem_of(&file.path)).or_default().push(id);
    }
    let components = files.iter().map(|f| split_lower(&f.path)).collect();
    Ok(Snapshot {
        commit,
        components,
        files,
        fulltext,
        defs_by_name,
        by_stem,
    })
}

/// All channel rankings of one query on one snapshot.
pub(crate) struct Ranked {
    pub lexical: Vec<u32>,
    pub structural: Vec<u32>,
    pub symbol: Vec<u32>,
    /// Filled by the proximity stage (`Engine::rank_with_proximity`, which search and
    /// evaluation use); empty from [`rank`] alone (the repo map's personalisation).
    pub proximity: Vec<u32>,
    pub fused: Vec<(u32, f64)>,
}

/// Components of `path` (lowercased) end with the components of `suffix`.
fn ends_with_components(path: &[String], suffix: &[String]) -> bool {
    !suffix.is_empty() && path.len() >= suffix.len() && path[path.len() - suffix.len()..] == *suffix
}

fn split_lower(path: &str) -> Vec<String> {
    path.split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .map(str::to_lowercase)
        .collect()
}

const MODULE_SUFFIXES: &[&str] = &[
    ".py", ".pyi", ".rs", ".go", ".java", ".js", ".ts", ".tsx", ".jsx",
];
const PACKAGE_FILES: &[&str] = &["__init__.py", "mod.rs", "index.js", "index.ts"];

/// The symbol channel: files the query names by path or module path, files defining the
/// identifiers it names, and files whose stem is such an identifier.
pub(crate) fn symbol_scores(snap: &Snapshot, analysis: &QueryAnalysis) -> Vec<(u32, f64)> {
    let mut scores: HashMap<u32, f64> = HashMap::new();
    let comps = &snap.components;
    for (mention, weight) in &analysis.paths {
        let wanted = split_lower(mention);
        if wanted.is_empty() {
            continue;
        }
        let has_ext = wanted.last().is_some_and(|l| l.contains('.'));
        let mut matched: Vec<(u32, usize)> = Vec::new();
        for (id, path) in comps.iter().enumerate() {
            let m = if has_ext {
                if ends_with_components(path, &wanted) {
                    wanted.len()
                } else if ends_with_components(&wanted, path) {
                    path.len()
                } else {
                    0
                }
            } else {
                let mut best = 0;
                if let Some(last) = path.last() {
                    for suffix in MODULE_SUFFIXES {
                        if let Some(stem) = last.strip_suffix(suffix) {
                            let mut as_module = path.clone();
                            if let Some(l) = as_module.last_mut() {
                                *l = stem.to_string();
                            }
                            if ends_with_components(&as_module, &wanted) {
                                best = wanted.len();
                            }
                        }
                    }
                    if PACKAGE_FILES.contains(&last.as_str())
                        && ends_with_components(&path[..path.len() - 1], &wanted)
                    {
                        best = best.max(wanted.len());
                    }
                }
                best
            };
            if m > 0 {
                matched.push((id as u32, m));
            }
        }
        // Only mentions that pin down few files carry signal.
        if matched.is_empty() || matched.len() > 10 {
            continue;
        }
        let n = matched.len() as f64;
        for (id, m) in matched {
            *scores.entry(id).or_insert(0.0) += weight * 3.0 * (1.0 + 0.25 * m as f64) / n;
        }
    }
    for (ident, weight) in &analysis.identifiers {
        if let Some(definers) = snap.defs_by_name.get(ident) {
            let sources: Vec<u32> = definers
                .iter()
                .copied()
                .filter(|&d| !snap.files[d as usize].is_test)
                .collect();
            let list = if sources.is_empty() {
                definers.clone()
            } else {
                sources
            };
            if list.len() <= 10 {
                let n = list.len() as f64;
                for id in list {
                    *scores.entry(id).or_insert(0.0) += weight * 2.0 / n;
                }
            }
        }
        if let Some(files) = snap.by_stem.get(&ident.to_lowercase())
            && files.len() <= 10
        {
            let n = files.len() as f64;
            for &id in files {
                *scores.entry(id).or_insert(0.0) += weight * 1.5 / n;
            }
        }
    }
    let mut ranked: Vec<(u32, f64)> = scores.into_iter().collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    ranked
}

/// Why a revision did not resolve, in words that say what to give instead.
pub(crate) fn resolve_reason(repo: &git2::Repository, err: &git2::Error) -> String {
    let hint = if repo.is_empty().unwrap_or(false) {
        "the repository has no commits yet"
    } else {
        match (err.code(), err.class()) {
            (git2::ErrorCode::Ambiguous, _) => "the short id is ambiguous; give more hex digits",
            (git2::ErrorCode::NotFound, _) => {
                "no branch, tag or commit has that name (see `git log --oneline`)"
            }
            (_, git2::ErrorClass::Object | git2::ErrorClass::Invalid) => {
                "it does not name a commit (a tree or blob id, or a malformed revision)"
            }
            _ => "",
        }
    };
    if hint.is_empty() {
        err.message().to_string()
    } else {
        format!("{hint} (git: {})", err.message())
    }
}

/// Every blob of `tree` (not symlinks, not submodules) as (path, blob, path is UTF-8). Names
/// that are not UTF-8 are kept under a lossy name (git2's own walk stops at them).
pub(crate) fn walk_tree(
    repo: &git2::Repository,
    tree: &git2::Tree<'_>,
    prefix: &str,
    prefix_utf8: bool,
    out: &mut Vec<(String, git2::Oid, bool)>,
) -> std::result::Result<(), git2::Error> {
    for entry in tree.iter() {
        let name = String::from_utf8_lossy(entry.name_bytes());
        let utf8 = prefix_utf8 && matches!(name, std::borrow::Cow::Borrowed(_));
        match entry.kind() {
            // Symlinks (0o120000) hold a target path, not content.
            Some(git2::ObjectType::Blob) if entry.filemode() != 0o120000 => {
                out.push((format!("{prefix}{name}"), entry.id(), utf8));
            }
            Some(git2::ObjectType::Tree) => {
                let sub = repo.find_tree(entry.id())?;
                walk_tree(repo, &sub, &format!("{prefix}{name}/"), utf8, out)?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// Rank a query on a snapshot through every channel and fuse.
pub(crate) fn rank(snap: &Snapshot, analysis: &QueryAnalysis) -> Result<Ranked> {
    let ids = |list: Vec<(u32, f64)>| -> Vec<u32> { list.into_iter().map(|(d, _)| d).collect() };
    let search = |channel| {
        snap.fulltext
            .search(channel, &analysis.terms)
            .map_err(|source| Error::FullText { source })
    };
    let lexical = ids(search(Channel::Lexical)?);
    let structural = ids(search(Channel::Structural)?);
    let symbol = ids(symbol_scores(snap, analysis));
    let depth = |l: &[u32]| l.len().min(FUSION_DEPTH);
    let mut fused = reciprocal_rank_fusion(
        &[
            (&lexical[..depth(&lexical)], CHANNEL_WEIGHTS[0]),
            (&structural[..depth(&structural)], CHANNEL_WEIGHTS[1]),
            (&symbol[..depth(&symbol)], CHANNEL_WEIGHTS[2]),
        ],
        RRF_K,
    );
    for (doc, score) in &mut fused {
        *score *= file_factor(&snap.files[*doc as usize]);
    }
    sort_fused(snap, &mut fused);
    Ok(Ranked {
        lexical,
        structural,
        symbol,
        proximity: Vec::new(),
        fused,
    })
}

/// The fused-score multiplier of a file: test, vendored and documentation files count less.
fn file_factor(file: &SnapFile) -> f64 {
    let mut factor = 1.0;
    if file.is_test {
        factor *= TEST_FACTOR;
    }
    if file.is_vendored {
        factor *= VENDORED_FACTOR;
    }
    if file.is_docs {
        factor *= DOCS_FACTOR;
    }
    factor
}

/// Best first; ties by path.
fn sort_fused(snap: &Snapshot, fused: &mut [(u32, f64)]) {
    fused.sort_by(|a, b| {
        b.1.total_cmp(&a.1).then_with(|| {
            snap.files[a.0 as usize]
                .path
                .cmp(&snap.files[b.0 as usize].path)
        })
    });
}
