//! The run's test environment, resolved from `[tests]`: `~` expanded to the operator's home,
//! `{env}` replaced by the prepared environment directory, every granted path checked to exist,
//! `pass_env` read from the operator's environment, and the test program looked up the way the
//! sandbox will look it up. Every problem names the `airlock.toml` key that fixes it, and is
//! found before any model call.

use crate::config::{ENV_DIR_PLACEHOLDER, TestsConfig};
use airlock_policies::network::{AllowEntry, NetworkMode, TestNetwork};
use airlock_policies::testrun::{TestEnvironment, TestService, TreeLink};
use std::path::{Path, PathBuf};

/// A `[tests]` setting that cannot be used as it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("airlock.toml `{key}`: {problem}")]
pub struct TestEnvError {
    /// The key to fix (`tests.ro`, `tests.command`, ...).
    pub key: String,
    /// What is wrong and how to fix it.
    pub problem: String,
}

fn bad(key: &str, problem: impl Into<String>) -> TestEnvError {
    TestEnvError {
        key: key.to_string(),
        problem: problem.into(),
    }
}

/// What the operator's process knows that the file does not: its home and its environment.
pub struct Host<'a> {
    /// `$HOME`, if set.
    pub home: Option<PathBuf>,
    /// Reads one of the operator's variables.
    pub var: &'a dyn Fn(&str) -> Option<String>,
}

impl Host<'_> {
    /// The real process's home and environment.
    pub fn current() -> Host<'static> {
        Host {
            home: std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(PathBuf::from),
            var: &|name| std::env::var(name).ok(),
        }
    }
}

/// Expand a leading `~` (alone or before `/`) and `{env}` in one value.
pub fn expand(
    value: &str,
    key: &str,
    host: &Host<'_>,
    env_dir: Option<&Path>,
) -> Result<String, TestEnvError> {
    let mut out = value.to_string();
    if out.contains(ENV_DIR_PLACEHOLDER) {
        let Some(dir) = env_dir else {
            return Err(bad(
                key,
                "uses {env}, which only exists when [tests.prepare] is configured",
            ));
        };
        out = out.replace(ENV_DIR_PLACEHOLDER, &dir.display().to_string());
    }
    if out == "~" || out.starts_with("~/") {
        let Some(home) = &host.home else {
            return Err(bad(
                key,
                format!("{value:?} starts with `~` but HOME is not set: write the absolute path"),
            ));
        };
        out = format!("{}{}", home.display(), &out[1..]);
    }
    Ok(out)
}

/// The resolved test command and environment of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedTests {
    /// The full-run command with `~` and `{env}` expanded.
    pub command: Vec<String>,
    /// The environment (granted paths exist; links point into the environment directory).
    pub environment: TestEnvironment,
}

/// Resolve `[tests]` for a run whose prepared environment directory is `env_dir` (`None` when
/// there is no prepare step). Granted paths must exist; link sources are checked by
/// [`check_links`] once prepare has run.
pub fn resolve(
    tests: &TestsConfig,
    host: &Host<'_>,
    env_dir: Option<&Path>,
) -> Result<ResolvedTests, TestEnvError> {
    let mut environment = TestEnvironment::default();
    for (i, raw) in tests.ro.iter().enumerate() {
        let key = format!("tests.ro[{i}]");
        let path = PathBuf::from(expand(raw, &key, host, env_dir)?);
        if !path.is_absolute() {
            return Err(bad(
                &key,
                format!("{raw:?} must be an absolute path (or start with ~/)"),
            ));
        }
        if path.symlink_metadata().is_err() {
            return Err(bad(
                &key,
                format!(
                    "{} does not exist on this host: fix the path or remove it",
                    path.display()
                ),
            ));
        }
        environment.ro.push(path);
    }
    if let Some(dir) = env_dir {
        environment.ro.push(dir.to_path_buf());
    }
    for name in &tests.pass_env {
        if let Some(value) = (host.var)(name) {
            environment.env.insert(name.clone(), value);
        }
    }
    for (name, raw) in &tests.env {
        let value = expand(raw, &format!("tests.env.{name}"), host, env_dir)?;
        environment.env.insert(name.clone(), value);
    }
    if let (Some(prepare), Some(dir)) = (&tests.prepare, env_dir) {
        for link in &prepare.links {
            environment.links.push(TreeLink {
                path: link.clone(),
                source: links_dir(dir).join(link),
            });
        }
    }
    for (i, service) in tests.services.iter().enumerate() {
        let expand_all = |words: &[String], what: &str| {
            words
                .iter()
                .enumerate()
                .map(|(j, w)| {
                    expand(
                        w,
                        &format!("tests.services[{i}].{what}[{j}]"),
                        host,
                        env_dir,
                    )
                })
                .collect::<Result<Vec<_>, _>>()
        };
        let mut env = std::collections::BTreeMap::new();
        for (name, raw) in &service.env {
            env.insert(
                name.clone(),
                expand(
                    raw,
                    &format!("tests.services[{i}].env.{name}"),
                    host,
                    env_dir,
                )?,
            );
        }
        environment.services.push(TestService {
            name: service.name.clone(),
            command: expand_all(&service.command, "command")?,
            env,
            ready_port: service.ready_port,
            ready_command: expand_all(&service.ready_command, "ready_command")?,
            ready_timeout_secs: service.ready_timeout_secs(),
        });
    }
    environment.network = TestNetwork {
        mode: tests.network,
        allow: expand_allow("tests", &tests.allow, false)?,
        read_only: tests.http_read_only,
    };
    let command = tests
        .command
        .iter()
        .enumerate()
        .map(|(i, w)| expand(w, &format!("tests.command[{i}]"), host, env_dir))
        .collect::<Result<Vec<_>, _>>()?;
    environment
        .validate()
        .map_err(|problem| bad("tests", problem))?;
    Ok(ResolvedTests {
        command,
        environment,
    })
}

/// The network of the prepare command: `[tests.prepare] network` (`proxy` when unset) and its
/// allowlist, or every preset this host's installers configure when `allow` is unset.
pub fn prepare_network(
    prepare: &crate::config::PrepareConfig,
) -> Result<TestNetwork, TestEnvError> {
    let mode = prepare.network();
    let allow = match (&prepare.allow, mode) {
        (_, m) if m != NetworkMode::Proxy => Vec::new(),
        (Some(written), _) => expand_allow("tests.prepare", written, false)?,
        (None, _) => {
            let defaults: Vec<String> = crate::config::DEFAULT_PREPARE_ALLOW
                .iter()
                .map(|p| p.to_string())
                .collect();
            expand_allow("tests.prepare", &defaults, true)?
        }
    };
    Ok(TestNetwork {
        mode,
        allow,
        read_only: false,
    })
}

/// Expand `TABLE.allow`: presets read from the installers' configuration, entries parsed.
/// With `skip_unavailable`, a preset whose installer is not configured here is left out.
fn expand_allow(
    table: &str,
    written: &[String],
    skip_unavailable: bool,
) -> Result<Vec<AllowEntry>, TestEnvError> {
    airlock_egress::presets::expand_with(written, skip_unavailable)
        .map_err(|e| bad(&format!("{table}.allow[{}]", e.index), e.message))
}

/// Where prepare's kept tree paths live beside the environment directory `env_dir`.
pub fn links_dir(env_dir: &Path) -> PathBuf {
    env_dir.with_file_name("links")
}

/// Every prepared link must exist once prepare has run.
pub fn check_links(environment: &TestEnvironment) -> Result<(), TestEnvError> {
    for link in &environment.links {
        if link.source.symlink_metadata().is_err() {
            return Err(bad(
                "tests.prepare.links",
                format!(
                    "prepare did not create `{}` in the tree: fix the prepare command or remove \
                     the link",
                    link.path
                ),
            ));
        }
    }
    Ok(())
}

/// Check that the sandbox will find the test program: an absolute path must exist under a
/// granted directory; a bare name must be on the sandbox's `PATH` (the `PATH` of `[tests] env`,
/// else the sandbox's default) inside a granted directory. A relative path is the tree's own
/// script and is not checked here. `Err` names the key and how to grant the program.
pub fn check_program(
    command: &[String],
    environment: &TestEnvironment,
    key: &str,
) -> Result<(), TestEnvError> {
    let Some(program) = command.first() else {
        return Err(bad(key, "must name a program"));
    };
    let granted: Vec<PathBuf> = airlock_sandbox::SYSTEM_RO
        .iter()
        .map(PathBuf::from)
        .chain(environment.ro.iter().cloned())
        .collect();
    // The program's own directory must be visible: a symlink in an ungranted directory is not,
    // wherever it points.
    let inside = |p: &Path| {
        let dir = p.parent().unwrap_or(Path::new("/"));
        let real_dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
        granted.iter().any(|g| {
            let g_real = g.canonicalize().unwrap_or_else(|_| g.clone());
            dir.starts_with(g) || real_dir.starts_with(&g_real)
        })
    };
    let path = Path::new(program);
    if program.contains('/') {
        if !path.is_absolute() {
            return Ok(());
        }
        if !path.exists() {
            return Err(bad(
                key,
                format!("the test program {program} does not exist on this host"),
            ));
        }
        if !inside(path) {
            return Err(bad(
                key,
                format!(
                    "the test program {program} is not found inside the sandbox: grant its \
                     directory read-only with [tests] ro = [\"{}\"]",
                    grant_hint(path).display()
                ),
            ));
        }
        return Ok(());
    }
    let sandbox_path = environment
        .env
        .get("PATH")
        .cloned()
        .unwrap_or_else(|| airlock_sandbox::DEFAULT_PATH.to_string());
    for dir in sandbox_path.split(':').filter(|d| !d.is_empty()) {
        let candidate = Path::new(dir).join(program);
        if candidate.is_file() && inside(&candidate) {
            return Ok(());
        }
    }
    let on_host = std::env::var("PATH").ok().and_then(|host_path| {
        host_path
            .split(':')
            .map(|d| Path::new(d).join(program))
            .find(|p| p.is_file())
    });
    let hint = match on_host {
        Some(found) => format!(
            "; on this host it is {}: grant it with [tests] ro = [\"{}\"] and use its absolute \
             path in tests.command (or add its directory to PATH in [tests] env)",
            found.display(),
            grant_hint(&found).display()
        ),
        None => "; it is not on this host's PATH either".to_string(),
    };
    Err(bad(
        key,
        format!("`{program}` is not found inside the sandbox (PATH there is {sandbox_path}){hint}"),
    ))
}

/// The directory to grant for a program: its `bin/`'s parent (a venv, a toolchain), else its
/// directory.
fn grant_hint(program: &Path) -> PathBuf {
    let dir = program.parent().unwrap_or(Path::new("/"));
    if dir.file_name().is_some_and(|n| n == "bin")
        && let Some(parent) = dir.parent()
    {
        return parent.to_path_buf();
    }
    dir.to_path_buf()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(home: Option<&str>) -> Host<'static> {
        Host {
            home: home.map(PathBuf::from),
            var: &|name| (name == "LANG").then(|| "C.UTF-8".to_string()),
        }
    }

    #[test]
    fn tilde_and_env_dir_are_expanded() {
        let h = host(Some("/home/op"));
        assert_eq!(
            expand("~/.cargo", "k", &h, None).unwrap(),
            "/home/op/.cargo"
        );
        assert_eq!(
            expand("{env}/site", "k", &h, Some(Path::new("/c/e1/env"))).unwrap(),
            "/c/e1/env/site"
        );
        let err = expand("~/.cargo", "tests.ro[0]", &host(None), None).unwrap_err();
        assert!(err.to_string().contains("HOME is not set"), "{err}");
        assert!(err.to_string().contains("tests.ro[0]"), "{err}");
    }

    #[test]
    fn a_missing_grant_names_its_key() {
        let tests = TestsConfig {
            ro: vec!["/definitely/not/here".into()],
            ..TestsConfig::default()
        };
        let err = resolve(&tests, &host(Some("/root")), None).unwrap_err();
        assert_eq!(err.key, "tests.ro[0]");
        assert!(err.problem.contains("does not exist"), "{err}");
    }

    #[test]
    fn pass_env_reads_the_operator_environment() {
        let tests = TestsConfig {
            pass_env: vec!["LANG".into(), "UNSET_ONE".into()],
            ..TestsConfig::default()
        };
        let r = resolve(&tests, &host(Some("/root")), None).unwrap();
        assert_eq!(r.environment.env["LANG"], "C.UTF-8");
        assert!(!r.environment.env.contains_key("UNSET_ONE"));
    }

    #[test]
    fn a_program_outside_the_grants_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("venv/bin");
        std::fs::create_dir_all(&bin).unwrap();
        let py = bin.join("python");
        std::fs::write(&py, "").unwrap();
        let cmd = vec![py.display().to_string(), "-m".into(), "pytest".into()];
        let err = check_program(&cmd, &TestEnvironment::default(), "tests.command").unwrap_err();
        assert!(
            err.problem.contains("not found inside the sandbox"),
            "{err}"
        );
        assert!(
            err.problem
                .contains(&dir.path().join("venv").display().to_string()),
            "{err}"
        );
        let env = TestEnvironment {
            ro: vec![dir.path().join("venv")],
            ..TestEnvironment::default()
        };
        check_program(&cmd, &env, "tests.command").unwrap();
        let err = check_program(
            &["no-such-program-xyz".to_string()],
            &TestEnvironment::default(),
            "tests.command",
        )
        .unwrap_err();
        assert!(err.problem.contains("PATH there is"), "{err}");
    }
}
