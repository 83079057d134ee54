//! What a run costs, measured: scripted runs of the real supervisor loop (retrieval, bounded
//! reads, the audit log and the trajectory, all real) against the testkit's model server,
//! which speaks the Anthropic protocol, counts tokens and simulates the provider's prompt cache.
//! Only the test command is a stand-in (the script runs no test), so the figures are the
//! harness's and the conversation's.
//!
//! `cargo run --release -p airlock-supervisor --example run_cost -- cost` prints, for a 40-turn
//! run on a generated 2,000-file repository, the input tokens of each turn, the share read from
//! the cache, the harness's own time between a model answer and the next request, and the cost
//! against the same run with caching and condensation off. `-- sequence 8` and `-- parallel 8`
//! run eight such runs one after another or all at once (one repository, one shared index) and
//! print the wall time and the process's peak memory. `bench/run_cost.sh` runs all three.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use airlock_policies::testrun::{ParsedRun, TestInventory, TestRunner as Runner};
use airlock_supervisor::ports::{
    Baseline, BaselineError, OpenPrReply, PortResult, PrSink, RunRegistration, TestReport,
    TestRunner,
};
use airlock_supervisor::runner::{Overrides, RunArgs, run_issue};
use airlock_testkit::mockmodel::{Exchange, MockModel};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const FILES: usize = 2_000;
/// Files big enough that one read returns about 2,000 tokens; the script reads these.
const BIG_FILES: usize = 20;
const TURNS: usize = 40;
const MODEL: &str = "claude-sonnet-4-5";

/// The test command's stand-in: one passing test at base, never run again by the script.
struct NoTests;

impl TestRunner for NoTests {
    fn baseline(&self) -> Result<Baseline, BaselineError> {
        let mut parsed = ParsedRun::default();
        parsed.tests.insert(
            "tests.test_core.CoreTest.test_ok".to_string(),
            airlock_policies::testrun::TestStatus::Passed,
        );
        Ok(Baseline {
            environment: Default::default(),
            command: vec![
                "python3".into(),
                "-m".into(),
                "unittest".into(),
                "-v".into(),
            ],
            inventory: TestInventory::from_base_run(Runner::Unittest, &parsed, Some(0), None)
                .unwrap(),
            prepare: None,
            base_seconds: 0.0,
            blocked: Vec::new(),
            hints: Vec::new(),
        })
    }

    fn run(&self, selector: Option<&str>) -> PortResult<TestReport> {
        Ok(TestReport {
            selector: selector.map(str::to_string),
            exit_code: Some(0),
            timed_out: false,
            output: String::new(),
            parsed: ParsedRun::default(),
            blocked: Vec::new(),
        })
    }
}

/// Registers every run and queues nothing (the script never opens a pull request).
#[derive(Clone)]
struct NoBroker;

impl PrSink for NoBroker {
    fn register_run(&mut self, _run: &RunRegistration) -> PortResult<()> {
        Ok(())
    }

    fn open_pr(
        &mut self,
        _run_id: &str,
        _request_id: &str,
        _arguments: &Value,
        _report: &airlock_supervisor::ports::RunReport,
    ) -> PortResult<OpenPrReply> {
        Ok(OpenPrReply::Queued { queue_id: 1 })
    }
}

fn module(i: usize, lines: usize) -> String {
    let mut text = format!("\"\"\"Module {i} of the generated service.\"\"\"\n\n");
    let mut n = 0;
    while text.lines().count() < lines {
        text.push_str(&format!(
            "def handler_{i}_{n}(request, limit={n}):\n    \"\"\"Handle request kind {n} of module {i}.\"\"\"\n    return request.value + limit * {i}\n\n"
        ));
        n += 1;
    }
    text
}

/// A 2,000-file Python repository: `BIG_FILES` of 250 lines, the rest of 30.
fn generate_repo(dir: &Path) -> String {
    let repo = dir.join("service");
    let mut files: Vec<(String, String)> = Vec::new();
    for i in 0..FILES {
        let lines = if i < BIG_FILES { 250 } else { 30 };
        files.push((
            format!("service/pkg_{}/module_{i}.py", i % 40),
            module(i, lines),
        ));
    }
    files.push((
        "tests/test_core.py".into(),
        "import unittest\n\nclass CoreTest(unittest.TestCase):\n    def test_ok(self):\n        pass\n".into(),
    ));
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    airlock_testkit::git::repo_with(&repo, &refs)
}

/// Forty turns: reads of the big files (about 2,000 tokens each) between searches, then an
/// escalation.
fn script() -> Vec<Value> {
    let mut turns = Vec::new();
    for t in 0..TURNS - 1 {
        let turn = if t % 2 == 0 {
            let i = (t / 2) % BIG_FILES;
            json!({"tool_calls": [{"name": "read_file", "arguments": {
                "path": format!("service/pkg_{}/module_{i}.py", i % 40),
                "start_line": 1, "end_line": 250}}]})
        } else {
            json!({"tool_calls": [{"name": "search_repo", "arguments": {
                "query": format!("handler request limit module {t}")}}]})
        };
        turns.push(turn);
    }
    let outcome = json!({
        "outcome": "escalate", "summary": "benchmark run", "root_cause": "none",
        "files_changed": [], "tests_added": [], "test_evidence": {"before": "", "after": ""},
        "also_noticed": [], "injection_observed": [], "confidence": 0.2,
    });
    turns.push(json!({"text": outcome.to_string()}));
    turns
}

/// One run's figures.
struct Measured {
    exchanges: Vec<Exchange>,
    usage: airlock_supervisor::runner::ModelUsage,
}

fn run_once(
    work: &Path,
    repo: &Path,
    name: &str,
    prompt_cache: bool,
    condense_above_tokens: usize,
) -> Measured {
    let mock = MockModel::start_anthropic(script());
    let config = work.join(format!("{name}.toml"));
    // The key is any variable the process has: the local server ignores it.
    std::fs::write(
        &config,
        format!(
            "[tests]\ncommand = [\"python3\", \"-m\", \"unittest\", \"-v\"]\n\
             [budgets]\nmax_turns = {}\nmax_reads = 60\n\
             [model.config]\nbase_url = \"{}\"\napi_key_env = \"HOME\"\nprompt_cache = {prompt_cache}\n\
             [model.config.prices.{MODEL}]\ninput_per_mtok_usd = 3.0\noutput_per_mtok_usd = 15.0\n\
             [context]\ncondense_above_tokens = {condense_above_tokens}\n\
             [paths]\nruns_root = \"runs\"\naudit_log = \"audit-{name}.jsonl\"\ncache_dir = \"cache\"\nindex_dir = \"index\"\n",
            TURNS + 5,
            mock.base
        ),
    )
    .unwrap();
    let issue = work.join(format!("{name}.json"));
    std::fs::write(
        &issue,
        json!({"id": format!("BENCH-{}", name.len()), "title": "handler returns the wrong limit",
               "body": "`handler_3_2` multiplies the limit by the module number; requests over the limit pass.",
               "labels": ["bug", "ready-for-agent"]})
        .to_string(),
    )
    .unwrap();
    let report = run_issue(
        &RunArgs {
            repo: Some(repo.display().to_string()),
            commit: Some("HEAD".into()),
            issue: airlock_supervisor::github::IssueSource::File(issue),
            model: Some(format!("anthropic:{MODEL}")),
            agent: None,
            config: Some(config),
            exe: PathBuf::from("/nonexistent/airlock"),
            fetch: false,
            keep: false,
            progress: airlock_supervisor::progress::ProgressMode::Quiet,
        },
        Overrides {
            pr_sink: Some(Box::new(NoBroker)),
            readers: None,
            tests: Some(Box::new(NoTests)),
            broker: None,
            answer: None,
        },
    )
    .unwrap();
    Measured {
        exchanges: mock.exchanges(),
        usage: report.usage,
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|l| l.trim_start_matches([' ', '\t', ':']).to_string())
        .unwrap_or_default();
    format!(
        "{cores} cores ({model}), {} build",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    )
}

fn cost(work: &Path, repo: &Path) {
    // Index the repository once first, as a second run on a project finds it.
    let warm = Instant::now();
    let _ = run_once(work, repo, "warm", true, 24_000);
    println!(
        "first run (index of {FILES} files built): {:.1} s",
        warm.elapsed().as_secs_f64()
    );
    let on = run_once(work, repo, "cached", true, 24_000);
    let off = run_once(work, repo, "plain", false, 0);
    println!(
        "turn | input tokens | read from cache | written | share cached || plain run: input tokens"
    );
    let mut shares_after_2 = Vec::new();
    for (t, (a, b)) in on.exchanges.iter().zip(&off.exchanges).enumerate() {
        let (Some(u), Some(p)) = (a.usage, b.usage) else {
            continue;
        };
        let share = u.cache_read as f64 / u.prompt_tokens.max(1) as f64;
        if t >= 2 {
            shares_after_2.push(share);
        }
        println!(
            "{:>4} | {:>12} | {:>15} | {:>7} | {:>11.1}% || {:>10}",
            t + 1,
            u.prompt_tokens,
            u.cache_read,
            u.cache_write,
            100.0 * share,
            p.prompt_tokens
        );
    }
    let (read, input) = on
        .exchanges
        .iter()
        .skip(2)
        .filter_map(|e| e.usage)
        .fold((0u64, 0u64), |(r, i), u| {
            (r + u.cache_read, i + u.prompt_tokens)
        });
    println!(
        "after turn 2: {:.1}% of input tokens read from the cache (lowest turn {:.1}%)",
        100.0 * read as f64 / input.max(1) as f64,
        100.0 * shares_after_2.iter().copied().fold(1.0, f64::min)
    );
    println!(
        "cost: ${:.4} with caching and condensation, ${:.4} without: {:.1}% ({} / {} input tokens)",
        on.usage.cost_usd,
        off.usage.cost_usd,
        100.0 * on.usage.cost_usd / off.usage.cost_usd,
        on.usage.input_tokens,
        off.usage.input_tokens
    );
    let mut gaps: Vec<f64> = on
        .exchanges
        .windows(2)
        .map(|w| w[1].received.duration_since(w[0].answered).as_secs_f64() * 1e3)
        .collect();
    gaps.sort_by(f64::total_cmp);
    println!(
        "harness time per turn (model answer to next request): p50 {:.2} ms, p90 {:.2} ms, max {:.2} ms",
        percentile(&gaps, 0.5),
        percentile(&gaps, 0.9),
        gaps.last().copied().unwrap_or(0.0)
    );
}

fn many(work: &Path, repo: &Path, n: usize, parallel: bool) {
    let started = Instant::now();
    if parallel {
        std::thread::scope(|s| {
            for i in 0..n {
                let name = format!("p{}", "x".repeat(i + 1));
                s.spawn(move || run_once(work, repo, &name, true, 24_000));
            }
        });
    } else {
        for i in 0..n {
            run_once(work, repo, &format!("s{}", "x".repeat(i + 1)), true, 24_000);
        }
    }
    let wall: Duration = started.elapsed();
    println!(
        "{n} runs {}: wall {:.1} s, peak memory {:.0} MiB",
        if parallel {
            "in parallel"
        } else {
            "in sequence"
        },
        wall.as_secs_f64(),
        peak_rss_mib()
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let work = tempfile::tempdir().unwrap();
    let gen_started = Instant::now();
    let repo = work.path().join("service");
    generate_repo(work.path());
    println!(
        "machine: {}; repository of {FILES} files generated in {:.1} s",
        machine(),
        gen_started.elapsed().as_secs_f64()
    );
    match args.first().map(String::as_str) {
        Some("sequence") | Some("parallel") => {
            let n = args.get(1).and_then(|n| n.parse().ok()).unwrap_or(8);
            // Built once before the clock starts, as for every run after a project's first.
            let _ = run_once(work.path(), &repo, "warm", true, 24_000);
            many(work.path(), &repo, n, args[0] == "parallel");
        }
        _ => cost(work.path(), &repo),
    }
}
