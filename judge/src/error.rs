//! Errors of the judge.

use std::path::PathBuf;

/// Everything that can stop the judge.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The judge's model call failed.
    #[error("judge model {model} failed: {source}")]
    Model {
        /// The model spec or name.
        model: String,
        /// The adapter's error.
        #[source]
        source: airlock_model::Error,
    },
    /// A calibration file could not be read.
    #[error("reading {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A calibration case is malformed.
    #[error("calibration case {case}: {message}")]
    BadCase {
        /// The case directory name.
        case: String,
        /// What is wrong and what was expected.
        message: String,
    },
}

/// Result of this crate.
pub type Result<T> = std::result::Result<T, Error>;
