//! Runs that share no filesystem with the broker: the run registers `tree = bytes` with a
//! worktree outside the broker's runs root, and every `open_pr` carries its change as a git
//! patch against the pin. The real `airlock-broker serve` rebuilds the tree from its own clone
//! and runs every check on that; a change that is off the pin, not a patch, or does not apply
//! is refused with the reason, and a call of the wrong shape is refused at the door without
//! ending the run. And the shared work queue: `work add`, `take_work` handing each issue to
//! one worker, `work list`.

use airlock_broker::{BrokerReply, RunRegistration};
use airlock_protocol::{
    ClaimEnd, ClaimRelease, IssueKey, Request, SubmittedChange, TakeWork, TreeTransfer,
};
use serde_json::Value;

use crate::harness::{Fixture, apply_fix, git, honest_args, write};

/// A worktree on "another host": a clone at the pin outside the broker's runs root.
fn remote_worktree(fx: &Fixture, name: &str) -> std::path::PathBuf {
    let elsewhere = fx.dir.path().join("other-host");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let wt = elsewhere.join(name);
    git(
        &elsewhere,
        &[
            "clone",
            "-q",
            fx.origin.to_str().unwrap(),
            wt.to_str().unwrap(),
        ],
    );
    git(&wt, &["checkout", "-q", &fx.pin]);
    wt
}

fn register_bytes(fx: &Fixture, run_id: &str, wt: &std::path::Path) -> RunRegistration {
    let mut registration = fx.registration(run_id, wt);
    registration.tree = TreeTransfer::Bytes;
    let reply = fx.client().register_run(&registration).unwrap();
    assert_eq!(
        reply,
        BrokerReply::Registered {
            run_id: run_id.to_owned()
        }
    );
    registration
}

/// The run's first open_pr call, carrying `change`.
fn open_pr_with(fx: &Fixture, run_id: &str, args: &Value, change: SubmittedChange) -> BrokerReply {
    let key = airlock_protocol::open_pr_call_id(run_id, 1);
    let request = Request::open_pr_with_change(run_id, &args.to_string(), change, &key).unwrap();
    fx.client().request(&request).unwrap()
}

fn refusal(reply: &BrokerReply) -> (String, String) {
    let BrokerReply::Refused { error } = reply else {
        panic!("expected a refusal, got {reply:?}")
    };
    (
        error.details["rule"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        error.message.clone(),
    )
}

#[test]
fn a_run_on_another_host_sends_its_change_as_bytes_and_the_broker_checks_the_tree_it_rebuilt() {
    let mut fx = Fixture::new();
    fx.start();

    // A shared-tree registration outside the runs root is refused, as before.
    let wt = remote_worktree(&fx, "run-1");
    let shared = fx.client().register_run(&fx.registration("run-0", &wt));
    assert!(
        format!("{shared:?}").contains("not under the runs root"),
        "{shared:?}"
    );
    register_bytes(&fx, "run-1", &wt);
    apply_fix(&wt);
    let args = honest_args(&fx, &wt);
    let patch = airlock_policies::change_patch(&wt, &fx.pin).unwrap();

    // The wrong shape is refused at the door: no change, or a change the run did not announce.
    let without = fx.client().open_pr("run-1", args.clone()).unwrap();
    assert_eq!(refusal(&without).0, "change_with_open_pr", "{without:?}");

    // A change off the pin, not base64, not a patch, or not applying to the pin is refused
    // with the reason (a policy violation: it ends that run), and the tree is never read from
    // the run's host.
    let other = "f".repeat(40);
    let mut garbled = SubmittedChange::new(&fx.pin, &patch);
    garbled.patch_base64.insert(3, '*');
    let stale = String::from_utf8(patch.clone())
        .unwrap()
        .replace("return max(lo, x)", "return max(lo, x, 0)");
    for (run_id, change, rule, says) in [
        (
            "bad-pin",
            SubmittedChange::new(&other, &patch),
            "change_on_the_pin",
            "not the run's pinned commit",
        ),
        ("bad-base64", garbled, "change_is_a_patch", "base64"),
        (
            "bad-text",
            SubmittedChange::new(&fx.pin, b"not a patch\n"),
            "change_applies_to_pin",
            "not a git patch",
        ),
        (
            "bad-apply",
            SubmittedChange::new(&fx.pin, stale.as_bytes()),
            "change_applies_to_pin",
            "does not apply",
        ),
    ] {
        register_bytes(&fx, run_id, &wt);
        let args = honest_args(&fx, &wt);
        let reply = open_pr_with(&fx, run_id, &args, change);
        let (got, message) = refusal(&reply);
        assert_eq!(got, rule, "{run_id}: {message}");
        assert!(message.contains(says), "{run_id}: {message}");
    }

    // The run's worktree moves on after the patch was made: the broker checks the bytes it
    // got, not the files on the run's host.
    let digest_before = args["diff_digest"].clone();
    std::fs::write(wt.join("calc/ops.py"), "raise SystemExit(1)\n").unwrap();
    let reply = open_pr_with(&fx, "run-1", &args, SubmittedChange::new(&fx.pin, &patch));
    let BrokerReply::Queued { queue_id } = reply else {
        panic!("expected queued, got {reply:?}")
    };
    let shown = fx.cli(&["show", &queue_id.to_string(), "--json"]);
    assert!(shown.status.success(), "{shown:?}");
    let item: Value = serde_json::from_slice(&shown.stdout).unwrap();
    let diff = item["diff"].as_str().unwrap();
    assert!(diff.contains("+    return max(lo, min(x, hi))"), "{diff}");
    assert!(diff.contains("tests/test_clamp_high.py"), "{diff}");
    assert_eq!(
        item["computed_digest"]["files_changed"], digest_before["files_changed"],
        "{item}"
    );

    // A shared-tree run that sends a change is refused at the door too.
    let local = fx.register("run-2");
    apply_fix(&local);
    let args = honest_args(&fx, &local);
    let patch = airlock_policies::change_patch(&local, &fx.pin).unwrap();
    let mixed = open_pr_with(&fx, "run-2", &args, SubmittedChange::new(&fx.pin, &patch));
    assert_eq!(refusal(&mixed).0, "change_with_open_pr", "{mixed:?}");
    // ... and it still queues the ordinary way, its door refusal having ended nothing.
    let reply = fx.client().open_pr("run-2", args).unwrap();
    assert!(matches!(reply, BrokerReply::Queued { .. }), "{reply:?}");

    // A run pins a commit the broker's clone has not fetched (the forge moved on since): the
    // broker fetches its remote's branches and registers the run.
    write(&fx.origin, "README.md", "calc, later\n");
    git(&fx.origin, &["commit", "-q", "-am", "later"]);
    let later = git(&fx.origin, &["rev-parse", "HEAD"]);
    git(
        &fx.origin,
        &["push", "-q", fx.remote.to_str().unwrap(), "main"],
    );
    let mut registration = fx.registration("run-3", &wt);
    registration.tree = TreeTransfer::Bytes;
    registration.base_commit = later;
    let reply = fx.client().register_run(&registration).unwrap();
    assert_eq!(
        reply,
        BrokerReply::Registered {
            run_id: "run-3".to_owned()
        }
    );
    // A commit on no branch of the remote is refused, naming the remote.
    registration.run_id = "run-4".to_owned();
    registration.base_commit = "0123456789abcdef0123456789abcdef01234567".to_owned();
    let refused = fx.client().register_run(&registration);
    assert!(
        format!("{refused:?}").contains("nor on any branch of its remote origin"),
        "{refused:?}"
    );
}

fn take(holder: &str, lease_secs: u64) -> Request {
    Request::TakeWork(TakeWork {
        holder: holder.to_owned(),
        lease_secs,
        repository: Some("acme/calc".to_owned()),
    })
}

#[test]
fn the_work_queue_hands_each_issue_to_one_worker_and_a_lapsed_one_to_the_next() {
    let mut fx = Fixture::new();
    fx.start();
    let added = fx.cli(&["work", "add", "acme/calc", "3", "1", "2"]);
    assert!(added.status.success(), "{added:?}");
    assert_eq!(
        String::from_utf8_lossy(&added.stdout),
        "queued 3 new of 3 issues of acme/calc\n"
    );
    let again = fx.cli(&["work", "add", "acme/calc", "2", "4"]);
    assert_eq!(
        String::from_utf8_lossy(&again.stdout),
        "queued 1 new of 2 issues of acme/calc\n"
    );
    // An issue of a repository the broker does not serve is refused, naming it.
    let unknown = fx.cli(&["work", "add", "acme/other", "1"]);
    assert!(!unknown.status.success());
    assert!(
        String::from_utf8_lossy(&unknown.stderr).contains("\"acme/other\" is not configured"),
        "{unknown:?}"
    );

    // Four workers ask at once: each gets a different issue.
    let socket = fx.socket.clone();
    let takers: Vec<_> = (0..4)
        .map(|w| {
            let socket = socket.clone();
            std::thread::spawn(move || {
                airlock_broker::BrokerClient::connect(&socket)
                    .unwrap()
                    .request(&take(&format!("w{w}"), if w == 0 { 1 } else { 600 }))
                    .unwrap()
            })
        })
        .collect();
    let mut taken: Vec<(u64, String)> = takers
        .into_iter()
        .map(|h| match h.join().unwrap() {
            BrokerReply::Claimed {
                claim,
                acquired: true,
                ..
            } => (claim.issue.issue_number, claim.holder),
            other => panic!("expected a claim, got {other:?}"),
        })
        .collect();
    taken.sort();
    let numbers: Vec<u64> = taken.iter().map(|(n, _)| *n).collect();
    assert_eq!(numbers, [1, 2, 3, 4]);
    assert_eq!(
        fx.client().request(&take("w9", 600)).unwrap(),
        BrokerReply::NoWork
    );
    // w0's one-second lease lapses: its issue goes to the next taker.
    let (lapsed, _) = taken.iter().find(|(_, h)| h == "w0").unwrap().clone();
    std::thread::sleep(std::time::Duration::from_millis(2100));
    let BrokerReply::Claimed { claim, .. } = fx.client().request(&take("w9", 600)).unwrap() else {
        panic!("the lapsed issue was not handed out again")
    };
    assert_eq!(
        (claim.issue.issue_number, claim.holder.as_str()),
        (lapsed, "w9")
    );
    // Done issues are never handed out again; an abandoned one is, at once. The abandoned one
    // is the highest of the issues the other workers hold (which issue w0 took depends on the
    // threads' order).
    let abandoned = taken
        .iter()
        .filter(|(_, h)| h != "w0")
        .map(|(n, _)| *n)
        .max()
        .unwrap();
    for (n, holder) in taken.iter().filter(|(_, h)| h != "w0") {
        let end = if *n == abandoned {
            ClaimEnd::Abandoned
        } else {
            ClaimEnd::Done
        };
        let reply = fx
            .client()
            .request(&Request::ReleaseClaim(ClaimRelease {
                issue: IssueKey {
                    repository: "acme/calc".to_owned(),
                    issue_number: *n,
                },
                holder: holder.clone(),
                end,
            }))
            .unwrap();
        assert!(matches!(reply, BrokerReply::Released { .. }), "{reply:?}");
    }
    let BrokerReply::Claimed { claim, .. } = fx.client().request(&take("w8", 600)).unwrap() else {
        panic!("the abandoned issue was not handed out again")
    };
    assert_eq!(claim.issue.issue_number, abandoned);
    assert_eq!(
        fx.client().request(&take("w7", 600)).unwrap(),
        BrokerReply::NoWork
    );
    let listed = fx.cli(&["work", "list", "--json"]);
    let entries: Vec<Value> = serde_json::from_slice(&listed.stdout).unwrap();
    let attempts: Vec<(u64, u64)> = entries
        .iter()
        .map(|e| {
            (
                e["issue"]["issue_number"].as_u64().unwrap(),
                e["attempts"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(attempts.len(), 4, "{entries:?}");
    assert!(
        attempts.contains(&(lapsed, 2)) && attempts.contains(&(abandoned, 2)),
        "{attempts:?}"
    );
    let table = String::from_utf8_lossy(&fx.cli(&["work", "list"]).stdout).into_owned();
    assert!(table.starts_with("REPOSITORY"), "{table}");
    assert!(table.contains("done"), "{table}");
}
