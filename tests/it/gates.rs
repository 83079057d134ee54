//! The organisation's gates end to end through `airlock run`: the real supervisor, a scripted
//! agent and the real broker loading the three example gates of `examples/gates/` (from their
//! WebAssembly text). The same fix is submitted four times, alone (allowed), with a migration
//! (routed to `database`), with a new public function and no changelog line (flagged), and
//! with a vendored file changed (denied as POLICY_VIOLATION naming the gate, no witness run).

use crate::github::{World, text, world_configured};
use crate::run::fix_turns;
use serde_json::{Value, json};
use std::path::Path;

fn gate_tables() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/gates");
    ["migrations-route", "changelog-required", "vendor-freeze"]
        .iter()
        .map(|name| {
            let dir = root.join(name);
            format!(
                "\n[[repositories.\"acme/calc\".gates]]\nname = \"{name}\"\ncomponent = \"{}\"\n\
                 examples = \"{}\"\n",
                dir.join("gate.wat").display(),
                dir.join("examples.toml").display()
            )
        })
        .collect()
}

/// The fix's turns with `extra` files written before the full run, the open_pr digest counting
/// them, and, when `refused`, a last turn that expects the broker's refusal and escalates.
fn turns_with(w: &World, extra: &[(&str, &str)], refused: Option<&str>) -> Vec<Value> {
    let mut turns = fix_turns(&w.s);
    // fix_turns: delegate, reader read, digest, write test, edit, run_tests, open_pr, final.
    let run_tests = turns
        .iter()
        .position(|t| t["tool_calls"][0]["name"] == "run_tests")
        .unwrap();
    for (i, (path, content)) in extra.iter().enumerate() {
        turns.insert(
            run_tests + i,
            json!({"tool_calls": [{"name": "write_file", "arguments": {"path": path, "content": content}}]}),
        );
    }
    let open_pr = turns
        .iter_mut()
        .find(|t| t["tool_calls"][0]["name"] == "open_pr")
        .unwrap();
    let digest = &mut open_pr["tool_calls"][0]["arguments"]["diff_digest"];
    let mut files: Vec<String> = digest["files_changed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap().to_owned())
        .collect();
    let mut insertions = digest["insertions"].as_u64().unwrap();
    for (path, content) in extra {
        files.push((*path).to_owned());
        insertions += content.lines().count() as u64;
    }
    files.sort();
    digest["files_changed"] = json!(files);
    digest["insertions"] = json!(insertions);
    if let Some(expected) = refused {
        let last = turns.len() - 1;
        let escalate = json!({"outcome": "escalate", "summary": "a gate refused the change",
            "root_cause": "add subtracted", "files_changed": [], "tests_added": [],
            "test_evidence": {"before": "", "after": ""}, "also_noticed": [],
            "injection_observed": [], "confidence": 0.3});
        turns[last] = json!({"text": escalate.to_string(), "expect_contains": expected,
                             "expect_tool_error": true});
    }
    turns
}

fn show(w: &World, id: u64) -> String {
    let out = w.broker_cli(&["show", &id.to_string()], None);
    assert!(out.status.success(), "{}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn airlock_run_submissions_are_allowed_flagged_routed_and_denied_by_the_example_gates() {
    let w = world_configured(false, &gate_tables());
    // The freeze and the migrations are the gates' to decide: the run may write there.
    let mut config = std::fs::read_to_string(&w.airlock_toml).unwrap();
    config.push_str(
        "\n[write]\nallowlist = [\"calc/**\", \"tests/**\", \"migrations/**\", \"vendor/**\"]\n",
    );
    std::fs::write(&w.airlock_toml, config).unwrap();

    let queued = |n: usize, turns: &[Value]| -> u64 {
        // Each submission is issue 7 again, with the earlier items still queued.
        let out = w.run_turns_with(n, turns, &["--again"]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(doc["result"], "pr_queued", "{doc}");
        // The run's item is the newest one of the queue.
        let queue = w.broker_cli(&["queue", "--json"], None);
        let rows: Value = serde_json::from_slice(&queue.stdout).unwrap();
        rows.as_array()
            .unwrap()
            .iter()
            .filter_map(|r| r["id"].as_u64())
            .max()
            .unwrap()
    };

    // Allowed: the fix alone.
    let id = queued(1, &turns_with(&w, &[], None));
    assert!(!show(&w, id).contains("== gates"), "{}", show(&w, id));

    // Routed: a migration beside the fix goes to the database reviewers.
    let id = queued(
        2,
        &turns_with(
            &w,
            &[(
                "migrations/0002_totals.sql",
                "ALTER TABLE t ADD total int;\n",
            )],
            None,
        ),
    );
    let shown = show(&w, id);
    assert!(
        shown.contains("== gates\n- route to database (gate migrations-route sha256:"),
        "{shown}"
    );

    // Flagged: a new public function and no CHANGELOG.md line.
    let id = queued(
        3,
        &turns_with(
            &w,
            &[("calc/extra.py", "def sub(a, b):\n    return a - b\n")],
            None,
        ),
    );
    let shown = show(&w, id);
    assert!(
        shown.contains("== gates\n- flag: a new public function in calc/extra.py"),
        "{shown}"
    );

    // Denied: a vendored file; the run is told POLICY_VIOLATION naming the gate, and escalates.
    let out = w.run_turns_with(
        4,
        &turns_with(
            &w,
            &[("vendor/six.py", "# patched\n")],
            Some("the gate \"vendor-freeze\" denied this diff"),
        ),
        &["--again"],
    );
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["result"], "escalated", "{doc}");
    let queue = w.broker_cli(&["queue", "--json"], None);
    let rows: Value = serde_json::from_slice(&queue.stdout).unwrap();
    assert_eq!(rows.as_array().map(Vec::len), Some(3), "{rows}");
    // The broker's audit log has every gate's verdict, the deny with the component's digest.
    let audit =
        std::fs::read_to_string(w.s.dir.path().join("broker-audit.jsonl")).unwrap_or_default();
    let verdicts: Vec<Value> = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["kind"] == "gate_verdict")
        .map(|r| r["payload"].clone())
        .collect();
    assert_eq!(
        verdicts.len(),
        12,
        "three gates, four submissions: {verdicts:#?}"
    );
    let deny = verdicts.iter().find(|v| v["verdict"] == "deny").unwrap();
    assert_eq!(deny["gate"], "vendor-freeze");
    assert!(deny["digest"].as_str().unwrap().starts_with("sha256:"));
}
