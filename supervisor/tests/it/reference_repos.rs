//! Reference repositories: every status of the contract over repositories the tests create,
//! the determinism of the answer, and in a run the `skill_call` record, the `@reference/`
//! reads and searches, and the refusal of any edit target inside a reference repository.

use crate::fixture::*;
use airlock_checkout::MirrorCache;
use airlock_supervisor::reference_repos::{self, Request};
use serde_json::{Value, json};
use std::path::Path;

const SERVER_JS: &str = "const express = require('express');\nconst app = express();\n\napp.get('/health', (req, res) => res.send('ok'));\napp.post('/login', login);\n\nfunction login(req, res) {\n  res.send('token');\n}\n\napp.listen(8080);\n";

/// An exemplar service: an express server, a manifest, a test and docs, on `main` with a
/// `v1` tag; a second commit on `main` moves the branch past the tag.
fn exemplar(dir: &Path) -> (String, String) {
    let tagged = git::repo_with(
        dir,
        &[
            (
                "package.json",
                "{\"name\": \"svc\", \"main\": \"src/server.js\"}\n",
            ),
            ("src/server.js", SERVER_JS),
            (
                "src/auth/token.js",
                "export function sign(claims) {\n  return JSON.stringify(claims);\n}\n",
            ),
            ("test/server.test.js", "test('health', () => {});\n"),
            ("docs/layout.md", "# Layout\n"),
        ],
    );
    git::git(dir, &["tag", "v1"]);
    let head = git::commit(dir, &[("src/extra.js", "export const x = 1;\n")], "more");
    (tagged, head)
}

fn write_entry(dir: &Path, file: &str, text: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(file), text).unwrap();
}

fn answer(dir: &Path, cache: &Path, max_files: usize, language: Option<&str>) -> (Value, String) {
    let cache = MirrorCache::new(cache).unwrap();
    let collected = reference_repos::collect(&Request {
        dir,
        max_files,
        language,
        cache: &cache,
    });
    let text = collected.answer.to_json();
    (serde_json::from_str(&text).unwrap(), text)
}

pub fn each_status_is_reported_on_its_own_and_the_others_still_answer() {
    let tmp = tempfile::tempdir().unwrap();
    let (tagged, head) = exemplar(&tmp.path().join("svc"));
    let url = format!("file://{}", tmp.path().join("svc").display());
    let refs = tmp.path().join("refs");
    write_entry(
        &refs,
        "a-default.yml",
        &format!(
            "repo: {url}\nrationale: \"The service layout to follow.\"\ncalm_layer: identity\n"
        ),
    );
    write_entry(
        &refs,
        "b-tagged.yaml",
        &format!("repo: {url}\nref: v1\nrationale: Tagged.\napplies_to_languages: [javascript]\n"),
    );
    write_entry(
        &refs,
        "c-unreachable.yml",
        "repo: http://127.0.0.1:1/nobody/nothing.git\nrationale: Gone.\n",
    );
    write_entry(
        &refs,
        "d-unknown-key.yml",
        &format!("repo: {url}\nrationale: Typo.\nbranch: main\n"),
    );
    write_entry(&refs, "e-no-rationale.yml", &format!("repo: {url}\n"));
    write_entry(
        &refs,
        "f-missing-ref.yml",
        &format!("repo: {url}\nref: no-such-branch\nrationale: Wrong ref.\n"),
    );
    write_entry(&refs, "notes.md", "not an entry\n");

    let (value, _) = answer(&refs, &tmp.path().join("cache"), 200, None);
    assert_eq!(value["ok"], true);
    assert_eq!(value["mode"], "reference");
    assert!(value.get("reason").is_none());
    let repos = value["repos"].as_array().unwrap();
    let slugs: Vec<&str> = repos.iter().map(|r| r["slug"].as_str().unwrap()).collect();
    assert_eq!(
        slugs,
        [
            "a-default",
            "b-tagged",
            "c-unreachable",
            "d-unknown-key",
            "e-no-rationale",
            "f-missing-ref"
        ]
    );
    let statuses: Vec<&str> = repos
        .iter()
        .map(|r| r["status"].as_str().unwrap())
        .collect();
    assert_eq!(
        statuses,
        [
            "ok",
            "ok",
            "fetch-error",
            "mesh-config-malformed",
            "mesh-config-malformed",
            "ref-not-found"
        ]
    );

    // ok: the default branch, resolved to its head; the tag to its own commit.
    let a = &repos[0];
    assert_eq!(a["ok"], true);
    assert_eq!(a["reference"], true);
    assert_eq!(a["repo"]["name"], "svc");
    assert_eq!(a["repo"]["ref"], "main");
    assert_eq!(a["repo"]["sha"], head.as_str());
    assert_eq!(a["rationale"], "The service layout to follow.");
    assert_eq!(a["calm_layer"], "identity");
    let s = &a["structure"];
    assert_eq!(s["topDirs"], json!(["docs", "src", "test"]));
    assert_eq!(s["manifests"], json!(["package.json"]));
    assert_eq!(s["languages"]["javascript"], 4);
    assert_eq!(
        s["entryPoints"],
        json!([{"path": "src/server.js", "framework": "express"}])
    );
    assert_eq!(
        s["routes"],
        json!([
            {"path": "src/server.js", "line": 4, "method": "GET", "route": "/health", "framework": "express"},
            {"path": "src/server.js", "line": 5, "method": "POST", "route": "/login", "framework": "express"},
        ])
    );
    assert_eq!(
        s["tests"],
        json!([{"path": "test/server.test.js", "language": "javascript"}])
    );
    let modules: Vec<&str> = s["modules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        modules,
        ["src/auth/token.js", "src/extra.js", "src/server.js"]
    );
    assert_eq!(
        a["inventory_paths"],
        json!([
            "docs/layout.md",
            "package.json",
            "src/auth/token.js",
            "src/extra.js",
            "src/server.js",
            "test/server.test.js"
        ])
    );
    let b = &repos[1];
    assert_eq!(b["repo"]["ref"], "v1");
    assert_eq!(b["repo"]["sha"], tagged.as_str());
    assert!(b.get("calm_layer").is_none());

    // fetch-error: git's own words, not a generic failure.
    let c = &repos[2];
    assert_eq!(c["ok"], false);
    let reason = c["reason"].as_str().unwrap();
    assert!(reason.starts_with("git clone failed: "), "{reason}");
    assert!(reason.contains("fatal: unable to access"), "{reason}");
    assert!(c["repo"].get("sha").is_none());
    // mesh-config-malformed: the parser's and the check's words, with the file.
    let d = repos[3]["reason"].as_str().unwrap();
    assert!(
        d.starts_with("d-unknown-key.yml: ") && d.contains("branch"),
        "{d}"
    );
    let e = repos[4]["reason"].as_str().unwrap();
    assert!(
        e.starts_with("e-no-rationale.yml: ") && e.contains("rationale"),
        "{e}"
    );
    // ref-not-found: names the ref.
    let f = &repos[5];
    assert_eq!(f["repo"]["ref"], "no-such-branch");
    assert!(f["reason"].as_str().unwrap().contains("no-such-branch"));

    // --language keeps the entries that apply (or name no language).
    let (python, _) = answer(&refs, &tmp.path().join("cache"), 200, Some("python"));
    let slugs: Vec<&str> = python["repos"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["slug"].as_str().unwrap())
        .collect();
    assert!(
        !slugs.contains(&"b-tagged") && slugs.contains(&"a-default"),
        "{slugs:?}"
    );

    // The cap bounds the walk, shallowest first.
    let (capped, _) = answer(&refs, &tmp.path().join("cache"), 2, None);
    assert_eq!(
        capped["repos"][0]["inventory_paths"],
        json!(["docs/layout.md", "package.json"])
    );
}

pub fn the_same_url_ref_and_cap_give_the_same_bytes_even_from_a_fresh_cache() {
    let tmp = tempfile::tempdir().unwrap();
    exemplar(&tmp.path().join("svc"));
    let url = format!("file://{}", tmp.path().join("svc").display());
    let refs = tmp.path().join("refs");
    write_entry(
        &refs,
        "svc.yml",
        &format!("repo: {url}\nref: v1\nrationale: Layout.\n"),
    );
    let (_, first) = answer(&refs, &tmp.path().join("cache-1"), 200, None);
    let (_, again) = answer(&refs, &tmp.path().join("cache-1"), 200, None);
    let (_, fresh) = answer(&refs, &tmp.path().join("cache-2"), 200, None);
    assert_eq!(first, again);
    assert_eq!(first, fresh);
    assert!(!first.contains(&tmp.path().join("cache-1").display().to_string()));
    // A branch that moves is read at its new head: the sha says which.
    git::commit(&tmp.path().join("svc"), &[("src/late.js", "1;\n")], "late");
    write_entry(
        &refs,
        "svc.yml",
        &format!("repo: {url}\nrationale: Layout.\n"),
    );
    let (moved, _) = answer(&refs, &tmp.path().join("cache-1"), 200, None);
    let head = git::git(&tmp.path().join("svc"), &["rev-parse", "HEAD"]);
    assert_eq!(moved["repos"][0]["repo"]["sha"], head.as_str());
}

pub fn an_empty_or_missing_directory_answers_empty_and_an_unreadable_one_refuses() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let empty = json!({"ok": true, "mode": "reference", "repos": [], "reason": "mesh-has-no-reference-repos"});
    let (missing, _) = answer(&tmp.path().join("absent"), &cache, 200, None);
    assert_eq!(missing, empty);
    std::fs::create_dir(tmp.path().join("bare")).unwrap();
    std::fs::write(tmp.path().join("bare/README.md"), "none here\n").unwrap();
    let (bare, _) = answer(&tmp.path().join("bare"), &cache, 200, None);
    assert_eq!(bare, empty);
    // A file where the directory should be cannot be listed: the whole call is refused.
    std::fs::write(tmp.path().join("not-a-dir"), "x").unwrap();
    let (refused, _) = answer(&tmp.path().join("not-a-dir"), &cache, 200, None);
    assert_eq!(refused["ok"], false);
    assert_eq!(refused["reason"], "mesh-config-dir-unreadable");
    assert!(
        refused["remediation"]
            .as_str()
            .unwrap()
            .contains("not-a-dir")
    );
    assert!(refused.get("repos").is_none());
}

fn audit_records(fx: &Fixture) -> Vec<Value> {
    std::fs::read_to_string(fx.path("audit.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A fixture whose airlock.toml lists the exemplar service (`svc`) as a reference repository:
/// the fixture, the exemplar's path and tagged commit, and the configuration.
fn svc_fixture() -> (Fixture, std::path::PathBuf, String, std::path::PathBuf) {
    let fx = Fixture::new();
    let svc = fx.path("svc");
    let (_, head) = exemplar(&svc);
    write_entry(
        &fx.path("refs"),
        "svc.yml",
        &format!(
            "repo: file://{}\nrationale: \"Follow its route layout.\"\n",
            svc.display()
        ),
    );
    let config = fx.config("");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("\n[reference_repos]\ndir = \"refs\"\n");
    std::fs::write(&config, text).unwrap();
    (fx, svc, head, config)
}

pub fn a_run_records_its_one_call_reads_references_and_refuses_them_as_edit_targets() {
    let (fx, svc, head, config) = svc_fixture();
    let issue = fx.issue(ready_issue());
    let target = "@reference/svc/src/server.js";
    let model = fx.script(&[
        json!({"tool_calls": [{"name": "read_file",
                "arguments": {"path": target, "start_line": 4, "end_line": 5}}],
               "expect_last_message_contains": ["## Reference repositories", "- svc (file://", "Follow its route layout."]}),
        json!({"tool_calls": [{"name": "search_repo",
                "arguments": {"query": "login token", "reference": "svc"}}],
               "expect_contains": ["@reference/svc/src/server.js lines 4-5", "app.get('/health'"],
               "expect_tool_error": false}),
        json!({"tool_calls": [{"name": "write_file",
                "arguments": {"path": target, "content": "changed\n"}}],
               "expect_contains": ["@reference/svc/src/"], "expect_tool_error": false}),
        json!({"tool_calls": [{"name": "edit_file",
                "arguments": {"path": target, "old_text": "ok", "new_text": "OK"}}],
               "expect_contains": [format!("cited-reference-repo-as-edit-target:{target}")],
               "expect_tool_error": true}),
        // The reference copy is as it was: the write and the edit changed nothing (each turn's
        // expectations are of the result of the turn before).
        json!({"tool_calls": [{"name": "read_file",
                "arguments": {"path": target, "start_line": 1, "end_line": 200}}],
               "expect_contains": [format!("cited-reference-repo-as-edit-target:{target}")],
               "expect_tool_error": true}),
        json!({"tool_calls": [{"name": "open_pr", "arguments": {
                "title": "x", "diff_digest": {"files_changed": ["calc/ops.py", target]}}}],
               "expect_contains": [SERVER_JS.lines().next().unwrap()], "expect_tool_error": false}),
        json!({"text": outcome("escalate", 0.3).to_string(),
               "expect_contains": [format!("cited-reference-repo-as-edit-target:{target}")],
               "expect_tool_error": true}),
    ]);
    let broker = BrokerStub::default();
    let report = fx.run(&issue, &model, &config, &broker);
    assert_eq!(report.model_finish_problem, None);
    // The refusal is the whole text of the write's, the edit's and open_pr's results.
    let results: Vec<Value> = kinds(&trajectory(&report), "tool_result");
    let texts: Vec<&str> = results
        .iter()
        .map(|r| r["message"]["content"].as_str().unwrap())
        .collect();
    let exact = format!("cited-reference-repo-as-edit-target:{target}");
    assert_eq!(texts.len(), 6, "{texts:?}");
    assert_eq!(&texts[2..4], [exact.as_str(); 2]);
    for line in SERVER_JS.lines().filter(|l| !l.is_empty()) {
        assert!(texts[4].contains(line), "{line:?} not in {}", texts[4]);
    }
    assert!(!texts[4].contains("changed") && !texts[4].contains("'OK'"));
    assert_eq!(texts[5], exact);
    // Nothing reached the broker; nothing was written in the tree; the reference copy, the
    // run's scratch, went when the run ended.
    assert!(broker.submitted.lock().unwrap().is_empty());
    assert!(!report.run_dir.join("reference").exists());
    assert!(!report.run_dir.join("worktree/@reference").exists());

    let records = audit_records(&fx);
    let calls: Vec<&Value> = records
        .iter()
        .filter(|r| r["kind"] == "skill_call")
        .collect();
    assert_eq!(calls.len(), 1, "one call per run");
    assert_eq!(
        calls[0]["payload"],
        json!({"skill": "knowledge-reference-repos", "ok": true,
               "reference_repos": [{"url": format!("file://{}", svc.display()), "sha": head}]})
    );
    let kinds_in_order: Vec<&str> = records
        .iter()
        .map(|r| r["kind"].as_str().unwrap())
        .collect();
    let started = kinds_in_order
        .iter()
        .position(|k| *k == "run_started")
        .unwrap();
    let called = kinds_in_order
        .iter()
        .position(|k| *k == "skill_call")
        .unwrap();
    assert!(started < called);
    let gate: Vec<&Value> = records
        .iter()
        .filter(|r| {
            r["kind"] == "policy_refusal"
                && r["payload"]["rule"] == "cited-reference-repo-as-edit-target"
        })
        .collect();
    assert_eq!(gate.len(), 3, "write, edit and open_pr: {gate:?}");
    assert!(gate.iter().all(|r| r["payload"]["path"] == target));
    let reads: Vec<&Value> = records
        .iter()
        .filter(|r| r["kind"] == "file_read")
        .collect();
    assert!(reads.iter().any(|r| r["payload"]["path"] == target));
}

pub fn a_run_without_reference_repositories_records_the_empty_call() {
    let fx = Fixture::new();
    let config = fx.config("");
    let issue = fx.issue(ready_issue());
    let model = fx.script(&[json!({"text": outcome("escalate", 0.3).to_string()})]);
    let report = fx.run(&issue, &model, &config, &BrokerStub::default());
    assert_eq!(report.model_finish_problem, None);
    let records = audit_records(&fx);
    let calls: Vec<&Value> = records
        .iter()
        .filter(|r| r["kind"] == "skill_call")
        .collect();
    assert_eq!(calls.len(), 1);
    assert_eq!(
        calls[0]["payload"],
        json!({"skill": "knowledge-reference-repos", "ok": true, "reference_repos": [],
               "reason": "mesh-has-no-reference-repos"})
    );
}

pub fn a_reader_reads_the_reference_repositories_and_its_anchors_there_are_checked() {
    let (fx, _, _, config) = svc_fixture();
    let issue = fx.issue(ready_issue());
    let target = "@reference/svc/src/server.js";
    let digest = |path: &str, start: u64, end: u64| {
        json!({
            "answer": "The exemplar declares one route per line: app.get, then app.post.",
            "anchors": [{"path": path, "line_start": start, "line_end": end, "claim": "the routes"}],
            "ruled_out": [], "also_noticed": [], "injection_observed": [],
            "complete": true, "reads_used": 1,
        })
        .to_string()
    };
    let ask = json!({"question": "How does the svc exemplar declare its routes?",
                     "why": "The fix should follow it.", "max_reads": 3, "max_turns": 4});
    let model = fx.script(&[
        call("delegate_read", ask),
        // The reader reads the exemplar through its own tools.
        json!({"tool_calls": [{"name": "read_file",
                "arguments": {"path": target, "start_line": 4, "end_line": 5}}],
               "expect_last_message_contains": "Begin."}),
        // An anchor past the end of the reference file is caught like one in the checkout...
        json!({"text": digest(target, 4, 40),
               "expect_contains": ["@reference/svc/src/server.js lines 4-5", "app.post('/login', login);"]}),
        // ...and the repaired one, inside it, is accepted.
        json!({"text": digest(target, 4, 5),
               "expect_last_message_contains": "lines 4..40 are not inside `@reference/svc/src/server.js` (11 lines)"}),
        json!({"text": outcome("escalate", 0.3).to_string(),
               "expect_contains": ["Reader digest", "@reference/svc/src/server.js"],
               "expect_tool_error": false}),
    ]);
    let report = fx.run(&issue, &model, &config, &BrokerStub::default());
    assert_eq!(report.model_finish_problem, None);
    let digests = kinds(&trajectory(&report), "reader_digest");
    assert_eq!(digests.len(), 1, "{digests:?}");
    assert_eq!(digests[0]["accepted"], true, "{digests:?}");
    assert_eq!(digests[0]["repaired"], true, "{digests:?}");
    // The supervisor re-read the reader's window from its own reference copy.
    let records = audit_records(&fx);
    let reader_reads: Vec<&Value> = records
        .iter()
        .filter(|r| r["kind"] == "file_read" && r["payload"]["path"] == target)
        .collect();
    assert_eq!(reader_reads.len(), 1, "{reader_reads:?}");
    assert!(
        !records.iter().any(|r| r["kind"] == "integrity_violation"),
        "the reader's report matches the supervisor's read"
    );
    assert!(!report.run_dir.join("reference").exists());
}
