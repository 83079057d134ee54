use airlock_policies::{Language, Policy, is_test_path, language_of, rust_test_regions};

#[test]
fn test_files_per_language() {
    let p = Policy::default().unwrap();
    for path in [
        "tests/test_parse.py",
        "pkg/test_io.py",
        "pkg/io_test.py",
        "conftest.py",
        "pkg/tests/util.py",
        "tests/it/main.rs",
        "crates/a/tests/x.rs",
        "src/parser/tests.rs",
        "src/a.test.js",
        "src/a.spec.ts",
        "src/__tests__/a.tsx",
        "test/server.mjs",
        "pkg/a_test.go",
        "src/test/java/a/B.java",
        "FooTest.java",
        "FooTests.java",
        "FooIT.java",
    ] {
        assert!(p.is_test_path(path), "{path} should be a test");
        assert!(is_test_path(path));
    }
    for path in [
        "src/parse.py",
        "src/lib.rs",
        "src/a.js",
        "src/a.ts",
        "pkg/a.go",
        "src/main/java/a/B.java",
        "README.md",
        "src/contest.py",
        "src/latest.ts",
    ] {
        assert!(!p.is_test_path(path), "{path} should not be a test");
    }
}

#[test]
fn languages_by_extension() {
    assert_eq!(language_of("a/b.py"), Some(Language::Python));
    assert_eq!(language_of("a/b.RS"), Some(Language::Rust));
    assert_eq!(language_of("a.tsx"), Some(Language::Typescript));
    assert_eq!(language_of("a.mjs"), Some(Language::Javascript));
    assert_eq!(language_of("a.go"), Some(Language::Go));
    assert_eq!(language_of("A.java"), Some(Language::Java));
    assert_eq!(language_of("A.kt"), Some(Language::Kotlin));
    assert_eq!(language_of("build.gradle.kts"), Some(Language::Kotlin));
    assert_eq!(language_of("Makefile"), None);
    assert_eq!(language_of("a.md"), None);
}

#[test]
fn kotlin_tests_are_recognised_as_kotlin() {
    let p = Policy::default().unwrap();
    for path in ["src/test/kotlin/a/ParserTest.kt", "ParserTest.kt"] {
        assert!(p.is_test_path(path), "{path} should be a test");
    }
    assert!(!p.is_test_path("src/main/kotlin/a/Parser.kt"));
}

#[test]
fn rust_cfg_test_modules_and_test_functions() {
    let src = r##"//! crate doc
pub fn add(a: i32, b: i32) -> i32 {
    let s = "#[cfg(test)] mod fake { }";
    let c = '{';
    a + b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds() {
        let r = r#"}"#;
        assert_eq!(add(1, 2), 3);
    }
}

pub fn after() {}

#[test]
fn loose_test() {
    assert!(true);
}

#[cfg(test)]
mod external;
"##;
    let regions = rust_test_regions(src);
    assert_eq!(regions, vec![(8, 17), (21, 24), (26, 27)]);
    assert_eq!(
        rust_test_regions("#![cfg(test)]\nfn a() {}\nfn b() {}\n"),
        vec![(1, 3)]
    );
    assert!(rust_test_regions("fn main() {}\n").is_empty());
    // Unbalanced input never panics and runs to the end.
    assert_eq!(
        rust_test_regions("#[cfg(test)]\nmod t {\n fn x() {\n"),
        vec![(1, 3)]
    );
}
