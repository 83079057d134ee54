//! What the caller sends to the helper, and what the helper reports back.
//!
//! The caller writes one [`Spec`] as JSON on the helper's stdin; the helper and its children
//! write [`Report`] lines (JSON, one per line, each below `PIPE_BUF` so writes are atomic) on
//! file descriptor [`REPORT_FD`].

use crate::identity::HostIdentity;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::PathBuf;

/// The file descriptor on which the helper writes its reports.
pub(crate) const REPORT_FD: i32 = 3;

/// One protection layer of the sandbox, as named in summaries, errors and `airlock doctor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    /// A new user namespace (the child's root is not the host's).
    UserNamespace,
    /// A new mount namespace with a root built from the granted paths only.
    MountNamespace,
    /// A new PID namespace (the child cannot see or signal host processes).
    PidNamespace,
    /// A new network namespace with only a loopback interface.
    NetNamespace,
    /// A new IPC namespace.
    IpcNamespace,
    /// A new UTS namespace (own hostname).
    UtsNamespace,
    /// Landlock filesystem rules: access only beneath the granted roots.
    LandlockFs,
    /// Landlock network rules: TCP bind and connect denied (landlock ABI >= 4).
    LandlockNet,
    /// Landlock scoping: abstract unix sockets and signals confined to the sandbox (ABI >= 6).
    LandlockScope,
    /// The seccomp syscall filter.
    Seccomp,
    /// `no_new_privs`: exec cannot gain privileges (setuid, file capabilities).
    NoNewPrivs,
    /// Every capability dropped, bounding and ambient sets cleared.
    DropCapabilities,
    /// The child runs as an unprivileged uid, inside and on the host: the caller's own for a
    /// non-root caller, a host identity of its own (never root) for a root caller.
    UnprivilegedUid,
    /// Resource limits (CPU time, address space, open files, file size, processes).
    Rlimits,
    /// The cgroup `pids` controller caps the number of processes of the whole tree.
    CgroupPids,
    /// The cgroup `memory` controller caps and measures the memory of the whole tree.
    CgroupMemory,
    /// Copy-on-write overlay mounts (overlayfs inside the user namespace).
    Overlay,
    /// Every read-only directory grant shown through a read-only overlayfs, whose FIFOs and
    /// unix sockets are its own: the host's in a granted directory cannot be reached.
    GrantOverlay,
}

impl Layer {
    /// The kernel feature behind the layer, as a person would search for it.
    pub fn kernel_feature(self) -> &'static str {
        match self {
            Layer::UserNamespace => "user namespaces (CLONE_NEWUSER)",
            Layer::MountNamespace => "mount namespaces (CLONE_NEWNS)",
            Layer::PidNamespace => "PID namespaces (CLONE_NEWPID)",
            Layer::NetNamespace => "network namespaces (CLONE_NEWNET)",
            Layer::IpcNamespace => "IPC namespaces (CLONE_NEWIPC)",
            Layer::UtsNamespace => "UTS namespaces (CLONE_NEWUTS)",
            Layer::LandlockFs => "landlock (filesystem access control)",
            Layer::LandlockNet => "landlock ABI >= 4 (TCP bind/connect control)",
            Layer::LandlockScope => "landlock ABI >= 6 (abstract unix socket and signal scoping)",
            Layer::Seccomp => "seccomp filter mode (SECCOMP_SET_MODE_FILTER)",
            Layer::NoNewPrivs => "no_new_privs (PR_SET_NO_NEW_PRIVS)",
            Layer::DropCapabilities => "capability dropping (PR_CAPBSET_DROP, capset)",
            Layer::UnprivilegedUid => "an unprivileged uid (nested user namespace uid map)",
            Layer::Rlimits => "resource limits (setrlimit)",
            Layer::CgroupPids => "cgroup pids controller",
            Layer::CgroupMemory => "cgroup memory controller",
            Layer::Overlay => "overlayfs in a user namespace",
            Layer::GrantOverlay => {
                "read-only overlayfs over directory grants (host FIFOs and sockets unreachable)"
            }
        }
    }

    /// Whether a run is refused when this layer is missing (unless degraded runs are allowed).
    /// The cgroup layers are optional because rlimits stand in for them.
    pub fn required(self) -> bool {
        !matches!(self, Layer::CgroupPids | Layer::CgroupMemory)
    }

    /// Every layer, in a fixed order.
    pub const ALL: [Layer; 18] = [
        Layer::UserNamespace,
        Layer::MountNamespace,
        Layer::PidNamespace,
        Layer::NetNamespace,
        Layer::IpcNamespace,
        Layer::UtsNamespace,
        Layer::LandlockFs,
        Layer::LandlockNet,
        Layer::LandlockScope,
        Layer::Seccomp,
        Layer::NoNewPrivs,
        Layer::DropCapabilities,
        Layer::UnprivilegedUid,
        Layer::Rlimits,
        Layer::CgroupPids,
        Layer::CgroupMemory,
        Layer::Overlay,
        Layer::GrantOverlay,
    ];

    /// Parse the snake_case name used in JSON.
    pub fn from_name(name: &str) -> Option<Layer> {
        Layer::ALL.into_iter().find(|l| l.name() == name)
    }

    /// The snake_case name used in JSON and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Layer::UserNamespace => "user_namespace",
            Layer::MountNamespace => "mount_namespace",
            Layer::PidNamespace => "pid_namespace",
            Layer::NetNamespace => "net_namespace",
            Layer::IpcNamespace => "ipc_namespace",
            Layer::UtsNamespace => "uts_namespace",
            Layer::LandlockFs => "landlock_fs",
            Layer::LandlockNet => "landlock_net",
            Layer::LandlockScope => "landlock_scope",
            Layer::Seccomp => "seccomp",
            Layer::NoNewPrivs => "no_new_privs",
            Layer::DropCapabilities => "drop_capabilities",
            Layer::UnprivilegedUid => "unprivileged_uid",
            Layer::Rlimits => "rlimits",
            Layer::CgroupPids => "cgroup_pids",
            Layer::CgroupMemory => "cgroup_memory",
            Layer::Overlay => "overlay",
            Layer::GrantOverlay => "grant_overlay",
        }
    }
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} [{}]", self.kernel_feature(), self.name())
    }
}

/// Whether the sandboxed command may use the network. Serialised as `"none"`, `"loopback"`,
/// `"proxy"` or `"host"`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NetworkAccess {
    /// No network (the default): a new network namespace with only loopback, TCP bind and
    /// connect denied by landlock, and a seccomp filter that refuses inet sockets.
    #[default]
    None,
    /// A network namespace of its own with `lo` up and inet sockets allowed: a test suite's
    /// own servers on 127.0.0.1 or `::1` work, and nothing else is reachable (there is no
    /// other interface and no route). Landlock's TCP rules are left out on purpose
    /// ([`Layer::LandlockNet`] is neither applied nor missing): the namespace is the boundary.
    Loopback,
    /// [`NetworkAccess::Loopback`] plus one way out: the sandbox's init listens on a loopback
    /// port inside and hands that listener to the caller's egress proxy
    /// ([`crate::SandboxBuilder::egress`]), which runs outside the sandbox, resolves names
    /// itself and admits what its allowlist says. The command gets `HTTP_PROXY`,
    /// `HTTPS_PROXY`, `ALL_PROXY` (and lower-case forms) pointing there, `NO_PROXY` for
    /// loopback, and the certificate files TLS reads ([`crate::NETWORK_ETC_RO`] less
    /// [`crate::RESOLVER_ETC`]), but no resolver configuration.
    Proxy,
    /// The host's network, only where an operator asks for it explicitly: no network
    /// namespace, no landlock TCP rules, inet sockets allowed by seccomp, and the files name
    /// resolution and TLS read ([`crate::NETWORK_ETC_RO`]) granted read-only. Every other
    /// layer stays; the two layers left out on purpose ([`Layer::NetNamespace`],
    /// [`Layer::LandlockNet`]) are neither applied nor missing.
    Host,
}

impl NetworkAccess {
    /// Every access, narrowest first.
    pub const ALL: [NetworkAccess; 4] = [
        NetworkAccess::None,
        NetworkAccess::Loopback,
        NetworkAccess::Proxy,
        NetworkAccess::Host,
    ];

    /// The name used in JSON and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            NetworkAccess::None => "none",
            NetworkAccess::Loopback => "loopback",
            NetworkAccess::Proxy => "proxy",
            NetworkAccess::Host => "host",
        }
    }

    /// Parse a name of [`NetworkAccess::name`].
    pub fn from_name(name: &str) -> Option<NetworkAccess> {
        NetworkAccess::ALL.into_iter().find(|a| a.name() == name)
    }

    /// Whether a layer is left out on purpose with this access (never applied, never
    /// missing): landlock's TCP rules whenever inet sockets are allowed, and the network
    /// namespace too with [`NetworkAccess::Host`].
    pub fn waives(self, layer: Layer) -> bool {
        match self {
            NetworkAccess::None => false,
            NetworkAccess::Loopback | NetworkAccess::Proxy => layer == Layer::LandlockNet,
            NetworkAccess::Host => matches!(layer, Layer::NetNamespace | Layer::LandlockNet),
        }
    }

    /// Whether the command may create IPv4 and IPv6 sockets.
    pub fn inet_sockets(self) -> bool {
        self != NetworkAccess::None
    }
}

impl fmt::Display for NetworkAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

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
    pub services: Vec<crate::services::Service>,
}

/// One line the helper (or its children) writes on [`REPORT_FD`].
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
    /// (with [`NetworkAccess::Proxy`]). The listener itself travels with this line as an
    /// `SCM_RIGHTS` descriptor.
    Proxy { port: u16 },
    /// Written by the supervising helper once the sandbox is gone.
    Supervisor {
        timed_out: bool,
        peak_memory_bytes: Option<u64>,
        init_signal: Option<i32>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layer_names_round_trip_and_match_serde() {
        for layer in Layer::ALL {
            assert_eq!(Layer::from_name(layer.name()), Some(layer));
            let json = serde_json::to_string(&layer).unwrap();
            assert_eq!(json, format!("\"{}\"", layer.name()));
        }
        assert_eq!(Layer::from_name("nope"), None);
    }

    #[test]
    fn only_the_cgroup_layers_are_optional() {
        let optional: Vec<Layer> = Layer::ALL.into_iter().filter(|l| !l.required()).collect();
        assert_eq!(optional, vec![Layer::CgroupPids, Layer::CgroupMemory]);
    }

    #[test]
    fn network_access_serialises_by_name_and_waives_only_the_network_layers() {
        for access in NetworkAccess::ALL {
            assert_eq!(
                serde_json::to_string(&access).unwrap(),
                format!("\"{}\"", access.name())
            );
            assert_eq!(NetworkAccess::from_name(access.name()), Some(access));
        }
        for access in [NetworkAccess::Loopback, NetworkAccess::Proxy] {
            let waived: Vec<Layer> = Layer::ALL
                .into_iter()
                .filter(|l| access.waives(*l))
                .collect();
            assert_eq!(waived, vec![Layer::LandlockNet]);
            assert!(access.inet_sockets());
        }
        assert!(!NetworkAccess::None.inet_sockets());
        assert_eq!(NetworkAccess::default(), NetworkAccess::None);
        let waived: Vec<Layer> = Layer::ALL
            .into_iter()
            .filter(|l| NetworkAccess::Host.waives(*l))
            .collect();
        assert_eq!(waived, vec![Layer::NetNamespace, Layer::LandlockNet]);
        assert!(
            !Layer::ALL
                .into_iter()
                .any(|l| NetworkAccess::None.waives(l))
        );
    }
}
