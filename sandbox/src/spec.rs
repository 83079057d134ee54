//! What the caller sends to the helper: one [`Spec`], as JSON on the helper's stdin. What the
//! helper reports back is [`crate::report::Report`].

use crate::identity::HostIdentity;
use crate::services::Service;
// The spec's fields speak of layers and network grants; its readers may name them through it.
pub(crate) use crate::types::{Layer, NetworkAccess};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// One host path shown at another path inside the sandbox (`ro_at` / `rw_at`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct BindAtSpec {
    /// The host path (canonical).
    pub source: PathBuf,
    /// Where the child sees it.
    pub target: PathBuf,
    /// Read-write instead of read-only.
    pub writable: bool,
}

/// One copy-on-write mount: `lower` seen read-write at `mountpoint`, writes landing in `upper`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct OverlaySpec {
    pub lower: PathBuf,
    pub mountpoint: PathBuf,
    pub upper: PathBuf,
    pub work: PathBuf,
}

/// Resource limits handed to the helper.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Limits {
    pub timeout_ms: u64,
    pub memory_mb: u64,
    pub max_procs: u32,
    pub cpu_secs: u64,
    pub open_files: u64,
    pub file_size_mb: u64,
    pub tmp_size_mb: u64,
}

/// Everything the helper needs to set up and run one command.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Spec {
    pub argv: Vec<String>,
    pub ro: Vec<PathBuf>,
    pub rw: Vec<PathBuf>,
    pub overlays: Vec<OverlaySpec>,
    /// Host paths shown at other paths, mounted after the grants and overlays they lie in.
    pub binds_at: Vec<BindAtSpec>,
    pub network: NetworkAccess,
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    pub limits: Limits,
    pub allow_degraded: bool,
    /// Layers to treat as unavailable (testing the refusal paths on a host that has them all).
    pub pretend_missing: Vec<Layer>,
    /// Who the command is on the host.
    pub host: HostIdentity,
    /// Services started before the command, inside.
    #[serde(default)]
    pub services: Vec<Service>,
}
