//! The command-line surface a user sees, pinned by snapshots: each binary's help and the main
//! subcommands' help, the completion scripts and the man pages generated from the same clap
//! definitions.

use std::process::{Command, Output};

fn airlock(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_airlock"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

fn broker(args: &[&str]) -> Output {
    Command::new(airlock_testkit::bin::path("airlock-broker"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

#[test]
fn the_help_of_both_binaries_is_pinned() {
    for args in [
        &["--help"][..],
        &["run", "--help"],
        &["audit", "--help"],
        &["audit", "injections", "--help"],
        &["audit", "triage", "--help"],
        &["judge", "--help"],
        &["init", "--help"],
        &["doctor", "--help"],
        &["batch", "--help"],
        &["watch", "--help"],
        &["webhook", "--help"],
    ] {
        let name = format!("airlock_{}", args.join("_").replace("--", ""));
        let shown = format!("airlock {}", args.join(" "));
        insta::assert_snapshot!(name, stdout(&airlock(args)), &shown);
    }
    for args in [
        &["--help"][..],
        &["serve", "--help"],
        &["queue", "--help"],
        &["show", "--help"],
        &["approve", "--help"],
        &["gate", "test", "--help"],
    ] {
        let name = format!("airlock-broker_{}", args.join("_").replace("--", ""));
        let shown = format!("airlock-broker {}", args.join(" "));
        insta::assert_snapshot!(name, stdout(&broker(args)), &shown);
    }
}

#[test]
fn completions_cover_every_subcommand_and_man_pages_are_written() {
    let bash = stdout(&airlock(&["completions", "bash"]));
    assert!(bash.contains("_airlock()"), "{bash}");
    for sub in [
        "run",
        "audit",
        "judge",
        "doctor",
        "completions",
        "man",
        "batch",
        "watch",
        "webhook",
    ] {
        assert!(
            bash.contains(&format!("airlock__subcmd__{sub}")),
            "no {sub} in the bash script"
        );
    }
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let script = stdout(&airlock(&["completions", shell]));
        assert!(script.contains("airlock"), "{shell}: {script}");
    }
    let bad = airlock(&["completions", "tcsh"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("possible values"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );

    let dir = tempfile::tempdir().unwrap();
    let listed = stdout(&airlock(&["man", "--dir", dir.path().to_str().unwrap()]));
    let mut pages: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    pages.sort();
    assert!(pages.contains(&"airlock.1".to_string()), "{pages:?}");
    assert!(pages.contains(&"airlock-run.1".to_string()), "{pages:?}");
    assert!(
        !pages.contains(&"airlock-reader-worker.1".to_string()),
        "a hidden subcommand got a page: {pages:?}"
    );
    assert_eq!(listed.lines().count(), pages.len(), "{listed}");
    let run = std::fs::read_to_string(dir.path().join("airlock-run.1")).unwrap();
    assert!(
        run.starts_with(".ie"),
        "not roff: {}",
        &run[..80.min(run.len())]
    );
    assert!(
        run.contains("\\-\\-fetch") && run.contains("\\-\\-keep"),
        "{run}"
    );
}

/// `airlock ARGS` with `RUST_LOG` set to `rust_log` (unset for `None`).
fn airlock_with_log(args: &[&str], rust_log: Option<&str>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_airlock"));
    cmd.args(args).env_remove("RUST_LOG").env_remove("NO_COLOR");
    if let Some(filter) = rust_log {
        cmd.env("RUST_LOG", filter);
    }
    cmd.output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// The `--json` document on stdout, whatever the logs on stderr say.
fn json_stdout(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON document ({e}):\n{}\nstderr:\n{}",
            text(&out.stdout),
            text(&out.stderr)
        )
    })
}

#[test]
fn verbosity_and_rust_log_add_log_lines_on_stderr_and_never_on_stdout() {
    let plain = airlock_with_log(&["doctor", "--json"], None);
    let report = json_stdout(&plain);
    let plain_err = text(&plain.stderr);
    assert!(!plain_err.contains("DEBUG"), "{plain_err}");

    // -v: the command's span closes at info, with its time.
    let v = airlock_with_log(&["-v", "doctor", "--json"], None);
    assert_eq!(json_stdout(&v), report);
    let v_err = text(&v.stderr);
    assert!(
        v_err.contains("INFO") && v_err.contains("command{command=\"doctor\"}: close time.busy="),
        "{v_err}"
    );
    assert!(!v_err.contains("DEBUG"), "{v_err}");

    // -vv and RUST_LOG=debug: debug lines too, on stderr only.
    for (args, rust_log) in [
        (&["-vv", "doctor", "--json"][..], None),
        (&["doctor", "--json"][..], Some("debug")),
    ] {
        let out = airlock_with_log(args, rust_log);
        assert_eq!(json_stdout(&out), report, "{args:?} {rust_log:?}");
        let err = text(&out.stderr);
        assert!(
            err.lines().count() > plain_err.lines().count(),
            "{args:?} {rust_log:?} added nothing:\n{err}"
        );
        assert!(
            err.contains("DEBUG") && err.contains("airlock starting"),
            "{args:?} {rust_log:?}:\n{err}"
        );
    }
}

#[test]
fn log_format_json_writes_one_json_object_a_line_on_stderr() {
    let out = airlock_with_log(&["-vv", "--log-format", "json", "doctor", "--json"], None);
    json_stdout(&out);
    let err = text(&out.stderr);
    let lines: Vec<serde_json::Value> = err
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect();
    assert!(lines.len() >= 2, "{err}");
    for line in &lines {
        assert!(line["level"].is_string(), "{line}");
        assert!(line["fields"].is_object(), "{line}");
    }
    assert!(
        lines
            .iter()
            .any(|l| l["level"] == "DEBUG" && l["fields"]["message"] == "airlock starting"),
        "{err}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l["fields"]["message"] == "close" && l["span"]["command"] == "doctor"),
        "{err}"
    );
    let bad = airlock_with_log(&["--log-format", "yaml", "doctor"], None);
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad.stderr).contains("text or json"), "{:?}", bad);
}

#[test]
fn version_names_the_crate_version_and_the_commit_it_was_built_from() {
    for flag in ["--version", "-V"] {
        airlock_testkit::bin::assert_version_line(
            "airlock",
            env!("CARGO_PKG_VERSION"),
            &stdout(&airlock(&[flag])),
        );
    }
}
