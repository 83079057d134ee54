//! `airlock review --pr URL` as a library call: the pull request from the REST API (`[github]`),
//! its head and base fetched into the repository's mirror over git, the diff from the merge
//! base to the head, a checkout of the head, and the run's loop (`session::review`) with the
//! reviewer's tools. The review goes to the broker, which queues it for an approver; nothing is
//! posted from here.

use crate::adapters::{BrokerSocket, CheckoutWorktree, CodegraphRetrieval, SandboxReaderLauncher};
use crate::delegate::ReaderLauncher;
use crate::github::{GithubClient, GithubIssueRef};
use crate::issue::Issue;
use crate::ports::{PortResult, PrSink, Retrieval, TestReport, TestRunner, ToolFailure};
use crate::runner::{ModelUsage, Overrides, RunError, load_config, next_run_id};
use crate::session::{self, Env, ReviewTask, RunEnd, RunSpec};
use crate::trajectory::Trajectory;
use airlock_audit::AuditLog;
use airlock_checkout::MirrorCache;
use airlock_model::{Budget, ChatModel, Metered, ModelConfig};
use airlock_policies::Policy;
use airlock_protocol::PullRequestKey;
use serde_json::json;
use std::path::PathBuf;
use std::time::Duration;

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
    let intake = json!({
        "source": "github_pull_request",
        "reference": reference.to_string(),
        "api_url": config.github.api_url,
        "url": fetched.url,
        "author": fetched.author,
        "base_sha": fetched.base_sha,
        "head_sha": fetched.head_sha,
        "merge_base": diff.merge_base,
        "files": fetched.files,
    });

    let run_id = next_run_id(
        &config.paths.runs_root,
        &format!("review-{}-{}", reference.repo, reference.number),
        head.as_str(),
    );
    let run_dir = config.paths.runs_root.join(&run_id);
    let worktree_dir = run_dir.join("worktree");
    std::fs::create_dir_all(&run_dir).map_err(|source| RunError::Write {
        path: run_dir.clone(),
        source,
    })?;
    mirror.materialize(&head, &worktree_dir)?;
    let tracked = airlock_checkout::tracked_files(&worktree_dir, &head)?;
    let policy = Policy::default()?;
    let audit = AuditLog::open(&config.paths.audit_log)?;
    let screen = airlock_audit::ScreenContext {
        repository: repo.clone(),
        blobs: airlock_checkout::tracked_blobs(&worktree_dir, &head)?,
        dismissed: airlock_audit::load_dismissed_keys(&config.paths.audit_log)?,
    };
    let trajectory_path = run_dir.join("trajectory.jsonl");
    let mut trajectory = Trajectory::create(&trajectory_path)?;
    let inner = airlock_model::from_spec(&spec_text, &model_config)
        .map_err(|e| RunError::Model(e.to_string()))?;
    let model = Metered::new(inner, Budget::new(model_config.budget.clone()));
    let wt = CheckoutWorktree::open(&worktree_dir, tracked).map_err(|e| RunError::Setup {
        what: "the worktree",
        message: e.to_string(),
    })?;
    let index_dir = config.paths.index_dir.clone();
    let index_key = airlock_codegraph::store::repo_key(mirror.path());
    let retrieval: Box<dyn Retrieval> = Box::new(
        CodegraphRetrieval::open(&worktree_dir, &index_dir, &index_key, head.as_str()).map_err(
            |e| RunError::Setup {
                what: "the retrieval index",
                message: e.to_string(),
            },
        )?,
    );
    let readers: Box<dyn ReaderLauncher> = match overrides.readers {
        Some(r) => r,
        None => Box::new(SandboxReaderLauncher {
            exe: args.exe.clone(),
            worktree: worktree_dir.clone(),
            index_dir: index_dir.clone(),
            index_key: index_key.clone(),
            commit: head.as_str().to_string(),
            scratch: run_dir.join("readers"),
            timeout: Duration::from_secs(config.tests.timeout_secs),
        }),
    };
    let mut pr_sink: Box<dyn PrSink> = match overrides.pr_sink {
        Some(p) => p,
        None => {
            let endpoint = crate::runner::broker_endpoint(&config, &config_origin)?;
            Box::new(
                BrokerSocket::new(
                    endpoint,
                    config.broker.reply_timeout(config.tests.timeout_secs),
                )
                .reconnecting_for(Duration::from_secs(config.broker.reconnect_secs())),
            )
        }
    };
    let spec = RunSpec {
        run_id: run_id.clone(),
        repo: repo.clone(),
        base_commit: head.as_str().to_string(),
        issue,
        intake: intake.clone(),
        config,
        follow_up: None,
        agent: reviewer(args.agent.as_deref())?,
    };
    let task = ReviewTask {
        pull: pull.clone(),
        base_sha: base.as_str().to_owned(),
        diff,
    };
    // The memory of merged pull requests up to the reviewed head (for `search_history`, should
    // an operator's reviewer definition offer it).
    let history = crate::adapters::CodegraphHistory::open(
        mirror.path(),
        &index_dir,
        &index_key,
        head.as_str(),
    );
    let mut progress = crate::progress::Progress::stderr(args.progress);
    let mut second_opinion = None;
    let mut env = Env {
        model: &model,
        retrieval: retrieval.as_ref(),
        history: &history,
        worktree: &wt,
        policy: &policy,
        tests: &NoTests,
        readers: readers.as_ref(),
        broker: pr_sink.as_mut(),
        references: &crate::reference_repos::ReferenceRepos::none(),
        audit: &audit,
        screen: &screen,
        second_opinion: second_opinion.as_mut(),
        trajectory: &mut trajectory,
        progress: &mut progress,
    };
    let end = session::review(&spec, &mut env, &task)?;
    let model_finish_problem = model.finish().err().map(|e| e.to_string());
    if let Some(problem) = &model_finish_problem {
        trajectory.record("model_finish_problem", json!({"problem": problem}))?;
    }
    let outcome_path = run_dir.join("outcome.json");
    let mut document =
        crate::runner::outcome_document(&run_id, head.as_str(), &spec.issue.id, &end);
    document["pull"] = json!(pull);
    document["intake"] = intake;
    let usage = ModelUsage::from(&model.budget().totals());
    document["model_usage"] = serde_json::to_value(usage).unwrap_or_default();
    trajectory.record("model_usage", document["model_usage"].clone())?;
    let text = serde_json::to_string_pretty(&document).unwrap_or_default() + "\n";
    std::fs::write(&outcome_path, text).map_err(|source| RunError::Write {
        path: outcome_path.clone(),
        source,
    })?;
    Ok(ReviewReport {
        run_id,
        run_dir,
        pull,
        end,
        outcome_path,
        trajectory_path,
        model_finish_problem,
        usage,
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
