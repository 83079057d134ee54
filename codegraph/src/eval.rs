//! The retrieval benchmark: SWE-bench-style instances against local mirrors, file-level
//! recall@1/5/10 and MRR against the files each gold patch edits, per channel, with timings.
//!
//! A benchmark, not a test: it needs mirrors that tests do not have, and its timings vary.

use crate::engine::Engine;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Depth of each channel's ranking kept for MRR.
const RANK_DEPTH: usize = 100;
/// The repository map's budget in the evaluation: the supervisor's default for the map in the
/// agent's first message.
pub const MAP_TOKENS: usize = 2000;
/// The channels reported, in order (`proximity` ranks only the first-stage fused top
/// [`crate::engine::PROXIMITY_DEPTH`], so its recall is bounded by theirs).
pub const CHANNELS: [&str; 5] = ["lexical", "structural", "symbol", "proximity", "fused"];

/// One SWE-bench-style instance (other fields in the file are ignored).
#[derive(Debug, Clone, Deserialize)]
pub struct Instance {
    /// e.g. `sqlfluff__sqlfluff-1625`.
    pub instance_id: String,
    /// `owner/name`.
    pub repo: String,
    /// The commit the issue was filed against.
    pub base_commit: String,
    /// The issue text, used as the query.
    pub problem_statement: String,
    /// The gold patch, whose edited files are the relevant set.
    pub patch: String,
}

/// What to evaluate.
#[derive(Debug, Clone)]
pub struct EvalOptions {
    /// JSON-lines file of instances.
    pub instances: PathBuf,
    /// Directory of mirrors: `<owner>+<name>` (bare or normal clone), or `<owner>+<name>/repo`.
    pub mirrors: PathBuf,
    /// Index directory; `None` uses a fresh temporary one (so the first index of each
    /// repository is a full one) removed at the end.
    pub index_dir: Option<PathBuf>,
    /// Evaluate only the first N instances.
    pub limit: Option<usize>,
}

/// Recall and MRR of one channel.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChannelMetrics {
    /// Mean fraction of gold files in the top 1.
    pub recall_at_1: f64,
    /// Mean fraction of gold files in the top 5.
    pub recall_at_5: f64,
    /// Mean fraction of gold files in the top 10.
    pub recall_at_10: f64,
    /// Mean reciprocal rank of the first gold file (0 when not in the top 100).
    pub mrr: f64,
}

/// The outcome of one instance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstanceResult {
    /// Instance id.
    pub instance_id: String,
    /// `owner/name`.
    pub repo: String,
    /// Files the gold patch edits, sorted.
    pub gold: Vec<String>,
    /// Per channel: 1-based rank of the first gold file in the top 100, if any.
    pub first_gold_rank: BTreeMap<String, Option<u32>>,
    /// Per channel metrics of this instance alone.
    pub metrics: BTreeMap<String, ChannelMetrics>,
    /// Top 5 fused paths.
    pub top_fused: Vec<String>,
    /// Gold files among the top 10 hits whose changed lines are known (see [`changed_lines`]).
    pub windows_checked: u32,
    /// Of those, the files whose hit window contains a line the gold patch changes.
    pub windows_on_change: u32,
    /// Whether the repository map at [`MAP_TOKENS`] tokens, personalised by the problem
    /// statement, shows a definition of a gold file.
    pub map_names_gold: bool,
    /// Blobs extracted to index this commit (0 when everything was already stored).
    pub blobs_new: usize,
    /// Time to index and load the commit, milliseconds.
    pub index_ms: f64,
    /// Time of one `search` (k = 10) on the loaded commit, milliseconds.
    pub query_ms: f64,
}

/// The whole evaluation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalReport {
    /// Instances evaluated.
    pub instances: usize,
    /// Mean metrics per channel (`lexical`, `structural`, `symbol`, `fused`).
    pub channels: BTreeMap<String, ChannelMetrics>,
    /// Median time of a full index (first commit of each repository), milliseconds.
    pub full_index_ms_p50: f64,
    /// Median time of an incremental index (later commits of a repository), milliseconds.
    pub incremental_index_ms_p50: f64,
    /// Median query time, milliseconds.
    pub query_ms_p50: f64,
    /// Slowest query, milliseconds.
    pub query_ms_max: f64,
    /// Gold files found in the top 10 (over all instances) whose hit window was checked.
    pub windows_checked: u32,
    /// Fraction of those whose window contains a line the gold patch changes (0 when none
    /// was checked): how often the agent's first look at a right file is at the right place.
    pub window_hit_rate: f64,
    /// Fraction of instances whose repository map at [`MAP_TOKENS`] tokens shows a gold file:
    /// how often the outline in the agent's first message includes a file to fix.
    pub map_hit_rate: f64,
    /// Per-instance results, in file order.
    pub results: Vec<InstanceResult>,
}

/// The files a unified diff edits (`diff --git a/X b/Y` headers; Y, or X for deletions).
pub fn gold_files(patch: &str) -> Vec<String> {
    let mut files = BTreeSet::new();
    for line in patch.lines() {
        let Some(rest) = line.strip_prefix("diff --git a/") else {
            continue;
        };
        if let Some((a, b)) = rest.split_once(" b/") {
            files.insert(if b == "/dev/null" { a } else { b }.to_string());
        }
    }
    files.into_iter().collect()
}

/// Per file a unified diff edits, the lines of the old version it touches: each removed line,
/// and for lines added without removing any (an insertion, not a replacement), the old lines on
/// either side of the insertion.
/// Files the diff creates have none.
pub fn changed_lines(patch: &str) -> BTreeMap<String, BTreeSet<u32>> {
    let mut files: BTreeMap<String, BTreeSet<u32>> = BTreeMap::new();
    let mut current: Option<String> = None;
    let mut old_line = 0u32;
    let mut in_hunk = false;
    // Inside a run of removed lines, added lines replace them rather than insert.
    let mut replacing = false;
    for line in patch.lines() {
        if let Some(rest) = line.strip_prefix("diff --git a/") {
            current = rest.split_once(" b/").map(|(_, b)| b.to_string());
            in_hunk = false;
            continue;
        }
        if let Some(rest) = line.strip_prefix("@@ -") {
            let start = rest
                .split([',', ' '])
                .next()
                .and_then(|n| n.parse::<u32>().ok());
            in_hunk = start.is_some();
            replacing = false;
            // `@@ -0,0` (a new file) has no old lines; the first old line of a hunk is `start`.
            old_line = start.unwrap_or(0);
            continue;
        }
        let Some(file) = current.as_ref().filter(|_| in_hunk) else {
            continue;
        };
        match line.as_bytes().first() {
            Some(b'-') => {
                files.entry(file.clone()).or_default().insert(old_line);
                old_line += 1;
                replacing = true;
            }
            Some(b'+') if old_line > 0 && !replacing => {
                let touched = files.entry(file.clone()).or_default();
                touched.insert(old_line.saturating_sub(1).max(1));
                touched.insert(old_line);
            }
            Some(b' ') => {
                old_line += 1;
                replacing = false;
            }
            _ => {}
        }
    }
    files
}

/// Recall@k and reciprocal rank of one ranking against a gold set.
pub fn score_ranking(ranking: &[String], gold: &[String]) -> (ChannelMetrics, Option<u32>) {
    let recall = |k: usize| {
        if gold.is_empty() {
            return 0.0;
        }
        let top: BTreeSet<&String> = ranking.iter().take(k).collect();
        gold.iter().filter(|g| top.contains(g)).count() as f64 / gold.len() as f64
    };
    let first = ranking
        .iter()
        .position(|p| gold.contains(p))
        .map(|p| p as u32 + 1);
    (
        ChannelMetrics {
            recall_at_1: recall(1),
            recall_at_5: recall(5),
            recall_at_10: recall(10),
            mrr: first.map_or(0.0, |r| 1.0 / f64::from(r)),
        },
        first,
    )
}

/// Find the mirror of `owner/name` under `mirrors`.
pub fn find_mirror(mirrors: &Path, repo: &str) -> Result<PathBuf> {
    let flat = repo.replace('/', "+");
    let candidates = [
        mirrors.join(&flat).join("repo"),
        mirrors.join(&flat),
        mirrors.join(format!("{flat}.git")),
    ];
    for candidate in &candidates {
        if candidate.join("HEAD").is_file() || candidate.join(".git").exists() {
            return Ok(candidate.clone());
        }
    }
    Err(Error::MissingMirror {
        repo: repo.to_string(),
        tried: candidates
            .iter()
            .map(|c| c.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
    })
}

/// Read instances from a JSON-lines file (blank lines ignored).
pub fn read_instances(path: &Path) -> Result<Vec<Instance>> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
        action: "read",
        path: path.to_path_buf(),
        source,
    })?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let instance = serde_json::from_str(line).map_err(|e| Error::Instance {
            path: path.to_path_buf(),
            line: i + 1,
            message: e.to_string(),
        })?;
        out.push(instance);
    }
    Ok(out)
}

fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}

/// Run the evaluation; `progress` sees each instance's result as it completes.
pub fn run(options: &EvalOptions, progress: &mut dyn FnMut(&InstanceResult)) -> Result<EvalReport> {
    let mut instances = read_instances(&options.instances)?;
    if let Some(limit) = options.limit {
        instances.truncate(limit);
    }
    let temp;
    let index_dir = match &options.index_dir {
        Some(dir) => dir.clone(),
        None => {
            temp = tempfile::Builder::new()
                .prefix("airlock-eval-")
                .tempdir()
                .map_err(|source| Error::Io {
                    action: "create a temporary index directory in",
                    path: std::env::temp_dir(),
                    source,
                })?;
            temp.path().to_path_buf()
        }
    };
    let mut engines: HashMap<String, Engine> = HashMap::new();
    let mut results = Vec::new();
    let mut full = Vec::new();
    let mut incremental = Vec::new();
    let mut queries = Vec::new();
    for instance in &instances {
        let first_of_repo = !engines.contains_key(&instance.repo);
        if first_of_repo {
            let mirror = find_mirror(&options.mirrors, &instance.repo)?;
            engines.insert(instance.repo.clone(), Engine::open(&mirror, &index_dir)?);
        }
        let Some(engine) = engines.get_mut(&instance.repo) else {
            continue;
        };
        let started = Instant::now();
        let stats = engine.index(&instance.base_commit)?;
        engine.prepare(&instance.base_commit)?;
        let index_ms = started.elapsed().as_secs_f64() * 1000.0;
        if first_of_repo {
            full.push(index_ms);
        } else {
            incremental.push(index_ms);
        }
        let started = Instant::now();
        let hits = engine.search(&instance.base_commit, &instance.problem_statement, 10)?;
        let query_ms = started.elapsed().as_secs_f64() * 1000.0;
        queries.push(query_ms);
        let changed = changed_lines(&instance.patch);
        let (mut windows_checked, mut windows_on_change) = (0, 0);
        for hit in &hits {
            let Some(lines) = changed.get(&hit.path).filter(|l| !l.is_empty()) else {
                continue;
            };
            windows_checked += 1;
            if lines.range(hit.line_start..=hit.line_end).next().is_some() {
                windows_on_change += 1;
            }
        }
        let rankings = engine.channel_rankings(
            &instance.base_commit,
            &instance.problem_statement,
            RANK_DEPTH,
        )?;
        let gold = gold_files(&instance.patch);
        let map_names_gold = engine
            .repo_map_files(
                &instance.base_commit,
                &instance.problem_statement,
                MAP_TOKENS,
            )?
            .iter()
            .any(|path| gold.contains(path));
        let mut first_gold_rank = BTreeMap::new();
        let mut metrics = BTreeMap::new();
        for (name, ranking) in [
            ("lexical", &rankings.lexical),
            ("structural", &rankings.structural),
            ("symbol", &rankings.symbol),
            ("proximity", &rankings.proximity),
            ("fused", &rankings.fused),
        ] {
            let (m, first) = score_ranking(ranking, &gold);
            metrics.insert(name.to_string(), m);
            first_gold_rank.insert(name.to_string(), first);
        }
        let result = InstanceResult {
            instance_id: instance.instance_id.clone(),
            repo: instance.repo.clone(),
            gold,
            first_gold_rank,
            metrics,
            top_fused: rankings.fused.iter().take(5).cloned().collect(),
            windows_checked,
            windows_on_change,
            map_names_gold,
            blobs_new: stats.blobs_new,
            index_ms,
            query_ms,
        };
        progress(&result);
        results.push(result);
    }
    let mut channels = BTreeMap::new();
    let n = results.len().max(1) as f64;
    for name in CHANNELS {
        let mut sum = ChannelMetrics::default();
        for r in &results {
            if let Some(m) = r.metrics.get(name) {
                sum.recall_at_1 += m.recall_at_1 / n;
                sum.recall_at_5 += m.recall_at_5 / n;
                sum.recall_at_10 += m.recall_at_10 / n;
                sum.mrr += m.mrr / n;
            }
        }
        channels.insert(name.to_string(), sum);
    }
    let query_ms_max = queries.iter().copied().fold(0.0, f64::max);
    let windows_checked: u32 = results.iter().map(|r| r.windows_checked).sum();
    let windows_on_change: u32 = results.iter().map(|r| r.windows_on_change).sum();
    Ok(EvalReport {
        instances: results.len(),
        channels,
        full_index_ms_p50: median(&mut full),
        incremental_index_ms_p50: median(&mut incremental),
        query_ms_p50: median(&mut queries),
        query_ms_max,
        windows_checked,
        window_hit_rate: if windows_checked == 0 {
            0.0
        } else {
            f64::from(windows_on_change) / f64::from(windows_checked)
        },
        map_hit_rate: results.iter().filter(|r| r.map_names_gold).count() as f64 / n,
        results,
    })
}
