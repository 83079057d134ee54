//! Arbitrary bytes through typed intake of every contract: no panic, and whatever is accepted
//! serialises back to JSON that the same schema accepts again.
#![no_main]

use airlock_schemas::{BrokerError, Contract, JudgeVerdict, OpenPr, Outcome, ReaderDigest, parse};
use libfuzzer_sys::fuzz_target;

fn round_trip<T: Contract>(text: &str) {
    match parse::<T>(text) {
        Ok(value) => {
            let json = match serde_json::to_value(&value) {
                Ok(json) => json,
                Err(e) => panic!("accepted value does not serialise: {e}"),
            };
            if let Err(e) = airlock_schemas::from_value::<T>(&json) {
                panic!("accepted value fails its own schema after a round trip: {e}");
            }
        }
        Err(err) => {
            // Every refusal must be expressible as SCHEMA_INVALID with at least one pointer.
            let refusal = BrokerError::schema_invalid(&err.violations());
            assert!(refusal.retryable);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    round_trip::<OpenPr>(text);
    round_trip::<Outcome>(text);
    round_trip::<ReaderDigest>(text);
    round_trip::<JudgeVerdict>(text);
    round_trip::<BrokerError>(text);
});
