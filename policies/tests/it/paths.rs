use airlock_policies::{Policy, WriteDecision, normalize_path};

fn rule(path: &str) -> Option<String> {
    Policy::default()
        .unwrap()
        .check_write(path)
        .rule()
        .map(str::to_string)
}

#[track_caller]
fn refused_by(path: &str, expected: &str) {
    assert_eq!(rule(path).as_deref(), Some(expected), "{path:?}");
}

#[test]
fn ordinary_source_and_new_tests_are_allowed() {
    for path in [
        "src/parse.py",
        "tests/test_parse.py",
        "pkg/a/b.go",
        "README.md",
        "src\\win\\path.rs",
        "./src/x.py",
        "src//x.py",
    ] {
        assert_eq!(
            Policy::default().unwrap().check_write(path),
            WriteDecision::Allowed,
            "{path}"
        );
    }
}

#[test]
fn every_refused_class() {
    for p in [
        ".github/workflows/ci.yml",
        ".gitlab-ci.yml",
        ".circleci/config.yml",
        "Jenkinsfile",
        "azure-pipelines.yml",
        ".travis.yml",
        "tox.ini",
    ] {
        refused_by(p, "ci-config");
    }
    for p in [
        ".git/hooks/pre-commit",
        ".git/config",
        ".githooks/pre-push",
        ".husky/pre-commit",
        ".pre-commit-config.yaml",
        ".gitignore",
        "src/.gitattributes",
    ] {
        refused_by(p, "git-hooks");
    }
    for p in [
        ".vscode/settings.json",
        ".idea/workspace.xml",
        ".editorconfig",
        "AGENTS.md",
        "CLAUDE.md",
        ".cursorrules",
        ".claude/settings.json",
        "docs/AGENTS.md",
    ] {
        refused_by(p, "editor-agent-config");
    }
    for p in [
        "Cargo.toml",
        "crates/x/Cargo.toml",
        "package.json",
        "pyproject.toml",
        "setup.py",
        "setup.cfg",
        "requirements.txt",
        "requirements-dev.txt",
        "go.mod",
        "pom.xml",
        "build.gradle",
        "Gemfile",
        "composer.json",
    ] {
        refused_by(p, "dependency-manifest");
    }
    for p in [
        "Cargo.lock",
        "package-lock.json",
        "yarn.lock",
        "pnpm-lock.yaml",
        "poetry.lock",
        "Pipfile.lock",
        "go.sum",
        "Gemfile.lock",
        "uv.lock",
        "sub/dir/composer.lock",
    ] {
        refused_by(p, "lockfile");
    }
    for p in [
        ".env",
        ".config/x.toml",
        "src/.hidden/mod.py",
        ".cargo-ok",
        "a/.b/c/d.py",
    ] {
        refused_by(p, "dot-directory");
    }
}

#[test]
fn case_tricks_do_not_slip_past() {
    refused_by(".GITHUB/workflows/x.yml", "ci-config");
    refused_by(".GitHub/Workflows/X.yml", "ci-config");
    refused_by("Cargo.LOCK", "lockfile");
    refused_by("CARGO.TOML", "dependency-manifest");
    refused_by("PACKAGE.json", "dependency-manifest");
    refused_by("jenkinsfile", "ci-config");
    refused_by("agents.md", "editor-agent-config");
}

#[test]
fn traversal_and_absolute_paths_are_refused() {
    refused_by("../outside.py", "path-traversal");
    refused_by("src/../../etc/passwd", "path-traversal");
    refused_by("src/../Cargo.toml", "path-traversal");
    refused_by("src\\..\\..\\x.py", "path-traversal");
    refused_by("src/.. /x.py", "path-traversal");
    refused_by("src/.../x.py", "path-traversal");
    refused_by("src/\u{FF0E}\u{FF0E}/x.py", "path-traversal");
    refused_by("/etc/passwd", "path-absolute");
    refused_by("\\\\server\\share\\x", "path-absolute");
    refused_by("C:\\Windows\\x", "path-absolute");
    refused_by("c:x", "path-absolute");
    // Found by the path_checker fuzz target: a drive prefix behind a `.` component.
    refused_by("./l:/", "path-absolute");
    refused_by(".//c:/x.py", "path-absolute");
    refused_by("./~/x.py", "path-absolute");
    refused_by("\u{3000}/", "path-blank-component");
    refused_by("src/ /x.py", "path-blank-component");
    refused_by("   ", "path-blank-component");
    refused_by("~/.ssh/id_rsa", "path-absolute");
    refused_by("", "path-empty");
    refused_by("./", "path-empty");
    refused_by("src/x\0.py", "path-control-character");
    refused_by("src/x\n.py", "path-control-character");
}

#[test]
fn backslashes_are_separators() {
    refused_by(".github\\workflows\\ci.yml", "ci-config");
    refused_by("sub\\Cargo.lock", "lockfile");
    assert_eq!(normalize_path("src\\a\\b.py").unwrap(), "src/a/b.py");
    assert_eq!(normalize_path("./src//a/./b.py").unwrap(), "src/a/b.py");
}

#[test]
fn unicode_lookalikes_and_invisibles() {
    // Full-width letters and dots, Cyrillic and Greek look-alikes.
    refused_by("\u{FF0E}github/workflows/ci.yml", "ci-config");
    refused_by(".gith\u{0443}b/workflows/ci.yml", "dot-directory");
    refused_by("C\u{0430}rgo.lock", "lockfile");
    refused_by("\u{0421}argo.toml", "dependency-manifest");
    refused_by("package\u{2024}json", "dependency-manifest");
    refused_by("Cargo.lock.", "lockfile");
    refused_by("Cargo.lock ", "lockfile");
    refused_by("src/a\u{200B}b.py", "path-invisible-character");
    refused_by("src/\u{202E}yp.txt", "path-invisible-character");
    refused_by("src/x\u{FEFF}.py", "path-invisible-character");
    let d = Policy::default().unwrap().check_write("C\u{0430}rgo.lock");
    match d {
        WriteDecision::Refused { reason, .. } => assert!(reason.contains("reads as"), "{reason}"),
        other => panic!("{other:?}"),
    }
    // Ordinary non-ASCII names stay writable.
    assert!(
        Policy::default()
            .unwrap()
            .check_write("docs/caf\u{00E9}.md")
            .is_allowed()
    );
}

#[cfg(unix)]
#[test]
fn symlinks_into_refused_classes_or_outside_are_refused() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("repo");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(root.join(".github/workflows")).unwrap();
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(root.join("Cargo.lock"), "").unwrap();
    symlink(root.join(".github"), root.join("src/gh")).unwrap();
    symlink("../Cargo.lock", root.join("src/lock.txt")).unwrap();
    symlink(&outside, root.join("src/out")).unwrap();
    symlink("/etc/passwd", root.join("src/passwd.txt")).unwrap();
    symlink("nowhere/at/all", root.join("src/dangling.py")).unwrap();
    symlink("src", root.join("code")).unwrap();
    symlink("..", root.join("src/up")).unwrap();
    let policy = Policy::default().unwrap();
    let check = |p: &str| policy.check_write_in_root(&root, p);
    assert_eq!(check("src/gh/workflows/ci.yml").rule(), Some("ci-config"));
    assert_eq!(check("src/lock.txt").rule(), Some("lockfile"));
    assert_eq!(check("src/out/x.py").rule(), Some("symlink-escape"));
    assert_eq!(check("src/passwd.txt").rule(), Some("symlink-escape"));
    assert_eq!(check("src/dangling.py").rule(), Some("symlink-dangling"));
    assert_eq!(check("src/up/Cargo.lock").rule(), Some("lockfile"));
    assert_eq!(check("src/up/src/x.py"), WriteDecision::Allowed);
    // A symlink staying inside and out of refused classes is fine; so are new files.
    assert_eq!(check("code/new_module.py"), WriteDecision::Allowed);
    assert_eq!(check("src/new/dir/x.py"), WriteDecision::Allowed);
    // Lexical refusals still apply first.
    assert_eq!(check("../outside/x.py").rule(), Some("path-traversal"));
    // The lexical check alone cannot see links.
    assert!(policy.check_write("src/gh/workflows/ci.yml").is_allowed());
    std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
    std::fs::write(root.join(".git/hooks/pre-commit"), "#!/bin/sh\n").unwrap();
    std::fs::hard_link(root.join(".git/hooks/pre-commit"), root.join("src/hook.sh")).unwrap();
    assert_eq!(check("src/hook.sh").rule(), Some("hard-link"));
    let missing = policy.check_write_in_root(&dir.path().join("missing"), "src/x.py");
    assert_eq!(missing.rule(), Some("root-unreadable"));
}

#[test]
fn the_spellings_of_each_ecosystem_are_refused() {
    for (path, class) in [
        ("requirements.in", "dependency-manifest"),
        ("requirements/dev.in", "dependency-manifest"),
        ("pylock.toml", "lockfile"),
        ("pylock.dev.toml", "lockfile"),
        ("go.work.sum", "lockfile"),
        ("App/Package.resolved", "lockfile"),
        ("gradle/libs.versions.toml", "dependency-manifest"),
        ("Directory.Build.props", "dependency-manifest"),
        ("NuGet.Config", "dependency-manifest"),
        ("CLAUDE.local.md", "editor-agent-config"),
        ("team.code-workspace", "editor-agent-config"),
        ("buildspec.yml", "ci-config"),
        ("deploy/buildspec.yaml", "ci-config"),
        ("pnpm-workspace.yaml", "dependency-manifest"),
    ] {
        refused_by(path, class);
    }
}

#[test]
fn a_path_too_long_to_review_is_refused() {
    let long = format!("src/{}.py", "a/".repeat(300));
    refused_by(&long, "path-too-long");
    let component = format!("src/{}.py", "x".repeat(300));
    refused_by(&component, "path-too-long");
    assert_eq!(
        Policy::default()
            .unwrap()
            .check_write(&format!("src/{}.py", "x".repeat(200))),
        WriteDecision::Allowed
    );
}
