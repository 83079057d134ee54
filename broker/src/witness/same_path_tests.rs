//! The witness's steps where they run: every full step at one path, reused base runs, and
//! selected steps beside full ones when a slot is spare.

use super::*;
use std::sync::Mutex;

/// Answers as a unittest run would, reporting the tree it was given in the test's name
/// (as a test id that holds a path does).
struct Recording(Mutex<Vec<PathBuf>>, bool);

impl TestExecutor for Recording {
    fn run(
        &self,
        tree: &Path,
        argv: &[String],
        _timeout: Duration,
        _env: &TestEnvironment,
        _guard: &CommandGuard,
    ) -> Result<CapturedRun> {
        self.0.lock().unwrap().push(tree.to_path_buf());
        let pinned = !tree.join("fixed").exists();
        let selected = argv.last().is_some_and(|a| a.starts_with("tests."));
        let at = tree.display().to_string().replace('/', "_");
        let mut tests: Vec<(String, bool)> = Vec::new();
        let has_new = tree.join("tests/test_new.py").exists();
        if has_new {
            tests.push(("tests.test_new.T.test_new".to_owned(), !pinned));
        }
        if !selected {
            let name = if self.1 { at } else { String::new() };
            tests.push((format!("tests.test_old.T.test_at{name}"), true));
        }
        let failed = tests.iter().any(|(_, ok)| !ok);
        let code = i32::from(failed);
        let mut out = String::new();
        // As airlock's reporter writes it: its guard's verdict first.
        let mut xml = String::from(
            "<testsuites><testsuite><properties><property name=\"airlock-guard\" \
             value=\"checked\"/></properties>",
        );
        for (id, ok) in &tests {
            let (class, name) = id.rsplit_once('.').unwrap();
            let word = if *ok { "ok" } else { "FAIL" };
            out.push_str(&format!("{name} ({id}) ... {word}\n"));
            let child = if *ok { "" } else { "<failure/>" };
            xml.push_str(&format!(
                "<testcase classname=\"{class}\" name=\"{name}\">{child}</testcase>"
            ));
        }
        xml.push_str("</testsuite></testsuites>");
        // The reporter writes its report to the path that follows it.
        if let Some(i) = argv.iter().position(|a| a == results::UNITTEST_REPORTER) {
            std::fs::write(&argv[i + 1], xml).unwrap();
        }
        Ok(CapturedRun {
            exit_code: Some(code),
            stdout: String::new(),
            stderr: format!(
                "{out}\nRan {} tests in 0.001s\n\n{}\n",
                tests.len(),
                if code == 0 {
                    "OK"
                } else {
                    "FAILED (failures=1)"
                }
            ),
            blocked: Vec::new(),
        })
    }
}

/// The witness of `changes` at `pin` with the pinned test file, in `dir`'s work directory.
fn witness(
    repo: &git2::Repository,
    pin: git2::Oid,
    changes: &ChangeSet,
    plan: &WitnessPlan<'_>,
    executor: &dyn TestExecutor,
    dir: &Path,
) -> WitnessReport {
    run_witness(
        repo,
        pin,
        changes,
        &["tests/test_old.py".to_owned()],
        plan,
        executor,
        &dir.join("work"),
    )
    .unwrap()
}

/// A pinned repository under `dir` with a test, and a change that fixes it and adds one.
fn pinned_repo(dir: &Path) -> (git2::Repository, git2::Oid, ChangeSet) {
    let wt = dir.join("wt");
    std::fs::create_dir_all(wt.join("tests")).unwrap();
    std::fs::write(wt.join("tests/test_old.py"), "").unwrap();
    std::fs::write(wt.join("mod.py"), "x = 1\n").unwrap();
    let repo = git2::Repository::init(&wt).unwrap();
    let mut index = repo.index().unwrap();
    index
        .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
        .unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let sig = git2::Signature::now("t", "t@example.com").unwrap();
    let pin = repo
        .commit(Some("HEAD"), &sig, &sig, "pin", &tree, &[])
        .unwrap();
    drop(tree);
    std::fs::write(wt.join("fixed"), "").unwrap();
    std::fs::write(wt.join("tests/test_new.py"), "").unwrap();
    let is_test = |p: &str| p.starts_with("tests/");
    let changes = crate::changes::collect(&repo, pin, &wt, &is_test).unwrap();
    (repo, pin, changes)
}

/// Counts the commands in flight; each waits (up to a bound) for a second to join it, so
/// two run at once exactly when the witness started them together.
struct Paired {
    inner: Recording,
    flight: Mutex<(usize, usize)>,
    joined: std::sync::Condvar,
}

impl TestExecutor for Paired {
    fn run(
        &self,
        tree: &Path,
        argv: &[String],
        timeout: Duration,
        env: &TestEnvironment,
        guard: &CommandGuard,
    ) -> Result<CapturedRun> {
        let mut flight = self.flight.lock().unwrap();
        flight.0 += 1;
        flight.1 = flight.1.max(flight.0);
        self.joined.notify_all();
        let (mut flight, _) = self
            .joined
            .wait_timeout_while(flight, Duration::from_secs(2), |f| f.0 < 2 && f.1 < 2)
            .unwrap();
        flight.0 -= 1;
        drop(flight);
        self.inner.run(tree, argv, timeout, env, guard)
    }
}

#[test]
fn with_a_spare_slot_each_selected_step_runs_beside_the_full_one() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, pin, changes) = pinned_repo(dir.path());
    let command: Vec<String> = ["python3", "-m", "unittest", "-v"]
        .map(String::from)
        .to_vec();
    let env = TestEnvironment::default();
    let slots = WitnessSlots::new(2);
    let _this_witness = slots.acquire();
    let plan = WitnessPlan {
        test_command: &command,
        runner: TestRunner::Unittest,
        before_failing_test: Some("tests.test_new.T.test_new"),
        timeout: Duration::from_secs(5),
        test_env: &env,
        base_inventories: None,
        spare_slots: Some(&slots),
    };
    let executor = Paired {
        inner: Recording(Mutex::new(Vec::new()), true),
        flight: Mutex::new((0, 0)),
        joined: std::sync::Condvar::new(),
    };
    let report = witness(&repo, pin, &changes, &plan, &executor, dir.path());
    assert!(report.green, "{:?}", report.failure);
    assert_eq!(
        executor.flight.lock().unwrap().1,
        2,
        "two commands ran at once"
    );
    let order: Vec<&str> = report.steps.iter().map(|r| r.step.name()).collect();
    assert_eq!(
        order,
        [
            "pinned_selected",
            "base_full",
            "patched_selected",
            "patched_full"
        ]
    );
    // The full runs share one path, where the base's ids (which hold it) match; the
    // selected runs have their own.
    let paths = executor.inner.0.lock().unwrap().clone();
    assert_eq!(paths.len(), 4);
    let selected: Vec<&PathBuf> = paths
        .iter()
        .filter(|p| p.ends_with("tree-selected"))
        .collect();
    assert_eq!(selected.len(), 2, "{paths:?}");
    // The slot taken for the second command is free again.
    assert_eq!(slots.counts_now().running, 1);
}

#[test]
fn every_step_runs_at_one_path() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, pin, changes) = pinned_repo(dir.path());
    let command: Vec<String> = ["python3", "-m", "unittest", "-v"]
        .map(String::from)
        .to_vec();
    let env = TestEnvironment::default();
    let kept = BaseInventories::at(dir.path().join("kept"));
    let plan = WitnessPlan {
        test_command: &command,
        runner: TestRunner::Unittest,
        before_failing_test: Some("tests.test_new.T.test_new"),
        timeout: Duration::from_secs(5),
        test_env: &env,
        base_inventories: Some(&kept),
        spare_slots: None,
    };
    let executor = Recording(Mutex::new(Vec::new()), true);
    let report = witness(&repo, pin, &changes, &plan, &executor, dir.path());
    let paths = executor.0.lock().unwrap().clone();
    assert_eq!(paths.len(), 4, "{paths:?}");
    assert!(paths.iter().all(|p| p == &paths[0]), "{paths:?}");
    // The base test's id holds the path, and the patched full run still finds it.
    assert!(report.green, "{:?}", report.failure);

    // A second witness at the pin finds the base run kept, but its ids hold the first
    // witness's path in a form not moved: graded short against it, the base runs again
    // and the verdict is the same.
    let again = Recording(Mutex::new(Vec::new()), true);
    let report = witness(&repo, pin, &changes, &plan, &again, dir.path());
    let second = again.0.lock().unwrap().clone();
    assert_eq!(second.len(), 4, "{second:?}");
    assert!(report.green, "{:?}", report.failure);
    let base = &report.steps[1].output;
    assert_eq!(base.step, "base_full");
    assert!(base.reused.is_none(), "{base:?}");

    // Where the ids do not hold the path, the kept base run is reused: three commands.
    let plain = BaseInventories::at(dir.path().join("plain"));
    let plan = WitnessPlan {
        base_inventories: Some(&plain),
        ..plan
    };
    for runs in [4, 3] {
        let executor = Recording(Mutex::new(Vec::new()), false);
        let report = witness(&repo, pin, &changes, &plan, &executor, dir.path());
        assert_eq!(executor.0.lock().unwrap().len(), runs);
        assert!(report.green, "{:?}", report.failure);
        let base = &report.steps[1].output;
        assert_eq!(base.reused.is_some(), runs == 3, "{base:?}");
    }

    // Another command is another key: its base runs again.
    let other: Vec<String> = ["python3", "-m", "unittest", "-v", "-b"]
        .map(String::from)
        .to_vec();
    let plan = WitnessPlan {
        test_command: &other,
        ..plan
    };
    let third = Recording(Mutex::new(Vec::new()), false);
    witness(&repo, pin, &changes, &plan, &third, dir.path());
    assert_eq!(third.0.lock().unwrap().len(), 4);
}

/// Says when its first command starts and holds it until told to go; the rest run at once.
struct Held {
    inner: Recording,
    started: Mutex<Option<std::sync::mpsc::Sender<()>>>,
    go: Mutex<std::sync::mpsc::Receiver<()>>,
}

impl TestExecutor for Held {
    fn run(
        &self,
        tree: &Path,
        argv: &[String],
        timeout: Duration,
        env: &TestEnvironment,
        guard: &CommandGuard,
    ) -> Result<CapturedRun> {
        if let Some(started) = self.started.lock().unwrap().take() {
            started.send(()).unwrap();
            let _ = self
                .go
                .lock()
                .unwrap()
                .recv_timeout(Duration::from_secs(20));
        }
        self.inner.run(tree, argv, timeout, env, guard)
    }
}

#[test]
fn a_base_run_taken_ahead_is_reused_and_a_witness_waits_for_one_being_taken() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, pin, changes) = pinned_repo(dir.path());
    let command: Vec<String> = ["python3", "-m", "unittest", "-v"]
        .map(String::from)
        .to_vec();
    let env = TestEnvironment::default();
    let pinned = ["tests/test_old.py".to_owned()];
    let work = dir.path().join("work");
    let kept = BaseInventories::at(dir.path().join("kept"));
    let plan = WitnessPlan {
        test_command: &command,
        runner: TestRunner::Unittest,
        before_failing_test: Some("tests.test_new.T.test_new"),
        timeout: Duration::from_secs(5),
        test_env: &env,
        base_inventories: Some(&kept),
        spare_slots: None,
    };
    // Taken ahead: one command, kept once; the witness then runs three, its base reused.
    let ahead = Recording(Mutex::new(Vec::new()), false);
    let warmed = kept
        .warm(&repo, pin, &pinned, &plan, &ahead, &work)
        .unwrap();
    assert_eq!(warmed, Warmed::Kept);
    let again = kept
        .warm(&repo, pin, &pinned, &plan, &ahead, &work)
        .unwrap();
    assert_eq!(again, Warmed::Already);
    assert_eq!(ahead.0.lock().unwrap().len(), 1);
    let executor = Recording(Mutex::new(Vec::new()), false);
    let report = witness(&repo, pin, &changes, &plan, &executor, dir.path());
    assert_eq!(executor.0.lock().unwrap().len(), 3);
    assert!(report.green, "{:?}", report.failure);
    assert!(
        report.steps[1].output.reused.is_some(),
        "{:?}",
        report.steps[1]
    );

    // A witness that starts while its base run is being taken waits for it and reuses it,
    // rather than running a second one beside it.
    let fresh = BaseInventories::at(dir.path().join("fresh"));
    let plan = WitnessPlan {
        base_inventories: Some(&fresh),
        ..plan
    };
    let (started, on_start) = std::sync::mpsc::channel();
    let (go, wait) = std::sync::mpsc::channel();
    let held = Held {
        inner: Recording(Mutex::new(Vec::new()), false),
        started: Mutex::new(Some(started)),
        go: Mutex::new(wait),
    };
    let witnessed = Recording(Mutex::new(Vec::new()), false);
    let git_dir = repo.path().to_path_buf();
    std::thread::scope(|s| {
        let taking = s.spawn(|| {
            let repo = git2::Repository::open(&git_dir).unwrap();
            fresh
                .warm(&repo, pin, &pinned, &plan, &held, &work)
                .unwrap()
        });
        on_start.recv_timeout(Duration::from_secs(20)).unwrap();
        let witnessing = s.spawn(|| {
            let repo = git2::Repository::open(&git_dir).unwrap();
            witness(&repo, pin, &changes, &plan, &witnessed, dir.path())
        });
        // The witness is under way (its base waits); then the base run ends.
        std::thread::sleep(Duration::from_millis(300));
        go.send(()).unwrap();
        assert_eq!(taking.join().unwrap(), Warmed::Kept);
        let report = witnessing.join().unwrap();
        assert!(report.green, "{:?}", report.failure);
        assert!(
            report.steps[1].output.reused.is_some(),
            "{:?}",
            report.steps[1]
        );
    });
    assert_eq!(held.inner.0.lock().unwrap().len(), 1);
    assert_eq!(witnessed.0.lock().unwrap().len(), 3);
}
