//! `airlock init`: write a first, commented `airlock.toml` for a repository from what its working
//! tree shows, and print the `[repositories."NAME"]` block of `broker.toml` that goes with it.
//!
//! The file goes to `./airlock.toml` unless `--output` says otherwise (it is operator input and is
//! never read from the checkout); an existing file is kept unless `--force`. Stdout carries only
//! the broker block, so it can be redirected; notes and warnings go to stderr.
//!
//! Exit codes: 0 written; 2 an error (nothing is written).

use airlock_supervisor::init::{self, HostFacts};
use anyhow::{Context, bail};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `airlock init`.
#[derive(Debug, Args)]
pub struct InitArgs {
    /// The repository's working tree to inspect.
    #[arg(long, default_value = ".")]
    repo: PathBuf,
    /// Where to write the configuration (keep it outside the repository).
    #[arg(long, default_value = "airlock.toml")]
    output: PathBuf,
    /// Overwrite the output file if it exists.
    #[arg(long)]
    force: bool,
}

/// `airlock init`.
pub fn run(args: InitArgs) -> anyhow::Result<ExitCode> {
    if !args.repo.is_dir() {
        bail!("--repo {}: not a directory", args.repo.display());
    }
    let output = std::path::absolute(&args.output)
        .with_context(|| format!("--output {}", args.output.display()))?;
    let config_dir = output
        .parent()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"));
    let host = HostFacts::current(&args.repo, &config_dir);
    let detected = init::detect(&args.repo, &host);
    let text = init::render_airlock_toml(&detected);
    init::write_config(&output, &text, args.force)?;
    for warning in &detected.warnings {
        // Warnings quote the repository's files (CI images, paths): escaped for the terminal.
        eprintln!(
            "airlock init: warning: {}",
            airlock_policies::terminal::escaped_line(warning)
        );
    }
    let what = detected
        .ecosystem
        .map_or("nothing recognised".to_string(), |e| {
            format!("{}, {}", e.name(), detected.tests.runner)
        });
    eprintln!(
        "airlock init: wrote {} ({what}); add this block to the broker's broker.toml:",
        output.display()
    );
    out!("{}", init::render_broker_block(&detected, &detected.name));
    Ok(ExitCode::SUCCESS)
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
            assert_eq!(repository.remote, "origin");
            assert!(
                repository
                    .allow_ro
                    .contains(&airlock_supervisor::config::PathsConfig::default().envs_dir),
                "{text}"
            );
        }
    }
}
