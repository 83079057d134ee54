//! What can stop a gate from being loaded: an unreadable or invalid component, an import the
//! host never provides, an examples file that does not parse, or an example the gate gets
//! wrong. A gate that misbehaves while deciding is not an error: it is a deny
//! ([`crate::GateFailure`]).

use std::path::PathBuf;

/// A gate that cannot be loaded, with what the operator needs to fix it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file of the gate (its component or its examples) could not be read.
    #[error("gate {gate}: cannot read {path}: {source}")]
    Read {
        /// The gate's name.
        gate: String,
        /// The file.
        path: PathBuf,
        /// The I/O failure.
        source: std::io::Error,
    },
    /// The WebAssembly text could not be compiled, or the core module could not be made a
    /// component.
    #[error("gate {gate}: cannot build a component from {path}: {message}")]
    Build {
        /// The gate's name.
        gate: String,
        /// The source file.
        path: PathBuf,
        /// What the assembler or the component encoder said.
        message: String,
    },
    /// The component does not compile, does not implement the `airlock:gate/gate` world, or
    /// imports something the host never provides (a socket, HTTP, ...).
    #[error("gate {gate}: {path} is not a usable gate component: {message}")]
    Component {
        /// The gate's name.
        gate: String,
        /// The component file.
        path: PathBuf,
        /// What wasmtime said.
        message: String,
    },
    /// The examples file is not valid.
    #[error("gate {gate}: examples {path}: {message}")]
    Examples {
        /// The gate's name.
        gate: String,
        /// The examples file.
        path: PathBuf,
        /// What is wrong and what was expected.
        message: String,
    },
    /// An example got another verdict than the one it expects.
    #[error(
        "gate {gate}: example {example:?} ({section}) expects {expected}, but the gate answered {got}"
    )]
    ExampleFailed {
        /// The gate's name.
        gate: String,
        /// The example's name.
        example: String,
        /// `match` or `not_match`.
        section: &'static str,
        /// The verdict the example expects.
        expected: String,
        /// The verdict the gate gave (a failure is a deny with its reason).
        got: String,
    },
    /// The WebAssembly engine could not be set up.
    #[error("the gate engine: {0}")]
    Engine(String),
}

/// Result of loading a gate.
pub type Result<T> = std::result::Result<T, Error>;
