//! Arbitrary strings through path normalisation and the write policy: no panic, and nothing
//! allowed may be absolute, traverse upwards, or change its verdict once normalised.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(raw) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(policy) = airlock_policies::Policy::builtin() else {
        return;
    };
    let decision = policy.check_write(raw);
    if decision.is_allowed() {
        let normalized = match airlock_policies::normalize_path(raw) {
            Ok(n) => n,
            Err(refusal) => panic!("allowed but not normalisable: {refusal:?}"),
        };
        assert!(!normalized.starts_with('/'));
        assert!(!normalized.split('/').any(|c| c == ".." || c.is_empty()));
        assert!(!normalized.contains('\\'));
        assert!(
            policy.check_write(&normalized).is_allowed(),
            "verdict changed after normalisation: {raw:?} -> {normalized:?}"
        );
    }
});
