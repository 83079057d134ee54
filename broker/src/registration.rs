//! Run registration, and the check a run makes before it pins (`preflight`: the repository known,
//! the issue's open items). A run is checked against `broker.toml` before the broker takes any of its
//! calls: a configured repository, a full commit id its clone has (fetched once when missing),
//! a worktree under the runs root for a shared tree, a test command the runner accepts, a test
//! environment no wider than the broker allows, and, for a follow-up, the head it must start
//! from.

use std::path::{Path, PathBuf};

use crate::config::{BrokerConfig, RepositoryConfig};
use crate::error::{Error, Result};
use crate::publish;
use crate::service::{Broker, open_clone, unix_now};
use crate::store::QueueStatus;
use airlock_protocol::{BrokerReply, OpenItem, Preflight, RunRegistration, TreeTransfer};

impl Broker {
    /// What a run asks before it pins: whether `broker.toml` configures its repository, and
    /// the issue's pull-request items that are still open (queued, approved, or approved with
    /// a failed publication), oldest first. Changes nothing.
    pub fn preflight(&self, preflight: &Preflight) -> Result<BrokerReply> {
        let repository_known = self.config.repositories.contains_key(&preflight.repository);
        let open_items = self
            .queue()?
            .into_iter()
            .filter(|item| {
                item.review.is_none()
                    && item.item.repository == preflight.repository
                    && item.item.issue_id == preflight.issue_id
                    && matches!(
                        item.status,
                        QueueStatus::Queued | QueueStatus::Approved | QueueStatus::PublishFailed
                    )
            })
            .map(|item| OpenItem {
                queue_id: item.id,
                run_id: item.run_id,
                status: item.status.as_str().to_owned(),
            })
            .collect();
        Ok(BrokerReply::Preflight {
            repository_known,
            open_items,
        })
    }

    /// Register a run after checking it against the configuration.
    pub fn register_run(&self, run: &RunRegistration) -> Result<()> {
        if run.run_id.trim().is_empty() || run.run_id.len() > 200 {
            return Err(Error::Registration(
                "run_id must be 1 to 200 characters".to_owned(),
            ));
        }
        let repo_cfg = self
            .config
            .repositories
            .get(&run.repository)
            .ok_or_else(|| {
                Error::Registration(format!(
                    "repository {:?} is not configured in broker.toml",
                    run.repository
                ))
            })?;
        if run.base_commit.len() != 40
            || !run
                .base_commit
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(Error::Registration(format!(
                "base_commit {:?} is not a full 40-hex commit id",
                run.base_commit
            )));
        }
        let repo = open_clone(&repo_cfg.clone)?;
        let oid =
            git2::Oid::from_str(&run.base_commit).map_err(Error::git("parsing base_commit"))?;
        if repo.find_commit(oid).is_err() {
            // A run pins the forge's head, which this clone may not have fetched yet (a run on
            // another host): fetch the remote's branches once, then look again.
            let token = publish::forge_token(&run.repository, repo_cfg)
                .ok()
                .flatten();
            let fetched = publish::fetch_branches(repo_cfg, token.as_deref());
            let repo = open_clone(&repo_cfg.clone)?;
            repo.find_commit(oid).map_err(|_| {
                Error::Registration(format!(
                    "base_commit {} is not in the broker's clone {}{}",
                    run.base_commit,
                    repo_cfg.clone.display(),
                    match fetched {
                        Ok(()) => format!(", nor on any branch of its remote {}", repo_cfg.remote),
                        Err(e) => format!(" and fetching its remote failed: {e}"),
                    }
                ))
            })?;
        }
        if run.tree == TreeTransfer::Shared {
            worktree_under_root(&self.config, &run.worktree)?;
        }
        if run.issue_id.trim().is_empty() {
            return Err(Error::Registration(
                "issue_id must name the issue the run works on".to_owned(),
            ));
        }
        if run.test_command.is_empty() || run.test_command[0].trim().is_empty() {
            return Err(Error::Registration(
                "test_command must not be empty".to_owned(),
            ));
        }
        run.test_runner
            .check_command(&run.test_command)
            .map_err(Error::Registration)?;
        self.check_test_env(run, repo_cfg)?;
        if let Some(queue_id) = run.follow_up_of {
            self.check_follow_up(run, queue_id)?;
        }
        self.store().register_run(run, unix_now())
    }

    /// The run's test environment is the operator's, but the broker stays in charge of its own
    /// sandbox: every path it grants must exist and lie under `witness_ro` or the repository's
    /// `allow_ro` in `broker.toml` (after resolving symlinks, so a link cannot reach out).
    fn check_test_env(&self, run: &RunRegistration, repo_cfg: &RepositoryConfig) -> Result<()> {
        run.test_env
            .validate()
            .map_err(|e| Error::Registration(format!("test_env: {e}")))?;
        let net = &run.test_env.network;
        if net.mode > self.config.witness_network {
            return Err(Error::Registration(format!(
                "test_env asks for the {} network, wider than this broker lets a witness use \
                 (witness_network = \"{}\"): raise witness_network in broker.toml, or set \
                 [tests] network in airlock.toml to {} or narrower",
                net.mode, self.config.witness_network, self.config.witness_network
            )));
        }
        if let Some(entry) = net
            .allow
            .iter()
            .find(|e| !self.config.witness_allow.contains(e))
        {
            return Err(Error::Registration(format!(
                "test_env allows {entry} through the egress proxy, which broker.toml does not: \
                 add \"{entry}\" to witness_allow, or remove it from [tests] allow in \
                 airlock.toml"
            )));
        }
        let allowed: Vec<PathBuf> = self
            .config
            .witness_ro
            .iter()
            .chain(repo_cfg.allow_ro.iter())
            .filter_map(|p| p.canonicalize().ok())
            .collect();
        for path in run.test_env.granted_paths() {
            let real = path.canonicalize().map_err(|e| {
                Error::Registration(format!(
                    "test_env grants {}, which the broker cannot resolve: {e}",
                    path.display()
                ))
            })?;
            if !allowed.iter().any(|root| real.starts_with(root)) {
                return Err(Error::Registration(format!(
                    "test_env grants {} ({}), which broker.toml does not allow: add it (or a \
                     parent) to [repositories.{:?}] allow_ro or to witness_ro",
                    path.display(),
                    real.display(),
                    run.repository
                )));
            }
        }
        Ok(())
    }
}

/// The run's worktree, resolved: a directory under the runs root (never the root itself).
pub(crate) fn worktree_under_root(config: &BrokerConfig, worktree: &str) -> Result<PathBuf> {
    let root = config.runs_root.canonicalize().map_err(|e| {
        Error::Registration(format!("runs root {}: {e}", config.runs_root.display()))
    })?;
    let tree = Path::new(worktree)
        .canonicalize()
        .map_err(|e| Error::Registration(format!("worktree {worktree}: {e}")))?;
    if tree == root || !tree.starts_with(&root) {
        return Err(Error::Registration(format!(
            "worktree {} is not under the runs root {}",
            tree.display(),
            root.display()
        )));
    }
    if !tree.is_dir() {
        return Err(Error::Registration(format!(
            "worktree {} is not a directory",
            tree.display()
        )));
    }
    Ok(tree)
}
