//! The organisation's gates through the real broker: the three example gates of
//! `examples/gates/` (built from their WebAssembly text when `serve` loads them) decide on
//! honest submissions: allowed, flagged, routed and denied; a gate that traps is a deny; a gate
//! whose examples fail keeps `serve` from starting; `gate test` shows every example's verdict.

use std::path::{Path, PathBuf};

use crate::harness::*;
use airlock_broker::BrokerReply;
use serde_json::Value;

fn example_gate(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/gates")
        .join(name)
}

fn gate_table(name: &str, component: &Path, examples: &Path) -> String {
    format!(
        "\n[[repositories.\"acme/calc\".gates]]\nname = \"{name}\"\ncomponent = \"{}\"\nexamples = \"{}\"\nfuel = 20000000\nmemory = \"16MiB\"\ntimeout = \"5s\"\n",
        component.display(),
        examples.display()
    )
}

fn the_three_example_gates() -> String {
    ["migrations-route", "changelog-required", "vendor-freeze"]
        .iter()
        .map(|name| {
            let dir = example_gate(name);
            gate_table(name, &dir.join("gate.wat"), &dir.join("examples.toml"))
        })
        .collect()
}

fn fixture_with_gates(tables: String) -> Fixture {
    let mut files: Vec<(&'static str, String)> = vec![
        ("calc/__init__.py", String::new()),
        ("calc/ops.py", BUGGY_OPS.to_owned()),
        ("tests/__init__.py", String::new()),
        ("tests/test_ops.py", EXISTING_TEST.to_owned()),
        ("README.md", "calc\n".to_owned()),
    ];
    files.push(("vendor/six.py", "# vendored\n".to_owned()));
    Fixture::with(Options {
        files,
        repository_tables: tables,
        ..Options::default()
    })
}

/// Register `run_id` with `vendor/**` writable too (the freeze is the gate's to enforce), apply
/// the honest fix and `extra`, and send open_pr.
fn submit(fx: &Fixture, run_id: &str, extra: &[(&str, &str)]) -> BrokerReply {
    let wt = fx.worktree(run_id);
    let mut registration = fx.registration(run_id, &wt);
    registration.write_allowlist.push("vendor/**".into());
    fx.client().register_run(&registration).unwrap();
    apply_fix(&wt);
    for (path, text) in extra {
        write(&wt, path, text);
    }
    fx.client().open_pr(run_id, honest_args(fx, &wt)).unwrap()
}

/// The run's audit events of `kind`, payloads only.
fn events(fx: &Fixture, run_id: &str, kind: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(&fx.audit).unwrap_or_default();
    text.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["run_id"] == run_id && v["kind"] == kind)
        .map(|v| v["payload"].clone())
        .collect()
}

fn show(fx: &Fixture, id: i64) -> String {
    let out = fx.cli(&["show", &id.to_string()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn queued(reply: BrokerReply) -> i64 {
    match reply {
        BrokerReply::Queued { queue_id } => queue_id,
        other => panic!("expected queued, got {other:?}"),
    }
}

const PUBLIC_ADDITION: &str =
    "\n\ndef clamp_all(xs, lo, hi):\n    return [clamp(x, lo, hi) for x in xs]\n";

#[test]
fn the_example_gates_allow_flag_route_and_deny_through_the_broker() {
    let mut fx = fixture_with_gates(the_three_example_gates());
    fx.start();

    // Allowed: the honest fix adds no public function, no migration, touches no vendor file.
    let id = queued(submit(&fx, "run-allow", &[]));
    let verdicts = events(&fx, "run-allow", "gate_verdict");
    let names: Vec<&str> = verdicts
        .iter()
        .map(|v| v["gate"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["migrations-route", "changelog-required", "vendor-freeze"]
    );
    for v in &verdicts {
        assert_eq!(v["verdict"], "allow", "{v}");
        let digest = v["digest"].as_str().unwrap();
        assert!(digest.starts_with("sha256:") && digest.len() == 71, "{v}");
        assert!(v["fuel_consumed"].as_u64().unwrap() > 0, "{v}");
    }
    assert!(!show(&fx, id).contains("== gates"));

    // Flagged: a new public function without a changelog line.
    let fixed_plus = format!("{FIXED_OPS}{PUBLIC_ADDITION}");
    let id = queued(submit(&fx, "run-flag", &[("calc/ops.py", &fixed_plus)]));
    let text = show(&fx, id);
    assert!(
        text.contains("== gates\n- flag: a new public function in calc/ops.py without a CHANGELOG.md entry (gate changelog-required sha256:"),
        "{text}"
    );
    let flag = &events(&fx, "run-flag", "gate_verdict")[1];
    assert_eq!(flag["verdict"], "flag");
    assert_eq!(
        flag["message"],
        "a new public function in calc/ops.py without a CHANGELOG.md entry"
    );

    // Routed: a migration goes to the database reviewers; the item says so, as JSON too.
    let id = queued(submit(
        &fx,
        "run-route",
        &[("calc/migrations/0002_limits.py", "operations = []\n")],
    ));
    let text = show(&fx, id);
    assert!(
        text.contains("== gates\n- route to database (gate migrations-route sha256:"),
        "{text}"
    );
    let out = fx.cli(&["show", &id.to_string(), "--json"]);
    let view: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(view["gates"][0]["gate"], "migrations-route");
    assert_eq!(view["gates"][0]["verdict"], "route");
    assert_eq!(view["gates"][0]["message"], "database");

    // Denied: the freeze refuses the diff as POLICY_VIOLATION naming the gate, before any
    // witness test ran.
    let reply = submit(&fx, "run-deny", &[("vendor/six.py", "# patched\n")]);
    let BrokerReply::Refused { error } = reply else {
        panic!("expected a refusal, got {reply:?}");
    };
    assert_eq!(error.code.as_str(), "POLICY_VIOLATION");
    assert!(error.message.contains("the gate \"vendor-freeze\" denied this diff: vendor/ is frozen (vendored code changes upstream first); the diff changes vendor/six.py"), "{}", error.message);
    assert_eq!(error.details["gate"], "vendor-freeze");
    assert_eq!(error.details["rule"], "gate:vendor-freeze");
    let deny = events(&fx, "run-deny", "gate_verdict");
    assert_eq!(deny.last().unwrap()["verdict"], "deny");
    assert_eq!(deny.last().unwrap()["gate"], "vendor-freeze");
    assert_eq!(error.details["gate_digest"], deny.last().unwrap()["digest"]);
    assert!(
        events(&fx, "run-deny", "test_run").is_empty(),
        "a denied diff ran tests"
    );
    assert!(
        !events(&fx, "run-allow", "test_run").is_empty(),
        "the allowed one ran its witness"
    );
}

#[test]
fn a_gate_that_traps_is_a_deny_recorded_with_its_digest() {
    let dir = tempfile::tempdir().unwrap();
    // A gate that traps on every call; its examples are loaded but not run (its own examples
    // pass, since it traps only when the title says so).
    let component = dir.path().join("trap.wat");
    std::fs::write(
        &component,
        format!(
            r#"(module {}
  ;; Deny when the request's title is 6 bytes long ("denied"), trap on a title starting with
  ;; "fix", allow otherwise.
  (func (export "check") (param $r i32) (result i32)
    (if (i32.eq (i32.load offset=28 (local.get $r)) (i32.const 6))
      (then
        (i32.store8 (i32.const 64) (i32.const 3))
        (i32.store (i32.const 68) (i32.const 100))
        (i32.store (i32.const 72) (i32.const 1))
        (return (i32.const 64))))
    (if (i32.eq (i32.load8_u (i32.load offset=24 (local.get $r))) (i32.const 102))
      (then unreachable))
    (i32.store8 (i32.const 64) (i32.const 0))
    (i32.const 64))
  (data (i32.const 100) "x"))"#,
            airlock_testkit::wat::BUMP_ALLOCATOR
        ),
    )
    .unwrap();
    let examples = dir.path().join("trap.toml");
    std::fs::write(
        &examples,
        r#"
[[match]]
name = "a title of six bytes is denied"
title = "denied"
verdict = "deny"
files = [{ path = "a", status = "added", patched = "a" }]
[[not_match]]
name = "another title is allowed"
title = "other title"
files = [{ path = "a", status = "added", patched = "a" }]
"#,
    )
    .unwrap();
    let mut fx = fixture_with_gates(gate_table("trapper", &component, &examples));
    fx.start();
    let reply = submit(&fx, "run-trap", &[]);
    let BrokerReply::Refused { error } = reply else {
        panic!("expected a refusal, got {reply:?}");
    };
    assert_eq!(error.code.as_str(), "POLICY_VIOLATION");
    assert!(
        error
            .message
            .contains("the gate \"trapper\" denied this diff: the gate trapped"),
        "{}",
        error.message
    );
    let verdict = &events(&fx, "run-trap", "gate_verdict")[0];
    assert_eq!(verdict["verdict"], "deny");
    assert_eq!(verdict["failure"], "trap");
    assert!(verdict["digest"].as_str().unwrap().starts_with("sha256:"));
    assert_eq!(error.details["gate_digest"], verdict["digest"]);
    assert!(events(&fx, "run-trap", "test_run").is_empty());
}

#[test]
fn a_gate_whose_examples_fail_keeps_serve_from_starting() {
    let dir = tempfile::tempdir().unwrap();
    let examples = dir.path().join("examples.toml");
    std::fs::write(
        &examples,
        std::fs::read_to_string(example_gate("migrations-route").join("examples.toml"))
            .unwrap()
            .replace("message = \"database\"", "message = \"senior\""),
    )
    .unwrap();
    let fx = fixture_with_gates(gate_table(
        "migrations-route",
        &example_gate("migrations-route").join("gate.wat"),
        &examples,
    ));
    let out = fx.cli(&["serve"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("gate migrations-route: example \"a new migration at the root goes to the database reviewers\" (match) expects route(\"senior\"), but the gate answered route(\"database\")"),
        "{stderr}"
    );
    assert!(!fx.socket.exists(), "serve listened with a broken gate");
}

fn gate_test(args: &[&str]) -> std::process::Output {
    std::process::Command::new(BIN)
        .args(["gate", "test"])
        .args(args)
        .env("AIRLOCK_BROKER_CONFIG", "/nonexistent/broker.toml")
        .output()
        .unwrap()
}

#[test]
fn gate_test_prints_every_example_and_fails_on_a_wrong_one() {
    let dir = example_gate("changelog-required");
    let gate = dir.join("gate.wat");
    let out = gate_test(&[
        gate.to_str().unwrap(),
        "--examples",
        dir.join("examples.toml").to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let examples_dir = example_gate("").display().to_string();
    insta::with_settings!({filters => vec![
        (examples_dir.as_str(), "[examples]/"),
        (r"sha256:[0-9a-f]{64}", "sha256:[digest]"),
        (r"\(fuel \d+\)", "(fuel [n])"),
    ]}, {
        insta::assert_snapshot!("gate_test_changelog", text);
    });

    let wrong = tempfile::tempdir().unwrap();
    let examples = wrong.path().join("examples.toml");
    std::fs::write(
        &examples,
        std::fs::read_to_string(dir.join("examples.toml"))
            .unwrap()
            .replace("verdict = \"flag\"", "verdict = \"deny\""),
    )
    .unwrap();
    let out = gate_test(&[
        gate.to_str().unwrap(),
        "--examples",
        examples.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("FAIL match"), "{text}");
    assert!(text.contains("     expected deny"), "{text}");
    assert!(text.contains("5 examples: 3 passed, 2 failed"), "{text}");

    // A bad flag value or a file that is no gate: exit 2 with the reason.
    let out = gate_test(&[
        gate.to_str().unwrap(),
        "--examples",
        examples.to_str().unwrap(),
        "--memory",
        "lots",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--memory: \"lots\""));
    let out = gate_test(&[
        examples.to_str().unwrap(),
        "--examples",
        examples.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot build a component"));
}
