//! The base run taken ahead: when a run registers, the broker has its pin, its test command
//! and its environment, everything the base full run depends on ([`BaseInventories::key`]).
//! It takes that run then, in a witness slot that is free, while the agent works, and keeps
//! it; the run's `open_pr` (and every later one at the pin) reuses it instead of running the
//! suite again on the critical path. A witness whose base is being taken waits for it rather
//! than starting a second one. Nothing is believed: it is the broker's own run of its own
//! clone, exactly the step the witness would have run.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use super::{
    BaseInventories, Place, StepRun, TestExecutor, TreeKind, WitnessPlan, WitnessStep, build_tree,
    restore_writable, scratch_dir, take_base_inventory,
};
use crate::changes::ChangeSet;
use crate::error::{Error, Result};
use airlock_policies::testrun::Grade;

/// The scratch directories of warm-ups are named apart from a witness's (`witness-`), so what
/// is under way in a work directory can be told; a killed broker's are removed all the same
/// ([`super::remove_stale_scratch`]).
pub(super) const WARM_UP_PREFIX: &str = "warm-up-";

/// The base runs being taken now, by the file each will be kept in.
struct Warming {
    keys: Mutex<BTreeSet<PathBuf>>,
    done: Condvar,
}

fn warming() -> &'static Warming {
    static W: OnceLock<Warming> = OnceLock::new();
    W.get_or_init(|| Warming {
        keys: Mutex::new(BTreeSet::new()),
        done: Condvar::new(),
    })
}

fn keys() -> MutexGuard<'static, BTreeSet<PathBuf>> {
    warming()
        .keys
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One base run being taken; dropping it says so to every witness waiting for it.
struct Taking(PathBuf);

impl Drop for Taking {
    fn drop(&mut self) {
        keys().remove(&self.0);
        warming().done.notify_all();
    }
}

/// What [`BaseInventories::warm`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Warmed {
    /// The base run was taken and kept.
    Kept,
    /// One is kept already, or being taken by another warm-up: nothing to do.
    Already,
    /// It ran but is not kept (its grade was not OK): the witness runs its base itself.
    NotKept(String),
}

impl BaseInventories {
    /// Take the base full run of `pin` under `plan` now and keep it, unless it is kept or
    /// being taken already. The step is the witness's own: the pinned tree, the pinned test
    /// files read-only, at the path every witness step runs at.
    pub fn warm(
        &self,
        repo: &git2::Repository,
        pin: git2::Oid,
        pinned_test_files: &[String],
        plan: &WitnessPlan<'_>,
        executor: &dyn TestExecutor,
        work_dir: &Path,
    ) -> Result<Warmed> {
        let key = BaseInventories::key(pin, plan, &executor.variables(plan.test_env));
        let file = self.file(&key);
        if !keys().insert(file.clone()) {
            return Ok(Warmed::Already);
        }
        let _taking = Taking(file);
        if self.has(&key) {
            return Ok(Warmed::Already);
        }
        let scratch = scratch_dir(work_dir, WARM_UP_PREFIX)?;
        let ran = (|| {
            let base = scratch.path().join("base");
            let tree = repo
                .find_commit(pin)
                .and_then(|c| c.tree())
                .map_err(|e| Error::Witness(format!("reading the pinned tree {pin}: {e}")))?;
            // The base tree is the pinned tree whatever the change: no change is needed.
            let none = ChangeSet {
                files: Vec::new(),
                tree: tree.id(),
                diff: String::new(),
                insertions: 0,
                deletions: 0,
                symlinks: Default::default(),
            };
            build_tree(repo, pin, &none, pinned_test_files, TreeKind::Base, &base)?;
            let empty = scratch.path().join("empty");
            std::fs::create_dir(&empty)
                .map_err(Error::io(format!("creating {}", empty.display())))?;
            let links: Vec<String> = plan.test_env.links.iter().map(|l| l.path.clone()).collect();
            let at = scratch.path().join("tree");
            let place = Place {
                executor,
                plan,
                at: &at,
                links: &links,
                empty: &empty,
                scratch: scratch.path(),
            };
            let StepRun {
                mut out, parsed, ..
            } = place.run(
                &base,
                WitnessStep::BaseFull,
                plan.test_command.to_vec(),
                &none,
                pinned_test_files,
            )?;
            if out.grade != Grade::Ok {
                return Ok(Warmed::NotKept(format!("{:?}", out.grade)));
            }
            out.inventory = Some(take_base_inventory(plan.runner, &parsed, &out)?);
            self.keep(&key, &at, &out);
            Ok(Warmed::Kept)
        })();
        restore_writable(scratch.path());
        ran
    }

    /// Wait, at most `limit`, while the base run kept under `key` is being taken by a
    /// warm-up, so a witness reuses it rather than running a second one beside it.
    pub fn wait_for_warm_up(&self, key: &str, limit: Duration) {
        let file = self.file(key);
        let until = Instant::now() + limit;
        let mut held = keys();
        while held.contains(&file) {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            held = warming()
                .done
                .wait_timeout(held, left)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
    }
}
