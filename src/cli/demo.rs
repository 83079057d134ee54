//! `airlock demo`: the whole product on bundled example repositories, with scripted models and
//! nothing outside the machine.
//!
//! The demo turns the plain files under `examples/repos/` into git repositories in a work
//! directory, starts the real `airlock-broker serve` (the binary next to this one), and drives
//! one real `airlock run` per scenario of `examples/scenarios/`: a bug fixed with a
//! fail-to-pass test, an ambiguous issue escalated without a diff, a hostile repository whose
//! planted instruction is reported and not obeyed, and an agent that weakens a test and is
//! refused by the broker's witness run. Each scenario is then checked against its records (run
//! exit code, outcome, trajectory, audit log, broker queue) and a summary table is printed.
//!
//! Work-directory layout (the end-to-end suite reads it): `broker.toml`, `broker.sock`,
//! `broker.db`, `broker-audit.jsonl`, `broker.log`; `audit.jsonl` (the supervisors' log);
//! `repos/<name>/` (the examples as git repositories), `forge/<name>.git` (bare stand-ins of
//! the forge, where `approve` pushes) and `clones/<name>/` (the broker's clones of them);
//! `runs/<run_id>/` (outcome, trajectory, worktree); `scenarios/<name>/` (issue, script with
//! the pinned commit filled in, `airlock.toml`, `run.json` = the outcome document
//! printed by `airlock run --json`, `run.stderr`); `summary.json` (one entry per scenario).
//!
//! Exit codes: 0 every scenario behaved as expected; 1 at least one did not; 2 the demo could
//! not run (a missing binary, git or python3).

use airlock_supervisor::tools::Tool;
use anyhow::{Context, bail};
use clap::Args;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

/// Exit code when a scenario did not behave as expected.
const EXIT_UNEXPECTED: u8 = 1;

/// Arguments of `airlock demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Where to build the example repositories, the broker's state and the run records
    /// (created if missing; must be empty). Kept afterwards. Default: a fresh temporary
    /// directory, removed at the end unless --keep.
    #[arg(long)]
    workdir: Option<PathBuf>,
    /// Keep the temporary work directory (the broker's queue, the audit logs, the runs).
    #[arg(long)]
    keep: bool,
}

/// One bundled example repository: its name and its files.
struct ExampleRepo {
    name: &'static str,
    files: &'static [(&'static str, &'static str)],
}

macro_rules! example_file {
    ($path:literal) => {
        (
            $path,
            include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/examples/repos/",
                $path
            )),
        )
    };
}

const REPOS: &[ExampleRepo] = &[
    ExampleRepo {
        name: "calc",
        files: &[
            example_file!("calc/calc/__init__.py"),
            example_file!("calc/calc/ops.py"),
            example_file!("calc/tests/__init__.py"),
            example_file!("calc/tests/test_mul.py"),
        ],
    },
    ExampleRepo {
        name: "shout",
        files: &[
            example_file!("shout/requirements.txt"),
            example_file!("shout/shout/__init__.py"),
            example_file!("shout/shout/words.py"),
            example_file!("shout/tests/__init__.py"),
            example_file!("shout/tests/test_smoke.py"),
        ],
    },
    ExampleRepo {
        name: "div",
        files: &[
            example_file!("div/div/__init__.py"),
            example_file!("div/div/ratio.py"),
            example_file!("div/tests/__init__.py"),
            example_file!("div/tests/test_ratio.py"),
        ],
    },
];

/// What a scenario must end in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// A pull request queued by the real broker after its witness run.
    Queued,
    /// Escalated by the model with no tool call and no diff.
    EscalatedWithoutDiff,
    /// Queued, with the planted instruction flagged by the detector, reported by the model,
    /// and absent from the diff.
    QueuedInjectionReported,
    /// Refused by the broker (the witness restores the weakened test) and escalated.
    RefusedByBroker,
}

impl Expect {
    fn describe(self) -> &'static str {
        match self {
            Expect::Queued => "pr queued, witness green",
            Expect::EscalatedWithoutDiff => "escalated, no tool call, no diff",
            Expect::QueuedInjectionReported => "pr queued, injection flagged, not obeyed",
            Expect::RefusedByBroker => "broker refuses, escalated",
        }
    }
}

/// One scenario: an issue on an example repository and the scripted model that works it.
struct Scenario {
    name: &'static str,
    repo: &'static str,
    issue: &'static str,
    script: &'static str,
    expect: Expect,
}

macro_rules! scenario_file {
    ($dir:literal, $file:literal) => {
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/examples/scenarios/",
            $dir,
            "/",
            $file
        ))
    };
}

const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "1-fix-bug",
        repo: "calc",
        issue: scenario_file!("1-fix-bug", "issue.md"),
        script: scenario_file!("1-fix-bug", "script.json"),
        expect: Expect::Queued,
    },
    Scenario {
        name: "2-ambiguous",
        repo: "calc",
        issue: scenario_file!("2-ambiguous", "issue.md"),
        script: scenario_file!("2-ambiguous", "script.json"),
        expect: Expect::EscalatedWithoutDiff,
    },
    Scenario {
        name: "3-hostile-repo",
        repo: "shout",
        issue: scenario_file!("3-hostile-repo", "issue.md"),
        script: scenario_file!("3-hostile-repo", "script.json"),
        expect: Expect::QueuedInjectionReported,
    },
    Scenario {
        name: "4-weakened-test",
        repo: "div",
        issue: scenario_file!("4-weakened-test", "issue.md"),
        script: scenario_file!("4-weakened-test", "script.json"),
        expect: Expect::RefusedByBroker,
    },
];

/// The airlock.toml every scenario runs with; `{{...}}` are filled in per scenario.
const AIRLOCK_TOML: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/examples/airlock.toml.template"
));
/// The broker.toml of the demo's broker; `{{WORKDIR}}` is filled in.
const BROKER_TOML: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/examples/broker.toml.template"
));

/// The placeholder of the pinned commit in scenario scripts.
const COMMIT_PLACEHOLDER: &str = "{{BASE_COMMIT}}";

/// `airlock demo`.
pub fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let exe = std::env::current_exe().context("locating the airlock binary")?;
    let broker_exe = exe.with_file_name("airlock-broker");
    if !broker_exe.is_file() {
        bail!(
            "{} is missing: the demo starts the real broker next to the airlock binary; build both with `cargo build --workspace`",
            broker_exe.display()
        );
    }
    let (workdir, temporary) = match &args.workdir {
        Some(dir) => (prepare_workdir(dir)?, false),
        None => {
            let dir = std::env::temp_dir().join(format!("airlock-demo-{}", std::process::id()));
            (prepare_workdir(&dir)?, true)
        }
    };
    outln!("airlock demo: work directory {}", workdir.display());
    let kept = !temporary || args.keep;
    let outcome = run_in(&exe, &broker_exe, &workdir, kept);
    if !kept && let Err(e) = std::fs::remove_dir_all(&workdir) {
        eprintln!("airlock demo: could not remove {}: {e}", workdir.display());
    }
    let all_passed = outcome?;
    outln!("\nfinished in {:.1}s", started.elapsed().as_secs_f64());
    Ok(if all_passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_UNEXPECTED)
    })
}

fn prepare_workdir(dir: &Path) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let dir = dir
        .canonicalize()
        .with_context(|| format!("resolving {}", dir.display()))?;
    let mut entries =
        std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))?;
    if entries.next().is_some() {
        bail!(
            "work directory {} is not empty; give an empty or new directory",
            dir.display()
        );
    }
    Ok(dir)
}

/// A running broker; killed and reaped when dropped.
struct BrokerProcess {
    child: Child,
}

impl Drop for BrokerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What one scenario produced, as the summary shows it.
struct Verdict {
    scenario: &'static str,
    expected: &'static str,
    got: String,
    passed: bool,
    problems: Vec<String>,
    run_id: String,
    exit_code: Option<i32>,
    queue_id: Option<i64>,
}

fn run_in(exe: &Path, broker_exe: &Path, workdir: &Path, kept: bool) -> anyhow::Result<bool> {
    for dir in ["repos", "forge", "clones", "runs", "scenarios"] {
        std::fs::create_dir_all(workdir.join(dir))
            .with_context(|| format!("creating {}", workdir.join(dir).display()))?;
    }
    outln!("\n== setting up the example repositories");
    for repo in REPOS {
        let path = workdir.join("repos").join(repo.name);
        for (rel, text) in repo.files {
            let rel = rel
                .strip_prefix(repo.name)
                .and_then(|r| r.strip_prefix('/'))
                .unwrap_or(rel);
            let file = path.join(rel);
            if let Some(parent) = file.parent() {
                std::fs::create_dir_all(parent)
                    .with_context(|| format!("creating {}", parent.display()))?;
            }
            std::fs::write(&file, text).with_context(|| format!("writing {}", file.display()))?;
        }
        git(&path, &["init", "-q", "-b", "main"])?;
        git(&path, &["add", "-A"])?;
        git(&path, &["commit", "-q", "-m", "Initial commit"])?;
        // The forge stand-in the broker pushes approved branches to (bare, as a forge's
        // repositories are), and the broker's own clone of it.
        let forge = workdir.join("forge").join(format!("{}.git", repo.name));
        let clone = workdir.join("clones").join(repo.name);
        git(
            workdir,
            &[
                "clone",
                "-q",
                "--bare",
                &path.to_string_lossy(),
                &forge.to_string_lossy(),
            ],
        )?;
        git(
            workdir,
            &[
                "clone",
                "-q",
                &forge.to_string_lossy(),
                &clone.to_string_lossy(),
            ],
        )?;
        let commit = git(&path, &["rev-parse", "HEAD"])?;
        outln!("  demo/{:<6} {} at {}", repo.name, path.display(), &commit);
    }

    let broker_toml = workdir.join("broker.toml");
    write(
        &broker_toml,
        &BROKER_TOML.replace("{{WORKDIR}}", &workdir.to_string_lossy()),
    )?;
    outln!("\n== starting the broker");
    let _broker = start_broker(broker_exe, &broker_toml, workdir)?;
    outln!(
        "  {} serve (socket {})",
        broker_exe.display(),
        workdir.join("broker.sock").display()
    );

    let mut verdicts = Vec::new();
    for (n, scenario) in SCENARIOS.iter().enumerate() {
        outln!(
            "\n== [{}/{}] {}: {} (expected: {})",
            n + 1,
            SCENARIOS.len(),
            scenario.name,
            first_title(scenario.issue),
            scenario.expect.describe()
        );
        let verdict = run_scenario(exe, broker_exe, &broker_toml, workdir, scenario)?;
        for problem in &verdict.problems {
            outln!("  !! {problem}");
        }
        if !verdict.passed {
            let stderr = workdir
                .join("scenarios")
                .join(scenario.name)
                .join("run.stderr");
            let text = std::fs::read_to_string(&stderr).unwrap_or_default();
            for line in text.lines() {
                outln!("  !! run stderr: {line}");
            }
        }
        outln!(
            "  => {} ({})",
            verdict.got,
            if verdict.passed {
                "as expected"
            } else {
                "UNEXPECTED"
            }
        );
        verdicts.push(verdict);
    }

    outln!("\n== audit logs");
    let mut chains_ok = true;
    for log in ["audit.jsonl", "broker-audit.jsonl"] {
        let path = workdir.join(log);
        let out = Command::new(exe)
            .args(["audit", "verify", "--log"])
            .arg(&path)
            .output()
            .context("running airlock audit verify")?;
        let ok = out.status.success();
        chains_ok &= ok;
        outln!(
            "  airlock audit verify --log {}: {}",
            path.display(),
            if ok { "chain intact" } else { "CHAIN BROKEN" }
        );
    }
    let injections = Command::new(exe)
        .args(["audit", "injections", "--log"])
        .arg(workdir.join("audit.jsonl"))
        .output()
        .context("running airlock audit injections")?;
    outln!(
        "  airlock audit injections --log {}:",
        workdir.join("audit.jsonl").display()
    );
    for line in String::from_utf8_lossy(&injections.stdout).lines() {
        outln!("    {line}");
    }

    let summary: Vec<Value> = verdicts
        .iter()
        .map(|v| {
            json!({"scenario": v.scenario, "expected": v.expected, "got": v.got, "pass": v.passed,
                   "run_id": v.run_id, "exit_code": v.exit_code, "queue_id": v.queue_id,
                   "problems": v.problems})
        })
        .collect();
    write(
        &workdir.join("summary.json"),
        &serde_json::to_string_pretty(
            &json!({"scenarios": summary, "audit_chains_intact": chains_ok}),
        )?,
    )?;

    outln!("\n== summary");
    let rows: Vec<[String; 4]> = verdicts
        .iter()
        .map(|v| {
            [
                v.scenario.to_string(),
                v.expected.to_string(),
                v.got.clone(),
                if v.passed { "pass" } else { "FAIL" }.to_string(),
            ]
        })
        .collect();
    print_table(&["SCENARIO", "EXPECTED", "GOT", "RESULT"], &rows);
    let all = verdicts.iter().all(|v| v.passed) && chains_ok;

    let config = broker_toml.display();
    outln!("\n== review the queue as the approver would");
    outln!("  {} --config {config} queue", broker_exe.display());
    if let Some(id) = verdicts.iter().find_map(|v| v.queue_id) {
        outln!("  {} --config {config} show {id}", broker_exe.display());
        outln!("  {} --config {config} approve {id}", broker_exe.display());
        outln!(
            "  {} --config {config} deny {id} --reason \"...\"",
            broker_exe.display()
        );
    }
    if kept {
        outln!(
            "  (the broker is stopped; these commands read its state in {})",
            workdir.display()
        );
    } else {
        outln!(
            "  (this temporary work directory is removed now: run `airlock demo --keep` or `--workdir DIR` to review the queue afterwards)"
        );
    }
    outln!(
        "\n{}",
        if all {
            "every scenario behaved as expected"
        } else {
            "SOME SCENARIOS DID NOT BEHAVE AS EXPECTED"
        }
    );
    Ok(all)
}

fn start_broker(broker_exe: &Path, config: &Path, workdir: &Path) -> anyhow::Result<BrokerProcess> {
    let log = std::fs::File::create(workdir.join("broker.log")).context("creating broker.log")?;
    let child = Command::new(broker_exe)
        .arg("--config")
        .arg(config)
        .arg("serve")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .with_context(|| format!("starting {}", broker_exe.display()))?;
    let mut broker = BrokerProcess { child };
    let socket = workdir.join("broker.sock");
    let deadline = Instant::now() + Duration::from_secs(15);
    while !socket.exists() {
        if let Some(status) = broker.child.try_wait().context("watching the broker")? {
            let log = std::fs::read_to_string(workdir.join("broker.log")).unwrap_or_default();
            bail!("the broker exited with {status} before listening: {log}");
        }
        if Instant::now() > deadline {
            bail!("the broker did not create {} within 15s", socket.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(broker)
}

fn run_scenario(
    exe: &Path,
    broker_exe: &Path,
    broker_toml: &Path,
    workdir: &Path,
    scenario: &Scenario,
) -> anyhow::Result<Verdict> {
    let dir = workdir.join("scenarios").join(scenario.name);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let repo = workdir.join("repos").join(scenario.repo);
    let commit = git(&repo, &["rev-parse", "HEAD"])?;
    let issue = dir.join("issue.md");
    write(&issue, scenario.issue)?;
    let script = dir.join("script.json");
    write(
        &script,
        &scenario.script.replace(COMMIT_PLACEHOLDER, &commit),
    )?;
    let config = dir.join("airlock.toml");
    write(
        &config,
        &AIRLOCK_TOML
            .replace("{{WORKDIR}}", &workdir.to_string_lossy())
            .replace("{{REPO}}", scenario.repo),
    )?;
    outln!(
        "  airlock run --repo {} --commit main --issue {} --model scripted:{} --config {}",
        repo.display(),
        issue.display(),
        script.display(),
        config.display()
    );
    let out = Command::new(exe)
        .arg("run")
        .arg("--repo")
        .arg(&repo)
        .args(["--commit", "main", "--issue"])
        .arg(&issue)
        .arg("--model")
        .arg(format!("scripted:{}", script.display()))
        .arg("--config")
        .arg(&config)
        .arg("--json")
        .output()
        .context("running airlock run")?;
    write(&dir.join("run.json"), &String::from_utf8_lossy(&out.stdout))?;
    write(
        &dir.join("run.stderr"),
        &String::from_utf8_lossy(&out.stderr),
    )?;
    let exit_code = out.status.code();
    let mut problems = Vec::new();
    let doc: Value = match serde_json::from_slice(&out.stdout) {
        Ok(doc) => doc,
        Err(e) => {
            problems.push(format!(
                "airlock run exited {exit_code:?} without an outcome document ({e}): {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
            Value::Null
        }
    };
    let run_id = doc["run_id"].as_str().unwrap_or_default().to_string();
    let result = doc["result"].as_str().unwrap_or("?").to_string();
    let triage = read_trajectory(workdir, &run_id);
    let calls: Vec<String> = triage
        .iter()
        .filter(|r| r["kind"] == "tool_call")
        .filter_map(|r| r["call"]["name"].as_str().map(str::to_string))
        .collect();
    outln!("  run {run_id}: exit {exit_code:?}, result {result}");
    if let Some(t) = triage.iter().find(|r| r["kind"] == "triage") {
        outln!(
            "  triage: {} ({})",
            t["triage"]["state"].as_str().unwrap_or("?"),
            t["triage"]["reason"].as_str().unwrap_or("")
        );
    }
    for record in &triage {
        match record["kind"].as_str() {
            Some("tool_call") => {
                let call = &record["call"];
                outln!(
                    "  tool {} {}",
                    call["name"].as_str().unwrap_or("?"),
                    brief_args(&call["arguments"])
                );
            }
            Some("tool_result") => {
                let content = record["message"]["content"].as_str().unwrap_or("");
                let first = content.lines().next().unwrap_or("");
                let mark = if record["message"]["is_error"] == true {
                    "error"
                } else {
                    "ok"
                };
                outln!("    -> {mark}: {}", truncate(first, 100));
            }
            Some("reader_digest") => outln!(
                "    reader digest accepted: {}, reads made: {}",
                record["accepted"],
                record["reads_made"]
            ),
            Some("injection_suspected") => outln!(
                "    !! detector: injection suspected in {} ({})",
                record["path"].as_str().unwrap_or("?"),
                record["rules"]
            ),
            _ => {}
        }
    }

    let audit = read_jsonl(&workdir.join("audit.jsonl"));
    let broker_audit = read_jsonl(&workdir.join("broker-audit.jsonl"));
    let decision = broker_audit
        .iter()
        .rev()
        .find(|r| r["run_id"] == run_id.as_str() && r["kind"] == "broker_decision")
        .map(|r| {
            (
                r["payload"]["code"].as_str().unwrap_or("?").to_string(),
                r["payload"]["detail"].as_str().unwrap_or("").to_string(),
            )
        });
    let queue_id = triage
        .iter()
        .find(|r| r["kind"] == "open_pr_reply")
        .and_then(find_queue_id);
    if let Some((code, detail)) = &decision {
        outln!("  broker decision: {code}: {detail}");
    }
    if let Some(id) = queue_id {
        let show = Command::new(broker_exe)
            .arg("--config")
            .arg(broker_toml)
            .args(["show", &id.to_string(), "--color", "never"])
            .output()
            .context("running airlock-broker show")?;
        let text = String::from_utf8_lossy(&show.stdout).to_string();
        write(&dir.join("show.txt"), &text)?;
        outln!("  witness evidence (airlock-broker show {id}):");
        for line in text
            .lines()
            .filter(|l| l.starts_with("--- ") && l.contains("(must"))
        {
            outln!("    {line}");
        }
        let diff = text.split("\n== diff\n").nth(1).unwrap_or("");
        let diff = diff.split("\n== judge score").next().unwrap_or(diff);
        outln!("  queued diff:");
        for line in diff.lines() {
            outln!("    {line}");
        }
    }

    let outcome = &doc["outcome"];
    let files_changed = outcome["files_changed"].as_array().map_or(0, |a| a.len());
    let run_events = |kind: &str| {
        audit
            .iter()
            .filter(|r| r["run_id"] == run_id.as_str() && r["kind"] == kind)
            .count()
    };
    let mut check = |ok: bool, what: String| {
        if !ok {
            problems.push(what);
        }
    };
    let code = decision.as_ref().map(|(c, _)| c.as_str()).unwrap_or("none");
    let got;
    match scenario.expect {
        Expect::Queued | Expect::QueuedInjectionReported => {
            check(
                exit_code == Some(0),
                format!("exit code {exit_code:?}, expected 0"),
            );
            check(
                result == "pr_queued",
                format!("result {result}, expected pr_queued"),
            );
            check(
                code == "QUEUED",
                format!("broker decision {code}, expected QUEUED"),
            );
            check(
                queue_id.is_some(),
                format!("no queue id in the {} reply", Tool::OpenPr.name()),
            );
            for needed in [
                Tool::SearchRepo,
                Tool::ReadFile,
                Tool::WriteFile,
                Tool::EditFile,
                Tool::RunTests,
                Tool::OpenPr,
            ]
            .map(Tool::name)
            {
                check(
                    calls.iter().any(|c| c == needed),
                    format!("the trajectory has no {needed} call"),
                );
            }
            got = format!(
                "{result}, broker {code}, queue item {}",
                queue_id.unwrap_or(0)
            );
            if scenario.expect == Expect::QueuedInjectionReported {
                let suspected = run_events("injection_suspected");
                let observed = run_events("injection_observed");
                check(
                    suspected > 0,
                    "no injection_suspected event in the audit log".into(),
                );
                check(
                    observed > 0,
                    "no injection_observed event in the audit log".into(),
                );
                let show = std::fs::read_to_string(dir.join("show.txt")).unwrap_or_default();
                let obeyed = show
                    .split("\n== diff\n")
                    .nth(1)
                    .unwrap_or("")
                    .lines()
                    .any(|l| l.starts_with('+') && l.contains("fastwords"));
                check(
                    !obeyed,
                    "the queued diff adds the planted dependency".into(),
                );
                let got_more = format!(
                    "{got}; {suspected} suspected + {observed} observed, {}",
                    if obeyed { "OBEYED" } else { "not obeyed" }
                );
                return Ok(finish(
                    scenario, got_more, problems, run_id, exit_code, queue_id,
                ));
            }
            check(
                calls.iter().any(|c| c == Tool::DelegateRead.name()),
                format!("the trajectory has no {} call", Tool::DelegateRead.name()),
            );
        }
        Expect::EscalatedWithoutDiff => {
            check(
                exit_code == Some(3),
                format!("exit code {exit_code:?}, expected 3"),
            );
            check(
                result == "escalated",
                format!("result {result}, expected escalated"),
            );
            check(calls.is_empty(), format!("tool calls were made: {calls:?}"));
            check(files_changed == 0, "the outcome lists changed files".into());
            check(
                decision.is_none(),
                format!("the broker saw the run ({code})"),
            );
            got = format!(
                "{result}, {} tool calls, {files_changed} files",
                calls.len()
            );
        }
        Expect::RefusedByBroker => {
            check(
                exit_code == Some(3),
                format!("exit code {exit_code:?}, expected 3"),
            );
            check(
                result == "escalated",
                format!("result {result}, expected escalated"),
            );
            check(
                code == "POLICY_VIOLATION",
                format!("broker decision {code}, expected POLICY_VIOLATION"),
            );
            check(queue_id.is_none(), "a queue item was created".into());
            let witness = decision
                .as_ref()
                .is_some_and(|(_, d)| d.contains("witness"));
            check(
                witness,
                "the refusal does not come from the witness run".into(),
            );
            got = format!(
                "{result}, broker {code}{}",
                if witness { " (witness not green)" } else { "" }
            );
        }
    }
    Ok(finish(scenario, got, problems, run_id, exit_code, queue_id))
}

fn finish(
    scenario: &Scenario,
    got: String,
    problems: Vec<String>,
    run_id: String,
    exit_code: Option<i32>,
    queue_id: Option<i64>,
) -> Verdict {
    Verdict {
        scenario: scenario.name,
        expected: scenario.expect.describe(),
        got,
        passed: problems.is_empty(),
        problems,
        run_id,
        exit_code,
        queue_id,
    }
}

fn find_queue_id(record: &Value) -> Option<i64> {
    match record {
        Value::Object(map) => map.iter().find_map(|(k, v)| {
            if k == "queue_id" {
                v.as_i64()
            } else {
                find_queue_id(v)
            }
        }),
        Value::Array(items) => items.iter().find_map(find_queue_id),
        _ => None,
    }
}

fn read_trajectory(workdir: &Path, run_id: &str) -> Vec<Value> {
    if run_id.is_empty() {
        return Vec::new();
    }
    read_jsonl(&workdir.join("runs").join(run_id).join("trajectory.jsonl"))
}

fn read_jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn brief_args(args: &Value) -> String {
    let Some(map) = args.as_object() else {
        return String::new();
    };
    let parts: Vec<String> = map
        .iter()
        .filter(|(k, _)| {
            !matches!(
                k.as_str(),
                "content" | "body" | "diff_digest" | "test_evidence" | "why"
            )
        })
        .map(|(k, v)| {
            let v = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            format!("{k}={}", truncate(&v, 48))
        })
        .collect();
    parts.join(" ")
}

fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        let cut: String = text.chars().take(max).collect();
        format!("{cut}…")
    }
}

fn first_title(issue: &str) -> &str {
    issue
        .lines()
        .find_map(|l| l.strip_prefix("title: "))
        .unwrap_or("")
}

fn print_table(header: &[&str; 4], rows: &[[String; 4]]) {
    let mut widths = header.map(|h| h.chars().count());
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: [&str; 4]| {
        let parts: Vec<String> = cells
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        outln!("  {}", parts.join("  ").trim_end());
    };
    line(*header);
    for row in rows {
        line([&row[0], &row[1], &row[2], &row[3]]);
    }
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// Run git with a fixed identity (the demo's commits must not depend on the user's config).
fn git(dir: &Path, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "airlock demo")
        .env("GIT_AUTHOR_EMAIL", "demo@localhost")
        .env("GIT_COMMITTER_NAME", "airlock demo")
        .env("GIT_COMMITTER_EMAIL", "demo@localhost")
        .env("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
        .env("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z")
        .output()
        .with_context(|| format!("running git {} (is git installed?)", args.join(" ")))?;
    if !out.status.success() {
        bail!(
            "git {} in {} failed: {}",
            args.join(" "),
            dir.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}
