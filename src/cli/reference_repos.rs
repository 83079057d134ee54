//! `airlock reference-repos`: the operator's exemplar repositories as one JSON document, the
//! same answer a run records (`airlock_supervisor::reference_repos::collect`).
//!
//! Exit codes: 0 the call answered (`ok: true`, whatever each repository's status); 3 the
//! directory cannot be read (`mesh-config-dir-unreadable`); 2 an error before the call (a bad
//! `--config`, an unusable mirror cache).

use airlock_supervisor::reference_repos::{self, Request};
use anyhow::Context;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

/// Exit code of the whole-call refusal (`mesh-config-dir-unreadable`).
pub const EXIT_DIR_UNREADABLE: u8 = 3;

/// Arguments of `airlock reference-repos`.
#[derive(Debug, Args)]
pub struct ReferenceReposArgs {
    /// The directory of YAML files, one per repository (default: `[reference_repos] dir` of
    /// the airlock.toml found, else `.airlock/reference-repos`).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The most files walked per repository (default: `[reference_repos] max_files`, 200).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    max_files: Option<u64>,
    /// Keep only repositories whose `applies_to_languages` names this language (and those that
    /// name none).
    #[arg(long)]
    language: Option<String>,
    /// airlock.toml (its mirror cache and `[reference_repos]`); as for `airlock run`.
    #[arg(long)]
    config: Option<PathBuf>,
}

/// `airlock reference-repos`.
pub fn run(args: ReferenceReposArgs) -> anyhow::Result<ExitCode> {
    let found = airlock_supervisor::config::discover(args.config.as_deref());
    let (config, _) = airlock_supervisor::runner::load_config(args.config.as_deref())?;
    let dir = match (&args.dir, &found) {
        (Some(dir), _) => dir.clone(),
        (None, Some(_)) => config.reference_repos.dir.clone(),
        // No airlock.toml: the project's directory as written, so the answer holds no cwd.
        (None, None) => PathBuf::from(reference_repos::DEFAULT_DIR),
    };
    let max_files = args
        .max_files
        .map_or(config.reference_repos.max_files, |n| {
            usize::try_from(n).unwrap_or(usize::MAX)
        });
    let cache = airlock_checkout::MirrorCache::new(&config.paths.cache_dir)
        .with_context(|| format!("the mirror cache {}", config.paths.cache_dir.display()))?;
    let collected = reference_repos::collect(&Request {
        dir: &dir,
        max_files,
        language: args.language.as_deref(),
        cache: &cache,
    });
    out!("{}", collected.answer.to_json());
    Ok(if collected.answer.ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_DIR_UNREADABLE)
    })
}
