//! The three example gates of `examples/gates/`, compiled from their WebAssembly text, loaded
//! with the examples they ship (which `load_gate` runs), then asked about requests of our own.

use airlock_gates::{
    Error, FileStatus, GateFile, GateSpec, Verdict, compile, examples::run_examples, load_gate,
    load_unchecked,
};

use super::*;

fn example_spec(name: &str) -> GateSpec {
    let dir = example_gate_dir(name);
    GateSpec {
        name: name.into(),
        component: dir.join("gate.wat"),
        examples: dir.join("examples.toml"),
        limits: test_limits(),
    }
}

fn migrations_examples() -> String {
    std::fs::read_to_string(example_gate_dir("migrations-route").join("examples.toml")).unwrap()
}

#[test]
fn every_example_gate_passes_its_own_examples_and_each_example_ran() {
    let engine = engine();
    for name in ["migrations-route", "changelog-required", "vendor-freeze"] {
        let spec = example_spec(name);
        let (gate, examples) = load_unchecked(&engine, &spec).unwrap();
        let outcomes = run_examples(&gate, &examples);
        assert!(outcomes.len() >= 4, "{name}: {outcomes:?}");
        for outcome in &outcomes {
            assert!(outcome.passed, "{name}: {outcome:?}");
            assert!(outcome.run.failure.is_none(), "{name}: {outcome:?}");
            assert!(outcome.run.fuel_consumed > 0, "{name}: {outcome:?}");
        }
        let loaded = load_gate(&engine, &spec).unwrap();
        assert!(
            loaded.digest().starts_with("sha256:"),
            "{}",
            loaded.digest()
        );
        assert_eq!(loaded.digest().len(), "sha256:".len() + 64);
    }
}

#[test]
fn migrations_are_routed_to_the_database_group() {
    let gate = load_gate(&engine(), &example_spec("migrations-route")).unwrap();
    let run = gate.check(&request(vec![GateFile {
        path: "api/migrations/0003_x.py".into(),
        status: FileStatus::Deleted,
        base: Some(b"x = 1\n".to_vec()),
        patched: None,
    }]));
    assert_eq!(run.verdict, Verdict::Route("database".into()));
    let run = gate.check(&request(vec![modified("api/models.py", "a\n", "b\n")]));
    assert_eq!(run.verdict, Verdict::Allow);
}

#[test]
fn the_changelog_gate_reads_both_trees() {
    let gate = load_gate(&engine(), &example_spec("changelog-required")).unwrap();
    // The base already has the function: the patched side has no more of them than the base,
    // which the gate can only know by reading /base.
    let same = "pub fn a() {}\npub fn b() {}\n";
    let run = gate.check(&request(vec![modified(
        "src/lib.rs",
        same,
        &format!("{same}// more\n"),
    )]));
    assert_eq!(run.verdict, Verdict::Allow);
    let run = gate.check(&request(vec![modified(
        "src/lib.rs",
        "pub fn a() {}\n",
        same,
    )]));
    assert_eq!(
        run.verdict,
        Verdict::Flag("a new public function in src/lib.rs without a CHANGELOG.md entry".into())
    );
    // A large file is read whole (several reads of the gate's buffer).
    let big = "// filler line\n".repeat(20_000);
    let run = gate.check(&request(vec![modified(
        "src/big.rs",
        &big,
        &format!("{big}pub fn late() {{}}\n"),
    )]));
    assert!(
        matches!(run.verdict, Verdict::Flag(ref m) if m.contains("src/big.rs")),
        "{run:?}"
    );
}

#[test]
fn the_vendor_freeze_denies_naming_the_file() {
    let gate = load_gate(&engine(), &example_spec("vendor-freeze")).unwrap();
    let run = gate.check(&request(vec![
        modified("src/a.rs", "a", "b"),
        modified("vendor/x/y.c", "a", "b"),
    ]));
    assert_eq!(
        run.verdict,
        Verdict::Deny(
            "vendor/ is frozen (vendored code changes upstream first); the diff changes vendor/x/y.c"
                .into()
        )
    );
    assert!(run.failure.is_none());
}

#[test]
fn a_gate_whose_examples_fail_does_not_load_and_the_error_names_example_and_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let examples = std::fs::read_to_string(example_gate_dir("vendor-freeze").join("examples.toml"))
        .unwrap()
        // The freeze's own example now expects a route, which the gate never gives.
        .replacen("verdict = \"deny\"", "verdict = \"route\"", 1);
    let text = std::fs::read_to_string(example_gate_dir("vendor-freeze").join("gate.wat")).unwrap();
    let spec = spec_in(dir.path(), "vendor-freeze", &text, &examples, test_limits());
    let err = load_gate(&engine(), &spec).unwrap_err();
    assert!(matches!(err, Error::ExampleFailed { .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.contains("gate vendor-freeze"), "{message}");
    assert!(
        message.contains("a change to a vendored file is denied"),
        "{message}"
    );
    assert!(message.contains("expects route("), "{message}");
    assert!(
        message.contains("answered deny(\"vendor/ is frozen"),
        "{message}"
    );
}

#[test]
fn a_gate_that_allows_everything_fails_its_match_examples() {
    let dir = tempfile::tempdir().unwrap();
    let examples = migrations_examples();
    let spec = spec_in(
        dir.path(),
        "lax",
        &allow_all_gate(),
        &examples,
        test_limits(),
    );
    let err = load_gate(&engine(), &spec).unwrap_err().to_string();
    assert!(err.contains("gate lax: example"), "{err}");
    assert!(
        err.contains("expects route(\"database\"), but the gate answered allow"),
        "{err}"
    );
}

#[test]
fn a_text_that_is_no_webassembly_and_a_module_that_is_no_gate_are_load_errors() {
    let dir = tempfile::tempdir().unwrap();
    let examples = migrations_examples();
    let spec = spec_in(
        dir.path(),
        "garbage",
        "(module (func",
        &examples,
        test_limits(),
    );
    let err = load_gate(&engine(), &spec).unwrap_err();
    assert!(matches!(err, Error::Build { .. }), "{err}");
    // A module without `check` cannot be encoded as the gate world.
    let spec = spec_in(
        dir.path(),
        "empty",
        "(module (memory (export \"memory\") 1))",
        &examples,
        test_limits(),
    );
    let err = load_gate(&engine(), &spec).unwrap_err();
    assert!(err.to_string().contains("gate empty"), "{err}");
}

/// A gate that allows everything: the canonical ABI's smallest implementation.
pub fn allow_all_gate() -> String {
    format!(
        r#"(module {}
  (func (export "check") (param i32) (result i32)
    (i32.store8 (i32.const 64) (i32.const 0))
    (i32.const 64)))"#,
        airlock_testkit::wat::BUMP_ALLOCATOR
    )
}

#[test]
fn the_built_component_is_deterministic() {
    let text =
        std::fs::read_to_string(example_gate_dir("migrations-route").join("gate.wat")).unwrap();
    assert_eq!(
        compile::component_from_wat(&text).unwrap(),
        compile::component_from_wat(&text).unwrap()
    );
}
