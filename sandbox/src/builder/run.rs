//! Running a built [`Sandbox`]: each run's overlay scratch directories, spawning the set-up
//! helper with the run's spec, and collecting what comes back (the command's output, passed
//! on up to the cap; the report lines; the egress proxy's listener) until the helper is gone
//! and the output drained.

use super::grants::check_overlay_chars;
use super::report::{Collected, summarize};
use crate::doctor::pretend_missing_from_env;
use crate::egress::{EgressRun, EgressServe};
use crate::error::{Error, Result};
use crate::spec::{BindAtSpec, Limits, OverlaySpec, Spec};
use crate::summary::RunSummary;
use crate::sys::{self, Signal};
use crate::types::NetworkAccess;
use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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
    pub(super) helper_exe: PathBuf,
    /// The caller's own binary, used when a dedicated helper turns out to be from another
    /// build (it refuses the protocol with [`crate::helper::PROTOCOL_MISMATCH`]).
    pub(super) fallback_exe: Option<PathBuf>,
    /// Who the command is on the host.
    pub(super) host: crate::identity::HostIdentity,
    pub(super) ro: Vec<PathBuf>,
    pub(super) rw: Vec<PathBuf>,
    pub(super) overlays: Vec<(PathBuf, PathBuf, Option<PathBuf>)>,
    pub(super) binds_at: Vec<BindAtSpec>,
    pub(super) network: NetworkAccess,
    pub(super) env: Vec<(String, String)>,
    pub(super) cwd: PathBuf,
    pub(super) limits: Limits,
    pub(super) allow_degraded: bool,
    pub(super) max_output: u64,
    pub(super) drain_timeout: Duration,
    pub(super) egress: Option<EgressServe>,
    pub(super) services: Vec<crate::services::Service>,
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
