//! Patched code that attacks the witness from inside the test process: rewriting the pinned
//! tests at run time, planting bytecode, printing a fake transcript and leaving with
//! `os._exit(0)`, claiming a test that lives in a new non-test module. Each is judged from
//! outside, from the broker's reply; the honest pytest fix beside them must still be queued.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use airlock_broker::{BrokerReply, TestRunner};
use serde_json::{Value, json};

use crate::harness::{EXISTING_TEST, Fixture, NEW_TEST, Options, apply_fix, honest_args, write};

/// The interpreter the sandbox finds first on its `PATH` (`/usr/local/bin`, then `/usr/bin`),
/// which is not necessarily the one on the test's own `PATH` (a pyenv shim).
fn sandbox_python() -> PathBuf {
    ["/usr/local/bin/python3", "/usr/bin/python3"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .expect("python3 in /usr/local/bin or /usr/bin (the sandbox's PATH)")
}

/// pytest installed once for the sandbox's interpreter, under the target's temporary
/// directory (pip, from the package index: the first run needs the network).
fn pytest_site() -> &'static Path {
    static SITE: OnceLock<PathBuf> = OnceLock::new();
    SITE.get_or_init(|| {
        let site = Path::new(env!("CARGO_TARGET_TMPDIR")).join("pytest-site-9.2.0");
        if site.join("pytest").is_dir() {
            return site;
        }
        let staging = site.with_extension(format!("partial-{}", std::process::id()));
        let out = Command::new(sandbox_python())
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--no-compile",
                "--target",
            ])
            .arg(&staging)
            .arg("pytest==9.2.0")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "installing pytest for {} failed (needs pip and the network): {}",
            sandbox_python().display(),
            String::from_utf8_lossy(&out.stderr)
        );
        // Another test binary may have won the race; either copy is complete.
        if std::fs::rename(&staging, &site).is_err() {
            let _ = std::fs::remove_dir_all(&staging);
        }
        site
    })
}

fn refusal(reply: &BrokerReply) -> &airlock_broker::BrokerError {
    match reply {
        BrokerReply::Refused { error } => error,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// The witness steps attached to a refusal.
fn outputs(err: &airlock_broker::BrokerError) -> Vec<Value> {
    err.details["outputs"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn step_text(err: &airlock_broker::BrokerError, step: &str) -> String {
    outputs(err)
        .iter()
        .find(|o| o["step"] == step)
        .map(|o| {
            format!(
                "{}\n{}",
                o["stdout"].as_str().unwrap_or(""),
                o["stderr"].as_str().unwrap_or("")
            )
        })
        .unwrap_or_else(|| panic!("no {step} step in {:?}", err.details))
}

/// A fixture whose broker may grant the pytest site to witness runs.
fn pytest_fixture(files: Vec<(&'static str, String)>) -> Fixture {
    let site = pytest_site();
    Fixture::with(Options {
        extra_config: format!("witness_ro = [\"{}\"]", site.display()),
        files,
        ..Options::default()
    })
}

/// Register a pytest run (the harness registers unittest).
fn register_pytest(fx: &Fixture, run_id: &str) -> PathBuf {
    let wt = fx.worktree(run_id);
    let mut reg = fx.registration(run_id, &wt);
    let site = pytest_site();
    reg.test_command = ["python3", "-m", "pytest", "-rA", "-p", "no:cacheprovider"]
        .map(String::from)
        .to_vec();
    reg.test_runner = TestRunner::Pytest;
    reg.test_env.ro = vec![site.to_path_buf()];
    reg.test_env
        .env
        .insert("PYTHONPATH".into(), site.display().to_string());
    let reply = fx.client().register_run(&reg).unwrap();
    assert!(matches!(reply, BrokerReply::Registered { .. }), "{reply:?}");
    wt
}

const PYTEST_NEW_TEST: &str = "tests/test_clamp_high.py::TestClampHigh::test_clamp_high";

fn claim(args: &mut Value, test: &str) {
    args["test_evidence"]["before_failing_test"] = json!(test);
    args["test_evidence"]["before_selector"] = json!(test);
}

/// Breaks the existing `test_clamp_low` (no lower bound) while passing the new test.
const UPPER_ONLY: &str = "def clamp(x, lo, hi):\n    return min(x, hi)\n";

/// The pinned test with `test_clamp_low` weakened to pass on [`UPPER_ONLY`].
fn weakened_test() -> String {
    EXISTING_TEST.replace("clamp(-5, 0, 3), 0)", "clamp(-5, 0, 3), -5)")
}

/// Patched source that tries every way to replace the pinned test file at import, printing
/// `ATTACK <way> ok` or `ATTACK <way> failed: <error>` to stderr.
fn rewriting_ops() -> String {
    format!(
        r#"import os, sys

_TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests")
_TARGET = os.path.join(_TESTS, "test_ops.py")
_WEAK = {weak:?}


def _try(way, action):
    try:
        action()
        print("ATTACK %s ok" % way, file=sys.stderr)
    except OSError as e:
        print("ATTACK %s failed: %s" % (way, e), file=sys.stderr)


def _chmod_rewrite():
    os.chmod(_TARGET, 0o644)
    with open(_TARGET, "w") as f:
        f.write(_WEAK)


def _rename_over():
    tmp = os.path.join(_TESTS, "tmp_weak.txt")
    with open(tmp, "w") as f:
        f.write(_WEAK)
    os.replace(tmp, _TARGET)


def _unlink_recreate():
    os.unlink(_TARGET)
    with open(_TARGET, "w") as f:
        f.write(_WEAK)


def _proc_fd():
    fd = os.open(_TARGET, os.O_RDONLY)
    with open("/proc/self/fd/%d" % fd, "w") as f:
        f.write(_WEAK)


def _hard_link():
    alias = os.path.join(_TESTS, "alias.py")
    os.link(_TARGET, alias)
    with open(alias, "w") as f:
        f.write(_WEAK)


def _rename_dir():
    os.rename(_TESTS, _TESTS + "_old")
    os.makedirs(_TESTS)
    with open(_TARGET, "w") as f:
        f.write(_WEAK)


def _umount():
    import ctypes, ctypes.util
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    for path in (_TARGET, _TESTS):
        if libc.umount2(path.encode(), 2) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
    with open(_TARGET, "w") as f:
        f.write(_WEAK)


def _pycache():
    cache = os.path.join(_TESTS, "__pycache__")
    os.makedirs(cache, exist_ok=True)
    with open(os.path.join(cache, "test_ops.cpython-311.pyc"), "wb") as f:
        f.write(b"planted")


for _way, _action in [
    ("chmod-rewrite", _chmod_rewrite),
    ("rename-over", _rename_over),
    ("unlink-recreate", _unlink_recreate),
    ("proc-fd", _proc_fd),
    ("hard-link", _hard_link),
    ("rename-dir", _rename_dir),
    ("umount", _umount),
    ("pycache", _pycache),
]:
    _try(_way, _action)


def clamp(x, lo, hi):
    return min(x, hi)
"#,
        weak = weakened_test()
    )
}

const WAYS: [&str; 8] = [
    "chmod-rewrite",
    "rename-over",
    "unlink-recreate",
    "proc-fd",
    "hard-link",
    "rename-dir",
    "umount",
    "pycache",
];

/// Rewriting a pinned test at run time, in a tests directory that holds only tests (mounted
/// read-only whole) and in one that also holds a data file (each test file mounted read-only):
/// every attempt is made and fails, and the weakened test never runs.
#[test]
fn rewriting_a_pinned_test_at_run_time_fails_and_is_not_queued() {
    for (layout, extra) in [("whole", None), ("per-file", Some("tests/data.json"))] {
        let mut files = vec![
            ("calc/__init__.py", String::new()),
            ("calc/ops.py", crate::harness::BUGGY_OPS.to_owned()),
            ("tests/__init__.py", String::new()),
            ("tests/test_ops.py", EXISTING_TEST.to_owned()),
        ];
        if let Some(path) = extra {
            files.push((path, "{}\n".to_owned()));
        }
        let mut fx = Fixture::with(Options {
            files,
            ..Options::default()
        });
        fx.start();
        let run = format!("run-rewrite-{layout}");
        let wt = fx.register(&run);
        write(&wt, "calc/ops.py", rewriting_ops());
        write(&wt, "tests/test_clamp_high.py", NEW_TEST);
        let reply = fx.client().open_pr(&run, honest_args(&fx, &wt)).unwrap();
        let err = refusal(&reply);
        assert_eq!(
            err.code.as_str(),
            "POLICY_VIOLATION",
            "{layout}: {}",
            err.message
        );
        assert!(
            err.message.contains("test_clamp_low"),
            "{layout}: {}",
            err.message
        );
        let text = step_text(err, "patched_full");
        for way in WAYS {
            assert!(
                text.contains(&format!("ATTACK {way} failed: ")),
                "{layout}: {way} was not attempted or did not fail:\n{text}"
            );
            assert!(
                !text.contains(&format!("ATTACK {way} ok")),
                "{layout}: {way} succeeded:\n{text}"
            );
        }
        assert!(text.contains("Read-only file system"), "{layout}: {text}");
    }
}

/// Bytecode for the pinned test module, compiled from a weakened copy with an unchecked hash
/// (Python would load it without looking at the source) and planted in the diff beside the
/// test: outside the sandbox it makes the broken code pass; in the witness it is never read.
#[test]
fn a_planted_pyc_is_not_trusted() {
    let mut fx = Fixture::new();
    fx.start();
    let wt = fx.register("run-pyc");
    write(&wt, "calc/ops.py", UPPER_ONLY);
    write(&wt, "tests/test_clamp_high.py", NEW_TEST);
    let scratch = tempfile::tempdir().unwrap();
    let weak = scratch.path().join("test_ops.py");
    std::fs::write(&weak, weakened_test()).unwrap();
    let pyc = wt.join("tests/__pycache__/test_ops.cpython-311.pyc");
    std::fs::create_dir_all(pyc.parent().unwrap()).unwrap();
    let compiled = Command::new(sandbox_python())
        .args([
            "-c",
            "import py_compile, sys; py_compile.compile(sys.argv[1], cfile=sys.argv[2], \
             doraise=True, invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)",
        ])
        .arg(&weak)
        .arg(&pyc)
        .output()
        .unwrap();
    assert!(compiled.status.success(), "{compiled:?}");
    // The control: the same tree, run by the same interpreter without airlock's variables,
    // passes on the planted bytecode although the source's test_clamp_low fails.
    let control = Command::new(sandbox_python())
        .args(["-m", "unittest", "-v"])
        .current_dir(&wt)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env_remove("PYTHONPYCACHEPREFIX")
        .output()
        .unwrap();
    let control_err = String::from_utf8_lossy(&control.stderr);
    assert!(
        control.status.success() && control_err.contains("test_clamp_low"),
        "the planted bytecode should make the unsandboxed run pass: {control_err}"
    );
    let reply = fx
        .client()
        .open_pr("run-pyc", honest_args(&fx, &wt))
        .unwrap();
    let err = refusal(&reply);
    assert_eq!(err.code.as_str(), "POLICY_VIOLATION", "{}", err.message);
    if err.details["offending"] == "witness_run" {
        assert!(err.message.contains("test_clamp_low"), "{}", err.message);
        let text = step_text(err, "patched_full");
        assert!(
            text.contains("test_clamp_low") && text.contains("FAIL"),
            "{text}"
        );
    }
}

/// A fake pytest transcript (every test PASSED, a summary line) printed at import by the
/// patched source, which then leaves with `os._exit(0)` before pytest writes anything: the
/// report the broker asked for is missing, so the step is invalid.
#[test]
fn a_fake_pytest_transcript_and_os_exit_is_not_queued() {
    let mut fx = pytest_fixture(Vec::new());
    fx.start();
    let wt = register_pytest(&fx, "run-fake-pytest");
    // pytest captures file descriptors 1 and 2 while it collects; the transcript goes to the
    // copies it saved of the real ones (the pipes the sandbox reads), as the issue's attack did.
    let fake = r#"import os, stat
_LINES = [
    "PASSED tests/test_ops.py::TestClampLow::test_clamp_low",
    "PASSED tests/test_ops.py::TestClampLow::test_identity",
    "PASSED tests/test_clamp_high.py::TestClampHigh::test_clamp_high",
    "============================== 3 passed in 0.01s ==============================",
]
_DATA = ("\n".join(_LINES) + "\n").encode()
for _fd in range(1, 256):
    try:
        if stat.S_ISFIFO(os.fstat(_fd).st_mode):
            os.write(_fd, _DATA)
    except OSError:
        pass
os._exit(0)


def clamp(x, lo, hi):
    return x
"#;
    write(&wt, "calc/ops.py", fake);
    write(&wt, "tests/test_clamp_high.py", NEW_TEST);
    let mut args = honest_args(&fx, &wt);
    claim(&mut args, PYTEST_NEW_TEST);
    let reply = fx.client().open_pr("run-fake-pytest", args).unwrap();
    let err = refusal(&reply);
    assert_eq!(err.code.as_str(), "POLICY_VIOLATION", "{}", err.message);
    assert_eq!(err.details["offending"], "witness_run", "{}", err.message);
    assert!(
        err.message.contains("patched_selected") && err.message.contains("wrote no report"),
        "{}",
        err.message
    );
}

/// The honest fix under pytest: queued, every step's report agreeing with its output.
#[test]
fn an_honest_pytest_fix_is_queued_with_its_reports_agreeing() {
    let mut fx = pytest_fixture(Vec::new());
    fx.start();
    let wt = register_pytest(&fx, "run-honest-pytest");
    apply_fix(&wt);
    let mut args = honest_args(&fx, &wt);
    claim(&mut args, PYTEST_NEW_TEST);
    let reply = fx.client().open_pr("run-honest-pytest", args).unwrap();
    let BrokerReply::Queued { queue_id } = reply else {
        panic!("expected queued, got {reply:?}")
    };
    let show =
        String::from_utf8_lossy(&fx.cli(&["show", &queue_id.to_string()]).stdout).into_owned();
    assert!(show.contains("--junitxml="), "{show}");
}

/// A claimed fail-to-pass test in a new module that is not a test file (pytest collects any
/// file named on its command line) is refused before the witness runs, naming the file.
#[test]
fn a_claimed_test_in_a_new_non_test_module_is_refused() {
    let mut fx = Fixture::new();
    fx.start();
    let wt = fx.register("run-claim");
    apply_fix(&wt);
    write(
        &wt,
        "calc/check.py",
        "import unittest\n\nfrom calc.ops import clamp\n\n\nclass T(unittest.TestCase):\n    def test_high(self):\n        self.assertEqual(clamp(9, 0, 3), 3)\n",
    );
    let mut args = honest_args(&fx, &wt);
    claim(&mut args, "calc.check.T.test_high");
    let reply = fx.client().open_pr("run-claim", args).unwrap();
    let err = refusal(&reply);
    assert_eq!(err.code.as_str(), "POLICY_VIOLATION", "{}", err.message);
    assert_eq!(
        err.details["offending"], "test_evidence.before_failing_test",
        "{}",
        err.message
    );
    assert!(
        err.message.contains("calc.check.T.test_high") && err.message.contains("calc/check.py"),
        "{}",
        err.message
    );
}

/// The same under unittest: the transcript on standard error (which unittest does not
/// capture), then `os._exit(0)`. unittest writes no report of its own; the broker runs it
/// through its reporter, which writes one only once the run has finished.
#[test]
fn a_fake_unittest_transcript_and_os_exit_is_not_queued() {
    let mut fx = Fixture::new();
    fx.start();
    let wt = fx.register("run-fake-unittest");
    let fake = r#"import os, sys
sys.stderr.write(
    "test_clamp_high (tests.test_clamp_high.TestClampHigh.test_clamp_high) ... ok\n"
    "test_clamp_low (tests.test_ops.TestClampLow.test_clamp_low) ... ok\n"
    "test_identity (tests.test_ops.TestClampLow.test_identity) ... ok\n"
    "\n----------------------------------------------------------------------\n"
    "Ran 3 tests in 0.001s\n\nOK\n"
)
sys.stderr.flush()
os._exit(0)


def clamp(x, lo, hi):
    return x
"#;
    write(&wt, "calc/ops.py", fake);
    write(&wt, "tests/test_clamp_high.py", NEW_TEST);
    let reply = fx
        .client()
        .open_pr("run-fake-unittest", honest_args(&fx, &wt))
        .unwrap();
    let err = refusal(&reply);
    assert_eq!(err.code.as_str(), "POLICY_VIOLATION", "{}", err.message);
    assert_eq!(err.details["offending"], "witness_run", "{}", err.message);
    assert!(
        err.message.contains("patched_selected") && err.message.contains("wrote no report"),
        "{}",
        err.message
    );
}

/// pytest names that are hard to map between the output and the report (parameter ids holding
/// `::`, `/`, spaces and brackets, nested classes, skips, expected failures) on an honest fix:
/// queued, so the report agreed with the output in every step.
#[test]
fn an_honest_pytest_fix_with_awkward_test_names_is_queued() {
    let tests = "import pytest\n\nfrom calc.ops import clamp\n\n\n\
        @pytest.mark.parametrize(\"x\", [\"a/b.py\", \"c::d\", \"e f\", \"[g]\", 1])\n\
        def test_param(x):\n    assert clamp(0, 0, 3) == 0\n\n\n\
        class TestOuter:\n    class TestInner:\n        def test_nested(self):\n            assert clamp(-1, 0, 3) == 0\n\n\n\
        @pytest.mark.skip(reason=\"not here\")\ndef test_skipped():\n    pass\n\n\n\
        @pytest.mark.xfail(reason=\"known\")\ndef test_xfail():\n    assert False\n";
    let mut fx = pytest_fixture(vec![
        ("calc/__init__.py", String::new()),
        ("calc/ops.py", crate::harness::BUGGY_OPS.to_owned()),
        ("tests/__init__.py", String::new()),
        ("tests/test_ops.py", EXISTING_TEST.to_owned()),
        ("tests/test_names.py", tests.to_owned()),
    ]);
    fx.start();
    let wt = register_pytest(&fx, "run-names");
    apply_fix(&wt);
    let mut args = honest_args(&fx, &wt);
    claim(&mut args, PYTEST_NEW_TEST);
    let reply = fx.client().open_pr("run-names", args).unwrap();
    assert!(matches!(reply, BrokerReply::Queued { .. }), "{reply:?}");
}

/// The change's source rebinds the framework's assertion in a way no line rule reads: the
/// pinned tests import it and "pass". The runner's guard, in the test process, finds
/// `assertEqual` is not unittest's own.
#[test]
fn a_source_package_that_rebinds_unittest_s_assertions_is_not_queued() {
    let mut fx = Fixture::new();
    fx.start();
    let wt = fx.register("run-rebind");
    write(
        &wt,
        "calc/__init__.py",
        "import unittest as u\n\nsetattr(getattr(u, 'Test' + 'Case'), 'assert' + 'Equal', lambda *a, **k: None)\n",
    );
    write(&wt, "tests/test_clamp_high.py", NEW_TEST);
    let reply = fx
        .client()
        .open_pr("run-rebind", honest_args(&fx, &wt))
        .unwrap();
    let err = refusal(&reply);
    assert_eq!(err.code.as_str(), "POLICY_VIOLATION", "{}", err.message);
    assert!(
        err.message
            .contains("unittest.TestCase.assertEqual is not the framework's own"),
        "{}",
        err.message
    );
}

/// The change's source puts a hollow module into `sys.modules` under a pinned test module's
/// name, so the pinned file never runs while its tests "pass" and the fix breaks what they
/// checked. The runner's guard finds the module was not loaded from its own file.
#[test]
fn a_hollow_test_module_planted_in_sys_modules_is_not_queued() {
    let mut fx = Fixture::new();
    fx.start();
    let wt = fx.register("run-hollow");
    // Fixes the claimed case and breaks the low bound the pinned tests check.
    write(
        &wt,
        "calc/ops.py",
        "def clamp(x, lo, hi):\n    \"\"\"Clamp x into [lo, hi].\"\"\"\n    return min(x, hi)\n",
    );
    write(
        &wt,
        "calc/__init__.py",
        r#"import sys, types, unittest

_hollow = types.ModuleType("tests.test_ops")


class TestClampLow(unittest.TestCase):
    def test_clamp_low(self):
        pass

    def test_identity(self):
        pass


TestClampLow.__module__ = "tests.test_ops"
_hollow.TestClampLow = TestClampLow
sys.modules["tests.test_ops"] = _hollow
"#,
    );
    write(&wt, "tests/test_clamp_high.py", NEW_TEST);
    let reply = fx
        .client()
        .open_pr("run-hollow", honest_args(&fx, &wt))
        .unwrap();
    let err = refusal(&reply);
    assert_eq!(err.code.as_str(), "POLICY_VIOLATION", "{}", err.message);
    assert!(
        err.message
            .contains("module tests.test_ops was not loaded from a file")
            && err
                .message
                .contains("calc/__init__.py, a source file the change touched"),
        "{}",
        err.message
    );
}

/// The plain spelling of the same attack is refused before any witness runs, naming the
/// file, the line and the rule.
#[test]
fn source_that_rebinds_the_test_framework_is_refused_at_the_policy() {
    let mut fx = Fixture::new();
    fx.start();
    let wt = fx.register("run-rebind-plain");
    apply_fix(&wt);
    write(
        &wt,
        "calc/__init__.py",
        "import unittest\n\nunittest.TestCase.assertEqual = lambda self, first, second, msg=None: None\n",
    );
    let reply = fx
        .client()
        .open_pr("run-rebind-plain", honest_args(&fx, &wt))
        .unwrap();
    let err = refusal(&reply);
    assert_eq!(err.code.as_str(), "POLICY_VIOLATION", "{}", err.message);
    assert!(
        err.message.contains("source-rebinds-the-test-framework")
            && err.message.contains("calc/__init__.py"),
        "{}",
        err.message
    );
    assert!(outputs(err).is_empty(), "no witness ran: {:?}", err.details);
}

/// Source that rewires imports or patches a module it imports when loaded may be an honest
/// shim: the item is queued, flagged with the rule and the line, and routed to a senior
/// approver (two approvals, one senior).
#[test]
fn source_that_rewires_imports_is_queued_for_a_senior_approver() {
    let mut fx = Fixture::new();
    fx.start();
    let wt = fx.register("run-shim");
    apply_fix(&wt);
    write(
        &wt,
        "calc/__init__.py",
        "import sys\n\nsys.modules.setdefault('calc.compat', sys.modules[__name__])\n",
    );
    let reply = fx
        .client()
        .open_pr("run-shim", honest_args(&fx, &wt))
        .unwrap();
    let BrokerReply::Queued { queue_id } = reply else {
        panic!("not queued: {reply:?}")
    };
    let out = fx.cli(&["show", &queue_id.to_string(), "--json"]);
    let view: Value = serde_json::from_slice(&out.stdout).unwrap();
    let flags = view["flags"].to_string();
    assert!(
        flags.contains("source-rewires-imports: calc/__init__.py:3:")
            && flags.contains("routed to a senior approver"),
        "{flags}"
    );
    assert!(
        view["risk"]["senior_routes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r == "policy:source-rewires-imports"),
        "{view}"
    );
    // One approval, even confirmed, leaves it queued.
    let approve = fx.cli(&[
        "approve",
        &queue_id.to_string(),
        "--by",
        "rev",
        "--confirm-risk",
        "--reason",
        "a compatibility alias",
    ]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&approve.stdout),
        String::from_utf8_lossy(&approve.stderr)
    );
    assert!(text.contains("senior"), "{text}");
    let view: Value =
        serde_json::from_slice(&fx.cli(&["show", &queue_id.to_string(), "--json"]).stdout).unwrap();
    assert_eq!(view["status"], "queued", "{view}");
}

/// A project whose only tests live in a Django-style `calc/tests.py`, a name no test pattern
/// of the policy matches (unittest's discovery collects it: `test*.py`).
fn django_style_fixture() -> Fixture {
    Fixture::with(django_style_fixture_options())
}

fn django_style_fixture_options() -> Options {
    Options {
        files: vec![
            ("calc/__init__.py", String::new()),
            ("calc/ops.py", crate::harness::BUGGY_OPS.to_owned()),
            ("calc/tests.py", EXISTING_TEST.to_owned()),
            ("tests/__init__.py", String::new()),
            ("README.md", "calc\n".to_owned()),
        ],
        ..Options::default()
    }
}

/// Submit the first attack of issue 54 as run `run_id`: the source breaks `test_clamp_low`
/// while the change weakens its assertion in `calc/tests.py`.
fn weaken_django_module(fx: &Fixture, run_id: &str) -> BrokerReply {
    let wt = fx.register(run_id);
    write(&wt, "calc/ops.py", UPPER_ONLY);
    write(&wt, "tests/test_clamp_high.py", NEW_TEST);
    write(&wt, "calc/tests.py", weakened_test());
    fx.client().open_pr(run_id, honest_args(fx, &wt)).unwrap()
}

/// The first attack of issue 54: the source breaks `test_clamp_low` while the change weakens
/// its assertion in `calc/tests.py`. The base inventory names the file's tests, so the witness
/// runs it as pinned, and the regression is caught.
#[test]
fn a_weakened_test_module_the_runner_collected_at_base_runs_as_pinned() {
    let mut fx = django_style_fixture();
    fx.start();
    let reply = weaken_django_module(&fx, "run-tests-py");
    let err = refusal(&reply);
    assert_eq!(err.code.as_str(), "POLICY_VIOLATION", "{}", err.message);
    assert_eq!(err.details["offending"], "witness_run", "{:?}", err.details);
    assert!(
        err.message
            .contains("calc.tests.TestClampLow.test_clamp_low"),
        "{}",
        err.message
    );
    // The weakened copy is named as set aside: the pinned one is what ran.
    assert!(
        err.details.to_string().contains("calc/tests.py"),
        "{:?}",
        err.details
    );
    let patched = step_text(err, "patched_full");
    assert!(patched.contains("test_clamp_low"), "{patched}");
}

/// An honest fix that also edits such a module is queued, and the approver reads that the
/// file's edits were not what ran.
#[test]
fn an_edit_to_a_test_module_found_by_the_inventory_is_flagged() {
    let mut fx = django_style_fixture();
    fx.start();
    let wt = fx.register("run-tests-py-honest");
    apply_fix(&wt);
    write(
        &wt,
        "calc/tests.py",
        EXISTING_TEST.replace("        self.assertEqual(clamp(2, 0, 3), 2)\n", ""),
    );
    let reply = fx
        .client()
        .open_pr("run-tests-py-honest", honest_args(&fx, &wt))
        .unwrap();
    let BrokerReply::Queued { queue_id } = reply else {
        panic!("not queued: {reply:?}")
    };
    let out = fx.cli(&["show", &queue_id.to_string(), "--json"]);
    let view: Value = serde_json::from_slice(&out.stdout).unwrap();
    let flags = view["flags"].to_string();
    assert!(
        flags.contains("test-file-by-inventory: calc/tests.py")
            && flags.contains("lines the change removes from it: 1; adds: 0"),
        "{flags}"
    );
    // The patched full run ran the pinned module's two tests.
    let patched = view["witness"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step"] == "patched_full")
        .unwrap()
        .to_string();
    assert!(
        patched.contains("calc.tests.TestClampLow.test_identity"),
        "{patched}"
    );
}

/// pytest runs through airlock's guard too: a source package that rebinds pytest's own
/// `fail` and unittest's assertion in a way no line rule reads is found in the test process,
/// and the honest pytest fix beside it stays queued (`a_planted_pyc`'s and the others' pytest
/// runs go through the same guard).
#[test]
fn pytest_s_guard_finds_the_framework_rebound_by_the_change_s_source() {
    let mut fx = pytest_fixture(Vec::new());
    fx.start();
    let wt = register_pytest(&fx, "run-pytest-rebind");
    apply_fix(&wt);
    write(
        &wt,
        "calc/__init__.py",
        "import importlib as i, unittest as u\n\nsetattr(getattr(u, 'Test' + 'Case'), 'assert' + 'Equal', lambda *a, **k: None)\nsetattr(i.import_module('_pytest.' + 'outcomes'), 'fa' + 'il', lambda *a, **k: None)\n",
    );
    let mut args = honest_args(&fx, &wt);
    claim(&mut args, PYTEST_NEW_TEST);
    let reply = fx.client().open_pr("run-pytest-rebind", args).unwrap();
    let err = refusal(&reply);
    assert_eq!(err.code.as_str(), "POLICY_VIOLATION", "{}", err.message);
    assert!(
        err.message
            .contains("unittest.TestCase.assertEqual is not the framework's own")
            && err
                .message
                .contains("_pytest.outcomes.fail is not the framework's own"),
        "{}",
        err.message
    );
    // The executed command names the guard; the command to rerun is pytest's own.
    let step = outputs(err).into_iter().next().unwrap();
    assert!(
        step["argv"].to_string().contains("airlock's pytest guard"),
        "{step}"
    );
    assert_eq!(step["command"][2], "pytest", "{step}");

    let wt = register_pytest(&fx, "run-pytest-honest");
    apply_fix(&wt);
    let mut args = honest_args(&fx, &wt);
    claim(&mut args, PYTEST_NEW_TEST);
    let reply = fx.client().open_pr("run-pytest-honest", args).unwrap();
    assert!(matches!(reply, BrokerReply::Queued { .. }), "{reply:?}");
}

/// With a second witness slot free, each selected step runs beside its full step, on a tree and
/// at a path of its own: the honest fix is still queued with its four steps, and the weakened
/// Django-style module is still run as pinned and refused.
#[test]
fn steps_run_two_at_once_with_a_spare_slot_and_judge_the_same() {
    let mut fx = Fixture::with(Options {
        extra_config: "witness_concurrency = 2".to_owned(),
        ..Options::default()
    });
    fx.start();
    let id = crate::harness::queue_honest(&fx, "run-two-at-once");
    let view: Value =
        serde_json::from_slice(&fx.cli(&["show", &id.to_string(), "--json"]).stdout).unwrap();
    let steps: Vec<&str> = view["witness"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["step"].as_str().unwrap())
        .collect();
    assert_eq!(
        steps,
        [
            "pinned_selected",
            "base_full",
            "patched_selected",
            "patched_full"
        ]
    );

    let mut fx = Fixture::with(Options {
        extra_config: "witness_concurrency = 2".to_owned(),
        ..django_style_fixture_options()
    });
    fx.start();
    let reply = weaken_django_module(&fx, "run-tests-py-two");
    let err = refusal(&reply);
    assert!(
        err.message
            .contains("calc.tests.TestClampLow.test_clamp_low"),
        "{}",
        err.message
    );
}
