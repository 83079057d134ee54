//! `airlock review --pr URL` as a library call: the pull request from the REST API (`[github]`),
//! its head and base fetched into the repository's mirror over git, the diff from the merge
//! base to the head, a checkout of the head, and the run's loop (`session::review`) with the
//! reviewer's tools. The review goes to the broker, which queues it for an approver; nothing is
//! posted from here.

use crate::github::{GithubClient, GithubIssueRef};
use crate::intake::{IntakeRecord, IntakeSource};
use crate::issue::Issue;
use crate::ports::{PortResult, TestReport, TestRunner, ToolFailure};
use crate::runner::{ModelUsage, Overrides, RunError, load_config, next_run_id};
use crate::session::{self, ReviewTask, RunEnd, RunSpec};
use crate::setup::{self, OUTCOME_FILE, RunSetup, SetupRequest, WorktreeStart};
use airlock_checkout::MirrorCache;
use airlock_model::ModelConfig;
use airlock_policies::Policy;
use airlock_protocol::PullRequestKey;
use serde_json::json;
use std::path::PathBuf;

/// What `airlock review` was asked.
#[derive(Debug, Clone)]
pub struct ReviewArgs {
    /// `https://HOST/OWNER/REPO/pull/N` or `github:OWNER/REPO#N`.
    pub pr: String,
    /// The repository to fetch the commits from; defaults to the pull request's repository on
    /// its forge (the read token of `[github] token_env` goes only there).
    pub repo: Option<String>,
    /// Model spec; overrides `[model] spec`.
    pub model: Option<String>,
    /// The reviewing agent: a built-in name or a definition's path; the built-in
    /// `pr-reviewer` when absent. It must end with `submit_review`.
    pub agent: Option<String>,
    /// `airlock.toml`; defaults apply when absent.
    pub config: Option<PathBuf>,
    /// The `airlock` executable, re-executed as `airlock reader-worker`.
    pub exe: PathBuf,
    /// How the run's progress is shown on stderr.
    pub progress: crate::progress::ProgressMode,
}

/// What a finished review run produced.
#[derive(Debug, Clone)]
pub struct ReviewReport {
    /// The run id.
    pub run_id: String,
    /// `<runs_root>/<run_id>`.
    pub run_dir: PathBuf,
    /// The pull request and the head reviewed.
    pub pull: PullRequestKey,
    /// How the run ended ([`RunEnd::Reviewed`]).
    pub end: RunEnd,
    /// `<run_dir>/outcome.json`.
    pub outcome_path: PathBuf,
    /// `<run_dir>/trajectory.jsonl`.
    pub trajectory_path: PathBuf,
    /// The model's end-of-run check, if it failed.
    pub model_finish_problem: Option<String>,
    /// What the run's model calls used and cost.
    pub usage: ModelUsage,
}

/// The test runner of an agent that runs no tests: `run_tests` is not among the reviewer's
/// tools, so a call never reaches it; if one did, it is refused.
struct NoTests;

impl TestRunner for NoTests {
    fn baseline(&self) -> Result<crate::ports::Baseline, crate::ports::BaselineError> {
        Ok(crate::ports::Baseline::empty())
    }

    fn run(&self, _selector: Option<&str>) -> PortResult<TestReport> {
        Err(ToolFailure::new(
            "not_offered",
            "the reviewer runs no tests",
        ))
    }
}

/// Review one pull request end to end: its review queued with the broker, or the reason not.
pub fn review_pull_request(
    args: &ReviewArgs,
    overrides: Overrides,
) -> Result<ReviewReport, RunError> {
    let (config, config_origin) = load_config(args.config.as_deref())?;
    let reference = GithubIssueRef::parse_pull_request(&args.pr)?;
    let client = GithubClient::from_config(&config.github)?;
    let fetched = client.fetch_pull(&reference, &config.github)?;
    // The read token goes to git only for the pull request's own repository on its forge.
    let (repo, clone_token) = match &args.repo {
        Some(r) => (r.clone(), None),
        None => (
            reference.clone_url(&config.github).ok_or_else(|| {
                RunError::Usage(format!(
                    "--repo is needed: the clone URL of {reference} cannot be told from \
                     [github] api_url {:?}",
                    config.github.api_url
                ))
            })?,
            client.token().map(str::to_owned),
        ),
    };
    let spec_text = args
        .model
        .clone()
        .or_else(|| config.model.spec.clone())
        .ok_or_else(|| RunError::Model("no model: pass --model or set [model] spec".into()))?;
    let model_config: ModelConfig = config.model.config.clone();

    // The mirror takes every ref of the remote (GitHub's `refs/pull/N/head` among them), so
    // the head is there after a fetch; both commits are resolved before anything else.
    let cache = MirrorCache::new(&config.paths.cache_dir)?;
    let mirror = cache.mirror_with(
        &repo,
        &airlock_checkout::MirrorOptions {
            refresh: true,
            http_token: clone_token,
        },
    )?;
    let head = mirror.resolve(&fetched.head_sha)?;
    let base = mirror.resolve(&fetched.base_sha)?;
    let diff =
        airlock_policies::diffmap::pull_request_diff(mirror.path(), base.as_str(), head.as_str())?;
    let pull = PullRequestKey {
        owner: reference.owner.clone(),
        repo: reference.repo.clone(),
        number: reference.number,
        head_sha: head.as_str().to_owned(),
    };
    let issue = Issue {
        id: format!(
            "{}-{}",
            config.github.project_key_for(&reference.repo),
            reference.number
        ),
        title: fetched.title.clone(),
        body: fetched.body.clone(),
        labels: Vec::new(),
        number: Some(reference.number),
        author: fetched.author.clone(),
        state: None,
        url: fetched.url.clone(),
    };
    let intake = IntakeRecord {
        source: IntakeSource::GithubPullRequest {
            reference: reference.to_string(),
            api_url: config.github.api_url.clone(),
            url: fetched.url.clone(),
            author: fetched.author.clone(),
            base_sha: fetched.base_sha.clone(),
            head_sha: fetched.head_sha.clone(),
            merge_base: diff.merge_base.clone(),
            files: fetched.files.clone(),
        },
        pin: None,
        history_forge: None,
    };

    let run_id = next_run_id(
        &config.paths.runs_root,
        &format!("review-{}-{}", reference.repo, reference.number),
        head.as_str(),
    );
    let run_dir = config.paths.runs_root.join(&run_id);
    std::fs::create_dir_all(&run_dir).map_err(|source| RunError::Write {
        path: run_dir.clone(),
        source,
    })?;
    let mut run = RunSetup::open(SetupRequest {
        config: &config,
        config_origin: &config_origin,
        repo: &repo,
        mirror: &mirror,
        commit: &head,
        run_dir: &run_dir,
        start: WorktreeStart::Materialise,
        policy: Policy::default()?,
        spec_text: &spec_text,
        model_config: &model_config,
        spent: None,
        second_opinion: false,
        readers: overrides.readers,
        exe: &args.exe,
        progress: args.progress,
    })?;
    // A review sends no change: the broker reads the pull request's head itself.
    let mut pr_sink = setup::broker_sink(&config, &config_origin, overrides.pr_sink, None)?;
    let spec = RunSpec {
        run_id: run_id.clone(),
        repo: repo.clone(),
        base_commit: head.as_str().to_string(),
        issue,
        intake: intake.clone(),
        config,
        follow_up: None,
        agent: reviewer(args.agent.as_deref())?,
        earlier: None,
    };
    let task = ReviewTask {
        pull: pull.clone(),
        base_sha: base.as_str().to_owned(),
        diff,
    };
    let references = crate::reference_repos::ReferenceRepos::none();
    let mut env = run.env(&NoTests, pr_sink.as_mut(), &references);
    let end = session::review(&spec, &mut env, &task)?;
    let closed = run.close_model()?;
    let outcome_path = run_dir.join(OUTCOME_FILE);
    let mut document =
        crate::runner::outcome_document(&run_id, head.as_str(), &spec.issue.id, &end);
    document["pull"] = json!(pull);
    document["intake"] = intake.to_json();
    document["model_usage"] = serde_json::to_value(closed.usage).unwrap_or_default();
    setup::write_outcome(&outcome_path, &document)?;
    Ok(ReviewReport {
        run_id,
        run_dir,
        pull,
        end,
        outcome_path,
        trajectory_path: run.trajectory_path,
        model_finish_problem: closed.finish_problem,
        usage: closed.usage,
    })
}

/// The reviewing agent `spec` names (the built-in reviewer when absent): it must end with
/// `submit_review`.
fn reviewer(spec: Option<&str>) -> Result<crate::agents::Agent, RunError> {
    let agent = crate::agents::resolve(spec.unwrap_or("pr-reviewer"))?;
    if agent.output.tool != crate::tools::Tool::SubmitReview {
        return Err(RunError::Usage(format!(
            "agent `{}` ends with `{}`, not `submit_review`: it cannot review a pull request; \
             name a reviewing agent (pr-reviewer, or a definition with `[output] tool = \
             \"submit_review\"`)",
            agent.name,
            agent.output.tool.name()
        )));
    }
    Ok(agent)
}
