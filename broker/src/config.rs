//! `broker.toml`: where the broker listens, keeps its state and finds the repositories it may
//! publish to. Every path is operator-controlled; nothing here ever comes from a run.

pub mod forge;

use crate::error::{Error, Result};
use airlock_policies::network::{AllowEntry, NetworkMode};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The broker's configuration, as read from `broker.toml`.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// Unix socket the supervisors connect to (created with mode 0600).
    pub socket: PathBuf,
    /// The TCP listener with mutual TLS for supervisors on other hosts (`listen` and `[tls]`),
    /// besides the socket; none by default.
    pub network: Option<NetworkConfig>,
    /// Where the broker's state lives (runs, submissions, queue, decisions, claims, work).
    pub state_db: StateDb,
    /// Every registered worktree must lie under this directory (after canonicalisation).
    pub runs_root: PathBuf,
    /// The tamper-evident audit log every decision is appended to.
    pub audit_log: PathBuf,
    /// Where fresh witness trees are built; `<state_db folder>/witness` when unset.
    pub work_dir: Option<PathBuf>,
    /// A queued pull request older than this is expired (APPROVAL_TIMEOUT).
    pub queue_max_age: Duration,
    /// Wall-clock limit of one witness test command.
    pub witness_timeout: Duration,
    /// Witness runs that may go at once; the others queue (`witness::WitnessSlots`).
    pub witness_concurrency: usize,
    /// Take a registered run's base full run at once, in a free witness slot, and keep it for
    /// its witness (`witness::BaseInventories::warm`); default on.
    pub witness_warm_up: bool,
    /// Extra host paths the witness sandbox may read (toolchains outside `/usr`); a run's test
    /// environment may grant these and anything beneath them.
    pub witness_ro: Vec<PathBuf>,
    /// Extra environment for witness commands (e.g. `RUSTC`, `CARGO_HOME`), set by the operator.
    pub witness_env: BTreeMap<String, String>,
    /// The widest network a run's witness may use (`none`, `loopback`, `proxy`, `host`;
    /// `loopback` by default). A run registering a wider `[tests] network` is refused.
    pub witness_network: NetworkMode,
    /// With `witness_network = "proxy"`: the allowlist entries a run's `[tests] allow` may
    /// use (each of the run's entries must be one of these).
    pub witness_allow: Vec<AllowEntry>,
    /// An `airlock-policies` policy file; the built-in policy when unset.
    pub policy: Option<PathBuf>,
    /// Repositories this broker may publish to, by the name runs register with.
    pub repositories: BTreeMap<String, RepositoryConfig>,
    /// Each repository's gates, validated, in the order they run (`repositories.*.gates`).
    pub gates: BTreeMap<String, Vec<airlock_gates::GateSpec>>,
    /// `[signing]`: the key commits and attestations are signed with; unsigned when unset.
    pub signing: Option<crate::signing::SigningConfig>,
}

/// `listen` with its `[tls]`: where supervisors on other hosts reach the broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkConfig {
    /// `HOST:PORT` to listen on (`0.0.0.0:8643`; port 0 picks a free one).
    pub listen: String,
    /// The broker's certificate and key, and the CA its clients' certificates must chain to.
    pub tls: TlsConfig,
}

/// `[tls]`: the PEM files of the network listener. Every client must present a certificate
/// signed by `client_ca` (mutual TLS); a client without one is refused in the handshake.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// The broker's certificate chain (PEM, its own certificate first).
    pub cert: PathBuf,
    /// The broker's private key (PEM).
    pub key: PathBuf,
    /// The CA that signs the workers' client certificates (PEM).
    pub client_ca: PathBuf,
}

/// The state database `state_db` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateDb {
    /// An SQLite file (the default: a path in `state_db`).
    Sqlite(PathBuf),
    /// A PostgreSQL database (`state_db = "postgres://user@host:port/db"`). The connection is
    /// not encrypted (no TLS): the server belongs on the broker's host or a private network.
    Postgres {
        /// The connection URL, without a password.
        url: String,
        /// The environment variable holding the password (`state_db_password_env`), if the
        /// server asks for one.
        password_env: Option<String>,
    },
}

impl StateDb {
    /// Read `state_db` (and `state_db_password_env`): a `postgres://` or `postgresql://` URL is
    /// a PostgreSQL database, anything else a path, resolved against `base` when relative (an
    /// SQLite file has no password: `state_db_password_env` is not used for it).
    fn parse(
        text: &str,
        password_env: Option<String>,
        base: &Path,
    ) -> std::result::Result<Self, String> {
        if let Some(var) = &password_env
            && (var.is_empty() || var.contains('='))
        {
            return Err(format!(
                "state_db_password_env: {var:?} is not an environment variable name"
            ));
        }
        let is_url = ["postgres://", "postgresql://"].iter().any(|scheme| {
            text.len() >= scheme.len() && text[..scheme.len()].eq_ignore_ascii_case(scheme)
        });
        if !is_url {
            if let Some((scheme, _)) = text.split_once("://")
                && !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
            {
                return Err(format!(
                    "state_db: {scheme}:// is not a supported database: give a file path (SQLite) or a postgres:// URL"
                ));
            }
            let path = PathBuf::from(text);
            return Ok(StateDb::Sqlite(if path.is_absolute() {
                path
            } else {
                base.join(path)
            }));
        }
        let parsed: postgres::Config = text
            .parse()
            .map_err(|e| format!("state_db: {text:?} is not a valid PostgreSQL URL: {e}"))?;
        if parsed.get_password().is_some() {
            return Err(
                "state_db: the URL holds a password; keep it out of the file: name an environment variable that holds it in state_db_password_env"
                    .to_owned(),
            );
        }
        if parsed.get_hosts().is_empty() {
            return Err(format!("state_db: {text:?} names no host"));
        }
        Ok(StateDb::Postgres {
            url: text.to_owned(),
            password_env,
        })
    }

    /// The `state_db` text: the SQLite path or the PostgreSQL URL.
    pub fn as_text(&self) -> std::borrow::Cow<'_, str> {
        match self {
            StateDb::Sqlite(path) => path.to_string_lossy(),
            StateDb::Postgres { url, .. } => std::borrow::Cow::Borrowed(url),
        }
    }
}

/// One repository the broker holds a clone of and may push to.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RepositoryConfig {
    /// The broker's own clone (witness trees and approved commits are built from it).
    pub clone: PathBuf,
    /// Remote to push approved branches to: a remote name of the clone or a URL/path.
    pub remote: String,
    /// Name of the environment variable holding the forge token: the HTTPS push credential and
    /// the pull-request API's bearer token. Unset: push only, no draft pull request.
    #[serde(default)]
    pub forge_token_env: Option<String>,
    /// Base URL of the GitHub REST API (tests point it at a local server).
    #[serde(default = "default_github_api")]
    pub github_api: String,
    /// `owner/name` on the forge; defaults to the repository's name in this file. Required
    /// to be of that form only with `forge_token_env` (no pull request is opened without it).
    #[serde(default)]
    pub forge_repo: Option<String>,
    /// Private key the push uses over SSH (`ssh -i KEY -o IdentitiesOnly=yes -o BatchMode=yes`);
    /// when unset, ssh's own configuration and agent decide.
    #[serde(default)]
    pub ssh_key: Option<PathBuf>,
    /// Branch the draft pull request targets.
    #[serde(default = "default_base_branch")]
    pub base_branch: String,
    /// Author and committer name of approved commits.
    #[serde(default = "default_author_name")]
    pub author_name: String,
    /// Author and committer e-mail of approved commits.
    #[serde(default = "default_author_email")]
    pub author_email: String,
    /// Host paths (and everything beneath them) a run of this repository may grant its test
    /// commands read-only: its toolchains and its prepared environments (`airlock.toml`'s
    /// `[tests] ro` and the prepare cache). Besides `witness_ro`.
    #[serde(default)]
    pub allow_ro: Vec<PathBuf>,
    /// Whose reviews and comments on the broker's pull requests start a follow-up run: GitHub's
    /// `author_association` values (`OWNER`, `MEMBER`, `COLLABORATOR`, `CONTRIBUTOR`, ...). A
    /// stranger's comment on a public repository never puts the agent to work.
    #[serde(default = "default_feedback_from")]
    pub feedback_from: Vec<String>,
    /// How many follow-up runs the project's failed CI checks may start on one pull request;
    /// past it a failed check gets a comment and an escalation, no run (0: never).
    #[serde(default = "default_max_ci_followups")]
    pub max_ci_followups: u32,
    /// The organisation's own rules as WebAssembly components, run in this order on every
    /// `open_pr` after the digest and before the witness (`[[repositories.NAME.gates]]`).
    #[serde(default)]
    pub gates: Vec<GateConfig>,
    /// `[repositories."NAME".forge]`: the forge as a table (`kind`, `api_url`, `project`,
    /// `token_env`, `feedback_min_access`), resolved into the keys above
    /// ([`crate::config::forge`]).
    #[serde(default)]
    pub forge: Option<crate::config::forge::ForgeTable>,
    /// GitLab's settings when `forge.kind = "gitlab"`; `None` for GitHub.
    #[serde(skip)]
    pub gitlab: Option<crate::config::forge::GitLabSettings>,
}

/// One gate of a repository, as written in `broker.toml`.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct GateConfig {
    /// The gate's name, unique in its repository: named in refusals, the queue and the audit
    /// log (letters, digits, `-`, `_`, `.`).
    pub name: String,
    /// The component (`.wasm`, built for the `airlock:gate/gate` world), or WebAssembly text
    /// (`.wat`) compiled when the broker loads it.
    pub component: PathBuf,
    /// The gate's examples (TOML: `[[match]]` and `[[not_match]]`), run at every load.
    pub examples: PathBuf,
    /// Fuel of one call (about one unit per WebAssembly instruction).
    #[serde(default = "default_gate_fuel")]
    pub fuel: u64,
    /// Linear memory of one call, all memories together (`64MiB`, `512KiB`, `1GiB`).
    #[serde(default = "default_gate_memory")]
    pub memory: String,
    /// Wall-clock limit of one call (the one duration syntax).
    #[serde(default = "default_gate_timeout")]
    pub timeout: String,
}

/// A gate's memory cap when the configuration names none.
pub const DEFAULT_GATE_MEMORY: &str = "64MiB";
/// A gate's timeout when the configuration names none.
pub const DEFAULT_GATE_TIMEOUT: &str = "2s";

fn default_gate_fuel() -> u64 {
    airlock_gates::DEFAULT_GATE_FUEL
}
fn default_gate_memory() -> String {
    DEFAULT_GATE_MEMORY.to_owned()
}
fn default_gate_timeout() -> String {
    DEFAULT_GATE_TIMEOUT.to_owned()
}

/// The most memory a gate may be given: a 32-bit WebAssembly memory's whole range.
const MAX_GATE_MEMORY_BYTES: u64 = 4 << 30;

/// A memory size: a number of bytes, or with a unit `KiB`, `MiB`, `GiB`.
pub fn parse_memory_size(text: &str) -> std::result::Result<usize, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let number: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a size such as 64MiB"))?;
    let scale: u64 = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        other => {
            return Err(format!(
                "{text:?}: unknown unit {other:?} (use B, KiB, MiB or GiB)"
            ));
        }
    };
    let bytes = number
        .checked_mul(scale)
        .filter(|b| *b > 0 && *b <= MAX_GATE_MEMORY_BYTES)
        .ok_or_else(|| format!("{text:?} must be more than 0 and at most 4GiB"))?;
    usize::try_from(bytes).map_err(|_| format!("{text:?} does not fit this machine"))
}

/// A gate's limits from their configuration text; the error names the key.
pub fn gate_limits(
    fuel: u64,
    memory: &str,
    timeout: &str,
) -> std::result::Result<airlock_gates::GateLimits, String> {
    if fuel == 0 {
        return Err("fuel: must be greater than zero".to_owned());
    }
    let memory_bytes = parse_memory_size(memory).map_err(|e| format!("memory: {e}"))?;
    let timeout = parse_duration(timeout).map_err(|e| format!("timeout: {e}"))?;
    if timeout.is_zero() {
        return Err("timeout: must be greater than zero".to_owned());
    }
    Ok(airlock_gates::GateLimits {
        fuel,
        memory_bytes,
        timeout,
    })
}

impl GateConfig {
    /// The validated gate, paths resolved with `abs`; the error names the key.
    fn spec(
        &self,
        at: &str,
        abs: &dyn Fn(PathBuf) -> PathBuf,
    ) -> std::result::Result<airlock_gates::GateSpec, String> {
        let valid_name = !self.name.is_empty()
            && self.name.len() <= 64
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !valid_name {
            return Err(format!(
                "{at}.name: {:?} is not a gate name (1 to 64 letters, digits, '-', '_', '.')",
                self.name
            ));
        }
        let at = format!("{at} ({})", self.name);
        let limits =
            gate_limits(self.fuel, &self.memory, &self.timeout).map_err(|e| format!("{at}.{e}"))?;
        for (key, path) in [("component", &self.component), ("examples", &self.examples)] {
            if path.as_os_str().is_empty() {
                return Err(format!("{at}.{key}: must name a file"));
            }
        }
        Ok(airlock_gates::GateSpec {
            name: self.name.clone(),
            component: abs(self.component.clone()),
            examples: abs(self.examples.clone()),
            limits,
        })
    }
}

/// GitHub's `author_association` values a follow-up is accepted from by default: the people
/// with write access.
pub fn default_feedback_from() -> Vec<String> {
    ["OWNER", "MEMBER", "COLLABORATOR"]
        .map(str::to_owned)
        .to_vec()
}

/// Follow-ups the project's CI may start on one pull request by default.
pub fn default_max_ci_followups() -> u32 {
    2
}

pub(crate) fn default_github_api() -> String {
    "https://api.github.com".to_owned()
}
fn default_base_branch() -> String {
    "main".to_owned()
}
fn default_author_name() -> String {
    "airlock-broker".to_owned()
}
fn default_author_email() -> String {
    "airlock-broker@localhost".to_owned()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    socket: PathBuf,
    #[serde(default)]
    listen: Option<String>,
    #[serde(default)]
    tls: Option<TlsConfig>,
    state_db: String,
    #[serde(default)]
    state_db_password_env: Option<String>,
    runs_root: PathBuf,
    audit_log: PathBuf,
    #[serde(default)]
    work_dir: Option<PathBuf>,
    queue_max_age: String,
    #[serde(default = "default_witness_timeout")]
    witness_timeout: String,
    #[serde(default = "default_witness_concurrency")]
    witness_concurrency: usize,
    #[serde(default = "default_true")]
    witness_warm_up: bool,
    #[serde(default)]
    witness_ro: Vec<PathBuf>,
    #[serde(default)]
    witness_env: BTreeMap<String, String>,
    #[serde(default)]
    witness_network: NetworkMode,
    #[serde(default)]
    witness_allow: Vec<String>,
    #[serde(default)]
    policy: Option<PathBuf>,
    #[serde(default)]
    repositories: BTreeMap<String, RepositoryConfig>,
    #[serde(default)]
    signing: Option<crate::signing::SigningConfig>,
}

fn default_true() -> bool {
    true
}

fn default_witness_timeout() -> String {
    "20m".to_owned()
}

/// Half the machine's cores (at least one): a witness's test suite may itself use several.
fn default_witness_concurrency() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get() / 2)
        .unwrap_or(1)
        .max(1)
}

impl BrokerConfig {
    /// Read and validate a `broker.toml`. Relative paths are resolved against the file's folder.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::ConfigRead {
            path: path.to_owned(),
            source,
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        Self::parse(&text, base).map_err(|message| Error::ConfigInvalid {
            path: path.to_owned(),
            message,
        })
    }

    /// Parse configuration text; relative paths are resolved against `base`.
    pub fn parse(text: &str, base: &Path) -> std::result::Result<Self, String> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| e.to_string())?;
        let abs = |p: PathBuf| if p.is_absolute() { p } else { base.join(p) };
        let queue_max_age =
            parse_duration(&raw.queue_max_age).map_err(|e| format!("queue_max_age: {e}"))?;
        let state_db = StateDb::parse(&raw.state_db, raw.state_db_password_env, base)?;
        let witness_timeout =
            parse_duration(&raw.witness_timeout).map_err(|e| format!("witness_timeout: {e}"))?;
        if witness_timeout.is_zero() {
            return Err("witness_timeout: must be greater than zero".to_owned());
        }
        if raw.witness_concurrency == 0 {
            return Err("witness_concurrency: must be at least 1".to_owned());
        }
        let network = network_config(raw.listen, raw.tls, &abs)?;
        let mut repositories = BTreeMap::new();
        let mut gates = BTreeMap::new();
        for (name, mut repo) in raw.repositories {
            if name.is_empty() {
                return Err("repositories: a repository name must not be empty".to_owned());
            }
            if repo.remote.trim().is_empty() {
                return Err(format!("repositories.{name:?}.remote: must not be empty"));
            }
            crate::config::forge::resolve(&format!("repositories.{name:?}"), &mut repo)?;
            if let Some(env) = &repo.forge_token_env
                && (env.is_empty() || env.contains('='))
            {
                return Err(format!(
                    "repositories.{name:?}.forge_token_env: {env:?} is not an environment variable name"
                ));
            }
            if !(repo.github_api.starts_with("https://") || repo.github_api.starts_with("http://"))
            {
                return Err(format!(
                    "repositories.{name:?}.github_api: {:?} must start with https:// or http://",
                    repo.github_api
                ));
            }
            // The forge is only spoken to with a token: a repository published locally (a
            // path, a remote off GitHub, no forge_token_env) needs no `owner/name`.
            let forge_repo = repo.forge_repo.clone().unwrap_or_else(|| name.clone());
            if repo.gitlab.is_none()
                && (repo.forge_token_env.is_some() || repo.forge_repo.is_some())
                && (forge_repo.split('/').count() != 2 || forge_repo.split('/').any(str::is_empty))
            {
                return Err(format!(
                    "repositories.{name:?}.forge_repo: {forge_repo:?} is not of the form \
                     owner/name (the draft pull request is opened on it): set forge_repo = \
                     \"OWNER/NAME\", or remove forge_token_env for a repository published \
                     without a pull request"
                ));
            }
            repo.clone = abs(repo.clone);
            repo.ssh_key = repo.ssh_key.map(abs);
            repo.allow_ro = repo.allow_ro.into_iter().map(abs).collect();
            let mut specs: Vec<airlock_gates::GateSpec> = Vec::new();
            for (i, gate) in repo.gates.iter().enumerate() {
                let spec = gate.spec(&format!("repositories.{name:?}.gates[{i}]"), &abs)?;
                if specs.iter().any(|s| s.name == spec.name) {
                    return Err(format!(
                        "repositories.{name:?}.gates: two gates are named {:?}",
                        spec.name
                    ));
                }
                specs.push(spec);
            }
            if !specs.is_empty() {
                gates.insert(name.clone(), specs);
            }
            repositories.insert(name, repo);
        }
        if raw.witness_network != NetworkMode::Proxy && !raw.witness_allow.is_empty() {
            return Err(format!(
                "witness_allow: lists hosts, but witness_network is {}; set witness_network = \
                 \"proxy\" or remove witness_allow",
                raw.witness_network
            ));
        }
        let signing = raw.signing.map(|s| s.resolved(&abs)).transpose()?;
        let witness_allow = airlock_egress::presets::expand(&raw.witness_allow)
            .map_err(|e| format!("witness_allow[{}]: {}", e.index, e.message))?;
        Ok(BrokerConfig {
            socket: abs(raw.socket),
            network,
            state_db,
            runs_root: abs(raw.runs_root),
            audit_log: abs(raw.audit_log),
            work_dir: raw.work_dir.map(abs),
            queue_max_age,
            witness_timeout,
            witness_concurrency: raw.witness_concurrency,
            witness_warm_up: raw.witness_warm_up,
            witness_ro: raw.witness_ro.into_iter().map(abs).collect(),
            witness_env: raw.witness_env,
            witness_network: raw.witness_network,
            witness_allow,
            policy: raw.policy.map(abs),
            repositories,
            gates,
            signing,
        })
    }
}

/// `listen` and `[tls]` go together: a listener without mutual TLS is never opened.
fn network_config(
    listen: Option<String>,
    tls: Option<TlsConfig>,
    abs: &dyn Fn(PathBuf) -> PathBuf,
) -> std::result::Result<Option<NetworkConfig>, String> {
    match (listen, tls) {
        (None, None) => Ok(None),
        (Some(_), None) => Err(
            "listen is set but [tls] is missing: the network listener needs \
             [tls] cert, key and client_ca (every client authenticates with a certificate)"
                .to_owned(),
        ),
        (None, Some(_)) => Err("[tls] is set but listen is missing: name the HOST:PORT to \
             listen on (e.g. listen = \"0.0.0.0:8643\")"
            .to_owned()),
        (Some(listen), Some(tls)) => {
            let valid = listen
                .rsplit_once(':')
                .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
            if !valid {
                return Err(format!(
                    "listen: {listen:?} is not HOST:PORT (e.g. \"0.0.0.0:8643\" or \"[::]:8643\")"
                ));
            }
            for (key, path) in [
                ("cert", &tls.cert),
                ("key", &tls.key),
                ("client_ca", &tls.client_ca),
            ] {
                if path.as_os_str().is_empty() {
                    return Err(format!("tls.{key}: must name a PEM file"));
                }
            }
            Ok(Some(NetworkConfig {
                listen,
                tls: TlsConfig {
                    cert: abs(tls.cert),
                    key: abs(tls.key),
                    client_ca: abs(tls.client_ca),
                },
            }))
        }
    }
}

impl BrokerConfig {
    /// The folder witness trees are built in, and that `serve` clears of a killed
    /// predecessor's leftovers: `work_dir`, else a folder of this broker's own in the system's
    /// temporary directory (`airlock-witness-<hash of state_db>`), so two brokers on one host
    /// never clear each other's trees.
    pub fn witness_work_dir(&self) -> PathBuf {
        self.work_dir.clone().unwrap_or_else(|| {
            use sha2::Digest;
            let id = hex::encode(sha2::Sha256::digest(self.state_db.as_text().as_bytes()));
            std::env::temp_dir().join(format!("airlock-witness-{}", &id[..12]))
        })
    }
}

impl RepositoryConfig {
    /// `owner/name` on the forge for the repository registered as `name`.
    pub fn forge_slug(&self, name: &str) -> String {
        self.forge_repo.clone().unwrap_or_else(|| name.to_owned())
    }
}

/// A duration of `broker.toml`: the one syntax of airlock's configuration and flags
/// ([`airlock_audit::parse_duration`]: `90s`, `15m`, `72h`, `7d`, `1h 30m`, or bare seconds).
pub fn parse_duration(text: &str) -> std::result::Result<Duration, String> {
    airlock_audit::parse_duration(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
socket = "broker.sock"
state_db = "/var/lib/airlock/broker.db"
runs_root = "runs"
audit_log = "audit.log"
queue_max_age = "72h"

[repositories."acme/widgets"]
clone = "clones/widgets"
remote = "origin"
forge_token_env = "AIRLOCK_FORGE_TOKEN"
"#;

    #[test]
    fn parses_and_resolves_relative_paths() {
        let c = BrokerConfig::parse(GOOD, Path::new("/etc/airlock")).unwrap();
        assert_eq!(c.socket, PathBuf::from("/etc/airlock/broker.sock"));
        assert_eq!(
            c.state_db,
            StateDb::Sqlite(PathBuf::from("/var/lib/airlock/broker.db"))
        );
        assert_eq!(c.queue_max_age, Duration::from_secs(72 * 3600));
        let r = &c.repositories["acme/widgets"];
        assert_eq!(r.clone, PathBuf::from("/etc/airlock/clones/widgets"));
        assert_eq!(r.github_api, "https://api.github.com");
        assert_eq!(r.forge_slug("acme/widgets"), "acme/widgets");
    }

    #[test]
    fn forge_repo_is_needed_only_where_a_pull_request_is_opened() {
        let local = GOOD
            .replace("\"acme/widgets\"", "\"widgets\"")
            .replace("remote = \"origin\"", "remote = \"/srv/git/widgets.git\"");
        let without_token = local.replace("forge_token_env = \"AIRLOCK_FORGE_TOKEN\"\n", "");
        let c = BrokerConfig::parse(&without_token, Path::new("/etc/airlock")).unwrap();
        assert_eq!(c.repositories["widgets"].remote, "/srv/git/widgets.git");
        let err = BrokerConfig::parse(&local, Path::new("/etc/airlock")).unwrap_err();
        assert!(
            err.contains("repositories.\"widgets\".forge_repo") && err.contains("OWNER/NAME"),
            "{err}"
        );
        let named = local.replace(
            "forge_token_env",
            "forge_repo = \"acme/widgets\"\nforge_token_env",
        );
        let c = BrokerConfig::parse(&named, Path::new("/etc/airlock")).unwrap();
        assert_eq!(
            c.repositories["widgets"].forge_slug("widgets"),
            "acme/widgets"
        );
    }

    #[test]
    fn witness_trees_are_built_where_serve_clears_them_one_folder_per_broker() {
        let a = BrokerConfig::parse(GOOD, Path::new("/etc/airlock")).unwrap();
        let b = BrokerConfig::parse(
            &GOOD.replace("/var/lib/airlock/broker.db", "/srv/other.db"),
            Path::new("/etc/airlock"),
        )
        .unwrap();
        let (da, db) = (a.witness_work_dir(), b.witness_work_dir());
        assert!(da.starts_with(std::env::temp_dir()), "{}", da.display());
        assert!(
            da.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("airlock-witness-")
        );
        assert_ne!(da, db);
        let set =
            BrokerConfig::parse(&format!("work_dir = \"/w\"\n{GOOD}"), Path::new("/")).unwrap();
        assert_eq!(set.witness_work_dir(), PathBuf::from("/w"));
    }

    #[test]
    fn state_db_is_a_path_or_a_postgres_url_without_a_password() {
        let with = |state_db: &str, extra: &str| {
            BrokerConfig::parse(
                &GOOD.replace(
                    "\"/var/lib/airlock/broker.db\"",
                    &format!("\"{state_db}\"\n{extra}"),
                ),
                Path::new("/etc/airlock"),
            )
        };
        assert_eq!(
            with("state/broker.db", "").unwrap().state_db,
            StateDb::Sqlite(PathBuf::from("/etc/airlock/state/broker.db"))
        );
        let pg = with(
            "postgres://airlock@db.internal:5432/airlock",
            "state_db_password_env = \"AIRLOCK_STATE_DB_PASSWORD\"",
        )
        .unwrap();
        assert_eq!(
            pg.state_db,
            StateDb::Postgres {
                url: "postgres://airlock@db.internal:5432/airlock".to_owned(),
                password_env: Some("AIRLOCK_STATE_DB_PASSWORD".to_owned()),
            }
        );
        assert!(matches!(
            with("postgresql://airlock@db/airlock", "")
                .unwrap()
                .state_db,
            StateDb::Postgres {
                password_env: None,
                ..
            }
        ));
        // Each database has its own witness folder, stable from run to run.
        let other = with("postgres://airlock@db.internal:5432/other", "").unwrap();
        assert_ne!(pg.witness_work_dir(), other.witness_work_dir());
        assert_eq!(
            pg.witness_work_dir(),
            with("postgres://airlock@db.internal:5432/airlock", "")
                .unwrap()
                .witness_work_dir()
        );
        for (state_db, extra, names) in [
            (
                "postgres://airlock:s3cret@db/airlock",
                "",
                "state_db_password_env",
            ),
            ("postgres://db:notaport/airlock", "", "state_db"),
            ("mysql://db/airlock", "", "state_db"),
            (
                "b.db",
                "state_db_password_env = \"A=B\"",
                "state_db_password_env",
            ),
        ] {
            let err = with(state_db, extra).unwrap_err();
            assert!(err.contains(names), "{state_db}: {err}");
            assert!(!err.contains("s3cret"), "{err}");
        }
    }

    #[test]
    fn witness_concurrency_is_read_and_at_least_one() {
        let default = BrokerConfig::parse(GOOD, Path::new("/")).unwrap();
        assert!(default.witness_concurrency >= 1);
        let set = BrokerConfig::parse(&format!("witness_concurrency = 3\n{GOOD}"), Path::new("/"))
            .unwrap();
        assert_eq!(set.witness_concurrency, 3);
        let err = BrokerConfig::parse(&format!("witness_concurrency = 0\n{GOOD}"), Path::new("/"))
            .unwrap_err();
        assert!(err.contains("witness_concurrency"), "{err}");
    }

    #[test]
    fn rejects_unknown_keys_and_bad_durations() {
        let err =
            BrokerConfig::parse(&format!("{GOOD}\nsocket_mode = 1"), Path::new("/")).unwrap_err();
        assert!(err.contains("socket_mode"), "{err}");
        let err = BrokerConfig::parse(&GOOD.replace("72h", "soon"), Path::new("/")).unwrap_err();
        assert!(err.contains("queue_max_age"), "{err}");
        let err = BrokerConfig::parse(&GOOD.replace("runs_root = \"runs\"", ""), Path::new("/"))
            .unwrap_err();
        assert!(err.contains("runs_root"), "{err}");
    }

    const TLS: &str = "[tls]\ncert = \"tls/broker.pem\"\nkey = \"tls/broker.key\"\nclient_ca = \"/etc/airlock/workers-ca.pem\"\n";

    #[test]
    fn the_network_listener_needs_listen_and_tls_together() {
        let plain = BrokerConfig::parse(GOOD, Path::new("/etc/airlock")).unwrap();
        assert_eq!(plain.network, None);
        let c = BrokerConfig::parse(
            &format!("listen = \"0.0.0.0:8643\"\n{GOOD}{TLS}"),
            Path::new("/etc/airlock"),
        )
        .unwrap();
        assert_eq!(
            c.network,
            Some(NetworkConfig {
                listen: "0.0.0.0:8643".to_owned(),
                tls: TlsConfig {
                    cert: PathBuf::from("/etc/airlock/tls/broker.pem"),
                    key: PathBuf::from("/etc/airlock/tls/broker.key"),
                    client_ca: PathBuf::from("/etc/airlock/workers-ca.pem"),
                },
            })
        );
        let cases = [
            (
                format!("listen = \"0.0.0.0:8643\"\n{GOOD}"),
                "listen is set but [tls] is missing",
            ),
            (format!("{GOOD}{TLS}"), "[tls] is set but listen is missing"),
            (
                format!("listen = \"8643\"\n{GOOD}{TLS}"),
                "listen: \"8643\" is not HOST:PORT",
            ),
            (
                format!("listen = \"host:http\"\n{GOOD}{TLS}"),
                "is not HOST:PORT",
            ),
            (
                format!(
                    "listen = \"[::]:8643\"\n{GOOD}{}",
                    TLS.replace("client_ca = \"/etc/airlock/workers-ca.pem\"\n", "")
                ),
                "client_ca",
            ),
            (
                format!(
                    "listen = \"[::]:8643\"\n{GOOD}{}",
                    TLS.replace("cert = ", "certificate = ")
                ),
                "certificate",
            ),
        ];
        for (text, needle) in cases {
            let err = BrokerConfig::parse(&text, Path::new("/")).unwrap_err();
            assert!(err.contains(needle), "{needle}: {err}");
        }
    }

    const GATE: &str = r#"
[[repositories."acme/widgets".gates]]
name = "vendor-freeze"
component = "gates/vendor-freeze.wasm"
examples = "gates/vendor-freeze.toml"
fuel = 5000
memory = "8MiB"
timeout = "500ms"
"#;

    #[test]
    fn gates_are_read_per_repository_with_their_limits() {
        let c = BrokerConfig::parse(&format!("{GOOD}{GATE}"), Path::new("/etc/airlock")).unwrap();
        let gates = &c.gates["acme/widgets"];
        assert_eq!(gates.len(), 1);
        assert_eq!(gates[0].name, "vendor-freeze");
        assert_eq!(
            gates[0].component,
            PathBuf::from("/etc/airlock/gates/vendor-freeze.wasm")
        );
        assert_eq!(
            gates[0].limits,
            airlock_gates::GateLimits {
                fuel: 5000,
                memory_bytes: 8 << 20,
                timeout: Duration::from_millis(500),
            }
        );
        let defaults = BrokerConfig::parse(
            &format!(
                "{GOOD}{}",
                GATE.replace("fuel = 5000\n", "")
                    .replace("memory = \"8MiB\"\n", "")
                    .replace("timeout = \"500ms\"\n", "")
            ),
            Path::new("/"),
        )
        .unwrap();
        assert_eq!(
            defaults.gates["acme/widgets"][0].limits,
            airlock_gates::GateLimits {
                fuel: airlock_gates::DEFAULT_GATE_FUEL,
                memory_bytes: 64 << 20,
                timeout: Duration::from_secs(2),
            }
        );
        assert!(
            BrokerConfig::parse(GOOD, Path::new("/"))
                .unwrap()
                .gates
                .is_empty()
        );
    }

    #[test]
    fn every_bad_gate_value_is_refused_naming_its_key() {
        let cases = [
            (
                GATE.replace("fuel = 5000", "fuel = 0"),
                "gates[0] (vendor-freeze).fuel",
            ),
            (
                GATE.replace("8MiB", "8 parsecs"),
                "gates[0] (vendor-freeze).memory",
            ),
            (GATE.replace("8MiB", "0MiB"), ".memory"),
            (GATE.replace("8MiB", "5GiB"), "at most 4GiB"),
            (
                GATE.replace("500ms", "soon"),
                "gates[0] (vendor-freeze).timeout",
            ),
            (
                GATE.replace("500ms", "0s"),
                ".timeout: must be greater than zero",
            ),
            (
                GATE.replace("vendor-freeze\"\n", "vendor freeze!\"\n"),
                "gates[0].name",
            ),
            (
                GATE.replace("component = \"gates/vendor-freeze.wasm\"\n", ""),
                "component",
            ),
            (
                GATE.replace("fuel = 5000", "fuel = 5000\nnetwork = true"),
                "network",
            ),
            (
                format!("{GATE}{GATE}"),
                "two gates are named \"vendor-freeze\"",
            ),
        ];
        for (gate, needle) in cases {
            let err = BrokerConfig::parse(&format!("{GOOD}{gate}"), Path::new("/")).unwrap_err();
            assert!(err.contains(needle), "{needle}: {err}");
        }
    }

    #[test]
    fn memory_sizes() {
        assert_eq!(parse_memory_size("64MiB").unwrap(), 64 << 20);
        assert_eq!(parse_memory_size("512KiB").unwrap(), 512 << 10);
        assert_eq!(parse_memory_size("1GiB").unwrap(), 1 << 30);
        assert_eq!(parse_memory_size("4096").unwrap(), 4096);
        assert!(parse_memory_size("64MB").is_err());
        assert!(parse_memory_size("MiB").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("0s").unwrap(), Duration::ZERO);
        assert_eq!(parse_duration("15m").unwrap(), Duration::from_secs(900));
        assert_eq!(
            parse_duration("7d").unwrap(),
            Duration::from_secs(7 * 86_400)
        );
        assert_eq!(parse_duration("42").unwrap(), Duration::from_secs(42));
        assert_eq!(parse_duration("1h 30m").unwrap(), Duration::from_secs(5400));
        assert!(parse_duration("3 fortnights").is_err());
        assert!(parse_duration("").is_err());
    }

    const TEMPLATE: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/broker.toml.template"
    ));

    #[test]
    fn the_example_template_loads_as_it_is_and_with_every_key_uncommented() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("broker.toml");
        std::fs::write(&path, TEMPLATE.replace("{{WORKDIR}}", "/w")).unwrap();
        let plain = BrokerConfig::load(&path).unwrap();
        assert_eq!(plain.repositories.len(), 3);
        let full: String = TEMPLATE
            .replace("{{WORKDIR}}", "/w")
            .lines()
            .map(|l| l.strip_prefix("#= ").unwrap_or(l))
            .collect::<Vec<_>>()
            .join("\n");
        std::fs::write(&path, full).unwrap();
        let c = BrokerConfig::load(&path).unwrap();
        assert!(c.work_dir.is_some() && c.policy.is_some());
        assert!(c.network.is_some(), "listen and [tls] are in the template");
        assert!(c.signing.is_some(), "[signing] is in the template");
        assert!(!c.witness_ro.is_empty() && !c.witness_env.is_empty());
        let gitlab = &c.repositories["plat/calc"];
        assert_eq!(gitlab.forge_kind(), forge::ForgeKind::GitLab);
        assert_eq!(
            gitlab.forge_token_env.as_deref(),
            Some("AIRLOCK_GITLAB_TOKEN")
        );
        let r = &c.repositories["acme/widgets"];
        assert_eq!(r.forge_token_env.as_deref(), Some("AIRLOCK_FORGE_TOKEN"));
        assert!(r.forge_repo.is_some() && !r.allow_ro.is_empty());
        let gates = &c.gates["acme/widgets"];
        assert_eq!(gates.len(), 1, "{gates:?}");
        assert_eq!(gates[0].limits.memory_bytes, 32 << 20);
        assert!(gates[0].component.is_absolute() && gates[0].examples.is_absolute());
        // Every key the broker reads is set in the template (as it is or uncommented): the
        // names come from the deserializers themselves, so a new key cannot go undocumented.
        let set = |key: &str| {
            TEMPLATE
                .lines()
                .map(|l| l.strip_prefix("#= ").unwrap_or(l))
                .any(|l| {
                    l.starts_with(&format!("{key} = "))
                        || l.starts_with(&format!("[{key}."))
                        || l == format!("[{key}]")
                        || (l.starts_with("[repositories.") && l.ends_with(&format!(".{key}]")))
                        || (l.starts_with("[[") && l.ends_with(&format!(".{key}]]")))
                })
        };
        let mut keys = field_names::<RawConfig>();
        keys.extend(field_names::<RepositoryConfig>());
        keys.extend(field_names::<GateConfig>());
        keys.extend(field_names::<TlsConfig>());
        keys.extend(field_names::<crate::signing::SigningConfig>());
        keys.extend(field_names::<forge::ForgeTable>());
        assert!(keys.len() > 15, "{keys:?}");
        for key in keys {
            assert!(
                set(key),
                "broker.toml key {key:?} is missing from the template"
            );
        }
    }

    /// The field names `T`'s derived deserializer asks for.
    fn field_names<T: for<'de> Deserialize<'de>>() -> Vec<&'static str> {
        let mut names = Vec::new();
        let _ = T::deserialize(FieldNames(&mut names));
        names
    }

    struct FieldNames<'a>(&'a mut Vec<&'static str>);

    impl<'de> serde::Deserializer<'de> for FieldNames<'_> {
        type Error = serde::de::value::Error;
        fn deserialize_any<V: serde::de::Visitor<'de>>(
            self,
            _visitor: V,
        ) -> std::result::Result<V::Value, Self::Error> {
            Err(serde::de::Error::custom("only a struct's field names"))
        }
        fn deserialize_struct<V: serde::de::Visitor<'de>>(
            self,
            _name: &'static str,
            fields: &'static [&'static str],
            _visitor: V,
        ) -> std::result::Result<V::Value, Self::Error> {
            self.0.extend_from_slice(fields);
            Err(serde::de::Error::custom("field names taken"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
            byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
            identifier ignored_any
        }
    }
}
