//! `airlock demo` as a newcomer runs it: no arguments, a temporary work directory, a table at
//! the end; and the refusals a person can run into.

use std::path::Path;
use std::process::Command;

#[test]
fn demo_without_arguments_passes_every_scenario_and_cleans_up() {
    let broker = Path::new(env!("CARGO_BIN_EXE_airlock")).with_file_name("airlock-broker");
    assert!(
        broker.is_file(),
        "{} is missing: build it with `cargo build --workspace`",
        broker.display()
    );
    let out = Command::new(env!("CARGO_BIN_EXE_airlock"))
        .arg("demo")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let workdir = stdout
        .lines()
        .find_map(|l| l.strip_prefix("airlock demo: work directory "))
        .unwrap();
    assert!(
        !Path::new(workdir).exists(),
        "the temporary work directory {workdir} was left behind without --keep"
    );
    let header = stdout
        .lines()
        .position(|l| l.trim_start().starts_with("SCENARIO"))
        .unwrap();
    let rows: Vec<&str> = stdout.lines().skip(header + 1).take(4).collect();
    let results: Vec<&str> = rows
        .iter()
        .map(|r| r.split_whitespace().last().unwrap())
        .collect();
    assert_eq!(results, ["pass"; 4], "{stdout}");
    for step in [
        "[1/4]",
        "[2/4]",
        "[3/4]",
        "[4/4]",
        "witness evidence",
        "approve 1",
        "deny 1 --reason",
    ] {
        assert!(stdout.contains(step), "no `{step}` in\n{stdout}");
    }
}

#[test]
fn demo_refuses_a_work_directory_that_is_not_empty() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("precious.txt"), "keep me").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_airlock"))
        .arg("demo")
        .arg("--workdir")
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not empty"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("precious.txt")).unwrap(),
        "keep me"
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}
