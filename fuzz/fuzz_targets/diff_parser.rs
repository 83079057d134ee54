//! Arbitrary text through the unified-diff parser, the digest (all detectors) and the Rust
//! test-module lexer: none may panic, and a parsed digest must be internally consistent.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let Ok(policy) = airlock_policies::Policy::builtin() else {
        return;
    };
    if let Ok(report) = policy.digest_from_unified_diff(&text) {
        let mut sorted = report.files_changed.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(
            sorted, report.files_changed,
            "files_changed must be sorted and unique"
        );
        let removed = report
            .findings
            .iter()
            .filter(|f| f.kind == airlock_policies::MoveKind::AssertionRemoved)
            .count() as u64;
        assert_eq!(removed, report.assertions_removed);
        assert!(report.assertions_removed <= report.deletions);
    }
    let _ = airlock_policies::rust_test_regions(&text);
});
