//! `airlock index|search|map|eval`: the retrieval engine (`airlock-codegraph`) from the shell.
//! Parsing and printing only; all logic is in the library.

use airlock_codegraph::{Engine, IndexProgress, QueryAnalysis, default_index_dir, eval};
use clap::{Args, Subcommand};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Where the index lives (shared by all retrieval commands).
#[derive(Debug, Args)]
pub struct IndexDirArg {
    /// Index directory [default: $AIRLOCK_HOME/codegraph, $XDG_CACHE_HOME/airlock/codegraph or ~/.cache/airlock/codegraph].
    #[arg(long, value_name = "DIR")]
    index_dir: Option<PathBuf>,
}

impl IndexDirArg {
    pub(super) fn resolve(&self) -> PathBuf {
        self.index_dir.clone().unwrap_or_else(default_index_dir)
    }
}

/// The repository a retrieval command works on: a local path, or a URL mirrored once into the
/// cache (as `airlock run` does) and reused by every later command.
#[derive(Debug, Args)]
pub struct RepoArg {
    /// A git repository: a local path (bare or with a work tree), opened in place, or a URL
    /// (https, ssh, git, file, or user@host:path), cloned once into the cache directory.
    repo: String,
    /// Where URLs are mirrored [default: $AIRLOCK_HOME/mirrors, $XDG_CACHE_HOME/airlock/mirrors or ~/.cache/airlock/mirrors].
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
}

impl RepoArg {
    /// The repository's path: the local path as given, else the URL's mirror (cloned now
    /// if the cache does not have it yet, without fetching if it does).
    pub(super) fn open(&self) -> anyhow::Result<PathBuf> {
        let local = PathBuf::from(&self.repo);
        if local.exists() {
            return Ok(local);
        }
        let dir = self.cache_dir.clone().unwrap_or_else(|| {
            // Beside the default index directory: one cache root for both.
            let index = default_index_dir();
            index
                .parent()
                .map_or_else(|| index.join("mirrors"), |root| root.join("mirrors"))
        });
        let mirror = airlock_checkout::MirrorCache::new(&dir)?.mirror(&self.repo)?;
        if mirror.origin() == airlock_checkout::MirrorOrigin::Cloned {
            eprintln!(
                "airlock: mirrored {} into {}",
                mirror.source(),
                mirror.path().display()
            );
        }
        Ok(mirror.path().to_path_buf())
    }
}

/// Arguments of `airlock index`.
#[derive(Debug, Args)]
pub struct IndexArgs {
    #[command(flatten)]
    repo: RepoArg,
    /// Commit (any revision) to index.
    #[arg(long, default_value = "HEAD")]
    commit: String,
    /// Print the statistics as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    index_dir: IndexDirArg,
}

/// Arguments of `airlock search`.
#[derive(Debug, Args)]
pub struct SearchArgs {
    #[command(flatten)]
    repo: RepoArg,
    /// The query (an issue's text works).
    query: String,
    /// Number of hits (at most the files some channel ranks: each channel's top 100).
    #[arg(short, long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    k: u64,
    /// Print hits as JSON.
    #[arg(long)]
    json: bool,
    /// Commit (any revision) to search.
    #[arg(long, default_value = "HEAD")]
    commit: String,
    #[command(flatten)]
    index_dir: IndexDirArg,
}

/// Arguments of `airlock map`.
#[derive(Debug, Args)]
pub struct MapArgs {
    #[command(flatten)]
    repo: RepoArg,
    /// Personalise the map toward what this text names.
    #[arg(long, default_value = "")]
    query: String,
    /// Token budget (estimated as characters / 4).
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..))]
    tokens: u64,
    /// Commit (any revision) to map.
    #[arg(long, default_value = "HEAD")]
    commit: String,
    #[command(flatten)]
    index_dir: IndexDirArg,
}

/// Subcommands of `airlock eval`.
#[derive(Debug, Subcommand)]
pub enum EvalCommand {
    /// File-level retrieval recall on SWE-bench-style instances against local mirrors.
    Retrieval(EvalRetrievalArgs),
    /// The injection detector's recall per category and false positives on a labelled corpus.
    Injection(super::eval_injection::EvalInjectionArgs),
    /// How often the best-matching merged pull request (before each instance's base commit)
    /// touched a file the gold patch edits: hit@1 and hit@3, beside the latest merged ones.
    History(super::history::EvalHistoryArgs),
}

/// Arguments of `airlock eval retrieval`.
#[derive(Debug, Args)]
pub struct EvalRetrievalArgs {
    /// JSON-lines file of instances (instance_id, repo, base_commit, problem_statement, patch).
    #[arg(long, value_name = "FILE.jsonl")]
    instances: PathBuf,
    /// Directory of mirrors named <owner>+<name> (bare or normal clones; <owner>+<name>/repo also accepted).
    #[arg(long, value_name = "DIR")]
    mirrors: PathBuf,
    /// Print the full report as JSON.
    #[arg(long)]
    json: bool,
    /// Evaluate only the first N instances.
    #[arg(long)]
    limit: Option<usize>,
    /// Index directory [default: a fresh temporary one, so first indexes are full].
    #[arg(long, value_name = "DIR")]
    index_dir: Option<PathBuf>,
}

fn progress_printer(label: &str) -> impl FnMut(IndexProgress) + '_ {
    let mut last = 0usize;
    move |p: IndexProgress| {
        // Every 200 blobs and at the end: enough to show life on a large repository.
        if p.done == p.total || p.done >= last + 200 {
            last = p.done;
            eprintln!("{label}: extracted {}/{} new blobs", p.done, p.total);
        }
    }
}

/// `airlock index`.
pub fn index(args: IndexArgs) -> anyhow::Result<ExitCode> {
    let repo = args.repo.open()?;
    let mut engine = Engine::open(&repo, &args.index_dir.resolve())?;
    let mut progress = progress_printer("index");
    let stats = engine.index_with_progress(&args.commit, &mut progress)?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&stats)?);
    } else {
        outln!(
            "indexed {} at {}: {} files ({} searchable, {} with structure, {} skipped); {} new blobs, {} reused; {} ms",
            repo.display(),
            stats.commit,
            stats.files,
            stats.indexed,
            stats.structural,
            stats.skipped,
            stats.blobs_new,
            stats.blobs_reused,
            stats.elapsed_ms
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn rank_text(rank: Option<u32>) -> String {
    rank.map_or_else(|| "-".to_string(), |r| r.to_string())
}

/// `airlock search`.
pub fn search(args: SearchArgs) -> anyhow::Result<ExitCode> {
    let repo = args.repo.open()?;
    let mut engine = Engine::open(&repo, &args.index_dir.resolve())?;
    let analysis = QueryAnalysis::new(&args.query);
    if analysis.terms.is_empty() && analysis.paths.is_empty() && analysis.identifiers.is_empty() {
        anyhow::bail!(
            "the query {:?} has no searchable terms (only punctuation or very common words); \
             describe the problem in words, or name a file or an identifier",
            args.query
        );
    }
    let mut progress = progress_printer("index");
    engine.index_with_progress(&args.commit, &mut progress)?;
    let k = usize::try_from(args.k).unwrap_or(usize::MAX);
    let hits = engine.search(&args.commit, &args.query, k)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&hits)?)?;
    } else {
        for (i, hit) in hits.iter().enumerate() {
            let mut flags = String::new();
            if hit.is_test {
                flags.push_str(" [test]");
            }
            if hit.is_vendored {
                flags.push_str(" [vendored]");
            }
            let within = hit.symbol.as_deref().map_or(String::new(), |s| {
                format!("  in {}", airlock_codegraph::files::printable_path(s))
            });
            writeln!(
                out,
                "{:>3}. {}:{}-{}{}  score {:.5}  (lexical {}, structural {}, symbol {}, proximity {}){}",
                i + 1,
                airlock_codegraph::files::printable_path(&hit.path),
                hit.line_start,
                hit.line_end,
                within,
                hit.score,
                rank_text(hit.lexical_rank),
                rank_text(hit.structural_rank),
                rank_text(hit.symbol_rank),
                rank_text(hit.proximity_rank),
                flags
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `airlock map`.
pub fn map(args: MapArgs) -> anyhow::Result<ExitCode> {
    let repo = args.repo.open()?;
    let mut engine = Engine::open(&repo, &args.index_dir.resolve())?;
    let mut progress = progress_printer("index");
    engine.index_with_progress(&args.commit, &mut progress)?;
    let tokens = usize::try_from(args.tokens).unwrap_or(usize::MAX);
    let map = engine.repo_map(&args.commit, &args.query, tokens)?;
    if map.is_empty() {
        eprintln!(
            "airlock: note: nothing fits in {tokens} tokens (or the commit has no definitions); \
             give a larger --tokens"
        );
    }
    out!("{map}");
    Ok(ExitCode::SUCCESS)
}

/// `airlock eval ...`.
pub fn eval(cmd: EvalCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        EvalCommand::Retrieval(args) => eval_retrieval(args),
        EvalCommand::Injection(args) => super::eval_injection::run(args),
        EvalCommand::History(args) => super::history::eval_history(args),
    }
}

fn fmt_rank(rank: Option<&Option<u32>>) -> String {
    rank_text(rank.copied().flatten())
}

fn eval_retrieval(args: EvalRetrievalArgs) -> anyhow::Result<ExitCode> {
    let options = eval::EvalOptions {
        instances: args.instances,
        mirrors: args.mirrors,
        index_dir: args.index_dir,
        limit: args.limit,
    };
    let report = eval::run(&options, &mut |r| {
        eprintln!(
            "{}: first gold rank fused {} (lexical {}, structural {}, symbol {}, proximity {}); index {:.0} ms ({} new blobs), query {:.1} ms",
            r.instance_id,
            fmt_rank(r.first_gold_rank.get("fused")),
            fmt_rank(r.first_gold_rank.get("lexical")),
            fmt_rank(r.first_gold_rank.get("structural")),
            fmt_rank(r.first_gold_rank.get("symbol")),
            fmt_rank(r.first_gold_rank.get("proximity")),
            r.index_ms,
            r.blobs_new,
            r.query_ms
        );
    })?;
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(out, "instances: {}", report.instances)?;
    writeln!(
        out,
        "{:<11} {:>9} {:>9} {:>10} {:>7}",
        "channel", "recall@1", "recall@5", "recall@10", "MRR"
    )?;
    for name in eval::CHANNELS {
        if let Some(m) = report.channels.get(name) {
            writeln!(
                out,
                "{:<11} {:>9.3} {:>9.3} {:>10.3} {:>7.3}",
                name, m.recall_at_1, m.recall_at_5, m.recall_at_10, m.mrr
            )?;
        }
    }
    writeln!(
        out,
        "full index p50 {:.0} ms; incremental index p50 {:.0} ms; query p50 {:.1} ms (max {:.1} ms)",
        report.full_index_ms_p50,
        report.incremental_index_ms_p50,
        report.query_ms_p50,
        report.query_ms_max
    )?;
    writeln!(
        out,
        "line windows: {:.3} of the {} gold files in the top 10 have their hit window on a line the gold patch changes",
        report.window_hit_rate, report.windows_checked
    )?;
    writeln!(
        out,
        "repository map: {:.3} of the {} instances have a gold file in the map at {} tokens",
        report.map_hit_rate,
        report.instances,
        eval::MAP_TOKENS
    )?;
    Ok(ExitCode::SUCCESS)
}
