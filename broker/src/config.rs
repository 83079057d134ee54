//! `broker.toml`: where the broker listens, keeps its state and finds the repositories it may
//! publish to. Every path is operator-controlled; nothing here ever comes from a run.

use crate::error::{Error, Result};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The broker's configuration, as read from `broker.toml`.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// Unix socket the supervisors connect to (created with mode 0600).
    pub socket: PathBuf,
    /// SQLite state database (runs, submissions, queue, decisions).
    pub state_db: PathBuf,
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
    /// Extra host paths the witness sandbox may read (toolchains outside `/usr`); a run's test
    /// environment may grant these and anything beneath them.
    pub witness_ro: Vec<PathBuf>,
    /// Extra environment for witness commands (e.g. `RUSTC`, `CARGO_HOME`), set by the operator.
    pub witness_env: BTreeMap<String, String>,
    /// An `airlock-policies` policy file; the built-in policy when unset.
    pub policy: Option<PathBuf>,
    /// Repositories this broker may publish to, by the name runs register with.
    pub repositories: BTreeMap<String, RepositoryConfig>,
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
    /// `owner/name` on the forge; defaults to the repository's name in this file.
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
}

/// GitHub's `author_association` values a follow-up is accepted from by default: the people
/// with write access.
pub fn default_feedback_from() -> Vec<String> {
    ["OWNER", "MEMBER", "COLLABORATOR"]
        .map(str::to_owned)
        .to_vec()
}

fn default_github_api() -> String {
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
    state_db: PathBuf,
    runs_root: PathBuf,
    audit_log: PathBuf,
    #[serde(default)]
    work_dir: Option<PathBuf>,
    queue_max_age: String,
    #[serde(default = "default_witness_timeout")]
    witness_timeout: String,
    #[serde(default = "default_witness_concurrency")]
    witness_concurrency: usize,
    #[serde(default)]
    witness_ro: Vec<PathBuf>,
    #[serde(default)]
    witness_env: BTreeMap<String, String>,
    #[serde(default)]
    policy: Option<PathBuf>,
    #[serde(default)]
    repositories: BTreeMap<String, RepositoryConfig>,
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
        let witness_timeout =
            parse_duration(&raw.witness_timeout).map_err(|e| format!("witness_timeout: {e}"))?;
        if witness_timeout.is_zero() {
            return Err("witness_timeout: must be greater than zero".to_owned());
        }
        if raw.witness_concurrency == 0 {
            return Err("witness_concurrency: must be at least 1".to_owned());
        }
        let mut repositories = BTreeMap::new();
        for (name, mut repo) in raw.repositories {
            if name.is_empty() {
                return Err("repositories: a repository name must not be empty".to_owned());
            }
            if repo.remote.trim().is_empty() {
                return Err(format!("repositories.{name:?}.remote: must not be empty"));
            }
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
            let forge_repo = repo.forge_repo.clone().unwrap_or_else(|| name.clone());
            if forge_repo.split('/').count() != 2 || forge_repo.split('/').any(str::is_empty) {
                return Err(format!(
                    "repositories.{name:?}.forge_repo: {forge_repo:?} is not of the form owner/name"
                ));
            }
            repo.clone = abs(repo.clone);
            repo.ssh_key = repo.ssh_key.map(abs);
            repo.allow_ro = repo.allow_ro.into_iter().map(abs).collect();
            repositories.insert(name, repo);
        }
        Ok(BrokerConfig {
            socket: abs(raw.socket),
            state_db: abs(raw.state_db),
            runs_root: abs(raw.runs_root),
            audit_log: abs(raw.audit_log),
            work_dir: raw.work_dir.map(abs),
            queue_max_age,
            witness_timeout,
            witness_concurrency: raw.witness_concurrency,
            witness_ro: raw.witness_ro.into_iter().map(abs).collect(),
            witness_env: raw.witness_env,
            policy: raw.policy.map(abs),
            repositories,
        })
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
            let id = hex::encode(sha2::Sha256::digest(
                self.state_db.to_string_lossy().as_bytes(),
            ));
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
        assert_eq!(c.state_db, PathBuf::from("/var/lib/airlock/broker.db"));
        assert_eq!(c.queue_max_age, Duration::from_secs(72 * 3600));
        let r = &c.repositories["acme/widgets"];
        assert_eq!(r.clone, PathBuf::from("/etc/airlock/clones/widgets"));
        assert_eq!(r.github_api, "https://api.github.com");
        assert_eq!(r.forge_slug("acme/widgets"), "acme/widgets");
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
        assert!(!c.witness_ro.is_empty() && !c.witness_env.is_empty());
        let r = &c.repositories["acme/widgets"];
        assert_eq!(r.forge_token_env.as_deref(), Some("AIRLOCK_FORGE_TOKEN"));
        assert!(r.forge_repo.is_some() && !r.allow_ro.is_empty());
        // Every key the broker reads is set in the template (as it is or uncommented): the
        // names come from the deserializers themselves, so a new key cannot go undocumented.
        let set = |key: &str| {
            TEMPLATE
                .lines()
                .map(|l| l.strip_prefix("#= ").unwrap_or(l))
                .any(|l| l.starts_with(&format!("{key} = ")) || l.starts_with(&format!("[{key}.")))
        };
        let mut keys = field_names::<RawConfig>();
        keys.extend(field_names::<RepositoryConfig>());
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
