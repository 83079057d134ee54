//! open_pr intake through the real broker: queue, every refusal code, the witness.

use crate::harness::*;
use airlock_broker::BrokerReply;
use airlock_policies::network::NetworkMode;
use serde_json::{Value, json};

fn refused(reply: &BrokerReply) -> &airlock_broker::BrokerError {
    match reply {
        BrokerReply::Refused { error } => error,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn honest_fix_is_queued_with_diff_args_and_evidence() {
    let mut fx = Fixture::new();
    fx.start();
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&fx.socket).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "socket mode {mode:o}");
    let wt = fx.register("run-ok");
    apply_fix(&wt);
    let args = honest_args(&fx, &wt);
    let started = std::time::Instant::now();
    let reply = fx.client().open_pr("run-ok", args.clone()).unwrap();
    // A figure for the report, never asserted.
    eprintln!(
        "intake of an honest open_pr (3 sandboxed unittest runs): {} ms",
        started.elapsed().as_millis()
    );
    let BrokerReply::Queued { queue_id } = reply else {
        panic!("expected queued, got {reply:?}")
    };
    let show = fx.cli(&["show", &queue_id.to_string()]);
    assert!(
        show.status.success(),
        "{}",
        String::from_utf8_lossy(&show.stderr)
    );
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(text.contains("+    return max(lo, min(x, hi))"), "{text}");
    assert!(
        text.contains("pinned_selected (must fail): exit Some(1), Ok"),
        "{text}"
    );
    assert!(
        text.contains("patched_selected (must pass): exit Some(0), Ok"),
        "{text}"
    );
    assert!(
        text.contains("patched_full (must green): exit Some(0), Ok"),
        "{text}"
    );
    // The approver sees the base inventory and how the patched full run compares with it.
    assert!(
        text.contains("inventory: ") && text.contains(" tests at base"),
        "{text}"
    );
    assert!(
        text.contains("against the base inventory: green: "),
        "{text}"
    );
    assert!(
        text.contains(&serde_json::to_string(&args).unwrap()),
        "args verbatim: {text}"
    );
    assert!(!text.contains("\x1b["), "no colour when not a terminal");
    let coloured = fx.cli(&["show", &queue_id.to_string(), "--color", "always"]);
    assert!(
        String::from_utf8_lossy(&coloured.stdout)
            .contains("\x1b[32m+    return max(lo, min(x, hi))")
    );

    let queue = fx.cli(&["queue"]);
    let table = String::from_utf8_lossy(&queue.stdout);
    assert!(table.starts_with("ID  STATUS"), "{table}");
    assert!(
        table.contains("queued")
            && table.contains("CALC-42")
            && table.contains("fix: clamp respects the upper bound"),
        "{table}"
    );

    let kinds: Vec<String> = fx.audit_kinds().into_iter().map(|(k, _)| k).collect();
    assert_eq!(
        kinds,
        [
            "open_pr_submitted",
            "test_run",
            "test_run",
            "test_run",
            // The witness: pinned selected, patched selected, base full (the inventory), patched full.
            "test_run",
            "broker_decision"
        ]
    );
    let (_, last) = fx.audit_kinds().pop().unwrap();
    assert_eq!(last["code"], "QUEUED");

    // Still pending for the run.
    assert_eq!(
        fx.client().decision("run-ok").unwrap(),
        BrokerReply::Pending { queue_id }
    );
}

#[test]
fn schema_invalid_is_retryable_and_names_pointer_and_constraint() {
    let mut fx = Fixture::new();
    fx.start();
    let wt = fx.register("run-schema");
    apply_fix(&wt);
    let good = honest_args(&fx, &wt);
    let mut bad = good.clone();
    bad["title"] = json!("clamp fix");
    let reply = fx.client().open_pr("run-schema", bad).unwrap();
    let err = refused(&reply);
    assert_eq!(err.code.as_str(), "SCHEMA_INVALID");
    assert!(err.retryable);
    let violations = err.details["violations"].as_array().unwrap();
    assert!(
        violations.iter().any(|v| v["pointer"] == "/title"),
        "{violations:?}"
    );
    // The only retryable code: the corrected call goes through.
    let reply = fx.client().open_pr("run-schema", good).unwrap();
    assert!(matches!(reply, BrokerReply::Queued { .. }), "{reply:?}");
}

#[test]
fn base_commit_as_branch_name_is_schema_invalid_and_wrong_sha_is_policy() {
    let mut fx = Fixture::new();
    fx.start();
    let wt = fx.register("run-branch");
    apply_fix(&wt);
    let mut args = honest_args(&fx, &wt);
    args["base_commit"] = json!("main");
    let reply = fx.client().open_pr("run-branch", args.clone()).unwrap();
    let err = refused(&reply);
    assert_eq!(err.code.as_str(), "SCHEMA_INVALID");
    let v = &err.details["violations"][0];
    assert_eq!(
        (v["pointer"].as_str(), v["keyword"].as_str()),
        (Some("/base_commit"), Some("pattern"))
    );

    args["base_commit"] = json!("0".repeat(40));
    let reply = fx.client().open_pr("run-branch", args).unwrap();
    let err = refused(&reply);
    assert_eq!(err.code.as_str(), "POLICY_VIOLATION");
    assert!(!err.retryable);
    assert_eq!(err.details["offending"], "base_commit");
}

#[test]
fn paths_outside_the_allowlist_or_in_refused_classes_are_policy_violations() {
    let mut fx = Fixture::new();
    fx.start();
    for (run, path) in [
        ("run-readme", "README.md"),
        ("run-ci", ".github/workflows/ci.yml"),
    ] {
        let wt = fx.register(run);
        apply_fix(&wt);
        write(&wt, path, "changed\n");
        let args = honest_args(&fx, &wt);
        let reply = fx.client().open_pr(run, args).unwrap();
        let err = refused(&reply);
        assert_eq!(err.code.as_str(), "POLICY_VIOLATION", "{path}");
        assert_eq!(err.details["offending"], path, "{err:?}");
    }
}

#[test]
fn a_lie_in_any_digest_field_is_a_digest_mismatch_and_an_integrity_event() {
    let mut fx = Fixture::new();
    fx.start();
    type Lie = fn(&std::path::Path, &mut Value);
    let lies: [(&str, Lie); 7] = [
        ("files_changed", |_, a| {
            a["diff_digest"]["files_changed"] = json!(["calc/ops.py"]);
        }),
        ("insertions", |_, a| {
            let n = a["diff_digest"]["insertions"].as_u64().unwrap();
            a["diff_digest"]["insertions"] = json!(n + 1);
        }),
        ("deletions", |_, a| {
            a["diff_digest"]["deletions"] = json!(0);
        }),
        ("test_files_added", |_, a| {
            a["diff_digest"]["test_files_added"] = json!([]);
        }),
        ("test_files_modified", |_, a| {
            a["diff_digest"]["test_files_modified"] = json!(["tests/test_ops.py"]);
            a["test_change_reason"] = json!("existing-test-asserts-the-buggy-behaviour");
        }),
        ("assertions_removed", |wt, a| {
            // Really remove an assertion, declare the test edit, claim none removed.
            write(
                wt,
                "tests/test_ops.py",
                EXISTING_TEST.replace(
                    "        self.assertEqual(clamp(2, 0, 3), 2)\n",
                    "        pass\n",
                ),
            );
            let fx_digest =
                airlock_policies::compute_digest(wt, a["base_commit"].as_str().unwrap()).unwrap();
            let mut d = serde_json::to_value(fx_digest.to_diff_digest()).unwrap();
            assert_eq!(
                d["assertions_removed"], 1,
                "the detector must see the removed assertion"
            );
            d["assertions_removed"] = json!(0);
            a["diff_digest"] = d;
            a["test_change_reason"] = json!("existing-test-asserts-the-buggy-behaviour");
        }),
        ("skip_markers_added", |wt, a| {
            write(
                wt,
                "tests/test_ops.py",
                EXISTING_TEST.replace(
                    "    def test_identity",
                    "    @unittest.skip(\"flaky\")\n    def test_identity",
                ),
            );
            let fx_digest =
                airlock_policies::compute_digest(wt, a["base_commit"].as_str().unwrap()).unwrap();
            let mut d = serde_json::to_value(fx_digest.to_diff_digest()).unwrap();
            assert_eq!(
                d["skip_markers_added"], 1,
                "the detector must see the skip marker"
            );
            d["skip_markers_added"] = json!(0);
            a["diff_digest"] = d;
            if !d_is_empty(&a["diff_digest"]["test_files_modified"]) {
                a["test_change_reason"] = json!("existing-test-asserts-the-buggy-behaviour");
            }
        }),
    ];
    fn d_is_empty(v: &Value) -> bool {
        v.as_array().is_none_or(|a| a.is_empty())
    }
    for (field, lie) in lies {
        let run = format!("run-lie-{}", field.replace('_', "-"));
        let wt = fx.register(&run);
        apply_fix(&wt);
        let mut args = honest_args(&fx, &wt);
        lie(&wt, &mut args);
        let reply = fx.client().open_pr(&run, args.clone()).unwrap();
        let err = refused(&reply);
        assert_eq!(err.code.as_str(), "DIGEST_MISMATCH", "{field}: {err:?}");
        assert!(!err.retryable);
        assert_eq!(err.details["fields"], json!([field]), "{field}: {err:?}");
        assert_eq!(err.details["claimed"], args["diff_digest"], "{field}");
        assert_ne!(
            err.details["computed"][field], args["diff_digest"][field],
            "{field}"
        );
        // The run is over: another call (schema-valid, different bytes) is refused as final.
        let mut again = args.clone();
        again["confidence"] = json!(0.7);
        let again = fx.client().open_pr(&run, again).unwrap();
        assert_eq!(refused(&again).code.as_str(), "POLICY_VIOLATION", "{field}");
    }
    let integrity: Vec<String> = fx
        .audit_kinds()
        .into_iter()
        .filter(|(k, _)| k == "integrity_violation")
        .map(|(_, p)| p["check"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        integrity,
        [
            "diff_digest.files_changed",
            "diff_digest.insertions",
            "diff_digest.deletions",
            "diff_digest.test_files_added",
            "diff_digest.test_files_modified",
            "diff_digest.assertions_removed",
            "diff_digest.skip_markers_added"
        ]
    );
}

#[test]
fn a_second_open_pr_is_refused_and_a_resent_one_is_answered_once() {
    use airlock_protocol::open_pr_call_id;
    let mut fx = Fixture::new();
    fx.start();
    let wt = fx.register("run-twice");
    apply_fix(&wt);
    let args = honest_args(&fx, &wt).to_string();
    let call = |n: u32, args: &str| {
        fx.client()
            .open_pr_with_request_id("run-twice", &open_pr_call_id("run-twice", n), args)
            .unwrap()
    };
    let first = call(1, &args);
    let BrokerReply::Queued { queue_id } = first else {
        panic!("{first:?}")
    };
    // The same call resent under its key (a supervisor retrying after a lost reply): the same
    // answer.
    assert_eq!(call(1, &args), first);
    // A second call with the same arguments under a new key is a second call, not a resend.
    let second = call(2, &args);
    let err = refused(&second);
    assert_eq!(err.code.as_str(), "POLICY_VIOLATION");
    assert!(!err.retryable);
    assert_eq!(err.details["offending"], "second_open_pr");
    assert_eq!(err.details["rule"], "one_open_pr_per_run");
    // ... and resent under its key, it gets its stored refusal again.
    assert_eq!(call(2, &args), second);
    // A variant is refused the same way.
    let mut variant: Value = serde_json::from_str(&args).unwrap();
    variant["confidence"] = json!(0.95);
    let reply = call(3, &variant.to_string());
    assert_eq!(refused(&reply).details["offending"], "second_open_pr");
    // The queued one is untouched.
    assert_eq!(
        fx.client().decision("run-twice").unwrap(),
        BrokerReply::Pending { queue_id }
    );
    let table = String::from_utf8_lossy(&fx.cli(&["queue"]).stdout).into_owned();
    assert_eq!(table.lines().count(), 2, "{table}");
    // Each call is decided and recorded once; a resend is answered from the record.
    let decisions: Vec<String> = fx
        .audit_kinds()
        .into_iter()
        .filter(|(k, _)| k == "broker_decision")
        .map(|(_, p)| p["code"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        decisions,
        ["QUEUED", "POLICY_VIOLATION", "POLICY_VIOLATION"],
        "{decisions:?}"
    );
}

#[test]
fn an_edited_existing_test_is_restored_so_the_weakened_test_cannot_go_green() {
    let mut fx = Fixture::new();
    fx.start();
    let wt = fx.register("run-weaken");
    // A wrong "fix" that breaks the lower bound, with the existing test edited to match it.
    write(
        &wt,
        "calc/ops.py",
        FIXED_OPS.replace("max(lo, min(x, hi))", "min(x, hi)"),
    );
    write(&wt, "tests/test_clamp_high.py", NEW_TEST);
    write(
        &wt,
        "tests/test_ops.py",
        EXISTING_TEST.replace("clamp(-5, 0, 3), 0)", "clamp(-5, 0, 3), -5)"),
    );
    let mut args = honest_args(&fx, &wt);
    assert_eq!(
        args["diff_digest"]["test_files_modified"],
        json!(["tests/test_ops.py"])
    );
    args["test_change_reason"] = json!("existing-test-asserts-the-buggy-behaviour");
    let reply = fx.client().open_pr("run-weaken", args).unwrap();
    let err = refused(&reply);
    assert_eq!(err.code.as_str(), "POLICY_VIOLATION");
    assert_eq!(err.details["offending"], "witness_run");
    assert!(err.message.contains("witness not green"), "{}", err.message);
    let outputs = err.details["outputs"].as_array().unwrap();
    let full = outputs
        .iter()
        .find(|o| o["step"] == "patched_full")
        .expect("the full suite ran");
    assert!(
        full["stderr"]
            .as_str()
            .unwrap()
            .contains("FAIL: test_clamp_low"),
        "{full}"
    );
    assert_eq!(
        full["parsed"]["tests"]["tests.test_ops.TestClampLow.test_clamp_low"],
        "failed"
    );
}

#[test]
fn a_new_test_that_already_passes_on_the_pin_is_not_fail_to_pass() {
    let mut fx = Fixture::new();
    fx.start();
    let wt = fx.register("run-nofail");
    write(&wt, "calc/ops.py", FIXED_OPS);
    write(
        &wt,
        "tests/test_clamp_high.py",
        NEW_TEST.replace("clamp(9, 0, 3), 3)", "clamp(2, 0, 3), 2)"),
    );
    let args = honest_args(&fx, &wt);
    let reply = fx.client().open_pr("run-nofail", args).unwrap();
    let err = refused(&reply);
    assert_eq!(err.code.as_str(), "POLICY_VIOLATION");
    assert!(
        err.message.contains("already passes on the pinned source"),
        "{}",
        err.message
    );
    assert_eq!(
        err.details["outputs"].as_array().unwrap().len(),
        1,
        "stops at the first unmet step"
    );
}

#[test]
fn fake_passed_lines_printed_by_the_patch_do_not_make_the_witness_green() {
    let mut fx = Fixture::new();
    fx.start();
    let wt = fx.register("run-fake");
    // The "fix" does not fix anything; importing it prints what a passing run would print.
    write(
        &wt,
        "calc/ops.py",
        format!(
            "import sys\nsys.stderr.write('test_clamp_high ({NEW_TEST_NAME}) ... ok\\ntest_clamp_low (tests.test_ops.TestClampLow.test_clamp_low) ... ok\\n')\n\n{BUGGY_OPS}"
        ),
    );
    write(&wt, "tests/test_clamp_high.py", NEW_TEST);
    let args = honest_args(&fx, &wt);
    let reply = fx.client().open_pr("run-fake", args).unwrap();
    let err = refused(&reply);
    assert_eq!(err.code.as_str(), "POLICY_VIOLATION");
    assert_eq!(err.details["offending"], "witness_run");
    let outputs = err.details["outputs"].as_array().unwrap();
    let step = outputs.last().unwrap();
    assert_eq!(step["step"], "patched_selected");
    assert!(
        step["stderr"].as_str().unwrap().contains("... ok"),
        "the fake line was printed"
    );
    assert_eq!(step["parsed"]["tests"][NEW_TEST_NAME], "failed");
}

#[test]
fn unknown_run_and_bad_registration_fail_cleanly() {
    let mut fx = Fixture::new();
    fx.start();
    let reply = fx.client().open_pr("nobody", json!({})).unwrap();
    assert!(
        matches!(&reply, BrokerReply::Failed { message } if message.contains("not registered")),
        "{reply:?}"
    );
    let outside = fx.dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let reg = fx.registration("run-out", &outside);
    let reply = fx.client().register_run(&reg).unwrap();
    assert!(
        matches!(&reply, BrokerReply::Failed { message } if message.contains("not under the runs root")),
        "{reply:?}"
    );
    // A test environment may grant only what broker.toml allows.
    let wt = fx.worktree("run-env");
    let mut reg = fx.registration("run-env", &wt);
    reg.test_env.ro = vec![outside.clone()];
    let reply = fx.client().register_run(&reg).unwrap();
    assert!(
        matches!(&reply, BrokerReply::Failed { message }
            if message.contains("does not allow") && message.contains("allow_ro")
                && message.contains(&outside.display().to_string())),
        "{reply:?}"
    );
    // A test network wider than broker.toml's witness_network (loopback by default) is
    // refused, naming the key to change; so is a proxy host the broker does not list.
    for mode in [NetworkMode::Proxy, NetworkMode::Host] {
        let mut reg = fx.registration("run-env", &wt);
        reg.test_env.network.mode = mode;
        let reply = fx.client().register_run(&reg).unwrap();
        assert!(
            matches!(&reply, BrokerReply::Failed { message }
                if message.contains("witness_network") && message.contains(mode.name())),
            "{reply:?}"
        );
    }
    let net_wt = fx.worktree("run-net");
    let mut reg = fx.registration("run-net", &net_wt);
    reg.test_env.network.mode = NetworkMode::None;
    assert!(
        matches!(
            fx.client().register_run(&reg).unwrap(),
            BrokerReply::Registered { .. }
        ),
        "a narrower network is the run's choice"
    );
    // A run names its issue.
    let mut reg = fx.registration("run-env", &wt);
    reg.issue_id = " ".to_owned();
    let reply = fx.client().register_run(&reg).unwrap();
    assert!(
        matches!(&reply, BrokerReply::Failed { message } if message.contains("issue_id")),
        "{reply:?}"
    );
    // The runner must match the command.
    let mut reg = fx.registration("run-env", &wt);
    reg.test_runner = airlock_broker::TestRunner::Pytest;
    let reply = fx.client().register_run(&reg).unwrap();
    assert!(
        matches!(&reply, BrokerReply::Failed { message } if message.contains("runs unittest")),
        "{reply:?}"
    );
    let wt = fx.worktree("run-branchpin");
    let mut reg = fx.registration("run-branchpin", &wt);
    reg.base_commit = "main".into();
    let reply = fx.client().register_run(&reg).unwrap();
    assert!(
        matches!(&reply, BrokerReply::Failed { message } if message.contains("40-hex")),
        "{reply:?}"
    );
}

#[test]
fn a_line_that_is_not_a_request_gets_a_failed_reply_and_the_connection_stays_usable() {
    use std::io::{BufRead, BufReader, Write};
    let mut fx = Fixture::new();
    fx.start();
    let stream = std::os::unix::net::UnixStream::connect(&fx.socket).unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    for line in [
        "this is not json\n",
        "{\"op\":\"launch\"}\n",
        "{\"op\":\"decision\",\"run_id\":\"nobody\"}\n",
    ] {
        writer.write_all(line.as_bytes()).unwrap();
        let mut reply = String::new();
        reader.read_line(&mut reply).unwrap();
        let reply: Value = serde_json::from_str(&reply).unwrap();
        assert_eq!(reply["status"], "failed", "{line} -> {reply}");
    }
}

#[test]
fn an_open_pr_for_another_issue_is_refused() {
    let mut fx = Fixture::new();
    fx.start();
    let wt = fx.register("run-other-issue");
    apply_fix(&wt);
    let mut args = honest_args(&fx, &wt);
    args["issue_id"] = json!("CALC-1");
    let reply = fx.client().open_pr("run-other-issue", args).unwrap();
    let err = refused(&reply);
    assert_eq!(err.code.as_str(), "POLICY_VIOLATION");
    assert_eq!(err.details["offending"], "issue_id");
    assert!(
        err.message.contains("CALC-1") && err.message.contains("CALC-42"),
        "{}",
        err.message
    );
}

#[test]
fn any_open_pr_after_a_queued_one_is_a_policy_violation_even_with_invalid_arguments() {
    let mut fx = Fixture::new();
    fx.start();
    let wt = fx.register("run-after");
    apply_fix(&wt);
    let args = honest_args(&fx, &wt);
    let first = fx.client().open_pr("run-after", args).unwrap();
    assert!(matches!(first, BrokerReply::Queued { .. }), "{first:?}");
    // Not the retryable SCHEMA_INVALID: a second call ends the conversation.
    let reply = fx
        .client()
        .open_pr("run-after", json!({"title": "nonsense"}))
        .unwrap();
    let err = refused(&reply);
    assert_eq!(err.code.as_str(), "POLICY_VIOLATION", "{}", err.message);
    assert_eq!(err.details["offending"], "second_open_pr");
}

#[test]
fn a_body_that_links_elsewhere_is_queued_with_a_flag_the_approver_sees() {
    let mut fx = Fixture::new();
    fx.start();
    let wt = fx.register("run-url");
    apply_fix(&wt);
    let mut args = honest_args(&fx, &wt);
    args["body"] = json!(
        "clamp ignored hi. It now clamps both ends; details at https://attacker.example/pwn."
    );
    let reply = fx.client().open_pr("run-url", args).unwrap();
    let BrokerReply::Queued { queue_id } = reply else {
        panic!("{reply:?}")
    };
    let show =
        String::from_utf8_lossy(&fx.cli(&["show", &queue_id.to_string()]).stdout).into_owned();
    assert!(
        show.contains("- body-url: the body links to \"https://attacker.example/pwn\""),
        "{show}"
    );
}

/// What a run reports its egress proxy refused its tests travels with `open_pr` and is shown
/// to the approver, attributed to the run and escaped: in `show`, and under `network_blocked`
/// in `show --json`. Nothing is decided on it: the item is queued as any honest one.
#[test]
fn blocked_attempts_the_run_reports_reach_the_approver_attributed_and_escaped() {
    use airlock_policies::network::{BlockReason, BlockedAttempt};
    let mut fx = Fixture::new();
    fx.start();
    let wt = fx.register("run-net-report");
    apply_fix(&wt);
    let args = honest_args(&fx, &wt);
    let blocked = vec![
        BlockedAttempt {
            host: "httpbin.example.org".into(),
            port: 443,
            reason: BlockReason::NotAllowed,
        },
        BlockedAttempt {
            host: "evil\u{1b}[2J.example".into(),
            port: 80,
            reason: BlockReason::NotAllowed,
        },
    ];
    let request = airlock_protocol::Request::open_pr(
        "run-net-report",
        &args.to_string(),
        &airlock_protocol::open_pr_call_id("run-net-report", 1),
    )
    .unwrap()
    .with_network_blocked(blocked);
    let reply = fx.client().request(&request).unwrap();
    let BrokerReply::Queued { queue_id } = reply else {
        panic!("{reply:?}")
    };
    let show =
        String::from_utf8_lossy(&fx.cli(&["show", &queue_id.to_string()]).stdout).into_owned();
    assert!(
        show.contains("== network refused to the run's tests (reported by the run)"),
        "{show}"
    );
    assert!(
        show.contains("the test tried httpbin.example.org:443, which is not allowed"),
        "{show}"
    );
    assert!(
        !show.contains('\u{1b}'),
        "a terminal escape reached the approver: {show}"
    );
    let json: Value =
        serde_json::from_slice(&fx.cli(&["show", &queue_id.to_string(), "--json"]).stdout).unwrap();
    assert_eq!(
        json["network_blocked"][0]["host"], "httpbin.example.org",
        "{json}"
    );
    assert_eq!(json["network_blocked"][0]["port"], 443, "{json}");
}

/// Register a run whose write allowlist is the policy's default (everything not refused).
fn register_open(fx: &Fixture, run_id: &str) -> std::path::PathBuf {
    let wt = fx.worktree(run_id);
    let mut reg = fx.registration(run_id, &wt);
    reg.write_allowlist = vec![];
    let reply = fx.client().register_run(&reg).unwrap();
    assert!(matches!(reply, BrokerReply::Registered { .. }), "{reply:?}");
    wt
}

#[test]
fn new_test_infrastructure_and_a_module_that_shadows_the_runner_are_refused() {
    let mut fx = Fixture::new();
    fx.start();
    for (run, path, text, rule) in [
        (
            "run-conftest",
            "tests/conftest.py",
            "import pytest\n\ndef pytest_collection_modifyitems(items):\n    for item in items:\n        item.add_marker(pytest.mark.skip(reason='x'))\n",
            "test-infrastructure",
        ),
        (
            "run-shadow",
            "unittest/__main__.py",
            "print('Ran 9 tests in 0.001s')\nprint('OK')\n",
            "shadowing-module",
        ),
    ] {
        let wt = register_open(&fx, run);
        apply_fix(&wt);
        write(&wt, path, text);
        let args = honest_args(&fx, &wt);
        let reply = fx.client().open_pr(run, args).unwrap();
        let err = refused(&reply);
        assert_eq!(err.code.as_str(), "POLICY_VIOLATION", "{}", err.message);
        assert_eq!(err.details["offending"], path, "{}", err.message);
        assert_eq!(err.details["rule"], rule, "{}", err.message);
    }
}

/// Register, apply the honest fix plus `extra` files, and send honest arguments (with
/// `test_change_reason` set when an existing test changed).
fn open_with(fx: &Fixture, run: &str, extra: &[(&str, &str)]) -> BrokerReply {
    let wt = fx.register(run);
    apply_fix(&wt);
    for (path, text) in extra {
        write(&wt, path, text);
    }
    let mut args = honest_args(fx, &wt);
    if args["diff_digest"]["test_files_modified"]
        .as_array()
        .is_some_and(|a| !a.is_empty())
    {
        args["test_change_reason"] = json!("existing-test-asserts-the-buggy-behaviour");
    }
    fx.client().open_pr(run, args).unwrap()
}

#[test]
fn test_infrastructure_written_as_a_test_file_is_refused_naming_file_line_and_rule() {
    let mut fx = Fixture::new();
    fx.start();
    for (run, path, text, rule, line) in [
        (
            "run-init-code",
            "tests/__init__.py",
            "import calc.ops\ncalc.ops.clamp = lambda x, lo, hi: max(lo, min(x, hi))\n",
            "test-package-init",
            1,
        ),
        (
            "run-sub-init-code",
            "tests/sub/__init__.py",
            "\"\"\"More tests.\"\"\"\nimport unittest\n",
            "test-package-init",
            2,
        ),
        (
            "run-pytest-hook",
            "tests/test_hooks.py",
            "def pytest_collection_modifyitems(items):\n    items.clear()\n",
            "pytest-hooks",
            1,
        ),
        (
            "run-go-testmain",
            "tests/calc_test.go",
            "package calc\n\nimport (\n\t\"os\"\n\t\"testing\"\n)\n\nfunc TestMain(m *testing.M) {\n\tos.Exit(0)\n}\n",
            "test-main",
            8,
        ),
        (
            "run-go-init",
            "tests/calc_test.go",
            "package calc\n\nfunc init() {\n\tClamp = nil\n}\n",
            "test-main",
            3,
        ),
    ] {
        let reply = open_with(&fx, run, &[(path, text)]);
        let err = refused(&reply);
        assert_eq!(
            err.code.as_str(),
            "POLICY_VIOLATION",
            "{run}: {}",
            err.message
        );
        assert_eq!(err.details["offending"], path, "{run}: {}", err.message);
        assert_eq!(err.details["rule"], rule, "{run}: {}", err.message);
        assert_eq!(err.details["line"], line, "{run}: {}", err.message);
        assert!(
            err.message.contains(&format!("line {line}")),
            "{}",
            err.message
        );
    }
}

#[test]
fn an_empty_new_test_package_and_an_ordinary_new_test_file_are_queued_without_flags() {
    let mut fx = Fixture::new();
    fx.start();
    let reply = open_with(
        &fx,
        "run-honest-infra",
        &[
            ("tests/sub/__init__.py", ""),
            (
                "tests/test_more.py",
                "\"\"\"More clamp tests.\"\"\"\nimport unittest\n\nfrom calc.ops import clamp\n\nBOUNDS = (0, 3)\n\n\nclass TestMore(unittest.TestCase):\n    def setUp(self):\n        self.lo, self.hi = BOUNDS\n\n    def test_inside(self):\n        self.assertEqual(clamp(2, self.lo, self.hi), 2)\n",
            ),
        ],
    );
    let BrokerReply::Queued { queue_id } = reply else {
        panic!("{reply:?}")
    };
    let show =
        String::from_utf8_lossy(&fx.cli(&["show", &queue_id.to_string()]).stdout).into_owned();
    assert!(show.contains("== flags\n(none)\n"), "{show}");
}

#[test]
fn a_new_test_file_that_patches_the_code_under_test_at_import_is_queued_with_a_flag() {
    let mut fx = Fixture::new();
    fx.start();
    // The patch is harmless here (the witness stays green); the approver still sees it.
    let reply = open_with(
        &fx,
        "run-patch-flag",
        &[(
            "tests/test_patch.py",
            "import unittest\n\nimport calc.ops\n\ncalc.ops.clamp = calc.ops.clamp\n\n\nclass TestPatched(unittest.TestCase):\n    def test_low(self):\n        self.assertEqual(calc.ops.clamp(-1, 0, 3), 0)\n",
        )],
    );
    let BrokerReply::Queued { queue_id } = reply else {
        panic!("{reply:?}")
    };
    let show =
        String::from_utf8_lossy(&fx.cli(&["show", &queue_id.to_string()]).stdout).into_owned();
    assert!(
        show.contains(
            "- test-patches-code: tests/test_patch.py:5: `calc.ops.clamp = calc.ops.clamp`"
        ),
        "{show}"
    );
}

#[test]
fn the_detector_gaps_are_a_digest_mismatch_when_denied_and_out_of_schema_when_admitted() {
    let mut fx = Fixture::new();
    fx.start();
    let identity = "        self.assertEqual(clamp(2, 0, 3), 2)\n";
    for (name, to, field, rule) in [
        (
            "tautology",
            "        self.assertEqual(clamp(2, 0, 3), clamp(2, 0, 3))\n",
            "assertions_removed",
            "py-same-operands",
        ),
        (
            "comparison-dropped",
            "        self.assertTrue(clamp(2, 0, 3))\n",
            "assertions_removed",
            "py-unittest-comparison-dropped",
        ),
        (
            "dead-guard",
            "        if False:\n            self.assertEqual(clamp(2, 0, 3), 2)\n",
            "skip_markers_added",
            "py-dead-guard",
        ),
        (
            "early-return",
            "        return\n        self.assertEqual(clamp(2, 0, 3), 2)\n",
            "skip_markers_added",
            "py-early-return",
        ),
    ] {
        let weakened = EXISTING_TEST.replace(identity, to);
        assert_ne!(weakened, EXISTING_TEST);
        // The lie: the weakening is there, the digest claims none.
        let run = format!("run-gap-lie-{name}");
        let wt = fx.register(&run);
        apply_fix(&wt);
        write(&wt, "tests/test_ops.py", &weakened);
        let mut args = honest_args(&fx, &wt);
        assert!(
            args["diff_digest"][field].as_u64().unwrap() >= 1,
            "{name}: the detector must count it"
        );
        args["diff_digest"][field] = json!(0);
        args["test_change_reason"] = json!("existing-test-asserts-the-buggy-behaviour");
        let reply = fx.client().open_pr(&run, args).unwrap();
        let err = refused(&reply);
        assert_eq!(err.code.as_str(), "DIGEST_MISMATCH", "{name}: {err:?}");
        assert_eq!(err.details["fields"], json!([field]), "{name}: {err:?}");
        // The error names the weakening itself: file, line and rule.
        assert!(
            err.message.contains("tests/test_ops.py:") && err.message.contains(rule),
            "{name}: {}",
            err.message
        );
        // The truth: refused by the schema's maximum of 0.
        let run = format!("run-gap-true-{name}");
        let wt = fx.register(&run);
        apply_fix(&wt);
        write(&wt, "tests/test_ops.py", &weakened);
        let mut args = honest_args(&fx, &wt);
        args["test_change_reason"] = json!("existing-test-asserts-the-buggy-behaviour");
        let reply = fx.client().open_pr(&run, args).unwrap();
        let err = refused(&reply);
        assert_eq!(err.code.as_str(), "SCHEMA_INVALID", "{name}: {err:?}");
        let violations = err.details["violations"].as_array().unwrap();
        assert!(
            violations
                .iter()
                .any(|v| v["pointer"] == format!("/diff_digest/{field}")
                    && v["keyword"] == "maximum"),
            "{name}: {violations:?}"
        );
    }
}

#[test]
fn a_changed_expected_value_is_not_a_detector_gap() {
    let mut fx = Fixture::new();
    fx.start();
    let wt = fx.register("run-gap-control");
    apply_fix(&wt);
    write(
        &wt,
        "tests/test_ops.py",
        EXISTING_TEST.replace(
            "        self.assertEqual(clamp(2, 0, 3), 2)\n",
            "        self.assertEqual(clamp(2, 0, 3), 4 // 2)\n",
        ),
    );
    let args = honest_args(&fx, &wt);
    assert_eq!(args["diff_digest"]["assertions_removed"], 0);
    assert_eq!(args["diff_digest"]["skip_markers_added"], 0);
}

/// Submit the honest fix plus `extra` (run against the worktree) on a run with the default
/// allowlist, and return the reply.
fn submit_with(fx: &Fixture, run_id: &str, extra: &dyn Fn(&std::path::Path)) -> BrokerReply {
    let wt = register_open(fx, run_id);
    apply_fix(&wt);
    extra(&wt);
    let args = honest_args(fx, &wt);
    fx.client().open_pr(run_id, args).unwrap()
}

#[track_caller]
fn assert_policy_violation(reply: &BrokerReply, offending: &str, rule: &str) -> String {
    let err = refused(reply);
    assert_eq!(err.code.as_str(), "POLICY_VIOLATION", "{}", err.message);
    assert!(!err.retryable);
    assert_eq!(err.details["offending"], offending, "{}", err.message);
    assert_eq!(err.details["rule"], rule, "{}", err.message);
    err.message.clone()
}

#[test]
fn look_alike_spellings_of_refused_paths_are_refused_by_the_same_rule() {
    let mut fx = Fixture::new();
    fx.start();
    for (run, path, rule) in [
        ("run-la-setup", "\u{A731}etup.py", "dependency-manifest"),
        (
            "run-la-ci",
            "\u{FF0E}github/workflows/\u{0441}i.yml",
            "ci-config",
        ),
        ("run-la-cargo", "\u{03F9}argo.toml", "dependency-manifest"),
        (
            "run-la-conftest",
            "tests/\u{1D41C}onftest.py",
            "test-infrastructure",
        ),
    ] {
        let reply = submit_with(&fx, run, &|wt| write(wt, path, "x = 1\n"));
        let message = assert_policy_violation(&reply, path, rule);
        assert!(message.contains("reads as"), "{message}");
    }
    let queue = fx.cli(&["queue"]);
    assert!(
        !String::from_utf8_lossy(&queue.stdout).contains("queued"),
        "nothing queued"
    );
}

#[test]
fn symlinks_out_of_the_tree_or_into_refused_classes_are_refused_naming_link_and_target() {
    use std::os::unix::fs::symlink;
    let mut fx = Fixture::new();
    fx.start();
    for (run, link, target, shown) in [
        (
            "run-ln-passwd",
            "calc/passwd.txt",
            "/etc/passwd",
            "\"/etc/passwd\"",
        ),
        (
            "run-ln-climb",
            "calc/data.txt",
            "../../../../../etc/passwd",
            "\"../../../../../etc/passwd\"",
        ),
        (
            "run-ln-ci",
            "docs/ci.yml",
            "../.github/workflows/ci.yml",
            "\".github/workflows/ci.yml\"",
        ),
        (
            "run-ln-hidden",
            "docs/x\u{0430}",
            "/etc/\u{202E}dwssap",
            "\"/etc/\\u{202e}dwssap\"",
        ),
    ] {
        let reply = submit_with(&fx, run, &|wt| {
            std::fs::create_dir_all(wt.join(link).parent().unwrap()).unwrap();
            symlink(target, wt.join(link)).unwrap();
        });
        let message = assert_policy_violation(&reply, link, "symlink-target");
        assert!(message.contains(shown), "{message}");
        assert!(
            message.contains(&format!("the symlink {}", escaped(link))),
            "{message}"
        );
    }
}

/// `text` quoted as the broker shows agent text: non-ASCII escaped.
fn escaped(text: &str) -> String {
    let inner: String = text
        .chars()
        .map(|c| {
            if c.is_ascii() {
                c.escape_debug().to_string()
            } else {
                c.escape_unicode().to_string()
            }
        })
        .collect();
    format!("\"{inner}\"")
}

#[test]
fn a_binary_file_is_refused_at_intake_naming_it() {
    let mut fx = Fixture::new();
    fx.start();
    let reply = submit_with(&fx, "run-binary", &|wt| {
        std::fs::write(wt.join("calc/table.bin"), b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR").unwrap();
    });
    let message = assert_policy_violation(&reply, "calc/table.bin", "binary-file");
    assert!(message.contains("\"calc/table.bin\""), "{message}");
    let reply = submit_with(&fx, "run-latin1", &|wt| {
        std::fs::write(wt.join("calc/names.py"), b"NAME = 'caf\xe9'\n").unwrap();
    });
    assert_policy_violation(&reply, "calc/names.py", "binary-file");
}

#[test]
fn a_915_character_path_is_refused_as_too_long() {
    let mut fx = Fixture::new();
    fx.start();
    let path = format!("calc/{}/longest.py", vec!["d".repeat(99); 9].join("/"));
    assert_eq!(path.len(), 915);
    let reply = submit_with(&fx, "run-long", &|wt| write(wt, &path, "x = 1\n"));
    let message = assert_policy_violation(&reply, &path, "path-too-long");
    assert!(message.contains("915 bytes"), "{message}");
}

#[test]
fn an_honest_fix_with_an_in_tree_symlink_and_ordinary_names_is_queued() {
    use std::os::unix::fs::symlink;
    let mut fx = Fixture::new();
    fx.start();
    let reply = submit_with(&fx, "run-honest-links", &|wt| {
        std::fs::create_dir_all(wt.join("docs")).unwrap();
        symlink("../README.md", wt.join("docs/README.md")).unwrap();
        symlink("ops.py", wt.join("calc/clamp.py")).unwrap();
        for name in [
            "docs/m.md",
            "docs/rn.md",
            "docs/\u{65E5}\u{672C}.md",
            "docs/caf\u{E9}.md",
        ] {
            write(wt, name, "notes\n");
        }
    });
    let BrokerReply::Queued { queue_id } = reply else {
        panic!("expected queued, got {reply:?}")
    };
    let show = fx.cli(&["show", &queue_id.to_string()]);
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(text.contains("docs/README.md"), "{text}");
}

/// The Python project of the harness plus a binary file at the pin.
fn project_with_a_pinned_binary() -> Options {
    Options {
        files: vec![
            ("calc/__init__.py", String::new()),
            ("calc/ops.py", BUGGY_OPS.to_owned()),
            ("tests/__init__.py", String::new()),
            ("tests/test_ops.py", EXISTING_TEST.to_owned()),
            ("README.md", "calc\n".to_owned()),
            (
                "assets/logo.png",
                "\u{89}PNG\r\n\u{1a}\n\0\0\0\rIHDR".to_owned(),
            ),
        ],
        ..Options::default()
    }
}

#[test]
fn a_pinned_binary_file_may_be_deleted_but_not_changed() {
    let mut fx = Fixture::with(project_with_a_pinned_binary());
    fx.start();
    let reply = submit_with(&fx, "run-bin-edit", &|wt| {
        write(wt, "assets/logo.png", "now text\n");
    });
    let message = assert_policy_violation(&reply, "assets/logo.png", "binary-file");
    assert!(message.contains("at the pin"), "{message}");
    let reply = submit_with(&fx, "run-bin-delete", &|wt| {
        std::fs::remove_file(wt.join("assets/logo.png")).unwrap();
    });
    assert!(
        matches!(reply, BrokerReply::Queued { .. }),
        "deleting a binary file is allowed: {reply:?}"
    );
}

/// The run's `[[tests.services]]` travel in its registration and the witness starts them
/// inside each of its sandboxes before the command: a fix is witnessed with a service up, and
/// a service that never becomes ready fails the witness naming it (nothing is queued).
#[test]
fn the_witness_starts_the_runs_services_and_names_one_that_never_becomes_ready() {
    use airlock_policies::testrun::TestService;
    let mut fx = Fixture::new();
    fx.start();
    let service = |name: &str, command: &[&str], port: u16, timeout: u64| TestService {
        name: name.into(),
        command: command.iter().map(|s| s.to_string()).collect(),
        env: [("SERVICE_PORT".to_string(), port.to_string())].into(),
        ready_port: Some(port),
        ready_command: Vec::new(),
        ready_timeout_secs: timeout,
    };
    let wt = fx.worktree("run-svc");
    let mut reg = fx.registration("run-svc", &wt);
    reg.test_env.services = vec![service(
        "files",
        &[
            "python3",
            "-m",
            "http.server",
            "8767",
            "--bind",
            "127.0.0.1",
            "--directory",
            "/tmp",
        ],
        8767,
        30,
    )];
    let reply = fx.client().register_run(&reg).unwrap();
    assert!(matches!(reply, BrokerReply::Registered { .. }), "{reply:?}");
    apply_fix(&wt);
    let args = honest_args(&fx, &wt);
    let reply = fx.client().open_pr("run-svc", args).unwrap();
    assert!(matches!(reply, BrokerReply::Queued { .. }), "{reply:?}");

    let wt = fx.worktree("run-mute");
    let mut reg = fx.registration("run-mute", &wt);
    reg.test_env.services = vec![service("mute", &["sleep", "60"], 8768, 1)];
    let reply = fx.client().register_run(&reg).unwrap();
    assert!(matches!(reply, BrokerReply::Registered { .. }), "{reply:?}");
    apply_fix(&wt);
    let args = honest_args(&fx, &wt);
    let reply = fx.client().open_pr("run-mute", args).unwrap();
    let text = format!("{reply:?}");
    assert!(!matches!(reply, BrokerReply::Queued { .. }), "{text}");
    assert!(
        text.contains("mute") && text.contains("was not ready within 1 s"),
        "{text}"
    );
}
