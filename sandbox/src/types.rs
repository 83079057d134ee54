//! The sandbox's shared vocabulary, below everything else: the protection layers, the network
//! grants, and the few numbers every process of a run agrees on (the report descriptor, the
//! command's id inside, the devices of its `/dev`). It imports nothing of the crate.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The file descriptor on which the helper writes its reports.
pub(crate) const REPORT_FD: i32 = 3;

/// The uid and gid the command runs as inside the sandbox.
pub(crate) const SANDBOX_ID: u32 = 1000;

/// Device nodes bind-mounted (read-only: writable as devices, but no chmod or chown reaches
/// the host's inode) from the host into the child's `/dev`.
pub(crate) const DEVICES: [&str; 5] = ["null", "zero", "full", "random", "urandom"];

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
