//! The crate's error type.

use crate::types::Layer;
use std::path::PathBuf;

/// Why a sandboxed run was refused or could not be set up. A child that runs and exits
/// non-zero is not an error; see [`crate::RunSummary`].
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A layer could not be applied on this host and degraded runs were not allowed.
    #[error(
        "sandbox refused: {feature} is not available ({detail}); {}",
        refusal_advice(*.feature)
    )]
    Refused {
        /// The missing layer.
        feature: Layer,
        /// What the kernel said.
        detail: String,
    },
    /// A granted path does not exist or cannot be used.
    #[error("sandbox path {path}: {reason}")]
    Path {
        /// The path as given by the caller.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The builder was given something it cannot honour (empty argv, zero limit, ...).
    #[error("invalid sandbox configuration: {0}")]
    Config(String),
    /// A set-up step inside the helper failed for a reason other than a missing feature.
    #[error("sandbox set-up failed at {stage}: {detail}")]
    Setup {
        /// The step that failed (for example `mount /usr`, `exec`).
        stage: String,
        /// What the kernel said.
        detail: String,
    },
    /// Starting or talking to the helper process failed.
    #[error("sandbox helper {exe}: {source}")]
    Helper {
        /// The helper executable.
        exe: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The helper binary is from another build of airlock and refused this caller's protocol.
    #[error(
        "sandbox helper {exe} is from another build of airlock; rebuild the workspace (cargo build --workspace) or remove it"
    )]
    HelperMismatch {
        /// The helper executable.
        exe: PathBuf,
    },
    /// Waiting for the helper's output failed.
    #[error("collecting sandbox output: {0}")]
    Collect(#[source] std::io::Error),
    /// Writing the child's output to the caller's writer failed.
    #[error("writing sandbox output: {0}")]
    Output(#[source] std::io::Error),
    /// The helper's report was missing or malformed.
    #[error("sandbox helper protocol: {0}")]
    Protocol(String),
}

/// How to get past a refusal for a missing layer.
fn refusal_advice(feature: Layer) -> &'static str {
    match feature {
        Layer::Overlay => {
            "an overlay is never degraded: run without --overlay, or on a host whose kernel \
             mounts overlayfs in user namespaces"
        }
        _ => "pass --allow-degraded to run without it",
    }
}

/// Result type of this crate.
pub type Result<T> = std::result::Result<T, Error>;
