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
