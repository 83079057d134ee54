//! `airlock batch`: many issues of one repository on one pin. The repository is mirrored once,
//! pinned once and indexed once, before anything else; every issue is then read and triaged
//! (ready / needs-info / needs-triage, with the reason) before a token is spent, and only the
//! ready ones run, `parallel` at a time, each with its own worktree, budget and outcome,
//! through the same [`super::worker::Worker`] as the triggers (GitHub issues are claimed
//! through the broker first).

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::Serialize;

use super::worker::{Job, WorkOutcome, Worker, read_and_triage};
use super::{Result, TriggerError};
use crate::adapters::CodegraphRetrieval;
use crate::agents::{RouteOptions, Routes};
use crate::github::{GithubClient, IssueSource};
use crate::runner::RunError;
use crate::triage::{Triage, TriageState};

/// Which issues a batch takes.
#[derive(Debug, Clone)]
pub enum BatchIssues {
    /// A list file: one `--issue` value per line (an issue file, relative to the list's
    /// folder, or a GitHub issue); blank lines and `#` comments are skipped.
    File(PathBuf),
    /// The open GitHub issues with this label, of the repository `--repo` names on GitHub.
    Label(String),
}

/// What `airlock batch` was asked.
#[derive(Debug, Clone)]
pub struct BatchOptions {
    /// The repository (a URL or a path), mirrored once for the batch.
    pub repo: String,
    /// The revision every run pins; the mirror's `HEAD` when absent.
    pub commit: Option<String>,
    /// The issues.
    pub issues: BatchIssues,
    /// How many runs go on at once.
    pub parallel: usize,
    /// Fetch into the mirror before pinning.
    pub fetch: bool,
    /// The agent of every run (a built-in name or a definition's path); when absent, the agent
    /// of `[agent] triggered` that `--label` starts, else the default agent.
    pub agent: Option<String>,
}

/// One issue of the batch.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BatchEntry {
    /// The issue as listed (a GitHub reference or a file path).
    pub source: String,
    /// Its id, once read (`CALC-7`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issue_id: Option<String>,
    /// Its triage, once read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub triage: Option<Triage>,
    /// What became of it.
    pub outcome: WorkOutcome,
}

/// The whole batch.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BatchReport {
    /// The repository as given.
    pub repo: String,
    /// The one pin of every run.
    pub base_commit: String,
    /// Every issue, in the order listed.
    pub issues: Vec<BatchEntry>,
    /// The exit code of the worst outcome.
    pub exit_code: u8,
}

/// `OWNER/REPO` of a GitHub clone URL (`https://HOST/OWNER/REPO(.git)`).
fn github_slug(url: &str) -> Option<String> {
    let rest = url.trim().split_once("://")?.1;
    let mut parts = rest.trim_end_matches('/').split('/').skip(1);
    let owner = parts.next()?;
    let repo = parts.next()?.trim_end_matches(".git");
    (parts.next().is_none() && !owner.is_empty() && !repo.is_empty())
        .then(|| format!("{owner}/{repo}"))
}

fn list_file(path: &Path) -> Result<Vec<IssueSource>> {
    let text = std::fs::read_to_string(path)
        .map_err(TriggerError::io(format!("reading {}", path.display())))?;
    let base = path.parent().unwrap_or(Path::new("."));
    let mut sources = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let source = IssueSource::parse(line)
            .map_err(|e| TriggerError::Usage(format!("{} line {}: {e}", path.display(), i + 1)))?;
        sources.push(match source {
            IssueSource::File(p) if p.is_relative() => IssueSource::File(base.join(p)),
            other => other,
        });
    }
    Ok(sources)
}

fn describe(source: &IssueSource) -> String {
    match source {
        IssueSource::File(p) => p.display().to_string(),
        IssueSource::GitHub(r) => r.to_string(),
        IssueSource::GitLab(r) => format!("gitlab:{r}"),
        IssueSource::FollowUp(n) => format!("follow-up of queue item {n}"),
        IssueSource::Merged(r) => format!("{r} (merged)"),
    }
}

/// Whether `repo` is `own` (the forge's clone URL of the issues' repository), `.git` and a
/// trailing `/` aside: only then may the forge's read token go to git.
fn is_own_clone_url(own: Option<&str>, repo: &str) -> bool {
    let bare = |u: &str| u.trim_end_matches('/').trim_end_matches(".git").to_owned();
    own.is_some_and(|own| bare(own) == bare(repo))
}

/// Run the batch. Errors are the batch's own (configuration, mirror, pin, index, listing);
/// what happens to one issue is its entry's outcome.
pub fn run_batch(options: &BatchOptions, worker: &Worker) -> Result<BatchReport> {
    let config = worker.load_config()?;
    // The read token goes to git only for the issues' own repository on the configured forge
    // (`--label`: `--repo` is that repository's clone URL), never to another host.
    let mut http_token = None;
    let mut agent = options.agent.clone();
    let sources = match &options.issues {
        BatchIssues::File(path) => list_file(path)?,
        BatchIssues::Label(label) => {
            let slug = github_slug(&options.repo).ok_or_else(|| {
                TriggerError::Usage(format!(
                    "--label needs --repo to be a GitHub URL (https://HOST/OWNER/REPO), not {:?}",
                    options.repo
                ))
            })?;
            let (owner, repo) = slug.split_once('/').unwrap_or_default();
            let client = GithubClient::from_config(&config.github)?;
            let own = crate::github::GithubIssueRef {
                owner: owner.to_owned(),
                repo: repo.to_owned(),
                number: 0,
                web_base: None,
            }
            .clone_url(&config.github);
            if is_own_clone_url(own.as_deref(), &options.repo) {
                http_token = client.token().map(str::to_owned);
            }
            if agent.is_none() {
                let routes = Routes::build(RouteOptions {
                    default_agent: config.agent.definition.as_deref(),
                    label: None,
                    triggered: &config.agent.triggered,
                    review_pull_requests: false,
                })?;
                agent = routes.for_label(label).map(str::to_owned);
            }
            client
                .labelled_open_issues(owner, repo, label, &config.github)?
                .into_iter()
                .filter_map(|n| IssueSource::parse(&format!("github:{slug}#{n}")).ok())
                .collect()
        }
    };

    // One mirror, one pin, one index for the whole batch, before any run.
    let cache =
        airlock_checkout::MirrorCache::new(&config.paths.cache_dir).map_err(RunError::from)?;
    let mirror = cache
        .mirror_with(
            &options.repo,
            &airlock_checkout::MirrorOptions {
                refresh: options.fetch,
                http_token,
            },
        )
        .map_err(RunError::from)?;
    let commit = mirror
        .resolve(options.commit.as_deref().unwrap_or("HEAD"))
        .map_err(RunError::from)?
        .as_str()
        .to_owned();
    let index_key = airlock_codegraph::store::repo_key(mirror.path());
    CodegraphRetrieval::open(mirror.path(), &config.paths.index_dir, &index_key, &commit).map_err(
        |e| {
            TriggerError::Run(RunError::Setup {
                what: "the batch's retrieval index",
                message: e.to_string(),
            })
        },
    )?;

    // Triage every issue before any run.
    let mut entries: Vec<BatchEntry> = Vec::new();
    let mut ready: Vec<(usize, Job)> = Vec::new();
    for source in sources {
        let described = describe(&source);
        match read_and_triage(&source, &config) {
            Err(e) => entries.push(BatchEntry {
                source: described,
                issue_id: None,
                triage: None,
                outcome: WorkOutcome::Failed {
                    error: e.to_string(),
                },
            }),
            Ok(t) => {
                let outcome = if t.triage.state == TriageState::ReadyForAgent {
                    ready.push((
                        entries.len(),
                        Job {
                            issue: source,
                            repo: Some(options.repo.clone()),
                            commit: Some(commit.clone()),
                            agent: agent.clone(),
                            answer: None,
                        },
                    ));
                    // Replaced by the run's outcome below.
                    WorkOutcome::Failed {
                        error: "not run".to_owned(),
                    }
                } else {
                    WorkOutcome::Skipped {
                        triage: t.triage.clone(),
                    }
                };
                entries.push(BatchEntry {
                    source: described,
                    issue_id: Some(t.issue.id),
                    triage: Some(t.triage),
                    outcome,
                });
            }
        }
    }

    // The ready ones, `parallel` at a time.
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<(usize, WorkOutcome)>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..options.parallel.max(1).min(ready.len().max(1)) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some((entry, job)) = ready.get(i) else {
                        return;
                    };
                    let outcome = worker.claim_and_run(job, &config).unwrap_or_else(|e| {
                        WorkOutcome::Failed {
                            error: e.to_string(),
                        }
                    });
                    results
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push((*entry, outcome));
                }
            });
        }
    });
    for (entry, outcome) in results
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
    {
        if let Some(e) = entries.get_mut(entry) {
            e.outcome = outcome;
        }
    }
    let exit_code = entries
        .iter()
        .map(|e| &e.outcome)
        .max_by_key(|o| o.severity())
        .map_or(crate::EXIT_PR_QUEUED, WorkOutcome::exit_code);
    Ok(BatchReport {
        repo: options.repo.clone(),
        base_commit: commit,
        issues: entries,
        exit_code,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_read_token_goes_only_to_the_issues_own_repository() {
        let own = Some("https://github.com/acme/calc.git");
        assert!(is_own_clone_url(own, "https://github.com/acme/calc"));
        assert!(is_own_clone_url(own, "https://github.com/acme/calc.git/"));
        assert!(!is_own_clone_url(own, "https://evil.example/acme/calc"));
        assert!(!is_own_clone_url(own, "https://github.com/acme/calc-fork"));
        assert!(!is_own_clone_url(None, "https://github.com/acme/calc"));
    }

    #[test]
    fn the_github_slug_comes_from_a_clone_url_only() {
        assert_eq!(
            github_slug("https://github.com/acme/calc.git").as_deref(),
            Some("acme/calc")
        );
        assert_eq!(
            github_slug("http://127.0.0.1:9/acme/calc").as_deref(),
            Some("acme/calc")
        );
        assert_eq!(github_slug("/srv/calc"), None);
        assert_eq!(github_slug("https://github.com/acme/calc/issues"), None);
    }
}
