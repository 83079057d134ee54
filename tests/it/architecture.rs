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

/// The top-level modules of `supervisor/src` (a `NAME.rs` file or a `NAME/` directory) and, for
/// each, the other top-level modules its code names as `crate::NAME` (in `use` lines, paths and
/// `crate::{a, b}` groups). Comment lines and the trailing `#[cfg(test)] mod` of each file are
/// not read: a doc link or a unit test may name a module above.
fn supervisor_module_imports() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("supervisor/src");
    let mut files: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            let mut stack = vec![path];
            while let Some(dir) = stack.pop() {
                for entry in std::fs::read_dir(&dir).unwrap() {
                    let path = entry.unwrap().path();
                    if path.is_dir() {
                        stack.push(path);
                    } else if path.extension().is_some_and(|e| e == "rs") {
                        files.entry(name.clone()).or_default().push(path);
                    }
                }
            }
        } else if path.extension().is_some_and(|e| e == "rs") && name != "lib" && name != "main" {
            files.entry(name).or_default().push(path);
        }
    }
    let modules: BTreeSet<String> = files.keys().cloned().collect();
    files
        .iter()
        .map(|(module, paths)| {
            let mut named = BTreeSet::new();
            for path in paths {
                let text = std::fs::read_to_string(path).unwrap();
                for name in crate_paths(&without_comments_and_tests(&text)) {
                    if modules.contains(&name) && name != *module {
                        named.insert(name);
                    }
                }
            }
            (module.clone(), named)
        })
        .collect()
}

/// `text` without comment lines and without everything from a `#[cfg(test)]` that opens a
/// module (the inline unit tests, which the codebase keeps at the end of a file).
fn without_comments_and_tests(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut kept = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let opens_test_module = trimmed.starts_with("#[cfg(test)]")
            && lines[i + 1..]
                .iter()
                .find(|l| !l.trim().is_empty())
                .is_some_and(|l| {
                    let l = l.trim_start();
                    l.starts_with("mod ") || l.starts_with("pub mod ")
                });
        if opens_test_module {
            break;
        }
        if !trimmed.starts_with("//") {
            kept.push(*line);
        }
    }
    kept.join("\n")
}

/// The first segment of every `crate::` path in `code`: `crate::a::b` gives `a`, and
/// `crate::{a::{x, y}, b}` gives `a` and `b`.
fn crate_paths(code: &str) -> Vec<String> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut names = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue; // `airlock_crate::` and the like
        }
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let mut expect_name = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 1 => expect_name = true,
                    c if expect_name && depth == 1 && !c.is_whitespace() => {
                        names.push(ident(&group[i..]));
                        expect_name = false;
                    }
                    _ => {}
                }
                if depth == 0 {
                    break;
                }
            }
        } else {
            names.push(ident(rest));
        }
    }
    names
}

/// The groups of modules that import one another in a circle (strongly connected components
/// of more than one module), each sorted, in sorted order.
fn import_circles(imports: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let reaches = |from: &str| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.to_owned()];
        while let Some(module) = stack.pop() {
            for next in imports.get(&module).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        seen
    };
    let reach: BTreeMap<&str, BTreeSet<String>> =
        imports.keys().map(|m| (m.as_str(), reaches(m))).collect();
    let mut circles: BTreeSet<Vec<String>> = BTreeSet::new();
    for (module, from) in &reach {
        let circle: Vec<String> = from
            .iter()
            .filter(|other| reach[other.as_str()].contains(*module))
            .cloned()
            .collect();
        if circle.len() > 1 {
            circles.insert(circle);
        }
    }
    circles.into_iter().collect()
}

/// The bottom of the supervisor: `config` (the operator's `airlock.toml`) is read by every
/// module above it and reads none of them, only `transport`'s endpoint types (which import
/// nothing of the crate).
#[test]
fn config_imports_nothing_above_it() {
    let imports = supervisor_module_imports();
    let allowed = ["transport"];
    let above: Vec<&String> = imports["config"]
        .iter()
        .filter(|m| !allowed.contains(&m.as_str()))
        .collect();
    assert!(
        above.is_empty(),
        "supervisor/src/config imports {above:?}; move what it needs down into config"
    );
    for module in allowed {
        assert!(
            imports[module].is_empty(),
            "config may import {module} only while {module} imports nothing of the crate, \
             but it imports {:?}",
            imports[module]
        );
    }
}

/// Imports between the supervisor's top-level modules point one way: no module reaches itself
/// through `crate::` paths. The circles still to be untangled are listed here by name, so a new
/// one fails and a fixed one must be struck off.
#[test]
fn supervisor_modules_import_in_one_direction() {
    let known: &[&[&str]] = &[];
    let circles = import_circles(&supervisor_module_imports());
    let known: Vec<Vec<String>> = known
        .iter()
        .map(|c| c.iter().map(|m| (*m).to_owned()).collect())
        .collect();
    assert_eq!(
        circles, known,
        "modules of supervisor/src that import one another in a circle (left) differ from the \
         known ones (right): move the shared item down into the lower module"
    );
}

#[test]
fn the_module_import_reader_sees_paths_groups_and_skips_comments_and_tests() {
    let code = "use crate::a::X;\nuse crate::{b::{c, d}, e};\n// crate::f\nlet x = crate::g::h();\n\
                use airlock_crate::i;\n#[cfg(test)]\nmod tests {\n    use crate::j;\n}\n";
    assert_eq!(
        crate_paths(&without_comments_and_tests(code)),
        ["a", "b", "e", "g"]
    );
    let imports: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec!["a"]),
    ]
    .into_iter()
    .map(|(m, to)| (m.to_owned(), to.into_iter().map(str::to_owned).collect()))
    .collect();
    assert_eq!(import_circles(&imports), [["a", "b", "c"]]);
}
