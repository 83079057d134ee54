use super::*;

const UNITTEST_FAIL: &str = "\
test_add (tests.test_calc.TestCalc.test_add) ... ok
test_div (tests.test_calc.TestCalc.test_div) ... FAIL
test_old (tests.test_calc.TestCalc) ... skipped 'later'

======================================================================
FAIL: test_div (tests.test_calc.TestCalc.test_div)
----------------------------------------------------------------------
Traceback (most recent call last):
AssertionError: 1 != 2

----------------------------------------------------------------------
Ran 3 tests in 0.001s

FAILED (failures=1, skipped=1)
";

#[test]
fn unittest_verbose_and_failure_headers() {
    let run = parse(TestRunner::Unittest, UNITTEST_FAIL);
    assert!(run.summary_seen);
    assert_eq!(
        run.tests["tests.test_calc.TestCalc.test_add"],
        TestStatus::Passed
    );
    assert_eq!(
        run.tests["tests.test_calc.TestCalc.test_div"],
        TestStatus::Failed
    );
    assert_eq!(
        run.tests["tests.test_calc.TestCalc.test_old"],
        TestStatus::Skipped
    );
    assert_eq!(
        run.status_of("tests/test_calc.py::TestCalc::test_div"),
        Some(TestStatus::Failed)
    );
    assert_eq!(run.status_of("TestCalc.test_add"), Some(TestStatus::Passed));
    assert!(grade_must_fail(&run, Some(1), "tests.test_calc.TestCalc.test_div").is_ok());
    assert!(!grade_suite_green(&run, Some(1)).is_ok());
}

#[test]
fn unittest_tests_with_descriptions_and_shared_names() {
    // A docstring puts the description on the line after the name; data-driven tests share one
    // name and differ by their description (idna's UTS 46 table: 6k rows, one `runTest`).
    let out = "\
test_plain (tests.test_a.A.test_plain) ... ok
test_documented (tests.test_a.A.test_documented)
Adds two numbers. ... ok
runTest (tests.test_t.Row.runTest)
table line 1: a ... ok
runTest (tests.test_t.Row.runTest)
table line 2: b ... FAIL
runTest (tests.test_t.Row.runTest)
table line 3: c ... skipped 'not here'

======================================================================
FAIL: runTest (tests.test_t.Row.runTest)
table line 2: b
----------------------------------------------------------------------
Traceback (most recent call last):
AssertionError

----------------------------------------------------------------------
Ran 5 tests in 0.001s

FAILED (failures=1, skipped=1)
";
    let run = parse(TestRunner::Unittest, out);
    let names: Vec<(&str, TestStatus)> = run.tests.iter().map(|(n, s)| (n.as_str(), *s)).collect();
    assert_eq!(
        names,
        [
            ("tests.test_a.A.test_documented", TestStatus::Passed),
            ("tests.test_a.A.test_plain", TestStatus::Passed),
            (
                "tests.test_t.Row.runTest [table line 1: a]",
                TestStatus::Passed
            ),
            (
                "tests.test_t.Row.runTest [table line 2: b]",
                TestStatus::Failed
            ),
            (
                "tests.test_t.Row.runTest [table line 3: c]",
                TestStatus::Skipped
            ),
        ]
    );
    // A documented test that fails is named plainly in its verbose line and its header alike.
    let documented_fail = "\
test_documented (tests.test_a.A.test_documented)
Adds two numbers. ... FAIL

======================================================================
FAIL: test_documented (tests.test_a.A.test_documented)
Adds two numbers.
----------------------------------------------------------------------
Ran 1 test in 0.001s

FAILED (failures=1)
";
    let run = parse(TestRunner::Unittest, documented_fail);
    assert_eq!(run.tests.len(), 1, "{:?}", run.tests);
    assert!(grade_must_fail(&run, Some(1), "tests.test_a.A.test_documented").is_ok());
    // A patch that prints its own `ok` for a documented failing test does not hide it: the
    // plain name no longer matches a single report.
    let forged =
        format!("test_documented (tests.test_a.A.test_documented) ... ok\n{documented_fail}");
    let run = parse(TestRunner::Unittest, &forged);
    assert!(!grade_must_pass(&run, Some(1), "tests.test_a.A.test_documented").is_ok());
}

#[test]
fn fake_passed_line_does_not_hide_the_real_failure() {
    let fake = format!("test_div (tests.test_calc.TestCalc.test_div) ... ok\n{UNITTEST_FAIL}");
    let run = parse(TestRunner::Unittest, &fake);
    assert_eq!(
        run.status_of("tests.test_calc.TestCalc.test_div"),
        Some(TestStatus::Failed)
    );
    assert!(!grade_must_pass(&run, Some(1), "tests.test_calc.TestCalc.test_div").is_ok());
}

#[test]
fn exit_code_and_results_must_agree() {
    let only_fake = "test_div (tests.test_calc.TestCalc.test_div) ... ok\n";
    let run = parse(TestRunner::Unittest, only_fake);
    assert!(matches!(
        grade_suite_green(&run, Some(1)),
        Grade::Invalid(_)
    ));
    let nothing = parse(TestRunner::Unittest, "python3: can't open file\n");
    assert!(matches!(
        grade_suite_green(&nothing, Some(0)),
        Grade::Invalid(_)
    ));
    assert!(matches!(
        grade_must_fail(&nothing, Some(2), "a.b"),
        Grade::Invalid(_)
    ));
    assert!(matches!(
        grade_suite_green(&nothing, None),
        Grade::Invalid(_)
    ));
}

#[test]
fn skipped_fail_to_pass_counts_as_failed() {
    let run = parse(
        TestRunner::Unittest,
        "test_x (m.C.test_x) ... skipped 'no'\n\nRan 1 test in 0.0s\n\nOK (skipped=1)\n",
    );
    assert!(matches!(
        grade_must_pass(&run, Some(0), "m.C.test_x"),
        Grade::NotOk(_)
    ));
}

#[test]
fn already_passing_test_is_not_fail_to_pass() {
    let run = parse(
        TestRunner::Unittest,
        "test_x (m.C.test_x) ... ok\n\nRan 1 test in 0.0s\n\nOK\n",
    );
    assert!(matches!(
        grade_must_fail(&run, Some(0), "m.C.test_x"),
        Grade::NotOk(_)
    ));
}

#[test]
fn unittest_import_error_of_new_module_counts_as_failing() {
    let out = "\
ERROR: tests.test_new (unittest.loader._FailedTest.tests.test_new)
----------------------------------------------------------------------
ImportError: cannot import name 'clamp'

Ran 1 test in 0.000s

FAILED (errors=1)
";
    let run = parse(TestRunner::Unittest, out);
    assert!(grade_must_fail(&run, Some(1), "tests.test_new.TestClamp.test_clamp").is_ok());
    // Selected by name, unittest reports only the module's last component.
    let selected = "test_new (unittest.loader._FailedTest.test_new) ... ERROR\n\nRan 1 test in 0.000s\n\nFAILED (errors=1)\n";
    let run = parse(TestRunner::Unittest, selected);
    assert!(grade_must_fail(&run, Some(1), "tests.test_new.TestClamp.test_clamp").is_ok());
    assert!(!grade_must_fail(&run, Some(1), "tests.test_other.TestClamp.test_clamp").is_ok());
}

#[test]
fn pytest_summary_and_verbose() {
    let out = "\
tests/test_a.py::test_one PASSED                                        [ 50%]
tests/test_a.py::TestK::test_two FAILED                                 [100%]
=========================== short test summary info ============================
PASSED tests/test_a.py::test_one
FAILED tests/test_a.py::TestK::test_two - assert 1 == 2
SKIPPED [1] tests/test_b.py:3: unconditional skip
========================= 1 failed, 1 passed in 0.02s ==========================
";
    let run = parse(TestRunner::Pytest, out);
    assert!(run.summary_seen);
    assert_eq!(run.tests.len(), 2);
    assert_eq!(
        run.status_of("tests/test_a.py::TestK::test_two"),
        Some(TestStatus::Failed)
    );
    assert_eq!(
        run.status_of("tests/test_a.py::test_one"),
        Some(TestStatus::Passed)
    );
    assert!(grade_must_fail(&run, Some(1), "tests/test_a.py::TestK::test_two").is_ok());
}

#[test]
fn pytest_counts_what_it_names_no_test_of_and_says_why_tests_failed() {
    let out = "\
=========================== short test summary info ============================
PASSED tests/test_a.py::test_one
FAILED tests/test_a.py::test_two - assert 1 == 2
ERROR tests/test_c.py::test_conn - ConnectionRefusedError: [Errno 111] refused
XFAIL tests/test_a.py::test_later - not yet
XPASS tests/test_a.py::test_lucky
SKIPPED [15] tests/test_b.py:3: needs a GPU
== 1 failed, 1 passed, 15 skipped, 1 xfailed, 1 xpassed, 2 warnings, 1 error in 0.52s ==
";
    let run = parse(TestRunner::Pytest, out);
    assert_eq!(run.counts["skipped"], 15);
    assert_eq!(run.counts["errors"], 1);
    assert_eq!(run.counts["xfailed"], 1);
    assert!(!run.counts.contains_key("warnings"));
    assert_eq!(run.reasons["tests/test_a.py::test_two"], "assert 1 == 2");
    assert_eq!(
        run.reasons["tests/test_c.py::test_conn"],
        "ConnectionRefusedError: [Errno 111] refused"
    );
    assert!(!run.reasons.contains_key("tests/test_a.py::test_later"));
    let inventory = TestInventory::from_base_run(TestRunner::Pytest, &run, Some(1), None).unwrap();
    assert_eq!(
        inventory.breakdown(),
        "passed 1, failed 1, errors 1, skipped 15, xfailed 1, xpassed 1"
    );
    // Without the runner's summary line, the named tests are counted.
    let named = parse(
        TestRunner::Pytest,
        "PASSED t.py::a\nFAILED t.py::b\nERROR t.py::c\n",
    );
    let inventory =
        TestInventory::from_base_run(TestRunner::Pytest, &named, Some(1), None).unwrap();
    assert_eq!(
        inventory.breakdown(),
        "passed 1, failed 1, errors 1, skipped 0"
    );
}

#[test]
fn unittest_reasons_are_the_last_line_of_each_traceback() {
    let out = "\
test_a (pkg.t.T.test_a) ... FAIL
test_b (pkg.t.T.test_b) ... ERROR
test_c (pkg.t.T.test_c) ... ok

======================================================================
FAIL: test_a (pkg.t.T.test_a)
----------------------------------------------------------------------
Traceback (most recent call last):
  File \"/airlock/repo/pkg/t.py\", line 5, in test_a
    self.assertEqual(1, 2)
AssertionError: 1 != 2

======================================================================
ERROR: test_b (pkg.t.T.test_b)
----------------------------------------------------------------------
Traceback (most recent call last):
  File \"/airlock/repo/pkg/t.py\", line 8, in test_b
    import nothere
ModuleNotFoundError: No module named 'nothere'

----------------------------------------------------------------------
Ran 3 tests in 0.001s

FAILED (failures=1, errors=1)
";
    let run = parse(TestRunner::Unittest, out);
    assert_eq!(run.reasons["pkg.t.T.test_a"], "AssertionError: 1 != 2");
    assert_eq!(
        run.reasons["pkg.t.T.test_b"],
        "ModuleNotFoundError: No module named 'nothere'"
    );
    assert!(!run.reasons.contains_key("pkg.t.T.test_c"));
    let inventory =
        TestInventory::from_base_run(TestRunner::Unittest, &run, Some(1), None).unwrap();
    assert_eq!(
        inventory.breakdown(),
        "passed 1, failed 1, errors 1, skipped 0"
    );
    assert_eq!(hints(out).len(), 1);
}

#[test]
fn pytest_parameter_ids_with_spaces_are_whole() {
    // sqlfluff and astroid parametrise with SQL and source text: ids hold spaces (and `-`).
    let out = "\
test/a_test.py::test_parse[select 1 from t] PASSED                       [ 33%]
test/a_test.py::test_parse[a - b] FAILED                                 [ 66%]
test/a_test.py::test_plain PASSED                                        [100%]
=========================== short test summary info ============================
PASSED test/a_test.py::test_parse[select 1 from t]
FAILED test/a_test.py::test_parse[a - b] - AssertionError: [1] - [2]
PASSED test/a_test.py::test_plain
========================= 1 failed, 2 passed in 0.02s ==========================
";
    let run = parse(TestRunner::Pytest, out);
    let names: Vec<&str> = run.tests.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "test/a_test.py::test_parse[a - b]",
            "test/a_test.py::test_parse[select 1 from t]",
            "test/a_test.py::test_plain",
        ]
    );
    assert_eq!(
        run.tests["test/a_test.py::test_parse[a - b]"],
        TestStatus::Failed
    );
    assert!(grade_must_fail(&run, Some(1), "test/a_test.py::test_parse[a - b]").is_ok());
}

#[test]
fn cargo_test_lines() {
    let out = "\
running 3 tests
test parse::tests::empty ... ok
test parse::tests::long ... FAILED
test slow ... ignored, needs network

failures:
    parse::tests::long

test result: FAILED. 1 passed; 1 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.00s
";
    let run = parse(TestRunner::Cargo, out);
    assert!(run.summary_seen);
    assert_eq!(run.tests["parse::tests::empty"], TestStatus::Passed);
    assert_eq!(run.tests["parse::tests::long"], TestStatus::Failed);
    assert_eq!(run.tests["slow"], TestStatus::Skipped);
    assert_eq!(
        run.status_of("parse::tests::long"),
        Some(TestStatus::Failed)
    );
}

#[test]
fn go_test_lines() {
    let out = "\
=== RUN   TestAdd
--- PASS: TestAdd (0.00s)
=== RUN   TestDiv
    --- FAIL: TestDiv/zero (0.00s)
--- FAIL: TestDiv (0.00s)
--- SKIP: TestLater (0.00s)
FAIL
FAIL\texample.com/calc\t0.002s
";
    let run = parse(TestRunner::Go, out);
    assert!(run.summary_seen);
    assert_eq!(run.tests["TestAdd"], TestStatus::Passed);
    assert_eq!(run.tests["TestDiv/zero"], TestStatus::Failed);
    assert_eq!(run.tests["TestLater"], TestStatus::Skipped);
    assert!(grade_must_fail(&run, Some(1), "TestDiv").is_ok());
}

#[test]
fn jest_names_carry_their_file_and_describe_blocks() {
    // As jest prints without a terminal: the same title in two files and two blocks, nested
    // blocks, then the failure details (whose lines are neither tests nor blocks).
    let jest = "\
PASS src/addProp.test.ts
  data first
    ✓ addProp (1 ms)
  data last
    ✓ addProp
FAIL src/equals.test.ts (5.2 s)
  equals
    maps
      ✕ different values (2 ms)
    ✓ scalars
  ✓ top level

  ● equals › maps › different values

    expect(received).toBe(expected)

Tests:       1 failed, 4 passed, 5 total
";
    let run = parse(TestRunner::Jest, jest);
    let names: Vec<&str> = run.tests.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "src/addProp.test.ts > data first > addProp",
            "src/addProp.test.ts > data last > addProp",
            "src/equals.test.ts > equals > maps > different values",
            "src/equals.test.ts > equals > scalars",
            "src/equals.test.ts > top level",
        ]
    );
    assert_eq!(
        run.status_of("equals maps different values"),
        Some(TestStatus::Failed)
    );
    assert!(grade_must_fail(&run, Some(1), "different values").is_ok());
}

#[test]
fn jest_and_vitest_lines() {
    let jest = "\
 PASS  src/sum.test.js
  sum
    ✓ adds numbers (3 ms)
    ✕ handles NaN (1 ms)
    ○ skipped later

Tests:       1 failed, 1 skipped, 1 passed, 3 total
";
    let run = parse(TestRunner::Jest, jest);
    assert!(run.summary_seen);
    assert_eq!(
        run.tests["src/sum.test.js > sum > adds numbers"],
        TestStatus::Passed
    );
    assert_eq!(
        run.tests["src/sum.test.js > sum > handles NaN"],
        TestStatus::Failed
    );
    assert_eq!(
        run.tests["src/sum.test.js > sum > later"],
        TestStatus::Skipped
    );
    // A claim may name the title alone, or the describe path and the title.
    assert_eq!(run.status_of("adds numbers"), Some(TestStatus::Passed));
    assert_eq!(run.status_of("sum adds numbers"), Some(TestStatus::Passed));
    let vitest = "\
 ✓ src/sum.test.ts > sum > adds numbers 2ms
 × src/sum.test.ts > sum > handles NaN 3ms
 Tests  1 failed | 1 passed (2)
";
    let run = parse(TestRunner::Vitest, vitest);
    assert!(run.summary_seen);
    assert_eq!(
        run.status_of("sum > adds numbers"),
        Some(TestStatus::Passed)
    );
    assert_eq!(run.status_of("handles NaN"), Some(TestStatus::Failed));
}
