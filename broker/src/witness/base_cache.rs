//! The base inventory, taken once per pin: the base full run depends only on the pinned tree,
//! the command and its runner, the test environment, the broker's own variables and time limit,
//! and airlock's report programs. Its recorded step is kept under a digest of all of these in
//! the broker's work directory (never granted to a witness command) and reused by every later
//! witness at that pin: a batch of issues on one head commit pays for one base run. Any change
//! of one of them is another key. A granted directory is stamped by its inode and modification
//! time, so an environment rebuilt in place or replaced is another key; a change deep inside a
//! granted directory that leaves the directory itself untouched is not seen (prepared
//! environments are built into new directories).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::Digest;

use super::{WitnessOutput, WitnessPlan};
use airlock_policies::testrun as results;

/// Bumped when what is kept, or how the key is made, changes.
const FORMAT: u32 = 1;

/// The kept base runs, one JSON file per key.
#[derive(Debug, Clone)]
pub struct BaseInventories {
    dir: PathBuf,
}

/// One kept base run.
#[derive(Debug, Serialize, Deserialize)]
struct Kept {
    format: u32,
    /// The path the step ran at: a test id holding it is rewritten to the path of the witness
    /// that reuses it, where its other steps run.
    at: String,
    /// When it was taken (Unix seconds).
    taken_at: u64,
    /// The recorded step, its inventory included.
    output: WitnessOutput,
}

impl BaseInventories {
    /// The kept base runs under `dir` (created on the first keep).
    pub fn at(dir: impl Into<PathBuf>) -> Self {
        BaseInventories { dir: dir.into() }
    }

    /// The key of the base run of `pin` under `plan`, with the variables the broker's
    /// executor adds.
    pub fn key(
        pin: git2::Oid,
        plan: &WitnessPlan<'_>,
        variables: &BTreeMap<String, String>,
    ) -> String {
        let env = plan.test_env;
        let stamps: Vec<(String, String)> = env
            .ro
            .iter()
            .chain(env.links.iter().map(|l| &l.source))
            .map(|p| (p.display().to_string(), stamp(p)))
            .collect();
        let programs = sha2::Sha256::digest(
            format!("{}\0{}", results::UNITTEST_REPORTER, results::PYTEST_GUARD).as_bytes(),
        );
        let material = serde_json::json!({
            "format": FORMAT,
            "broker": env!("CARGO_PKG_VERSION"),
            "pin": pin.to_string(),
            "command": plan.test_command,
            "runner": plan.runner.name(),
            "timeout_ms": plan.timeout.as_millis() as u64,
            "env": env,
            "variables": variables,
            "stamps": stamps,
            "programs": hex::encode(programs),
        });
        hex::encode(sha2::Sha256::digest(material.to_string().as_bytes()))
    }

    /// Whether a base step is kept under `key` (it may still fail to read).
    pub fn has(&self, key: &str) -> bool {
        self.file(key).is_file()
    }

    /// The base step kept under `key`, its test ids and output moved to the path `at`, with
    /// a note saying it is reused; `None` when none is kept or it cannot be read.
    pub fn reuse(&self, key: &str, at: &Path) -> Option<WitnessOutput> {
        let text = std::fs::read_to_string(self.file(key)).ok()?;
        let kept: Kept = serde_json::from_str(&text).ok()?;
        if kept.format != FORMAT || kept.output.inventory.is_none() {
            return None;
        }
        let here = at.display().to_string();
        let moved = |s: &str| {
            if kept.at.is_empty() {
                s.to_owned()
            } else {
                s.replace(&kept.at, &here)
            }
        };
        let mut output = kept.output;
        if let Some(inventory) = &mut output.inventory {
            inventory.tests = std::mem::take(&mut inventory.tests)
                .into_iter()
                .map(|(id, status)| (moved(&id), status))
                .collect();
            inventory.reasons = std::mem::take(&mut inventory.reasons)
                .into_iter()
                .map(|(id, reason)| (moved(&id), reason))
                .collect();
        }
        output.parsed.tests = std::mem::take(&mut output.parsed.tests)
            .into_iter()
            .map(|(id, status)| (moved(&id), status))
            .collect();
        output.parsed.reasons = std::mem::take(&mut output.parsed.reasons)
            .into_iter()
            .map(|(id, reason)| (moved(&id), reason))
            .collect();
        output.stdout = moved(&output.stdout);
        output.stderr = moved(&output.stderr);
        output.reused = Some(format!(
            "the broker's base run at this pin (taken when a run registered, or by an earlier \
             witness), with the same command, environment \
             and broker (taken at Unix time {}), reused",
            kept.taken_at
        ));
        Some(output)
    }

    /// Keep `output` (a base step that took its inventory) under `key`, as run at `at`. A
    /// failure to keep is logged: the witness goes on, and the next one runs its base again.
    pub fn keep(&self, key: &str, at: &Path, output: &WitnessOutput) {
        if output.inventory.is_none() || output.reused.is_some() {
            return;
        }
        let kept = Kept {
            format: FORMAT,
            at: at.display().to_string(),
            taken_at: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            output: output.clone(),
        };
        if let Err(e) = self.write(key, &kept) {
            tracing::warn!(
                "keeping the base inventory in {}: {e}; the next witness at this pin runs its \
                 base again",
                self.dir.display()
            );
        }
    }

    fn write(&self, key: &str, kept: &Kept) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let text = serde_json::to_vec(kept).map_err(std::io::Error::other)?;
        let mut file = tempfile::NamedTempFile::new_in(&self.dir)?;
        std::io::Write::write_all(&mut file, &text)?;
        file.persist(self.file(key)).map_err(|e| e.error)?;
        Ok(())
    }

    pub(super) fn file(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.json"))
    }
}

/// A granted path's identity: inode and modification time, or `missing`.
fn stamp(path: &Path) -> String {
    use std::os::unix::fs::MetadataExt;
    match std::fs::metadata(path) {
        Ok(m) => format!("{}:{}.{}", m.ino(), m.mtime(), m.mtime_nsec()),
        Err(_) => "missing".to_owned(),
    }
}
