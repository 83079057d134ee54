//! From a GitHub issue to a draft pull request, with every part real but GitHub itself: the
//! issue is fetched by `airlock run` from a mock of the REST API on loopback, the fix is
//! queued by the real `airlock-broker serve` after its witness, `airlock-broker approve`
//! pushes it with the token over smart HTTP to `git http-backend` behind Basic
//! authentication, and the draft pull request closes the issue. A second run on the same
//! issue is queued and published on a branch of its own.

use crate::run::{Setup, fix_turns, git, setup};
use airlock_testkit::githttp::GitHttpServer;
use airlock_testkit::mockgithub::MockForge;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};

pub(crate) const READ_VAR: &str = "AIRLOCK_E2E_GITHUB_READ_TOKEN";
pub(crate) const READ_TOKEN: &str = "ghr-read-5be1d0";
pub(crate) const PUSH_VAR: &str = "AIRLOCK_E2E_FORGE_TOKEN";
pub(crate) const PUSH_TOKEN: &str = "ghp-push-93c7aa";

pub(crate) struct World {
    pub(crate) s: Setup,
    pub(crate) api: MockForge,
    pub(crate) git: GitHttpServer,
    pub(crate) airlock_toml: PathBuf,
    pub(crate) broker_toml: PathBuf,
    broker: Child,
}

impl Drop for World {
    fn drop(&mut self) {
        let _ = self.broker.kill();
        let _ = self.broker.wait();
    }
}

pub(crate) fn world() -> World {
    world_with(false)
}

/// The world, its broker's `serve` holding the forge token when `serve_token` (a broker that
/// reads reviews from the forge for follow-ups needs it).
pub(crate) fn world_with(serve_token: bool) -> World {
    world_configured(serve_token, "")
}

/// [`world_with`], with `broker_extra` appended to broker.toml (tables after the repository's).
pub(crate) fn world_configured(serve_token: bool, broker_extra: &str) -> World {
    let s = setup();
    let dir = s.dir.path().to_path_buf();
    // The forge's copy of the repository, served over HTTP; the broker's own clone.
    let served = dir.join("served");
    std::fs::create_dir_all(&served).unwrap();
    git(
        &served,
        &[
            "clone",
            "-q",
            "--bare",
            s.repo.to_str().unwrap(),
            "calc.git",
        ],
    );
    std::fs::create_dir_all(served.join("acme")).unwrap();
    git(
        &served,
        &[
            "clone",
            "-q",
            "--bare",
            s.repo.to_str().unwrap(),
            "acme/calc.git",
        ],
    );
    git(
        &dir,
        &["clone", "-q", s.repo.to_str().unwrap(), "broker-clone"],
    );
    let git_server = GitHttpServer::start(&served, "x-access-token", PUSH_TOKEN);

    let api = MockForge::start();
    api.route("/repos/acme/calc", 200, json!({"default_branch": "main"}));
    api.route(
        "/repos/acme/calc/issues/7",
        200,
        json!({
            "number": 7,
            "title": "add() returns the wrong sum",
            "body": "`calc.ops.add(2, 3)` returns -1; expected 5.",
            "labels": [{"name": "bug"}],
            "user": {"login": "alice"},
            "state": "open",
            "comments": 0,
            "html_url": "https://github.com/acme/calc/issues/7",
        }),
    );

    let socket = dir.join("broker.sock");
    let airlock_toml = dir.join("airlock.toml");
    std::fs::write(
        &airlock_toml,
        format!(
            "[tests]\ncommand = [\"python3\", \"-m\", \"unittest\", \"-v\"]\n\n\
             [broker]\nsocket = \"{}\"\nrepository = \"acme/calc\"\n\n\
             [github]\napi_url = \"{}\"\ntoken_env = \"{READ_VAR}\"\nproject_key = \"CALC\"\n\n\
             [paths]\nruns_root = \"runs\"\naudit_log = \"audit.jsonl\"\ncache_dir = \"cache\"\nindex_dir = \"index\"\n",
            socket.display(),
            api.base,
        ),
    )
    .unwrap();
    let broker_toml = dir.join("broker.toml");
    std::fs::write(
        &broker_toml,
        format!(
            "socket = \"{}\"\nstate_db = \"{d}/broker.db\"\nruns_root = \"{d}/runs\"\n\
             audit_log = \"{d}/broker-audit.jsonl\"\nwitness_timeout = \"120s\"\nqueue_max_age = \"7d\"\n\n\
             [repositories.\"acme/calc\"]\nclone = \"{d}/broker-clone\"\nremote = \"{}\"\n\
             forge_token_env = \"{PUSH_VAR}\"\ngithub_api = \"{}\"\nforge_repo = \"acme/calc\"\n\
             base_branch = \"main\"\n{broker_extra}",
            socket.display(),
            git_server.url("calc.git"),
            api.base,
            d = dir.display(),
        ),
    )
    .unwrap();
    // `serve` needs no forge token for publication (it reads it where it happens); it does to
    // read a reviewer's feedback from the forge.
    let mut broker = Command::new(crate::e2e::broker());
    broker.arg("--config").arg(&broker_toml).arg("serve");
    if serve_token {
        broker.env(PUSH_VAR, PUSH_TOKEN);
    } else {
        broker.env_remove(PUSH_VAR);
    }
    let broker = broker
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(dir.join("broker.log")).unwrap())
        .spawn()
        .unwrap();
    crate::e2e::wait_for_socket(&socket, Some(&dir.join("broker.log")));
    World {
        s,
        api,
        git: git_server,
        airlock_toml,
        broker_toml,
        broker,
    }
}

impl World {
    /// Stop the broker as a crash would.
    pub(crate) fn stop_broker(&mut self) {
        let _ = self.broker.kill();
        let _ = self.broker.wait();
    }

    pub(crate) fn run(&self, n: usize) -> Output {
        self.run_turns(n, &fix_turns(&self.s))
    }

    /// `airlock run` on issue 7 with the scripted `turns` (script file number `n`).
    pub(crate) fn run_turns(&self, n: usize, turns: &[Value]) -> Output {
        self.run_turns_with(n, turns, &[])
    }

    /// [`Self::run_turns`] with more arguments (`--again`, for a test that queues issue 7
    /// again on purpose).
    pub(crate) fn run_turns_with(&self, n: usize, turns: &[Value], extra: &[&str]) -> Output {
        let script = self.s.dir.path().join(format!("script-{n}.jsonl"));
        let turns: Vec<String> = turns.iter().map(Value::to_string).collect();
        std::fs::write(&script, turns.join("\n")).unwrap();
        Command::new(env!("CARGO_BIN_EXE_airlock"))
            .args(["run", "--issue", "https://github.com/acme/calc/issues/7"])
            .args(extra)
            .arg("--repo")
            .arg(&self.s.repo)
            .arg("--model")
            .arg(format!("scripted:{}", script.display()))
            .arg("--config")
            .arg(&self.airlock_toml)
            .arg("--json")
            .env(READ_VAR, READ_TOKEN)
            .env_remove(PUSH_VAR)
            .output()
            .unwrap()
    }

    pub(crate) fn broker_cli(&self, args: &[&str], token: Option<&str>) -> Output {
        let mut cmd = Command::new(crate::e2e::broker());
        cmd.arg("--config")
            .arg(&self.broker_toml)
            .args(args)
            .env("AIRLOCK_REVIEWER", "e2e-approver")
            .env_remove(PUSH_VAR);
        if let Some(t) = token {
            cmd.env(PUSH_VAR, t);
        }
        cmd.output().unwrap()
    }

    pub(crate) fn served_ref(&self, branch: &str) -> Option<String> {
        let out = airlock_testkit::git_output(
            &self.s.dir.path().join("served/calc.git"),
            &[
                "rev-parse",
                "--verify",
                "-q",
                &format!("refs/heads/{branch}"),
            ],
        );
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }
}

pub(crate) fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn files_below(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = entry.path();
        if p.is_dir() {
            files_below(&p, out);
        } else {
            out.push(p);
        }
    }
}

#[test]
fn a_github_issue_becomes_a_draft_pull_request_pushed_over_http_with_the_token() {
    let w = world();
    let run = w.run(1);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    let outcome: Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(outcome["issue_id"], "CALC-7");
    assert_eq!(outcome["result"], "pr_queued");
    assert_eq!(outcome["intake"]["number"], 7);
    assert_eq!(outcome["intake"]["pin"]["from"]["default_branch"], "main");
    assert_eq!(outcome["base_commit"], w.s.commit);
    // The issue was read with the operator's read token, and only that.
    let issue_get = w
        .api
        .requests()
        .into_iter()
        .find(|r| r.path == "/repos/acme/calc/issues/7")
        .expect("the issue was fetched");
    assert_eq!(
        issue_get.header("authorization"),
        Some(format!("Bearer {READ_TOKEN}").as_str())
    );

    let approve = w.broker_cli(&["approve", "1"], Some(PUSH_TOKEN));
    assert!(approve.status.success(), "{}", text(&approve));
    let first = w.served_ref("airlock/CALC-7-1").expect("pushed over HTTP");
    assert!(w.git.receive_pack_posts() >= 1);
    let pulls = w.api.created_pulls();
    assert_eq!(pulls.len(), 1, "{pulls:?}");
    assert_eq!(pulls[0]["draft"], true);
    assert_eq!(pulls[0]["head"], "airlock/CALC-7-1");
    assert_eq!(pulls[0]["base"], "main");
    let body = pulls[0]["body"].as_str().unwrap();
    assert!(body.starts_with("add() subtracted."), "{body}");
    assert!(body.contains("\nCloses #7\n"), "{body}");
    assert!(body.contains(outcome["run_id"].as_str().unwrap()), "{body}");

    // A second run on the same issue: its own queue item, its own branch, its own PR.
    let run = w.run(2);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    let approve = w.broker_cli(&["approve", "2"], Some(PUSH_TOKEN));
    assert!(approve.status.success(), "{}", text(&approve));
    assert!(
        w.served_ref("airlock/CALC-7-2").is_some(),
        "second branch pushed"
    );
    assert_eq!(
        w.served_ref("airlock/CALC-7-1"),
        Some(first),
        "first branch untouched"
    );
    assert_eq!(w.api.created_pulls().len(), 2);
    assert_eq!(w.api.created_pulls()[1]["head"], "airlock/CALC-7-2");

    // Neither token is in any record either process wrote.
    let mut files = Vec::new();
    files_below(w.s.dir.path(), &mut files);
    for f in files
        .iter()
        .filter(|f| !f.starts_with(w.s.dir.path().join("served")))
    {
        let bytes = std::fs::read(f).unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes);
        for token in [READ_TOKEN, PUSH_TOKEN] {
            assert!(!text.contains(token), "{} holds a token", f.display());
        }
    }
}

#[test]
fn approving_without_the_forge_token_refuses_before_pushing_and_names_the_variable() {
    let w = world();
    let run = w.run(1);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    let approve = w.broker_cli(&["approve", "1"], None);
    assert!(!approve.status.success(), "{}", text(&approve));
    assert!(
        String::from_utf8_lossy(&approve.stderr).contains(PUSH_VAR),
        "{}",
        text(&approve)
    );
    assert_eq!(w.served_ref("airlock/CALC-7-1"), None);
    assert!(w.api.created_pulls().is_empty());
    // The item is still there to approve once the token is set.
    let approve = w.broker_cli(&["approve", "1"], Some(PUSH_TOKEN));
    assert!(approve.status.success(), "{}", text(&approve));
    assert!(w.served_ref("airlock/CALC-7-1").is_some());
}

#[test]
fn without_repo_the_issues_own_repository_is_cloned_over_http_with_the_read_token() {
    let w = world();
    // The issue's URL names the forge's web host: here the smart-HTTP server, whose one
    // accepted password is used as the read token too.
    let script = w.s.dir.path().join("script-escalate.jsonl");
    let escalate = json!({"outcome": "escalate", "summary": "looked only", "root_cause": "",
        "files_changed": [], "tests_added": [], "test_evidence": {"before": "", "after": ""},
        "also_noticed": [], "injection_observed": [], "confidence": 0.2});
    std::fs::write(&script, json!({"text": escalate.to_string()}).to_string()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_airlock"))
        .arg("run")
        .arg("--issue")
        .arg(format!("{}/acme/calc/issues/7", w.git.base))
        .arg("--model")
        .arg(format!("scripted:{}", script.display()))
        .arg("--config")
        .arg(&w.airlock_toml)
        .arg("--json")
        .env(READ_VAR, PUSH_TOKEN)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let outcome: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(outcome["base_commit"], w.s.commit);
    assert!(
        w.git
            .requests()
            .iter()
            .any(|r| r.authorized && r.path.starts_with("/acme/calc.git/") && r.status == 200),
        "the mirror was cloned with the token: {:?}",
        w.git.requests()
    );
    let cache = w.s.dir.path().join("cache");
    let mut files = Vec::new();
    files_below(&cache, &mut files);
    assert!(!files.is_empty());
    for f in files {
        let bytes = std::fs::read(&f).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(PUSH_TOKEN),
            "{}",
            f.display()
        );
    }
}
