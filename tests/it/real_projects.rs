//! airlock on real public projects' own test suites. Each project is taken from its package
//! registry at test time (a PyPI sdist, a crate, an npm tarball: each ships its tests) and
//! committed into a scratch repository; its test environment is built by `[tests.prepare]` from
//! the registries, in the sandbox with the network, and every test run after that has none.
//!
//! In each project a scripted agent drives `airlock run` as a model would: it reads the file the
//! fix changes by line range, adds a new test file, runs it (it fails), makes a real fix through
//! `edit_file` (on a file over the 10 KB read cap where the project has one), runs it again (it
//! passes), runs the full suite (green against the base inventory) and calls `open_pr`. The real
//! `airlock-broker serve` recomputes the digest, runs its witness (the base inventory included)
//! and queues the pull request; `airlock-broker show` shows the inventory's counts.
//!
//! The traps: the unittest runner on a pytest command is refused when the config loads, and a
//! full run that runs only the new test is not green.
//!
//! What the registries serve and what prepare builds is kept under `CARGO_TARGET_TMPDIR` and
//! reused by every test of one `cargo test` (and by later runs on the same checkout).

use crate::e2e::{broker, queue_id_of};
use airlock_testkit::git;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn airlock() -> &'static str {
    env!("CARGO_BIN_EXE_airlock")
}

/// Where downloads, scratch repositories and prepared environments are shared.
fn shared() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("real-projects");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The prepared environments of every test (`[paths] envs_dir`).
fn envs_dir() -> PathBuf {
    let dir = shared().join("envs");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn output_of(cmd: &mut Command, what: &str) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// `shared()/name`, made once: `make` fills a fresh directory that is then renamed into place,
/// so a test running alongside sees either nothing or the whole thing (the content is
/// deterministic, so whichever rename wins is the same).
fn once(name: &str, make: impl FnOnce(&Path)) -> PathBuf {
    let dest = shared().join(name);
    if dest.exists() {
        return dest;
    }
    let tmp = shared().join(format!(
        ".tmp-{}-{}-{:?}",
        name.replace('/', "_"),
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    make(&tmp);
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    if std::fs::rename(&tmp, &dest).is_err() {
        assert!(dest.exists(), "could not move {} into place", tmp.display());
        let _ = std::fs::remove_dir_all(&tmp);
    }
    dest
}

fn untar(archive: &Path, into: &Path) {
    std::fs::create_dir_all(into).unwrap();
    output_of(
        Command::new("tar")
            .arg("-xzf")
            .arg(archive)
            .arg("-C")
            .arg(into)
            .arg("--strip-components=1"),
        "tar",
    );
}

fn only_file(dir: &Path, suffix: &str) -> PathBuf {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(suffix))
        .unwrap_or_else(|| panic!("no *{suffix} in {}", dir.display()))
}

/// The host's real Python (not a pyenv shim) and its prefix.
struct Python {
    exe: String,
    prefix: String,
}

fn python() -> Python {
    let out = output_of(
        Command::new("python3").args([
            "-c",
            "import os, sys; print(os.path.realpath(sys.executable)); print(os.path.realpath(sys.base_prefix))",
        ]),
        "python3",
    );
    let mut lines = out.lines();
    Python {
        exe: lines.next().unwrap().to_string(),
        prefix: lines.next().unwrap().to_string(),
    }
}

/// Grants the host path needs when it lies outside the system directories.
fn grant(path: &str) -> Vec<String> {
    if path.starts_with("/usr/") || path == "/usr" {
        vec![]
    } else {
        vec![path.to_string()]
    }
}

/// A PyPI source distribution, unpacked.
fn sdist(name: &str, version: &str) -> PathBuf {
    once(&format!("src/{name}-{version}"), |dir| {
        let dl = tempfile::tempdir().unwrap();
        output_of(
            Command::new(python().exe)
                .args([
                    "-m",
                    "pip",
                    "download",
                    "--quiet",
                    "--disable-pip-version-check",
                    "--no-deps",
                    "--no-binary",
                    ":all:",
                    "-d",
                ])
                .arg(dl.path())
                .arg(format!("{name}=={version}")),
            "pip download",
        );
        untar(&only_file(dl.path(), ".tar.gz"), dir);
    })
}

/// A crate exactly as crates.io serves it, unpacked (fetched through a throwaway project that
/// depends on it).
fn crate_source(name: &str, version: &str) -> PathBuf {
    once(&format!("src/{name}-{version}"), |dir| {
        let p = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(p.path().join("src")).unwrap();
        std::fs::write(
            p.path().join("Cargo.toml"),
            format!(
                "[package]\nname = \"fetch-{name}\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\n\
                 [dependencies]\n{name} = \"={version}\"\n"
            ),
        )
        .unwrap();
        std::fs::write(p.path().join("src/main.rs"), "fn main() {}\n").unwrap();
        let home = p.path().join("home");
        output_of(
            Command::new("cargo")
                .args(["fetch", "--quiet"])
                .current_dir(p.path())
                .env("CARGO_HOME", &home)
                .env_remove("CARGO_TARGET_DIR"),
            "cargo fetch",
        );
        let cache = home.join("registry/cache");
        let index = std::fs::read_dir(&cache)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        untar(&index.join(format!("{name}-{version}.crate")), dir);
    })
}

/// An npm package tarball (`npm pack`), unpacked.
fn npm_source(name: &str, version: &str) -> PathBuf {
    once(&format!("src/{name}-{version}"), |dir| {
        let dl = tempfile::tempdir().unwrap();
        output_of(
            Command::new("npm")
                .args(["pack", "--silent", &format!("{name}@{version}")])
                .current_dir(dl.path()),
            "npm pack",
        );
        untar(&only_file(dl.path(), ".tgz"), dir);
    })
}

/// A scratch repository holding exactly the artefact's files, at a fixed path and with a fixed
/// commit, so the prepared environment (keyed by repository, commit and inputs) is reused.
fn scratch_repo(name: &str, source: &Path) -> (PathBuf, String) {
    let repo = once(&format!("repos/{name}"), |dir| {
        output_of(
            Command::new("cp")
                .arg("-a")
                .arg(format!("{}/.", source.display()))
                .arg(dir),
            "cp",
        );
        git(dir, &["init", "-q", "-b", "main"]);
        // -f: artefacts ship .gitignore files that ignore what they ship (Cargo.lock).
        git(dir, &["add", "-A", "-f", "."]);
        git(
            dir,
            &["commit", "-q", "-m", &format!("{name} as published")],
        );
    });
    let commit = git(&repo, &["rev-parse", "HEAD"]);
    (repo, commit)
}

/// One real fix, as the scripted agent makes it.
struct Fix {
    issue_id: &'static str,
    issue: &'static str,
    /// Edits that wire the new test in before its first run (a Rust `mod` declaration).
    test_edits: &'static [(&'static str, &'static str, &'static str)],
    /// The fix's edits, in order: (path, old text, new text). The first is read first.
    edits: &'static [(&'static str, &'static str, &'static str)],
    /// The new test file.
    test_path: &'static str,
    test_text: &'static str,
    /// The narrow run's selector, and text its failing output shows before the fix.
    selector: &'static str,
    fails_with: &'static str,
    /// The claimed fail-to-pass test, as the runner names it.
    failing_test: &'static str,
    title: &'static str,
}

/// One project's set-up: the scratch repository and the operator's configuration of its tests.
struct Project {
    name: &'static str,
    repo: PathBuf,
    commit: String,
    /// `[tests]` (and `[tests.prepare]`) of airlock.toml.
    tests_toml: String,
    /// Host paths the broker lets this repository's runs grant (`allow_ro`).
    allow_ro: Vec<String>,
    /// The least number of tests the base inventory must hold.
    min_tests: usize,
}

fn toml_list(items: &[String]) -> String {
    format!(
        "[{}]",
        items
            .iter()
            .map(|s| format!("{s:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// A running broker; killed and reaped when dropped.
struct Broker(Child);

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Everything one run works in: the broker's and the supervisor's files.
struct Work {
    dir: tempfile::TempDir,
    broker_toml: PathBuf,
    airlock_toml: PathBuf,
}

impl Work {
    fn new(p: &Project) -> Work {
        let dir = tempfile::tempdir().unwrap();
        let w = dir.path();
        let clone = w.join("clone");
        output_of(
            Command::new("git")
                .arg("clone")
                .arg("-q")
                .arg(&p.repo)
                .arg(&clone),
            "git clone",
        );
        let mut allow = p.allow_ro.clone();
        allow.push(envs_dir().display().to_string());
        let broker_toml = w.join("broker.toml");
        std::fs::write(
            &broker_toml,
            format!(
                "socket = \"{w}/broker.sock\"\nstate_db = \"{w}/broker.db\"\nruns_root = \"{w}/runs\"\n\
                 audit_log = \"{w}/broker-audit.jsonl\"\nqueue_max_age = \"7d\"\nwitness_timeout = \"900s\"\n\n\
                 [repositories.\"real/{name}\"]\nclone = \"{clone}\"\nremote = \"origin\"\nallow_ro = {allow}\n",
                w = w.display(),
                name = p.name,
                clone = clone.display(),
                allow = toml_list(&allow),
            ),
        )
        .unwrap();
        let airlock_toml = w.join("airlock.toml");
        std::fs::write(
            &airlock_toml,
            format!(
                "{tests}\n[write]\nallowlist = []\n\n[budgets]\nmax_turns = 20\nmax_full_runs = 2\n\n\
                 [broker]\nsocket = \"{w}/broker.sock\"\nrepository = \"real/{name}\"\n\n\
                 [paths]\nruns_root = \"{w}/runs\"\naudit_log = \"{w}/audit.jsonl\"\ncache_dir = \"{w}/cache\"\n\
                 index_dir = \"{w}/index\"\nenvs_dir = \"{envs}\"\n",
                tests = p.tests_toml,
                w = w.display(),
                name = p.name,
                envs = envs_dir().display(),
            ),
        )
        .unwrap();
        Work {
            dir,
            broker_toml,
            airlock_toml,
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn start_broker(&self) -> Broker {
        let log = std::fs::File::create(self.path().join("broker.log")).unwrap();
        let child = Command::new(broker())
            .arg("--config")
            .arg(&self.broker_toml)
            .arg("serve")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let mut broker = Broker(child);
        let socket = self.path().join("broker.sock");
        let deadline = Instant::now() + Duration::from_secs(30);
        while !socket.exists() {
            if let Some(status) = broker.0.try_wait().unwrap() {
                panic!(
                    "the broker exited with {status}: {}",
                    std::fs::read_to_string(self.path().join("broker.log")).unwrap_or_default()
                );
            }
            assert!(Instant::now() < deadline, "the broker did not listen");
            std::thread::sleep(Duration::from_millis(50));
        }
        broker
    }

    /// `airlock run --json` with the scripted turns; (exit code, printed document, stderr).
    fn run(&self, p: &Project, issue: &str, turns: &[Value]) -> (Option<i32>, Value, String) {
        let out = self.run_output(p, issue, turns);
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        let doc = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "airlock run printed no JSON document ({e}):\n{}\n{stderr}",
                String::from_utf8_lossy(&out.stdout)
            )
        });
        (out.status.code(), doc, stderr)
    }

    fn run_output(&self, p: &Project, issue: &str, turns: &[Value]) -> std::process::Output {
        let issue_path = self.path().join("issue.md");
        std::fs::write(&issue_path, issue).unwrap();
        let script = self.path().join("script.json");
        std::fs::write(&script, serde_json::to_string_pretty(&turns).unwrap()).unwrap();
        Command::new(airlock())
            .arg("run")
            .arg("--repo")
            .arg(&p.repo)
            .args(["--commit", &p.commit, "--issue"])
            .arg(&issue_path)
            .arg("--model")
            .arg(format!("scripted:{}", script.display()))
            .arg("--config")
            .arg(&self.airlock_toml)
            .arg("--json")
            .output()
            .unwrap()
    }

    fn trajectory(&self, run_id: &str) -> Vec<Value> {
        let path = self
            .path()
            .join("runs")
            .join(run_id)
            .join("trajectory.jsonl");
        std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    fn show(&self, queue_id: i64) -> String {
        output_of(
            Command::new(broker())
                .arg("--config")
                .arg(&self.broker_toml)
                .args(["show", &queue_id.to_string(), "--color", "never"]),
            "airlock-broker show",
        )
    }
}

fn call(name: &str, args: Value) -> Value {
    json!({"tool_calls": [{"name": name, "arguments": args}]})
}

/// The digest the broker will recompute for `fix` applied at the pin (the agent is told the
/// same digest by its green full run), from the policy the broker uses.
fn digest_of(p: &Project, fix: &Fix) -> Value {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    output_of(
        Command::new("git")
            .arg("clone")
            .arg("-q")
            .arg(&p.repo)
            .arg(&tree),
        "git clone",
    );
    for (path, old_text, new_text) in fix.test_edits.iter().chain(fix.edits) {
        let file = tree.join(path);
        let text = std::fs::read_to_string(&file).unwrap();
        assert_eq!(
            text.matches(old_text).count(),
            1,
            "the edit's old_text must occur once in {path}"
        );
        std::fs::write(&file, text.replacen(old_text, new_text, 1)).unwrap();
    }
    let test = tree.join(fix.test_path);
    std::fs::create_dir_all(test.parent().unwrap()).unwrap();
    std::fs::write(&test, fix.test_text).unwrap();
    let digest = airlock_policies::Policy::builtin()
        .unwrap()
        .compute_digest(&tree, &p.commit)
        .unwrap();
    assert_eq!(
        digest.test_files_added,
        vec![fix.test_path.to_string()],
        "the policy must see the new test file as a test"
    );
    serde_json::to_value(digest.to_diff_digest()).unwrap()
}

/// The lines of `path` (1-based, inclusive) around the first line of `old_text`.
fn lines_around(p: &Project, path: &str, old_text: &str) -> (usize, usize) {
    let text = std::fs::read_to_string(p.repo.join(path)).unwrap();
    let first = old_text.lines().next().unwrap();
    let at = text
        .lines()
        .position(|l| l.contains(first.trim()))
        .unwrap_or_else(|| panic!("{first:?} not in {path}"))
        + 1;
    (at.saturating_sub(10).max(1), at + 10)
}

/// The whole agent's session for `fix`: read, new test (red), edit (green), full run, open_pr.
fn fix_turns(p: &Project, fix: &Fix) -> Vec<Value> {
    let (path, old_text, _) = fix.edits[0];
    let (start, end) = lines_around(p, path, old_text);
    let first_line = old_text.lines().next().unwrap().trim();
    let open_pr = json!({
        "issue_id": fix.issue_id, "base_commit": p.commit, "title": fix.title,
        "body": format!("{}\n\nThe new test {} fails before the fix and passes after it; the full suite is green.", fix.title, fix.failing_test),
        "scope": "source-plus-new-tests",
        "diff_digest": digest_of(p, fix),
        "test_evidence": {"before_selector": fix.selector, "before_failing_test": fix.failing_test,
                          "after_full_run": "green", "witness_run": "green"},
        "confidence": 0.8
    });
    let outcome = json!({
        "outcome": "pr", "summary": fix.title, "root_cause": format!("{}: the code in {path} was wrong", fix.issue_id),
        "files_changed": open_pr["diff_digest"]["files_changed"], "tests_added": [fix.failing_test],
        "test_evidence": {"before": fix.fails_with, "after": "passed"},
        "also_noticed": [], "injection_observed": [], "confidence": 0.8
    });
    let mut turns = vec![
        call(
            "read_file",
            json!({"path": path, "start_line": start, "end_line": end}),
        ),
        json!({"tool_calls": [{"name": "write_file", "arguments": {"path": fix.test_path, "content": fix.test_text}}],
               "expect_contains": first_line}),
    ];
    for (path, old_text, new_text) in fix.test_edits {
        turns.push(call(
            "edit_file",
            json!({"path": path, "old_text": old_text, "new_text": new_text}),
        ));
    }
    turns.push(call("run_tests", json!({"selector": fix.selector})));
    for (i, (path, old_text, new_text)) in fix.edits.iter().enumerate() {
        let mut turn = call(
            "edit_file",
            json!({"path": path, "old_text": old_text, "new_text": new_text}),
        );
        if i == 0 {
            turn["expect_contains"] = json!(fix.fails_with);
        }
        turns.push(turn);
    }
    turns.extend([
        json!({"tool_calls": [{"name": "run_tests", "arguments": {"selector": fix.selector}}],
               "expect_contains": "edited lines"}),
        json!({"tool_calls": [{"name": "run_tests", "arguments": {}}],
               "expect_contains": "selected run: green"}),
        json!({"tool_calls": [{"name": "open_pr", "arguments": open_pr}],
               "expect_contains": "full run: green"}),
        json!({"text": outcome.to_string(), "expect_contains": "queued"}),
    ]);
    turns
}

/// The acceptance of one project: the fix is queued with a green witness, the inventory shown.
fn queue_a_real_fix(p: &Project, fix: &Fix) {
    let work = Work::new(p);
    let _broker = work.start_broker();
    let started = Instant::now();
    let (code, doc, stderr) = work.run(p, fix.issue, &fix_turns(p, fix));
    // A figure for the report, never asserted.
    eprintln!(
        "{}: airlock run with the witness took {:.1} s",
        p.name,
        started.elapsed().as_secs_f64()
    );
    let run_id = doc["run_id"].as_str().unwrap_or_default().to_string();
    let explain = || {
        let traj = if run_id.is_empty() {
            String::new()
        } else {
            work.trajectory(&run_id)
                .iter()
                .map(|r| {
                    let s = r.to_string();
                    s.chars().take(3000).collect::<String>()
                })
                .collect::<Vec<_>>()
                .join("\n")
        };
        let log = std::fs::read_to_string(work.path().join("broker.log")).unwrap_or_default();
        let worktree = work.path().join("runs").join(&run_id).join("worktree");
        let status = Command::new("git")
            .args(["status", "--porcelain", "--ignored"])
            .current_dir(&worktree)
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        format!(
            "{doc}\n{stderr}\n== trajectory\n{traj}\n== broker log\n{log}\n== worktree status\n{status}"
        )
    };
    assert_eq!(doc["result"], "pr_queued", "{}", explain());
    assert_eq!(code, Some(0), "{}", explain());

    let trajectory = work.trajectory(&run_id);
    let baseline = trajectory
        .iter()
        .find(|r| r["kind"] == "test_baseline")
        .unwrap_or_else(|| panic!("no test_baseline record\n{}", explain()));
    let tests = baseline["inventory"]["tests"].as_object().unwrap();
    assert!(
        tests.len() >= p.min_tests,
        "the base inventory holds {} tests, expected at least {}: {}",
        tests.len(),
        p.min_tests,
        baseline["summary"]
    );
    let full = trajectory
        .iter()
        .rfind(|r| r["kind"] == "full_run_verdict" && r["selector"].is_null())
        .unwrap_or_else(|| panic!("no full run verdict\n{}", explain()));
    assert_eq!(full["verdict"]["green"], true, "{full}");
    assert!(
        full["verdict"]["ran"].as_u64().unwrap() as usize >= tests.len(),
        "{full}"
    );

    let reply = trajectory
        .iter()
        .find(|r| r["kind"] == "open_pr_reply")
        .unwrap_or_else(|| panic!("no open_pr_reply\n{}", explain()));
    let queue_id = queue_id_of(reply);
    assert!(queue_id > 0, "no queue id in {reply}");
    let show = work.show(queue_id);
    assert!(show.contains("[queued]"), "{show}");
    for step in [
        "pinned_selected (must fail)",
        "patched_selected (must pass)",
        "base_full (must inventory)",
        "patched_full (must green)",
    ] {
        let line = show
            .lines()
            .find(|l| l.contains(step))
            .unwrap_or_else(|| panic!("no witness step {step} in\n{show}"));
        assert!(line.ends_with(", Ok"), "witness step not graded Ok: {line}");
    }
    let inventory = show
        .lines()
        .find(|l| l.starts_with("inventory: "))
        .unwrap_or_else(|| panic!("no inventory line in\n{show}"));
    let counted: usize = inventory["inventory: ".len()..]
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(counted >= p.min_tests, "{inventory}");
    assert!(
        show.contains("against the base inventory: green: "),
        "{show}"
    );
    let (_, old_text, new_text) = fix.edits[0];
    let added = new_text.lines().find(|l| !old_text.contains(l)).unwrap();
    assert!(show.contains(&format!("+{added}")), "{show}");
}

fn six() -> Project {
    let py = python();
    let (repo, commit) = scratch_repo("six", &sdist("six", "1.17.0"));
    Project {
        name: "six",
        repo,
        commit,
        tests_toml: format!(
            "[tests]\ncommand = [{exe:?}, \"-m\", \"pytest\", \"-rA\", \"-p\", \"no:cacheprovider\"]\n\
             runner = \"pytest\"\nselector_style = \"node-id\"\ntimeout_secs = 600\nro = {ro}\n\
             env = {{ PYTHONPATH = \"{{env}}/site\" }}\n\n\
             [tests.prepare]\ncommand = [{exe:?}, \"-m\", \"pip\", \"install\", \"--quiet\", \"--disable-pip-version-check\", \"--target\", \"{{env}}/site\", \"pytest==9.2.0\"]\n\
             inputs = [\"setup.py\", \"setup.cfg\"]\ntimeout_secs = 900\n",
            exe = py.exe,
            ro = toml_list(&grant(&py.prefix)),
        ),
        allow_ro: grant(&py.prefix),
        min_tests: 150,
    }
}

const SIX_ISSUE: &str = "---\nid: SIX-1\ntitle: ensure_text rejects a bytearray\nlabels: [bug]\n---\n\
`six.ensure_text(bytearray(b\"caf\\xc3\\xa9\"))` raises `TypeError: not expecting type '<class 'bytearray'>'`; \
expected `'café'`, as for the same bytes given as `bytes`. `ensure_text` in `six.py` checks only `binary_type`.\n";

#[test]
fn six_pytest_fix_is_queued_with_a_green_witness() {
    let p = six();
    queue_a_real_fix(
        &p,
        &Fix {
            issue_id: "SIX-1",
            issue: SIX_ISSUE,
            test_edits: &[],
            edits: &[(
                "six.py",
                "    - `bytes` -> decoded to `str`\n    \"\"\"\n    if isinstance(s, binary_type):\n        return s.decode(encoding, errors)\n    elif isinstance(s, text_type):",
                "    - `bytes` -> decoded to `str`\n    \"\"\"\n    if isinstance(s, (binary_type, bytearray)):\n        return s.decode(encoding, errors)\n    elif isinstance(s, text_type):",
            )],
            test_path: "test_ensure_text_bytearray.py",
            test_text: "import six\n\n\ndef test_ensure_text_accepts_a_bytearray():\n    assert six.ensure_text(bytearray(b\"caf\\xc3\\xa9\")) == u\"caf\\xe9\"\n",
            selector: "test_ensure_text_bytearray.py::test_ensure_text_accepts_a_bytearray",
            fails_with: "TypeError",
            failing_test: "test_ensure_text_bytearray.py::test_ensure_text_accepts_a_bytearray",
            title: "fix: six.ensure_text accepts a bytearray",
        },
    );
}

#[test]
fn idna_unittest_fix_is_queued_with_a_green_witness() {
    let py = python();
    let (repo, commit) = scratch_repo("idna", &sdist("idna", "3.10"));
    let p = Project {
        name: "idna",
        repo,
        commit,
        // No dependencies: no prepare step; the interpreter's prefix is granted.
        tests_toml: format!(
            "[tests]\ncommand = [{exe:?}, \"-m\", \"unittest\", \"-v\"]\nrunner = \"unittest\"\n\
             selector_style = \"dotted\"\ntimeout_secs = 600\nro = {ro}\n",
            exe = py.exe,
            ro = toml_list(&grant(&py.prefix)),
        ),
        allow_ro: grant(&py.prefix),
        min_tests: 1000,
    };
    queue_a_real_fix(
        &p,
        &Fix {
            issue_id: "IDNA-1",
            issue: "---\nid: IDNA-1\ntitle: ulabel raises UnicodeDecodeError on a non-ASCII A-label\nlabels: [bug]\n---\n\
`idna.ulabel(b\"xn--\\xe9abc-\")` raises `UnicodeDecodeError` from `label_bytes.decode(\"ascii\")` in `idna/core.py`; \
expected `idna.IDNAError`, as for every other malformed A-label.\n",
            test_edits: &[],
            edits: &[(
                "idna/core.py",
                "        if label_bytes.decode(\"ascii\")[-1] == \"-\":",
                "        if label_bytes.endswith(b\"-\"):",
            )],
            test_path: "tests/test_ulabel_bytes.py",
            test_text: "import unittest\n\nimport idna\n\n\nclass ULabelBytesTests(unittest.TestCase):\n    def test_non_ascii_a_label_is_an_idna_error(self):\n        with self.assertRaises(idna.IDNAError):\n            idna.ulabel(b\"xn--\\xe9abc-\")\n\n\nif __name__ == \"__main__\":\n    unittest.main()\n",
            selector: "tests.test_ulabel_bytes",
            fails_with: "UnicodeDecodeError",
            failing_test: "tests.test_ulabel_bytes.ULabelBytesTests.test_non_ascii_a_label_is_an_idna_error",
            title: "fix: idna.ulabel raises IDNAError on a non-ASCII A-label",
        },
    );
}

#[test]
fn either_cargo_fix_with_dependencies_is_queued_with_a_green_witness() {
    let (repo, commit) = scratch_repo("either", &crate_source("either", "1.19.0"));
    // The operator's toolchain as rustup installs it, granted read-only; the dependencies
    // (serde, serde_json for the tests) fetched by prepare into {env}/cargo.
    let p = Project {
        name: "either",
        repo,
        commit,
        tests_toml: "[tests]\ncommand = [\"cargo\", \"test\"]\nrunner = \"cargo\"\nselector_style = \"append\"\n\
             timeout_secs = 900\nro = [\"~/.cargo\", \"~/.rustup\"]\n\
             env = { CARGO_HOME = \"{env}/cargo\", RUSTUP_HOME = \"~/.rustup\", CARGO_NET_OFFLINE = \"true\", \
             CARGO_TERM_COLOR = \"never\", PATH = \"~/.cargo/bin:/usr/bin:/bin\" }\n\n\
             [tests.prepare]\ncommand = [\"cargo\", \"fetch\"]\ninputs = [\"Cargo.toml\", \"Cargo.lock\"]\n\
             env = { CARGO_NET_OFFLINE = \"false\" }\ntimeout_secs = 900\n"
            .to_string(),
        allow_ro: vec![home("/.cargo"), home("/.rustup")],
        // Its 8 unit tests; its 61 doctests are named by line number, which any edit above them
        // shifts, so they are held by the exit code, not by name.
        min_tests: 8,
    };
    queue_a_real_fix(
        &p,
        &Fix {
            issue_id: "EITHER-1",
            issue: "---\nid: EITHER-1\ntitle: Either's io::Write drops vectored writes\nlabels: [bug]\n---\n\
`impl Write for Either<L, R>` in `src/lib.rs` forwards `write`, `write_all`, `write_fmt` and `flush` but not \
`write_vectored`, so `Left(w).write_vectored(&bufs)` writes only the first buffer through `write` even when `w` \
takes vectored writes whole. Expected: the call reaches the inner writer's `write_vectored`.\n",
            // The new test module is declared in lib.rs (the crate builds no tests/ targets).
            test_edits: &[(
                "src/lib.rs",
                "mod into_either;\n",
                "mod into_either;\n\n#[cfg(test)]\nmod vectored_tests;\n",
            )],
            edits: &[(
                "src/lib.rs",
                "    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {\n        for_both!(self, inner => inner.write_all(buf))\n    }\n",
                "    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {\n        for_both!(self, inner => inner.write_vectored(bufs))\n    }\n\n    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {\n        for_both!(self, inner => inner.write_all(buf))\n    }\n",
            )],
            test_path: "src/vectored_tests.rs",
            test_text: EITHER_TEST,
            selector: "vectored_tests::write_vectored_reaches_the_inner_writer",
            fails_with: "assertion",
            failing_test: "vectored_tests::write_vectored_reaches_the_inner_writer",
            title: "fix: Either forwards write_vectored to the inner writer",
        },
    );
}

fn home(rest: &str) -> String {
    format!("{}{rest}", std::env::var("HOME").expect("HOME"))
}

const EITHER_TEST: &str = r#"//! `Either`'s `io::Write` forwards vectored writes.
#![cfg(test)]

use crate::{Either, Left, Right};
use std::io::{self, IoSlice, Write};
use std::vec::Vec;

/// A writer that takes a vectored write whole and counts the calls.
#[derive(Default)]
struct Vectored {
    calls: usize,
    data: Vec<u8>,
}

impl Write for Vectored {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.data.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.calls += 1;
        let mut n = 0;
        for buf in bufs {
            self.data.extend_from_slice(buf);
            n += buf.len();
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn write_vectored_reaches_the_inner_writer() {
    let mut w: Either<Vectored, Vec<u8>> = Left(Vectored::default());
    let n = w
        .write_vectored(&[IoSlice::new(b"ab"), IoSlice::new(b"cd")])
        .unwrap();
    assert_eq!(n, 4);
    match w {
        Left(v) => {
            assert_eq!(v.calls, 1);
            assert_eq!(v.data, b"abcd");
        }
        Right(_) => unreachable!(),
    }
}
"#;

#[test]
fn remeda_jest_fix_is_queued_with_a_green_witness() {
    let (repo, commit) = scratch_repo("remeda", &npm_source("remeda", "1.0.0"));
    // node_modules is built by prepare from the package's own devDependencies (jest, ts-jest,
    // typescript) and shown read-only inside every test run's tree.
    let p = Project {
        name: "remeda",
        repo,
        commit,
        tests_toml: "[tests]\ncommand = [\"node\", \"node_modules/jest/bin/jest.js\", \"--ci\", \"--verbose\"]\n\
             runner = \"jest\"\nselector_style = \"append\"\ntimeout_secs = 900\n\n\
             [tests.prepare]\ncommand = [\"npm\", \"install\", \"--ignore-scripts\", \"--no-audit\", \"--no-fund\", \"--loglevel=error\"]\n\
             inputs = [\"package.json\"]\nlinks = [\"node_modules\"]\ntimeout_secs = 900\n"
            .to_string(),
        allow_ro: vec![],
        min_tests: 300,
    };
    queue_a_real_fix(
        &p,
        &Fix {
            issue_id: "REMEDA-1",
            issue: "---\nid: REMEDA-1\ntitle: equals says two Maps with different entries are equal\nlabels: [bug]\n---\n\
`R.equals(new Map([[1, 'a']]), new Map([[1, 'b']]))` returns `true`: `_equals` in `src/equals.ts` compares \
`Object.keys`, which a Map does not have. Expected `false`; Maps with the same entries are still equal.\n",
            test_edits: &[],
            edits: &[(
                "src/equals.ts",
                "    const keys = keyList(a);\n",
                "    const mapA = a instanceof Map;\n    const mapB = b instanceof Map;\n    if (mapA !== mapB) {\n      return false;\n    }\n    if (mapA && mapB) {\n      if (a.size !== b.size) {\n        return false;\n      }\n      let same = true;\n      a.forEach((value: any, key: any) => {\n        if (same && (!b.has(key) || !equals(value, b.get(key)))) {\n          same = false;\n        }\n      });\n      return same;\n    }\n\n    const keys = keyList(a);\n",
            )],
            test_path: "src/equalsMap.test.ts",
            test_text: "import { equals } from './equals';\n\ndescribe('equals on maps', () => {\n  test('maps with different values are not equal', () => {\n    expect(equals(new Map([[1, 'a']]), new Map([[1, 'b']]))).toBe(false);\n  });\n\n  test('maps with the same entries are equal', () => {\n    expect(equals(new Map([[1, { a: 1 }]]), new Map([[1, { a: 1 }]]))).toBe(true);\n  });\n});\n",
            selector: "src/equalsMap.test.ts",
            fails_with: "Expected: false",
            failing_test: "maps with different values are not equal",
            title: "fix: equals compares the entries of Maps",
        },
    );
}

/// The first trap: the unittest runner on a pytest command is a config error when the config
/// loads, before the pin, the prepare step or any model call.
#[test]
fn six_with_the_unittest_runner_on_its_pytest_command_is_refused_at_config_load() {
    let mut p = six();
    p.tests_toml = p
        .tests_toml
        .replace("runner = \"pytest\"", "runner = \"unittest\"");
    let work = Work::new(&p);
    let out = work.run_output(
        &p,
        SIX_ISSUE,
        &[json!({"text": "never played: the config is refused first"})],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(out.stdout.is_empty(), "{stderr}");
    assert!(stderr.contains("tests.runner"), "{stderr}");
    assert!(stderr.contains("pytest"), "{stderr}");
    assert!(
        !work.path().join("runs").exists()
            || std::fs::read_dir(work.path().join("runs"))
                .unwrap()
                .next()
                .is_none(),
        "no run may start"
    );
}

/// The second trap: a full run in which only the agent's new test ran (here it stops pytest
/// after itself) is not green, and the tool result names the tests that did not run.
#[test]
fn six_full_run_that_runs_only_the_new_test_is_not_green() {
    let p = six();
    let work = Work::new(&p);
    let _broker = work.start_broker();
    // pytest reports `1 passed` and exits 0: the issue's "Ran 1 test ... OK".
    let only_new = "import pytest\n\n\n@pytest.fixture(autouse=True)\ndef _stop_after_this_test():\n    yield\n    pytest.exit(\"only this test\", returncode=0)\n\n\ndef test_aaa_first():\n    assert True\n";
    let turns = vec![
        call(
            "write_file",
            json!({"path": "test_aaa_first.py", "content": only_new}),
        ),
        call("run_tests", json!({})),
        json!({"text": json!({
            "outcome": "escalate", "summary": "the full run did not run the suite",
            "root_cause": "unknown", "files_changed": ["test_aaa_first.py"], "tests_added": [],
            "test_evidence": {"before": "", "after": "the base inventory's tests did not run"},
            "also_noticed": [], "injection_observed": [], "confidence": 0.2
        }).to_string(), "expect_contains": "passed at base did not run"}),
    ];
    let (_code, doc, stderr) = work.run(&p, SIX_ISSUE, &turns);
    let run_id = doc["run_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{doc}\n{stderr}"));
    let trajectory = work.trajectory(run_id);
    let full = trajectory
        .iter()
        .find(|r| r["kind"] == "full_run_verdict" && r["selector"].is_null())
        .unwrap_or_else(|| panic!("no full run\n{doc}\n{stderr}"));
    assert_eq!(full["verdict"]["green"], false, "{full}");
    let missing = full["verdict"]["missing"].as_array().unwrap();
    assert!(missing.len() >= 150, "{full}");
    let result = trajectory
        .iter()
        .find(|r| r["kind"] == "tool_result" && r.to_string().contains("full run: red"))
        .unwrap_or_else(|| panic!("no red full-run result in the trajectory: {doc}"));
    assert!(result.to_string().contains("test_six.py::"), "{result}");
    assert_ne!(doc["result"], "pr_queued", "{doc}");
}

/// A base run that reports no test stops the run before any model call and shows why: here
/// the environment is not on the path, and the command's own output says so.
#[test]
fn six_whose_base_run_reports_no_test_shows_the_commands_output() {
    let mut p = six();
    p.tests_toml = p
        .tests_toml
        .replace("env = { PYTHONPATH = \"{env}/site\" }\n", "");
    let work = Work::new(&p);
    // A run checks that its broker answers before it pins.
    let _broker = work.start_broker();
    let out = work.run_output(
        &p,
        SIX_ISSUE,
        &[json!({"text": "never played: the base run fails first"})],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("reported no test"), "{stderr}");
    assert!(stderr.contains("No module named pytest"), "{stderr}");
}

/// A project whose suite starts servers of its own on loopback, as `airlock init` would not
/// have to be told anything about it: `[tests]` names no network, so its runs get the
/// default, `loopback`.
struct ServerSuite {
    name: &'static str,
    version: &'static str,
    /// The test dependencies the project declares (pinned), installed by `[tests.prepare]`.
    test_deps: &'static [&'static str],
    /// `PYTHONPATH` beside the prepared site directory (`src` for a src layout).
    tree_path: Option<&'static str>,
    /// The least number of tests that pass (the suite's loopback tests among them).
    min_passed: usize,
    /// Tests left out on both sides: ones that time the code they test and so pass or fail
    /// with the machine's load, whatever runs them.
    timing_tests: &'static [&'static str],
}

fn deselect_args(s: &ServerSuite) -> Vec<String> {
    s.timing_tests
        .iter()
        .flat_map(|t| ["--deselect".to_string(), t.to_string()])
        .collect()
}

fn server_suite_toml(s: &ServerSuite, network: Option<&str>, w: &Path) -> PathBuf {
    let py = python();
    let pythonpath = match s.tree_path {
        Some(p) => format!("{{env}}/site:{p}"),
        None => "{env}/site".to_string(),
    };
    let mut prepare = vec![
        py.exe.clone(),
        "-m".into(),
        "pip".into(),
        "install".into(),
        "--quiet".into(),
        "--disable-pip-version-check".into(),
        "--target".into(),
        "{env}/site".into(),
    ];
    prepare.extend(s.test_deps.iter().map(|d| d.to_string()));
    let network = network
        .map(|n| format!("network = {n:?}\n"))
        .unwrap_or_default();
    let path = w.join("airlock.toml");
    std::fs::write(
        &path,
        format!(
            "[tests]\ncommand = [{exe:?}, \"-m\", \"pytest\", \"-rA\", \"-p\", \"no:cacheprovider\", \"-p\", \"no:randomly\"{deselect}]\n\
             runner = \"pytest\"\nselector_style = \"node-id\"\ntimeout_secs = 900\nro = {ro}\n{network}\
             env = {{ PYTHONPATH = {pythonpath:?} }}\n\n\
             [tests.prepare]\ncommand = {prepare}\ntimeout_secs = 900\n\n\
             [paths]\nruns_root = \"{w}/runs\"\naudit_log = \"{w}/audit.jsonl\"\ncache_dir = \"{w}/cache\"\n\
             index_dir = \"{w}/index\"\nenvs_dir = \"{envs}\"\n",
            exe = py.exe,
            deselect = deselect_args(s)
                .iter()
                .map(|a| format!(", {a:?}"))
                .collect::<String>(),
            ro = toml_list(&grant(&py.prefix)),
            prepare = toml_list(&prepare),
            w = w.display(),
            envs = envs_dir().display(),
        ),
    )
    .unwrap();
    path
}

/// `airlock doctor --config --json`: the base inventory under airlock, and the prepared
/// environment directory.
fn doctor_inventory(config: &Path, repo: &Path, commit: &str) -> (Value, PathBuf) {
    let out = output_of(
        Command::new(airlock())
            .args(["doctor", "--json", "--config"])
            .arg(config)
            .arg("--repo")
            .arg(repo)
            .args(["--commit", commit]),
        "airlock doctor --config",
    );
    let report: Value = serde_json::from_str(&out).unwrap();
    let env_dir = PathBuf::from(
        report["baseline"]["prepare"]["env_dir"]
            .as_str()
            .unwrap_or_else(|| panic!("no prepare record: {report}")),
    );
    (report["baseline"]["inventory"]["tests"].clone(), env_dir)
}

fn passed_in(tests: &Value) -> std::collections::BTreeSet<String> {
    tests
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, status)| *status == "passed")
        .map(|(id, _)| id.clone())
        .collect()
}

/// The same command run directly, outside any sandbox, in the same prepared environment, on
/// a copy of the tree; its passing tests by airlock's own pytest parser.
fn direct_passed(
    s: &ServerSuite,
    repo: &Path,
    env_dir: &Path,
) -> std::collections::BTreeSet<String> {
    let copy = tempfile::tempdir().unwrap();
    output_of(
        Command::new("cp")
            .arg("-a")
            .arg(format!("{}/.", repo.display()))
            .arg(copy.path()),
        "cp",
    );
    let site = env_dir.join("site").display().to_string();
    let pythonpath = match s.tree_path {
        Some(p) => format!("{site}:{p}"),
        None => site,
    };
    let out = Command::new(python().exe)
        .args([
            "-m",
            "pytest",
            "-rA",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
        ])
        .args(deselect_args(s))
        .current_dir(copy.path())
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", copy.path())
        .env("PYTHONPATH", pythonpath)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("CI", "true")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let parsed =
        airlock_policies::testrun::parse(airlock_policies::testrun::TestRunner::Pytest, &text);
    parsed
        .tests
        .into_iter()
        .filter(|(_, status)| *status == airlock_policies::testrun::TestStatus::Passed)
        .map(|(id, _)| id)
        .collect()
}

/// The tests that pass on one side only: (passed directly only, passed under airlock only).
type Difference = (
    std::collections::BTreeSet<String>,
    std::collections::BTreeSet<String>,
);

fn same_tests_pass_as_directly(s: &ServerSuite) -> usize {
    let (repo, commit) = scratch_repo(s.name, &sdist(s.name, s.version));
    let w = tempfile::tempdir().unwrap();
    let config = server_suite_toml(s, None, w.path());
    let compare = || {
        let (tests, env_dir) = doctor_inventory(&config, &repo, &commit);
        let under_airlock = passed_in(&tests);
        let direct = direct_passed(s, &repo, &env_dir);
        let difference: Difference = (
            direct.difference(&under_airlock).cloned().collect(),
            under_airlock.difference(&direct).cloned().collect(),
        );
        (direct, under_airlock, difference)
    };
    let (direct, under_airlock, first) = compare();
    assert!(
        direct.len() >= s.min_passed,
        "{}: only {} tests pass directly",
        s.name,
        direct.len()
    );
    // A test that passes on one side only is looked at again with both sides rerun: what
    // airlock changes shows again; a test that lost a race with the machine's load does not.
    let (lost, gained) = if first.0.is_empty() && first.1.is_empty() {
        first
    } else {
        let (_, _, second) = compare();
        (
            first.0.intersection(&second.0).cloned().collect(),
            first.1.intersection(&second.1).cloned().collect(),
        )
    };
    assert!(
        lost.is_empty() && gained.is_empty(),
        "{}: {} pass directly, {} under airlock; lost (twice) {lost:?}, gained (twice) {gained:?}",
        s.name,
        direct.len(),
        under_airlock.len()
    );
    eprintln!(
        "{} {}: {} tests pass directly and the same under airlock (loopback), {} there",
        s.name,
        s.version,
        direct.len(),
        under_airlock.len()
    );
    under_airlock.len()
}

/// An HTTP client whose tests start fixture servers on 127.0.0.1, ::1 and localhost: the same
/// tests pass under airlock's default (loopback) network as directly; with no network at all
/// (what every test run had before), its server tests are lost.
#[test]
fn httplib2_fixture_server_suite_passes_the_same_tests_as_directly() {
    let suite = ServerSuite {
        name: "httplib2",
        version: "0.32.1",
        test_deps: &[
            "pyparsing==3.3.3",
            "cryptography==45.0.7",
            "pysocks==1.7.1",
            "pytest==8.2.2",
            "pytest-cov==4.1.0",
            "pytest-forked==1.6.0",
            "pytest-randomly==3.12.0",
            "pytest-timeout==2.3.1",
            "pytest-xdist==3.5.0",
        ],
        tree_path: None,
        min_passed: 450,
        // Compares the CPU time of two calls; a busy machine fails it either way.
        timing_tests: &["tests/test_auth.py::test_parse_www_authenticate_complexity"],
    };
    let passed = same_tests_pass_as_directly(&suite);
    let (repo, commit) = scratch_repo(suite.name, &sdist(suite.name, suite.version));
    let w = tempfile::tempdir().unwrap();
    let config = server_suite_toml(&suite, Some("none"), w.path());
    let (tests, _) = doctor_inventory(&config, &repo, &commit);
    let without_network = passed_in(&tests).len();
    eprintln!("httplib2: {without_network} pass with network = \"none\", {passed} with loopback");
    assert!(
        without_network + 50 < passed,
        "with no network {without_network} pass, with loopback {passed}"
    );
}

/// A WSGI server whose functional tests start it in a subprocess and talk to it over TCP on
/// loopback (src layout: the tree's `src` on the path).
#[test]
fn waitress_live_server_suite_passes_the_same_tests_as_directly() {
    same_tests_pass_as_directly(&ServerSuite {
        name: "waitress",
        version: "3.0.2",
        test_deps: &["pytest==9.2.0", "pytest-cov==7.1.0", "coverage==7.18.0"],
        tree_path: Some("src"),
        min_passed: 700,
        timing_tests: &[],
    });
}

/// A release's repository as the project has it: the sdist's files committed at the release's
/// date (its `PKG-INFO`'s time, or today for a reproducible sdist that dates it 1970), tagged
/// `vVERSION`.
fn release_repo(name: &str, version: &str) -> (PathBuf, String) {
    let source = sdist(name, version);
    let repo = once(&format!("releases/{name}-{version}"), |dir| {
        output_of(
            Command::new("cp")
                .arg("-a")
                .arg(format!("{}/.", source.display()))
                .arg(dir),
            "cp",
        );
        // A reproducible sdist dates its files 1970: then the release is taken as today's.
        let secs = |t: std::time::SystemTime| {
            t.duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0)
        };
        let built = std::fs::metadata(dir.join("PKG-INFO"))
            .and_then(|m| m.modified())
            .map(secs)
            .unwrap_or(0);
        let released = if built > 946_684_800 {
            built
        } else {
            secs(std::time::SystemTime::now())
        };
        let date = format!("@{released} +0000");
        let at = |args: &[&str]| {
            let out = git::command(dir)
                .args(args)
                .env("GIT_AUTHOR_DATE", &date)
                .env("GIT_COMMITTER_DATE", &date)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "git {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        at(&["init", "-q", "-b", "main"]);
        at(&["add", "-A", "-f", "."]);
        at(&["commit", "-q", "-m", &format!("{name} {version}")]);
        at(&["tag", &format!("v{version}")]);
    });
    let commit = git(&repo, &["rev-parse", "HEAD"]);
    (repo, commit)
}

/// `airlock init` into a directory of its own, then `doctor --json` with the file unchanged:
/// the tests that pass at base.
fn init_then_doctor(repo: &Path, commit: &str) -> std::collections::BTreeSet<String> {
    let w = tempfile::tempdir().unwrap();
    let home = w.path().join("home");
    let run = |args: &[&str]| {
        Command::new(airlock())
            .args(args)
            .current_dir(w.path())
            .env("AIRLOCK_HOME", &home)
            .env_remove("AIRLOCK_CONFIG")
            .output()
            .unwrap()
    };
    let init = run(&["init", "--repo", repo.to_str().unwrap()]);
    assert!(
        init.status.success(),
        "{}",
        String::from_utf8_lossy(&init.stderr)
    );
    let doctor = run(&[
        "doctor",
        "--json",
        "--config",
        "airlock.toml",
        "--repo",
        repo.to_str().unwrap(),
        "--commit",
        commit,
    ]);
    assert!(
        doctor.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&doctor.stderr),
        std::fs::read_to_string(w.path().join("airlock.toml")).unwrap_or_default()
    );
    let report: Value = serde_json::from_slice(&doctor.stdout).unwrap();
    passed_in(&report["baseline"]["inventory"]["tests"])
}

/// The project's own way, outside any sandbox: a fresh venv, `uv sync --frozen` of the test
/// group from its lockfile (as its CI does), `pytest -rA`; the passing tests by airlock's own
/// pytest parser.
fn uv_sync_then_pytest(repo: &Path, group: &str) -> std::collections::BTreeSet<String> {
    let copy = tempfile::tempdir().unwrap();
    output_of(
        Command::new("cp")
            .arg("-a")
            .arg(format!("{}/.", repo.display()))
            .arg(copy.path()),
        "cp",
    );
    let venv = copy.path().join(".direct-venv");
    output_of(
        Command::new(python().exe).args(["-m", "venv"]).arg(&venv),
        "python -m venv",
    );
    let py = venv.join("bin/python");
    output_of(
        Command::new(&py).args(["-m", "pip", "install", "--quiet", "uv"]),
        "pip install uv",
    );
    output_of(
        Command::new(venv.join("bin/uv"))
            .args([
                "sync",
                // The host's certificate store, as pip's and git's configuration use it.
                "--native-tls",
                "--frozen",
                "--no-default-groups",
                "--group",
                group,
                "--python",
            ])
            .arg(&py)
            .current_dir(copy.path())
            .env("UV_PROJECT_ENVIRONMENT", &venv)
            .env("VIRTUAL_ENV", &venv),
        "uv sync",
    );
    let out = Command::new(&py)
        .args(["-m", "pytest", "-rA", "-p", "no:cacheprovider"])
        .current_dir(copy.path())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    airlock_policies::testrun::parse(airlock_policies::testrun::TestRunner::Pytest, &text)
        .tests
        .into_iter()
        .filter(|(_, status)| *status == airlock_policies::testrun::TestStatus::Passed)
        .map(|(id, _)| id)
        .collect()
}

fn assert_same_passing(
    name: &str,
    direct: &std::collections::BTreeSet<String>,
    airlock: &std::collections::BTreeSet<String>,
    min: usize,
) {
    assert!(
        direct.len() >= min,
        "{name}: only {} tests pass directly",
        direct.len()
    );
    let lost: Vec<&String> = direct.difference(airlock).collect();
    let gained: Vec<&String> = airlock.difference(direct).collect();
    assert!(
        lost.is_empty() && gained.is_empty(),
        "{name}: {} pass directly, {} under airlock; lost {lost:?}, gained {gained:?}",
        direct.len(),
        airlock.len()
    );
    eprintln!(
        "{name}: {} tests pass directly and the same under airlock, configured by init",
        direct.len()
    );
}

/// flask declares its test dependencies in a PEP 735 group and pins pytest in `uv.lock` (a
/// newer pytest breaks its CLI tests): with the configuration `airlock init` writes, unchanged,
/// the same tests pass as with `uv sync` of that group.
#[test]
fn flask_with_a_dependency_group_and_a_locked_pytest_passes_the_same_tests_as_its_own_way() {
    let (repo, commit) = release_repo("flask", "3.1.3");
    let airlock = init_then_doctor(&repo, &commit);
    let direct = uv_sync_then_pytest(&repo, "tests");
    assert_same_passing("flask", &direct, &airlock, 400);
}

/// iniconfig's version comes from git (hatch-vcs), and its own test runner requires it
/// (pytest depends on iniconfig>=1): the editable install gets the version of the release's
/// tag, not the `0.1.dev1` a lone commit would give, so the environment installs at all.
#[test]
fn iniconfig_whose_version_comes_from_its_tag_passes_the_same_tests_as_its_own_way() {
    let (repo, commit) = release_repo("iniconfig", "2.3.1");
    let airlock = init_then_doctor(&repo, &commit);
    let direct = uv_sync_then_pytest(&repo, "dev");
    assert_same_passing("iniconfig", &direct, &airlock, 40);
}

/// iniconfig as `airlock init` configures it, unchanged: the Python recipe (a venv of the
/// interpreter chosen for the pin, the project editable with its version from the release's
/// tag, its `dev` group, `uv.lock`'s pins), every test command at `/airlock/repo`. A real fix
/// goes through the supervisor's runs and the broker's witness, which builds its trees afresh
/// and runs them in the same prepared environment.
#[test]
fn iniconfig_configured_by_init_is_fixed_and_queued_with_a_green_witness() {
    let (repo, commit) = release_repo("iniconfig", "2.3.1");
    let w = tempfile::tempdir().unwrap();
    let init = Command::new(airlock())
        .args(["init", "--repo", repo.to_str().unwrap()])
        .current_dir(w.path())
        .env("AIRLOCK_HOME", w.path().join("home"))
        .output()
        .unwrap();
    assert!(
        init.status.success(),
        "{}",
        String::from_utf8_lossy(&init.stderr)
    );
    let written = std::fs::read_to_string(w.path().join("airlock.toml")).unwrap();
    let tests_toml =
        written[written.find("[tests]").unwrap()..written.find("\n[write]").unwrap()].to_string();
    assert!(
        tests_toml.contains("[tests.prepare.python]"),
        "{tests_toml}"
    );
    // The broker lets this repository's runs grant what the file grants (init prints it).
    let ro_line = tests_toml.lines().find(|l| l.starts_with("ro = ")).unwrap();
    let allow_ro: Vec<String> = serde_json::from_str(&ro_line["ro = ".len()..]).unwrap();
    let p = Project {
        name: "iniconfig",
        repo,
        commit,
        tests_toml,
        allow_ro,
        min_tests: 40,
    };
    queue_a_real_fix(
        &p,
        &Fix {
            issue_id: "INI-1",
            issue: "---\nid: INI-1\ntitle: len() of a section fails\nlabels: [bug]\n---\n\
                    `len(IniConfig('x.ini', data='[s]\\na=1\\nb=2\\n')['s'])` raises `TypeError: object of \
                    type 'SectionWrapper' has no len()`; expected 2, the number of keys of the section. \
                    `SectionWrapper` in `src/iniconfig/__init__.py` is iterable but has no `__len__`.\n",
            test_edits: &[],
            edits: &[(
                "src/iniconfig/__init__.py",
                "    def items(self) -> Iterator[tuple[str, str]]:\n        for name in self:\n            yield name, self[name]\n",
                "    def items(self) -> Iterator[tuple[str, str]]:\n        for name in self:\n            yield name, self[name]\n\n    def __len__(self) -> int:\n        return len(self.config.sections.get(self.name, {}))\n",
            )],
            test_path: "testing/test_section_len.py",
            test_text: "from iniconfig import IniConfig\n\n\ndef test_len_of_a_section_is_its_number_of_keys():\n    ini = IniConfig(\"x.ini\", data=\"[s]\\na=1\\nb=2\\n\")\n    assert len(ini[\"s\"]) == 2\n",
            selector: "testing/test_section_len.py::test_len_of_a_section_is_its_number_of_keys",
            fails_with: "TypeError",
            failing_test: "testing/test_section_len.py::test_len_of_a_section_is_its_number_of_keys",
            title: "fix: len() of an iniconfig section",
        },
    );
}
