//! cgroup v1 `pids` and `memory` limits for the whole sandboxed tree.
//!
//! Created by the supervising helper in the host's namespaces (it needs write access to the
//! cgroup filesystem, which a root caller has). The sandbox's processes are *born* inside the
//! cgroups rather than moved there: the single-threaded helper moves itself in, clones the
//! sandbox's init (which inherits the cgroups), and moves itself back out.
//!
//! Why not move init after the clone: a write of a pid to a v1 `cgroup.procs` file takes the
//! kernel's global threadgroup rwsem for writing, and the first writer after a quiet spell
//! waits a full RCU grace period (5 to 15 ms on a loaded 2-core host) — most of a run's
//! set-up time. A thread that moves only *itself* (`0` written to the `tasks` file) is exempt
//! from that lock (`cgroup_procs_write_start`: no pid and no threadgroup), so entering and
//! leaving costs tens of microseconds. Removed once the sandbox is gone.
use crate::spec::Limits;
use crate::types::Layer;
use std::fs;
use std::path::{Path, PathBuf};

const V1_ROOT: &str = "/sys/fs/cgroup";
/// A run's cgroup is named after its helper's pid.
const NAME_PREFIX: &str = "airlock-sandbox-";

/// A layer, its controller and the files to write in its new cgroup.
type ControllerSpec<'a> = (Layer, &'a str, Vec<(&'a str, String)>);

/// The cgroups of one run.
pub(crate) struct Cgroups {
    dirs: Vec<(Layer, PathBuf)>,
    /// Cgroup layers that could not be set up.
    pub missing: Vec<Layer>,
    /// The helper's own cgroups, to return to after cloning the sandbox's init.
    homes: Vec<PathBuf>,
}

fn controller_of(layer: Layer) -> &'static str {
    match layer {
        Layer::CgroupMemory => "memory",
        _ => "pids",
    }
}

/// The directory of this process's cgroup in the v1 hierarchy of `controller`, from the text
/// of `/proc/self/cgroup`.
fn own_v1_cgroup(own: &str, controller: &str) -> Option<PathBuf> {
    let base = Path::new(V1_ROOT).join(controller);
    own.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers
            .split(',')
            .any(|c| c == controller)
            .then(|| base.join(path.trim_start_matches('/')))
    })
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
        let name = format!("{NAME_PREFIX}{}", crate::sys::getpid());
        let mut dirs = Vec::new();
        let mut missing = Vec::new();
        let bytes = limits.memory_mb.saturating_mul(1024 * 1024).to_string();
        let wanted: [ControllerSpec; 2] = [
            (
                Layer::CgroupPids,
                "pids",
                // The sandbox's init is in the cgroup too; the limit is the command's.
                vec![("pids.max", (u64::from(limits.max_procs) + 1).to_string())],
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
        Cgroups {
            dirs,
            missing,
            homes: Vec::new(),
        }
    }

    /// Move the calling thread into every cgroup of this run, so that the next process it
    /// clones is born inside them. Call it only from a single-threaded process (the helper):
    /// other threads would stay where they are. Layers whose move fails become missing.
    pub(crate) fn enter_self(&mut self) {
        let own = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let mut failed = Vec::new();
        for (layer, dir) in &self.dirs {
            match own_v1_cgroup(&own, controller_of(*layer)) {
                Some(home) if fs::write(dir.join("tasks"), "0").is_ok() => self.homes.push(home),
                _ => failed.push(*layer),
            }
        }
        for layer in failed {
            if let Some(pos) = self.dirs.iter().position(|(l, _)| *l == layer) {
                let (_, dir) = self.dirs.remove(pos);
                let _ = fs::remove_dir(dir);
            }
            self.missing.push(layer);
        }
    }

    /// Move the calling thread back to the cgroups it came from (after cloning the sandbox's
    /// init), so that only the sandbox is accounted and the cgroups can be removed at the end.
    pub(crate) fn leave_self(&mut self) {
        for home in self.homes.drain(..) {
            let _ = fs::write(home.join("tasks"), "0");
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
                    let _ = crate::sys::kill(pid, crate::sys::Signal::SIGKILL);
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
    pub(crate) fn remove(mut self) {
        self.leave_self();
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

/// Remove the empty cgroups of runs whose helper is gone (a helper killed with its caller
/// cannot remove its own). Cgroups of live helpers, and non-empty ones, are left alone. Called
/// by a helper while its sandbox builds its root, so it costs a run nothing.
pub(crate) fn sweep_stale() {
    for controller in ["pids", "memory"] {
        let base = Path::new(V1_ROOT).join(controller);
        let Ok(entries) = fs::read_dir(&base) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(pid) = name
                .to_str()
                .and_then(|n| n.strip_prefix(NAME_PREFIX))
                .and_then(|p| p.parse::<u32>().ok())
            else {
                continue;
            };
            if !Path::new(&format!("/proc/{pid}")).exists() {
                // Fails (EBUSY) if anything still runs in it.
                let _ = fs::remove_dir(entry.path());
            }
        }
    }
}
