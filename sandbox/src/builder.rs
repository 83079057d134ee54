//! The caller's side: the builder, spawning the helper, streaming output, the summary.

use crate::doctor::pretend_missing_from_env;
use crate::egress::{EgressRun, EgressServe};
use crate::error::{Error, Result};
use crate::spec::{BindAtSpec, Layer, Limits, NetworkAccess, OverlaySpec, Report, Spec};
use crate::summary::RunSummary;
use crate::sys::{self, Signal};
use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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

/// Resolve one granted path into `grants`. A symlink is granted as itself (mirrored) and its
/// target is granted too, with the same access, unless a grant already covers the target (as
/// `/usr` covers `/bin -> usr/bin`).
fn grant(path: &Path, grants: &mut Vec<PathBuf>) -> Result<()> {
    let resolved = grant_path(path)?;
    let is_link = resolved
        .symlink_metadata()
        .is_ok_and(|m| m.file_type().is_symlink());
    if !grants.contains(&resolved) {
        grants.push(resolved.clone());
    }
    if is_link && let Ok(target) = resolved.canonicalize() {
        let covered = grants
            .iter()
            .any(|g| g != &resolved && target.starts_with(g));
        if !covered {
            // Checked like any grant (never /proc or /dev).
            let target = grant_path(&target)?;
            if !grants.contains(&target) {
                grants.push(target);
            }
        }
    }
    Ok(())
}

fn grant_path(path: &Path) -> Result<PathBuf> {
    let abs = absolute_inside(path)?;
    let meta = abs.symlink_metadata().map_err(|e| Error::Path {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    // A symlink is mirrored as a symlink (its target must be granted on its own); anything
    // else is resolved so that a bind never follows a link planted later.
    if meta.file_type().is_symlink() {
        return Ok(abs);
    }
    let canonical = abs.canonicalize().map_err(|e| Error::Path {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    for forbidden in ["/proc", "/dev"] {
        if canonical.starts_with(forbidden) {
            return Err(Error::Path {
                path: path.to_path_buf(),
                reason: format!("{forbidden} is provided by the sandbox and cannot be granted"),
            });
        }
    }
    Ok(canonical)
}

/// Refuse a read-write grant that a root caller's command could not write: it writes as its
/// own host identity, so the granted directory or file must belong to that identity.
fn check_handed_over(path: &Path, host: &crate::identity::HostIdentity) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    if host.is_caller() {
        return Ok(());
    }
    let Ok(meta) = path.symlink_metadata() else {
        return Ok(()); // refused elsewhere
    };
    if meta.file_type().is_symlink() || meta.uid() == host.uid {
        return Ok(());
    }
    Err(Error::Path {
        path: path.to_path_buf(),
        reason: format!(
            "granted read-write, but owned by uid {}: as root, the sandbox's command runs as \
             host uid {} (gid {}) and writes only what that identity owns; hand it over first \
             (`chown {}:{} {}`, or HostIdentity::hand_over), or grant it read-only",
            meta.uid(),
            host.uid,
            host.gid,
            host.uid,
            host.gid,
            path.display()
        ),
    })
}

/// For a non-root caller: refuse a FIFO granted read-only (as a file) inside a place the
/// command may write. Landlock's rule for that place reaches every grant mounted beneath it,
/// the read-only mount does not stop a FIFO's writer, and the command, being the caller, may
/// own the FIFO, so nothing would keep it from writing. (A root caller's command sees such a
/// FIFO through an idmapped mount that maps no owner but its own, so it cannot.)
fn check_read_only_fifos(
    ro: &[PathBuf],
    rw: &[PathBuf],
    overlays: &[(PathBuf, PathBuf, Option<PathBuf>)],
    binds_at: &[BindAtSpec],
) -> Result<()> {
    use std::os::unix::fs::FileTypeExt;
    let is_fifo = |p: &Path| p.symlink_metadata().is_ok_and(|m| m.file_type().is_fifo());
    let tmp = Path::new("/tmp");
    let mut writable: Vec<&Path> = rw
        .iter()
        .map(PathBuf::as_path)
        .filter(|p| p.is_dir())
        .collect();
    writable.extend(overlays.iter().map(|o| o.1.as_path()));
    writable.extend(
        binds_at
            .iter()
            .filter(|b| b.writable && b.source.is_dir())
            .map(|b| b.target.as_path()),
    );
    let tmp_granted = ro.iter().chain(rw).any(|p| p == tmp)
        || binds_at.iter().any(|b| b.target == tmp)
        || overlays.iter().any(|o| o.1 == tmp);
    if !tmp_granted {
        writable.push(tmp);
    }
    let fifos = ro.iter().filter(|p| is_fifo(p)).map(|p| p.as_path()).chain(
        binds_at
            .iter()
            .filter(|b| !b.writable && is_fifo(&b.source))
            .map(|b| b.target.as_path()),
    );
    for fifo in fifos {
        if let Some(place) = writable.iter().find(|w| fifo.starts_with(w) && fifo != **w) {
            let what = if *place == tmp && !tmp_granted {
                "the sandbox's private /tmp".to_string()
            } else {
                place.display().to_string()
            };
            return Err(Error::Path {
                path: fifo.to_path_buf(),
                reason: format!(
                    "a FIFO granted read-only inside {what}, which the command may write: \
                     landlock's rule there reaches every grant beneath it, so the command \
                     could write the FIFO; show it elsewhere (ro_at / --ro-at SRC:/run/NAME)"
                ),
            });
        }
    }
    Ok(())
}

/// Refuse a path granted both read-only and read-write.
fn check_granted_once(ro: &[PathBuf], rw: &[PathBuf]) -> Result<()> {
    match ro.iter().find(|p| rw.contains(p)) {
        Some(both) => Err(Error::Path {
            path: both.clone(),
            reason: "granted both read-only and read-write; grant it once".into(),
        }),
        None => Ok(()),
    }
}

/// The inside path of a grant at another path: absolute, without `..`, not the root, `/proc`
/// or `/dev`.
fn bind_at_target(target: &Path) -> Result<PathBuf> {
    let shape = |problem: &str| {
        Error::Config(format!(
            "grant at another path {}: the path inside {problem}; give an absolute path \
             such as /work/tree/node_modules",
            target.display()
        ))
    };
    if target.as_os_str().is_empty() {
        return Err(shape("is empty"));
    }
    if !target.is_absolute() {
        return Err(shape("is relative"));
    }
    if target
        .components()
        .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err(shape("contains `..`"));
    }
    let target: PathBuf = target.components().collect();
    let refuse = |reason: &str| Error::Path {
        path: target.clone(),
        reason: format!("cannot be the inside path of a grant at another path: {reason}"),
    };
    if target == Path::new("/") {
        return Err(refuse("the sandbox's root is its own"));
    }
    if ["/proc", "/dev"].iter().any(|f| target.starts_with(f)) {
        return Err(refuse("/proc and /dev are provided by the sandbox"));
    }
    Ok(target)
}

/// The host side of a grant at another path: an existing path, resolved (the bind follows
/// symlinks, so it is resolved once, here), never under `/proc` or `/dev`.
fn bind_at_source(source: &Path) -> Result<PathBuf> {
    let canonical = absolute_inside(source)?
        .canonicalize()
        .map_err(|e| Error::Path {
            path: source.to_path_buf(),
            reason: e.to_string(),
        })?;
    for forbidden in ["/proc", "/dev"] {
        if canonical.starts_with(forbidden) {
            return Err(Error::Path {
                path: source.to_path_buf(),
                reason: format!("{forbidden} is provided by the sandbox and cannot be granted"),
            });
        }
    }
    Ok(canonical)
}

/// What holds the mount point of a grant at another path: the mount it lies in.
enum Holder<'a> {
    /// A filesystem of the sandbox's own (its root, its `/tmp`, an overlay): a missing mount
    /// point is created there when the run sets up.
    Sandbox,
    /// A host directory shown inside at `inside`: the mount point must exist on the host.
    Host {
        inside: &'a Path,
        host: &'a Path,
        what: &'static str,
    },
    /// A granted symlink, mirrored as a symlink: a mount point is never reached through one.
    Symlink(&'a Path),
}

/// Check where `binds[index]` is mounted: not where something else is mounted already, and,
/// inside a host grant (another grant at another path included, whatever order they were
/// given in), on a mount point that exists on the host (the sandbox never creates one there)
/// and has the source's kind.
fn check_bind_at(
    index: usize,
    binds: &[BindAtSpec],
    ro: &[PathBuf],
    rw: &[PathBuf],
    overlays: &[(PathBuf, PathBuf, Option<PathBuf>)],
) -> Result<()> {
    let bind = &binds[index];
    let others = || {
        binds
            .iter()
            .enumerate()
            .filter(move |(i, _)| *i != index)
            .map(|(_, b)| b)
    };
    let target = &bind.target;
    let refuse = |reason: String| Error::Path {
        path: target.clone(),
        reason,
    };
    if ro.contains(target) || rw.contains(target) {
        return Err(refuse(
            "is also granted with ro or rw; a grant at another path needs a path of its own".into(),
        ));
    }
    if overlays.iter().any(|o| &o.1 == target) {
        return Err(refuse(
            "is an overlay's mount point; mount the grant inside the overlay instead".into(),
        ));
    }
    if others().any(|b| &b.target == target) {
        return Err(refuse(
            "another grant at another path already mounts there".into(),
        ));
    }
    let mut holders: Vec<(&Path, Holder<'_>)> = Vec::new();
    for (paths, what) in [(ro, "read-only grant"), (rw, "read-write grant")] {
        for g in paths {
            let holder = if g
                .symlink_metadata()
                .is_ok_and(|m| m.file_type().is_symlink())
            {
                Holder::Symlink(g)
            } else {
                Holder::Host {
                    inside: g,
                    host: g,
                    what,
                }
            };
            holders.push((g, holder));
        }
    }
    for o in overlays {
        holders.push((&o.1, Holder::Sandbox));
    }
    for b in others() {
        holders.push((
            &b.target,
            Holder::Host {
                inside: &b.target,
                host: &b.source,
                what: "grant at another path",
            },
        ));
    }
    let tmp = Path::new("/tmp");
    if !holders.iter().any(|(p, _)| *p == tmp) {
        // The private tmpfs.
        holders.push((tmp, Holder::Sandbox));
    }
    let deepest = holders
        .into_iter()
        .filter(|(p, _)| target.starts_with(p) && target != p)
        .max_by_key(|(p, _)| p.components().count())
        .map(|(_, h)| h);
    match deepest {
        None | Some(Holder::Sandbox) => Ok(()),
        Some(Holder::Symlink(link)) => Err(refuse(format!(
            "lies beneath {}, a symlink inside the sandbox; name the path through its target",
            link.display()
        ))),
        Some(Holder::Host { inside, host, what }) => {
            let rest = target.strip_prefix(inside).unwrap_or(target);
            let on_host = host.join(rest);
            let meta = on_host.symlink_metadata().map_err(|_| {
                refuse(format!(
                    "lies inside the {what} {}, so its mount point would have to be created \
                     on the host at {}; the sandbox creates mount points only in its own \
                     filesystems (its root, its /tmp, an overlay): create {} first, or mount \
                     the grant elsewhere",
                    inside.display(),
                    on_host.display(),
                    on_host.display()
                ))
            })?;
            if meta.file_type().is_symlink()
                || on_host.canonicalize().ok().as_deref() != Some(on_host.as_path())
            {
                return Err(refuse(format!(
                    "its mount point {} inside the {what} {} passes through a symlink; a grant \
                     at another path is never mounted through one",
                    on_host.display(),
                    inside.display()
                )));
            }
            let source_is_dir = bind.source.is_dir();
            if meta.is_dir() != source_is_dir {
                let kind = |dir: bool| if dir { "a directory" } else { "a file" };
                return Err(refuse(format!(
                    "its mount point {} is {}, but {} is {}",
                    on_host.display(),
                    kind(meta.is_dir()),
                    bind.source.display(),
                    kind(source_is_dir)
                )));
            }
            Ok(())
        }
    }
}

fn existing_dir(path: &Path) -> Result<PathBuf> {
    let canonical = absolute_inside(path)?
        .canonicalize()
        .map_err(|e| Error::Path {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
    if !canonical.is_dir() {
        return Err(Error::Path {
            path: path.to_path_buf(),
            reason: "not a directory".into(),
        });
    }
    Ok(canonical)
}

fn absolute_inside(path: &Path) -> Result<PathBuf> {
    if path.as_os_str().is_empty() {
        return Err(Error::Path {
            path: path.to_path_buf(),
            reason: "is empty; give a path".into(),
        });
    }
    if !path.is_absolute() {
        return match std::env::current_dir() {
            Ok(cwd) => absolute_inside(&cwd.join(path)),
            Err(e) => Err(Error::Path {
                path: path.to_path_buf(),
                reason: e.to_string(),
            }),
        };
    }
    if path
        .components()
        .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err(Error::Path {
            path: path.to_path_buf(),
            reason: "must not contain `..`".into(),
        });
    }
    Ok(path.to_path_buf())
}

fn check_overlay_chars(path: &Path) -> Result<()> {
    let s = path.to_string_lossy();
    if s.contains(',') || s.contains(':') || s.contains('\\') {
        return Err(Error::Path {
            path: path.to_path_buf(),
            reason: "overlay paths may not contain `,`, `:` or `\\`".into(),
        });
    }
    Ok(())
}

/// Output and summary of a captured run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Captured {
    /// The child's stdout (up to the output cap).
    pub stdout: Vec<u8>,
    /// The child's stderr (up to the output cap).
    pub stderr: Vec<u8>,
    /// What happened.
    pub summary: RunSummary,
}

/// A configured sandbox, ready to run commands. Each run gets fresh namespaces and fresh
/// overlay scratch space; the sandbox itself holds no processes between runs.
#[derive(Debug, Clone)]
pub struct Sandbox {
    helper_exe: PathBuf,
    /// The caller's own binary, used when a dedicated helper turns out to be from another
    /// build (it refuses the protocol with [`crate::helper::PROTOCOL_MISMATCH`]).
    fallback_exe: Option<PathBuf>,
    /// Who the command is on the host.
    host: crate::identity::HostIdentity,
    ro: Vec<PathBuf>,
    rw: Vec<PathBuf>,
    overlays: Vec<(PathBuf, PathBuf, Option<PathBuf>)>,
    binds_at: Vec<BindAtSpec>,
    network: NetworkAccess,
    env: Vec<(String, String)>,
    cwd: PathBuf,
    limits: Limits,
    allow_degraded: bool,
    max_output: u64,
    drain_timeout: Duration,
    egress: Option<EgressServe>,
    services: Vec<crate::services::Service>,
}

/// Scratch directories of one run's overlays; deleted on drop unless kept.
struct Scratch {
    _temp: Vec<tempfile::TempDir>,
}

impl Sandbox {
    /// Run `argv` and capture its output (up to the output cap).
    pub fn run_captured<S: AsRef<str>>(&self, argv: &[S]) -> Result<Captured> {
        let mut stdout = Vec::new();
        let mut stderr = Vec::new();
        let summary = self.run_streaming(argv, &mut stdout, &mut stderr)?;
        Ok(Captured {
            stdout,
            stderr,
            summary,
        })
    }

    fn overlay_specs(&self) -> Result<(Vec<OverlaySpec>, Scratch)> {
        let mut specs = Vec::new();
        let mut temp = Vec::new();
        for (lower, mountpoint, keep) in &self.overlays {
            let scratch = match keep {
                Some(dir) => dir.clone(),
                None => {
                    let dir = tempfile::Builder::new()
                        .prefix("airlock-overlay-")
                        .tempdir()
                        .map_err(|e| Error::Path {
                            path: std::env::temp_dir(),
                            reason: format!("overlay scratch directory: {e}"),
                        })?;
                    let path = dir.path().to_path_buf();
                    temp.push(dir);
                    path
                }
            };
            check_overlay_chars(&scratch)?;
            if keep.is_some() {
                // The work directory holds only overlayfs' own transient state, including the
                // marker a `volatile` mount leaves behind, which would refuse a second mount.
                let _ = std::fs::remove_dir_all(scratch.join("work"));
            }
            for sub in ["upper", "work"] {
                std::fs::create_dir_all(scratch.join(sub)).map_err(|e| Error::Path {
                    path: scratch.join(sub),
                    reason: e.to_string(),
                })?;
            }
            // The command creates its files in the upper directory (its root is the view's
            // root directory), as its host identity.
            self.host.hand_over(&scratch.join("upper"))?;
            specs.push(OverlaySpec {
                lower: lower.clone(),
                mountpoint: mountpoint.clone(),
                upper: scratch.join("upper"),
                work: scratch.join("work"),
            });
        }
        Ok((specs, Scratch { _temp: temp }))
    }

    /// Run `argv` in the sandbox, writing its stdout and stderr to the given writers as it
    /// arrives. Returns the summary; a failing child is not an error.
    pub fn run_streaming<S: AsRef<str>>(
        &self,
        argv: &[S],
        stdout: &mut dyn Write,
        stderr: &mut dyn Write,
    ) -> Result<RunSummary> {
        if argv.is_empty() || argv[0].as_ref().is_empty() {
            return Err(Error::Config("no command to run".into()));
        }
        let (overlays, scratch) = self.overlay_specs()?;
        let spec = Spec {
            argv: argv.iter().map(|a| a.as_ref().to_string()).collect(),
            ro: self.ro.clone(),
            rw: self.rw.clone(),
            overlays,
            binds_at: self.binds_at.clone(),
            network: self.network,
            env: self.env.clone(),
            cwd: self.cwd.clone(),
            limits: self.limits.clone(),
            allow_degraded: self.allow_degraded,
            pretend_missing: pretend_missing_from_env(),
            host: self.host,
            services: self.services.clone(),
        };
        let mut result = self.spawn_and_collect(&self.helper_exe, &spec, stdout, stderr);
        if let (Err(Error::HelperMismatch { .. }), Some(fallback)) = (&result, &self.fallback_exe) {
            result = self.spawn_and_collect(fallback, &spec, stdout, stderr);
        }
        drop(scratch);
        result
    }

    fn spawn_and_collect(
        &self,
        exe: &Path,
        spec: &Spec,
        out: &mut dyn Write,
        err: &mut dyn Write,
    ) -> Result<RunSummary> {
        let helper_err = |source: std::io::Error| Error::Helper {
            exe: exe.to_path_buf(),
            source,
        };
        let spec_json = serde_json::to_vec(spec).map_err(|e| Error::Protocol(e.to_string()))?;
        // One socket carries the spec in (the helper reads its stdin to end of file) and the
        // report lines out (the helper moves it to the report descriptor). With no pre-exec
        // code, std spawns the helper with posix_spawn (vfork-like): no copy of this process's
        // page tables, which for a large caller is most of the cost of a fork.
        let (channel, helper_end) = UnixStream::pair().map_err(helper_err)?;
        let mut command = Command::new(exe);
        command
            .arg(crate::helper::RUN_MARKER)
            .arg(crate::helper::PROTOCOL)
            .env_clear()
            .stdin(Stdio::from(OwnedFd::from(helper_end)))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let started = Instant::now();
        let mut child = command.spawn().map_err(helper_err)?;
        drop(command);
        let pid = child.id() as libc::pid_t;
        let pidfd = sys::pidfd_open(pid).map_err(helper_err)?;
        // The helper reads the whole spec before doing anything; a write error means it died,
        // which the report below will show.
        let _ = (&channel).write_all(&spec_json);
        let _ = channel.shutdown(std::net::Shutdown::Write);
        let report_r = OwnedFd::from(channel);
        let child_out: OwnedFd = child
            .stdout
            .take()
            .map(OwnedFd::from)
            .ok_or_else(|| Error::Protocol("helper stdout missing".into()))?;
        let child_err: OwnedFd = child
            .stderr
            .take()
            .map(OwnedFd::from)
            .ok_or_else(|| Error::Protocol("helper stderr missing".into()))?;
        let collected = self.collect(pid, &pidfd, &child_out, &child_err, &report_r, out, err);
        let collected = match collected {
            Ok(c) => c,
            Err(e) => {
                let _ = sys::kill(pid, Signal::SIGKILL);
                let _ = sys::wait4(pid);
                return Err(e);
            }
        };
        if collected.report.is_empty() {
            if collected.helper_exit == Some(crate::helper::PROTOCOL_MISMATCH) {
                return Err(Error::HelperMismatch {
                    exe: exe.to_path_buf(),
                });
            }
            if collected.helper_exit != Some(0) {
                return Err(Error::Protocol(format!(
                    "the helper {} ended (exit code {}) before reporting anything; is it an \
                     airlock binary?",
                    exe.display(),
                    collected
                        .helper_exit
                        .map_or_else(|| "none: killed by a signal".to_string(), |c| c.to_string())
                )));
            }
        }
        summarize(spec, collected, started.elapsed(), self.allow_degraded)
    }

    #[allow(clippy::too_many_arguments)]
    fn collect(
        &self,
        pid: libc::pid_t,
        pidfd: &OwnedFd,
        child_out: &OwnedFd,
        child_err: &OwnedFd,
        report_r: &OwnedFd,
        out: &mut dyn Write,
        err: &mut dyn Write,
    ) -> Result<Collected> {
        for fd in [child_out, child_err, report_r] {
            sys::set_nonblocking(fd).map_err(Error::Collect)?;
        }
        // The helper enforces the timeout; this backstop only fires if the helper itself hangs.
        let backstop = Instant::now()
            + Duration::from_millis(self.limits.timeout_ms)
            + Duration::from_secs(30);
        let mut c = Collected::default();
        let mut open = [true, true, true];
        let fds: [BorrowedFd<'_>; 3] = [child_out.as_fd(), child_err.as_fd(), report_r.as_fd()];
        let mut helper_alive = true;
        let mut drain_deadline: Option<Instant> = None;
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            if !helper_alive && !open.iter().any(|o| *o) {
                break;
            }
            let now = Instant::now();
            let deadline = drain_deadline.unwrap_or(backstop);
            if now >= deadline {
                if helper_alive {
                    let _ = sys::kill(pid, Signal::SIGKILL);
                    c.backstop_killed = true;
                    continue_wait(pid, &mut c, &mut helper_alive);
                    drain_deadline = Some(Instant::now() + self.drain_timeout);
                    continue;
                }
                c.drain_timed_out = open[0] || open[1];
                break;
            }
            let wait_ms = (deadline - now).as_millis().clamp(1, i32::MAX as u128) as i32;
            let mut poll_fds: Vec<BorrowedFd<'_>> = Vec::new();
            let mut which: Vec<usize> = Vec::new();
            for (i, fd) in fds.iter().enumerate() {
                if open[i] {
                    poll_fds.push(*fd);
                    which.push(i);
                }
            }
            if helper_alive {
                poll_fds.push(pidfd.as_fd());
                which.push(3);
            }
            let revents = sys::poll_readable(&poll_fds, wait_ms).map_err(Error::Collect)?;
            for (k, &i) in which.iter().enumerate() {
                if revents[k] == 0 {
                    continue;
                }
                if i == 3 {
                    continue_wait(pid, &mut c, &mut helper_alive);
                    drain_deadline = Some(Instant::now() + self.drain_timeout);
                    continue;
                }
                let read = if i == 2 {
                    sys::recv_with_fds(fds[i], &mut buf).map(|(n, passed)| {
                        for fd in passed {
                            self.start_egress(fd, &mut c);
                        }
                        n
                    })
                } else {
                    sys::read(fds[i], &mut buf)
                };
                match read {
                    Ok(0) => open[i] = false,
                    Ok(n) => {
                        let chunk = &buf[..n];
                        match i {
                            2 => c.report.extend_from_slice(chunk),
                            _ => {
                                let room = self
                                    .max_output
                                    .saturating_sub(c.stdout_bytes + c.stderr_bytes);
                                let keep = (n as u64).min(room) as usize;
                                c.dropped += (n - keep) as u64;
                                if keep > 0 {
                                    let w: &mut dyn Write =
                                        if i == 0 { &mut *out } else { &mut *err };
                                    w.write_all(&chunk[..keep]).map_err(Error::Output)?;
                                    w.flush().map_err(Error::Output)?;
                                    if i == 0 {
                                        c.stdout_bytes += keep as u64;
                                    } else {
                                        c.stderr_bytes += keep as u64;
                                    }
                                }
                            }
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => open[i] = false,
                }
            }
        }
        Ok(c)
    }
}

impl Sandbox {
    /// Hand a listener the sandbox's init sent to the egress proxy; a descriptor no proxy
    /// asked for (or that cannot be served) is closed, and the command's connections to it
    /// are refused.
    fn start_egress(&self, fd: OwnedFd, c: &mut Collected) {
        if self.network != NetworkAccess::Proxy {
            return;
        }
        if let Some(serve) = &self.egress
            && let Ok(run) = EgressRun::start(serve, fd)
        {
            c.egress.push(run);
        }
    }
}

fn continue_wait(pid: libc::pid_t, c: &mut Collected, helper_alive: &mut bool) {
    if let Ok((status, usage)) = sys::wait4(pid) {
        c.helper_exit = sys::decode_status(status).0;
        let ms = |tv: libc::timeval| tv.tv_sec as u64 * 1000 + tv.tv_usec as u64 / 1000;
        c.cpu_ms = ms(usage.ru_utime) + ms(usage.ru_stime);
        c.max_rss_bytes = usage.ru_maxrss as u64 * 1024;
    }
    *helper_alive = false;
}

#[derive(Default)]
struct Collected {
    report: Vec<u8>,
    stdout_bytes: u64,
    stderr_bytes: u64,
    dropped: u64,
    drain_timed_out: bool,
    backstop_killed: bool,
    cpu_ms: u64,
    max_rss_bytes: u64,
    /// The helper's own exit code.
    helper_exit: Option<i32>,
    /// The egress proxy's threads, stopped when the collection is dropped.
    egress: Vec<EgressRun>,
}

fn summarize(
    spec: &Spec,
    c: Collected,
    wall: Duration,
    allow_degraded: bool,
) -> Result<RunSummary> {
    let mut applied: Vec<Layer> = Vec::new();
    let mut missing: Vec<Layer> = Vec::new();
    let mut exited: Option<(Option<i32>, Option<i32>)> = None;
    let mut target_rss: Option<u64> = None;
    let mut supervisor: Option<(bool, Option<u64>)> = None;
    let mut landlock_abi = 0;
    for line in c.report.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let msg: Report = serde_json::from_slice(line)
            .map_err(|e| Error::Protocol(format!("bad report line ({e})")))?;
        match msg {
            Report::Failed {
                feature: Some(feature),
                detail,
                stage,
            } => {
                return Err(Error::Refused {
                    feature,
                    detail: format!("{stage}: {detail}"),
                });
            }
            Report::Failed {
                feature: None,
                stage,
                detail,
            } => return Err(Error::Setup { stage, detail }),
            Report::Layers {
                applied: a,
                missing: m,
                landlock_abi: abi,
            } => {
                applied.extend(a);
                missing.extend(m);
                if let Some(abi) = abi {
                    landlock_abi = abi;
                }
            }
            Report::Exited {
                code,
                signal,
                max_rss_bytes,
            } => {
                exited = Some((code, signal));
                target_rss = max_rss_bytes;
            }
            Report::Supervisor {
                timed_out,
                peak_memory_bytes,
                ..
            } => supervisor = Some((timed_out, peak_memory_bytes)),
            Report::Proxy { .. } => {}
        }
    }
    let timed_out = supervisor.map(|s| s.0).unwrap_or(false) || c.backstop_killed;
    let (exit_code, signal) = match exited {
        Some(e) => e,
        None if timed_out => (None, Some(libc::SIGKILL)),
        None => {
            return Err(Error::Protocol(
                "the helper ended without reporting the child's exit".into(),
            ));
        }
    };
    applied.sort();
    applied.dedup();
    missing.sort();
    missing.dedup();
    applied.retain(|l| !missing.contains(l));
    // Layers the caller waived (the network ones, with the host's network) are neither
    // applied nor missing, and never a reason to refuse.
    applied.retain(|l| !spec.network.waives(*l));
    missing.retain(|l| !spec.network.waives(*l));
    if !allow_degraded && let Some(layer) = missing.iter().find(|l| l.required()) {
        return Err(Error::Refused {
            feature: *layer,
            detail: "reported missing by the helper".into(),
        });
    }
    if spec.overlays.is_empty() {
        applied.retain(|l| *l != Layer::Overlay);
    }
    let cgroup_peak = supervisor.and_then(|s| s.1);
    let (peak_memory_bytes, peak_memory_source) = match cgroup_peak {
        Some(p) => (Some(p), Some("cgroup".to_string())),
        // The command's own processes, as init measured them; else the whole tree's largest
        // process (which may be the set-up helper itself).
        None => match target_rss.filter(|b| *b > 0) {
            Some(b) => (Some(b), Some("max_rss".to_string())),
            None if c.max_rss_bytes > 0 => (Some(c.max_rss_bytes), Some("max_rss".to_string())),
            None => (None, None),
        },
    };
    Ok(RunSummary {
        exit_code,
        signal,
        timed_out,
        wall_ms: wall.as_millis() as u64,
        cpu_ms: c.cpu_ms,
        peak_memory_bytes,
        peak_memory_source,
        stdout_bytes: c.stdout_bytes,
        stderr_bytes: c.stderr_bytes,
        output_bytes_dropped: c.dropped,
        drain_timed_out: c.drain_timed_out,
        layers_applied: applied,
        layers_missing: missing,
        landlock_abi,
        network: spec.network,
        host_uid: Some(spec.host.uid),
        host_gid: Some(spec.host.gid),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> Spec {
        Spec {
            argv: vec!["true".into()],
            ro: Vec::new(),
            rw: Vec::new(),
            overlays: Vec::new(),
            binds_at: Vec::new(),
            network: NetworkAccess::None,
            env: Vec::new(),
            cwd: PathBuf::from("/"),
            limits: Limits {
                timeout_ms: 1000,
                memory_mb: 64,
                max_procs: 8,
                cpu_secs: 2,
                open_files: 64,
                file_size_mb: 1,
                tmp_size_mb: 1,
            },
            allow_degraded: false,
            pretend_missing: Vec::new(),
            services: Vec::new(),
            host: crate::identity::HostIdentity {
                uid: 1000,
                gid: 1000,
                source: crate::identity::IdentitySource::Caller,
            },
        }
    }

    fn collected(lines: &[Report]) -> Collected {
        let mut c = Collected::default();
        for l in lines {
            c.report.extend(serde_json::to_vec(l).unwrap());
            c.report.push(b'\n');
        }
        c
    }

    fn layers(applied: &[Layer], missing: &[Layer]) -> Report {
        Report::Layers {
            applied: applied.to_vec(),
            missing: missing.to_vec(),
            landlock_abi: Some(7),
        }
    }

    #[test]
    fn a_failure_naming_a_feature_is_a_refusal() {
        let c = collected(&[Report::Failed {
            feature: Some(Layer::LandlockFs),
            stage: "landlock".into(),
            detail: "no ABI".into(),
        }]);
        let err = summarize(&spec(), c, Duration::ZERO, false).unwrap_err();
        assert!(matches!(
            err,
            Error::Refused {
                feature: Layer::LandlockFs,
                ..
            }
        ));
        assert!(err.to_string().contains("landlock"));
    }

    #[test]
    fn a_failure_without_a_feature_is_a_setup_error() {
        let c = collected(&[
            Report::Failed {
                feature: None,
                stage: "exec".into(),
                detail: "not found".into(),
            },
            Report::Exited {
                code: Some(127),
                signal: None,
                max_rss_bytes: None,
            },
        ]);
        let err = summarize(&spec(), c, Duration::ZERO, false).unwrap_err();
        assert!(matches!(err, Error::Setup { ref stage, .. } if stage == "exec"));
    }

    #[test]
    fn a_timeout_without_an_exit_report_is_a_kill_not_an_error() {
        let c = collected(&[
            layers(&[Layer::Seccomp], &[]),
            Report::Supervisor {
                timed_out: true,
                peak_memory_bytes: Some(4096),
                init_signal: Some(9),
            },
        ]);
        let s = summarize(&spec(), c, Duration::ZERO, false).unwrap();
        assert!(s.timed_out);
        assert_eq!(s.signal, Some(9));
        assert_eq!(s.exit_code, None);
        assert_eq!(s.peak_memory_bytes, Some(4096));
        assert_eq!(s.peak_memory_source.as_deref(), Some("cgroup"));
        assert!(!s.success());
    }

    #[test]
    fn layers_are_merged_sorted_and_missing_ones_removed_from_applied() {
        let c = collected(&[
            layers(&[Layer::CgroupPids], &[Layer::CgroupMemory]),
            layers(&[Layer::Seccomp, Layer::UserNamespace, Layer::Overlay], &[]),
            Report::Exited {
                code: Some(0),
                signal: None,
                max_rss_bytes: None,
            },
        ]);
        let s = summarize(&spec(), c, Duration::ZERO, false).unwrap();
        // No overlay was requested, so none is claimed.
        assert_eq!(
            s.layers_applied,
            vec![Layer::UserNamespace, Layer::Seccomp, Layer::CgroupPids]
        );
        assert_eq!(s.layers_missing, vec![Layer::CgroupMemory]);
        assert!(s.success());
    }

    #[test]
    fn a_missing_required_layer_is_refused_unless_degraded() {
        let lines = [
            layers(&[], &[Layer::Seccomp]),
            Report::Exited {
                code: Some(0),
                signal: None,
                max_rss_bytes: None,
            },
        ];
        assert!(summarize(&spec(), collected(&lines), Duration::ZERO, false).is_err());
        let s = summarize(&spec(), collected(&lines), Duration::ZERO, true).unwrap();
        assert_eq!(s.layers_missing, vec![Layer::Seccomp]);
    }

    #[test]
    fn variable_names_are_letters_digits_and_underscores() {
        for ok in ["PATH", "_x", "A1_B"] {
            assert!(valid_env_name(ok), "{ok}");
        }
        for bad in ["", "1A", "A B", "A=B", "A-B"] {
            assert!(!valid_env_name(bad), "{bad}");
        }
        let err = SandboxBuilder::new().env("A B", "1").build().unwrap_err();
        assert!(matches!(err, Error::Config(_)), "{err}");
    }

    #[test]
    fn a_helper_that_vanishes_is_a_protocol_error() {
        let c = collected(&[layers(&[Layer::Seccomp], &[])]);
        assert!(matches!(
            summarize(&spec(), c, Duration::ZERO, false),
            Err(Error::Protocol(_))
        ));
    }

    #[test]
    fn the_builder_rejects_parent_components_and_forbidden_grants() {
        let exe = std::env::current_exe().unwrap();
        let err = SandboxBuilder::new()
            .helper_exe(&exe)
            .ro("/usr/../etc")
            .build()
            .unwrap_err();
        assert!(matches!(err, Error::Path { .. }));
        let err = SandboxBuilder::new()
            .helper_exe(&exe)
            .ro("/proc")
            .build()
            .unwrap_err();
        assert!(err.to_string().contains("/proc"));
        let err = SandboxBuilder::new()
            .helper_exe(&exe)
            .ro("/definitely/not/here")
            .build()
            .unwrap_err();
        assert!(matches!(err, Error::Path { .. }));
    }

    #[test]
    fn a_grant_at_a_relative_or_dotted_path_is_a_configuration_error() {
        let source = tempfile::tempdir().unwrap();
        for target in ["node_modules", "/work/tree/../etc", ""] {
            let err = SandboxBuilder::new()
                .helper_exe("/bin/true")
                .ro_at(source.path(), target)
                .build()
                .unwrap_err();
            assert!(matches!(err, Error::Config(_)), "{target:?}: {err}");
            assert!(err.to_string().contains("absolute path"), "{err}");
        }
        for target in ["/", "/proc/x", "/dev/shm/x"] {
            let err = SandboxBuilder::new()
                .helper_exe("/bin/true")
                .rw_at(source.path(), target)
                .build()
                .unwrap_err();
            assert!(matches!(err, Error::Path { .. }), "{target:?}: {err}");
        }
        let err = SandboxBuilder::new()
            .helper_exe("/bin/true")
            .ro_at("/definitely/not/here", "/work/x")
            .build()
            .unwrap_err();
        assert!(matches!(err, Error::Path { .. }), "{err}");
    }

    #[test]
    fn a_grant_at_another_path_inside_a_host_grant_needs_its_mount_point_on_the_host() {
        let d = tempfile::tempdir().unwrap();
        let granted = d.path().join("granted");
        let cache = d.path().join("cache");
        std::fs::create_dir_all(granted.join("present")).unwrap();
        std::fs::write(granted.join("file"), "").unwrap();
        std::fs::create_dir_all(&cache).unwrap();
        std::fs::write(cache.join("lock"), "").unwrap();
        let build = |b: SandboxBuilder| b.helper_exe("/bin/true").build();
        // Missing inside a read-only (or read-write) grant: refused, and nothing is created.
        for writable in [false, true] {
            let b = if writable {
                SandboxBuilder::new().rw(&granted)
            } else {
                SandboxBuilder::new().ro(&granted)
            };
            let err = build(b.ro_at(&cache, granted.join("missing/deeper"))).unwrap_err();
            assert!(err.to_string().contains("create"), "{err}");
            assert!(!granted.join("missing").exists());
        }
        // Present, of the same kind: accepted.
        build(
            SandboxBuilder::new()
                .ro(&granted)
                .ro_at(&cache, granted.join("present")),
        )
        .unwrap();
        build(
            SandboxBuilder::new()
                .ro(&granted)
                .ro_at(cache.join("lock"), granted.join("file")),
        )
        .unwrap();
        // Of another kind: refused.
        let err = build(
            SandboxBuilder::new()
                .ro(&granted)
                .ro_at(&cache, granted.join("file")),
        )
        .unwrap_err();
        assert!(err.to_string().contains("is a file"), "{err}");
        // Inside an overlay, the private /tmp or the sandbox's root: created when the run sets
        // up, so accepted here.
        let sandbox = build(
            SandboxBuilder::new()
                .overlay(&granted, "/work/tree")
                .ro_at(&cache, "/work/tree/node_modules")
                .ro_at(cache.join("lock"), "/work/tree/Cargo.lock")
                .ro_at(&cache, "/tmp/cache")
                .ro_at(&cache, "/opt/cache"),
        )
        .unwrap();
        assert_eq!(sandbox.binds_at.len(), 4);
        assert!(sandbox.binds_at.iter().all(|b| !b.writable));
        // Inside another grant at another path, whichever comes first: its mount point must
        // exist in that grant's source.
        for b in [
            SandboxBuilder::new()
                .ro_at(&cache, "/opt/c")
                .ro_at(&cache, "/opt/c/missing"),
            SandboxBuilder::new()
                .ro_at(&cache, "/opt/c/missing")
                .ro_at(&cache, "/opt/c"),
        ] {
            let err = build(b).unwrap_err();
            assert!(err.to_string().contains("create"), "{err}");
        }
        assert!(!cache.join("missing").exists());
        build(
            SandboxBuilder::new()
                .ro_at(cache.join("lock"), "/opt/c/lock")
                .ro_at(&cache, "/opt/c"),
        )
        .unwrap();
        // The same place twice, or an overlay's own mount point: refused.
        for b in [
            SandboxBuilder::new()
                .ro_at(&cache, "/opt/x")
                .rw_at(&cache, "/opt/x"),
            SandboxBuilder::new()
                .overlay(&granted, "/work/tree")
                .ro_at(&cache, "/work/tree"),
            SandboxBuilder::new().ro(&granted).ro_at(&cache, &granted),
        ] {
            assert!(matches!(build(b), Err(Error::Path { .. })));
        }
    }

    #[test]
    fn the_host_network_grants_the_resolver_files_unless_a_grant_covers_them() {
        let existing: Vec<PathBuf> = NETWORK_ETC_RO
            .iter()
            .map(PathBuf::from)
            .filter(|p| p.symlink_metadata().is_ok())
            .collect();
        let none = SandboxBuilder::new()
            .helper_exe("/bin/true")
            .build()
            .unwrap();
        assert_eq!(none.network, NetworkAccess::None);
        assert!(none.ro.is_empty());
        let host = SandboxBuilder::new()
            .helper_exe("/bin/true")
            .network(NetworkAccess::Host)
            .build()
            .unwrap();
        assert_eq!(host.network, NetworkAccess::Host);
        for path in &existing {
            assert!(host.ro.contains(path), "{} not granted", path.display());
        }
        assert!(!host.ro.iter().any(|p| p.ends_with("private")));
        // Granting /etc covers them all.
        let etc = SandboxBuilder::new()
            .helper_exe("/bin/true")
            .ro("/etc")
            .network(NetworkAccess::Host)
            .build()
            .unwrap();
        assert!(
            etc.ro
                .iter()
                .all(|p| !p.starts_with("/etc") || p == Path::new("/etc"))
        );
    }

    #[test]
    fn layers_waived_by_the_host_network_are_neither_applied_nor_missing() {
        let mut spec = spec();
        spec.network = NetworkAccess::Host;
        let c = collected(&[
            layers(
                &[Layer::UserNamespace, Layer::Seccomp],
                &[Layer::LandlockNet],
            ),
            Report::Exited {
                code: Some(0),
                signal: None,
                max_rss_bytes: None,
            },
        ]);
        let s = summarize(&spec, c, Duration::ZERO, false).unwrap();
        assert_eq!(s.layers_applied, vec![Layer::UserNamespace, Layer::Seccomp]);
        assert!(s.layers_missing.is_empty());
        assert_eq!(s.network, NetworkAccess::Host);
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["network"], "host");
    }

    #[test]
    fn the_environment_is_an_allowlist_with_defaults_and_sorted() {
        let sandbox = SandboxBuilder::new()
            .helper_exe("/bin/true")
            .env("ZED", "1")
            .env("A", "2")
            .pass_env("AIRLOCK_SURELY_UNSET_VARIABLE")
            .build()
            .unwrap();
        let names: Vec<&str> = sandbox.env.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, vec!["A", "HOME", "PATH", "ZED"]);
    }
}
