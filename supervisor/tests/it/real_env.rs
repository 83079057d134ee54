//! What a real repository needs: the test environment declared in `[tests]` (grants, variables,
//! a prepare step with its links), edits of files larger than the read cap, and full runs that
//! are green only when the base inventory ran again.

use crate::fixture::*;
use airlock_supervisor::RunEnd;
use serde_json::json;

const NEW_TEST: &str = "import unittest\n\nfrom calc.ops import add\n\n\nclass AddTest(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n";

/// A `tests/__init__.py` whose `load_tests` hides every test but the new one.
const HIDING_INIT: &str = "import unittest\n\n\ndef load_tests(loader, tests, pattern):\n    return loader.loadTestsFromName(\"tests.test_add\")\n";

fn escalated(report: &airlock_supervisor::runner::RunReport) -> bool {
    matches!(
        &report.end,
        RunEnd::Finished {
            pr_queued: false,
            ..
        }
    )
}

pub fn a_full_run_that_runs_only_the_new_test_is_not_green() {
    let fx = Fixture::new();
    let config = fx.config("max_turns = 10");
    let issue = fx.issue(ready_issue());
    let model = fx.script(&[
        json!({"tool_calls": [{"name": "write_file", "arguments": {"path": "tests/test_add.py", "content": NEW_TEST}}],
               "expect_last_message_contains": ["## Tests at base", "1 tests at base: 1 pass, 0 fail, 0 skipped"]}),
        call("edit_file", json!({"path": "calc/ops.py", "old_text": "return a - b", "new_text": "return a + b"})),
        call("write_file", json!({"path": "tests/__init__.py", "content": HIDING_INIT})),
        json!({"tool_calls": [{"name": "run_tests", "arguments": {}}],
               "expect_contains": "wrote tests/__init__.py"}),
        json!({"tool_calls": [{"name": "open_pr", "arguments": {"issue_id": "CALC-7"}}],
               "expect_contains": ["full run: red (exit code 0)", "did not run: tests.test_ops.MulTest.test_mul"]}),
        json!({"text": outcome("escalate", 0.2).to_string(),
               "expect_contains": "no green full run", "expect_tool_error": true}),
    ]);
    let broker = BrokerStub::default();
    let report = fx.run(&issue, &model, &config, &broker);
    assert_eq!(report.model_finish_problem, None);
    assert!(escalated(&report), "{:?}", report.end);
    assert!(broker.submitted.lock().unwrap().is_empty());
    let t = trajectory(&report);
    let baseline = &kinds(&t, "test_baseline")[0];
    assert_eq!(
        baseline["inventory"]["tests"]["tests.test_ops.MulTest.test_mul"],
        "passed"
    );
    let verdicts = kinds(&t, "full_run_verdict");
    assert_eq!(
        verdicts[0]["verdict"]["missing"],
        json!(["tests.test_ops.MulTest.test_mul"])
    );
}

pub fn edit_file_rewrites_a_file_larger_than_the_read_cap() {
    let mut big = String::from("\"\"\"A large module.\"\"\"\n\n");
    for i in 0..700 {
        big.push_str(&format!("def f{i}(x):\n    return x + {i}\n\n"));
    }
    assert!(big.len() > 10 * 1024);
    let fx = Fixture::with_files(&[("calc/big.py", big.clone())]);
    let config = fx.config("max_turns = 6");
    let issue = fx.issue(ready_issue());
    let model = fx.script(&[
        call(
            "edit_file",
            json!({"path": "calc/big.py", "old_text": "def f650(x):\n    return x + 650\n", "new_text": "def f650(x):\n    return x + 651\n"}),
        ),
        json!({"tool_calls": [{"name": "read_file", "arguments": {"path": "calc/big.py", "start_line": 1940, "end_line": 2000}}],
               "expect_contains": ["wrote calc/big.py", "edited lines 1953-1954", "1954|     return x + 651", "1951| "],
               "expect_tool_error": false}),
        json!({"text": outcome("escalate", 0.2).to_string(),
               "expect_contains": "1954|     return x + 651"}),
    ]);
    let report = fx.run(&issue, &model, &config, &BrokerStub::default());
    assert_eq!(report.model_finish_problem, None);
    let after = std::fs::read_to_string(report.run_dir.join("worktree/calc/big.py")).unwrap();
    assert_eq!(
        after,
        big.replace("    return x + 650\n", "    return x + 651\n")
    );
}

pub fn prepare_builds_an_environment_that_every_test_run_gets_read_only() {
    let fx = Fixture::new();
    let tests = "env = { PYTHONPATH = \"{env}/site\", GREETING = \"hello\" }\n\
                 [tests.prepare]\n\
                 command = [\"sh\", \"-c\", \"mkdir -p {env}/site/helper && echo 'VALUE = 42' > {env}/site/helper/__init__.py && mkdir node_modules && echo x > node_modules/marker\"]\n\
                 inputs = [\"README.md\"]\n\
                 links = [\"node_modules\"]\n";
    let config = fx.config_with_tests(tests, "max_turns = 6");
    let issue = fx.issue(ready_issue());
    let env_test = "import os\nimport unittest\n\nimport helper\n\n\nclass EnvTest(unittest.TestCase):\n    def test_env(self):\n        self.assertEqual(helper.VALUE, 42)\n        self.assertEqual(os.environ[\"GREETING\"], \"hello\")\n        self.assertEqual(os.environ[\"CI\"], \"true\")\n        with open(\"node_modules/marker\") as f:\n            self.assertEqual(f.read(), \"x\\n\")\n        with self.assertRaises(OSError):\n            open(os.path.join(os.environ[\"PYTHONPATH\"], \"planted.py\"), \"w\")\n        with self.assertRaises(OSError):\n            open(\"node_modules/planted\", \"w\")\n";
    let script = |fx: &Fixture| {
        fx.script(&[
            call(
                "write_file",
                json!({"path": "tests/test_env.py", "content": env_test}),
            ),
            call("run_tests", json!({"selector": "tests.test_env"})),
            json!({"text": outcome("escalate", 0.2).to_string(),
                   "expect_contains": "selected run: green", "expect_tool_error": false}),
        ])
    };
    let report = fx.run(&issue, &script(&fx), &config, &BrokerStub::default());
    assert_eq!(report.model_finish_problem, None);
    let t = trajectory(&report);
    let baseline = &kinds(&t, "test_baseline")[0];
    assert_eq!(baseline["prepare"]["exit_code"], 0);
    assert_eq!(baseline["prepare"]["reused"], false);
    assert!(
        !report.run_dir.join("worktree/node_modules").exists(),
        "prepare wrote into the worktree"
    );
    // A second run on the same commit and inputs reuses the environment.
    std::fs::remove_dir_all(fx.path("runs")).unwrap();
    let broker = BrokerStub::default();
    let report = fx.run(&issue, &script(&fx), &config, &broker);
    assert_eq!(report.model_finish_problem, None);
    let t = trajectory(&report);
    assert_eq!(kinds(&t, "test_baseline")[0]["prepare"]["reused"], true);
    let registered = broker.registered.lock().unwrap()[0].clone();
    assert_eq!(registered.test_env.env["GREETING"], "hello");
    assert_eq!(registered.test_env.links[0].path, "node_modules");
}

fn setup_error(fx: &Fixture, config: &std::path::Path) -> String {
    let issue = fx.issue(ready_issue());
    let model = fx.script(&[json!({"text": outcome("escalate", 0.2).to_string()})]);
    let err = match fx.try_run(&issue, &model, config, &BrokerStub::default()) {
        Ok(r) => panic!("the run started: {:?}", r.end),
        Err(e) => e.to_string(),
    };
    if fx.path("audit.jsonl").exists() {
        assert!(
            !fx.audit_kinds().iter().any(|k| k == "model_call"),
            "a model call was made before the set-up error"
        );
    }
    err
}

pub fn a_failed_prepare_stops_the_run_before_any_model_call() {
    let fx = Fixture::new();
    let config = fx.config_with_tests(
        "[tests.prepare]\ncommand = [\"sh\", \"-c\", \"echo no such index >&2; exit 3\"]\n",
        "",
    );
    let err = setup_error(&fx, &config);
    assert!(err.contains("tests.prepare.command"), "{err}");
    assert!(err.contains("exited with 3"), "{err}");
    assert!(err.contains("no such index"), "{err}");
}

pub fn bad_test_settings_are_named_before_any_model_call() {
    let fx = Fixture::new();
    let config = fx.config_with_tests("ro = [\"/nonexistent/venv\"]\n", "");
    let err = setup_error(&fx, &config);
    assert!(
        err.contains("tests.ro[0]") && err.contains("does not exist"),
        "{err}"
    );

    let venv = fx.path("venv/bin");
    std::fs::create_dir_all(&venv).unwrap();
    std::os::unix::fs::symlink("/usr/bin/python3", venv.join("python")).unwrap();
    let text = format!(
        "[tests]\ncommand = [\"{}\", \"-m\", \"unittest\", \"-v\"]\n\n[paths]\nruns_root = \"runs\"\naudit_log = \"audit.jsonl\"\ncache_dir = \"cache\"\nindex_dir = \"index\"\n",
        venv.join("python").display()
    );
    std::fs::write(&config, text).unwrap();
    let err = setup_error(&fx, &config);
    assert!(err.contains("not found inside the sandbox"), "{err}");
    assert!(
        err.contains(&format!("ro = [\"{}\"]", fx.path("venv").display())),
        "{err}"
    );

    std::fs::write(
        &config,
        "[tests]\ncommand = [\"python3\", \"-m\", \"pytest\", \"-rA\"]\nrunner = \"unittest\"\n",
    )
    .unwrap();
    let err = setup_error(&fx, &config);
    assert!(err.contains("tests.runner"), "{err}");
    assert!(err.contains("runs pytest"), "{err}");

    // A unittest command over a repository whose tests it cannot find: no inventory.
    let empty = Fixture::with_files(&[(
        "tests/test_ops.py",
        "def test_x():\n    assert True\n".into(),
    )]);
    let config = empty.config("");
    let err = setup_error(&empty, &config);
    assert!(err.contains("reported no test"), "{err}");
}
