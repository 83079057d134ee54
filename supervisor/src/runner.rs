//! `airlock run` as a library call: pin, materialise, wire the real capabilities, run the
//! session, write the outcome. The CLI is a thin wrapper around [`run_issue`].

mod doctor;
mod intake;
mod preflight;
mod queued;
mod records;

pub use crate::run_error::RunError;
pub use crate::setup::broker_endpoint;
pub use crate::usage::ModelUsage;
pub use doctor::{TestsDoctorArgs, TestsDoctorReport, doctor_tests};
pub use preflight::OpenItems;
pub use records::outcome_document;
pub(crate) use records::{host_tag, next_run_id, prepare_repo_key};

use crate::adapters::{PrepareKey, SandboxTestRunner};
use crate::config::Config;
use crate::delegate::ReaderLauncher;
use crate::github::IssueSource;
use crate::intake::IntakeRecord;
use crate::issue::Issue;
use crate::park::{self, Additions, ParkError, ParkedRun};
use crate::ports::{PrSink, TestRunner};
use crate::reference_repos::{self, ReferenceRepos};
use crate::session::{self, Resumed, RunEnd, RunSpec, SessionError};
use crate::setup::{self, OUTCOME_FILE, RunSetup, SetupRequest, WorktreeStart};
use airlock_checkout::MirrorCache;
use airlock_model::{ModelConfig, RunTotals};
use airlock_policies::Policy;
use airlock_protocol::FollowUpBrief;
use intake::{Intake, intake, save_forge_history};
use records::{Started, remove_parked};
use serde_json::json;
use std::path::{Path, PathBuf};

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
    /// The reply that answered an earlier run's question, added to the issue as data.
    pub answer: Option<crate::questions::Answer>,
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
    /// The queue item the broker queued for the run's `open_pr`, when it queued one.
    pub queue_id: Option<i64>,
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

/// Run one issue end to end; an issue with an open queue item runs all the same.
pub fn run_issue(args: &RunArgs, overrides: Overrides) -> Result<RunReport, RunError> {
    run_issue_with(args, overrides, OpenItems::Allow)
}

/// Run one issue end to end, doing as `open_items` says about a queue item of the issue that
/// still waits for a human. Everything checkable before the pin is checked first (the model
/// spec and its key, the broker, the repository's registration, the open items): a failure
/// there leaves no run id and no run directory.
pub fn run_issue_with(
    args: &RunArgs,
    overrides: Overrides,
    open_items: OpenItems,
) -> Result<RunReport, RunError> {
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
    let issue = match &overrides.answer {
        Some(answer) => crate::questions::answered_issue(issue, answer),
        None => issue,
    };
    let spec_text = args
        .model
        .clone()
        .or_else(|| config.model.spec.clone())
        .ok_or_else(|| RunError::Model("no model: pass --model or set [model] spec".into()))?;
    let model_config: ModelConfig = config.model.config.clone();
    // A learnings file the policy refuses is the operator's mistake: said before anything runs.
    agent_policy(&agent, &config, &config_origin, &repo)?;
    preflight::check_models(
        &spec_text,
        &config.model.config,
        args.model.is_some(),
        &config,
        &config_origin,
    )?;
    // A replaced sink (tests, embedding) is not the broker `[broker]` names. An issue triage
    // hands back (not ready for an agent) ends before any registration: it needs no broker.
    let ready = intake_follow_up.is_some()
        || crate::triage::classify(&issue).state == crate::triage::TriageState::ReadyForAgent;
    if overrides.pr_sink.is_none() && ready {
        preflight::check_broker(
            &config,
            &config_origin,
            &broker_repository(&config, &repo),
            &issue.id,
            open_items,
        )?;
    }

    // Pin first: everything after this reads exactly this tree.
    let pin_span = tracing::info_span!("pin").entered();
    let cache = MirrorCache::new(&config.paths.cache_dir)?;
    let mirror = cache.mirror_with(
        &repo,
        &airlock_checkout::MirrorOptions {
            refresh: refresh || args.fetch,
            http_token: clone_token,
        },
    )?;
    let commit = mirror.resolve(&rev)?;
    drop(pin_span);
    let mut intake_record = intake_record;
    if let Some(pin) = &mut intake_record.pin {
        pin.commit = Some(commit.as_str().to_owned());
    }
    if let Some(forge) = save_forge_history(args, &config, mirror.path()) {
        intake_record.history_forge = Some(forge);
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
            | RunError::BrokerUnreachable { .. }
            | RunError::UnknownRepository { .. }
            | RunError::OpenItem { .. }
            | RunError::BrokerCheck { .. }
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
    intake: IntakeRecord,
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
    let policy = agent_policy(&agent, &config, &config_origin, &repo)?;
    let (resumed, spent) = match resume {
        Some(r) => (Some(r.resumed), Some(r.spent)),
        None => (None, None),
    };
    let mut run = RunSetup::open(SetupRequest {
        config: &config,
        config_origin: &config_origin,
        repo: &repo,
        mirror: &mirror,
        commit: &commit,
        run_dir: &run_dir,
        start: match resumed {
            None => WorktreeStart::Materialise,
            Some(_) => WorktreeStart::Parked,
        },
        policy,
        spec_text: &spec_text,
        model_config: &model_config,
        spent,
        second_opinion: true,
        readers: overrides.readers,
        exe,
        progress: progress_mode,
    })?;
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
        &run.index_dir,
    );
    let tests: Box<dyn TestRunner> = match overrides.tests {
        Some(t) => t,
        None => Box::new(SandboxTestRunner::new(
            &run.worktree_dir,
            config.tests.clone(),
            PrepareKey {
                repo_key: prepare_repo_key(&config, &repo),
                commit: commit.as_str().to_string(),
                tracked: run.tracked.clone(),
                envs_dir: config.paths.envs_dir.clone(),
                commit_time: mirror.commit_time(&commit).ok(),
                describe: mirror.describe(&commit),
            },
        )),
    };
    let mut pr_sink: Box<dyn PrSink> = setup::broker_sink(
        &config,
        &config_origin,
        overrides.pr_sink,
        Some((&run.worktree_dir, commit.as_str())),
    )?;

    let spec = RunSpec {
        run_id: run_id.clone(),
        repo: repo.clone(),
        base_commit: commit.as_str().to_string(),
        issue,
        intake: intake_record.clone(),
        config,
        follow_up,
        agent,
        earlier: overrides
            .answer
            .as_ref()
            .map(crate::questions::Answer::earlier_run),
    };
    let queued = std::rc::Rc::new(std::cell::Cell::new(None));
    let mut recording = queued::RecordingSink::new(pr_sink.as_mut(), queued.clone());
    let mut env = run.env(tests.as_ref(), &mut recording, &references);
    let ended = match resumed {
        None => session::run(&spec, &mut env),
        Some(resumed) => session::resume(&spec, &mut env, resumed),
    };
    let end = ended.map_err(|e| RunError::Spent {
        usage: run.usage(),
        error: Box::new(e.into()),
    })?;
    let closed = run.close_model()?;

    let outcome_path = run_dir.join(OUTCOME_FILE);
    let mut document = outcome_document(&run_id, commit.as_str(), &spec.issue.id, &end);
    document["intake"] = intake_record.to_json();
    document["model_usage"] = serde_json::to_value(closed.usage).unwrap_or_default();
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
                    model_spent: closed.totals,
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
    setup::write_outcome(&outcome_path, &document)?;
    Ok(RunReport {
        run_id,
        run_dir,
        base_commit: commit.as_str().to_string(),
        end,
        outcome_path,
        trajectory_path: run.trajectory_path,
        model_finish_problem: closed.finish_problem,
        usage: closed.usage,
        queue_id: queued.get(),
    })
}

/// The name the broker knows the run's repository by: `[broker] repository`, else the
/// repository as the run was given it (what the run registers under).
pub fn broker_repository(config: &Config, repo: &str) -> String {
    config
        .broker
        .repository
        .clone()
        .unwrap_or_else(|| repo.to_owned())
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
