//! kill -9 of the broker during intake and during approval: after a restart nothing is lost and
//! nothing is duplicated.

use std::time::{Duration, Instant};

use crate::harness::*;
use airlock_broker::BrokerReply;
use airlock_broker::store::{SqliteStore, Store};
use serde_json::Value;

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn kill_during_intake_then_restart_and_resend_queues_exactly_once() {
    let mut fx = Fixture::new();
    fx.start();
    let (args, scratch_before) = kill_inside_the_witness(&mut fx, "run-crash", None);
    {
        let mut store = SqliteStore::open(&fx.db).unwrap();
        assert_eq!(
            store.unfinished_intakes().unwrap().len(),
            1,
            "the request was recorded before the kill"
        );
        assert!(store.queue().unwrap().is_empty());
    }
    fx.start();
    for old in &scratch_before {
        assert!(
            !old.exists(),
            "the restarted broker removed the killed witness's tree {}",
            old.display()
        );
    }
    let reply = fx.client().open_pr("run-crash", args.clone()).unwrap();
    let BrokerReply::Queued { queue_id } = reply else {
        panic!("{reply:?}")
    };
    assert_eq!(
        fx.client().open_pr("run-crash", args).unwrap(),
        BrokerReply::Queued { queue_id }
    );
    let mut store = SqliteStore::open(&fx.db).unwrap();
    assert!(store.unfinished_intakes().unwrap().is_empty());
    assert_eq!(store.queue().unwrap().len(), 1);
}

/// Start an open_pr whose witness is slow (a new test sleeps), and kill the broker inside the
/// witness. Returns the arguments sent and the witness scratch directories seen before the kill.
fn kill_inside_the_witness(
    fx: &mut Fixture,
    run_id: &str,
    reconnect_secs: Option<u64>,
) -> (Value, Vec<std::path::PathBuf>) {
    let wt = fx.worktree(run_id);
    let mut registration = fx.registration(run_id, &wt);
    registration.reconnect_secs = reconnect_secs;
    assert!(matches!(
        fx.client().register_run(&registration).unwrap(),
        BrokerReply::Registered { .. }
    ));
    apply_fix(&wt);
    write(
        &wt,
        "tests/test_clamp_high.py",
        NEW_TEST.replace(
            "    def test_clamp_high(self):\n",
            "    def test_clamp_high(self):\n        import time\n        time.sleep(3)\n",
        ),
    );
    let args = honest_args(fx, &wt);
    let socket = fx.socket.clone();
    let sent = args.clone();
    let id = run_id.to_owned();
    let pending = std::thread::spawn(move || {
        airlock_broker::BrokerClient::connect(&socket)
            .unwrap()
            .open_pr(&id, sent)
    });
    let work = fx.dir.path().join("work");
    wait_for("the witness to start", || {
        std::fs::read_dir(&work)
            .map(|d| {
                d.flatten()
                    .any(|e| e.file_name().to_string_lossy().starts_with("witness-"))
            })
            .unwrap_or(false)
    });
    // The scratch trees (a witness's, a warm-up's), not what the broker keeps on purpose
    // beside them (the base runs it took, `base-inventories/`).
    let scratch: Vec<_> = std::fs::read_dir(&work)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().and_then(|n| n.to_str()) != Some("base-inventories"))
        .collect();
    assert!(!scratch.is_empty());
    fx.kill();
    assert!(
        pending.join().unwrap().is_err(),
        "the killed broker cannot have answered"
    );
    (args, scratch)
}

#[test]
fn an_intake_taken_up_after_the_runs_reconnect_window_is_abandoned_not_queued() {
    let mut fx = Fixture::new();
    fx.start();
    let (args, _) = kill_inside_the_witness(&mut fx, "run-late", Some(1));
    // The supervisor waits one second after losing the broker; the broker is back later.
    std::thread::sleep(Duration::from_millis(2100));
    fx.start();
    let reply = fx.client().open_pr("run-late", args).unwrap();
    let BrokerReply::Refused { error } = &reply else {
        panic!("{reply:?}")
    };
    assert_eq!(error.code.as_str(), "POLICY_VIOLATION", "{error:?}");
    assert_eq!(error.details["rule"], "intake_abandoned", "{error:?}");
    assert!(
        error.message.contains("reconnect window is 1 s"),
        "{}",
        error.message
    );
    let mut store = SqliteStore::open(&fx.db).unwrap();
    assert!(
        store.queue().unwrap().is_empty(),
        "nothing was queued behind the run's back"
    );
    assert!(store.unfinished_intakes().unwrap().is_empty());
    let decisions: Vec<_> = fx
        .audit_kinds()
        .into_iter()
        .filter(|(k, _)| k == "broker_decision")
        .map(|(_, p)| p["code"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(decisions, ["POLICY_VIOLATION"], "{decisions:?}");
}

#[test]
fn an_intake_taken_up_within_the_window_is_queued_for_the_supervisors_resend() {
    let mut fx = Fixture::new();
    fx.start();
    let (args, _) = kill_inside_the_witness(&mut fx, "run-soon", Some(120));
    fx.start();
    // The restarted broker resumes the intake by itself; the resend gets its answer. Like the
    // supervisor (`BrokerSocket::reconnecting_for`), a connection lost on the way is retried
    // with the same request; the broker must still be the one that was started.
    let mut attempts = Vec::new();
    let reply = loop {
        match fx.client().open_pr("run-soon", args.clone()) {
            Ok(reply) => break reply,
            Err(e) if attempts.len() < 3 => {
                attempts.push(e.to_string());
                std::thread::sleep(Duration::from_millis(500));
            }
            Err(e) => panic!(
                "the resend failed: {e} (earlier: {attempts:?}); the broker: {:?}",
                fx.server_exit()
            ),
        }
    };
    assert_eq!(
        fx.server_exit(),
        None,
        "the restarted broker went away (resends: {attempts:?})"
    );
    assert!(matches!(reply, BrokerReply::Queued { .. }), "{reply:?}");
    let mut store = SqliteStore::open(&fx.db).unwrap();
    assert_eq!(store.queue().unwrap().len(), 1);
}

#[test]
fn kill_during_approval_then_restart_publishes_once() {
    let forge = MockForge::start();
    let mut fx = Fixture::with(Options {
        forge: Some((forge.base.clone(), "AIRLOCK_IT_FORGE_TOKEN".into())),
        ..Options::default()
    });
    fx.start();
    let id = queue_honest(&fx, "run-crash-approve");
    forge
        .stall_posts
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let mut approve = std::process::Command::new(BIN)
        .arg("--config")
        .arg(&fx.config)
        .args(["approve", &id.to_string()])
        .env("AIRLOCK_IT_FORGE_TOKEN", "tok")
        .env("AIRLOCK_REVIEWER", "rev")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_for("the pull request request", || {
        forge.requests().iter().any(|r| r.method == "POST")
    });
    approve.kill().unwrap();
    approve.wait().unwrap();
    fx.kill();
    let branch_commit = fx
        .remote_ref(&format!("airlock/CALC-42-{id}"))
        .expect("pushed before the kill");
    {
        let mut store = SqliteStore::open(&fx.db).unwrap();
        let item = store.queue_item(id).unwrap().unwrap();
        assert_eq!(
            item.status.as_str(),
            "approved",
            "the approval survived, publication unfinished"
        );
    }
    forge
        .stall_posts
        .store(false, std::sync::atomic::Ordering::SeqCst);
    fx.start_with_env(&[("AIRLOCK_IT_FORGE_TOKEN", "tok")]);
    let reply = fx.client().decision("run-crash-approve").unwrap();
    assert_eq!(
        reply,
        BrokerReply::Approved {
            queue_id: id,
            branch: format!("airlock/CALC-42-{id}"),
            commit: branch_commit.clone(),
            pr_url: Some("https://forge.example/acme/calc/pull/1".into())
        }
    );
    assert_eq!(
        forge
            .requests()
            .iter()
            .filter(|r| r.method == "POST" && r.path.ends_with("/pulls"))
            .count(),
        1,
        "no second pull request"
    );
    assert_eq!(
        fx.remote_ref(&format!("airlock/CALC-42-{id}")).as_deref(),
        Some(branch_commit.as_str())
    );
}
