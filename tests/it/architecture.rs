//! The code map's dependency rules (ARCHITECTURE.md), checked against `cargo metadata`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace_deps() -> BTreeMap<String, BTreeSet<String>> {
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
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut map = BTreeMap::new();
    for pkg in meta["packages"].as_array().unwrap() {
        let name = pkg["name"].as_str().unwrap().to_owned();
        let deps = pkg["dependencies"]
            .as_array()
            .unwrap()
            .iter()
            // Normal dependencies only: dev-dependencies may pull test helpers.
            .filter(|d| d["kind"].is_null())
            .map(|d| d["name"].as_str().unwrap().to_owned())
            .filter(|d| d.starts_with("airlock"))
            .collect();
        map.insert(name, deps);
    }
    map
}

#[test]
fn crates_depend_only_on_what_the_code_map_allows() {
    let deps = workspace_deps();
    let allowed: &[(&str, &[&str])] = &[
        ("airlock-sandbox", &[]),
        ("airlock-egress", &["airlock-sandbox", "airlock-policies"]),
        ("airlock-checkout", &["airlock-policies"]),
        ("airlock-codegraph", &["airlock-policies"]),
        ("airlock-model", &[]),
        ("airlock-audit", &[]),
        ("airlock-schemas", &[]),
        ("airlock-policies", &["airlock-schemas"]),
        ("airlock-protocol", &["airlock-schemas", "airlock-policies"]),
        (
            "airlock-reader",
            &["airlock-checkout", "airlock-codegraph", "airlock-model"],
        ),
        (
            "airlock-broker",
            &[
                "airlock-sandbox",
                "airlock-schemas",
                "airlock-policies",
                "airlock-protocol",
                "airlock-audit",
                "airlock-egress",
                "airlock-gates",
            ],
        ),
        ("airlock-gates", &["airlock-schemas"]),
        ("airlock-gate-sdk", &[]),
        (
            "airlock-judge",
            &[
                "airlock-model",
                "airlock-schemas",
                "airlock-policies",
                "airlock-checkout",
                "airlock-codegraph",
            ],
        ),
        ("airlock-testkit", &[]),
    ];
    for (krate, ok) in allowed {
        let have = deps
            .get(*krate)
            .unwrap_or_else(|| panic!("{krate} is not a workspace member"));
        let extra: Vec<_> = have.iter().filter(|d| !ok.contains(&d.as_str())).collect();
        assert!(
            extra.is_empty(),
            "{krate} depends on {extra:?}, which ARCHITECTURE.md forbids"
        );
    }
    // The test kit serves tests only: no crate links it into product code.
    let users: Vec<_> = deps
        .iter()
        .filter(|(_, d)| d.contains("airlock-testkit"))
        .map(|(k, _)| k)
        .collect();
    assert!(
        users.is_empty(),
        "airlock-testkit is a normal dependency of {users:?}; make it a dev-dependency"
    );
    // The supervisor reaches the broker only through its socket: it must not link the crate
    // that holds forge credentials.
    let supervisor = &deps["airlock-supervisor"];
    assert!(
        !supervisor.contains("airlock-broker") && !supervisor.contains("airlock-judge"),
        "airlock-supervisor must not depend on the broker or the judge: {supervisor:?}"
    );
}

/// Every `.rs` file below the workspace root, relative, with its text; `skip` says which
/// directories (by name and relative path) are not entered.
fn rust_sources(skip: &dyn Fn(&str, &Path) -> bool) -> Vec<(PathBuf, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let rel = path.strip_prefix(root).unwrap().to_path_buf();
            if path.is_dir() {
                if !skip(&name, &rel) {
                    stack.push(path);
                }
            } else if name.ends_with(".rs") {
                out.push((rel, std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    out
}

#[test]
fn unsafe_code_is_allowed_only_in_the_sandbox() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut offenders = Vec::new();
    let skip = |name: &str, _: &Path| matches!(name, "target" | ".git" | "fuzz" | "examples");
    for (rel, text) in rust_sources(&skip) {
        if text.contains("allow(unsafe_code)")
            && rel != Path::new("sandbox/src/lib.rs")
            && rel != Path::new("gate-sdk/src/lib.rs")
        {
            offenders.push(rel.display().to_string());
        }
    }
    // This file names the attribute itself.
    offenders.retain(|p| p != "tests/it/architecture.rs");
    assert!(
        offenders.is_empty(),
        "unsafe_code allowed outside sandbox/src/lib.rs: {offenders:?}"
    );
    // There, only on the module of system-call wrappers.
    let lib = std::fs::read_to_string(root.join("sandbox/src/lib.rs")).unwrap();
    assert_eq!(lib.matches("allow(unsafe_code)").count(), 1);
    assert!(lib.contains("#[allow(unsafe_code)]\nmod sys;"));
    // The gate SDK allows it once, on the bindings `wit-bindgen` generates (the canonical ABI's
    // pointers), and writes no `unsafe` of its own.
    let sdk = std::fs::read_to_string(root.join("gate-sdk/src/lib.rs")).unwrap();
    assert_eq!(sdk.matches("allow(unsafe_code").count(), 1);
    assert!(sdk.contains("#[allow(unsafe_code, missing_docs, clippy::all)]\npub mod bindings {\n    wit_bindgen::generate!({"));
    assert_eq!(
        sdk.matches("unsafe").count(),
        2,
        "hand-written unsafe in gate-sdk/src/lib.rs"
    );
}

/// The host's whole network is never a choice the product's code makes: outside the sandbox
/// crate, `NetworkAccess::Host` is named only where a mode the operator wrote is mapped to the
/// sandbox's (`egress`'s `access_of`). Everything else reaches the network through a
/// `TestNetwork` (`airlock_egress::with_network`), whose mode comes from configuration.
#[test]
fn only_the_operators_configuration_grants_the_hosts_network() {
    let mut offenders = Vec::new();
    let skip = |name: &str, rel: &Path| {
        matches!(name, "target" | ".git" | "fuzz" | "tests") || rel == Path::new("sandbox")
    };
    for (rel, text) in rust_sources(&skip) {
        let uses = text.matches("NetworkAccess::Host").count();
        let allowed = usize::from(rel == Path::new("egress/src/lib.rs"));
        if uses > allowed {
            offenders.push(format!("{} ({uses})", rel.display()));
        }
    }
    assert!(
        offenders.is_empty(),
        "NetworkAccess::Host named outside sandbox/ and egress's mapping: {offenders:?}"
    );
}
