//! End-to-end tests of `airlock history search` and `airlock eval history` over a fixture
//! repository with known merged fixes (merge and squash commits).

use std::process::{Command, Output};

use airlock_testkit::git::merged_history;
use serde_json::Value;

fn airlock(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_airlock"))
        .args(args)
        .output()
        .unwrap()
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "airlock failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn history_search_finds_the_earlier_fix_and_nothing_after_the_commit() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("client");
    let h = merged_history(&repo);
    let idx = dir.path().join("index");
    let (repo_s, idx_s) = (repo.to_str().unwrap(), idx.to_str().unwrap());
    let query = "the client follows a 301 redirect forever";
    let out = stdout(&airlock(&[
        "history",
        "search",
        repo_s,
        query,
        "--commit",
        &h.pin,
        "--index-dir",
        idx_s,
    ]));
    let first = out.lines().next().unwrap_or_default();
    assert!(
        first.starts_with(
            " 1. #12 Stop following redirects in a loop  [src/http/redirects.py]  +3 -1"
        ),
        "{out}"
    );
    // The JSON form: the same ranking, and nothing merged after the pin.
    let json = |commit: &str, q: &str| -> Vec<Value> {
        let out = stdout(&airlock(&[
            "history",
            "search",
            repo_s,
            q,
            "--commit",
            commit,
            "--index-dir",
            idx_s,
            "--json",
        ]));
        serde_json::from_str(&out).unwrap()
    };
    let utf16 = "decoding a UTF-16 JSON body with a byte order mark";
    assert!(
        json(&h.pin, utf16)
            .iter()
            .all(|hit| hit["pr"]["number"] != 20)
    );
    assert_eq!(json(&h.after_pin, utf16)[0]["pr"]["number"], 20);
    // Deterministic: the same query twice gives the same bytes.
    let a = airlock(&[
        "history",
        "search",
        repo_s,
        query,
        "--commit",
        &h.pin,
        "--index-dir",
        idx_s,
        "--json",
    ]);
    let b = airlock(&[
        "history",
        "search",
        repo_s,
        query,
        "--commit",
        &h.pin,
        "--index-dir",
        idx_s,
        "--json",
    ]);
    assert_eq!(a.stdout, b.stdout);
}

#[test]
fn history_search_refuses_a_query_without_terms_and_an_unknown_commit() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("client");
    merged_history(&repo);
    let idx = dir.path().join("index");
    let out = airlock(&[
        "history",
        "search",
        repo.to_str().unwrap(),
        "the of",
        "--index-dir",
        idx.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("has no searchable terms"));
    let out = airlock(&[
        "history",
        "search",
        repo.to_str().unwrap(),
        "redirect",
        "--commit",
        "nope",
        "--index-dir",
        idx.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot resolve \"nope\""));
}

#[test]
fn eval_history_scores_the_best_match_against_the_gold_files() {
    let dir = tempfile::tempdir().unwrap();
    let mirrors = dir.path().join("mirrors");
    let repo = mirrors.join("acme+client");
    let h = merged_history(&repo);
    // Two held-out fixes at the pin: one like #12 (redirects), one like #15 (cookies) whose
    // gold file #12 never touched.
    let instance = |id: &str, query: &str, file: &str| {
        serde_json::json!({
            "instance_id": id, "repo": "acme/client", "base_commit": h.pin,
            "problem_statement": query,
            "patch": format!("diff --git a/{file} b/{file}\n--- a/{file}\n+++ b/{file}\n@@ -1 +1 @@\n-a\n+b\n"),
        })
        .to_string()
    };
    let file = dir.path().join("instances.jsonl");
    std::fs::write(
        &file,
        [
            instance(
                "a-1",
                "redirect loop: a 301 to itself is followed forever",
                "src/http/redirects.py",
            ),
            instance(
                "a-2",
                "cookie domain dropped by CookieJar.update",
                "src/http/cookies.py",
            ),
            instance(
                "a-3",
                "JSON decoder fails on a byte order mark",
                "src/json/decoder.py",
            ),
        ]
        .join("\n"),
    )
    .unwrap();
    let out = airlock(&[
        "eval",
        "history",
        "--instances",
        file.to_str().unwrap(),
        "--mirrors",
        mirrors.to_str().unwrap(),
        "--json",
    ]);
    let report: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(report["instances"], 3);
    let hits: Vec<bool> = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["hit_at_1"].as_bool().unwrap())
        .collect();
    // The decoder fix (#20) comes after the pin: nothing touched that file before it.
    assert_eq!(hits, vec![true, true, false]);
    assert!((report["hit_at_1"].as_f64().unwrap() - 2.0 / 3.0).abs() < 1e-9);
}
