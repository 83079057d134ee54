//! A throwaway PostgreSQL server: `initdb` into a temporary folder, `postgres` on a free port of
//! 127.0.0.1 (and a Unix socket in the same folder), one fresh database per test, everything
//! stopped and removed on drop.
//!
//! PostgreSQL refuses to run as root, and CI runs as root: then the server runs as the
//! `postgres` system user (else `nobody`), and its folder is handed to that user. Where no
//! PostgreSQL is installed the helper fails, naming the Debian package `postgresql`; it never
//! skips.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

/// A running PostgreSQL server of a test's own (superuser `postgres`, trust authentication on
/// 127.0.0.1 only).
pub struct PgServer {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    child: Child,
}

/// How long a fresh server may take to accept connections: a busy CI machine runs several
/// test binaries at once.
const STARTUP: Duration = Duration::from_secs(120);

/// The server [`PgServer::shared`] hands out while any test still holds it.
static SHARED: Mutex<Weak<PgServer>> = Mutex::new(Weak::new());

/// Numbers every database of this process, so no two tests' names meet.
static DATABASES: AtomicU32 = AtomicU32::new(0);

impl PgServer {
    /// Start a new server and wait until it accepts connections.
    pub fn start() -> PgServer {
        let bin = bin_dir();
        let dir = tempfile::Builder::new()
            .prefix("airlock-pg-")
            .tempdir()
            .expect("creating the PostgreSQL folder");
        let sock = dir.path().join("sock");
        std::fs::create_dir(&sock).expect("creating the socket folder");
        let user = server_user();
        if let Some((uid, gid)) = user {
            for path in [dir.path(), &sock] {
                std::os::unix::fs::chown(path, Some(uid), Some(gid))
                    .unwrap_or_else(|e| panic!("handing {} to uid {uid}: {e}", path.display()));
            }
        }
        let data = dir.path().join("data");
        let out = as_user(Command::new(bin.join("initdb")), user)
            .current_dir(dir.path())
            .args(["-D"])
            .arg(&data)
            .args([
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--locale=C",
                "-N",
            ])
            .output()
            .expect("running initdb");
        assert!(
            out.status.success(),
            "initdb failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let log_path = dir.path().join("postgres.log");
        for _ in 0..5 {
            let port = free_port();
            let log = std::fs::File::create(&log_path).expect("creating the server log");
            let mut child = as_user(Command::new(bin.join("postgres")), user)
                .current_dir(dir.path())
                .arg("-D")
                .arg(&data)
                .arg("-k")
                .arg(&sock)
                .args(["-p", &port.to_string()])
                .args(["-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"])
                .args(["-c", "synchronous_commit=off", "-c", "full_page_writes=off"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("starting postgres");
            match wait_ready(&mut child, &bin, port, &log_path) {
                Ready::Yes => {
                    return PgServer {
                        dir,
                        bin,
                        port,
                        child,
                    };
                }
                // Another process took the port between the look and the bind (the server has
                // exited): try another.
                Ready::PortTaken => {}
            }
        }
        panic!("postgres found no free port on 127.0.0.1 in five tries");
    }

    /// The server every test of this process shares while any of them holds it (a new one when
    /// the last holder dropped it). Each test still takes its own [`PgServer::database`].
    pub fn shared() -> Arc<PgServer> {
        let mut slot = SHARED.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(server) = slot.upgrade() {
            return server;
        }
        let server = Arc::new(PgServer::start());
        *slot = Arc::downgrade(&server);
        server
    }

    /// The TCP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The folder of the server's Unix socket (`.s.PGSQL.<port>`).
    pub fn socket_dir(&self) -> PathBuf {
        self.dir.path().join("sock")
    }

    /// Create a fresh, empty database named after `name` (lower-case letters, digits and `_`;
    /// cut to 48 characters, PostgreSQL's names being short, and numbered so that names never
    /// meet) and return its URL.
    pub fn database(&self, name: &str) -> String {
        assert!(
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
            "database name {name:?}: lower-case letters, digits and _ only"
        );
        let name = format!(
            "{}_{}",
            &name[..name.len().min(48)],
            DATABASES.fetch_add(1, Ordering::Relaxed) + 1
        );
        let out = self.psql(&format!("CREATE DATABASE {name}"));
        assert!(
            out.status.success(),
            "creating database {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        format!("postgres://postgres@127.0.0.1:{}/{name}", self.port)
    }

    fn psql(&self, sql: &str) -> std::process::Output {
        psql(&self.bin, self.port, sql)
    }

    fn stop(&mut self) {
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return;
        }
        // SIGINT is PostgreSQL's fast shutdown; killing the postmaster outright would leave its
        // backends behind for a while.
        let interrupted = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        let deadline = Instant::now() + Duration::from_secs(30);
        while interrupted && Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        self.stop();
        // The folder (data, socket, log) goes with `self.dir`.
    }
}

enum Ready {
    Yes,
    PortTaken,
}

/// Wait until the server on `port` answers a query, or says why it stopped.
fn wait_ready(child: &mut Child, bin: &Path, port: u16, log: &Path) -> Ready {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("waiting for postgres") {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            if text.contains("could not bind") || text.contains("already in use") {
                return Ready::PortTaken;
            }
            panic!("postgres exited ({status}) before accepting connections:\n{text}");
        }
        if psql(bin, port, "SELECT 1").status.success() {
            return Ready::Yes;
        }
        if started.elapsed() > STARTUP {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "postgres did not accept connections within {STARTUP:?}:\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Run one statement as the superuser, over TCP.
fn psql(bin: &Path, port: u16, sql: &str) -> std::process::Output {
    let psql = bin.join("psql");
    Command::new(if psql.is_file() {
        psql
    } else {
        PathBuf::from("psql")
    })
    .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1"])
    .args(["-p", &port.to_string(), "-U", "postgres", "-d", "postgres"])
    .args(["-c", sql])
    .env_remove("PGPASSWORD")
    .env_remove("PGSERVICE")
    .stdin(Stdio::null())
    .output()
    .expect("running psql")
}

/// Where `initdb`, `postgres` and `psql` are: beside the `initdb` on PATH (through its
/// symbolic link, as Debian's `/usr/lib/postgresql/N/bin`), else the newest
/// `/usr/lib/postgresql/*/bin`.
pub fn bin_dir() -> PathBuf {
    let on_path = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .map(|dir| dir.join("initdb"))
        .find(|initdb| initdb.is_file())
        .and_then(|initdb| std::fs::canonicalize(initdb).ok())
        .and_then(|initdb| initdb.parent().map(Path::to_path_buf))
        .filter(|dir| dir.join("postgres").is_file());
    if let Some(dir) = on_path {
        return dir;
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .filter_map(|e| {
                    let version = e.file_name().to_str()?.parse().ok()?;
                    let bin = e.path().join("bin");
                    (bin.join("initdb").is_file() && bin.join("postgres").is_file())
                        .then_some((version, bin))
                })
                .collect()
        })
        .unwrap_or_default();
    versions.sort();
    match versions.pop() {
        Some((_, bin)) => bin,
        None => panic!(
            "no PostgreSQL server here: no `initdb` on PATH nor in /usr/lib/postgresql/*/bin; \
             install the Debian package `postgresql` (apt-get install postgresql)"
        ),
    }
}

/// When this process is root: the (uid, gid) the server runs as, `postgres` or else `nobody`.
fn server_user() -> Option<(u32, u32)> {
    if effective_uid() != 0 {
        return None;
    }
    let passwd = std::fs::read_to_string("/etc/passwd").expect("reading /etc/passwd");
    let find = |name: &str| {
        passwd.lines().find_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            (fields.len() > 3 && fields[0] == name)
                .then(|| Some((fields[2].parse().ok()?, fields[3].parse().ok()?)))
                .flatten()
        })
    };
    Some(find("postgres").or_else(|| find("nobody")).unwrap_or_else(|| {
        panic!("PostgreSQL refuses to run as root, and neither a `postgres` nor a `nobody` user exists")
    }))
}

/// This process's effective user id, from /proc (the standard library has no call for it).
fn effective_uid() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").expect("reading /proc/self/status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1))
        .and_then(|euid| euid.parse().ok())
        .expect("an effective uid in /proc/self/status")
}

fn as_user(mut command: Command, user: Option<(u32, u32)>) -> Command {
    use std::os::unix::process::CommandExt;
    if let Some((uid, gid)) = user {
        command.uid(uid).gid(gid);
    }
    command
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("finding a free port")
        .port()
}
