//! Services a command needs (a database server, a cache), started inside the same sandbox,
//! behind every layer the command gets, before the command, and stopped with everything else
//! when it exits.
//!
//! The target process starts them once its layers are on (seccomp included), so a service is
//! exactly as confined as the command: same user, grants, limits, network namespace. Each
//! writes its output to a file of the sandbox's private `/tmp` (never into the command's
//! output); each is waited for in turn until its readiness check passes (a TCP connection
//! to a loopback port, or a command exiting 0). A service that exits first, or is not ready
//! in time, fails the run before the command starts, with the tail of its output. The
//! command then starts with the services' variables; when it exits, the sandbox's init kills
//! every process left, the services among them.

use crate::program::resolve_program;
use crate::report::Failure;
use crate::sys;
use serde::{Deserialize, Serialize};
use std::ffi::CString;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How many bytes of a failed service's output its error quotes (the tail).
const OUTPUT_TAIL: usize = 2048;

/// One service started before the command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Service {
    /// Its name, in errors and in its output file's name.
    pub name: String,
    /// The argv that runs it in the foreground (a program on the sandbox's `PATH` or a path).
    pub argv: Vec<String>,
    /// Variables for it and for the command (after the command's own).
    pub env: Vec<(String, String)>,
    /// When it is ready.
    pub ready: Readiness,
    /// How long it may take to become ready.
    pub ready_timeout: Duration,
}

/// A service's readiness check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Readiness {
    /// A TCP connection to `127.0.0.1:PORT` succeeds (needs a network with a loopback).
    Port {
        /// The port.
        port: u16,
    },
    /// The command exits 0 (run with the service's variables, its output beside the service's).
    Command {
        /// Its argv.
        argv: Vec<String>,
    },
}

impl Readiness {
    fn describe(&self) -> String {
        match self {
            Readiness::Port { port } => format!("a connection to 127.0.0.1:{port}"),
            Readiness::Command { argv } => format!("`{}` exiting 0", argv.join(" ")),
        }
    }
}

/// Where service `i`'s output goes inside the sandbox.
pub(crate) fn log_path(i: usize, name: &str) -> PathBuf {
    let safe: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    PathBuf::from(format!("/tmp/airlock-service-{i}-{safe}.log"))
}

/// Start every service and wait until each is ready; returns the variables the command gets
/// on top of `env`. Runs in the target process after its layers are on.
pub(crate) fn start_all(
    services: &[Service],
    env: &[(String, String)],
) -> Result<Vec<(String, String)>, Failure> {
    let mut extra = Vec::new();
    for (i, service) in services.iter().enumerate() {
        let mut vars: Vec<(String, String)> = env.to_vec();
        vars.extend(service.env.iter().cloned());
        let log = log_path(i, &service.name);
        let pid = spawn(&service.argv, &vars, &log)
            .map_err(|detail| failure(service, format!("could not start: {detail}")))?;
        wait_ready(service, pid, &vars, &log)?;
        extra.extend(service.env.iter().cloned());
    }
    Ok(extra)
}

fn failure(service: &Service, detail: String) -> Failure {
    Failure {
        feature: None,
        stage: format!("service {:?}", service.name),
        detail,
    }
}

/// Fork and exec `argv` with `vars`, its stdout and stderr appended to `log`.
fn spawn(argv: &[String], vars: &[(String, String)], log: &PathBuf) -> Result<i32, String> {
    let Some(first) = argv.first() else {
        return Err("its command is empty".into());
    };
    let program = resolve_program(first, vars).map_err(|f| f.detail)?;
    let path = CString::new(program.as_os_str().as_encoded_bytes())
        .map_err(|_| "its program path holds a NUL byte".to_string())?;
    let to_c = |items: Vec<String>| -> Result<Vec<CString>, String> {
        items
            .into_iter()
            .map(|s| CString::new(s).map_err(|_| "an argument holds a NUL byte".to_string()))
            .collect()
    };
    let c_argv = to_c(argv.to_vec())?;
    let c_env = to_c(vars.iter().map(|(k, v)| format!("{k}={v}")).collect())?;
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| format!("open {}: {e}", log.display()))?;
    match sys::fork().map_err(|e| format!("fork: {e}"))? {
        0 => {
            if sys::stdout_stderr_to(&out).is_err() {
                sys::exit_now(127)
            }
            let err = sys::execve(&path, &c_argv, &c_env);
            let _ = std::io::Write::write_all(
                &mut &out,
                format!("airlock: cannot run {}: {err}\n", program.display()).as_bytes(),
            );
            sys::exit_now(127)
        }
        pid => Ok(pid),
    }
}

/// Wait until `service` (process `pid`) passes its readiness check.
fn wait_ready(
    service: &Service,
    pid: i32,
    vars: &[(String, String)],
    log: &PathBuf,
) -> Result<(), Failure> {
    let started = Instant::now();
    let deadline = started + service.ready_timeout;
    let with_output = |what: String| {
        let text = std::fs::read(log).unwrap_or_default();
        let tail = &text[text.len().saturating_sub(OUTPUT_TAIL)..];
        let tail = String::from_utf8_lossy(tail);
        if tail.trim().is_empty() {
            format!("{what} (it printed nothing)")
        } else {
            format!("{what}; the end of its output:\n{}", tail.trim_end())
        }
    };
    loop {
        if let Ok((done, status)) = sys::waitpid_once(pid, libc::WNOHANG)
            && done == pid
        {
            let (code, signal) = sys::decode_status(status);
            let how = match (code, signal) {
                (Some(c), _) => format!("exited with {c}"),
                (_, Some(s)) => format!("was killed by signal {s}"),
                _ => "ended".into(),
            };
            return Err(failure(
                service,
                with_output(format!("{how} before it was ready")),
            ));
        }
        let ready = match &service.ready {
            Readiness::Port { port } => std::net::TcpStream::connect_timeout(
                &std::net::SocketAddr::from(([127, 0, 0, 1], *port)),
                Duration::from_millis(250),
            )
            .is_ok(),
            Readiness::Command { argv } => match spawn(argv, vars, log) {
                Ok(check) => matches!(
                    sys::waitpid(check, 0),
                    Ok((_, status)) if sys::decode_status(status).0 == Some(0)
                ),
                Err(detail) => {
                    return Err(failure(
                        service,
                        format!("its readiness check could not start: {detail}"),
                    ));
                }
            },
        };
        if ready {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(failure(
                service,
                with_output(format!(
                    "was not ready within {} s (waiting for {})",
                    service.ready_timeout.as_secs(),
                    service.ready.describe()
                )),
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
