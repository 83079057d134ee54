//! The arguments are an `open_pr` call of the schema in `airlock-schemas`, parsed once into
//! its type; every later stage reads the typed call. A violation is SCHEMA_INVALID, the one
//! retryable refusal.

use airlock_schemas::OpenPr;

use super::refusal::{Refusal, Stage, Subject};
use crate::error::Error;

/// Parse `args` into the call. The refusal names every violation; the weakenings behind a
/// bounded digest field are added by the digest stage ([`super::digest::weakenings_behind`]).
pub fn parse(args: &str) -> Stage<OpenPr> {
    match airlock_schemas::parse::<OpenPr>(args) {
        Ok(call) => Ok(call),
        Err(err) => {
            let violations = err.violations();
            if violations.is_empty() {
                return Err(Error::Dependency(err.to_string()).into());
            }
            Err(Refusal::Schema {
                subject: Subject::OpenPr,
                violations,
                weakenings: Vec::new(),
            }
            .into())
        }
    }
}
