//! The merged-pull-request memory: "have we fixed something like this before?".
//!
//! An index of the pull requests merged into a repository up to one pinned commit, built from
//! its git history and, when the caller saved them, from the forge's own records
//! ([`ForgePull`], fetched by whoever holds a read token; this crate never calls the network):
//!
//! - a merge commit whose subject is GitHub's `Merge pull request #N from OWNER/BRANCH` is pull
//!   request N: its title is the first line of the commit body (GitHub puts the pull request's
//!   title there), its body the rest, its files and size the diff against the first parent;
//! - a commit whose subject ends in `(#N)` is a squash (or rebase) merge of pull request N:
//!   title the subject without the suffix, body the rest of the message, the diff against its
//!   parent;
//! - other merge commits (`Merge branch 'x'`, a main branch merged into a feature branch) are
//!   not pull requests: their first-parent diff would be someone else's work.
//!
//! Only commits reachable from the pin are read, so a run at commit C never sees a pull request
//! merged after C. A forge record is kept only when its merge commit is an ancestor of the pin
//! (or, when the mirror does not have that commit, when it was merged no later than the pin's
//! committer time); it then replaces the git-derived record of the same number.
//!
//! Ranking is BM25 over the title (three times), the body (its first [`MAX_BODY_CHARS`]) and
//! the touched files' paths, with the code-aware tokenizer of the retrieval engine; ties are
//! broken by number, so results are deterministic.
//!
//! Storage: one record per pull-request commit under
//! `<index-dir>/vN/<repo-key>/history/prs/<aa>/<commit>.json` (a record depends only on its
//! commit, so moving the pin reads only commits never seen before), forge records under
//! `history/forge/<number>.json`. Writers take `history/build.lock`.

use crate::engine::{open_repository, resolve_reason};
use crate::store::{Store, io_err, repo_key, valid_key, write_json};
use crate::tokenize::for_each_term;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// How much of a pull request's body is indexed: templates and long logs past it add noise.
pub const MAX_BODY_CHARS: usize = 2000;
/// How many times the title's terms count (the title says what was fixed).
const TITLE_WEIGHT: u32 = 3;
/// BM25's term-frequency saturation.
const BM25_K1: f64 = 1.2;
/// BM25's length normalisation.
const BM25_B: f64 = 0.75;

/// Where a pull request's record came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PrSource {
    /// A `(#N)` commit: a squash or rebase merge.
    Squash,
    /// A `Merge pull request #N` merge commit.
    Merge,
    /// The forge's API.
    Forge,
}

/// One merged pull request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergedPr {
    /// The pull request's number.
    pub number: u64,
    /// Its title.
    pub title: String,
    /// Its description (the rest of the commit message for a git-derived record).
    pub body: String,
    /// The paths it touched, sorted (a rename lists both sides).
    pub files: Vec<String>,
    /// Lines added.
    pub insertions: u64,
    /// Lines removed.
    pub deletions: u64,
    /// The merge (or squash) commit, when known.
    pub commit: Option<String>,
    /// When it was merged: the commit's committer time, or the forge's `merged_at`, as
    /// `YYYY-MM-DDTHH:MM:SSZ`.
    pub merged_at: String,
    /// Where the record came from.
    pub source: PrSource,
}

/// One file of a forge pull request (`GET /repos/O/R/pulls/N/files`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForgeFile {
    /// The path.
    pub filename: String,
    /// Lines added.
    #[serde(default)]
    pub additions: u64,
    /// Lines removed.
    #[serde(default)]
    pub deletions: u64,
    /// The old path of a rename.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_filename: Option<String>,
}

/// A merged pull request as the forge's REST API describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForgePull {
    /// Its number.
    pub number: u64,
    /// Its title.
    pub title: String,
    /// Its description.
    #[serde(default)]
    pub body: String,
    /// `merged_at`, `YYYY-MM-DDTHH:MM:SSZ`.
    pub merged_at: String,
    /// `merge_commit_sha`: the merge, squash or rebase commit on the base branch.
    #[serde(default)]
    pub merge_commit_sha: Option<String>,
    /// Its files.
    pub files: Vec<ForgeFile>,
}

/// One search result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryHit {
    /// The pull request.
    pub pr: MergedPr,
    /// Its BM25 score for the query (higher is better; not comparable across queries of very
    /// different lengths).
    pub score: f64,
}

/// What a commit message says about a pull request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedMessage {
    /// The number.
    pub number: u64,
    /// The title.
    pub title: String,
    /// The rest of the message.
    pub body: String,
    /// Merge commit or squash commit.
    pub source: PrSource,
}

/// Read a pull request out of a commit message: GitHub's merge subject on a merge commit, a
/// `(#N)` suffix on any other commit. `None` when the message names no pull request.
pub fn parse_message(message: &str, is_merge: bool) -> Option<ParsedMessage> {
    let message = message.replace("\r\n", "\n");
    let (subject, rest) = message.split_once('\n').unwrap_or((&message, ""));
    let subject = subject.trim();
    let rest = rest.trim_matches('\n');
    if is_merge {
        let tail = subject.strip_prefix("Merge pull request #")?;
        let digits: String = tail.chars().take_while(char::is_ascii_digit).collect();
        let number = digits.parse::<u64>().ok().filter(|n| *n > 0)?;
        let branch = tail[digits.len()..]
            .trim()
            .strip_prefix("from ")
            .unwrap_or("")
            .trim();
        let mut lines = rest.lines().skip_while(|l| l.trim().is_empty());
        let title = lines.next().map(str::trim).unwrap_or("").to_owned();
        let body = lines.collect::<Vec<_>>().join("\n").trim().to_owned();
        let title = if title.is_empty() {
            // No title line: the branch name is the best description there is.
            branch.to_owned()
        } else {
            title
        };
        return Some(ParsedMessage {
            number,
            title,
            body,
            source: PrSource::Merge,
        });
    }
    let inner = subject.strip_suffix(')')?;
    let open = inner.rfind("(#")?;
    let number = inner[open + 2..].parse::<u64>().ok().filter(|n| *n > 0)?;
    let title = inner[..open].trim().to_owned();
    if title.is_empty() {
        return None;
    }
    Some(ParsedMessage {
        number,
        title,
        body: rest.trim().to_owned(),
        source: PrSource::Squash,
    })
}

/// `YYYY-MM-DDTHH:MM:SSZ` for seconds since the Unix epoch (UTC, proleptic Gregorian).
pub fn rfc3339_utc(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Whether `text` has the shape `YYYY-MM-DDTHH:MM:SSZ` (so that it orders as a time).
fn is_utc_timestamp(text: &str) -> bool {
    let b = text.as_bytes();
    b.len() == 20
        && b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            10 => *c == b'T',
            13 | 16 => *c == b':',
            19 => *c == b'Z',
            _ => c.is_ascii_digit(),
        })
}

/// The history directory of a repository's index.
#[derive(Debug, Clone)]
struct HistoryStore {
    root: PathBuf,
}

impl HistoryStore {
    fn new(index_dir: &Path, key: &str) -> Result<HistoryStore> {
        if !valid_key(key) {
            return Err(Error::InvalidIndexKey {
                key: key.to_owned(),
            });
        }
        Ok(HistoryStore {
            root: Store::keyed(index_dir, key).root().join("history"),
        })
    }

    fn record_path(&self, commit: &str) -> PathBuf {
        self.root
            .join("prs")
            .join(&commit[..2.min(commit.len())])
            .join(format!("{commit}.json"))
    }

    fn forge_dir(&self) -> PathBuf {
        self.root.join("forge")
    }

    /// The stored record of a pull-request commit, `None` when absent or damaged.
    fn load_record(&self, commit: &str) -> Option<MergedPr> {
        let bytes = std::fs::read(self.record_path(commit)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    fn lock(&self) -> Result<std::fs::File> {
        std::fs::create_dir_all(&self.root).map_err(io_err("create", &self.root))?;
        let path = self.root.join("build.lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io_err("open", &path))?;
        file.lock().map_err(io_err("lock", &path))?;
        Ok(file)
    }

    fn load_forge(&self) -> Result<Vec<ForgePull>> {
        let dir = self.forge_dir();
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => {
                return Err(Error::Io {
                    action: "list",
                    path: dir,
                    source: e,
                });
            }
        };
        let mut pulls = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let bytes = std::fs::read(&path).map_err(io_err("read", &path))?;
            let pull: ForgePull =
                serde_json::from_slice(&bytes).map_err(|source| Error::Corrupt {
                    path: path.clone(),
                    source,
                })?;
            pulls.push(pull);
        }
        pulls.sort_by_key(|p| p.number);
        Ok(pulls)
    }
}

/// Save forge records of a repository's merged pull requests beside its index (one file per
/// number; a later save of a number replaces it). `key` is the index key (see
/// [`crate::store::repo_key`]).
pub fn save_forge_pulls(index_dir: &Path, key: &str, pulls: &[ForgePull]) -> Result<()> {
    let store = HistoryStore::new(index_dir, key)?;
    let _lock = store.lock()?;
    for pull in pulls {
        let path = store.forge_dir().join(format!("{}.json", pull.number));
        write_json(&path, pull)?;
    }
    Ok(())
}

/// The numbers of the forge records saved for a repository, ascending (a fetcher skips them).
pub fn saved_forge_numbers(index_dir: &Path, key: &str) -> Result<Vec<u64>> {
    let store = HistoryStore::new(index_dir, key)?;
    Ok(store.load_forge()?.iter().map(|p| p.number).collect())
}

/// Figures of one build.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryStats {
    /// The pinned commit.
    pub commit: String,
    /// Commits reachable from the pin.
    pub commits_walked: usize,
    /// Pull requests in the index.
    pub pulls: usize,
    /// Of which from the forge.
    pub from_forge: usize,
    /// Records computed now (the rest were stored).
    pub records_new: usize,
    /// Pull-request commits left out because the repository lacks an object their diff needs
    /// (a partial clone).
    pub missing_objects: usize,
}

/// The searchable memory of merged pull requests at one commit.
#[derive(Debug, Clone)]
pub struct HistoryIndex {
    stats: HistoryStats,
    pulls: Vec<MergedPr>,
    /// Per pull request: term frequencies.
    docs: Vec<HashMap<String, u32>>,
    lengths: Vec<u32>,
    df: HashMap<String, u32>,
    avg_len: f64,
}

impl HistoryIndex {
    /// Build the memory of `repo_path` at `reference`, with records stored under `index_dir`
    /// (by `key`, else by the repository's own [`repo_key`]).
    pub fn build(
        repo_path: &Path,
        index_dir: &Path,
        key: Option<&str>,
        reference: &str,
    ) -> Result<HistoryIndex> {
        let repo = open_repository(repo_path)?;
        let key = key.map_or_else(|| repo_key(repo.path()), str::to_owned);
        let store = HistoryStore::new(index_dir, &key)?;
        let pin = repo
            .revparse_single(reference)
            .and_then(|o| o.peel_to_commit())
            .map_err(|source| Error::Resolve {
                reference: reference.to_owned(),
                repo: repo.path().to_path_buf(),
                reason: resolve_reason(&repo, &source),
            })?;
        let mut stats = HistoryStats {
            commit: pin.id().to_string(),
            ..HistoryStats::default()
        };
        let git = |action: &'static str| {
            move |source| Error::Git {
                action: action.to_owned(),
                source,
            }
        };
        let mut walk = repo.revwalk().map_err(git("walking the history"))?;
        walk.push(pin.id()).map_err(git("walking the history"))?;
        let mut by_number: BTreeMap<u64, MergedPr> = BTreeMap::new();
        let mut lock = None;
        for oid in walk {
            let oid = oid.map_err(git("walking the history"))?;
            stats.commits_walked += 1;
            let commit = repo.find_commit(oid).map_err(git("reading a commit"))?;
            let is_merge = commit.parent_count() > 1;
            let Some(parsed) =
                parse_message(&String::from_utf8_lossy(commit.message_bytes()), is_merge)
            else {
                continue;
            };
            let id = oid.to_string();
            let record = match store.load_record(&id) {
                Some(r) if r.number == parsed.number => r,
                _ => {
                    if lock.is_none() {
                        lock = Some(store.lock()?);
                    }
                    let record = match pr_record(&repo, &commit, parsed) {
                        Ok(r) => r,
                        // A partial clone lacks some objects: that pull request is left out
                        // (and not stored, so a later full fetch brings it in).
                        Err(Error::Git { source, .. })
                            if source.code() == git2::ErrorCode::NotFound =>
                        {
                            stats.missing_objects += 1;
                            continue;
                        }
                        Err(e) => return Err(e),
                    };
                    write_json(&store.record_path(&id), &record)?;
                    stats.records_new += 1;
                    record
                }
            };
            keep_better(&mut by_number, record);
        }
        drop(lock);
        let pin_time = rfc3339_utc(pin.committer().when().seconds());
        for pull in store.load_forge()? {
            let visible = match pull.merge_commit_sha.as_deref().map(git2::Oid::from_str) {
                Some(Ok(sha)) if repo.find_commit(sha).is_ok() => {
                    sha == pin.id() || repo.graph_descendant_of(pin.id(), sha).unwrap_or(false)
                }
                _ => is_utc_timestamp(&pull.merged_at) && pull.merged_at <= pin_time,
            };
            if !visible {
                continue;
            }
            stats.from_forge += 1;
            by_number.insert(pull.number, forge_record(pull));
        }
        let pulls: Vec<MergedPr> = by_number.into_values().collect();
        stats.pulls = pulls.len();
        Ok(HistoryIndex::from_pulls(stats, pulls))
    }

    fn from_pulls(stats: HistoryStats, pulls: Vec<MergedPr>) -> HistoryIndex {
        let mut docs = Vec::with_capacity(pulls.len());
        let mut lengths = Vec::with_capacity(pulls.len());
        let mut df: HashMap<String, u32> = HashMap::new();
        for pr in &pulls {
            let mut tf: HashMap<String, u32> = HashMap::new();
            let mut len = 0u32;
            let mut add = |text: &str, weight: u32| {
                for_each_term(text, |t| {
                    *tf.entry(t.to_owned()).or_default() += weight;
                    len += weight;
                });
            };
            add(&pr.title, TITLE_WEIGHT);
            add(clip_chars(&pr.body, MAX_BODY_CHARS), 1);
            for file in &pr.files {
                add(file, 1);
            }
            for term in tf.keys() {
                *df.entry(term.clone()).or_default() += 1;
            }
            docs.push(tf);
            lengths.push(len);
        }
        let avg_len = if lengths.is_empty() {
            1.0
        } else {
            (lengths.iter().map(|l| f64::from(*l)).sum::<f64>() / lengths.len() as f64).max(1.0)
        };
        HistoryIndex {
            stats,
            pulls,
            docs,
            lengths,
            df,
            avg_len,
        }
    }

    /// What the build read and found.
    pub fn stats(&self) -> &HistoryStats {
        &self.stats
    }

    /// Every pull request in the index, by number.
    pub fn pulls(&self) -> &[MergedPr] {
        &self.pulls
    }

    /// The `k` pull requests that match `query` best (score above zero), best first; ties go
    /// to the higher (later) number.
    pub fn search(&self, query: &str, k: usize) -> Vec<HistoryHit> {
        let mut qtf: BTreeMap<String, u32> = BTreeMap::new();
        for_each_term(query, |t| *qtf.entry(t.to_owned()).or_default() += 1);
        let n = self.pulls.len() as f64;
        let mut scored: Vec<(f64, usize)> = Vec::new();
        for (i, doc) in self.docs.iter().enumerate() {
            let norm =
                BM25_K1 * (1.0 - BM25_B + BM25_B * f64::from(self.lengths[i]) / self.avg_len);
            let mut score = 0.0;
            for (term, q) in &qtf {
                let Some(tf) = doc.get(term) else { continue };
                let df = f64::from(self.df.get(term).copied().unwrap_or(0));
                let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
                let tf = f64::from(*tf);
                score += idf * tf * (BM25_K1 + 1.0) / (tf + norm) * (1.0 + f64::from(*q).ln());
            }
            if score > 0.0 {
                scored.push((score, i));
            }
        }
        scored.sort_by(|a, b| {
            b.0.total_cmp(&a.0)
                .then(self.pulls[b.1].number.cmp(&self.pulls[a.1].number))
        });
        scored
            .into_iter()
            .take(k)
            .map(|(score, i)| HistoryHit {
                pr: self.pulls[i].clone(),
                score,
            })
            .collect()
    }
}

/// The first `max` bytes of `text`, cut on a character boundary.
fn clip_chars(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Keep one record per number: a merge commit's over a squash-style one, then the earliest.
fn keep_better(by_number: &mut BTreeMap<u64, MergedPr>, record: MergedPr) {
    match by_number.get(&record.number) {
        Some(old)
            if (old.source, std::cmp::Reverse(&old.merged_at), &old.commit)
                >= (
                    record.source,
                    std::cmp::Reverse(&record.merged_at),
                    &record.commit,
                ) => {}
        _ => {
            by_number.insert(record.number, record);
        }
    }
}

fn forge_record(pull: ForgePull) -> MergedPr {
    let mut files: Vec<String> = Vec::new();
    let (mut insertions, mut deletions) = (0, 0);
    for f in pull.files {
        insertions += f.additions;
        deletions += f.deletions;
        files.push(f.filename);
        files.extend(f.previous_filename);
    }
    files.sort();
    files.dedup();
    MergedPr {
        number: pull.number,
        title: pull.title,
        body: pull.body,
        files,
        insertions,
        deletions,
        commit: pull.merge_commit_sha,
        merged_at: pull.merged_at,
        source: PrSource::Forge,
    }
}

/// The record of a pull-request commit: its diff against its first parent (the empty tree for
/// a root commit).
fn pr_record(
    repo: &git2::Repository,
    commit: &git2::Commit<'_>,
    parsed: ParsedMessage,
) -> Result<MergedPr> {
    let git = |action: &'static str| {
        move |source| Error::Git {
            action: action.to_owned(),
            source,
        }
    };
    let tree = commit.tree().map_err(git("reading a commit's tree"))?;
    let parent_tree = match commit.parent(0) {
        Ok(p) => Some(p.tree().map_err(git("reading a parent's tree"))?),
        Err(_) => None,
    };
    let mut opts = git2::DiffOptions::new();
    opts.ignore_submodules(true);
    let diff = repo
        .diff_tree_to_tree(parent_tree.as_ref(), Some(&tree), Some(&mut opts))
        .map_err(git("diffing a pull request's commit"))?;
    let stats = diff.stats().map_err(git("counting a diff's lines"))?;
    let mut files: Vec<String> = Vec::new();
    for delta in diff.deltas() {
        for path in [delta.old_file().path(), delta.new_file().path()]
            .into_iter()
            .flatten()
        {
            files.push(path.to_string_lossy().into_owned());
        }
    }
    files.sort();
    files.dedup();
    Ok(MergedPr {
        number: parsed.number,
        title: parsed.title,
        body: parsed.body,
        files,
        insertions: stats.insertions() as u64,
        deletions: stats.deletions() as u64,
        commit: Some(commit.id().to_string()),
        merged_at: rfc3339_utc(commit.committer().when().seconds()),
        source: parsed.source,
    })
}

/// The thresholds the evaluation reports precision at (the warm start's default among them).
pub const EVAL_THRESHOLDS: [f64; 7] = [0.0, 25.0, 50.0, 75.0, 100.0, 150.0, 200.0];

/// One instance of the history benchmark.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryInstanceResult {
    /// Instance id.
    pub instance_id: String,
    /// `owner/name`.
    pub repo: String,
    /// Files the gold patch edits, sorted.
    pub gold: Vec<String>,
    /// Pull requests visible at the instance's base commit.
    pub pulls: usize,
    /// The top three matches: number and score.
    pub top: Vec<(u64, f64)>,
    /// The best match's files include a gold file.
    pub hit_at_1: bool,
    /// The top three matches' files include a gold file.
    pub hit_at_3: bool,
    /// The baseline: the latest merged pull request's files include a gold file.
    pub latest_hit_at_1: bool,
    /// The baseline: the latest three's files include a gold file.
    pub latest_hit_at_3: bool,
    /// Milliseconds to build the memory at the base commit (records stored earlier reused).
    pub build_ms: f64,
}

/// Precision of the best match above one score threshold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThresholdRow {
    /// The threshold.
    pub threshold: f64,
    /// Instances whose best match scores at least that much.
    pub above: usize,
    /// Of those, how many have a gold file among the best match's files.
    pub hits: usize,
}

/// The history benchmark's report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryEvalReport {
    /// Instances evaluated.
    pub instances: usize,
    /// Instances whose base commit had at least one merged pull request.
    pub with_history: usize,
    /// Fraction of instances whose best match touched a gold file.
    pub hit_at_1: f64,
    /// Fraction whose top three matches touched a gold file.
    pub hit_at_3: f64,
    /// The same for the latest merged pull request (a baseline without the query).
    pub latest_hit_at_1: f64,
    /// The same for the latest three.
    pub latest_hit_at_3: f64,
    /// Precision of the best match above each of [`EVAL_THRESHOLDS`].
    pub thresholds: Vec<ThresholdRow>,
    /// Median build time, milliseconds.
    pub build_ms_p50: f64,
    /// Per instance, in file order.
    pub results: Vec<HistoryInstanceResult>,
}

fn touches_gold(pulls: &[&MergedPr], gold: &[String]) -> bool {
    pulls
        .iter()
        .any(|p| p.files.iter().any(|f| gold.contains(f)))
}

/// Run the history benchmark over SWE-bench-style instances (the issue text is the query, the
/// gold patch's files the answer) against the mirrors; `progress` sees each result.
pub fn evaluate(
    options: &crate::eval::EvalOptions,
    progress: &mut dyn FnMut(&HistoryInstanceResult),
) -> Result<HistoryEvalReport> {
    use crate::eval::{find_mirror, gold_files, read_instances};
    let mut instances = read_instances(&options.instances)?;
    if let Some(limit) = options.limit {
        instances.truncate(limit);
    }
    let temp;
    let index_dir = match &options.index_dir {
        Some(dir) => dir.clone(),
        None => {
            temp = tempfile::Builder::new()
                .prefix("airlock-history-eval-")
                .tempdir()
                .map_err(|source| Error::Io {
                    action: "create a temporary index directory in",
                    path: std::env::temp_dir(),
                    source,
                })?;
            temp.path().to_path_buf()
        }
    };
    let mut results = Vec::new();
    for instance in &instances {
        let mirror = find_mirror(&options.mirrors, &instance.repo)?;
        let started = std::time::Instant::now();
        let index = HistoryIndex::build(&mirror, &index_dir, None, &instance.base_commit)?;
        let build_ms = started.elapsed().as_secs_f64() * 1000.0;
        let gold = gold_files(&instance.patch);
        let hits = index.search(&instance.problem_statement, 3);
        let top: Vec<&MergedPr> = hits.iter().map(|h| &h.pr).collect();
        let mut latest: Vec<&MergedPr> = index.pulls().iter().collect();
        latest.sort_by(|a, b| b.merged_at.cmp(&a.merged_at).then(b.number.cmp(&a.number)));
        let result = HistoryInstanceResult {
            instance_id: instance.instance_id.clone(),
            repo: instance.repo.clone(),
            pulls: index.pulls().len(),
            top: hits.iter().map(|h| (h.pr.number, h.score)).collect(),
            hit_at_1: touches_gold(&top[..top.len().min(1)], &gold),
            hit_at_3: touches_gold(&top, &gold),
            latest_hit_at_1: touches_gold(&latest[..latest.len().min(1)], &gold),
            latest_hit_at_3: touches_gold(&latest[..latest.len().min(3)], &gold),
            gold,
            build_ms,
        };
        progress(&result);
        results.push(result);
    }
    let n = results.len().max(1) as f64;
    let rate =
        |f: fn(&HistoryInstanceResult) -> bool| results.iter().filter(|r| f(r)).count() as f64 / n;
    let thresholds = EVAL_THRESHOLDS
        .iter()
        .map(|&threshold| {
            let above: Vec<&HistoryInstanceResult> = results
                .iter()
                .filter(|r| r.top.first().is_some_and(|t| t.1 >= threshold))
                .collect();
            ThresholdRow {
                threshold,
                above: above.len(),
                hits: above.iter().filter(|r| r.hit_at_1).count(),
            }
        })
        .collect();
    let mut times: Vec<f64> = results.iter().map(|r| r.build_ms).collect();
    times.sort_by(f64::total_cmp);
    Ok(HistoryEvalReport {
        instances: results.len(),
        with_history: results.iter().filter(|r| r.pulls > 0).count(),
        hit_at_1: rate(|r| r.hit_at_1),
        hit_at_3: rate(|r| r.hit_at_3),
        latest_hit_at_1: rate(|r| r.latest_hit_at_1),
        latest_hit_at_3: rate(|r| r.latest_hit_at_3),
        thresholds,
        build_ms_p50: times.get(times.len() / 2).copied().unwrap_or(0.0),
        results,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn github_merge_and_squash_subjects_are_read() {
        let m = parse_message(
            "Merge pull request #42 from alice/fix-redirect\n\nFix redirect loop on 301\n\nDetails here.\n",
            true,
        );
        assert_eq!(
            m,
            Some(ParsedMessage {
                number: 42,
                title: "Fix redirect loop on 301".into(),
                body: "Details here.".into(),
                source: PrSource::Merge,
            })
        );
        let s = parse_message("Handle empty header values (#7)\n\n* one\n* two", false);
        assert_eq!(
            s.as_ref().map(|s| (s.number, s.title.as_str())),
            Some((7, "Handle empty header values"))
        );
        assert_eq!(s.map(|s| s.source), Some(PrSource::Squash));
        // A merge commit that names no pull request, a `(#N)` on a merge commit, a bare number.
        assert_eq!(parse_message("Merge branch 'main' into fix", true), None);
        assert_eq!(parse_message("Merge branch 'x' (#3)", true), None);
        assert_eq!(parse_message("(#3)", false), None);
        assert_eq!(parse_message("Fix (#x)", false), None);
        // No title line: the branch names it.
        let b = parse_message("Merge pull request #9 from bob/timeout-retry", true);
        assert_eq!(b.map(|b| b.title), Some("bob/timeout-retry".into()));
    }

    #[test]
    fn timestamps_are_utc_rfc3339() {
        assert_eq!(rfc3339_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339_utc(1_700_000_000), "2023-11-14T22:13:20Z");
        assert!(is_utc_timestamp("2023-11-14T22:13:20Z"));
        assert!(!is_utc_timestamp("2023-11-14 22:13:20"));
    }
}
