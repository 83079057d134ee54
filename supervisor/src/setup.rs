//! The set-up every run shares, whichever agent it drives — `airlock run` (the issue fixer, the
//! docs writer, any definition), `airlock resume` and `airlock review`: the worktree at the pin,
//! the audit log and what screening knows, the trajectory, the metered model, retrieval over the
//! worktree with the mirror's index, the memory of merged pull requests, the readers and the
//! broker's sink. What differs between them (the test runner, the reference repositories, the
//! security model) is the caller's to add; [`RunSetup::env`] puts the pieces together.

use crate::adapters::SandboxReaderLauncher;
use crate::adapters::{BrokerSocket, CheckoutWorktree, CodegraphHistory, CodegraphRetrieval};
use crate::config::Config;
use crate::delegate::ReaderLauncher;
use crate::ports::{PrSink, Retrieval, TestRunner};
use crate::progress::{Progress, ProgressMode};
use crate::reference_repos::ReferenceRepos;
use crate::run_error::RunError;
use crate::second_opinion::SecondOpinion;
use crate::session::Env;
use crate::trajectory::{Trajectory, TrajectoryError, TrajectoryEvent};
use crate::transport::BrokerEndpoint;
use crate::usage::ModelUsage;
use airlock_audit::{AuditLog, ScreenContext};
use airlock_checkout::{CommitId, Mirror};
use airlock_model::{Budget, ChatModel, Metered, ModelConfig, RunTotals};
use airlock_policies::Policy;
use airlock_protocol::TreeTransfer;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The trajectory's file inside a run's directory.
pub const TRAJECTORY_FILE: &str = "trajectory.jsonl";
/// The outcome's file inside a run's directory.
pub const OUTCOME_FILE: &str = "outcome.json";

/// How a run's worktree comes to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorktreeStart {
    /// A new run: the pin is materialised into `<run_dir>/worktree` and the trajectory is new.
    Materialise,
    /// A parked run taken up again: its worktree must still be there, and its trajectory goes
    /// on where it stopped.
    Parked,
}

/// What [`RunSetup::open`] needs: the run's pin, its directory, its model and its policy.
pub struct SetupRequest<'a> {
    /// The configuration the run works under.
    pub config: &'a Config,
    /// Where it came from (named in errors).
    pub config_origin: &'a str,
    /// The repository as the operator gave it.
    pub repo: &'a str,
    /// The repository's mirror.
    pub mirror: &'a Mirror,
    /// The pinned commit (a review's: the head reviewed).
    pub commit: &'a CommitId,
    /// `<runs_root>/<run_id>`, existing.
    pub run_dir: &'a Path,
    /// New or parked.
    pub start: WorktreeStart,
    /// The write policy.
    pub policy: Policy,
    /// The model spec.
    pub spec_text: &'a str,
    /// `[model.config]` (a resumed run's limits raised).
    pub model_config: &'a ModelConfig,
    /// What a resumed run's model spent before it parked.
    pub spent: Option<RunTotals>,
    /// Ask `[security_model]`, when configured, for second opinions (an issue run's; a review
    /// has none).
    pub second_opinion: bool,
    /// Replaces the sandboxed reader launcher.
    pub readers: Option<Box<dyn ReaderLauncher>>,
    /// The `airlock` executable, re-executed as `airlock reader-worker`.
    pub exe: &'a Path,
    /// How progress is shown on stderr.
    pub progress: ProgressMode,
}

/// The capabilities and records of one run, wired around its worktree.
pub struct RunSetup {
    /// `<run_dir>/worktree`.
    pub worktree_dir: PathBuf,
    /// The files tracked at the pin.
    pub tracked: Vec<String>,
    /// The write policy.
    pub policy: Policy,
    /// The audit log.
    pub audit: AuditLog,
    /// What screening needs: the tree's blob ids (a dismissal holds for one version of a file)
    /// and the dismissals recorded before this run.
    pub screen: ScreenContext,
    /// `<run_dir>/trajectory.jsonl`.
    pub trajectory_path: PathBuf,
    /// The trajectory.
    pub trajectory: Trajectory,
    /// The model: every call, the supervisor's and the readers', is metered against
    /// `[model.config.budget]`.
    pub model: Metered,
    /// The operator's security model, when asked for and configured.
    pub second_opinion: Option<SecondOpinion>,
    /// The worktree's bounded reader.
    pub worktree: CheckoutWorktree,
    /// Where the indexes are kept.
    pub index_dir: PathBuf,
    /// The mirror's index key.
    pub index_key: String,
    /// Retrieval over the worktree.
    pub retrieval: Box<dyn Retrieval>,
    /// The memory of merged pull requests up to the pin.
    pub history: CodegraphHistory,
    /// Reader workers.
    pub readers: Box<dyn ReaderLauncher>,
    /// Where progress is shown.
    pub progress: Progress,
}

/// What the model's calls came to once the loop ended, as [`RunSetup::close_model`] recorded.
#[derive(Debug, Clone)]
pub struct ModelClose {
    /// The model's end-of-run check, if it failed.
    pub finish_problem: Option<String>,
    /// What the calls used and cost.
    pub usage: ModelUsage,
    /// The budget's totals (a parked run keeps them).
    pub totals: RunTotals,
}

impl RunSetup {
    /// Materialise (or find) the worktree and wire the shared capabilities around it, in the
    /// order whose first failure is the one reported.
    pub fn open(request: SetupRequest<'_>) -> Result<RunSetup, RunError> {
        let SetupRequest {
            config,
            config_origin,
            repo,
            mirror,
            commit,
            run_dir,
            start,
            policy,
            spec_text,
            model_config,
            spent,
            second_opinion,
            readers,
            exe,
            progress,
        } = request;
        let worktree_dir = run_dir.join("worktree");
        let worktree_span = tracing::info_span!("worktree").entered();
        match start {
            WorktreeStart::Materialise => {
                mirror.materialize(commit, &worktree_dir)?;
            }
            WorktreeStart::Parked if !worktree_dir.is_dir() => {
                return Err(RunError::Setup {
                    what: "the parked worktree",
                    message: format!("{} is missing", worktree_dir.display()),
                });
            }
            WorktreeStart::Parked => {}
        }
        let tracked = airlock_checkout::tracked_files(&worktree_dir, commit)?;
        drop(worktree_span);
        let audit = AuditLog::open(&config.paths.audit_log)?;
        let screen = ScreenContext {
            repository: repo.to_owned(),
            blobs: airlock_checkout::tracked_blobs(&worktree_dir, commit)?,
            dismissed: airlock_audit::load_dismissed_keys(&config.paths.audit_log)?,
        };
        let trajectory_path = run_dir.join(TRAJECTORY_FILE);
        let trajectory = match start {
            WorktreeStart::Materialise => Trajectory::create(&trajectory_path)?,
            WorktreeStart::Parked => Trajectory::append(&trajectory_path)?,
        };
        let inner = airlock_model::from_spec(spec_text, model_config)
            .map_err(|e| RunError::Model(e.to_string()))?;
        // A resumed run counts on from what it spent before it parked.
        let budget = match spent {
            None => Budget::new(model_config.budget.clone()),
            Some(spent) => Budget::with_spent(model_config.budget.clone(), spent),
        };
        let model = Metered::new(inner, budget);
        // The security model's key (if it wants one) is read now, so a variable named but
        // unset stops the run before anything else is done.
        let second_opinion = match (&config.security_model, second_opinion) {
            (Some(security), true) => Some(SecondOpinion::connect(security).map_err(|e| {
                RunError::Model(format!("[security_model] in {config_origin}: {e}"))
            })?),
            _ => None,
        };
        let worktree = CheckoutWorktree::open(&worktree_dir, tracked.clone()).map_err(|e| {
            RunError::Setup {
                what: "the worktree",
                message: e.to_string(),
            }
        })?;
        let index_dir = config.paths.index_dir.clone();
        // The worktree is new for every run; the index is the mirror's, so a batch of issues on
        // one project builds it once and then pays only for blobs it has not seen.
        let index_key = airlock_codegraph::store::repo_key(mirror.path());
        let retrieval: Box<dyn Retrieval> = Box::new(
            CodegraphRetrieval::open(&worktree_dir, &index_dir, &index_key, commit.as_str())
                .map_err(|e| RunError::Setup {
                    what: "the retrieval index",
                    message: e.to_string(),
                })?,
        );
        // The memory of merged pull requests reads the mirror's history up to the pin (the
        // worktree has none) and keeps its records beside the mirror's index.
        let history =
            CodegraphHistory::open(mirror.path(), &index_dir, &index_key, commit.as_str());
        let readers: Box<dyn ReaderLauncher> = match readers {
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
        Ok(RunSetup {
            worktree_dir,
            tracked,
            policy,
            audit,
            screen,
            trajectory_path,
            trajectory,
            model,
            second_opinion,
            worktree,
            index_dir,
            index_key,
            retrieval,
            history,
            readers,
            progress: Progress::stderr(progress),
        })
    }

    /// The session's environment: the shared capabilities with the caller's test runner,
    /// broker sink and reference repositories.
    pub fn env<'s>(
        &'s mut self,
        tests: &'s dyn TestRunner,
        broker: &'s mut dyn PrSink,
        references: &'s ReferenceRepos,
    ) -> Env<'s> {
        Env {
            model: &self.model,
            retrieval: self.retrieval.as_ref(),
            history: &self.history,
            worktree: &self.worktree,
            policy: &self.policy,
            tests,
            readers: self.readers.as_ref(),
            broker,
            references,
            audit: &self.audit,
            screen: &self.screen,
            second_opinion: self.second_opinion.as_mut(),
            trajectory: &mut self.trajectory,
            progress: &mut self.progress,
        }
    }

    /// What the model's calls used and cost so far.
    pub fn usage(&self) -> ModelUsage {
        ModelUsage::from(&self.model.budget().totals())
    }

    /// After the loop: the model's end-of-run check and what its calls came to, both recorded
    /// in the trajectory.
    pub fn close_model(&mut self) -> Result<ModelClose, TrajectoryError> {
        let finish_problem = self.model.finish().err().map(|e| e.to_string());
        if let Some(problem) = &finish_problem {
            self.trajectory
                .record(&TrajectoryEvent::ModelFinishProblem { problem })?;
        }
        let totals = self.model.budget().totals();
        let usage = ModelUsage::from(&totals);
        self.trajectory
            .record(&TrajectoryEvent::ModelUsage(usage))?;
        Ok(ModelClose {
            finish_problem,
            usage,
            totals,
        })
    }
}

/// The broker's sink for a run's gated call: `replacement` (tests, embedding), else the broker
/// `[broker]` names, reconnecting for its window. With `sends_change`, a broker on another host
/// (`tree_transfer = bytes`) is sent the worktree's change against `pin`.
pub fn broker_sink(
    config: &Config,
    config_origin: &str,
    replacement: Option<Box<dyn PrSink>>,
    sends_change: Option<(&Path, &str)>,
) -> Result<Box<dyn PrSink>, RunError> {
    if let Some(sink) = replacement {
        return Ok(sink);
    }
    let endpoint = broker_endpoint(config, config_origin)?;
    let sink = BrokerSocket::new(
        endpoint,
        config.broker.reply_timeout(config.tests.timeout_secs),
    )
    .reconnecting_for(Duration::from_secs(config.broker.reconnect_secs()));
    Ok(Box::new(
        match (sends_change, config.broker.tree_transfer()) {
            (Some((worktree, pin)), TreeTransfer::Bytes) => sink.sending_change_of(worktree, pin),
            _ => sink,
        },
    ))
}

/// Write `<run_dir>/outcome.json`: `document` pretty-printed with a final newline.
pub fn write_outcome(path: &Path, document: &serde_json::Value) -> Result<(), RunError> {
    let text = serde_json::to_string_pretty(document).unwrap_or_default() + "\n";
    std::fs::write(path, text).map_err(|source| RunError::Write {
        path: path.to_path_buf(),
        source,
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
