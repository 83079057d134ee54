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

/// A map from an ASCII character to a look-alike.
type LookAlike = fn(char) -> Option<char>;

/// Replace every ASCII character of `path` by the look-alike `map` gives, if any.
fn spelled_with(path: &str, map: LookAlike) -> String {
    path.chars().map(|c| map(c).unwrap_or(c)).collect()
}

/// Mathematical bold letters (U+1D41A.. for a-z, U+1D400.. for A-Z).
fn math_bold(c: char) -> Option<char> {
    match c {
        'a'..='z' => char::from_u32(0x1D41A + (c as u32 - 'a' as u32)),
        'A'..='Z' => char::from_u32(0x1D400 + (c as u32 - 'A' as u32)),
        _ => None,
    }
}

/// Full-width forms of every printable ASCII character but `/`.
fn full_width(c: char) -> Option<char> {
    if c == '/' || !('!'..='~').contains(&c) {
        return None;
    }
    char::from_u32(c as u32 + 0xFEE0)
}

/// Cyrillic letters that look like Latin ones.
fn cyrillic(c: char) -> Option<char> {
    Some(match c {
        'a' => '\u{0430}',
        'c' => '\u{0441}',
        'e' => '\u{0435}',
        'i' => '\u{0456}',
        'j' => '\u{0458}',
        'o' => '\u{043E}',
        'p' => '\u{0440}',
        's' => '\u{0455}',
        'x' => '\u{0445}',
        'y' => '\u{0443}',
        'C' => '\u{0421}',
        _ => return None,
    })
}

/// Greek letters that look like Latin ones.
fn greek(c: char) -> Option<char> {
    Some(match c {
        'o' => '\u{03BF}',
        'i' => '\u{03B9}',
        'y' => '\u{03B3}',
        'C' => '\u{03F9}',
        'T' => '\u{03A4}',
        'p' => '\u{03C1}',
        _ => return None,
    })
}

#[test]
fn confusable_skeletons_fold_every_script_onto_the_ascii_rule() {
    let policy = Policy::default().unwrap();
    let alphabets: [(&str, LookAlike); 4] = [
        ("mathematical bold", math_bold),
        ("full-width", full_width),
        ("Cyrillic", cyrillic),
        ("Greek", greek),
    ];
    for path in [
        ".github/workflows/ci.yml",
        "setup.py",
        "Cargo.toml",
        "conftest.py",
        "pkg/requirements-dev.txt",
        "web/package-lock.json",
    ] {
        let ascii = policy.check_write(path);
        let rule = ascii.rule().expect("the ASCII spelling is refused");
        for (name, map) in &alphabets {
            let spelled = spelled_with(path, *map);
            assert_ne!(spelled, path, "{name} has a look-alike in {path}");
            assert_eq!(
                policy.check_write(&spelled).rule(),
                Some(rule),
                "{name} spelling {spelled:?} of {path}"
            );
        }
    }
    // U+A731 LATIN LETTER SMALL CAPITAL S, outside the old hand-made table.
    refused_by("\u{A731}etup.py", "dependency-manifest");
    refused_by("pkg/\u{A731}etup.py", "dependency-manifest");
    // Digits and capitals that read as letters: `0` as `o`, `1` and `I` as `l`.
    refused_by("c0nftest.py", "test-infrastructure");
    refused_by("Cargo.tom1", "dependency-manifest");
    refused_by("Cargo.torn1", "dependency-manifest");
    refused_by("SETUP.PY", "dependency-manifest");
    // Look-alike dots and trailing dots still fold.
    refused_by("setup\u{2024}py.", "dependency-manifest");
    // The reason shows the escaped path, what it reads as and the glob it imitates.
    match policy.check_write("\u{A731}etup.py") {
        WriteDecision::Refused { reason, .. } => {
            assert!(
                reason.contains("\"\\u{a731}etup.py\" reads as \"setup.py\""),
                "{reason}"
            );
            assert!(reason.contains("\"**/setup.py\""), "{reason}");
            assert!(reason.contains("UTS #39"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn ordinary_and_non_latin_paths_stay_writable_under_folding() {
    let policy = Policy::default().unwrap();
    for path in [
        "src/main.rs",
        "docs/rn.md",
        "docs/m.md",
        "src/models/mlp.py",
        "src/lib/l10n.rs",
        "docs/\u{65E5}\u{672C}\u{8A9E}.md",
        "docs/\u{041F}\u{0440}\u{0438}\u{0432}\u{0435}\u{0442}.md",
        "src/\u{03B1}\u{03BB}\u{03C6}\u{03B1}.py",
        "docs/caf\u{00E9}.md",
        "src/setup_tools.py",
        "src/cargo.rs",
        "tests/test_conftest_parsing.py",
        "src/workflows/ci.py",
        "src/100%.md",
    ] {
        assert_eq!(policy.check_write(path), WriteDecision::Allowed, "{path}");
    }
}

/// The symlinks of a tree, as the broker's tree gives them.
fn links<'a>(tree: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
    move |path: &str| {
        tree.iter()
            .find(|(link, _)| *link == path)
            .map(|(_, target)| (*target).to_owned())
    }
}

#[test]
fn a_symlink_must_stay_in_the_tree_and_out_of_refused_classes() {
    let policy = Policy::default().unwrap();
    let none = links(&[]);
    let check = |link: &str, target: &str| policy.check_symlink(link, target, &none);
    for (link, target) in [
        ("src/passwd.txt", "/etc/passwd"),
        ("src/passwd.txt", "../../../../etc/passwd"),
        ("passwd", ".."),
        ("src/up", "../.."),
        ("src/wf", "../.github/workflows/ci.yml"),
        ("src/wf", "../.github/workflows"),
        ("src/ci", "../ci"),
        ("docs/lock", "../Cargo.lock"),
        ("docs/manifest", "../\u{A731}etup.py"),
        ("docs/conf.py", "../tests/conftest.py"),
        ("src/root", ".."),
        ("top", "."),
        ("src/empty", ""),
        ("src/long", &"a/".repeat(300)),
        ("src/x", "a\u{200B}b.py"),
    ] {
        let decision = check(link, target);
        assert_eq!(
            decision.rule(),
            Some("symlink-target"),
            "{link} -> {target:?}"
        );
    }
    // In-tree links to ordinary files and directories are fine, dangling ones too.
    for (link, target) in [
        ("docs/README.md", "../README.md"),
        ("src/util.py", "helpers/util.py"),
        ("src/latest", "v2"),
        ("a/b/c/d", "../../../src/main.rs"),
        ("src/new.py", "not/there/yet.py"),
        ("src/self", "./lib.rs"),
    ] {
        assert_eq!(
            check(link, target),
            WriteDecision::Allowed,
            "{link} -> {target}"
        );
    }
    // The reason names the link and its target, escaped.
    match check("src/p\u{0430}sswd", "/etc/\u{202E}dwssap") {
        WriteDecision::Refused { reason, .. } => {
            assert!(reason.contains("\"src/p\\u{430}sswd\""), "{reason}");
            assert!(reason.contains("\"/etc/\\u{202e}dwssap\""), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    match check("src/wf", "../.github/workflows/ci.yml") {
        WriteDecision::Refused { reason, .. } => {
            assert!(reason.contains("\".github/workflows/ci.yml\""), "{reason}");
            assert!(reason.contains("rule ci-config"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    // The link's own path is checked like any write.
    assert_eq!(
        check(".github/x", "../src/main.rs").rule(),
        Some("ci-config")
    );
}

#[test]
fn a_symlink_is_resolved_through_the_other_links_of_its_tree() {
    let policy = Policy::default().unwrap();
    let tree = [
        ("lib", "vendor/lib"),
        ("vendor/lib", "/usr/lib"),
        ("conf", "config"),
        ("config", ".github"),
        ("loop/a", "b"),
        ("loop/b", "a"),
        ("docs", "site/docs"),
    ];
    let at = links(&tree);
    let check = |link: &str, target: &str| policy.check_symlink(link, target, &at);
    assert_eq!(check("src/l", "../lib/x.so").rule(), Some("symlink-target"));
    assert_eq!(
        check("src/c", "../conf/workflows/ci.yml").rule(),
        Some("symlink-target")
    );
    assert_eq!(check("loop/c", "a").rule(), Some("symlink-target"));
    // `..` after a link climbs from where the link leads, as the kernel does.
    assert_eq!(
        check("x", "docs/../../../etc").rule(),
        Some("symlink-target")
    );
    assert_eq!(check("x", "docs/../index.md"), WriteDecision::Allowed);
}

#[test]
fn binary_or_non_utf8_content_is_refused_and_text_is_not() {
    use airlock_policies::{BINARY_SNIFF_BYTES, check_content, is_binary};
    assert!(is_binary(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR"));
    assert!(!is_binary(b"plain text\n"));
    let mut late_nul = vec![b'a'; BINARY_SNIFF_BYTES];
    late_nul.push(0);
    assert!(
        !is_binary(&late_nul),
        "git looks at the first 8000 bytes only"
    );
    late_nul[BINARY_SNIFF_BYTES - 1] = 0;
    assert!(is_binary(&late_nul));
    match check_content("assets/logo.png", b"\x89PNG\0") {
        WriteDecision::Refused { rule, reason } => {
            assert_eq!(rule, "binary-file");
            assert!(reason.contains("\"assets/logo.png\""), "{reason}");
            assert!(reason.contains("offset 4"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        check_content("src/latin1.py", b"name = 'caf\xe9'\n").rule(),
        Some("binary-file")
    );
    assert_eq!(
        check_content("src/ok.py", "name = 'caf\u{e9}'\n".as_bytes()),
        WriteDecision::Allowed
    );
    assert_eq!(check_content("empty.txt", b""), WriteDecision::Allowed);
}

#[test]
fn manifests_lockfiles_ci_and_agent_files_of_every_ecosystem_are_refused() {
    for (path, class) in [
        // Python
        ("pixi.toml", "dependency-manifest"),
        ("poetry.toml", "dependency-manifest"),
        ("pip.ini", "dependency-manifest"),
        ("pytest.toml", "test-infrastructure"),
        // JavaScript / TypeScript
        ("bunfig.toml", "dependency-manifest"),
        (".yarn/releases/yarn-4.1.0.cjs", "dependency-manifest"),
        ("turbo.json", "dependency-manifest"),
        ("packages/ui/.node-version", "dependency-manifest"),
        (".pnp.cjs", "lockfile"),
        (".mocharc.json", "test-infrastructure"),
        // Rust
        ("rust-toolchain", "dependency-manifest"),
        ("deny.toml", "ci-config"),
        // Go
        ("go.work", "dependency-manifest"),
        ("vendor/modules.txt", "lockfile"),
        ("Gopkg.toml", "dependency-manifest"),
        // Java / Kotlin
        ("gradlew", "dependency-manifest"),
        ("gradlew.bat", "dependency-manifest"),
        ("mvnw", "dependency-manifest"),
        (
            ".mvn/wrapper/maven-wrapper.properties",
            "dependency-manifest",
        ),
        ("gradle/publishing.gradle.kts", "dependency-manifest"),
        (
            "gradle/wrapper/gradle-wrapper.properties",
            "dependency-manifest",
        ),
        // Swift
        ("Package@swift-5.9.swift", "dependency-manifest"),
        ("Kingfisher.podspec", "dependency-manifest"),
        ("App.xcodeproj/project.pbxproj", "dependency-manifest"),
        (
            "App.xcworkspace/xcshareddata/swiftpm/Package.resolved",
            "dependency-manifest",
        ),
        (".swift-version", "dependency-manifest"),
        ("Brewfile", "dependency-manifest"),
        ("Cartfile.resolved", "lockfile"),
        ("fastlane/Fastfile", "ci-config"),
        // Ruby
        ("gems.rb", "dependency-manifest"),
        ("gems.locked", "lockfile"),
        ("Gemfile.lock", "lockfile"),
        ("spec/spec_helper.rb", "test-infrastructure"),
        ("Rakefile", "test-infrastructure"),
        ("Dangerfile", "ci-config"),
        // .NET
        ("Directory.Packages.props", "dependency-manifest"),
        ("paket.dependencies", "dependency-manifest"),
        ("paket.lock", "lockfile"),
        (".config/dotnet-tools.json", "dependency-manifest"),
        ("App.slnx", "dependency-manifest"),
        ("build/Signing.targets", "dependency-manifest"),
        ("tests/ci.runsettings", "test-infrastructure"),
        // Agents and editors
        (".gemini/settings.json", "editor-agent-config"),
        ("WARP.md", "editor-agent-config"),
        ("opencode.json", "editor-agent-config"),
    ] {
        refused_by(path, class);
    }
}

#[test]
fn ordinary_sources_of_every_ecosystem_stay_writable() {
    let policy = Policy::default().unwrap();
    for path in [
        "src/pkg/module.py",
        "src/index.ts",
        "web/src/App.tsx",
        "src/lib.rs",
        "build.rs",
        "cmd/tool/main.go",
        "internal/vendor.go",
        "src/main/java/a/Parser.java",
        "src/main/kotlin/a/Parser.kt",
        "buildSrc/src/main/kotlin/Conventions.kt",
        "Sources/App/main.swift",
        "Sources/App/Package.swift.md",
        "lib/widget.rb",
        "app/models/user.rb",
        "lib/tasks/db.rake",
        "src/App/Program.cs",
        "src/App/Props.cs",
        "Makefile",
        "tsconfig.json",
        "docs/renovate.md",
    ] {
        assert_eq!(policy.check_write(path), WriteDecision::Allowed, "{path}");
    }
}

#[test]
fn a_binary_file_at_the_pin_may_be_deleted_but_not_changed() {
    use airlock_policies::check_change;
    let png: &[u8] = b"\x89PNG\0\0";
    assert_eq!(
        check_change("logo.png", Some(png), None),
        WriteDecision::Allowed
    );
    let changed = check_change("logo.png", Some(png), Some(b"now text\n"));
    match changed {
        WriteDecision::Refused { rule, reason } => {
            assert_eq!(rule, "binary-file");
            assert!(reason.contains("at the pin"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        check_change("new.bin", None, Some(png)).rule(),
        Some("binary-file")
    );
    assert_eq!(
        check_change("src/a.py", Some(b"x = 1\n"), Some(b"x = 2\n")),
        WriteDecision::Allowed
    );
}
