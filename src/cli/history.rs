//! `airlock history search` and `airlock eval history`: the merged-pull-request memory
//! (`airlock_codegraph::history`) from the shell. Parsing and printing only.

use super::retrieval::{IndexDirArg, RepoArg};
use airlock_codegraph::history::{self, HistoryHit, HistoryIndex};
use airlock_codegraph::{QueryAnalysis, eval};
use clap::{Args, Subcommand};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Subcommands of `airlock history`.
#[derive(Debug, Subcommand)]
pub enum HistoryCommand {
    /// The merged pull requests that match a query best, from the repository's history up to a
    /// commit (merge commits and `(#N)` squash commits, plus forge records a run saved).
    Search(HistorySearchArgs),
}

/// Arguments of `airlock history search`.
#[derive(Debug, Args)]
pub struct HistorySearchArgs {
    #[command(flatten)]
    repo: RepoArg,
    /// The query (an issue's text works).
    query: String,
    /// Only pull requests merged into this commit's history are visible.
    #[arg(long, default_value = "HEAD")]
    commit: String,
    /// Number of pull requests.
    #[arg(short, long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    k: u64,
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    index_dir: IndexDirArg,
}

/// Arguments of `airlock eval history`.
#[derive(Debug, Args)]
pub struct EvalHistoryArgs {
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
    /// Index directory [default: a fresh temporary one].
    #[arg(long, value_name = "DIR")]
    index_dir: Option<PathBuf>,
}

/// `airlock history ...`.
pub fn run(cmd: HistoryCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        HistoryCommand::Search(args) => search(args),
    }
}

/// One line per pull request: `#N title — files (+I -D) score S`; the one rendering of a
/// history hit for a person (the supervisor renders its own for the model).
pub fn render_hit(rank: usize, hit: &HistoryHit) -> String {
    let pr = &hit.pr;
    let shown: Vec<&str> = pr.files.iter().take(6).map(String::as_str).collect();
    let more = pr.files.len().saturating_sub(shown.len());
    let files = if more > 0 {
        format!("{} (+{more} more)", shown.join(", "))
    } else {
        shown.join(", ")
    };
    airlock_policies::terminal::escaped_line(&format!(
        "{rank:>2}. #{} {}  [{}]  +{} -{}  merged {}  score {:.2}",
        pr.number, pr.title, files, pr.insertions, pr.deletions, pr.merged_at, hit.score
    ))
    .into_owned()
}

fn search(args: HistorySearchArgs) -> anyhow::Result<ExitCode> {
    let repo = args.repo.open()?;
    let analysis = QueryAnalysis::new(&args.query);
    if analysis.terms.is_empty() && analysis.paths.is_empty() && analysis.identifiers.is_empty() {
        anyhow::bail!(
            "the query {:?} has no searchable terms (only punctuation or very common words); \
             describe the problem in words, or name a file or an identifier",
            args.query
        );
    }
    let index = HistoryIndex::build(&repo, &args.index_dir.resolve(), None, &args.commit)?;
    let k = usize::try_from(args.k).unwrap_or(usize::MAX);
    let hits = index.search(&args.query, k);
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&hits)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let stats = index.stats();
    eprintln!(
        "airlock: {} merged pull requests up to {} ({} commits read, {} new records, {} from the forge)",
        stats.pulls, stats.commit, stats.commits_walked, stats.records_new, stats.from_forge
    );
    if hits.is_empty() {
        writeln!(out, "no merged pull request matches")?;
    }
    for (i, hit) in hits.iter().enumerate() {
        writeln!(out, "{}", render_hit(i + 1, hit))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `airlock eval history`.
pub fn eval_history(args: EvalHistoryArgs) -> anyhow::Result<ExitCode> {
    let options = eval::EvalOptions {
        instances: args.instances,
        mirrors: args.mirrors,
        index_dir: args.index_dir,
        limit: args.limit,
    };
    let report = history::evaluate(&options, &mut |r| {
        eprintln!(
            "{}: {} pull requests; best {}; hit@1 {}, hit@3 {}; {:.0} ms",
            r.instance_id,
            r.pulls,
            r.top
                .first()
                .map_or_else(|| "-".to_owned(), |(n, s)| format!("#{n} ({s:.1})")),
            r.hit_at_1,
            r.hit_at_3,
            r.build_ms
        );
    })?;
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(
        out,
        "instances: {} ({} with merged pull requests before their base commit)",
        report.instances, report.with_history
    )?;
    writeln!(out, "{:<22} {:>6} {:>6}", "ranking", "hit@1", "hit@3")?;
    writeln!(
        out,
        "{:<22} {:>6.3} {:>6.3}",
        "search_history", report.hit_at_1, report.hit_at_3
    )?;
    writeln!(
        out,
        "{:<22} {:>6.3} {:>6.3}",
        "latest merged (base)", report.latest_hit_at_1, report.latest_hit_at_3
    )?;
    for row in &report.thresholds {
        writeln!(
            out,
            "best score >= {:>4.1}: {:>4} instances, best match touches a gold file in {} ({:.3})",
            row.threshold,
            row.above,
            row.hits,
            if row.above == 0 {
                0.0
            } else {
                row.hits as f64 / row.above as f64
            }
        )?;
    }
    writeln!(out, "build p50 {:.0} ms", report.build_ms_p50)?;
    Ok(ExitCode::SUCCESS)
}
