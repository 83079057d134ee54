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
                "airlock-forge",
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
        // Below both the supervisor and the broker, which alone may use it.
        ("airlock-forge", &[]),
        (
            "airlock-supervisor",
            &[
                "airlock-audit",
                "airlock-checkout",
                "airlock-codegraph",
                "airlock-egress",
                "airlock-forge",
                "airlock-model",
                "airlock-policies",
                "airlock-protocol",
                "airlock-reader",
                "airlock-sandbox",
                "airlock-schemas",
            ],
        ),
    ];
    // Every crate has its line in the code map; the root package (the CLI) may use them all.
    let unmapped: Vec<&String> = deps
        .keys()
        .filter(|k| *k != "airlock" && !allowed.iter().any(|(krate, _)| krate == k))
        .collect();
    assert!(
        unmapped.is_empty(),
        "{unmapped:?} have no entry in the code map's dependency rules"
    );
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

/// The top-level modules of `supervisor/src`, with the other top-level modules each names
/// ([`module_imports`]).
fn supervisor_module_imports() -> BTreeMap<String, BTreeSet<String>> {
    module_imports(&Path::new(env!("CARGO_MANIFEST_DIR")).join("supervisor/src"))
}

/// The top-level modules of a crate's `src` (a `NAME.rs` file or a `NAME/` directory; not
/// `lib.rs`, `main.rs` or the binaries in `bin/`) and, for each, the other top-level modules
/// its code names as `crate::NAME` (in `use` lines, paths and `crate::{a, b}` groups) or, in
/// the module's own top file (`NAME.rs`, `NAME/mod.rs`), as `super::NAME`. Comment lines and
/// the trailing `#[cfg(test)] mod` of each file are not read: a doc link or a unit test may
/// name a module above.
fn module_imports(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    // Per module, its files, each marked when it is the module's top file.
    let mut files: BTreeMap<String, Vec<(PathBuf, bool)>> = BTreeMap::new();
    for entry in std::fs::read_dir(src).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if name == "bin" {
                continue;
            }
            let top = path.join("mod.rs");
            let mut stack = vec![path];
            while let Some(dir) = stack.pop() {
                for entry in std::fs::read_dir(&dir).unwrap() {
                    let path = entry.unwrap().path();
                    if path.is_dir() {
                        stack.push(path);
                    } else if path.extension().is_some_and(|e| e == "rs") {
                        let is_top = path == top;
                        files.entry(name.clone()).or_default().push((path, is_top));
                    }
                }
            }
        } else if path.extension().is_some_and(|e| e == "rs") && name != "lib" && name != "main" {
            files.entry(name).or_default().push((path, true));
        }
    }
    let modules: BTreeSet<String> = files.keys().cloned().collect();
    files
        .iter()
        .map(|(module, paths)| {
            let mut named = BTreeSet::new();
            for (path, is_top) in paths {
                let text = std::fs::read_to_string(path).unwrap();
                let code = without_comments_and_tests(&text);
                let mut names = prefixed_paths(&code, "crate::");
                if *is_top {
                    names.extend(prefixed_paths(&code, "super::"));
                }
                for name in names {
                    if modules.contains(&name) && name != *module {
                        named.insert(name);
                    }
                }
            }
            (module.clone(), named)
        })
        .collect()
}

/// `text` with its comment lines emptied (so line numbers still hold) and without everything
/// from a `#[cfg(test)]` that opens an inline module (the unit tests, which the codebase keeps
/// at the end of a file).
fn without_comments_and_tests(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut kept = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        // `#[cfg(test)]`, maybe more attributes, then `mod NAME {`: an inline test module. A
        // declaration (`mod tests;`) names a file of its own and is read like any line.
        let opens_test_module = trimmed.starts_with("#[cfg(test)]")
            && lines[i + 1..]
                .iter()
                .map(|l| l.trim())
                .find(|l| !l.is_empty() && !l.starts_with("#["))
                .is_some_and(|l| {
                    let l = l
                        .trim_start_matches("pub(crate) ")
                        .trim_start_matches("pub ");
                    l.starts_with("mod ") && l.ends_with('{')
                });
        if opens_test_module {
            break;
        }
        kept.push(if trimmed.starts_with("//") { "" } else { *line });
    }
    kept.join("\n")
}

/// The first segment of every `crate::` path in `code`: `crate::a::b` gives `a`, and
/// `crate::{a::{x, y}, b}` gives `a` and `b`.
fn crate_paths(code: &str) -> Vec<String> {
    prefixed_paths(code, "crate::")
}

/// The first segment of every path in `code` that starts with `prefix` (`crate::`, `super::`),
/// as [`crate_paths`] reads them.
fn prefixed_paths(code: &str, prefix: &str) -> Vec<String> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut names = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find(prefix) {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + prefix.len()..];
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

/// The folder of every workspace package (the root package is the workspace root itself),
/// from `cargo metadata`; `fuzz/` is no member and is not listed.
fn package_dirs() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(root)
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut dirs: Vec<PathBuf> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|pkg| {
            let manifest = Path::new(pkg["manifest_path"].as_str().unwrap());
            let dir = manifest.parent().unwrap();
            dir.strip_prefix(root).unwrap_or(dir).to_path_buf()
        })
        .collect();
    dirs.sort();
    dirs
}

/// Every `.rs` file below each package's `src/`, relative to the workspace root, with its
/// text. Directories named `target`, `tests`, `benches` or `fuzz` are not entered.
fn product_sources() -> Vec<(PathBuf, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    for dir in package_dirs() {
        let mut stack = vec![root.join(&dir).join("src")];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries {
                let path = entry.unwrap().path();
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                if path.is_dir() {
                    if !matches!(name.as_str(), "target" | "tests" | "benches" | "fuzz") {
                        stack.push(path);
                    }
                } else if name.ends_with(".rs") {
                    let rel = path.strip_prefix(root).unwrap().to_path_buf();
                    out.push((rel, std::fs::read_to_string(&path).unwrap()));
                }
            }
        }
    }
    out.sort();
    out
}

/// [`product_sources`] without the unit tests: files named `tests.rs` (a `#[cfg(test)] mod
/// tests;` kept beside its module) are left out, and of the others comment lines and the
/// trailing `#[cfg(test)] mod` are cut ([`without_comments_and_tests`]).
fn product_code() -> Vec<(PathBuf, String)> {
    product_sources()
        .into_iter()
        .filter(|(rel, _)| rel.file_name().is_none_or(|n| n != "tests.rs"))
        .map(|(rel, text)| {
            let code = without_comments_and_tests(&text);
            (rel, code)
        })
        .collect()
}

/// No source file outside tests and benches is longer than a reader can hold: at 1,200 lines
/// a file is split by what it owns.
#[test]
fn no_source_file_exceeds_1200_lines() {
    const MAX_LINES: usize = 1200;
    let offenders: Vec<String> = product_sources()
        .iter()
        .filter_map(|(rel, text)| {
            let lines = text.lines().count();
            (lines > MAX_LINES).then(|| format!("{} ({lines} lines)", rel.display()))
        })
        .collect();
    assert!(
        offenders.is_empty(),
        "source files over {MAX_LINES} lines: split each by what it owns: {offenders:#?}"
    );
}

#[test]
fn the_architecture_document_is_a_short_read_that_names_what_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let lines = text.lines().count();
    assert!(
        lines < 250,
        "ARCHITECTURE.md has {lines} lines: a newcomer reads it in ten minutes; keep it under 250"
    );
    // Every module the broker's reading order names exists.
    for module in [
        "server",
        "service",
        "intake",
        "claims",
        "claim_requests",
        "followups",
        "registration",
        "judging",
        "decisions",
        "publish",
        "store",
        "approver",
        "view",
        "ui",
    ] {
        assert!(text.contains(&format!("`{module}`")) || text.contains(&format!("`{module}/`")));
        let src = root.join("broker/src");
        assert!(
            src.join(format!("{module}.rs")).is_file() || src.join(module).is_dir(),
            "ARCHITECTURE.md names broker module {module}, which does not exist"
        );
    }
}

/// The detector kinds as `policies` spells them (`MoveKind::as_str`). The `match` has no
/// wildcard, so a new kind does not compile until it is listed here too.
fn finding_kinds() -> Vec<&'static str> {
    use airlock_policies::MoveKind;
    let all = [
        MoveKind::AssertionRemoved,
        MoveKind::ComparisonLoosened,
        MoveKind::CatchWidened,
        MoveKind::SkipMarkerAdded,
        MoveKind::TestInputShrunk,
        MoveKind::TimeoutRaised,
    ];
    for kind in all {
        match kind {
            MoveKind::AssertionRemoved
            | MoveKind::ComparisonLoosened
            | MoveKind::CatchWidened
            | MoveKind::SkipMarkerAdded
            | MoveKind::TestInputShrunk
            | MoveKind::TimeoutRaised => {}
        }
    }
    all.map(MoveKind::as_str).to_vec()
}

/// A finding is rendered once, at the edge that shows it (`broker/src/rules.rs::finding_flag`,
/// the approver's view in `broker/src/view.rs`), and never read back from that text: no product
/// code asks whether a string starts with, contains or splits on a finding kind, and only the
/// view that writes the `== diff` heading of `airlock-broker show` may name it. A caller that
/// needs the findings or the diff takes the typed `DigestReport` / `Finding`, or `show --json`.
#[test]
fn no_rendered_finding_is_parsed_back() {
    const READERS: [&str; 9] = [
        "starts_with(",
        "ends_with(",
        "contains(",
        "strip_prefix(",
        "strip_suffix(",
        "split(",
        "split_once(",
        "find(",
        "matches(",
    ];
    let kinds = finding_kinds();
    let mut offenders = Vec::new();
    for (rel, code) in product_code() {
        for (n, line) in code.lines().enumerate() {
            for reader in READERS {
                for kind in &kinds {
                    if line.contains(&format!("{reader}\"{kind}")) {
                        offenders.push(format!("{}:{}: {}", rel.display(), n + 1, line.trim()));
                    }
                }
            }
            if line.contains(r#""\n== diff\n""#) && rel != Path::new("broker/src/view.rs") {
                offenders.push(format!("{}:{}: {}", rel.display(), n + 1, line.trim()));
            }
        }
    }
    offenders.dedup();
    assert!(
        offenders.is_empty(),
        "rendered findings or `airlock-broker show`'s text read back: take the typed value or \
         `--json` instead: {offenders:#?}"
    );
}

/// The `pub` surface of a file, line by line, as a simple scan sees it: every line that
/// starts with `pub ` (not `pub(crate)` and the like), the rest of a `pub fn` signature up to
/// its body, every `pub` field of a `pub struct`, and every line of a `pub enum` or `pub trait`
/// body (their variants and methods are as public as the item). It over-approximates (a `pub`
/// item of a private module is counted), which a rule of absence can afford.
fn public_lines(code: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut lines = code.lines();
    while let Some(line) = lines.next() {
        let t = line.trim_start();
        if !t.starts_with("pub ") {
            continue;
        }
        out.push(line);
        let opens_body = t.trim_end().ends_with('{');
        let is_signature = [
            "pub fn ",
            "pub async fn ",
            "pub const fn ",
            "pub unsafe fn ",
        ]
        .iter()
        .any(|p| t.starts_with(p));
        if is_signature && !opens_body && !t.trim_end().ends_with(';') {
            for next in lines.by_ref() {
                out.push(next);
                let n = next.trim_end();
                if n.ends_with('{') || n.ends_with(';') {
                    break;
                }
            }
        } else if opens_body
            && ["pub struct ", "pub enum ", "pub trait "]
                .iter()
                .any(|p| t.starts_with(p))
        {
            let all = !t.starts_with("pub struct ");
            let mut depth = 1i32;
            for next in lines.by_ref() {
                depth += next.matches('{').count() as i32 - next.matches('}').count() as i32;
                if depth <= 0 {
                    break;
                }
                if all || next.trim_start().starts_with("pub ") {
                    out.push(next);
                }
            }
        }
    }
    out
}

/// A TOML document is parsed into its typed configuration where it is read; no untyped
/// `toml::Table` or `toml::Value` crosses a crate boundary. Private uses (say
/// `supervisor/src/ci_files.rs` reading a project's `tox.toml`) stay inside their module.
/// Checked on the `pub` lines [`public_lines`] picks out; a file that imports `toml::Table` or
/// `toml::Value` by name also fails on the bare `Table` or `Value` there.
#[test]
fn no_toml_table_crosses_a_crate_boundary() {
    let mut offenders = Vec::new();
    for (rel, code) in product_code() {
        let is_binary = rel.file_name().is_some_and(|n| n == "main.rs")
            || rel.components().any(|c| c.as_os_str() == "bin");
        if is_binary {
            continue;
        }
        let mut names = vec!["toml::Table", "toml::Value", "toml::value::", "toml::map::"];
        let imports = |what: &str| {
            code.lines().any(|l| {
                let l = l.trim_start();
                l.starts_with("use toml::") && l.contains(what)
            })
        };
        if imports("Table") {
            names.push("Table");
        }
        if imports("Value") {
            names.push("Value");
        }
        for line in public_lines(&code) {
            if names.iter().any(|name| line.contains(name)) {
                offenders.push(format!("{}: {}", rel.display(), line.trim()));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "untyped TOML in a public signature or field: parse it into a type where it is read: \
         {offenders:#?}"
    );
}

/// One crate never runs another's binary to read what it prints for people: the broker's
/// `show` is read as `show --json` (the typed `ItemView`), never as the rendered text, which
/// may only be passed on whole (written to a file or a terminal for a person). The scan takes
/// each `let NAME = Command::new(...)` statement of product code (up to its `;`) that passes
/// the argument `"show"` without `"--json"`, and fails when a later line of the file touches
/// `NAME.stdout` anywhere but inside a `write(` call.
#[test]
fn no_crate_runs_another_binary_to_parse_its_text() {
    let mut offenders = Vec::new();
    for (rel, code) in product_code() {
        let lines: Vec<&str> = code.lines().collect();
        for (n, line) in lines.iter().enumerate() {
            let Some(at) = line.find("Command::new(") else {
                continue;
            };
            let Some(binding) = line[..at]
                .trim_start()
                .strip_prefix("let ")
                .map(|b| {
                    b.trim_start_matches("mut ")
                        .trim_end()
                        .trim_end_matches('=')
                })
                .map(str::trim)
            else {
                continue;
            };
            let rest = lines[n..].join("\n");
            let statement = &rest[rest.find("Command::new(").unwrap_or(0)..];
            let statement = &statement[..statement.find(';').unwrap_or(statement.len())];
            if !statement.contains("\"show\"") || statement.contains("\"--json\"") {
                continue;
            }
            let stdout = format!("{binding}.stdout");
            for (m, later) in lines.iter().enumerate().skip(n + 1) {
                if later.contains(&stdout) && !later.contains("write(") {
                    offenders.push(format!(
                        "{}:{}: `show` run at line {} and its text read: {}",
                        rel.display(),
                        m + 1,
                        n + 1,
                        later.trim()
                    ));
                }
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "`airlock-broker show`'s rendered text read back: pass `--json` and read the typed \
         view: {offenders:#?}"
    );
}

/// In every crate, imports between the top-level modules point one way: no module reaches
/// itself through `crate::` (or a top file's `super::`) paths. A circle is listed by crate and
/// modules; the cure is to move the shared item down into the lower module.
#[test]
fn top_level_modules_of_each_crate_have_no_import_cycles() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    for dir in package_dirs() {
        let src = root.join(&dir).join("src");
        if !src.is_dir() {
            continue;
        }
        for circle in import_circles(&module_imports(&src)) {
            let shown = src.strip_prefix(root).unwrap_or(&src).display().to_string();
            found.push(format!("{shown}: {}", circle.join(" <-> ")));
        }
    }
    assert!(
        found.is_empty(),
        "top-level modules that import one another in a circle: {found:#?}"
    );
}

#[test]
fn the_public_line_reader_sees_signatures_fields_and_variants() {
    let code = "pub fn a(\n    t: toml::Table,\n) -> u8 {\n    let x: toml::Value = 1;\n}\n\
                fn b(t: &toml::Table) {}\npub struct S {\n    pub f: toml::Value,\n    g: toml::Table,\n}\n\
                pub enum E {\n    V(toml::Table),\n}\npub(crate) fn c(t: toml::Table) {}\n";
    let lines: Vec<&str> = public_lines(code).iter().map(|l| l.trim()).collect();
    assert_eq!(
        lines,
        [
            "pub fn a(",
            "t: toml::Table,",
            ") -> u8 {",
            "pub struct S {",
            "pub f: toml::Value,",
            "pub enum E {",
            "V(toml::Table),"
        ]
    );
}

#[test]
fn the_module_import_reader_reads_past_a_test_module_declaration() {
    let code = "#[cfg(test)]\nmod tests;\nuse crate::k;\n#[cfg(test)]\n#[allow(clippy::unwrap_used)]\n\
                mod inline {\n    use crate::j;\n}\n";
    assert_eq!(crate_paths(&without_comments_and_tests(code)), ["k"]);
}
