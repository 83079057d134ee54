//! File tree rendering for prompts: budget, collapse with counts, query expansion.

use airlock_checkout::{FileTreeOptions, render_file_tree};

/// A repository-shaped list of about 3,000 paths.
fn big_repo() -> Vec<String> {
    let mut paths = vec![
        "README.md".to_owned(),
        "pyproject.toml".to_owned(),
        "setup.cfg".to_owned(),
    ];
    for i in 0..312 {
        paths.push(format!("tests/unit/test_case_{i:03}.py"));
    }
    for pkg in ["core", "parser", "rules", "cli", "dialects"] {
        for sub in 0..12 {
            for f in 0..40 {
                paths.push(format!("src/sqlfluff/{pkg}/group{sub:02}/module_{f:02}.py"));
            }
        }
    }
    paths.push("src/sqlfluff/parser/lexer/tokenizer.py".to_owned());
    paths.push("src/sqlfluff/parser/lexer/__init__.py".to_owned());
    for i in 0..150 {
        paths.push(format!("docs/source/page_{i}.rst"));
    }
    paths
}

fn opts(budget: usize, query: Option<&str>) -> FileTreeOptions<'_> {
    FileTreeOptions {
        char_budget: budget,
        query,
    }
}

#[test]
fn large_trees_collapse_into_counts_within_budget() {
    let paths = big_repo();
    assert_eq!(paths.len(), 2_867);
    let out = render_file_tree(&paths, &opts(1_500, None));
    assert!(
        out.chars().count() <= 1_500,
        "{} chars",
        out.chars().count()
    );
    assert!(
        out.contains("tests/\n") || out.contains("tests/ (312 files)\n"),
        "{out}"
    );
    assert!(out.contains("README.md\n"));
    assert!(out.contains("pyproject.toml\n"));
    // Somewhere a directory is collapsed with its count.
    assert!(out.contains(" files)\n"), "{out}");
    // The shallowest levels come first: src/sqlfluff/ is open before any group directory.
    assert!(out.contains("  sqlfluff/\n"), "{out}");
}

#[test]
fn tiny_budget_still_shows_the_top_level() {
    let paths = big_repo();
    let out = render_file_tree(&paths, &opts(95, None));
    assert!(out.chars().count() <= 95);
    assert_eq!(
        out,
        "docs/ (150 files)\nsrc/ (2402 files)\ntests/ (312 files)\nREADME.md\npyproject.toml\nsetup.cfg\n"
    );
}

#[test]
fn crowded_directories_summarise_what_they_hide() {
    let paths = big_repo();
    let out = render_file_tree(&paths, &opts(700, Some("test_case_007 fails")));
    assert!(out.chars().count() <= 700);
    assert!(out.contains("    test_case_007.py\n"), "{out}");
    assert!(
        out.contains("    … 311 more entries (311 files)\n"),
        "{out}"
    );
}

#[test]
fn query_keeps_relevant_subtrees_expanded() {
    let paths = big_repo();
    let budget = 900;
    let plain = render_file_tree(&paths, &opts(budget, None));
    assert!(!plain.contains("tokenizer.py"), "{plain}");
    let query = "The Tokenizer in the lexer splits `a.b` wrongly";
    let focused = render_file_tree(&paths, &opts(budget, Some(query)));
    assert!(focused.chars().count() <= budget);
    assert!(
        focused.contains("      lexer/\n        __init__.py\n        tokenizer.py\n"),
        "{focused}"
    );
    assert!(focused.contains("\n    parser/\n"), "{focused}");
    // Unrelated siblings stay collapsed with counts.
    assert!(focused.contains("    rules/ (480 files)\n"), "{focused}");
    assert!(focused.contains("  source/ (150 files)\n"), "{focused}");
}

#[test]
fn everything_is_listed_when_the_budget_allows() {
    let paths = big_repo();
    let out = render_file_tree(&paths, &opts(1_000_000, None));
    let listed_files = out.lines().filter(|l| !l.trim_end().ends_with('/')).count();
    assert_eq!(listed_files, paths.len());
    assert!(!out.contains(" files)"));
    assert!(!out.contains('…'));
}

#[test]
fn output_is_deterministic_and_independent_of_input_order() {
    let paths = big_repo();
    let mut shuffled = paths.clone();
    shuffled.reverse();
    shuffled.rotate_left(777);
    shuffled.extend(paths.iter().take(50).cloned()); // duplicates are ignored
    for (budget, query) in [
        (300, None),
        (2_000, Some("dialects group03")),
        (10_000, None),
    ] {
        let a = render_file_tree(&paths, &opts(budget, query));
        let b = render_file_tree(&paths, &opts(budget, query));
        let c = render_file_tree(&shuffled, &opts(budget, query));
        assert_eq!(a, b);
        assert_eq!(a, c);
        assert!(a.chars().count() <= budget);
    }
}

#[test]
fn never_exceeds_the_budget() {
    let paths = big_repo();
    for budget in (0..3_000).step_by(97) {
        let out = render_file_tree(&paths, &opts(budget, Some("lexer tokenizer")));
        assert!(
            out.chars().count() <= budget,
            "budget {budget}: {} chars",
            out.chars().count()
        );
    }
}
