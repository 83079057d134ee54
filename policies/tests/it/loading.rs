use airlock_policies::{Error, Policy, WriteDecision};

fn default_text() -> &'static str {
    Policy::default_toml()
}

#[test]
fn default_policy_loads_and_checks_its_examples() {
    let policy = Policy::default().unwrap();
    assert_eq!(policy.allowlist(), ["**"]);
    assert!(policy.origin().contains("default.toml"));
}

#[test]
fn policy_file_on_disk_is_the_embedded_one() {
    let on_disk =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/default.toml")).unwrap();
    assert_eq!(on_disk, default_text());
    let loaded = Policy::load(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/default.toml"
    )))
    .unwrap();
    assert_eq!(loaded.check_write("Cargo.lock").rule(), Some("lockfile"));
}

fn load_err(text: &str) -> Error {
    Policy::from_toml_str(text, "operator.toml").unwrap_err()
}

#[test]
fn malformed_toml_names_file_line_and_column() {
    let text = default_text().replacen("version = 1", "version = 1\nallow = [", 1);
    let err = load_err(&text);
    match &err {
        Error::Toml { file, line, .. } => {
            assert_eq!(file, "operator.toml");
            assert!(*line >= 12, "line {line}");
        }
        other => panic!("expected a TOML error, got {other:?}"),
    }
    assert!(err.to_string().starts_with("operator.toml:"), "{err}");
}

#[test]
fn unknown_key_is_a_load_error_at_its_line() {
    let text = default_text().replacen("[write]\n", "[write]\nalow = [\"src/**\"]\n", 1);
    let expected_line = text.lines().position(|l| l.starts_with("alow")).unwrap() + 1;
    match load_err(&text) {
        Error::Toml { line, message, .. } => {
            assert_eq!(line, expected_line);
            assert!(message.contains("alow"), "{message}");
        }
        other => panic!("expected a TOML error, got {other:?}"),
    }
    let text = default_text().replacen(
        "kind = \"assertion-removed\"",
        "kind = \"assertion-deleted\"",
        1,
    );
    assert!(matches!(load_err(&text), Error::Toml { .. }));
    let text = default_text().replacen("[tests.go]", "[tests.cobol]", 1);
    assert!(matches!(load_err(&text), Error::Toml { .. }));
}

#[test]
fn glob_that_does_not_compile_is_a_load_error() {
    let text = default_text().replacen("\".github/**\",", "\".github/[**\",", 1);
    match load_err(&text) {
        Error::Rule {
            rule,
            message,
            line,
            ..
        } => {
            assert_eq!(rule, "ci-config");
            assert!(message.contains("does not compile"), "{message}");
            assert!(line > 0);
        }
        other => panic!("expected a rule error, got {other:?}"),
    }
    let text = default_text().replacen("allow = [\"**\"]", "allow = [\"src/{a\"]", 1);
    assert!(matches!(load_err(&text), Error::Rule { .. }));
}

#[test]
fn regex_that_does_not_compile_is_a_load_error() {
    let text = default_text().replacen(
        r"pattern = '\bcatch_unwind\s*\('",
        r"pattern = '\bcatch_unwind\s*('",
        1,
    );
    match load_err(&text) {
        Error::Rule { rule, message, .. } => {
            assert_eq!(rule, "rust-catch-unwind-added");
            assert!(message.contains("regex"), "{message}");
        }
        other => panic!("expected a rule error, got {other:?}"),
    }
}

#[test]
fn failing_detector_example_is_a_load_error() {
    // A match example the rule does not fire on.
    let text = default_text().replacen(
        "match = [\"        let r = std::panic::catch_unwind(|| run());\"]",
        "match = [\"        let r = run();\"]",
        1,
    );
    match load_err(&text) {
        Error::Rule {
            rule,
            message,
            line,
            ..
        } => {
            assert_eq!(rule, "rust-catch-unwind-added");
            assert!(message.contains("does not fire"), "{message}");
            let id_line = text
                .lines()
                .position(|l| l.contains("\"rust-catch-unwind-added\""))
                .unwrap()
                + 1;
            assert_eq!(line, id_line);
        }
        other => panic!("expected a rule error, got {other:?}"),
    }
    // A not_match example the rule fires on.
    let text = default_text().replacen(
        "not_match = [\"        let r = run();\"]",
        "not_match = [\"        catch_unwind(f)\"]",
        1,
    );
    assert!(
        matches!(load_err(&text), Error::Rule { ref message, .. } if message.contains("fires"))
    );
    // A pair example for a line rule.
    let text = default_text().replacen(
        "not_match = [\"        let r = run();\"]",
        "not_match = [[\"a\", \"b\"]]",
        1,
    );
    assert!(
        matches!(load_err(&text), Error::Rule { ref message, .. } if message.contains("wrong shape"))
    );
}

#[test]
fn failing_path_and_test_examples_are_load_errors() {
    let text = default_text().replacen(
        "match = [\"Cargo.lock\",",
        "match = [\"src/lib.rs\", \"Cargo.lock\",",
        1,
    );
    match load_err(&text) {
        Error::Rule { rule, .. } => assert_eq!(rule, "lockfile"),
        other => panic!("expected a rule error, got {other:?}"),
    }
    let text = default_text().replacen(
        "not_match = [\"pkg/io.py\",",
        "not_match = [\"pkg/test_io.py\",",
        1,
    );
    match load_err(&text) {
        Error::Rule { rule, .. } => assert_eq!(rule, "tests.python"),
        other => panic!("expected a rule error, got {other:?}"),
    }
}

#[test]
fn rule_without_examples_is_a_load_error() {
    let text = default_text().replacen(
        "match = [\"        let r = std::panic::catch_unwind(|| run());\"]",
        "match = []",
        1,
    );
    assert!(
        matches!(load_err(&text), Error::Rule { ref message, .. } if message.contains("at least one"))
    );
}

#[test]
fn missing_file_is_a_read_error_naming_it() {
    let err = Policy::load(std::path::Path::new("/nonexistent/policy.toml")).unwrap_err();
    assert!(
        err.to_string().contains("/nonexistent/policy.toml"),
        "{err}"
    );
}

#[test]
fn operator_overrides_the_allowlist_but_not_the_refused_classes() {
    let policy = Policy::default()
        .unwrap()
        .with_allowlist(&["src/**", "tests/**", "Cargo.lock"])
        .unwrap();
    assert_eq!(policy.check_write("src/a.rs"), WriteDecision::Allowed);
    assert_eq!(policy.check_write("docs/a.md").rule(), Some("allowlist"));
    // Listing a lockfile in the allowlist does not make it writable.
    assert_eq!(policy.check_write("Cargo.lock").rule(), Some("lockfile"));
    // The allowlist is case-sensitive: it names what the operator wrote.
    assert_eq!(policy.check_write("SRC/a.rs").rule(), Some("allowlist"));
    assert!(
        Policy::default()
            .unwrap()
            .with_allowlist(&["src/[a"])
            .is_err()
    );
}

#[test]
fn per_repository_allowlist_from_the_policy_file() {
    let text = format!(
        "{}\n[repos.\"acme/widgets\"]\nallow = [\"lib/**\"]\n",
        default_text()
    );
    let policy = Policy::from_toml_str(&text, "operator.toml").unwrap();
    let widgets = policy.for_repo("acme/widgets").unwrap();
    assert_eq!(widgets.check_write("lib/x.py"), WriteDecision::Allowed);
    assert_eq!(widgets.check_write("src/x.py").rule(), Some("allowlist"));
    let other = policy.for_repo("acme/other").unwrap();
    assert_eq!(other.check_write("src/x.py"), WriteDecision::Allowed);
    let bad = format!(
        "{}\n[repos.\"acme/widgets\"]\nallow = [\"lib/[\"]\n",
        default_text()
    );
    assert!(matches!(
        Policy::from_toml_str(&bad, "operator.toml"),
        Err(Error::Rule { .. })
    ));
}

#[test]
fn the_code_modes_check_their_examples_and_shape_at_load() {
    // A tautology example that is not one.
    let text = default_text().replacen(
        "match = [\"        assert_eq!(f(2), f(2));\", \"        assert_eq!(v, v, \\\"same\\\");\"]",
        "match = [\"        assert_eq!(f(2), f(3));\"]",
        1,
    );
    assert_ne!(text, default_text(), "the edit must apply");
    assert!(
        matches!(load_err(&text), Error::Rule { ref rule, ref message, .. }
            if rule == "rust-same-operands" && message.contains("does not fire"))
    );
    // An unreachable example that is reachable.
    let text = default_text().replacen(
        "match = [\"        return;\\n        assert_eq!(f(2), 4);\"]",
        "match = [\"        return;\\n    }\"]",
        1,
    );
    assert_ne!(text, default_text(), "the edit must apply");
    assert!(
        matches!(load_err(&text), Error::Rule { ref rule, ref message, .. }
            if rule == "rust-early-return" && message.contains("does not fire"))
    );
    // A same-operands rule must say where its operands are.
    let text = default_text().replacen(
        "operands = \"arguments\"\nskip_arguments = 1\n",
        "skip_arguments = 1\n",
        1,
    );
    assert_ne!(text, default_text(), "the edit must apply");
    assert!(
        matches!(load_err(&text), Error::Rule { ref rule, ref message, .. }
            if rule == "go-same-operands" && message.contains("needs `operands`"))
    );
}
