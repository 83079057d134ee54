//! Invariants of the code map that can be checked mechanically.

use std::process::Command;

use serde_json::Value;

#[test]
fn the_broker_depends_on_no_model_supervisor_or_reader_crate() {
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value = serde_json::from_slice(&out.stdout).unwrap();
    let broker = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "airlock-broker")
        .expect("airlock-broker in the workspace");
    let deps: Vec<&str> = broker["dependencies"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["kind"].is_null())
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    for forbidden in [
        "airlock-model",
        "airlock-supervisor",
        "airlock-reader",
        "airlock-checkout",
        "airlock-codegraph",
    ] {
        assert!(
            !deps.contains(&forbidden),
            "airlock-broker must not depend on {forbidden}: {deps:?}"
        );
    }
    for required in [
        "airlock-schemas",
        "airlock-policies",
        "airlock-sandbox",
        "airlock-audit",
    ] {
        assert!(
            deps.contains(&required),
            "shared contracts and rules come from {required}: {deps:?}"
        );
    }
}
