//! `airlock sandbox run` and `airlock doctor`. Owned by the sandbox work.
//!
//! Exit codes of `airlock sandbox run`: the child's own exit code; 128 + N when a signal N
//! killed it; 124 when the timeout fired; 125 when the sandbox refused to run (a missing
//! kernel feature) or could not be set up; 127 when the command was not found inside the
//! sandbox and 126 when it was found but could not be executed (as a shell does).
//! `airlock doctor` exits 0 when runs would go ahead, 1 when they would be refused (with
//! `--config`: also when the airlock.toml and its broker.toml disagree), 2 on an error.

use airlock_egress::EgressProxy;
use airlock_policies::network::EgressRules;
use airlock_sandbox::{EgressServe, Error, Layer, NetworkAccess, SandboxBuilder};
use clap::{Args, Subcommand};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// Exit code when the sandbox refuses to run or cannot be set up.
pub const EXIT_SANDBOX_REFUSED: u8 = 125;
/// Exit code when the child was killed by the timeout.
pub const EXIT_TIMED_OUT: u8 = 124;

/// Arguments of `airlock doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Also check a repository's test set-up: run `[tests.prepare]` and the full test command
    /// of this airlock.toml at the pin in the sandbox, and report the base inventory.
    #[arg(long, value_name = "AIRLOCK_TOML")]
    config: Option<PathBuf>,
    /// The repository whose tests are checked (with --config): a path or a URL.
    #[arg(long, default_value = ".", requires = "config")]
    repo: String,
    /// The revision whose tests are checked (with --config).
    #[arg(long, default_value = "HEAD", requires = "config")]
    commit: String,
    /// The broker.toml of the broker this airlock.toml uses (with --config; default: the
    /// broker.toml beside it): first check the pair: the broker answers, the repository is
    /// registered, every path a run grants is allowed, the forge token is set.
    #[arg(long, value_name = "BROKER_TOML", requires = "config")]
    broker_config: Option<PathBuf>,
}

/// Subcommands of `airlock sandbox`.
#[derive(Debug, Subcommand)]
pub enum SandboxCommand {
    /// Run a command inside the sandbox, streaming its output.
    ///
    /// Exit codes: the command's own; 128+N when signal N killed it; 124 when the timeout
    /// fired; 127 when the command is not found inside the sandbox, 126 when it cannot be
    /// executed; 125 when the sandbox refused (a missing kernel feature) or could not be set
    /// up; 2 for a usage error.
    Run(RunArgs),
}

/// Arguments of `airlock sandbox run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Grant PATH read-only (repeatable).
    #[arg(long = "ro", value_name = "PATH")]
    ro: Vec<PathBuf>,
    /// Grant PATH read-write (repeatable). As root, PATH must belong to the sandbox's host
    /// identity (`airlock doctor` names it): the command never writes as root.
    #[arg(long = "rw", value_name = "PATH")]
    rw: Vec<PathBuf>,
    /// Show the host path SRC (file or directory) read-only at DST inside, which may lie inside
    /// an --overlay (repeatable).
    #[arg(long = "ro-at", value_name = "SRC:DST")]
    ro_at: Vec<String>,
    /// Like --ro-at, but read-write: writes at DST land in the host's SRC (repeatable).
    #[arg(long = "rw-at", value_name = "SRC:DST")]
    rw_at: Vec<String>,
    /// The command's network: `none` (the default; unix sockets only), `loopback` (a network
    /// namespace of its own with `lo` up: its own servers work, nothing else is reachable),
    /// `proxy` (loopback plus an egress proxy admitting the --allow entries; HTTP_PROXY and
    /// HTTPS_PROXY point at it) or `host` (the host's network; a bare --network means this).
    #[arg(long, value_name = "MODE", num_args = 0..=1, default_missing_value = "host",
          value_parser = parse_network)]
    network: Option<NetworkAccess>,
    /// Admit HOST[:PORT] through the egress proxy (repeatable; implies --network proxy): a
    /// host, *.domain (not a public suffix), an IP literal (127.0.0.1, [::1]:8080), or a
    /// registry preset read from that installer's configuration (@python, @node, @rust, @go).
    /// Without a port, 80 and 443.
    #[arg(long = "allow", value_name = "HOST[:PORT]")]
    allow: Vec<String>,
    /// With the proxy, pass only GET and HEAD of plain HTTP (a CONNECT tunnel cannot be
    /// inspected, so it is refused).
    #[arg(long = "http-read-only")]
    http_read_only: bool,
    /// Show LOWER read-write at MOUNTPOINT; writes land in a scratch directory (repeatable).
    #[arg(long = "overlay", value_name = "LOWER:MOUNTPOINT")]
    overlay: Vec<String>,
    /// Keep the overlay writes in DIR/upper instead of discarding them (single overlay only).
    #[arg(long = "overlay-keep", value_name = "DIR")]
    overlay_keep: Option<PathBuf>,
    /// Wall-clock limit in seconds (0.001 to 31536000); the whole sandbox is killed when it passes.
    #[arg(long, value_name = "SECS", default_value = "300", value_parser = parse_timeout)]
    timeout: Duration,
    /// Memory limit in MB.
    #[arg(long, value_name = "MB", default_value_t = 2048,
          value_parser = clap::value_parser!(u64).range(1..))]
    memory: u64,
    /// Process (task) limit: how many processes the command may have at once, itself included.
    #[arg(long = "max-procs", value_name = "N", default_value_t = 512,
          value_parser = clap::value_parser!(u32).range(1..))]
    max_procs: u32,
    /// Bytes of output passed on; the rest is dropped and counted.
    #[arg(long = "max-output", value_name = "BYTES", default_value_t = 16 * 1024 * 1024)]
    max_output: u64,
    /// Largest file the child may write, in MB.
    #[arg(long = "max-file-size", value_name = "MB", default_value_t = 1024)]
    max_file_size: u64,
    /// Pass the caller's variable NAME, or set NAME=VALUE (repeatable). Nothing else passes.
    /// The command's standard input is always empty (/dev/null).
    #[arg(long = "env", value_name = "NAME[=VALUE]")]
    env: Vec<String>,
    /// Working directory inside the sandbox (default: the first --rw, else the first overlay, else the private /tmp).
    #[arg(long, value_name = "PATH")]
    cwd: Option<PathBuf>,
    /// Do not grant the system program and library directories (/usr, /bin, /lib, ...) read-only.
    #[arg(long = "no-system")]
    no_system: bool,
    /// Run even if some layers are missing on this host; the summary lists them.
    #[arg(long = "allow-degraded")]
    allow_degraded: bool,
    /// After the output, print the run summary as one JSON line on stdout (or, when the
    /// sandbox could not run the command, one line {"error", "kind", "missing_layer"}).
    #[arg(long)]
    json: bool,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<String>,
}

/// `airlock doctor`: layer-by-layer support of this host.
pub fn doctor(args: DoctorArgs) -> anyhow::Result<ExitCode> {
    let report = airlock_sandbox::probe(None)?;
    if let Some(config) = &args.config {
        let pair_ok = check_pair(config, &args.repo, args.broker_config.as_deref(), args.json)?;
        if report.runs_refused {
            anyhow::bail!(
                "this host's kernel lacks a sandbox layer (run `airlock doctor` without --config \
                 for the list), so no test can run"
            );
        }
        let tests = tests_doctor(config, &args.repo, &args.commit, args.json)?;
        return Ok(if pair_ok { tests } else { ExitCode::from(1) });
    }
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        outln!(
            "airlock doctor: kernel {}, landlock ABI {}",
            report.kernel,
            report.landlock_abi
        );
        for l in &report.layers {
            let state = if l.available {
                "ok"
            } else if l.required {
                "MISSING"
            } else {
                "missing (optional)"
            };
            outln!(
                "  {:<18} {:<19} {}: {}",
                l.layer.name(),
                state,
                l.feature,
                l.detail
            );
        }
        let missing_required: Vec<Layer> = report
            .layers
            .iter()
            .filter(|l| l.required && !l.available)
            .map(|l| l.layer)
            .collect();
        let verdict = if report.host.identity.is_none() {
            "yes (fix the host identity above)"
        } else if missing_required.is_empty() {
            "no"
        } else if missing_required == [Layer::Overlay] {
            "only runs with --overlay (an overlay is never degraded)"
        } else if missing_required.contains(&Layer::Overlay) {
            "yes (use --allow-degraded to run weaker; runs with --overlay are refused even then)"
        } else {
            "yes (use --allow-degraded to run weaker)"
        };
        outln!("host identity of a run's command: {}", report.host.detail);
        match report.host.idmapped_mounts {
            Some(true) => outln!(
                "  idmapped mounts: ok (read-only grants and overlays show the caller's files \
                 as the command's own)"
            ),
            Some(false) => outln!(
                "  idmapped mounts: MISSING under the temporary directory (overlays there are \
                 refused: put them on ext4, xfs, btrfs or tmpfs)"
            ),
            None => {}
        }
        let sub = &report.host.subordinate_ids;
        let range = |r: Option<airlock_sandbox::IdRange>| {
            r.map_or_else(
                || "none".to_string(),
                |r| {
                    format!(
                        "{} to {}",
                        r.start,
                        u64::from(r.start) + u64::from(r.count) - 1
                    )
                },
            )
        };
        outln!(
            "  subordinate ids of {}: {} (uids {}, gids {}; newuidmap {})",
            sub.user,
            if sub.configured() {
                "configured"
            } else {
                "not configured"
            },
            range(sub.uids),
            range(sub.gids),
            sub.newuidmap
                .as_ref()
                .map_or_else(|| "not installed".to_string(), |p| p.display().to_string())
        );
        outln!("runs would be refused: {verdict}");
    }
    Ok(if report.runs_refused {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// `airlock doctor --config`'s first part: the airlock.toml against its broker.toml, one line
/// per finding (on stderr with `--json`); whether every check passed.
fn check_pair(
    config_path: &std::path::Path,
    repo: &str,
    broker_config: Option<&std::path::Path>,
    json: bool,
) -> anyhow::Result<bool> {
    let config = airlock_supervisor::config::Config::load(config_path)?;
    let say = |line: String| {
        if json {
            eprintln!("{line}");
        } else {
            outln!("{line}");
        }
    };
    let Some(broker_toml) = super::pair::broker_toml_for(config_path, broker_config) else {
        say(format!(
            "airlock doctor: no broker.toml beside {}: pass --broker-config to check the pair",
            config_path.display()
        ));
        return Ok(true);
    };
    say(format!(
        "airlock doctor: {} with {}",
        config_path.display(),
        broker_toml.display()
    ));
    let findings = super::pair::check(&config, repo, &broker_toml);
    for finding in &findings {
        say(airlock_policies::terminal::escaped_line(&finding.line()).into_owned());
    }
    Ok(findings.iter().all(|f| f.fix.is_none()))
}

/// `airlock doctor --config`: the repository's test set-up, as a run will see it.
fn tests_doctor(
    config: &std::path::Path,
    repo: &str,
    commit: &str,
    json: bool,
) -> anyhow::Result<ExitCode> {
    use airlock_supervisor::runner::{TestsDoctorArgs, doctor_tests};
    let report = doctor_tests(&TestsDoctorArgs {
        config: config.to_path_buf(),
        repo: repo.to_string(),
        commit: commit.to_string(),
    })?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(ExitCode::SUCCESS);
    }
    let b = &report.baseline;
    outln!("airlock doctor: tests of {repo} at {}", report.base_commit);
    outln!("  runner        {} (matches the command)", report.runner);
    outln!("  command       {}", b.command.join(" "));
    match &b.prepare {
        None => outln!("  prepare       none configured"),
        Some(p) => {
            outln!(
                "  prepare       {} in {:.1} s, environment {}",
                if p.reused {
                    "reused, built earlier"
                } else {
                    "built"
                },
                p.seconds,
                p.env_dir.display()
            );
            let steps = if p.steps.is_empty() {
                std::slice::from_ref(&p.command)
            } else {
                p.steps.as_slice()
            };
            for step in steps {
                outln!("    $ {}", step.join(" ").escape_debug());
            }
            use airlock_supervisor::recipe::{
                INTERPRETER_FILE, OPTIONAL_LEFT_OUT_FILE, RESOLUTION_FILE,
            };
            if let Ok(chosen) = std::fs::read_to_string(p.env_dir.join(INTERPRETER_FILE)) {
                outln!(
                    "    interpreter {}",
                    airlock_policies::terminal::escaped_line(chosen.trim())
                );
            }
            if let Ok(why) = std::fs::read_to_string(p.env_dir.join(RESOLUTION_FILE)) {
                outln!(
                    "    resolved against {}",
                    airlock_policies::terminal::escaped_line(why.trim())
                );
            }
            if let Ok(left) = std::fs::read_to_string(p.env_dir.join(OPTIONAL_LEFT_OUT_FILE))
                && !left.trim().is_empty()
            {
                outln!(
                    "    optional packages that did not install, left out: {}",
                    airlock_policies::terminal::escaped_line(
                        &left.split_whitespace().collect::<Vec<_>>().join(", ")
                    )
                );
            }
            if !p.generated.is_empty() {
                outln!(
                    "    kept from the build, shown in every run: {}",
                    p.generated.join(", ").escape_debug()
                );
            }
        }
    }
    outln!(
        "  grants        {}",
        if b.environment.ro.is_empty() {
            "(system directories only)".to_string()
        } else {
            b.environment
                .ro
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    match b.inventory.collected {
        Some(n) => outln!("  collected     {n} tests by the runner's listing"),
        None => outln!("  collected     (this runner has no listing; counted from the base run)"),
    }
    outln!("  at base       {}", b.inventory.summary());
    outln!("  runner says   {}", b.inventory.breakdown());
    for name in b.inventory.failing() {
        outln!("    failing at base: {}", name.escape_debug());
        if let Some(reason) = b.inventory.reasons.get(name) {
            let reason: String = reason.chars().take(200).collect();
            outln!(
                "      why: {}",
                airlock_policies::terminal::escaped_line(&reason)
            );
        }
    }
    for hint in &b.hints {
        outln!(
            "  diagnosis     {}",
            airlock_policies::terminal::escaped_line(hint)
        );
    }
    outln!(
        "  time          {:.1} s for the base full run",
        b.base_seconds
    );
    Ok(ExitCode::SUCCESS)
}

/// `airlock sandbox ...`.
pub fn run(cmd: SandboxCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        SandboxCommand::Run(args) => run_command(args),
    }
}

/// Longest `--timeout`: a year.
const MAX_TIMEOUT_SECS: f64 = 365.0 * 24.0 * 3600.0;

fn parse_network(text: &str) -> Result<NetworkAccess, String> {
    NetworkAccess::from_name(text)
        .ok_or_else(|| format!("{text:?} is not a network mode: use none, loopback, proxy or host"))
}

/// The network mode the flags ask for: `--allow` implies `proxy` and needs it.
fn network_of(args: &RunArgs) -> anyhow::Result<NetworkAccess> {
    match (args.network, args.allow.is_empty() && !args.http_read_only) {
        (None, true) => Ok(NetworkAccess::None),
        (None, false) | (Some(NetworkAccess::Proxy), _) => Ok(NetworkAccess::Proxy),
        (Some(mode), true) => Ok(mode),
        (Some(mode), false) => anyhow::bail!(
            "--allow and --http-read-only configure the egress proxy, but --network is {mode}; \
             use --network proxy (or leave --network out)"
        ),
    }
}

/// The egress proxy of a `proxy` run, from `--allow` and `--http-read-only`.
fn egress_of(args: &RunArgs) -> anyhow::Result<Arc<EgressProxy>> {
    let allow = airlock_egress::presets::expand(&args.allow)
        .map_err(|e| anyhow::anyhow!("--allow {}: {}", args.allow[e.index], e.message))?;
    Ok(EgressProxy::new(EgressRules {
        allow,
        read_only: args.http_read_only,
    }))
}

fn parse_timeout(text: &str) -> Result<Duration, String> {
    let secs: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds (for example 30 or 1.5)"))?;
    if !(0.001..=MAX_TIMEOUT_SECS).contains(&secs) {
        return Err(format!(
            "{text} is out of range: give 0.001 to {MAX_TIMEOUT_SECS} seconds"
        ));
    }
    Ok(Duration::from_secs_f64(secs))
}

fn builder_from(args: &RunArgs) -> anyhow::Result<SandboxBuilder> {
    let mut b = SandboxBuilder::new();
    if !args.no_system {
        b = b.system_ro();
    }
    for p in &args.ro {
        b = b.ro(p);
    }
    for p in &args.rw {
        b = b.rw(p);
    }
    for (flag, pairs, writable) in [
        ("--ro-at", &args.ro_at, false),
        ("--rw-at", &args.rw_at, true),
    ] {
        for pair in pairs {
            let Some((source, target)) = pair.split_once(':') else {
                anyhow::bail!("{flag} {pair}: expected SRC:DST");
            };
            if source.is_empty() || target.is_empty() {
                anyhow::bail!(
                    "{flag} {pair}: {} is empty; expected SRC:DST, a host path and a path inside",
                    if source.is_empty() { "SRC" } else { "DST" }
                );
            }
            b = if writable {
                b.rw_at(source, target)
            } else {
                b.ro_at(source, target)
            };
        }
    }
    b = b.network(network_of(args)?);
    if args.overlay_keep.is_some() && args.overlay.len() != 1 {
        anyhow::bail!("--overlay-keep needs exactly one --overlay");
    }
    for o in &args.overlay {
        let Some((lower, mountpoint)) = o.split_once(':') else {
            anyhow::bail!("--overlay {o}: expected LOWER:MOUNTPOINT");
        };
        if lower.is_empty() || mountpoint.is_empty() {
            anyhow::bail!(
                "--overlay {o}: {} is empty; expected LOWER:MOUNTPOINT, both directories",
                if lower.is_empty() {
                    "LOWER"
                } else {
                    "MOUNTPOINT"
                }
            );
        }
        b = match &args.overlay_keep {
            Some(keep) => b.overlay_keep(lower, mountpoint, keep),
            None => b.overlay(lower, mountpoint),
        };
    }
    for e in &args.env {
        let name = e.split_once('=').map_or(e.as_str(), |(name, _)| name);
        if !airlock_sandbox::valid_env_name(name) {
            anyhow::bail!(
                "--env {e}: {name:?} is not a variable name (letters, digits and _, not \
                 starting with a digit)"
            );
        }
        b = match e.split_once('=') {
            Some((name, value)) => b.env(name, value),
            None => match std::env::var_os(e) {
                None => {
                    eprintln!("airlock: note: --env {e}: not set here, so not passed");
                    b
                }
                Some(value) => match value.into_string() {
                    Ok(value) => b.env(e.as_str(), value),
                    Err(_) => anyhow::bail!(
                        "--env {e}: its value is not UTF-8; pass a value with --env {e}=VALUE"
                    ),
                },
            },
        };
    }
    if let Some(cwd) = &args.cwd {
        b = b.cwd(cwd);
    }
    Ok(b.timeout(args.timeout)
        .memory_mb(args.memory)
        .max_procs(args.max_procs)
        .max_output(args.max_output)
        .max_file_size_mb(args.max_file_size)
        .allow_degraded(args.allow_degraded))
}

/// Remembers whether the last byte written ended a line, so the JSON summary starts on its own.
struct LineTracker<W: Write> {
    inner: W,
    at_line_start: bool,
}

impl<W: Write> Write for LineTracker<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        if n > 0 {
            self.at_line_start = buf[n - 1] == b'\n';
        }
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// The JSON object `--json` prints when the sandbox could not run the command: the message,
/// the kind of failure (`refused`: a layer is missing; `setup`: a set-up step or the exec
/// failed; `path` or `config`: the request was wrong) and the missing layer, if any.
fn refusal_json(err: &Error) -> serde_json::Value {
    let (kind, missing_layer) = match err {
        Error::Refused { feature, .. } => ("refused", Some(Layer::name(*feature))),
        Error::Setup { .. } => ("setup", None),
        Error::Path { .. } => ("path", None),
        Error::Config(_) => ("config", None),
        _ => ("error", None),
    };
    serde_json::json!({
        "error": err.to_string(),
        "kind": kind,
        "missing_layer": missing_layer,
    })
}

fn run_command(args: RunArgs) -> anyhow::Result<ExitCode> {
    let mut builder = builder_from(&args)?;
    let proxy = if network_of(&args)? == NetworkAccess::Proxy {
        let proxy = egress_of(&args)?;
        let serving = Arc::clone(&proxy);
        builder = builder.egress(EgressServe::new(move |l| serving.serve(l)));
        Some(proxy)
    } else {
        None
    };
    let mut stdout = LineTracker {
        inner: std::io::stdout().lock(),
        at_line_start: true,
    };
    let mut stderr = std::io::stderr().lock();
    let summary = match builder.run_streaming(&args.command, &mut stdout, &mut stderr) {
        Ok(s) => s,
        Err(
            err @ (Error::Refused { .. }
            | Error::Setup { .. }
            | Error::Path { .. }
            | Error::Config(_)),
        ) => {
            drop(stderr);
            eprintln!("airlock: sandbox: {err}");
            if let Error::Refused { feature, .. } = &err {
                eprintln!("airlock: missing layer: {}", Layer::name(*feature));
            }
            if args.json {
                // A script reading the last line still gets one JSON object: what stopped
                // the run instead of a summary.
                if !stdout.at_line_start {
                    writeln!(stdout)?;
                }
                writeln!(stdout, "{}", serde_json::to_string(&refusal_json(&err))?)?;
                stdout.flush()?;
            }
            if let Error::Setup { stage, detail } = &err
                && stage == "exec"
            {
                // As a shell: 127 for a command that is not there, 126 for one that cannot run.
                let not_found = detail.contains("not found");
                return Ok(ExitCode::from(if not_found { 127 } else { 126 }));
            }
            return Ok(ExitCode::from(EXIT_SANDBOX_REFUSED));
        }
        Err(err) => return Err(err.into()),
    };
    let blocked = proxy.as_ref().map(|p| p.blocked()).unwrap_or_default();
    for attempt in &blocked {
        // Hosts are printable ASCII by construction (the proxy replaces the rest).
        writeln!(stderr, "blocked {}", attempt.target())?;
    }
    if args.json {
        if !stdout.at_line_start {
            writeln!(stdout)?;
        }
        let mut shown = serde_json::to_value(&summary)?;
        shown["network"] = serde_json::json!({
            "mode": summary.network,
            "allow": proxy.as_ref().map(|p| p.rules().allow.clone()).unwrap_or_default(),
            "blocked": blocked,
            "blocked_beyond_limit": proxy.as_ref().map_or(0, |p| p.blocked_beyond_limit()),
        });
        writeln!(stdout, "{}", serde_json::to_string(&shown)?)?;
        stdout.flush()?;
    }
    let code = if summary.timed_out {
        EXIT_TIMED_OUT
    } else if let Some(code) = summary.exit_code {
        code.clamp(0, 255) as u8
    } else if let Some(sig) = summary.signal {
        (128 + sig).clamp(0, 255) as u8
    } else {
        EXIT_SANDBOX_REFUSED
    };
    Ok(ExitCode::from(code))
}
