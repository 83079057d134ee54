//! `airlock doctor --config`'s first part: whether an `airlock.toml` and the `broker.toml` of its
//! broker agree, checked before anything runs. Each finding is one line: what holds, or what is
//! wrong and the fix. Reading both files is the point, so this runs on the broker's host (the
//! `broker.toml` beside the `airlock.toml`, or `--broker-config`).

use airlock_broker::BrokerConfig;
use airlock_supervisor::config::Config;
use airlock_supervisor::transport::BrokerEndpoint;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// One check of the pair: what it found, and the fix when it failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// What was checked and found.
    pub what: String,
    /// How to fix it; `None` when the check passed.
    pub fix: Option<String>,
}

impl Finding {
    fn ok(what: impl Into<String>) -> Finding {
        Finding {
            what: what.into(),
            fix: None,
        }
    }

    fn fix(what: impl Into<String>, fix: impl Into<String>) -> Finding {
        Finding {
            what: what.into(),
            fix: Some(fix.into()),
        }
    }

    /// The finding as one line: `ok   ...` or `FIX  ...: fix`.
    pub fn line(&self) -> String {
        match &self.fix {
            None => format!("  ok   {}", self.what),
            Some(fix) => format!("  FIX  {}: {fix}", self.what),
        }
    }
}

/// The broker.toml that goes with `airlock_toml`: `given`, else `broker.toml` beside it.
pub fn broker_toml_for(airlock_toml: &Path, given: Option<&Path>) -> Option<PathBuf> {
    if let Some(given) = given {
        return Some(given.to_path_buf());
    }
    let beside = std::path::absolute(airlock_toml)
        .ok()?
        .parent()?
        .join("broker.toml");
    beside.is_file().then_some(beside)
}

/// Check the pair: `config` (loaded from `airlock_toml`) against the broker.toml at
/// `broker_toml`, for a run of the repository given as `repo`.
pub fn check(config: &Config, repo: &str, broker_toml: &Path) -> Vec<Finding> {
    let broker = match BrokerConfig::load(broker_toml) {
        Ok(broker) => broker,
        Err(e) => {
            return vec![Finding::fix(
                format!("{} does not load ({e})", broker_toml.display()),
                "fix the key it names, or write a fresh pair with `airlock init --broker --force`",
            )];
        }
    };
    let mut out = Vec::new();
    let b = broker_toml.display();
    match config.broker.endpoint() {
        Ok(Some(BrokerEndpoint::Unix(socket))) => {
            if same_path(&socket, &broker.socket) {
                out.push(Finding::ok(format!(
                    "socket {} is the same in both files",
                    socket.display()
                )));
            } else {
                out.push(Finding::fix(
                    format!(
                        "[broker] socket {} is not broker.toml's socket {}",
                        socket.display(),
                        broker.socket.display()
                    ),
                    format!(
                        "set [broker] socket = \"{}\" in airlock.toml",
                        broker.socket.display()
                    ),
                ));
            }
            out.push(match std::os::unix::net::UnixStream::connect(&socket) {
                Ok(_) => Finding::ok(format!("the broker answers at {}", socket.display())),
                Err(e) => Finding::fix(
                    format!("the broker does not answer at {} ({e})", socket.display()),
                    format!("start it: airlock-broker --config {b} serve"),
                ),
            });
        }
        Ok(Some(BrokerEndpoint::Tls(tls))) => {
            let address = format!("{}:{}", tls.host, tls.port);
            let reached = std::net::ToSocketAddrs::to_socket_addrs(&address)
                .ok()
                .and_then(|mut a| a.next())
                .is_some_and(|a| {
                    std::net::TcpStream::connect_timeout(&a, Duration::from_secs(5)).is_ok()
                });
            out.push(if reached {
                Finding::ok(format!("the broker answers at tls://{address}"))
            } else {
                Finding::fix(
                    format!("nothing answers at tls://{address}"),
                    format!("start the broker there (airlock-broker --config {b} serve, with listen and [tls])"),
                )
            });
        }
        Ok(None) => out.push(Finding::fix(
            "airlock.toml names no broker",
            format!(
                "set [broker] socket = \"{}\" in airlock.toml",
                broker.socket.display()
            ),
        )),
        Err(e) => out.push(Finding::fix(
            format!("[broker] in airlock.toml: {e}"),
            "fix the key it names",
        )),
    }
    let shared = config.broker.tree_transfer() == airlock_protocol::TreeTransfer::Shared;
    if shared {
        out.push(
            if canonical(&config.paths.runs_root).starts_with(canonical(&broker.runs_root)) {
                Finding::ok(format!(
                    "runs_root {} is the broker's",
                    config.paths.runs_root.display()
                ))
            } else {
                Finding::fix(
                    format!(
                        "[paths] runs_root {} is not under broker.toml's runs_root {} (the broker reads each run's tree there)",
                        config.paths.runs_root.display(),
                        broker.runs_root.display()
                    ),
                    format!(
                        "set [paths] runs_root = \"{}\" in airlock.toml",
                        broker.runs_root.display()
                    ),
                )
            },
        );
    }
    let name = config.broker.repository.as_deref().unwrap_or(repo);
    let Some(repository) = broker.repositories.get(name) else {
        let known: Vec<&str> = broker.repositories.keys().map(String::as_str).collect();
        out.push(Finding::fix(
            format!(
                "repository {name:?} is not registered in {b} (it has: {})",
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            ),
            format!(
                "add [repositories.\"{name}\"] to broker.toml (`airlock init --broker` writes it), or set [broker] repository in airlock.toml to one of its names"
            ),
        ));
        return out;
    };
    out.push(Finding::ok(format!("repository {name:?} is registered")));
    let is_git = repository.clone.join(".git").exists() || repository.clone.join("HEAD").is_file();
    if !is_git {
        out.push(Finding::fix(
            format!(
                "the broker's clone {} is not a git repository",
                repository.clone.display()
            ),
            format!(
                "clone it there (git clone URL {}), or point clone at one",
                repository.clone.display()
            ),
        ));
    }
    out.extend(grants(config, &broker, name, &repository.allow_ro));
    out.extend(forge_token(name, repository));
    out
}

/// Every host path a run grants its tests (`[tests] ro` and the prepared environments), each
/// allowed by `allow_ro` or `witness_ro`.
fn grants(
    config: &Config,
    broker: &BrokerConfig,
    name: &str,
    allow_ro: &[PathBuf],
) -> Vec<Finding> {
    let host = airlock_supervisor::testenv::Host::current();
    let mut granted = Vec::new();
    let mut out = Vec::new();
    for (i, raw) in config.tests.ro.iter().enumerate() {
        // `{env}` lies in the prepared environments' directory, checked below.
        let env_dir = config.paths.envs_dir.join("ENV");
        match airlock_supervisor::testenv::expand(
            raw,
            &format!("tests.ro[{i}]"),
            &host,
            Some(&env_dir),
        ) {
            Ok(path) => granted.push(PathBuf::from(path)),
            Err(e) => out.push(Finding::fix(e.to_string(), "fix the path in airlock.toml")),
        }
    }
    if config.tests.prepare.is_some() {
        granted.push(config.paths.envs_dir.clone());
    }
    let allowed: Vec<PathBuf> = broker
        .witness_ro
        .iter()
        .chain(allow_ro)
        .map(|p| canonical(p))
        .collect();
    let refused: Vec<&PathBuf> = granted
        .iter()
        .filter(|p| {
            let real = canonical(p);
            !allowed.iter().any(|root| real.starts_with(root))
        })
        .collect();
    out.push(match refused.as_slice() {
        [] => Finding::ok(format!(
            "the {} path(s) a run grants its tests are allowed (allow_ro, witness_ro)",
            granted.len()
        )),
        refused => Finding::fix(
            format!(
                "broker.toml does not allow what a run grants its tests: {}",
                refused
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            format!("add each to [repositories.\"{name}\"] allow_ro in broker.toml"),
        ),
    });
    out
}

/// The forge token: named when the push goes over HTTP(S) (it is the credential), and set in
/// this environment when named (approve and publish read it).
fn forge_token(
    name: &str,
    repository: &airlock_broker::config::RepositoryConfig,
) -> Option<Finding> {
    let url = remote_url(repository);
    let https = url
        .as_deref()
        .is_some_and(airlock_supervisor::init::is_http_url);
    match &repository.forge_token_env {
        None if https => Some(Finding::fix(
            format!(
                "the remote {} is pushed over HTTPS, and repository {name:?} names no token",
                url.as_deref().unwrap_or_default()
            ),
            match repository.forge_kind() {
                airlock_broker::config::forge::ForgeKind::GitLab => format!(
                    "set token_env = \"AIRLOCK_FORGE_TOKEN\" in [repositories.\"{name}\".forge] and export it where approve runs"
                ),
                airlock_broker::config::forge::ForgeKind::GitHub => format!(
                    "set forge_token_env = \"AIRLOCK_FORGE_TOKEN\" in [repositories.\"{name}\"] and export it where approve runs"
                ),
            },
        )),
        None => None,
        Some(var) => Some(match std::env::var_os(var).filter(|v| !v.is_empty()) {
            Some(_) => Finding::ok(format!("the forge token variable {var} is set")),
            None => Finding::fix(
                format!("the forge token variable {var} is not set here"),
                format!(
                    "export {var}=<{}> where `airlock-broker approve` runs (approval is refused without it)",
                    match repository.forge_kind() {
                        airlock_broker::config::forge::ForgeKind::GitLab => {
                            "a GitLab token with scope api"
                        }
                        airlock_broker::config::forge::ForgeKind::GitHub => {
                            "a token with Contents and Pull requests: write"
                        }
                    }
                ),
            ),
        }),
    }
}

/// The URL approved branches are pushed to: `remote` itself, or the URL of the clone's remote
/// of that name.
fn remote_url(repository: &airlock_broker::config::RepositoryConfig) -> Option<String> {
    let remote = repository.remote.trim();
    if remote.contains("://") || remote.contains(':') || remote.starts_with('/') {
        return Some(remote.to_owned());
    }
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(&repository.clone)
        .args(["remote", "get-url", remote])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// `path` with symlinks resolved, or as written when it does not exist yet: resolved through
/// its nearest existing parent.
fn canonical(path: &Path) -> PathBuf {
    if let Ok(real) = path.canonicalize() {
        return real;
    }
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) if parent != path => canonical(parent).join(name),
        _ => path.to_path_buf(),
    }
}

fn same_path(a: &Path, b: &Path) -> bool {
    canonical(a) == canonical(b)
}
