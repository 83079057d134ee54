//! `docs/scripted-model.md` is true: every script in it parses with the scripted model's own
//! parser, and its example rehearsal runs through the real `airlock run` to the escalation it
//! promises, on the repository it describes, logging a span for each of the run's phases.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::run::{ISSUE, broker_stub, setup};

const DOC: &str = include_str!("../../docs/scripted-model.md");

/// The fenced blocks of `DOC` whose info string is `lang`.
fn blocks(lang: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut current: Option<String> = None;
    for line in DOC.lines() {
        match (&mut current, line.strip_prefix("```")) {
            (None, Some(info)) if info.trim() == lang => current = Some(String::new()),
            (Some(block), Some("")) => {
                found.push(std::mem::take(block));
                current = None;
            }
            (Some(block), _) => {
                block.push_str(line);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    found
}

#[test]
fn every_script_in_the_doc_parses_with_the_real_parser() {
    let scripts: Vec<String> = ["json", "jsonl"].iter().flat_map(|l| blocks(l)).collect();
    assert!(!scripts.is_empty(), "no script in the doc");
    for script in &scripts {
        let turns = airlock_model::parse_script(Path::new("doc"), script)
            .unwrap_or_else(|e| panic!("{e}:\n{script}"));
        assert!(!turns.is_empty());
    }
}

#[test]
fn the_docs_rehearsal_runs_to_an_escalation_logging_each_phase() {
    let [rehearsal] = &blocks("jsonl")[..] else {
        panic!("the doc has one jsonl example")
    };
    let s = setup();
    let socket = s.dir.path().join("broker.sock");
    let _seen = broker_stub(&socket);
    let config = s.dir.path().join("airlock.toml");
    std::fs::write(
        &config,
        format!(
            "[tests]\ncommand = [\"python3\", \"-m\", \"unittest\", \"-v\"]\n\n[broker]\nsocket = \"{}\"\n\n\
             [paths]\nruns_root = \"runs\"\naudit_log = \"audit.jsonl\"\ncache_dir = \"cache\"\nindex_dir = \"index\"\n",
            socket.display()
        ),
    )
    .unwrap();
    let issue = s.dir.path().join("issue.md");
    std::fs::write(&issue, ISSUE).unwrap();
    let script = s.dir.path().join("rehearsal.jsonl");
    std::fs::write(&script, rehearsal).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_airlock"))
        .args(["-vv", "--log-format", "json", "run", "--json"])
        .args(["--repo", s.repo.to_str().unwrap(), "--commit", "main"])
        .arg("--issue")
        .arg(&issue)
        .arg("--model")
        .arg(format!("scripted:{}", script.display()))
        .arg("--config")
        .arg(&config)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    let outcome: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not the outcome document ({e}): {stderr}"));
    assert_eq!(outcome["result"], "escalated", "{outcome}");

    // With --json and --log-format json, stderr is JSON lines only: the progress stream's
    // events and the log's, which carry a level and fields.
    let lines: Vec<Value> = stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect();
    let closed: Vec<&str> = lines
        .iter()
        .filter(|l| l.get("level").is_some())
        .inspect(|l| assert!(l["fields"].is_object(), "{l}"))
        .filter(|l| l["fields"]["message"] == "close")
        .filter_map(|l| l["span"]["name"].as_str())
        .collect();
    for phase in [
        "pin",
        "worktree",
        "index",
        "prepare",
        "inventory",
        "warm_start",
        "turn",
        "tool_call",
        "command",
    ] {
        assert!(
            closed.contains(&phase),
            "no {phase} span closed: {closed:?}"
        );
    }
    assert_eq!(
        closed.iter().filter(|n| **n == "turn").count(),
        4,
        "one span a turn: {closed:?}"
    );
}
