//! `airlock init`: write a first, commented `airlock.toml` for a repository from what its working
//! tree shows and, with `--broker`, the `broker.toml` that goes with it (else print its
//! `[repositories."NAME"]` block).
//!
//! Both files take their paths from one layout under airlock's data directory
//! ([`airlock_supervisor::init::Layout`]): the socket, the runs root and the prepared
//! environments of one are the other's. The files go beside each other (`./airlock.toml`,
//! `./broker.toml` unless `--output` says otherwise: they are operator input and never read from
//! the checkout); an existing file is kept unless `--force`, and then nothing is written. Stdout
//! carries only the broker block (without `--broker`), so it can be redirected; notes and
//! warnings go to stderr.
//!
//! Exit codes: 0 written; 2 an error (nothing is written).

use airlock_supervisor::init::{self, HostFacts, InitError};
use anyhow::{Context, bail};
use clap::Args;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Arguments of `airlock init`.
#[derive(Debug, Args)]
pub struct InitArgs {
    /// The repository's working tree to inspect (the top of a git work tree).
    #[arg(long, default_value = ".")]
    repo: PathBuf,
    /// Where to write the configuration (keep it outside the repository).
    #[arg(long, default_value = "airlock.toml")]
    output: PathBuf,
    /// Also write broker.toml beside the configuration (or at --broker-output), agreeing with
    /// it: socket, runs root, the prepared environments' directory, the repository's block.
    #[arg(long)]
    broker: bool,
    /// Where --broker writes broker.toml (default: beside --output).
    #[arg(long, value_name = "PATH", requires = "broker")]
    broker_output: Option<PathBuf>,
    /// The GitHub Enterprise REST API (https://HOST/api/v3): the remote's host is that
    /// GitHub's, and draft pull requests are opened through it.
    #[arg(long, value_name = "URL", conflicts_with = "gitlab_api")]
    github_api: Option<String>,
    /// A GitLab instance's REST API (https://HOST/api/v4) whose host name does not say
    /// `gitlab`: the remote is a project there, and airlock.toml gets its [gitlab] table.
    #[arg(long, value_name = "URL")]
    gitlab_api: Option<String>,
    /// Overwrite the files that exist.
    #[arg(long)]
    force: bool,
}

/// `airlock init`.
pub fn run(args: InitArgs) -> anyhow::Result<ExitCode> {
    if !args.repo.is_dir() {
        bail!(
            "--repo {}: not a directory: pass the repository's working tree",
            args.repo.display()
        );
    }
    init::check_work_tree(&args.repo)?;
    if let Some(api) = &args.github_api
        && !init::is_http_url(api)
    {
        bail!("--github-api {api:?}: must be an https:// URL such as https://HOST/api/v3");
    }
    if let Some(api) = &args.gitlab_api
        && let Err(e) = airlock_supervisor::config::GitlabConfig::check_api_url(api)
    {
        bail!("--gitlab-api {api:?}: {e}");
    }
    let output = std::path::absolute(&args.output)
        .with_context(|| format!("--output {}", args.output.display()))?;
    let config_dir = output
        .parent()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"));
    let broker_output = match (&args.broker_output, args.broker) {
        (Some(path), _) => Some(
            std::path::absolute(path)
                .with_context(|| format!("--broker-output {}", path.display()))?,
        ),
        (None, true) => Some(config_dir.join("broker.toml")),
        (None, false) => None,
    };
    // Neither file is written when either would overwrite one without --force.
    for path in std::iter::once(&output).chain(broker_output.as_ref()) {
        if !args.force && path.symlink_metadata().is_ok() {
            return Err(InitError::Exists { path: path.clone() }.into());
        }
    }
    let host = HostFacts::current(&args.repo, &config_dir);
    let forge_api = match (&args.github_api, &args.gitlab_api) {
        (Some(api), _) => init::ForgeApi::GitHub(api),
        (None, Some(api)) => init::ForgeApi::GitLab(api),
        (None, None) => init::ForgeApi::FromHost,
    };
    let detected = init::detect_for(&args.repo, &host, forge_api);
    let text = init::render_airlock_toml(&detected);
    let broker_text = broker_output
        .as_ref()
        .map(|path| broker_toml(&detected, path, &output))
        .transpose()?;
    init::write_config(&output, &text, args.force)?;
    if let (Some(path), Some(text)) = (&broker_output, &broker_text) {
        init::write_file(path, text, args.force)?;
    }
    for warning in &detected.warnings {
        // Warnings quote the repository's files (CI images, paths): escaped for the terminal.
        eprintln!(
            "airlock init: warning: {}",
            airlock_policies::terminal::escaped_line(warning)
        );
    }
    if let Some(note) = detected.publication_note() {
        eprintln!(
            "airlock init: note: {}",
            airlock_policies::terminal::escaped_line(&note)
        );
    }
    let what = detected
        .ecosystem
        .map_or("nothing recognised".to_string(), |e| {
            format!("{}, {}", e.name(), detected.tests.runner)
        });
    match &broker_output {
        Some(path) => eprintln!(
            "airlock init: wrote {} ({what}) and {} (repository {:?}); check the pair with \
             `airlock doctor --config {}`",
            output.display(),
            path.display(),
            detected.name,
            output.display()
        ),
        None => {
            eprintln!(
                "airlock init: wrote {} ({what}); add this block to the broker's broker.toml \
                 (or run `airlock init --broker` to write a whole broker.toml):",
                output.display()
            );
            out!("{}", init::render_broker_block(&detected, &detected.name));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The whole broker.toml for `detected`, checked to load as the broker reads it.
fn broker_toml(
    detected: &init::Detected,
    path: &Path,
    airlock_toml: &Path,
) -> anyhow::Result<String> {
    let text = init::render_broker_toml(detected, &detected.name, airlock_toml);
    let base = path.parent().unwrap_or(Path::new("/"));
    airlock_broker::BrokerConfig::parse(&text, base).map_err(|e| {
        anyhow::anyhow!(
            "the generated broker.toml does not load, so nothing was written (a bug in airlock \
             init): {e}"
        )
    })?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use airlock_supervisor::init::{self, HostFacts};

    /// The printed block, under a broker.toml's required keys, loads as the broker reads it.
    #[test]
    fn the_broker_block_loads_in_broker_toml() {
        let repo = tempfile::tempdir().unwrap();
        std::fs::write(repo.path().join("conftest.py"), "").unwrap();
        std::fs::write(repo.path().join("requirements.txt"), "").unwrap();
        let host = HostFacts {
            config_dir: "/etc/airlock-test".into(),
            data_dir: "/var/lib/airlock-test".into(),
            ..HostFacts::default()
        };
        let detected = init::detect(repo.path(), &host);
        for name in ["acme/calc", "calc"] {
            let text = format!(
                "socket = \"b.sock\"\nstate_db = \"b.db\"\nruns_root = \"runs\"\n\
                 audit_log = \"audit.log\"\nqueue_max_age = \"7d\"\n\n{}",
                init::render_broker_block(&detected, name)
            );
            let config = airlock_broker::BrokerConfig::parse(&text, std::path::Path::new("/b"))
                .unwrap_or_else(|e| panic!("{e}\n{text}"));
            let repository = &config.repositories[name];
            // A tree that is no repository has no remote: branches go into the tree itself.
            assert_eq!(repository.remote, repo.path().to_string_lossy());
            assert!(
                repository
                    .allow_ro
                    .contains(&detected.layout.paths.envs_dir),
                "{text}"
            );
            // The whole file agrees with the airlock.toml on every shared path.
            let whole = init::render_broker_toml(
                &detected,
                name,
                "/etc/airlock-test/airlock.toml".as_ref(),
            );
            let broker = airlock_broker::BrokerConfig::parse(&whole, std::path::Path::new("/b"))
                .unwrap_or_else(|e| panic!("{e}\n{whole}"));
            let airlock = airlock_supervisor::config::Config::parse(
                &init::render_airlock_toml(&detected),
                "airlock.toml".as_ref(),
            )
            .unwrap();
            assert_eq!(Some(broker.socket), airlock.broker.socket);
            assert_eq!(broker.runs_root, airlock.paths.runs_root);
            assert!(
                broker.repositories[name]
                    .allow_ro
                    .contains(&airlock.paths.envs_dir)
            );
        }
    }
}
