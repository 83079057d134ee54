//! cgroup v1 `pids` and `memory` limits for the whole sandboxed tree.
//!
//! Created by the supervising helper in the host's namespaces (it needs write access to the
//! cgroup filesystem, which a root caller has), before the sandbox's init is released, so every
//! process of the sandbox is born inside the cgroups. Removed once the sandbox is gone.

use crate::spec::{Layer, Limits};
use std::fs;
use std::path::{Path, PathBuf};

const V1_ROOT: &str = "/sys/fs/cgroup";

/// A layer, its controller and the files to write in its new cgroup.
type ControllerSpec<'a> = (Layer, &'a str, Vec<(&'a str, String)>);

/// The cgroups of one run.
pub(crate) struct Cgroups {
    dirs: Vec<(Layer, PathBuf)>,
    /// Cgroup layers that could not be set up.
    pub missing: Vec<Layer>,
}

fn try_create(controller: &str, name: &str, files: &[(&str, String)]) -> Option<PathBuf> {
    let base = Path::new(V1_ROOT).join(controller);
    if !base.join("cgroup.procs").is_file() {
        return None;
    }
    let dir = base.join(name);
    // A leftover of a helper that was killed (same pid, reused) is empty: remove it first.
    let _ = fs::remove_dir(&dir);
    fs::create_dir(&dir).ok()?;
    for (file, value) in files {
        if fs::write(dir.join(file), value).is_err() && !file.contains("memsw") {
            let _ = fs::remove_dir(&dir);
            return None;
        }
    }
    Some(dir)
}

impl Cgroups {
    /// Create the cgroups for this run; layers that cannot be created are listed as missing.
    pub(crate) fn create(limits: &Limits, pretend_missing: &[Layer]) -> Cgroups {
        let name = format!("airlock-sandbox-{}", crate::sys::getpid());
        let mut dirs = Vec::new();
        let mut missing = Vec::new();
        let bytes = limits.memory_mb.saturating_mul(1024 * 1024).to_string();
        let wanted: [ControllerSpec; 2] = [
            (
                Layer::CgroupPids,
                "pids",
                vec![("pids.max", limits.max_procs.to_string())],
            ),
            (
                Layer::CgroupMemory,
                "memory",
                vec![
                    ("memory.limit_in_bytes", bytes.clone()),
                    ("memory.memsw.limit_in_bytes", bytes),
                ],
            ),
        ];
        for (layer, controller, files) in wanted {
            let dir = if pretend_missing.contains(&layer) {
                None
            } else {
                try_create(controller, &name, &files)
            };
            match dir {
                Some(dir) => dirs.push((layer, dir)),
                None => missing.push(layer),
            }
        }
        Cgroups { dirs, missing }
    }

    /// Move `pid` (the sandbox's init, not yet released) into every cgroup.
    pub(crate) fn add(&mut self, pid: libc::pid_t) {
        let mut failed = Vec::new();
        for (layer, dir) in &self.dirs {
            if fs::write(dir.join("cgroup.procs"), pid.to_string()).is_err() {
                failed.push(*layer);
            }
        }
        for layer in failed {
            self.dirs.retain(|(l, _)| *l != layer);
            self.missing.push(layer);
        }
    }

    /// The layers in force.
    pub(crate) fn applied(&self) -> Vec<Layer> {
        self.dirs.iter().map(|(l, _)| *l).collect()
    }

    /// Kill every process in the cgroups (the timeout path when there is no PID namespace).
    pub(crate) fn kill_all(&self) {
        for (_, dir) in &self.dirs {
            if let Ok(procs) = fs::read_to_string(dir.join("cgroup.procs")) {
                for pid in procs
                    .lines()
                    .filter_map(|l| l.trim().parse::<libc::pid_t>().ok())
                {
                    let _ = crate::sys::kill(pid, libc::SIGKILL);
                }
            }
        }
    }

    /// The memory controller's high-water mark, in bytes.
    pub(crate) fn peak_memory(&self) -> Option<u64> {
        let (_, dir) = self.dirs.iter().find(|(l, _)| *l == Layer::CgroupMemory)?;
        fs::read_to_string(dir.join("memory.max_usage_in_bytes"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// Remove the cgroups; the sandbox is gone by now, but its last processes may take a moment
    /// to leave, so retry briefly.
    pub(crate) fn remove(self) {
        for (_, dir) in self.dirs {
            for _ in 0..50 {
                if fs::remove_dir(&dir).is_ok() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        }
    }
}
