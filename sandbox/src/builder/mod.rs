//! The caller's side: the builder, spawning the helper, streaming output, the summary.
//!
//! Layering, lowest first; a module imports only from those listed before it:
//! - `grants`: resolving and checking the `ro`, `rw` and overlay paths.
//! - `bind_at`: checking the grants at another path (`ro_at`, `rw_at`).
//! - `report`: what a run collected, and the helper's report lines made into a [`RunSummary`].
//! - `run`: the built [`Sandbox`] and its runs: overlay scratch space, spawning the helper,
//!   streaming its output.
//! - this file: the [`SandboxBuilder`], its defaults, and `build()`, which checks the
//!   configuration into a [`Sandbox`].

mod bind_at;
mod grants;
mod report;
mod run;

pub use run::{Captured, Sandbox};

use crate::egress::EgressServe;
use crate::error::{Error, Result};
use crate::spec::{BindAtSpec, Limits};
use crate::summary::RunSummary;
use crate::types::NetworkAccess;
use bind_at::{bind_at_source, bind_at_target, check_bind_at};
use grants::{
    absolute_inside, check_granted_once, check_handed_over, check_overlay_chars,
    check_read_only_fifos, existing_dir, grant,
};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `PATH` the child gets when the caller sets none.
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The host paths [`SandboxBuilder::system_ro`] grants read-only (those that exist): programs,
/// libraries and the dynamic loader's configuration, nothing with secrets.
pub const SYSTEM_RO: [&str; 10] = [
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/alternatives",
];

/// The host files that name resolution and TLS read, granted read-only (those that exist) when
/// a run is given the host's network ([`SandboxBuilder::network`] with [`NetworkAccess::Host`]).
/// Of `/etc/ssl` and `/etc/pki` only the certificate parts: their `private` directories hold
/// keys, which the child could read (for a root caller the host's root-owned files are the
/// child's own).
pub const NETWORK_ETC_RO: [&str; 15] = [
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/nsswitch.conf",
    "/etc/host.conf",
    "/etc/gai.conf",
    "/etc/services",
    "/etc/protocols",
    "/etc/ssl/certs",
    "/etc/ssl/cert.pem",
    "/etc/ssl/openssl.cnf",
    "/etc/ca-certificates",
    "/etc/pki/ca-trust",
    "/etc/pki/tls/certs",
    "/etc/pki/tls/cert.pem",
    "/etc/pki/tls/openssl.cnf",
];

/// Of [`NETWORK_ETC_RO`], what a run with a loopback of its own ([`NetworkAccess::Loopback`])
/// is granted (those that exist): the service and protocol tables, so that `http` names port
/// 80 as it does on the host. Nothing that configures name resolution: there is none.
pub const LOOPBACK_ETC_RO: [&str; 2] = ["/etc/services", "/etc/protocols"];

/// Of [`NETWORK_ETC_RO`], the files that configure name resolution: a run behind the egress
/// proxy ([`NetworkAccess::Proxy`]) gets the rest (the certificates TLS checks against and the
/// service tables), not these, since the proxy resolves names itself.
pub const RESOLVER_ETC: [&str; 5] = [
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/nsswitch.conf",
    "/etc/host.conf",
    "/etc/gai.conf",
];

/// Configures a sandbox. Every setter takes and returns the builder, so calls chain.
///
/// Defaults: no granted paths, no network ([`NetworkAccess::None`]), 300 s timeout, 2048 MB
/// memory, 512 processes, 16 MiB of output, 1024 open files, 1024 MB per file, 2 s drain
/// deadline, `PATH` = [`DEFAULT_PATH`], `HOME` = `/tmp`, working directory = the first rw
/// root (else the first overlay, else the private `/tmp`), helper = the dedicated helper
/// binary beside the current executable (else the current executable), degraded runs refused.
#[derive(Debug, Clone)]
pub struct SandboxBuilder {
    ro: Vec<PathBuf>,
    rw: Vec<PathBuf>,
    overlays: Vec<(PathBuf, PathBuf, Option<PathBuf>)>,
    /// (host source, inside target, writable).
    binds_at: Vec<(PathBuf, PathBuf, bool)>,
    network: NetworkAccess,
    timeout: Duration,
    memory_mb: u64,
    max_procs: u32,
    max_output: u64,
    open_files: u64,
    file_size_mb: u64,
    tmp_size_mb: u64,
    env: Vec<(String, String)>,
    pass_env: Vec<String>,
    cwd: Option<PathBuf>,
    allow_degraded: bool,
    helper_exe: Option<PathBuf>,
    drain_timeout: Duration,
    egress: Option<EgressServe>,
    services: Vec<crate::services::Service>,
}

impl Default for SandboxBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl SandboxBuilder {
    /// A builder with the defaults listed on the type.
    pub fn new() -> Self {
        SandboxBuilder {
            ro: Vec::new(),
            rw: Vec::new(),
            overlays: Vec::new(),
            binds_at: Vec::new(),
            network: NetworkAccess::None,
            timeout: Duration::from_secs(300),
            memory_mb: 2048,
            max_procs: 512,
            max_output: 16 * 1024 * 1024,
            open_files: 1024,
            file_size_mb: 1024,
            tmp_size_mb: 512,
            env: Vec::new(),
            pass_env: Vec::new(),
            cwd: None,
            allow_degraded: false,
            helper_exe: None,
            drain_timeout: Duration::from_secs(2),
            egress: None,
            services: Vec::new(),
        }
    }

    /// Grant `path` read-only (at the same path inside).
    pub fn ro(mut self, path: impl Into<PathBuf>) -> Self {
        self.ro.push(path.into());
        self
    }

    /// Grant `path` read-write (at the same path inside).
    pub fn rw(mut self, path: impl Into<PathBuf>) -> Self {
        self.rw.push(path.into());
        self
    }

    /// Show the host path `source` (a file or a directory) read-only at `target`, an absolute
    /// path inside the sandbox that may lie inside an overlay or another grant (a prepared
    /// `node_modules` at `<worktree>/node_modules` over an overlay of the worktree). It is
    /// mounted after the overlays and grants it lies in.
    ///
    /// A missing mount point is created only in the sandbox's own filesystems: its root, its
    /// private `/tmp`, or an overlay (in the overlay's upper directory, which is discarded, or
    /// kept by [`Self::overlay_keep`] as an empty directory or file). Inside a `ro`/`rw` grant
    /// or another grant at another path, a host filesystem, the mount point must already
    /// exist on the host, of the same kind as `source`: [`Self::build`] refuses otherwise
    /// rather than create it on the host. A `target` that is relative or contains `..` is
    /// refused with [`Error::Config`]; one reached through a symlink inside the sandbox is
    /// refused when the run sets up.
    pub fn ro_at(mut self, source: impl Into<PathBuf>, target: impl Into<PathBuf>) -> Self {
        self.binds_at.push((source.into(), target.into(), false));
        self
    }

    /// Like [`Self::ro_at`], but read-write: writes at `target` land in the host's `source`.
    pub fn rw_at(mut self, source: impl Into<PathBuf>, target: impl Into<PathBuf>) -> Self {
        self.binds_at.push((source.into(), target.into(), true));
        self
    }

    /// Network access of the command. [`NetworkAccess::None`] (the default) gives it a
    /// network namespace of its own with only loopback. [`NetworkAccess::Host`] shares the
    /// host's network, for steps that must download (`pip install --target`, `npm ci`,
    /// `cargo fetch`): no network namespace, no landlock TCP rules, IPv4 and IPv6 sockets
    /// allowed by seccomp, and [`NETWORK_ETC_RO`] granted read-only where it exists and no
    /// grant already covers it. Every other layer stays, and the layers left out on purpose
    /// are not reported missing; [`RunSummary::network`] records the access.
    pub fn network(mut self, access: NetworkAccess) -> Self {
        self.network = access;
        self
    }

    /// The egress proxy a run with [`NetworkAccess::Proxy`] is given (required with it,
    /// ignored otherwise).
    pub fn egress(mut self, serve: EgressServe) -> Self {
        self.egress = Some(serve);
        self
    }

    /// Grant the host's program and library directories read-only ([`SYSTEM_RO`]).
    pub fn system_ro(mut self) -> Self {
        for path in SYSTEM_RO {
            if Path::new(path).symlink_metadata().is_ok() {
                self.ro.push(PathBuf::from(path));
            }
        }
        self
    }

    /// Show `lower` read-write at `mountpoint`; writes land in a scratch directory that is
    /// deleted after the run, never in `lower`.
    pub fn overlay(mut self, lower: impl Into<PathBuf>, mountpoint: impl Into<PathBuf>) -> Self {
        self.overlays.push((lower.into(), mountpoint.into(), None));
        self
    }

    /// Like [`Self::overlay`], but the writes are kept: they land in `scratch/upper` (the
    /// overlay's work directory is `scratch/work`). `scratch` must be on a filesystem with user
    /// extended attributes and is created if missing.
    pub fn overlay_keep(
        mut self,
        lower: impl Into<PathBuf>,
        mountpoint: impl Into<PathBuf>,
        scratch: impl Into<PathBuf>,
    ) -> Self {
        self.overlays
            .push((lower.into(), mountpoint.into(), Some(scratch.into())));
        self
    }

    /// A service started inside the sandbox before the command, behind the same layers (a
    /// database server for the suite), waited for until its readiness check passes, its
    /// variables given to the command; killed with everything else when the command exits.
    /// Services start in the order added; their wait counts in the timeout.
    pub fn service(mut self, service: crate::services::Service) -> Self {
        self.services.push(service);
        self
    }

    /// Wall-clock limit; when it passes the whole sandbox is killed.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Memory limit in MB (the cgroup memory controller; the address-space rlimit only where
    /// that controller is missing, since it breaks runtimes that reserve address space).
    pub fn memory_mb(mut self, mb: u64) -> Self {
        self.memory_mb = mb;
        self
    }

    /// Process (task) limit (cgroup pids controller and `RLIMIT_NPROC`).
    pub fn max_procs(mut self, n: u32) -> Self {
        self.max_procs = n;
        self
    }

    /// Bytes of output (stdout and stderr together) passed on; the rest is counted and dropped.
    pub fn max_output(mut self, bytes: u64) -> Self {
        self.max_output = bytes;
        self
    }

    /// Open-file limit (`RLIMIT_NOFILE`).
    pub fn open_files(mut self, n: u64) -> Self {
        self.open_files = n;
        self
    }

    /// Largest file the child may write, in MB (`RLIMIT_FSIZE`).
    pub fn max_file_size_mb(mut self, mb: u64) -> Self {
        self.file_size_mb = mb;
        self
    }

    /// Size of the private `/tmp` tmpfs, in MB.
    pub fn tmp_size_mb(mut self, mb: u64) -> Self {
        self.tmp_size_mb = mb;
        self
    }

    /// Set a variable in the child's (otherwise empty) environment.
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }

    /// Pass the caller's variable `name` through, if it is set.
    pub fn pass_env(mut self, name: impl Into<String>) -> Self {
        self.pass_env.push(name.into());
        self
    }

    /// Working directory of the child (a path inside the sandbox). Default: the first rw grant
    /// that is a directory, else the first overlay's mount point, else `/tmp`.
    pub fn cwd(mut self, path: impl Into<PathBuf>) -> Self {
        self.cwd = Some(path.into());
        self
    }

    /// Run even when layers are missing; the summary lists them. Off by default.
    pub fn allow_degraded(mut self, allow: bool) -> Self {
        self.allow_degraded = allow;
        self
    }

    /// The binary to execute as the set-up helper (its `main` must call
    /// [`crate::helper::run_if_requested`] first). Default: the dedicated
    /// [`crate::helper::HELPER_BIN`] beside the current executable if there is one, else the
    /// current executable itself.
    pub fn helper_exe(mut self, path: impl Into<PathBuf>) -> Self {
        self.helper_exe = Some(path.into());
        self
    }

    /// How long to keep reading output after the sandbox is gone.
    pub fn drain_timeout(mut self, timeout: Duration) -> Self {
        self.drain_timeout = timeout;
        self
    }

    /// Check the configuration and resolve the paths. For a root caller, whose command runs
    /// as its own host identity ([`crate::host_identity`]), every read-write grant must be
    /// owned by that identity ([`crate::HostIdentity::hand_over`]).
    pub fn build(self) -> Result<Sandbox> {
        let current_exe = std::env::current_exe().map_err(|source| Error::Helper {
            exe: PathBuf::from("(current executable)"),
            source,
        })?;
        let (helper_exe, fallback_exe) = match self.helper_exe {
            Some(p) => (p, None),
            None => match crate::helper::find_dedicated(&current_exe) {
                Some(dedicated) => (dedicated, Some(current_exe)),
                None => (current_exe, None),
            },
        };
        if self.timeout.is_zero() || self.memory_mb == 0 || self.max_procs == 0 {
            return Err(Error::Config(
                "timeout, memory and max_procs must be greater than zero".into(),
            ));
        }
        for service in &self.services {
            if service.argv.first().is_none_or(|p| p.is_empty()) {
                return Err(Error::Config(format!(
                    "service {:?} has no command",
                    service.name
                )));
            }
            if matches!(service.ready, crate::services::Readiness::Port { .. })
                && self.network == NetworkAccess::None
            {
                return Err(Error::Config(format!(
                    "service {:?} is checked on a loopback port, but the network is none: give the command a loopback (network loopback or proxy)",
                    service.name
                )));
            }
        }
        let mut ro = Vec::new();
        for p in &self.ro {
            grant(p, &mut ro)?;
        }
        let mut rw = Vec::new();
        for p in &self.rw {
            if absolute_inside(p)? == Path::new("/") {
                return Err(Error::Path {
                    path: p.clone(),
                    reason: "the whole filesystem cannot be granted read-write; grant the \
                             directories the command writes to"
                        .into(),
                });
            }
            grant(p, &mut rw)?;
        }
        check_granted_once(&ro, &rw)?;
        let mut overlays: Vec<(PathBuf, PathBuf, Option<PathBuf>)> = Vec::new();
        for (lower, mountpoint, keep) in &self.overlays {
            let lower = existing_dir(lower)?;
            let mountpoint = absolute_inside(mountpoint)?;
            let keep = keep.as_ref().map(|k| absolute_inside(k)).transpose()?;
            for p in [&lower, &mountpoint] {
                check_overlay_chars(p)?;
            }
            let refuse = |reason: &str| Error::Path {
                path: mountpoint.clone(),
                reason: format!("cannot be an overlay mountpoint: {reason}"),
            };
            if mountpoint == Path::new("/") {
                return Err(refuse(
                    "the sandbox's root is its own; mount the overlay on a directory",
                ));
            }
            if ["/proc", "/dev"].iter().any(|f| mountpoint.starts_with(f)) {
                return Err(refuse("/proc and /dev are provided by the sandbox"));
            }
            if overlays.iter().any(|o| o.1 == mountpoint) {
                return Err(refuse("another --overlay already mounts there"));
            }
            if ro.contains(&mountpoint) || rw.contains(&mountpoint) {
                return Err(refuse("the same path is also granted with --ro or --rw"));
            }
            overlays.push((lower, mountpoint, keep));
        }
        let mut binds_at: Vec<BindAtSpec> = Vec::new();
        for (source, target, writable) in &self.binds_at {
            let target = bind_at_target(target)?;
            let source = bind_at_source(source)?;
            binds_at.push(BindAtSpec {
                source,
                target,
                writable: *writable,
            });
        }
        let network_files: Vec<&str> = match self.network {
            NetworkAccess::Host => NETWORK_ETC_RO.to_vec(),
            NetworkAccess::Proxy => NETWORK_ETC_RO
                .into_iter()
                .filter(|f| !RESOLVER_ETC.contains(f))
                .collect(),
            NetworkAccess::Loopback => LOOPBACK_ETC_RO.to_vec(),
            NetworkAccess::None => Vec::new(),
        };
        if !network_files.is_empty() {
            // The explicit grants win: a file under a granted or mounted path is not bound
            // again (nor refused as granted twice).
            let wanted: Vec<&Path> = network_files
                .iter()
                .map(Path::new)
                .filter(|path| path.symlink_metadata().is_ok())
                .filter(|path| {
                    !ro.iter()
                        .chain(&rw)
                        .chain(overlays.iter().map(|o| &o.1))
                        .chain(binds_at.iter().map(|b| &b.target))
                        .any(|g| path.starts_with(g))
                })
                .collect();
            for path in wanted {
                // Best effort, as "where it exists" promises: a file whose symlink points
                // somewhere no grant may reach (say /proc) is left out, not a refusal.
                let mut granted = ro.clone();
                if grant(path, &mut granted).is_ok() {
                    ro = granted;
                }
            }
            check_granted_once(&ro, &rw)?;
        }
        if self.network == NetworkAccess::Proxy && self.egress.is_none() {
            return Err(Error::Config(
                "the proxy network needs an egress proxy to hand its listener to \
                 (SandboxBuilder::egress)"
                    .into(),
            ));
        }
        for i in 0..binds_at.len() {
            check_bind_at(i, &binds_at, &ro, &rw, &overlays)?;
        }
        let host = crate::identity::host_identity()?;
        let writable = rw
            .iter()
            .chain(binds_at.iter().filter(|b| b.writable).map(|b| &b.source));
        for path in writable {
            check_handed_over(path, &host)?;
        }
        if host.is_caller() {
            check_read_only_fifos(&ro, &rw, &overlays, &binds_at)?;
        }
        let cwd_given = self.cwd.as_deref().map(absolute_inside).transpose()?;
        for path in ro
            .iter()
            .chain(&rw)
            .chain(overlays.iter().flat_map(|o| [&o.0, &o.1]))
            .chain(binds_at.iter().flat_map(|b| [&b.source, &b.target]))
            .chain(&cwd_given)
        {
            if path.to_str().is_none() {
                return Err(Error::Path {
                    path: path.clone(),
                    reason: "is not valid UTF-8; the sandbox can only grant paths whose names \
                             are UTF-8 (rename it or grant a directory above it)"
                        .into(),
                });
            }
        }
        let mut env: Vec<(String, String)> = Vec::new();
        for name in &self.pass_env {
            if let Ok(value) = std::env::var(name) {
                env.push((name.clone(), value));
            }
        }
        env.extend(self.env.iter().cloned());
        for (name, default) in [("PATH", DEFAULT_PATH), ("HOME", "/tmp")] {
            if !env.iter().any(|(k, _)| k == name) {
                env.push((name.into(), default.into()));
            }
        }
        // Last definition wins, then sort for a deterministic environment.
        let mut dedup: std::collections::BTreeMap<String, String> = Default::default();
        for (k, v) in env {
            if !valid_env_name(&k) {
                return Err(Error::Config(format!(
                    "invalid environment variable name {k:?}"
                )));
            }
            dedup.insert(k, v);
        }
        let cwd = match cwd_given {
            Some(c) => c,
            None => rw
                .iter()
                .find(|p| p.is_dir())
                .cloned()
                .or_else(|| overlays.first().map(|o| o.1.clone()))
                // The private /tmp (also HOME): a directory the command can list and write,
                // which `/`, the read-only root of mount points, is not.
                .unwrap_or_else(|| PathBuf::from("/tmp")),
        };
        let timeout_ms = self.timeout.as_millis().min(u64::MAX as u128) as u64;
        Ok(Sandbox {
            helper_exe,
            fallback_exe,
            host,
            ro,
            rw,
            overlays,
            binds_at,
            network: self.network,
            env: dedup.into_iter().collect(),
            cwd,
            limits: Limits {
                timeout_ms,
                memory_mb: self.memory_mb,
                max_procs: self.max_procs,
                cpu_secs: self.timeout.as_secs() + 1,
                open_files: self.open_files,
                file_size_mb: self.file_size_mb,
                tmp_size_mb: self.tmp_size_mb,
            },
            allow_degraded: self.allow_degraded,
            max_output: self.max_output,
            drain_timeout: self.drain_timeout,
            egress: self.egress,
            services: self.services,
        })
    }

    /// Build and run, streaming output to the given writers. See [`Sandbox::run_streaming`].
    pub fn run_streaming<S: AsRef<str>>(
        self,
        argv: &[S],
        stdout: &mut dyn Write,
        stderr: &mut dyn Write,
    ) -> Result<RunSummary> {
        self.build()?.run_streaming(argv, stdout, stderr)
    }

    /// Build and run, capturing output. See [`Sandbox::run_captured`].
    pub fn run_captured<S: AsRef<str>>(self, argv: &[S]) -> Result<Captured> {
        self.build()?.run_captured(argv)
    }
}

/// Whether `name` is a variable name the sandbox passes: letters, digits and `_`, not starting
/// with a digit.
pub fn valid_env_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests;
