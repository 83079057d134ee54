//! The broker's command line as a person and a script meet it: logs on stderr at every
//! verbosity and in JSON (never mixed into `--json` output), the witness's spans, `--version`
//! with the build commit, shell completions and man pages.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::harness::{BIN, Fixture, queue_honest};

/// `airlock-broker --config FX ARGS` with `RUST_LOG` set to `rust_log` (unset for `None`).
fn broker(fx: &Fixture, args: &[&str], rust_log: Option<&str>) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.arg("--config")
        .arg(&fx.config)
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("NO_COLOR");
    if let Some(filter) = rust_log {
        cmd.env("RUST_LOG", filter);
    }
    cmd.output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// The `--json` rows on stdout, whatever the logs on stderr say.
fn rows(out: &Output) -> Value {
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON document ({e}):\n{}\nstderr:\n{}",
            text(&out.stdout),
            text(&out.stderr)
        )
    })
}

/// Every line of `stderr` as a JSON log object with a level and fields.
fn json_lines(stderr: &str) -> Vec<Value> {
    stderr
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .inspect(|line| {
            assert!(line["level"].is_string(), "{line}");
            assert!(line["fields"].is_object(), "{line}");
        })
        .collect()
}

#[test]
fn verbosity_rust_log_and_json_logs_go_to_stderr_and_queue_json_stays_clean() {
    let fx = Fixture::new();
    let plain = broker(&fx, &["queue", "--json"], None);
    let queue = rows(&plain);
    assert_eq!(text(&plain.stderr), "");

    let v = broker(&fx, &["-v", "queue", "--json"], None);
    assert_eq!(rows(&v), queue);
    let v_err = text(&v.stderr);
    assert!(
        v_err.contains("INFO") && v_err.contains("command{command=\"queue\"}: close time.busy="),
        "{v_err}"
    );
    assert!(!v_err.contains("DEBUG"), "{v_err}");

    for (args, rust_log) in [
        (&["-vv", "queue", "--json"][..], None),
        (&["queue", "--json"][..], Some("debug")),
    ] {
        let out = broker(&fx, args, rust_log);
        assert_eq!(rows(&out), queue, "{args:?} {rust_log:?}");
        let err = text(&out.stderr);
        for expected in [
            "airlock-broker starting",
            "reading the broker configuration",
            "queue store open",
        ] {
            assert!(
                err.contains(expected) && err.contains("DEBUG"),
                "{args:?} {rust_log:?}: no {expected:?} in\n{err}"
            );
        }
    }

    let out = broker(
        &fx,
        &["-vv", "--log-format", "json", "queue", "--json"],
        None,
    );
    assert_eq!(rows(&out), queue);
    let lines = json_lines(&text(&out.stderr));
    assert!(
        lines
            .iter()
            .any(|l| l["level"] == "DEBUG" && l["fields"]["message"] == "queue store open"),
        "{lines:?}"
    );
}

#[test]
fn serve_logs_a_span_for_each_witness_step() {
    let mut fx = Fixture::new();
    let log = fx.dir.path().join("serve.log");
    let child = Command::new(BIN)
        .args(["--config", fx.config.to_str().unwrap()])
        .args(["-v", "--log-format", "json", "serve"])
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    fx.server = Some(child);
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::os::unix::net::UnixStream::connect(&fx.socket).is_err() {
        assert!(Instant::now() < deadline, "broker did not start listening");
        std::thread::sleep(Duration::from_millis(20));
    }
    queue_honest(&fx, "run-spans");
    fx.kill();
    let stderr = std::fs::read_to_string(&log).unwrap();
    // `serve` also says what it noticed at start (no [signing], say) in plain lines; the log
    // lines are the JSON ones.
    let logged: String = stderr
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| format!("{l}\n"))
        .collect();
    let closed: Vec<(String, String)> = json_lines(&logged)
        .iter()
        .filter(|l| l["fields"]["message"] == "close")
        .map(|l| {
            let span = &l["span"];
            let name = span["name"].as_str().unwrap_or_default().to_owned();
            let step = span["step"].as_str().unwrap_or_default().to_owned();
            (name, step)
        })
        .collect();
    assert!(
        closed.iter().any(|(name, _)| name == "witness"),
        "{closed:?}"
    );
    for step in [
        "pinned_selected",
        "base_full",
        "patched_selected",
        "patched_full",
    ] {
        assert!(
            closed
                .iter()
                .any(|(name, s)| name == "witness_step" && s == step),
            "no closed witness_step {step}: {closed:?}"
        );
    }
}

#[test]
fn version_names_the_crate_version_and_the_commit_it_was_built_from() {
    let out = Command::new(BIN).arg("--version").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    airlock_testkit::bin::assert_version_line(
        "airlock-broker",
        env!("CARGO_PKG_VERSION"),
        &text(&out.stdout),
    );
}

#[test]
fn completions_and_man_pages_need_no_configuration() {
    // No broker.toml anywhere: completions and man pages are generated from the command line
    // definition alone.
    let missing = "/nonexistent/broker.toml";
    let run = |args: &[&str]| {
        let out = Command::new(BIN)
            .args(["--config", missing])
            .args(args)
            .env_remove("AIRLOCK_BROKER_CONFIG")
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            text(&out.stderr)
        );
        text(&out.stdout)
    };
    let bash = run(&["completions", "bash"]);
    assert!(bash.contains("_airlock__broker()"), "{bash}");
    for sub in ["serve", "queue", "approve", "attest", "completions", "man"] {
        assert!(
            bash.contains(&format!("airlock__broker__subcmd__{sub}")),
            "no {sub} in the bash script"
        );
    }
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        assert!(
            run(&["completions", shell]).contains("airlock-broker"),
            "{shell}"
        );
    }

    let dir = tempfile::tempdir().unwrap();
    let listed = run(&["man", "--dir", dir.path().to_str().unwrap()]);
    let mut pages: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    pages.sort();
    for page in [
        "airlock-broker.1",
        "airlock-broker-approve.1",
        "airlock-broker-serve.1",
    ] {
        assert!(pages.iter().any(|p| p == page), "no {page}: {pages:?}");
    }
    assert_eq!(listed.lines().count(), pages.len(), "{listed}");
    let approve = std::fs::read_to_string(dir.path().join("airlock-broker-approve.1")).unwrap();
    assert!(approve.starts_with(".ie"), "not roff");
    assert!(approve.contains("\\-\\-confirm\\-risk"), "{approve}");

    // Everything else still needs the configuration: exit 2 naming it.
    let out = Command::new(BIN)
        .args(["--config", missing, "queue"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains(missing), "{}", text(&out.stderr));
}
