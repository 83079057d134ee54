//! The README's "First real run", step by step, from an empty directory to a draft pull request:
//! `airlock init --broker` writes both files, `airlock doctor` checks the pair (and says what
//! to fix while the broker is down), `airlock-broker serve` runs on the generated broker.toml
//! unchanged, `airlock run` drives a model over the real chat-completions protocol, and
//! `approve` pushes the branch over HTTP with the token and opens the draft pull request.
//! Stand-ins: GitHub's REST API (`MockForge`, named with `--github-api` as a GitHub Enterprise
//! would be) and its git server (`git http-backend` behind the token), and the model
//! (`MockModel`). Also here: what `init` says on a directory that is no repository, on a
//! repository without a remote and on one whose remote is not GitHub.

use crate::github::{PUSH_TOKEN, text};
use crate::run::{ISSUE, fix_turns, git, setup};
use airlock_testkit::githttp::GitHttpServer;
use airlock_testkit::mockgithub::MockForge;
use airlock_testkit::mockmodel::MockModel;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The recipe's token variable, as `init` names it in broker.toml.
const FORGE_VAR: &str = "AIRLOCK_FORGE_TOKEN";

/// A command of the recipe, run in `cwd` with airlock's data directory at `data`.
fn step(program: &Path, cwd: &Path, data: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .current_dir(cwd)
        .env("AIRLOCK_HOME", data)
        .env("USER", "operator")
        .env(FORGE_VAR, PUSH_TOKEN)
        .env_remove("AIRLOCK_CONFIG")
        .env_remove("AIRLOCK_BROKER_CONFIG")
        .env_remove("AIRLOCK_REVIEWER");
    cmd
}

fn airlock(cwd: &Path, data: &Path, args: &[&str]) -> Output {
    step(Path::new(env!("CARGO_BIN_EXE_airlock")), cwd, data, args)
        .output()
        .unwrap()
}

fn broker_cli(cwd: &Path, data: &Path, args: &[&str]) -> Output {
    step(&crate::e2e::broker(), cwd, data, args)
        .output()
        .unwrap()
}

struct Serving(std::process::Child);

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_readme_first_real_run_goes_from_an_empty_directory_to_a_published_draft_pull_request() {
    // "git clone https://github.com/YOU/PROJECT ~/src/project": the project with its forge
    // copy as `origin`, served over HTTP behind the token.
    let s = setup();
    let root = s.dir.path().to_path_buf();
    let served = root.join("served");
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
    let forge_git = GitHttpServer::start(&served, "x-access-token", PUSH_TOKEN);
    git(
        &s.repo,
        &["remote", "add", "origin", &forge_git.url("acme/calc.git")],
    );
    let api = MockForge::start();
    let data = root.join("data");

    // mkdir ~/airlock && cd ~/airlock; airlock init --repo ~/src/project --broker
    let cfg = root.join("airlock");
    std::fs::create_dir_all(&cfg).unwrap();
    let repo = s.repo.to_str().unwrap();
    let init = airlock(
        &cfg,
        &data,
        &[
            "init",
            "--repo",
            repo,
            "--broker",
            "--github-api",
            &api.base,
        ],
    );
    assert!(init.status.success(), "{}", text(&init));
    let airlock_toml = std::fs::read_to_string(cfg.join("airlock.toml")).unwrap();
    let broker_toml = std::fs::read_to_string(cfg.join("broker.toml")).unwrap();
    assert!(
        broker_toml.contains("[repositories.\"acme/calc\"]")
            && broker_toml.contains("forge_repo = \"acme/calc\"")
            && broker_toml.contains(&format!("forge_token_env = \"{FORGE_VAR}\"")),
        "{broker_toml}"
    );
    let socket = data.join("broker.sock");
    for text in [&airlock_toml, &broker_toml] {
        assert!(
            text.contains(&format!("socket = \"{}\"", socket.display())),
            "{text}"
        );
        assert!(
            text.contains(&format!("runs_root = \"{}\"", data.join("runs").display())),
            "{text}"
        );
    }
    // A second init keeps both files and names the one it would overwrite.
    let again = airlock(&cfg, &data, &["init", "--repo", repo, "--broker"]);
    assert_eq!(again.status.code(), Some(2), "{}", text(&again));
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("airlock.toml already exists"),
        "{}",
        text(&again)
    );
    assert_eq!(
        std::fs::read_to_string(cfg.join("broker.toml")).unwrap(),
        broker_toml
    );

    // `doctor` before the broker runs: one line, and the command that fixes it.
    let doctor_args = ["doctor", "--config", "airlock.toml", "--repo", repo];
    let doctor = airlock(&cfg, &data, &doctor_args);
    let out = text(&doctor);
    assert_eq!(doctor.status.code(), Some(1), "{out}");
    assert!(
        out.contains("FIX  the broker does not answer at")
            && out.contains("start it: airlock-broker --config"),
        "{out}"
    );
    assert!(
        out.contains("ok   repository \"acme/calc\" is registered"),
        "{out}"
    );

    // airlock-broker --config broker.toml serve &
    let log = std::fs::File::create(root.join("broker.log")).unwrap();
    let _broker = Serving(
        step(
            &crate::e2e::broker(),
            &cfg,
            &data,
            &["--config", "broker.toml", "serve"],
        )
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap(),
    );
    crate::e2e::wait_for_socket(&socket, Some(&root.join("broker.log")));

    // airlock doctor --config airlock.toml --repo ~/src/project: every check passes.
    let doctor = airlock(&cfg, &data, &doctor_args);
    let out = text(&doctor);
    assert_eq!(doctor.status.code(), Some(0), "{out}");
    assert!(!out.contains("FIX"), "{out}");
    for line in [
        "ok   the broker answers at",
        "are allowed (allow_ro, witness_ro)",
        &format!("ok   the forge token variable {FORGE_VAR} is set"),
    ] {
        assert!(out.contains(line), "{line}: {out}");
    }

    // The issue, and airlock run with a model (an OpenAI-compatible stand-in).
    std::fs::write(cfg.join("issue.md"), ISSUE).unwrap();
    // The fix's turns without its first three (the reader delegation, which a chat-completions
    // stand-in does not play), as `run_drives_an_openai_compatible_server_…` plays them.
    let model = MockModel::start(fix_turns(&s).into_iter().skip(3).collect());
    let spec = model.spec("gpt-test");
    let run = airlock(
        &cfg,
        &data,
        &[
            "run",
            "--repo",
            repo,
            "--commit",
            "HEAD",
            "--issue",
            "issue.md",
            "--model",
            &spec,
            "--config",
            "airlock.toml",
        ],
    );
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}\nbroker: {}",
        text(&run),
        std::fs::read_to_string(root.join("broker.log")).unwrap_or_default()
    );

    // show 1, approve 1: the branch is pushed with the token, the draft pull request opened.
    let show = broker_cli(&cfg, &data, &["--config", "broker.toml", "show", "1"]);
    assert!(show.status.success(), "{}", text(&show));
    let approve = broker_cli(&cfg, &data, &["--config", "broker.toml", "approve", "1"]);
    assert!(approve.status.success(), "{}", text(&approve));
    let pushed = airlock_testkit::git_output(
        &served.join("acme/calc.git"),
        &["rev-parse", "--verify", "-q", "refs/heads/airlock/CALC-7-1"],
    );
    assert!(pushed.status.success(), "the branch was not pushed");
    let pulls = api.created_pulls();
    assert_eq!(pulls.len(), 1, "{pulls:?}");
    assert_eq!(pulls[0]["draft"], true);
    assert_eq!(pulls[0]["head"], "airlock/CALC-7-1");
    let shown = broker_cli(
        &cfg,
        &data,
        &["--config", "broker.toml", "show", "1", "--json"],
    );
    assert!(
        String::from_utf8_lossy(&shown.stdout).contains("\"published\""),
        "{}",
        text(&shown)
    );
}

/// `init` in `dir` on `repo`, data in `dir/data`; its output.
fn init_in(dir: &Path, repo: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["init", "--repo", repo.to_str().unwrap(), "--broker"];
    args.extend_from_slice(extra);
    airlock(dir, &dir.join("data"), &args)
}

fn broker_config(dir: &Path) -> airlock_broker::BrokerConfig {
    airlock_broker::BrokerConfig::load(&dir.join("broker.toml")).unwrap()
}

#[test]
fn init_refuses_a_directory_that_is_no_repository_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    std::fs::write(plain.join("test_a.py"), "").unwrap();
    let out = init_in(dir.path(), &plain, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("{} is not a git repository", plain.display()))
            && stderr.contains("git init"),
        "{stderr}"
    );
    for file in ["airlock.toml", "broker.toml"] {
        assert!(!dir.path().join(file).exists(), "{file} was written");
    }
    // A directory inside a repository: the error names its top.
    let top = dir.path().join("top");
    airlock_testkit::git::repo_with(&top, &[("pkg/test_a.py", "")]);
    let out = init_in(dir.path(), &top.join("pkg"), &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&format!("pass --repo {}", top.display())),
        "{}",
        text(&out)
    );
    assert!(!dir.path().join("airlock.toml").exists());
}

#[test]
fn without_a_remote_init_says_so_and_names_the_repository_itself_as_the_remote() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("calc");
    airlock_testkit::git::repo_with(&repo, &[("test_a.py", "")]);
    let out = init_in(dir.path(), &repo, &[]);
    assert!(out.status.success(), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("has no git remote") && stderr.contains("git remote add origin"),
        "{stderr}"
    );
    let airlock_toml = std::fs::read_to_string(dir.path().join("airlock.toml")).unwrap();
    assert!(!airlock_toml.contains("\"origin\""), "{airlock_toml}");
    let broker = broker_config(dir.path());
    let calc = &broker.repositories["calc"];
    assert_eq!(PathBuf::from(&calc.remote), repo.canonicalize().unwrap());
    assert_eq!(calc.forge_token_env, None);
}

#[test]
fn a_remote_off_github_gets_a_push_without_a_pull_request_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("calc");
    airlock_testkit::git::repo_with(
        &repo,
        &[(
            "test_a.py",
            "import unittest\n\n\nclass T(unittest.TestCase):\n    def test_a(self):\n        pass\n",
        )],
    );
    git(
        &repo,
        &[
            "remote",
            "add",
            "origin",
            "https://git.example.org/acme/calc.git",
        ],
    );
    let out = init_in(dir.path(), &repo, &[]);
    assert!(out.status.success(), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("is not on GitHub, nor on GitLab") && stderr.contains("--gitlab-api"),
        "{stderr}"
    );
    let broker = broker_config(dir.path());
    let calc = &broker.repositories["calc"];
    assert_eq!(calc.remote, "origin");
    assert_eq!(
        (calc.forge_repo.as_deref(), calc.forge_token_env.as_deref()),
        (None, None)
    );
    // doctor says the HTTPS push has no credential named, with the key to set.
    let out = airlock(
        dir.path(),
        &dir.path().join("data"),
        &[
            "doctor",
            "--config",
            "airlock.toml",
            "--repo",
            repo.to_str().unwrap(),
        ],
    );
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        all.contains("FIX  the remote https://git.example.org/acme/calc.git is pushed over HTTPS")
            && all.contains("set forge_token_env = \"AIRLOCK_FORGE_TOKEN\""),
        "{all}"
    );
}

#[test]
fn a_gitlab_remote_gets_its_forge_table_and_doctor_checks_its_token() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("calc");
    airlock_testkit::git::repo_with(
        &repo,
        &[(
            "test_a.py",
            "import unittest\n\n\nclass T(unittest.TestCase):\n    def test_a(self):\n        pass\n",
        )],
    );
    git(
        &repo,
        &[
            "remote",
            "add",
            "origin",
            "https://gitlab.com/acme/calc.git",
        ],
    );
    let out = init_in(dir.path(), &repo, &[]);
    assert!(out.status.success(), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("GitLab's project acme/calc") && stderr.contains("kind = \"gitlab\""),
        "{stderr}"
    );
    // broker.toml publishes there: a GitLab forge, its project, its token variable.
    let broker = broker_config(dir.path());
    let calc = &broker.repositories["acme/calc"];
    assert_eq!(calc.remote, "origin");
    assert_eq!(
        calc.forge_kind(),
        airlock_broker::config::forge::ForgeKind::GitLab
    );
    let gitlab = calc.gitlab.as_ref().unwrap();
    assert_eq!(gitlab.api_url, "https://gitlab.com/api/v4");
    assert_eq!(gitlab.project.to_string(), "acme/calc");
    assert_eq!(calc.forge_token_env.as_deref(), Some("AIRLOCK_FORGE_TOKEN"));
    // doctor: the token variable the table names is checked (each step sets it).
    let out = airlock(
        dir.path(),
        &dir.path().join("data"),
        &[
            "doctor",
            "--config",
            "airlock.toml",
            "--repo",
            repo.to_str().unwrap(),
        ],
    );
    let all = text(&out);
    assert!(
        all.contains(&format!("ok   the forge token variable {FORGE_VAR} is set")),
        "{all}"
    );
    // Unset, the fix names the token GitLab needs.
    let out = step(
        Path::new(env!("CARGO_BIN_EXE_airlock")),
        dir.path(),
        &dir.path().join("data"),
        &[
            "doctor",
            "--config",
            "airlock.toml",
            "--repo",
            repo.to_str().unwrap(),
        ],
    )
    .env_remove(FORGE_VAR)
    .output()
    .unwrap();
    let all = text(&out);
    assert!(
        all.contains(&format!(
            "FIX  the forge token variable {FORGE_VAR} is not set here"
        )) && all.contains("a GitLab token with scope api"),
        "{all}"
    );
}
