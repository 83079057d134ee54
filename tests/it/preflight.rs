//! `airlock run` says a mistake once, early and usefully: a model spec, an API key, a broker or
//! a repository the broker does not know is found before the pin, exits 2 and leaves no run
//! directory; a second run on an issue whose item still waits is refused unless `--again`; a
//! queued run ends with its item and the command that shows it. With the real broker.

use crate::github::{PUSH_TOKEN, PUSH_VAR, READ_TOKEN, READ_VAR, World, text, world};
use crate::run::fix_turns;
use serde_json::Value;
use std::process::{Command, Output};

/// `airlock run` on issue 7 with `model` (a scripted fix when `None`), without `--json`.
fn run(w: &World, model: Option<&str>, extra: &[&str], env: &[(&str, Option<&str>)]) -> Output {
    let script = w.s.dir.path().join("preflight-script.jsonl");
    let turns: Vec<String> = fix_turns(&w.s).iter().map(Value::to_string).collect();
    std::fs::write(&script, turns.join("\n")).unwrap();
    let spec = model.map_or_else(|| format!("scripted:{}", script.display()), str::to_owned);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_airlock"));
    cmd.args([
        "-q",
        "run",
        "--issue",
        "https://github.com/acme/calc/issues/7",
    ])
    .arg("--repo")
    .arg(&w.s.repo)
    .arg("--model")
    .arg(spec)
    .arg("--config")
    .arg(&w.airlock_toml)
    .args(extra)
    .env(READ_VAR, READ_TOKEN)
    .env_remove(PUSH_VAR);
    for (k, v) in env {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    cmd.output().unwrap()
}

/// The run directories under the runs root.
fn run_dirs(w: &World) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(w.s.dir.path().join("runs"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Exit 2, `says` said exactly once on one line of stderr, nothing raw, no run directory.
fn refused_before_the_pin(w: &World, out: &Output, says: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{}", text(out));
    assert_eq!(stderr.matches(says).count(), 1, "{says:?} once: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    for raw in [
        "failed; its outcome",
        "{\"status\"",
        "Some(",
        "class=",
        "code=",
    ] {
        assert!(!stderr.contains(raw), "{raw:?} in {stderr}");
    }
    assert_eq!(
        run_dirs(w),
        Vec::<String>::new(),
        "no run directory: {stderr}"
    );
}

#[test]
fn every_mistake_checkable_before_the_pin_exits_2_once_and_leaves_no_run_directory() {
    let mut w = world();
    let out = run(&w, Some("anthropik:claude-x"), &[], &[]);
    refused_before_the_pin(
        &w,
        &out,
        "unknown kind `anthropik` (did you mean `anthropic`?)",
    );
    let out = run(&w, Some("claude-x"), &[], &[]);
    refused_before_the_pin(
        &w,
        &out,
        "KIND is one of openai, anthropic, ollama, openai-compatible, scripted, replay",
    );
    let out = run(
        &w,
        Some("anthropic:claude-x"),
        &[],
        &[("ANTHROPIC_API_KEY", None)],
    );
    refused_before_the_pin(
        &w,
        &out,
        "API key environment variable ANTHROPIC_API_KEY is not set (or is empty): export it",
    );

    // A repository the broker does not know under the name the run registers.
    let toml = std::fs::read_to_string(&w.airlock_toml).unwrap();
    std::fs::write(
        &w.airlock_toml,
        toml.replace(
            "repository = \"acme/calc\"",
            "repository = \"acme/calculator\"",
        ),
    )
    .unwrap();
    let out = run(&w, None, &[], &[]);
    refused_before_the_pin(
        &w,
        &out,
        "the broker does not know the repository \"acme/calculator\": add a \
         [repositories.\"acme/calculator\"] block to its broker.toml",
    );
    std::fs::write(&w.airlock_toml, toml).unwrap();

    // No broker listening.
    w.stop_broker();
    let out = run(&w, None, &[], &[]);
    refused_before_the_pin(&w, &out, "does not answer: start it (`airlock-broker serve");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("broker.sock"), "{stderr}");
}

#[test]
fn a_queued_run_names_its_item_and_a_second_run_on_the_issue_needs_again() {
    let w = world();
    let first = run(&w, None, &[], &[]);
    assert_eq!(first.status.code(), Some(0), "{}", text(&first));
    let stdout = String::from_utf8_lossy(&first.stdout);
    assert_eq!(
        stdout.lines().last(),
        Some("queue item: 1 (show it with: airlock-broker show 1)"),
        "{stdout}"
    );
    let dirs = run_dirs(&w);
    assert_eq!(dirs.len(), 1, "{dirs:?}");

    let second = run(&w, None, &[], &[]);
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(2), "{}", text(&second));
    assert!(
        stderr.contains("issue CALC-7 already has queue item 1 (queued, from run CALC-7-"),
        "{stderr}"
    );
    assert!(
        stderr.contains("(`airlock-broker show 1`), or pass --again to queue another"),
        "{stderr}"
    );
    assert_eq!(run_dirs(&w), dirs, "no new run directory");

    let again = run(&w, None, &["--again"], &[]);
    assert_eq!(again.status.code(), Some(0), "{}", text(&again));
    let stdout = String::from_utf8_lossy(&again.stdout);
    assert!(
        stdout.ends_with("queue item: 2 (show it with: airlock-broker show 2)\n"),
        "{stdout}"
    );

    // Published with the forge token, the item is open no more, and publishing it again is
    // refused (exit 1, as the broker's other refusals).
    let approve = w.broker_cli(&["approve", "1"], Some(PUSH_TOKEN));
    assert!(approve.status.success(), "{}", text(&approve));
    let publish = w.broker_cli(&["publish", "1"], Some(PUSH_TOKEN));
    assert_eq!(publish.status.code(), Some(1), "{}", text(&publish));
    assert!(
        String::from_utf8_lossy(&publish.stderr).contains("is published already"),
        "{}",
        text(&publish)
    );
    assert_eq!(w.api.created_pulls().len(), 1, "no second pull request");
}

#[test]
fn judge_takes_config_and_the_older_broker_config_name() {
    for flag in ["--config", "--broker-config"] {
        let out = Command::new(env!("CARGO_BIN_EXE_airlock"))
            .args(["judge", "1", flag, "/nonexistent/broker.toml"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains("loading /nonexistent/broker.toml"),
            "{flag}: {stderr}"
        );
    }
}
