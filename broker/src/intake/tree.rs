//! The tree an intake checks, never the run's word for it: the run's worktree under the runs
//! root, or, for a run that sends bytes, the tree rebuilt from its patch in the broker's own
//! clone at the pin. A change that is not on the pin, not base64, too large, not a patch, or
//! that does not apply is refused.

use std::path::{Path, PathBuf};

use airlock_schemas::OpenPr;

use super::identity::RunCall;
use super::refusal::{Refusal, Stage};
use crate::changes;
use crate::config::BrokerConfig;
use crate::error::{Error, Result};
use crate::registration::worktree_under_root;
use crate::service::open_clone;
use airlock_protocol::{RunRegistration, SubmittedChange, TreeTransfer};

/// At the door, before anything is recorded: a run registered with [`TreeTransfer::Bytes`]
/// sends its change with every call, a run with a shared worktree never. A call of the wrong
/// shape is refused without ending the run.
pub fn check_shape(
    run: &RunRegistration,
    change: Option<&SubmittedChange>,
) -> std::result::Result<(), Refusal> {
    match (run.tree, change) {
        (TreeTransfer::Bytes, None) => Err(Refusal::policy(
            "change",
            "change_with_open_pr",
            "this run registered tree = bytes: its open_pr must carry the change \
             (a git patch against the pin), which this one does not",
        )),
        (TreeTransfer::Shared, Some(_)) => Err(Refusal::policy(
            "change",
            "change_with_open_pr",
            "this run registered a shared worktree: the broker reads the tree \
             there, and an open_pr of this run carries no change",
        )),
        _ => Ok(()),
    }
}

/// The tree one intake checks.
pub enum IntakeTree {
    /// The run's own worktree, under the runs root.
    Shared(PathBuf),
    /// Rebuilt from the run's patch; the folder goes when the intake ends.
    Rebuilt {
        /// Owns the folder.
        _dir: tempfile::TempDir,
        /// The rebuilt tree in it.
        tree: PathBuf,
    },
}

impl IntakeTree {
    /// Where the tree is.
    pub fn path(&self) -> &Path {
        match self {
            IntakeTree::Shared(path) => path,
            IntakeTree::Rebuilt { tree, .. } => tree,
        }
    }
}

/// The call, the broker's own clone at the pin, and the tree to check against it.
pub struct Checkout {
    /// The run's own call.
    pub call: OpenPr,
    /// The broker's clone of the run's repository.
    pub repo: git2::Repository,
    /// The run's pinned commit.
    pub pin: git2::Oid,
    /// The tree the intake checks (kept until the intake ends).
    pub tree: IntakeTree,
}

/// Open the broker's clone at the run's pin and find the tree the call is about.
pub fn materialize(
    config: &BrokerConfig,
    run: &RunRegistration,
    call: RunCall,
    change: Option<&SubmittedChange>,
) -> Stage<Checkout> {
    let (repo, pin) = clone_at_pin(config, run)?;
    let tree = intake_tree(config, run, &repo, pin, change)??;
    Ok(Checkout {
        call: call.call,
        repo,
        pin,
        tree,
    })
}

/// The broker's clone of the run's repository, and the run's pin in it.
pub fn clone_at_pin(
    config: &BrokerConfig,
    run: &RunRegistration,
) -> Result<(git2::Repository, git2::Oid)> {
    let repo_cfg = config.repositories.get(&run.repository).ok_or_else(|| {
        Error::Registration(format!(
            "repository {:?} is no longer configured",
            run.repository
        ))
    })?;
    let repo = open_clone(&repo_cfg.clone)?;
    let pin = git2::Oid::from_str(&run.base_commit).map_err(Error::git("parsing the pin"))?;
    Ok((repo, pin))
}

/// The tree an intake checks: the run's worktree on this host, or, for a run that sends
/// bytes, the tree rebuilt from its patch (in a `witness-` folder of the witness work
/// directory, removed when the intake ends, and by `serve`'s clean-up at start when a kill cut
/// the intake short).
pub fn intake_tree(
    config: &BrokerConfig,
    run: &RunRegistration,
    repo: &git2::Repository,
    pin: git2::Oid,
    change: Option<&SubmittedChange>,
) -> Result<std::result::Result<IntakeTree, Refusal>> {
    let change = match (run.tree, change) {
        (TreeTransfer::Shared, _) => {
            return Ok(Ok(IntakeTree::Shared(worktree_under_root(
                config,
                &run.worktree,
            )?)));
        }
        (TreeTransfer::Bytes, Some(change)) => change,
        (TreeTransfer::Bytes, None) => {
            return Ok(Err(Refusal::policy(
                "change",
                "change_with_open_pr",
                "this run registered tree = bytes: its open_pr must carry the change",
            )));
        }
    };
    if change.base_commit != run.base_commit {
        return Ok(Err(Refusal::policy(
            "change.base_commit",
            "change_on_the_pin",
            &format!(
                "the change is against {:?}, not the run's pinned commit {}",
                change.base_commit, run.base_commit
            ),
        )));
    }
    let patch = match change.patch() {
        Ok(patch) => patch,
        Err(why) => {
            return Ok(Err(Refusal::policy(
                "change.patch_base64",
                "change_is_a_patch",
                &why,
            )));
        }
    };
    let work = config.witness_work_dir();
    std::fs::create_dir_all(&work).map_err(Error::io(format!("creating {}", work.display())))?;
    let dir = tempfile::Builder::new()
        .prefix("witness-rebuilt-")
        .tempdir_in(&work)
        .map_err(Error::io(format!(
            "creating a folder in {}",
            work.display()
        )))?;
    let tree = dir.path().join("tree");
    Ok(match changes::rebuild_tree(repo, pin, &patch, &tree)? {
        Ok(()) => Ok(IntakeTree::Rebuilt { _dir: dir, tree }),
        Err(changes::PatchRefused(why)) => Err(Refusal::policy(
            "change.patch_base64",
            "change_applies_to_pin",
            &why,
        )),
    })
}
