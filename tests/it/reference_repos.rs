//! End-to-end tests of `airlock reference-repos`: the real binary over a project directory
//! whose `.airlock/reference-repos/` lists a repository the test creates.

use airlock_testkit::git;
use serde_json::{Value, json};
use std::path::Path;
use std::process::{Command, Output};

fn airlock(cwd: &Path, home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_airlock"))
        .args(["reference-repos"])
        .args(args)
        .current_dir(cwd)
        .env("AIRLOCK_HOME", home)
        .env_remove("AIRLOCK_CONFIG")
        .output()
        .unwrap()
}

fn json_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn reference_repos_prints_the_pinned_structure_byte_identically_and_refuses_an_unreadable_dir() {
    let tmp = tempfile::tempdir().unwrap();
    let svc = tmp.path().join("svc");
    let head = git::repo_with(
        &svc,
        &[
            ("go.mod", "module example.com/svc\n\ngo 1.22\n"),
            (
                "cmd/svc/main.go",
                "package main\n\nimport \"net/http\"\n\nfunc main() {\n\thttp.HandleFunc(\"/health\", health)\n}\n",
            ),
            (
                "internal/auth/token.go",
                "package auth\n\nfunc Sign() string { return \"\" }\n",
            ),
            (
                "internal/auth/token_test.go",
                "package auth\n\nimport \"testing\"\n\nfunc TestSign(t *testing.T) {}\n",
            ),
        ],
    );
    let project = tmp.path().join("project");
    let refs = project.join(".airlock/reference-repos");
    std::fs::create_dir_all(&refs).unwrap();
    std::fs::write(
        refs.join("svc.yml"),
        format!(
            "repo: file://{}\nrationale: Our Go service layout.\napplies_to_languages: [go]\n",
            svc.display()
        ),
    )
    .unwrap();
    let home = tmp.path().join("home");

    let first = airlock(&project, &home, &[]);
    assert_eq!(
        first.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let value = json_of(&first);
    assert_eq!(value["ok"], true);
    assert_eq!(value["mode"], "reference");
    let repo = &value["repos"][0];
    assert_eq!(repo["status"], "ok");
    assert_eq!(repo["reference"], true);
    assert_eq!(repo["repo"]["sha"], head.as_str());
    assert_eq!(repo["repo"]["ref"], "main");
    assert_eq!(repo["structure"]["manifests"], json!(["go.mod"]));
    assert_eq!(
        repo["structure"]["entryPoints"],
        json!([{"path": "cmd/svc/main.go", "framework": "net/http"}])
    );
    assert_eq!(
        repo["structure"]["tests"],
        json!([{"path": "internal/auth/token_test.go", "language": "go"}])
    );
    // No clock, no environment: a second call prints the same bytes, and neither the cache
    // nor the working directory shows in them.
    let second = airlock(&project, &home, &[]);
    assert_eq!(first.stdout, second.stdout);
    let text = String::from_utf8_lossy(&first.stdout);
    assert!(
        !text.contains(&home.display().to_string())
            && !text.contains(&project.display().to_string())
    );

    // --language filters, --max-files caps.
    let python = json_of(&airlock(&project, &home, &["--language", "python"]));
    assert_eq!(
        python,
        json!({"ok": true, "mode": "reference", "repos": [], "reason": "mesh-has-no-reference-repos"})
    );
    let capped = json_of(&airlock(&project, &home, &["--max-files", "1"]));
    assert_eq!(capped["repos"][0]["inventory_paths"], json!(["go.mod"]));

    // The whole-call refusal has its own exit code.
    let refused = airlock(
        &project,
        &home,
        &["--dir", ".airlock/reference-repos/svc.yml"],
    );
    assert_eq!(refused.status.code(), Some(3));
    let value = json_of(&refused);
    assert_eq!(value["ok"], false);
    assert_eq!(value["reason"], "mesh-config-dir-unreadable");
    assert!(value["remediation"].as_str().unwrap().contains("svc.yml"));
}
