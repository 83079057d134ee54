//! What `airlock init` needs to know of the host, gathered once into [`HostFacts`] (so the
//! detection rules are tested on faked hosts), and the few questions it asks the host to gather
//! them: which executables are on the `PATH`, what a command prints, whether the sandbox sees a
//! path without a grant. It depends on no other part of `init`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The interpreter `python3` runs on the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PythonFacts {
    /// Its real executable (`sys.executable`, symlinks resolved).
    pub executable: PathBuf,
    /// `sys.prefix` (differs from `base_prefix` inside an activated venv).
    pub prefix: PathBuf,
    /// `sys.base_prefix`: the installation the standard library lives in.
    pub base_prefix: PathBuf,
}

/// The `go` toolchain on the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoFacts {
    /// Its real executable (symlinks resolved).
    pub executable: PathBuf,
    /// `go env GOROOT`.
    pub goroot: PathBuf,
}

/// What `init` needs to know of the host, gathered once by [`HostFacts::current`] and faked in
/// tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostFacts {
    /// The operator's `$HOME`: what `~` means in `airlock.toml`.
    pub home: Option<PathBuf>,
    /// The interpreter `python3` runs, asked from the repository's directory (so pyenv honours
    /// its `.python-version`).
    pub python: Option<PythonFacts>,
    /// `node` on the operator's `PATH`, resolved to its real executable.
    pub node: Option<PathBuf>,
    /// `go` on the operator's `PATH`.
    pub go: Option<GoFacts>,
    /// Every CPython on the host (`python3.N` on `PATH`, in `/usr/bin`, under pyenv): with two
    /// or more, a Python recipe chooses among them per pin (`interpreter = "auto"`).
    pub pythons: Vec<crate::recipe::HostPython>,
    /// The directory of the host's PostgreSQL server binaries (`initdb`, `postgres`), for a
    /// service the project's CI starts.
    pub postgres_bin: Option<PathBuf>,
    /// The host's `redis-server`.
    pub redis_server: Option<PathBuf>,
    /// The absolute directory the generated `airlock.toml` is written to: its relative `[paths]`
    /// resolve against it.
    pub config_dir: PathBuf,
    /// airlock's data directory ([`airlock_audit::data_dir`], else `.airlock` in
    /// `config_dir`): both generated files put the records under it ([`Layout`](super::Layout)).
    pub data_dir: PathBuf,
}

impl HostFacts {
    /// The facts of this host, for the repository at `repo` and a configuration written into
    /// `config_dir`. A tool that is missing or does not answer is `None`.
    pub fn current(repo: &Path, config_dir: &Path) -> HostFacts {
        let python = command_lines(
            Command::new("python3")
                .args([
                    "-I",
                    "-c",
                    "import sys; print(sys.executable); print(sys.prefix); print(sys.base_prefix)",
                ])
                .current_dir(repo),
        )
        .and_then(|lines| match lines.as_slice() {
            [exe, prefix, base] if Path::new(exe).is_absolute() => Some(PythonFacts {
                executable: real_path(Path::new(exe)),
                prefix: PathBuf::from(prefix),
                base_prefix: PathBuf::from(base),
            }),
            _ => None,
        });
        let node = find_on_path("node").map(|p| real_path(&p));
        let go = find_on_path("go").and_then(|exe| {
            let goroot = command_lines(Command::new(&exe).args(["env", "GOROOT"]))?;
            let goroot = PathBuf::from(goroot.first()?);
            goroot.is_absolute().then(|| GoFacts {
                executable: real_path(&exe),
                goroot,
            })
        });
        let home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from);
        HostFacts {
            postgres_bin: crate::ci_files::postgres_bin(),
            redis_server: find_on_path("redis-server").map(|p| real_path(&p)),
            pythons: crate::recipe::host_interpreters(home.as_deref()),
            home,
            python,
            node,
            go,
            data_dir: airlock_audit::data_dir()
                .map(|d| config_dir.join(d))
                .unwrap_or_else(|_| config_dir.join(".airlock")),
            config_dir: config_dir.to_path_buf(),
        }
    }
}

/// Whether the sandbox shows `path` without a grant.
pub(super) fn under_system_dirs(path: &Path) -> bool {
    crate::recipe::in_system_dirs(path)
}

/// Whether looking `name` up on the sandbox's default `PATH` finds the executable `real`.
pub(super) fn sandbox_path_finds(name: &str, real: &Path) -> bool {
    airlock_sandbox::DEFAULT_PATH.split(':').any(|dir| {
        Path::new(dir)
            .join(name)
            .canonicalize()
            .is_ok_and(|found| found == real)
    })
}

/// The first executable file `name` on the operator's `PATH`.
fn find_on_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|p| {
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// The non-empty lines a command prints on success; `None` when it cannot run or fails.
pub(super) fn command_lines(command: &mut Command) -> Option<Vec<String>> {
    let output = command
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8(output.stdout).ok()?;
    Some(
        text.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(String::from)
            .collect(),
    )
}

fn real_path(path: &Path) -> PathBuf {
    path.canonicalize().unwrap_or_else(|_| path.to_path_buf())
}
