//! What the helper and its children report back to the caller: [`Report`] lines (JSON, one per
//! line, each below `PIPE_BUF` so writes are atomic) on file descriptor [`crate::types::REPORT_FD`], written
//! by [`report`], and the [`Failure`] every set-up step ends in when it cannot go on.

use crate::sys;
use crate::types::Layer;
use serde::{Deserialize, Serialize};

/// One line the helper (or its children) writes on [`crate::types::REPORT_FD`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum Report {
    /// Layers a set-up stage applied or had to skip.
    Layers {
        applied: Vec<Layer>,
        missing: Vec<Layer>,
        #[serde(default)]
        landlock_abi: Option<u32>,
    },
    /// A set-up step failed; the run is aborted.
    Failed {
        feature: Option<Layer>,
        stage: String,
        detail: String,
    },
    /// The target exited (written by the sandbox's init).
    Exited {
        code: Option<i32>,
        signal: Option<i32>,
        /// Peak resident set of the command's processes (the largest one), from `wait4`.
        #[serde(default)]
        max_rss_bytes: Option<u64>,
    },
    /// The loopback port inside on which the sandbox's init listens for the egress proxy
    /// (with [`crate::types::NetworkAccess::Proxy`]). The listener itself travels with this line as an
    /// `SCM_RIGHTS` descriptor.
    Proxy { port: u16 },
    /// Written by the supervising helper once the sandbox is gone.
    Supervisor {
        timed_out: bool,
        peak_memory_bytes: Option<u64>,
        init_signal: Option<i32>,
    },
}

/// A set-up step that failed inside the helper.
#[derive(Debug)]
pub(crate) struct Failure {
    /// Set when the failure means a kernel feature is missing (a refusal).
    pub feature: Option<Layer>,
    pub stage: String,
    pub detail: String,
}

impl Failure {
    pub(crate) fn setup(stage: impl Into<String>, err: std::io::Error) -> Failure {
        Failure {
            feature: None,
            stage: stage.into(),
            detail: err.to_string(),
        }
    }

    pub(crate) fn missing(feature: Layer, stage: impl Into<String>, detail: String) -> Failure {
        Failure {
            feature: Some(feature),
            stage: stage.into(),
            detail,
        }
    }

    pub(crate) fn into_report(self) -> Report {
        Report::Failed {
            feature: self.feature,
            stage: self.stage,
            detail: self.detail,
        }
    }
}

/// Write one report line on the report descriptor. Lines stay below `PIPE_BUF`, so concurrent
/// writers (supervisor, init, target) never interleave.
pub(crate) fn report(msg: &Report) {
    if let Ok(mut line) = serde_json::to_vec(msg) {
        line.truncate(4000);
        line.push(b'\n');
        let _ = sys::write_all(sys::report_fd(), &line);
    }
}
