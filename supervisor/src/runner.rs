//! `airlock run` as a library call: pin, materialise, wire the real capabilities, run the
//! session, write the outcome. The CLI is a thin wrapper around [`run_issue`].

use crate::adapters::{
    BrokerSocket, CheckoutWorktree, CodegraphHistory, CodegraphRetrieval, PrepareKey,
    SandboxReaderLauncher, SandboxTestRunner,
};
use crate::config::{Config, ConfigError};
use crate::delegate::ReaderLauncher;
use crate::github::{GithubClient, GithubError, IssueSource};
use crate::issue::{Issue, IssueError};
use crate::park::{self, Additions, ParkError, ParkedRun};
use crate::ports::{PrSink, Retrieval, TestRunner};
use crate::reference_repos::{self, ReferenceRepos};
use crate::second_opinion::SecondOpinion;
use crate::session::{self, Env, Resumed, RunEnd, RunSpec, SessionError};
use crate::trajectory::{Trajectory, TrajectoryError};
use crate::transport::BrokerEndpoint;
use airlock_audit::AuditLog;
use airlock_checkout::MirrorCache;
use airlock_model::{Budget, ChatModel, Metered, ModelConfig, RunTotals};
use airlock_policies::Policy;
use airlock_protocol::{FollowUpBrief, TreeTransfer};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Errors that stop `airlock run` before or outside the loop.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// `airlock.toml` is unreadable or invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The issue file is unreadable or invalid.
    #[error(transparent)]
    Issue(#[from] IssueError),
    /// The GitHub issue could not be fetched.
    #[error(transparent)]
    Github(#[from] GithubError),
    /// The command line lacks something this issue source needs.
    #[error("{0}")]
    Usage(String),
    /// The agent definition is missing or invalid.
    #[error(transparent)]
    Agent(#[from] crate::agents::AgentError),
    /// Mirroring, resolving or materialising the commit failed.
    #[error("checkout: {0}")]
    Checkout(#[from] airlock_checkout::CheckoutError),
    /// The write policy could not be built.
    #[error("policy: {0}")]
    Policy(#[from] airlock_policies::Error),
    /// The audit log could not be opened.
    #[error("audit log: {0}")]
    Audit(#[from] airlock_audit::Error),
    /// The model spec or its configuration is invalid.
    #[error("model: {0}")]
    Model(String),
    /// No broker is configured.
    #[error(
        "no broker: set [broker] socket or url in {config} (airlock run never opens a pull request itself)"
    )]
    NoBroker {
        /// The config file consulted.
        config: String,
    },
    /// Indexing or another capability could not be set up.
    #[error("setting up {what}: {message}")]
    Setup {
        /// Which capability.
        what: &'static str,
        /// Why.
        message: String,
    },
    /// The run's records could not be written.
    #[error(transparent)]
    Trajectory(#[from] TrajectoryError),
    /// Writing the outcome file failed.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The loop stopped on an error.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// The broker could not say what a follow-up starts from.
    #[error("follow-up of queue item {queue_id}: {message}")]
    FollowUp {
        /// The queue item.
        queue_id: i64,
        /// The broker's answer or the connection's failure.
        message: String,
    },
    /// A parked run cannot be read, written or resumed.
    #[error(transparent)]
    Park(#[from] ParkError),
    /// A run whose model calls had begun stopped on `error`: what they used and cost, for the
    /// outcome document ([`RunError::split_usage`] takes it apart before the error leaves the
    /// runner).
    #[error("{error}")]
    Spent {
        /// What the run's model calls used and cost before it stopped.
        usage: ModelUsage,
        /// What stopped it.
        error: Box<RunError>,
    },
    /// The run stopped on an error after it began: its outcome document says so.
    #[error("{source} (run {run_id} failed; its outcome: {})", outcome.display())]
    Failed {
        /// The run.
        run_id: String,
        /// `<run_dir>/outcome.json`, written with `result: failed`.
        outcome: PathBuf,
        /// What stopped it.
        source: Box<RunError>,
    },
}

/// What `airlock run` was asked.
#[derive(Debug, Clone)]
pub struct RunArgs {
    /// Repository path or URL; for a GitHub issue, defaults to the issue's repository.
    pub repo: Option<String>,
    /// Any revision; pinned to 40 hex before anything else. For a GitHub issue, defaults to
    /// the head of the repository's default branch at intake.
    pub commit: Option<String>,
    /// Where the issue comes from.
    pub issue: IssueSource,
    /// Model spec; overrides `[model] spec`.
    pub model: Option<String>,
    /// The agent: a built-in name or a definition file; overrides `[agent] definition`, the
    /// issue fixer when neither says.
    pub agent: Option<String>,
    /// `airlock.toml`; defaults apply when absent.
    pub config: Option<PathBuf>,
    /// The `airlock` executable, re-executed as `airlock reader-worker`.
    pub exe: PathBuf,
    /// Fetch the repository into its mirror before pinning, even when the revision is already
    /// there (a local repository's new commits are otherwise not seen).
    pub fetch: bool,
    /// Keep a failed run's worktree (removed by default; its records stay).
    pub keep: bool,
    /// How the run's progress is shown on stderr.
    pub progress: crate::progress::ProgressMode,
}

/// Replacements for capabilities, for tests and embedding (the broker stub until the broker is
/// reachable, an in-process reader launcher where the binary is not available).
#[derive(Default)]
pub struct Overrides {
    /// Replaces the broker socket client.
    pub pr_sink: Option<Box<dyn PrSink>>,
    /// Replaces the sandboxed reader launcher.
    pub readers: Option<Box<dyn ReaderLauncher>>,
    /// Replaces the sandboxed test runner.
    pub tests: Option<Box<dyn TestRunner>>,
    /// Replaces where `[broker]` says the broker is (`airlock worker --broker URL`).
    pub broker: Option<String>,
}

/// What a finished `airlock run` produced.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// The run id.
    pub run_id: String,
    /// `<runs_root>/<run_id>`.
    pub run_dir: PathBuf,
    /// The pinned commit.
    pub base_commit: String,
    /// How the run ended.
    pub end: RunEnd,
    /// `<run_dir>/outcome.json`.
    pub outcome_path: PathBuf,
    /// `<run_dir>/trajectory.jsonl`.
    pub trajectory_path: PathBuf,
    /// The model's end-of-run check (a scripted model with turns left unplayed), if it failed.
    pub model_finish_problem: Option<String>,
    /// What the run's model calls used and cost (`outcome.json`'s `model_usage`).
    pub usage: ModelUsage,
}

/// What a run's model calls (the supervisor's and its readers') used and cost: `outcome.json`'s
/// `model_usage`, the trajectory's `model_usage` entry and the last lines of `airlock run`.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct ModelUsage {
    /// Model calls made.
    pub calls: u64,
    /// Prompt tokens, cached ones included.
    pub input_tokens: u64,
    /// Of the prompt tokens, those read from the provider's prompt cache.
    pub cache_read_tokens: u64,
    /// Of the prompt tokens, those written to the provider's prompt cache.
    pub cache_write_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
    /// Dollars spent on calls whose model has a configured price, cached tokens at their own
    /// prices.
    pub cost_usd: f64,
    /// Calls whose model has no configured price (their cost is not in `cost_usd`).
    pub unpriced_calls: u64,
}

impl From<&airlock_model::RunTotals> for ModelUsage {
    fn from(t: &airlock_model::RunTotals) -> Self {
        ModelUsage {
            calls: t.calls,
            input_tokens: t.usage.input_tokens,
            cache_read_tokens: t.usage.cache_read_tokens,
            cache_write_tokens: t.usage.cache_write_tokens,
            output_tokens: t.usage.output_tokens,
            cost_usd: t.cost_usd,
            unpriced_calls: t.unpriced_calls,
        }
    }
}

impl RunError {
    /// The error without the usage a [`RunError::Spent`] carries, and that usage.
    pub fn split_usage(self) -> (RunError, Option<ModelUsage>) {
        match self {
            RunError::Spent { usage, error } => (*error, Some(usage)),
            other => (other, None),
        }
    }
}

impl RunReport {
    /// The documented exit code.
    pub fn exit_code(&self) -> u8 {
        self.end.exit_code()
    }
}

/// Load the config `--config` names, else the one [`crate::config::discover`] finds
/// (`$AIRLOCK_CONFIG`, `./airlock.toml`), else the defaults (records in the data directory).
/// Returns it with a description of where it came from.
pub fn load_config(path: Option<&Path>) -> Result<(Config, String), RunError> {
    match crate::config::discover(path) {
        Some(p) => Ok((Config::load(&p)?, p.display().to_string())),
        None => {
            let mut c = Config::default();
            let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
            c.resolve_relative_to(&cwd);
            Ok((
                c,
                "(defaults: no --config, $AIRLOCK_CONFIG or ./airlock.toml)".to_string(),
            ))
        }
    }
}

/// Run one issue end to end.
pub fn run_issue(args: &RunArgs, overrides: Overrides) -> Result<RunReport, RunError> {
    let (mut config, config_origin) = load_config(args.config.as_deref())?;
    if let Some(url) = &overrides.broker {
        config
            .broker
            .point_at(url)
            .map_err(|e| RunError::Usage(format!("--broker: {e}")))?;
    }
    let agent = resolve_agent(args.agent.as_deref(), &config)?;
    // The definition caps the operator's turn budget.
    config.budgets.max_turns = config.budgets.max_turns.min(agent.max_iterations);
    let Intake {
        issue,
        repo,
        rev,
        refresh,
        clone_token,
        record: intake_record,
        follow_up: intake_follow_up,
    } = intake(args, &config)?;
    let spec_text = args
        .model
        .clone()
        .or_else(|| config.model.spec.clone())
        .ok_or_else(|| RunError::Model("no model: pass --model or set [model] spec".into()))?;
    let model_config: ModelConfig = config.model.config.clone();
    // A learnings file the policy refuses is the operator's mistake: said before anything runs.
    agent_policy(&agent, &config, &config_origin, &repo)?;

    // Pin first: everything after this reads exactly this tree.
    let cache = MirrorCache::new(&config.paths.cache_dir)?;
    let mirror = cache.mirror_with(
        &repo,
        &airlock_checkout::MirrorOptions {
            refresh: refresh || args.fetch,
            http_token: clone_token,
        },
    )?;
    let commit = mirror.resolve(&rev)?;
    let mut intake_record = intake_record;
    intake_record["pin"]["commit"] = json!(commit.as_str());
    if let Some(forge) = save_forge_history(args, &config, mirror.path()) {
        intake_record["history_forge"] = forge;
    }
    // Parked runs past their age are cleaned before a new one starts.
    park::expire_old(
        &config.paths.runs_root,
        config.budgets.park_max_age_secs,
        park::unix_now(),
    );
    let run_id = match &config.broker.url {
        // A broker on another host registers runs of many hosts: the id names this one.
        Some(_) => next_run_id(
            &config.paths.runs_root,
            &format!("{}-{}", issue.id, host_tag(&config.paths.runs_root)),
            commit.as_str(),
        ),
        None => next_run_id(&config.paths.runs_root, &issue.id, commit.as_str()),
    };
    let run_dir = config.paths.runs_root.join(&run_id);
    let worktree_dir = run_dir.join("worktree");
    std::fs::create_dir_all(&run_dir).map_err(|source| RunError::Write {
        path: run_dir.clone(),
        source,
    })?;
    let started = Started {
        run_id: run_id.clone(),
        run_dir: run_dir.clone(),
        worktree: worktree_dir.clone(),
        base_commit: commit.as_str().to_string(),
        issue_id: issue.id.clone(),
        audit_log: config.paths.audit_log.clone(),
    };
    let execution = Execution {
        config,
        config_origin,
        repo,
        mirror,
        commit,
        run_id,
        run_dir,
        issue,
        intake: intake_record,
        spec_text,
        model_config,
        follow_up: intake_follow_up,
        agent,
        resume: None,
    };
    execute(execution, &args.exe, args.progress, overrides)
        .map_err(|e| started.failed(e, args.keep))
}

/// What `airlock resume` was asked.
#[derive(Debug, Clone)]
pub struct ResumeArgs {
    /// The parked run's id.
    pub run_id: String,
    /// What to add to its budgets.
    pub add: Additions,
    /// Model spec; the run's own when absent.
    pub model: Option<String>,
    /// `airlock.toml` (its runs root and `[budgets] park_max_age`); as for `airlock run`. The
    /// run's own settings are the ones it was started with.
    pub config: Option<PathBuf>,
    /// The `airlock` executable, re-executed as `airlock reader-worker`.
    pub exe: PathBuf,
    /// Keep the worktree if the resumed run fails.
    pub keep: bool,
    /// How the run's progress is shown on stderr.
    pub progress: crate::progress::ProgressMode,
}

/// Continue a parked run with more budget: its worktree, conversation and counters as they
/// were, its budgets raised by `args.add`. An expired run is refused (and cleaned); so is a
/// resume that adds nothing to the budget that stopped the run. Other expired parked runs are
/// cleaned on the way.
pub fn resume_run(args: &ResumeArgs, overrides: Overrides) -> Result<RunReport, RunError> {
    let (operator, _) = load_config(args.config.as_deref())?;
    let runs_root = operator.paths.runs_root.clone();
    let max_age = operator.budgets.park_max_age_secs;
    let now = park::unix_now();
    let mut parked = park::read(&runs_root, &args.run_id)?;
    let run_dir = runs_root.join(&parked.run_id);
    if let Err(e) = park::check_not_expired(&parked, max_age, now) {
        if parked.expired_at.is_none()
            && let Err(clean) = park::expire(&run_dir, &mut parked, now)
        {
            tracing::warn!("cannot clean the expired run {}: {clean}", parked.run_id);
        }
        return Err(e.into());
    }
    park::expire_old(&runs_root, max_age, now);
    if !args.add.raises(parked.session.budget) {
        return Err(ParkError::NothingAdded {
            run_id: parked.run_id.clone(),
            budget: parked.session.budget.label(),
            flag: parked.session.budget.flag(),
        }
        .into());
    }
    park::raise(&mut parked, &args.add);
    let ParkedRun {
        run_id,
        repo,
        mirror,
        base_commit,
        issue,
        intake,
        config,
        config_origin,
        model_spec,
        model_limits,
        model_spent,
        session,
        follow_up,
        agent,
        ..
    } = parked;
    let agent = match agent {
        Some(agent) => agent,
        None => crate::agents::Agent::issue_fixer()?,
    };
    let mirror = airlock_checkout::Mirror::open(&mirror)?;
    let commit = mirror.resolve(&base_commit)?;
    let spec_text = args.model.clone().unwrap_or(model_spec);
    let mut model_config: ModelConfig = config.model.config.clone();
    model_config.budget = model_limits;
    let started = Started {
        run_id: run_id.clone(),
        run_dir: run_dir.clone(),
        worktree: run_dir.join("worktree"),
        base_commit: base_commit.clone(),
        issue_id: issue.id.clone(),
        audit_log: config.paths.audit_log.clone(),
    };
    let execution = Execution {
        config,
        config_origin,
        repo,
        mirror,
        commit,
        run_id,
        run_dir,
        issue,
        intake,
        spec_text,
        model_config,
        follow_up,
        agent,
        resume: Some(Resume {
            resumed: Resumed {
                session,
                added: args.add.describe(),
            },
            spent: model_spent,
        }),
    };
    execute(execution, &args.exe, args.progress, overrides).map_err(|e| {
        if reached_the_loop(&e) {
            started.failed(e, args.keep)
        } else {
            // Nothing of the run changed (the broker was down, the model spec is wrong): it
            // stays parked, to be resumed again.
            e.split_usage().0
        }
    })
}

/// Whether a resumed run's error came once its loop had begun (the worktree and the
/// conversation may have moved on from the parked state), rather than while it was being set up.
fn reached_the_loop(error: &RunError) -> bool {
    if let RunError::Spent { error, .. } = error {
        return reached_the_loop(error);
    }
    !matches!(
        error,
        RunError::Config(_)
            | RunError::Usage(_)
            | RunError::Agent(_)
            | RunError::Checkout(_)
            | RunError::Policy(_)
            | RunError::Model(_)
            | RunError::NoBroker { .. }
            | RunError::Setup { .. }
            | RunError::Park(_)
            | RunError::Session(SessionError::Register(_))
    )
}

/// A parked run taken up again: its loop, and what its model spent before.
struct Resume {
    resumed: Resumed,
    spent: RunTotals,
}

/// With a GitHub issue, `[github] token_env` set and `[history] forge` on: read the issue's
/// repository's merged pull requests from the forge and save them beside the
/// index, where the run's history memory finds them (only those merged into the pin's history
/// are visible to it). Returns what the intake record says of it; a failure costs the run only
/// the forge's records, so it is recorded, not fatal.
fn save_forge_history(args: &RunArgs, config: &Config, mirror: &Path) -> Option<Value> {
    let IssueSource::GitHub(reference) = &args.issue else {
        return None;
    };
    if config.github.token_env.is_none() || !config.history.forge {
        return None;
    }
    let index_dir = &config.paths.index_dir;
    let key = airlock_codegraph::store::repo_key(mirror);
    let saved = (|| -> Result<usize, String> {
        let client = GithubClient::from_config(&config.github).map_err(|e| e.to_string())?;
        let known = airlock_codegraph::history::saved_forge_numbers(index_dir, &key)
            .map_err(|e| e.to_string())?;
        let pulls = client
            .merged_pulls(
                &reference.owner,
                &reference.repo,
                config.history.forge_max_pulls,
                &known,
                &config.github,
            )
            .map_err(|e| e.to_string())?;
        airlock_codegraph::history::save_forge_pulls(index_dir, &key, &pulls)
            .map_err(|e| e.to_string())?;
        Ok(pulls.len())
    })();
    Some(match saved {
        Ok(n) => json!({"saved": n}),
        Err(e) => json!({"error": e}),
    })
}

/// Everything settled before the worktree: a new run's or a parked one's.
struct Execution {
    config: Config,
    config_origin: String,
    repo: String,
    mirror: airlock_checkout::Mirror,
    commit: airlock_checkout::CommitId,
    run_id: String,
    run_dir: PathBuf,
    issue: Issue,
    intake: Value,
    spec_text: String,
    model_config: ModelConfig,
    follow_up: Option<FollowUpBrief>,
    agent: crate::agents::Agent,
    resume: Option<Resume>,
}

/// Wire the real capabilities around the worktree (materialised for a new run, kept for a
/// parked one), run or resume the session, and write the outcome (and `parked.json` when the
/// run parks).
fn execute(
    x: Execution,
    exe: &Path,
    progress_mode: crate::progress::ProgressMode,
    overrides: Overrides,
) -> Result<RunReport, RunError> {
    let Execution {
        config,
        config_origin,
        repo,
        mirror,
        commit,
        run_id,
        run_dir,
        issue,
        intake: intake_record,
        spec_text,
        model_config,
        follow_up,
        agent,
        resume,
    } = x;
    let worktree_dir = run_dir.join("worktree");
    if resume.is_none() {
        mirror.materialize(&commit, &worktree_dir)?;
    } else if !worktree_dir.is_dir() {
        return Err(RunError::Setup {
            what: "the parked worktree",
            message: format!("{} is missing", worktree_dir.display()),
        });
    }
    let tracked = airlock_checkout::tracked_files(&worktree_dir, &commit)?;
    let tracked_for_prepare = tracked.clone();

    let policy = agent_policy(&agent, &config, &config_origin, &repo)?;
    let audit = AuditLog::open(&config.paths.audit_log)?;
    // What screening needs: the tree's blob ids (a dismissal holds for one version of a
    // file) and the dismissals recorded before this run.
    let screen = airlock_audit::ScreenContext {
        repository: repo.clone(),
        blobs: airlock_checkout::tracked_blobs(&worktree_dir, &commit)?,
        dismissed: airlock_audit::load_dismissed_keys(&config.paths.audit_log)?,
    };
    let trajectory_path = run_dir.join("trajectory.jsonl");
    let mut trajectory = match resume {
        None => Trajectory::create(&trajectory_path)?,
        Some(_) => Trajectory::append(&trajectory_path)?,
    };

    let inner = airlock_model::from_spec(&spec_text, &model_config)
        .map_err(|e| RunError::Model(e.to_string()))?;
    // Every call, the supervisor's and the readers', is metered against `[model.config.budget]`;
    // a resumed run counts on from what it spent before it parked.
    let budget = match &resume {
        None => Budget::new(model_config.budget.clone()),
        Some(r) => Budget::with_spent(model_config.budget.clone(), r.spent.clone()),
    };
    let model = Metered::new(inner, budget);

    // The security model, when configured: its key (if it wants one) is read now, so a
    // variable named but unset stops the run before anything else is done.
    let mut second_opinion =
        match &config.security_model {
            Some(security) => Some(SecondOpinion::connect(security).map_err(|e| {
                RunError::Model(format!("[security_model] in {config_origin}: {e}"))
            })?),
            None => None,
        };
    let wt = CheckoutWorktree::open(&worktree_dir, tracked).map_err(|e| RunError::Setup {
        what: "the worktree",
        message: e.to_string(),
    })?;
    let index_dir = config.paths.index_dir.clone();
    // The worktree is new for every run; the index is the mirror's, so a batch of issues on one
    // project builds it once and then pays only for blobs it has not seen.
    let index_key = airlock_codegraph::store::repo_key(mirror.path());
    let retrieval: Box<dyn Retrieval> = Box::new(
        CodegraphRetrieval::open(&worktree_dir, &index_dir, &index_key, commit.as_str()).map_err(
            |e| RunError::Setup {
                what: "the retrieval index",
                message: e.to_string(),
            },
        )?,
    );
    // The run's one call for reference repositories (recorded when the session starts): their
    // files are materialised beside the worktree when first read.
    let references = ReferenceRepos::new(
        reference_repos::collect(&reference_repos::Request {
            dir: &config.reference_repos.dir,
            max_files: config.reference_repos.max_files,
            language: None,
            cache: &MirrorCache::new(&config.paths.cache_dir)?,
        }),
        &run_dir.join("reference"),
        &index_dir,
    );
    // The memory of merged pull requests reads the mirror's history up to the pin (the
    // worktree has none) and keeps its records beside the mirror's index.
    let history = CodegraphHistory::open(mirror.path(), &index_dir, &index_key, commit.as_str());
    let tests: Box<dyn TestRunner> = match overrides.tests {
        Some(t) => t,
        None => Box::new(SandboxTestRunner::new(
            &worktree_dir,
            config.tests.clone(),
            PrepareKey {
                repo_key: prepare_repo_key(&config, &repo),
                commit: commit.as_str().to_string(),
                tracked: tracked_for_prepare,
                envs_dir: config.paths.envs_dir.clone(),
                commit_time: mirror.commit_time(&commit).ok(),
                describe: mirror.describe(&commit),
            },
        )),
    };
    let readers: Box<dyn ReaderLauncher> = match overrides.readers {
        Some(r) => r,
        None => Box::new(SandboxReaderLauncher {
            exe: exe.to_path_buf(),
            worktree: worktree_dir.clone(),
            index_dir: index_dir.clone(),
            index_key: index_key.clone(),
            commit: commit.as_str().to_string(),
            scratch: run_dir.join("readers"),
            timeout: Duration::from_secs(config.tests.timeout_secs),
        }),
    };
    let mut pr_sink: Box<dyn PrSink> = match overrides.pr_sink {
        Some(p) => p,
        None => {
            let endpoint = broker_endpoint(&config, &config_origin)?;
            let sink = BrokerSocket::new(
                endpoint,
                config.broker.reply_timeout(config.tests.timeout_secs),
            )
            .reconnecting_for(Duration::from_secs(config.broker.reconnect_secs()));
            Box::new(match config.broker.tree_transfer() {
                TreeTransfer::Shared => sink,
                TreeTransfer::Bytes => sink.sending_change_of(&worktree_dir, commit.as_str()),
            })
        }
    };

    let spec = RunSpec {
        run_id: run_id.clone(),
        repo: repo.clone(),
        base_commit: commit.as_str().to_string(),
        issue,
        intake: intake_record.clone(),
        config,
        follow_up,
        agent,
    };
    let mut progress = crate::progress::Progress::stderr(progress_mode);
    let mut env = Env {
        model: &model,
        retrieval: retrieval.as_ref(),
        history: &history,
        worktree: &wt,
        policy: &policy,
        tests: tests.as_ref(),
        readers: readers.as_ref(),
        broker: pr_sink.as_mut(),
        references: &references,
        audit: &audit,
        screen: &screen,
        second_opinion: second_opinion.as_mut(),
        trajectory: &mut trajectory,
        progress: &mut progress,
    };
    let ended = match resume {
        None => session::run(&spec, &mut env),
        Some(r) => session::resume(&spec, &mut env, r.resumed),
    };
    let end = ended.map_err(|e| RunError::Spent {
        usage: ModelUsage::from(&model.budget().totals()),
        error: Box::new(e.into()),
    })?;
    let model_finish_problem = model.finish().err().map(|e| e.to_string());
    if let Some(problem) = &model_finish_problem {
        trajectory.record("model_finish_problem", json!({"problem": problem}))?;
    }

    let outcome_path = run_dir.join("outcome.json");
    let mut document = outcome_document(&run_id, commit.as_str(), &spec.issue.id, &end);
    document["intake"] = intake_record.clone();
    let totals = model.budget().totals();
    let usage = ModelUsage::from(&totals);
    document["model_usage"] = serde_json::to_value(usage).unwrap_or_default();
    trajectory.record("model_usage", document["model_usage"].clone())?;
    match &end {
        RunEnd::Parked { stop, parked, .. } => {
            document["parked"]["park_max_age_secs"] = json!(spec.config.budgets.park_max_age_secs);
            park::write(
                &run_dir,
                &ParkedRun {
                    run_id: run_id.clone(),
                    repo,
                    mirror: mirror.path().to_path_buf(),
                    base_commit: commit.as_str().to_string(),
                    issue: spec.issue.clone(),
                    intake: intake_record,
                    config: spec.config.clone(),
                    config_origin,
                    model_spec: spec_text,
                    model_limits: model_config.budget.clone(),
                    model_spent: totals,
                    session: (**parked).clone(),
                    follow_up: spec.follow_up.clone(),
                    agent: Some(spec.agent.clone()),
                    stop: stop.clone(),
                    parked_at: park::unix_now(),
                    expired_at: None,
                },
            )?;
        }
        _ => remove_parked(&run_dir),
    }
    let text = serde_json::to_string_pretty(&document).unwrap_or_default() + "\n";
    std::fs::write(&outcome_path, text).map_err(|source| RunError::Write {
        path: outcome_path.clone(),
        source,
    })?;
    Ok(RunReport {
        run_id,
        run_dir,
        base_commit: commit.as_str().to_string(),
        end,
        outcome_path,
        trajectory_path,
        model_finish_problem,
        usage,
    })
}

/// The agent a run uses: `--agent`, else `[agent] definition`, else the issue fixer.
pub fn resolve_agent(
    flag: Option<&str>,
    config: &Config,
) -> Result<crate::agents::Agent, RunError> {
    let spec = flag
        .or(config.agent.definition.as_deref())
        .unwrap_or(crate::agents::DEFAULT_AGENT);
    Ok(crate::agents::resolve(spec)?)
}

/// The write policy of `agent`'s run on `repo`: the agent's allowlist when its definition sets
/// one, else `[write] allowlist`, else the policy's for `repo`; the refused classes win in each.
/// An agent that keeps the learnings file must be able to write it.
pub fn agent_policy(
    agent: &crate::agents::Agent,
    config: &Config,
    config_origin: &str,
    repo: &str,
) -> Result<Policy, RunError> {
    let base = Policy::default()?;
    let policy = match agent.write_allowlist(&config.docs) {
        Some(globs) => base.with_allowlist(&globs)?,
        None if config.write.allowlist.is_empty() => base.for_repo(repo)?,
        None => base.with_allowlist(&config.write.allowlist)?,
    };
    if agent.docs_dirs
        && let Some(learnings) = &config.docs.learnings
        && let airlock_policies::WriteDecision::Refused { rule, reason } =
            policy.check_write(learnings)
    {
        return Err(RunError::Usage(format!(
            "[docs] learnings = {learnings:?} in {config_origin} is a path the write policy \
             refuses (rule `{rule}`: {reason}); the refused classes win over any allowlist, so \
             name another file, e.g. \"docs/LEARNINGS.md\""
        )));
    }
    Ok(policy)
}

/// A resumed run that ended (or failed) is parked no more.
fn remove_parked(run_dir: &Path) {
    let path = run_dir.join(park::PARKED_FILE);
    if let Err(e) = std::fs::remove_file(&path)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!("cannot remove {}: {e}", path.display());
    }
}

/// A run that has begun: what is needed to record its failure.
struct Started {
    run_id: String,
    run_dir: PathBuf,
    worktree: PathBuf,
    base_commit: String,
    issue_id: String,
    audit_log: PathBuf,
}

impl Started {
    /// Record that the run stopped on `error`: `outcome.json` with `result: failed`, a
    /// `run_finished` record (failed) when the audit log opens, and the worktree removed unless
    /// `keep`. Each step is best effort: the error that stopped the run is what is returned.
    fn failed(self, error: RunError, keep: bool) -> RunError {
        let (error, usage) = error.split_usage();
        let reason = error.to_string();
        let outcome = self.run_dir.join("outcome.json");
        let mut document = json!({
            "run_id": self.run_id,
            "base_commit": self.base_commit,
            "issue_id": self.issue_id,
            "result": "failed",
            "error": reason,
            "worktree_kept": keep,
        });
        // What the model calls made before the failure cost is spent all the same.
        if let Some(usage) = usage {
            document["model_usage"] = serde_json::to_value(usage).unwrap_or_default();
        }
        let text = serde_json::to_string_pretty(&document).unwrap_or_default() + "\n";
        if let Err(e) = std::fs::write(&outcome, text) {
            tracing::warn!("cannot write {}: {e}", outcome.display());
        }
        remove_parked(&self.run_dir);
        match AuditLog::open(&self.audit_log) {
            Ok(audit) => {
                let event = airlock_audit::Event::RunFinished {
                    outcome: airlock_audit::RunOutcome::Failed,
                    reason: Some(reason),
                };
                if let Err(e) = audit.append(&self.run_id, event) {
                    tracing::warn!("cannot record the failed run in the audit log: {e}");
                }
            }
            Err(e) => tracing::warn!("cannot open the audit log to record the failure: {e}"),
        }
        if !keep
            && self.worktree.exists()
            && let Err(e) = std::fs::remove_dir_all(&self.worktree)
        {
            tracing::warn!("cannot remove {}: {e}", self.worktree.display());
        }
        RunError::Failed {
            run_id: self.run_id,
            outcome,
            source: Box::new(error),
        }
    }
}

/// What intake settled before the pin: the issue, the repository, the revision to pin, and
/// the record of where each came from (`outcome.json`'s `intake`, and the trajectory's `run_started`).
struct Intake {
    issue: Issue,
    repo: String,
    rev: String,
    /// Fetch into an existing mirror first (the default branch's head must be today's).
    refresh: bool,
    /// The read token for cloning, only when the repository is the issue's own on its forge.
    clone_token: Option<String>,
    record: Value,
    /// For a follow-up run: the change request it answers.
    follow_up: Option<FollowUpBrief>,
}

/// Read the issue from its source and settle the repository and the revision to pin.
fn intake(args: &RunArgs, config: &Config) -> Result<Intake, RunError> {
    match &args.issue {
        IssueSource::File(path) => {
            let issue = Issue::read(path)?;
            let repo = args.repo.clone().ok_or_else(|| {
                RunError::Usage(
                    "--repo is needed with an issue file (only a GitHub issue names its \
                     repository)"
                        .into(),
                )
            })?;
            let rev = args.commit.clone().ok_or_else(|| {
                RunError::Usage(
                    "--commit is needed with an issue file (a GitHub issue pins its default \
                     branch's head when --commit is absent)"
                        .into(),
                )
            })?;
            let record = json!({
                "source": "file",
                "path": path.display().to_string(),
                "pin": {"rev": rev, "from": "--commit"},
            });
            Ok(Intake {
                issue,
                repo,
                rev,
                refresh: false,
                clone_token: None,
                record,
                follow_up: None,
            })
        }
        IssueSource::FollowUp(queue_id) => follow_up_intake(*queue_id, args, config),
        IssueSource::Merged(reference) => merged_intake(reference, args, config),
        IssueSource::GitHub(reference) => {
            let client = GithubClient::from_config(&config.github)?;
            let fetched = client.fetch_issue(reference, &config.github)?;
            let (repo, clone_token) = forge_clone(reference, args, config, &client)?;
            let (rev, refresh, from) = match &args.commit {
                Some(c) => (c.clone(), false, json!("--commit")),
                None => {
                    let branch = client.default_branch(reference, &config.github)?;
                    (
                        format!("refs/heads/{branch}"),
                        true,
                        json!({"default_branch": branch}),
                    )
                }
            };
            let record = json!({
                "source": "github",
                "reference": reference.to_string(),
                "api_url": config.github.api_url,
                "number": fetched.issue.number,
                "url": fetched.issue.url,
                "author": fetched.issue.author,
                "state": fetched.issue.state,
                "comments_included": fetched.comments,
                "pin": {"rev": rev, "from": from},
            });
            Ok(Intake {
                issue: fetched.issue,
                repo,
                rev,
                refresh,
                clone_token,
                record,
                follow_up: None,
            })
        }
    }
}

/// The repository a GitHub issue's (or merged pull request's) run clones and the token git may
/// send: `--repo` with none, else the reference's own repository on its forge with the read
/// token (it goes to git only there, never to a `--repo` the operator named elsewhere).
fn forge_clone(
    reference: &crate::github::GithubIssueRef,
    args: &RunArgs,
    config: &Config,
    client: &GithubClient,
) -> Result<(String, Option<String>), RunError> {
    if let Some(repo) = &args.repo {
        return Ok((repo.clone(), None));
    }
    let url = reference.clone_url(&config.github).ok_or_else(|| {
        RunError::Usage(format!(
            "--repo is needed: the clone URL of {reference} cannot be told from [github] \
             api_url {:?}",
            config.github.api_url
        ))
    })?;
    Ok((url, client.token().map(str::to_owned)))
}

/// An on-merge run's intake: the merged pull request's task ([`FetchedPull::merged_task`]),
/// pinned at its merge commit (`--commit` overrides), from the pull request's repository on its
/// forge (the read token goes there only) or `--repo`.
///
/// [`FetchedPull::merged_task`]: crate::github::FetchedPull::merged_task
fn merged_intake(
    reference: &crate::github::GithubIssueRef,
    args: &RunArgs,
    config: &Config,
) -> Result<Intake, RunError> {
    let client = GithubClient::from_config(&config.github)?;
    let pull = client.fetch_pull(reference, &config.github)?;
    let issue = pull.merged_task(reference, &config.github)?;
    let (repo, clone_token) = forge_clone(reference, args, config, &client)?;
    let (rev, from) = match (&args.commit, &pull.merge_commit) {
        (Some(c), _) => (c.clone(), json!("--commit")),
        (None, Some(merge)) => (merge.clone(), json!("merge_commit_sha")),
        (None, None) => {
            return Err(RunError::Usage(format!(
                "{reference} has no merge commit to pin; pass --commit"
            )));
        }
    };
    let record = json!({
        "source": "github_merged_pull",
        "reference": reference.to_string(),
        "api_url": config.github.api_url,
        "url": pull.url,
        "author": pull.author,
        "files": pull.files.len(),
        "pin": {"rev": rev, "from": from},
    });
    Ok(Intake {
        issue,
        repo,
        rev,
        refresh: true,
        clone_token,
        record,
        follow_up: None,
    })
}

/// Where the broker is (`[broker] socket` or `url`), or [`RunError::NoBroker`] naming `origin`.
pub fn broker_endpoint(config: &Config, origin: &str) -> Result<BrokerEndpoint, RunError> {
    config
        .broker
        .endpoint()
        .map_err(|e| RunError::Usage(e.to_string()))?
        .ok_or_else(|| RunError::NoBroker {
            config: origin.to_owned(),
        })
}

/// A follow-up run's intake: the broker says where it starts (the head of the branch it pushed
/// for the queue item, or the item's pin), which issue it is for and what the reviewer asked.
/// The repository is the operator's `--repo` (where the branch was pushed), fetched so the
/// head is there.
fn follow_up_intake(queue_id: i64, args: &RunArgs, config: &Config) -> Result<Intake, RunError> {
    let endpoint = broker_endpoint(config, "the configuration")?;
    let brief = BrokerSocket::new(
        endpoint,
        config.broker.reply_timeout(config.tests.timeout_secs),
    )
    .follow_up(queue_id)
    .map_err(|e| RunError::FollowUp {
        queue_id,
        message: e.to_string(),
    })?;
    let repo = args.repo.clone().ok_or_else(|| {
        RunError::Usage(
            "--repo is needed with --follow-up: the repository the branch was pushed to".into(),
        )
    })?;
    if args.commit.is_some() {
        return Err(RunError::Usage(
            "--commit cannot be given with --follow-up: a follow-up starts from the branch head \
             the broker pushed"
                .into(),
        ));
    }
    let text = brief.issue.clone().unwrap_or(airlock_protocol::IssueText {
        title: format!("Follow-up on {}", brief.issue_id),
        body: String::new(),
    });
    let issue = Issue {
        id: brief.issue_id.clone(),
        title: text.title,
        body: text.body,
        labels: Vec::new(),
        number: brief.issue_number,
        author: None,
        state: None,
        url: None,
    };
    let record = json!({
        "source": "follow_up",
        "queue_id": queue_id,
        "branch": brief.branch,
        "pr_url": brief.pr_url,
        "requested_by": brief.requested_by,
        "pin": {"rev": brief.base_commit, "from": "the branch head the broker pushed"},
    });
    Ok(Intake {
        issue,
        repo,
        rev: brief.base_commit.clone(),
        // The head was pushed after the mirror was taken.
        refresh: true,
        clone_token: None,
        record,
        follow_up: Some(brief),
    })
}

/// What names the repository in a prepared environment's key: the broker's name for it when
/// configured (`[broker] repository`), else the repository's path. Not the run's mirror, whose
/// path depends on the cache directory: two runs on one repository, commit and inputs share
/// one environment.
pub(crate) fn prepare_repo_key(config: &Config, repo: &str) -> String {
    match &config.broker.repository {
        Some(name) => name.clone(),
        None => airlock_codegraph::store::repo_key(Path::new(repo)),
    }
}

/// The outcome file: the run's identity, how it ended, and the outcome object (or the triage).
pub fn outcome_document(run_id: &str, base_commit: &str, issue_id: &str, end: &RunEnd) -> Value {
    match end {
        RunEnd::NotReady(triage) => json!({
            "run_id": run_id,
            "base_commit": base_commit,
            "issue_id": issue_id,
            "result": "not_ready",
            "triage": triage,
        }),
        RunEnd::Finished {
            outcome,
            pr_queued,
            stop,
        } => json!({
            "run_id": run_id,
            "base_commit": base_commit,
            "issue_id": issue_id,
            "result": if *pr_queued { "pr_queued" } else { "escalated" },
            "stop": stop,
            "outcome": outcome,
        }),
        RunEnd::Parked {
            outcome,
            stop,
            parked,
        } => json!({
            "run_id": run_id,
            "base_commit": base_commit,
            "issue_id": issue_id,
            "result": "parked",
            "stop": stop,
            "outcome": outcome,
            "parked": {
                "budget": parked.budget,
                "resume": format!("airlock resume {run_id} {}", parked.budget.flag()),
            },
        }),
        RunEnd::Reviewed { queue_id, stop } => json!({
            "run_id": run_id,
            "base_commit": base_commit,
            "issue_id": issue_id,
            "result": if queue_id.is_some() { "review_queued" } else { "no_review" },
            "stop": stop,
            "queue_id": queue_id,
        }),
    }
}

/// Six hex digits that tell this host's runs from another's: of the host name and the runs
/// root (two workers on one host keep their runs apart by their roots). The same on every run
/// of one worker, so ids stay reproducible.
pub(crate) fn host_tag(runs_root: &Path) -> String {
    use sha2::Digest;
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let mut hash = sha2::Sha256::new();
    hash.update(host.trim().as_bytes());
    hash.update([0u8]);
    hash.update(runs_root.as_os_str().as_encoded_bytes());
    hex::encode(hash.finalize())[..6].to_owned()
}

/// `<issue>-<commit[..12]>-<n>`: the first `n` whose directory does not exist yet. No clock or
/// random part, so the same inputs name their runs the same way.
pub(crate) fn next_run_id(runs_root: &Path, issue_id: &str, commit: &str) -> String {
    let safe: String = issue_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let short = commit.get(..12).unwrap_or(commit);
    let mut n = 1u32;
    loop {
        let id = format!("{safe}-{short}-{n}");
        if !runs_root.join(&id).exists() {
            return id;
        }
        n += 1;
    }
}

/// What `airlock doctor --config` was asked.
#[derive(Debug, Clone)]
pub struct TestsDoctorArgs {
    /// `airlock.toml`.
    pub config: PathBuf,
    /// Repository path or URL.
    pub repo: String,
    /// Any revision (default `HEAD`).
    pub commit: String,
}

/// What `airlock doctor --config` found: the environment built, the runner checked against the
/// command, the base inventory taken, at the pin, in the sandbox, exactly as `airlock run` will.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TestsDoctorReport {
    /// The pinned commit.
    pub base_commit: String,
    /// The runner named in `[tests]`.
    pub runner: airlock_policies::testrun::TestRunner,
    /// What the run will do: environment, command, prepare record, inventory.
    pub baseline: crate::ports::Baseline,
}

/// Run prepare and the full test command at the pin in the sandbox and report the inventory;
/// nothing is sent to a model or a broker. A config or prepare problem is an error naming the
/// `airlock.toml` key to fix.
pub fn doctor_tests(args: &TestsDoctorArgs) -> Result<TestsDoctorReport, RunError> {
    let config = Config::load(&args.config)?;
    let cache = MirrorCache::new(&config.paths.cache_dir)?;
    let mirror = cache.mirror(&args.repo)?;
    let commit = mirror.resolve(&args.commit)?;
    std::fs::create_dir_all(&config.paths.runs_root).map_err(|source| RunError::Write {
        path: config.paths.runs_root.clone(),
        source,
    })?;
    let scratch = tempfile::Builder::new()
        .prefix("doctor-")
        .tempdir_in(&config.paths.runs_root)
        .map_err(|source| RunError::Write {
            path: config.paths.runs_root.clone(),
            source,
        })?;
    let worktree = mirror.materialize(&commit, &scratch.path().join("worktree"))?;
    let tracked = worktree.tracked_files()?;
    let tests = SandboxTestRunner::new(
        worktree.path(),
        config.tests.clone(),
        PrepareKey {
            repo_key: prepare_repo_key(&config, &args.repo),
            commit: commit.as_str().to_string(),
            tracked,
            envs_dir: config.paths.envs_dir.clone(),
            commit_time: mirror.commit_time(&commit).ok(),
            describe: mirror.describe(&commit),
        },
    );
    let baseline = tests.baseline().map_err(|e| RunError::Setup {
        what: "the test environment",
        message: e.to_string(),
    })?;
    Ok(TestsDoctorReport {
        base_commit: commit.as_str().to_string(),
        runner: config.tests.runner,
        baseline,
    })
}
