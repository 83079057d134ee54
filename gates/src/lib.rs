//! airlock-gates: the organisation's own rules as WebAssembly components, run by the broker on
//! every `open_pr` between the digest recomputation and the witness.
//!
//! It owns the gate interface (`wit/gate.wit`, the `airlock:gate/gate` world), building a
//! component from a gate's file (`compile`), the host that runs one (`runtime`: fuel, a memory
//! cap, a timeout, a fresh instance per call), the read-only view of the changed files a gate is
//! given (`view`), and the examples a gate ships, checked when it is loaded (`examples`).
//!
//! A gate must never get a capability beyond reading the two trees: the linker holds no socket
//! or HTTP interface, the WASI context no environment, arguments or other directory, the clock
//! is fixed and the random bytes too. Whatever stops a gate from answering is a deny, never an
//! allow. This crate decides nothing about a queue, writes no audit record and holds no
//! credential; the broker does those with what [`LoadedGate::check`] returns.

pub mod compile;
pub mod error;
pub mod examples;
mod request;
mod runtime;
mod view;

use std::path::{Path, PathBuf};

pub use error::{Error, Result};
pub use examples::{Example, ExampleOutcome, Section};
pub use request::{FileStatus, GateFile, GateRequest, Verdict, VerdictKind};
pub use runtime::{
    DEFAULT_GATE_FUEL, EPOCH_TICK, FIXED_WALL_CLOCK, GateEngine, GateFailure, GateLimits, GateRun,
    LoadedGate, MAX_VERDICT_TEXT_BYTES,
};

/// One gate as the operator configured it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateSpec {
    /// Its name: unique per repository, named in every refusal and audit record.
    pub name: String,
    /// The component (`.wasm`), or WebAssembly text (`.wat`) compiled at load.
    pub component: PathBuf,
    /// Its examples file.
    pub examples: PathBuf,
    /// What one call may use.
    pub limits: GateLimits,
}

/// Read, compile and link a gate, then run its examples: any example that does not get its
/// verdict is a load error naming the gate, the example, what it expects and what it got.
pub fn load_gate(engine: &GateEngine, spec: &GateSpec) -> Result<LoadedGate> {
    let (gate, examples) = load_unchecked(engine, spec)?;
    if let Some(failed) = examples::run_examples(&gate, &examples)
        .into_iter()
        .find(|outcome| !outcome.passed)
    {
        return Err(Error::ExampleFailed {
            gate: spec.name.clone(),
            example: failed.name,
            section: failed.section.as_str(),
            expected: failed.expected,
            got: failed.run.verdict.to_string(),
        });
    }
    Ok(gate)
}

/// Read, compile and link a gate and parse its examples without running them (for `gate test`,
/// which shows every example's verdict).
pub fn load_unchecked(engine: &GateEngine, spec: &GateSpec) -> Result<(LoadedGate, Vec<Example>)> {
    let bytes = read(&spec.name, &spec.component)?;
    let component = compile::component_from_source(&bytes).map_err(|message| Error::Build {
        gate: spec.name.clone(),
        path: spec.component.clone(),
        message,
    })?;
    let gate = engine.prepare(&spec.name, &spec.component, &component, spec.limits)?;
    let text = read(&spec.name, &spec.examples)?;
    let text = String::from_utf8(text).map_err(|_| Error::Examples {
        gate: spec.name.clone(),
        path: spec.examples.clone(),
        message: "not UTF-8".to_owned(),
    })?;
    let examples = examples::parse_examples(&text).map_err(|message| Error::Examples {
        gate: spec.name.clone(),
        path: spec.examples.clone(),
        message,
    })?;
    Ok((gate, examples))
}

fn read(gate: &str, path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|source| Error::Read {
        gate: gate.to_owned(),
        path: path.to_owned(),
        source,
    })
}
