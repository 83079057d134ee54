//! The organisation's gates, after the digest and before the witness so a denied diff never
//! costs a test run: each shown the call, the recomputed digest and the changed files' two
//! sides from the broker's own clone, each verdict a `gate_verdict` audit record. The first
//! deny (a gate's own, or a failure: trap, fuel, memory, timeout) refuses the diff as
//! POLICY_VIOLATION naming the gate; flags and routes go with the queue item.

use airlock_audit::Event;

use super::digest::Digested;
use super::refusal::{Refusal, Stage};
use crate::gates::{GateNote, Gates};
use crate::service::Journal;
use airlock_protocol::RunRegistration;

/// A digested change set every gate let through, with their flags and routes.
pub struct Gated {
    /// The digested change set.
    pub digested: Digested,
    /// The gates' flags and routes, in the order the gates ran.
    pub notes: Vec<GateNote>,
}

/// Run `run.repository`'s gates in order on the broker's own change set.
pub fn check(
    gates: &Gates,
    journal: &dyn Journal,
    run: &RunRegistration,
    digested: Digested,
) -> Stage<Gated> {
    let gates = gates.of(&run.repository);
    if gates.is_empty() {
        return Ok(Gated {
            digested,
            notes: Vec::new(),
        });
    }
    let checkout = &digested.allowed.checkout;
    let request = airlock_gates::GateRequest::for_open_pr(
        &run.repository,
        &checkout.call,
        digested.computed.clone(),
        crate::gates::gate_files(&checkout.repo, checkout.pin, &digested.allowed.changes)?,
    );
    let mut notes = Vec::new();
    for gate in gates {
        let outcome = gate.check(&request);
        journal.record(
            &run.run_id,
            Event::GateVerdict {
                gate: gate.name().to_owned(),
                digest: gate.digest().to_owned(),
                verdict: outcome.verdict.kind().as_str().to_owned(),
                message: outcome.verdict.message().map(str::to_owned),
                failure: outcome.failure.as_ref().map(|f| f.code().to_owned()),
                fuel_consumed: outcome.fuel_consumed,
            },
        )?;
        match outcome.verdict {
            airlock_gates::Verdict::Allow => {}
            airlock_gates::Verdict::Deny(reason) => {
                return Err(Refusal::GateDenied {
                    gate: gate.name().to_owned(),
                    digest: gate.digest().to_owned(),
                    reason,
                }
                .into());
            }
            verdict => notes.push(GateNote {
                gate: gate.name().to_owned(),
                digest: gate.digest().to_owned(),
                verdict,
            }),
        }
    }
    Ok(Gated { digested, notes })
}
