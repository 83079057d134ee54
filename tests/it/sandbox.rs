//! End-to-end tests of the `airlock` sandbox commands: the escape suite and the positive runs.
//!
//! Every test runs the real binary. Escape tests assert both that the attempt failed inside
//! and that the caller is unharmed outside. A host without a kernel feature the sandbox needs
//! fails these tests with a message naming the feature (see `require_full_sandbox`); they
//! never skip.

use serde_json::Value;
use std::net::{TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use tempfile::TempDir;

const PYTHON: &str = "/usr/bin/python3";

fn airlock() -> Command {
    Command::new(env!("CARGO_BIN_EXE_airlock"))
}

/// Fail (never skip) when the host lacks a layer, naming the missing kernel features. The one
/// exception: run by a non-root user (as `the_escape_suite_holds_for_an_unprivileged_caller`
/// runs this suite), the optional cgroup layers are missing because the cgroup hierarchy is
/// root's, which is said, not hidden.
fn require_full_sandbox() {
    static DOCTOR: OnceLock<Result<(), String>> = OnceLock::new();
    let verdict = DOCTOR.get_or_init(|| {
        let out = airlock().args(["doctor", "--json"]).output().unwrap();
        let report: Value = serde_json::from_slice(&out.stdout)
            .map_err(|e| format!("airlock doctor --json printed no report ({e})"))?;
        let optional = unavailable_optional_layers();
        if !optional.is_empty() {
            eprintln!(
                "note: as uid {}, the optional layers {optional:?} are unavailable (the cgroup \
                 hierarchy belongs to root)",
                host_ids_of("self").0[1]
            );
        }
        let missing: Vec<String> = report["layers"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|l| l["available"] != Value::Bool(true))
            .filter(|l| !optional.iter().any(|o| l["layer"] == o.as_str()))
            .map(|l| format!("{} ({})", l["feature"], l["detail"]))
            .collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "this host lacks kernel features the sandbox needs: {}",
                missing.join("; ")
            ))
        }
    });
    if let Err(msg) = verdict {
        panic!("{msg}");
    }
}

/// The result of one `airlock sandbox run --json`.
struct Run {
    out: Output,
    /// The child's stdout (the summary line removed).
    stdout: String,
    stderr: String,
    summary: Value,
}

impl Run {
    fn code(&self) -> Option<i32> {
        self.out.status.code()
    }
    fn timed_out(&self) -> bool {
        self.summary["timed_out"] == Value::Bool(true)
    }
    fn exit_code(&self) -> Option<i64> {
        self.summary["exit_code"].as_i64()
    }
}

fn sandbox_with(envs: &[(&str, &str)], args: &[&str], cmd: &[&str]) -> Run {
    require_full_sandbox();
    let mut c = airlock();
    c.args(["sandbox", "run", "--json"])
        .args(args)
        .arg("--")
        .args(cmd);
    for (k, v) in envs {
        c.env(k, v);
    }
    let out = c.stdin(Stdio::null()).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let trimmed = text.trim_end_matches('\n');
    let (body, last) = match trimmed.rfind('\n') {
        Some(i) => (&trimmed[..i + 1], &trimmed[i + 1..]),
        None => ("", trimmed),
    };
    let summary: Value = serde_json::from_str(last).unwrap_or_else(|e| {
        panic!(
            "no JSON summary ({e}); exit {:?}\nstdout:\n{text}\nstderr:\n{stderr}",
            out.status
        )
    });
    Run {
        out,
        stdout: body.to_string(),
        stderr,
        summary,
    }
}

fn sandbox(args: &[&str], cmd: &[&str]) -> Run {
    sandbox_with(&[], args, cmd)
}

fn sh(args: &[&str], script: &str) -> Run {
    sandbox(args, &["/bin/sh", "-c", script])
}

fn py(args: &[&str], code: &str) -> Run {
    sandbox(args, &[PYTHON, "-c", code])
}

fn s(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

fn dir() -> TempDir {
    tempfile::tempdir().unwrap()
}

/// The doctor's report, taken once.
fn doctor_report() -> &'static Value {
    static REPORT: OnceLock<Value> = OnceLock::new();
    REPORT.get_or_init(|| {
        let out = airlock().args(["doctor", "--json"]).output().unwrap();
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "airlock doctor --json printed no report ({e}): {}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
    })
}

/// The host uid and gid a run's command has, as `airlock doctor` reports them.
fn sandbox_host_ids() -> (u32, u32) {
    let identity = &doctor_report()["host"]["identity"];
    let id = |k: &str| u32::try_from(identity[k].as_u64().unwrap()).unwrap();
    (id("uid"), id("gid"))
}

/// The uid and gid fields (real, effective, saved, filesystem) of a process, as the host's
/// /proc shows them.
fn host_ids_of(pid: &str) -> (Vec<u32>, Vec<u32>) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| -> Vec<u32> {
        let line = status.lines().find(|l| l.starts_with(name)).unwrap();
        line[name.len()..]
            .split_whitespace()
            .map(|n| n.parse().unwrap())
            .collect()
    };
    (field("Uid:"), field("Gid:"))
}

fn running_as_root() -> bool {
    host_ids_of("self").0[1] == 0
}

/// The optional layers a non-root caller cannot have (the cgroup ones: the v1 hierarchy is
/// root's), as the doctor reports them; empty for root, which must have every layer.
fn unavailable_optional_layers() -> Vec<String> {
    if running_as_root() {
        return Vec::new();
    }
    doctor_report()["layers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["available"] == Value::Bool(false) && l["required"] == Value::Bool(false))
        .map(|l| l["layer"].as_str().unwrap().to_string())
        .collect()
}

/// Hand `path` over to the sandbox's host identity, as a caller does with a directory it
/// grants read-write (for a root caller the command writes as its own uid, not root's).
fn hand_over(path: &Path) {
    if running_as_root() {
        let (uid, gid) = sandbox_host_ids();
        std::os::unix::fs::lchown(path, Some(uid), Some(gid)).unwrap();
    }
}

/// A directory to grant read-write: handed over to the sandbox's host identity.
fn rw_dir() -> TempDir {
    let d = dir();
    hand_over(d.path());
    d
}

// ---------------------------------------------------------------- network

#[test]
fn tcp_connect_to_a_host_loopback_listener_fails() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let r = py(
        &[],
        &format!(
            "import socket\ntry:\n s=socket.create_connection(('127.0.0.1',{port}),timeout=3)\n print('CONNECTED')\nexcept OSError as e:\n print('BLOCKED', e)"
        ),
    );
    assert!(r.stdout.contains("BLOCKED"), "{}{}", r.stdout, r.stderr);
    assert!(!r.stdout.contains("CONNECTED"));
    assert!(
        listener.accept().is_err(),
        "the host listener saw a connection"
    );
}

#[test]
fn udp_send_to_the_host_fails() {
    let host = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = host.local_addr().unwrap().port();
    let r = py(
        &[],
        &format!(
            "import socket\ntry:\n s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n s.sendto(b'leak',('127.0.0.1',{port}))\n print('SENT')\nexcept OSError as e:\n print('BLOCKED', e)"
        ),
    );
    assert!(r.stdout.contains("BLOCKED"), "{}{}", r.stdout, r.stderr);
    host.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 16];
    assert!(
        host.recv_from(&mut buf).is_err(),
        "the host received a datagram"
    );
}

#[test]
fn dns_lookup_fails() {
    let r = py(
        &[],
        "import socket\ntry:\n print('RESOLVED', socket.getaddrinfo('example.com', 80))\nexcept OSError as e:\n print('BLOCKED', e)",
    );
    assert!(r.stdout.contains("BLOCKED"), "{}{}", r.stdout, r.stderr);
}

#[test]
fn bash_dev_tcp_fails() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let r = sandbox(
        &[],
        &[
            "/bin/bash",
            "-c",
            &format!(
                "if echo leak > /dev/tcp/127.0.0.1/{port}; then echo CONNECTED; else echo BLOCKED; fi"
            ),
        ],
    );
    assert!(r.stdout.contains("BLOCKED"), "{}{}", r.stdout, r.stderr);
    assert!(
        listener.accept().is_err(),
        "the host listener saw a connection"
    );
}

#[test]
fn abstract_unix_socket_to_a_host_listener_fails() {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::{SocketAddr, UnixListener};
    let name = format!("airlock-escape-{}", std::process::id());
    let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let listener = UnixListener::bind_addr(&addr).unwrap();
    listener.set_nonblocking(true).unwrap();
    let r = py(
        &[],
        &format!(
            "import socket\ns=socket.socket(socket.AF_UNIX)\ntry:\n s.connect('\\0{name}')\n print('CONNECTED')\nexcept OSError as e:\n print('BLOCKED', e)"
        ),
    );
    assert!(r.stdout.contains("BLOCKED"), "{}{}", r.stdout, r.stderr);
    assert!(
        listener.accept().is_err(),
        "the host listener saw a connection"
    );
}

#[test]
fn named_unix_socket_outside_the_roots_is_unreachable() {
    use std::os::unix::net::UnixListener;
    let outside = dir();
    let path = outside.path().join("host.sock");
    let listener = UnixListener::bind(&path).unwrap();
    listener.set_nonblocking(true).unwrap();
    let r = py(
        &[],
        &format!(
            "import socket\ns=socket.socket(socket.AF_UNIX)\ntry:\n s.connect({:?})\n print('CONNECTED')\nexcept OSError as e:\n print('BLOCKED', e)",
            s(&path)
        ),
    );
    assert!(r.stdout.contains("BLOCKED"), "{}{}", r.stdout, r.stderr);
    assert!(
        listener.accept().is_err(),
        "the host listener saw a connection"
    );
}

#[test]
fn only_loopback_exists_and_it_is_up() {
    let r = sh(&[], "cat /proc/net/dev; echo ---; cat /proc/net/if_inet6");
    let (dev, inet6) = r.stdout.split_once("---\n").unwrap();
    let ifaces: Vec<&str> = dev
        .lines()
        .skip(2)
        .filter_map(|l| l.split(':').next())
        .map(str::trim)
        .collect();
    assert_eq!(ifaces, vec!["lo"], "{}", r.stdout);
    // The kernel only gives loopback its ::1 address once the interface is up.
    assert!(
        inet6
            .lines()
            .any(|l| l.starts_with("00000000000000000000000000000001") && l.ends_with("lo")),
        "loopback is not up: {inet6}"
    );
}

/// The modes that keep the command in a network namespace of its own, with what each needs on
/// the command line.
const CONFINED_MODES: [(&str, &[&str]); 3] = [
    ("none", &["--network", "none"]),
    ("loopback", &["--network", "loopback"]),
    ("proxy", &["--network", "proxy", "--allow", "127.0.0.1:1"]),
];

#[test]
fn the_network_escapes_fail_in_every_confined_mode() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let udp_port = udp.local_addr().unwrap().port();
    udp.set_nonblocking(true).unwrap();
    for (mode, args) in CONFINED_MODES {
        let r = py(
            args,
            &format!(
                "import socket
for what, f in [
    ('tcp', lambda: socket.create_connection(('127.0.0.1', {port}), timeout=3)),
    ('udp', lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', {udp_port}))),
    ('dns', lambda: socket.getaddrinfo('example.com', 80)),
]:
    try:
        f(); print('REACHED', what)
    except OSError as e:
        print('BLOCKED', what, e)
"
            ),
        );
        // UDP to a closed port of the sandbox's own loopback "succeeds" locally; what matters
        // is that the host's socket never sees it.
        assert!(
            !r.stdout.contains("REACHED tcp"),
            "{mode}: {}{}",
            r.stdout,
            r.stderr
        );
        assert!(
            !r.stdout.contains("REACHED dns"),
            "{mode}: {}{}",
            r.stdout,
            r.stderr
        );
        assert!(
            listener.accept().is_err(),
            "{mode}: the host listener saw a connection"
        );
        let mut buf = [0u8; 8];
        assert!(
            udp.recv_from(&mut buf).is_err(),
            "{mode}: the host got a datagram"
        );
        assert_eq!(r.summary["network"]["mode"], mode, "{}", r.summary);
        let applied = layer_names(&r.summary, "layers_applied");
        assert!(
            applied.iter().any(|l| l == "net_namespace"),
            "{mode}: {}",
            r.summary
        );
        // Only `none` keeps landlock's TCP rules: the others allow inet sockets on purpose.
        assert_eq!(
            applied.iter().any(|l| l == "landlock_net"),
            mode == "none",
            "{mode}: {}",
            r.summary
        );
        assert!(
            !layer_names(&r.summary, "layers_missing")
                .iter()
                .any(|l| l == "landlock_net"),
            "{mode}: {}",
            r.summary
        );
    }
}

#[test]
fn loopback_serves_a_suites_own_servers_by_address_and_by_name() {
    let script = "import socket, threading
def serve(family, addr):
    s = socket.socket(family); s.bind((addr, 0)); s.listen(1)
    port = s.getsockname()[1]
    def one():
        c, _ = s.accept(); c.sendall(c.recv(16).upper()); c.close()
    threading.Thread(target=one).start()
    return port
for family, addr, name in [(socket.AF_INET, '127.0.0.1', 'localhost'), (socket.AF_INET6, '::1', '::1')]:
    port = serve(family, addr)
    c = socket.create_connection((name, port), timeout=5); c.sendall(b'ping')
    print(addr, c.recv(16).decode())
";
    let r = py(&["--network", "loopback"], script);
    assert_eq!(r.exit_code(), Some(0), "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("127.0.0.1 PING"),
        "{}{}",
        r.stdout,
        r.stderr
    );
    assert!(r.stdout.contains("::1 PING"), "{}{}", r.stdout, r.stderr);
    // `localhost` is named by the sandbox's own /etc/hosts (there is no resolver).
    let r = sh(&["--network", "loopback"], "cat /etc/hosts");
    assert!(r.stdout.starts_with("127.0.0.1\tlocalhost"), "{}", r.stdout);
    // The same script without a network: no inet socket at all.
    let r = py(&["--network", "none"], script);
    assert_ne!(r.exit_code(), Some(0), "{}", r.stdout);
    assert!(r.stderr.contains("Operation not permitted"), "{}", r.stderr);
}

/// An HTTP server on the host's loopback answering every request with its request line.
fn host_http_server() -> (u16, std::sync::mpsc::Receiver<String>) {
    use std::io::{BufRead, BufReader, Write};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for conn in listener.incoming().take(4) {
            let Ok(mut conn) = conn else { continue };
            let mut line = String::new();
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let _ = reader.read_line(&mut line);
            let _ = tx.send(line.trim().to_string());
            let body = format!("served {}", line.trim());
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (port, rx)
}

#[test]
fn the_proxy_admits_what_is_listed_and_reports_what_it_blocked() {
    let (port, requests) = host_http_server();
    // The client goes through the proxy the sandbox names in HTTP_PROXY (loopback is in
    // NO_PROXY, which the script drops, since the listed host is on the host's loopback).
    let script = format!(
        "import os, socket, urllib.request, urllib.error
proxy = os.environ['HTTP_PROXY']
print('PROXY', proxy, os.environ['NO_PROXY'])
os.environ.pop('NO_PROXY'); os.environ.pop('no_proxy')
opener = urllib.request.build_opener(urllib.request.ProxyHandler({{'http': proxy}}))
print('LISTED', opener.open('http://127.0.0.1:{port}/listed', timeout=10).read().decode())
for name, url in [('UNLISTED', 'http://unlisted.example/x'), ('METADATA', 'http://169.254.169.254/latest/meta-data/')]:
    try:
        opener.open(url, timeout=10)
    except urllib.error.HTTPError as e:
        print(name, e.code)
try:
    socket.create_connection(('127.0.0.1', {port}), timeout=3); print('DIRECT reached')
except OSError as e:
    print('DIRECT refused', e)
"
    );
    let r = py(&["--allow", &format!("127.0.0.1:{port}")], &script);
    assert_eq!(r.exit_code(), Some(0), "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("PROXY http://127.0.0.1:"), "{}", r.stdout);
    assert!(
        r.stdout.contains("LISTED served GET /listed HTTP/1.1"),
        "{}{}",
        r.stdout,
        r.stderr
    );
    assert!(
        r.stdout.contains("UNLISTED 403"),
        "{}{}",
        r.stdout,
        r.stderr
    );
    assert!(
        r.stdout.contains("METADATA 403"),
        "{}{}",
        r.stdout,
        r.stderr
    );
    assert!(
        r.stdout.contains("DIRECT refused"),
        "{}{}",
        r.stdout,
        r.stderr
    );
    assert_eq!(
        requests.try_iter().collect::<Vec<_>>(),
        vec!["GET /listed HTTP/1.1"]
    );
    // Each refused host once, on stderr and in the summary.
    assert!(
        r.stderr.contains("blocked unlisted.example:80\n"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("blocked 169.254.169.254:80\n"),
        "{}",
        r.stderr
    );
    assert_eq!(r.summary["network"]["mode"], "proxy", "{}", r.summary);
    let blocked = r.summary["network"]["blocked"].as_array().unwrap();
    let hosts: Vec<&str> = blocked
        .iter()
        .map(|b| b["host"].as_str().unwrap())
        .collect();
    assert_eq!(
        hosts,
        vec!["unlisted.example", "169.254.169.254"],
        "{}",
        r.summary
    );
    assert!(
        blocked.iter().all(|b| b["reason"] == "not_allowed"),
        "{}",
        r.summary
    );
    // Behind the proxy the certificates are readable (TLS through CONNECT checks them), the
    // resolver's files are not: the proxy resolves names.
    let r = sh(
        &["--allow", "127.0.0.1:1"],
        "test -d /etc/ssl/certs && echo CERTS; cat /etc/resolv.conf 2>/dev/null && echo RESOLV; true",
    );
    if std::path::Path::new("/etc/ssl/certs").is_dir() {
        assert!(r.stdout.contains("CERTS"), "{}{}", r.stdout, r.stderr);
    }
    assert!(!r.stdout.contains("RESOLV"), "{}", r.stdout);
}

#[test]
fn bad_network_flags_are_named_before_anything_runs() {
    for (args, says) in [
        (vec!["--allow", "*.com"], "public suffix"),
        (vec!["--allow", "host:99999"], "out of range"),
        (vec!["--allow", "https://x.example/"], "URL"),
        (
            vec!["--network", "host", "--allow", "x.example"],
            "--network proxy",
        ),
        (vec!["--network", "lan"], "not a network mode"),
        (vec!["--allow", "@perl"], "not a preset"),
    ] {
        let out = airlock()
            .args(["sandbox", "run"])
            .args(&args)
            .args(["--", "/bin/true"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

fn layer_names(summary: &Value, key: &str) -> Vec<String> {
    summary[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap().to_string())
        .collect()
}

/// A python script connecting to a TCP port of the host's loopback.
fn connect_to(port: u16) -> String {
    format!(
        "import socket\ntry:\n s=socket.create_connection(('127.0.0.1',{port}),timeout=3)\n s.sendall(b'hello')\n s.close()\n print('CONNECTED')\nexcept OSError as e:\n print('BLOCKED', e)"
    )
}

#[test]
fn a_host_listener_is_reachable_only_with_the_network_opt_in() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();

    // Default: the sandbox's own loopback, where nothing listens on that port.
    let r = py(&[], &connect_to(port));
    assert!(r.stdout.contains("BLOCKED"), "{}{}", r.stdout, r.stderr);
    assert!(
        listener.accept().is_err(),
        "the host listener saw a connection"
    );
    assert_eq!(r.summary["network"]["mode"], "none", "{}", r.summary);
    let applied = layer_names(&r.summary, "layers_applied");
    for layer in ["net_namespace", "landlock_net"] {
        assert!(applied.iter().any(|l| l == layer), "{}", r.summary);
    }

    // Opted in: the host's network.
    let r = py(&["--network"], &connect_to(port));
    assert_eq!(r.exit_code(), Some(0), "{}", r.stderr);
    assert!(r.stdout.contains("CONNECTED"), "{}{}", r.stdout, r.stderr);
    listener.set_nonblocking(false).unwrap();
    let (mut conn, _) = listener.accept().unwrap();
    let mut got = Vec::new();
    std::io::Read::read_to_end(&mut conn, &mut got).unwrap();
    assert_eq!(got, b"hello");
    assert_eq!(r.summary["network"]["mode"], "host", "{}", r.summary);
    // The layers left out on purpose are neither applied nor missing; the rest all are.
    let applied = layer_names(&r.summary, "layers_applied");
    for layer in ["net_namespace", "landlock_net"] {
        assert!(!applied.iter().any(|l| l == layer), "{}", r.summary);
    }
    for layer in [
        "user_namespace",
        "mount_namespace",
        "pid_namespace",
        "ipc_namespace",
        "uts_namespace",
        "landlock_fs",
        "landlock_scope",
        "seccomp",
        "no_new_privs",
        "drop_capabilities",
        "unprivileged_uid",
        "rlimits",
    ] {
        assert!(applied.iter().any(|l| l == layer), "{layer}: {}", r.summary);
    }
    assert_eq!(
        layer_names(&r.summary, "layers_missing"),
        unavailable_optional_layers(),
        "{}",
        r.summary
    );
}

#[test]
fn bash_dev_tcp_reaches_a_host_listener_with_the_network_opt_in() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let r = sandbox(
        &["--network"],
        &[
            "/bin/bash",
            "-c",
            &format!(
                "if echo hello > /dev/tcp/127.0.0.1/{port}; then echo CONNECTED; else echo BLOCKED; fi"
            ),
        ],
    );
    assert!(r.stdout.contains("CONNECTED"), "{}{}", r.stdout, r.stderr);
    let (mut conn, _) = listener.accept().unwrap();
    let mut got = String::new();
    std::io::Read::read_to_string(&mut conn, &mut got).unwrap();
    assert_eq!(got, "hello\n");
}

/// The loopback and proxy modes keep every other layer: the same writes and reads outside the
/// grants fail, and seccomp still refuses netlink and packet sockets and mount.
#[test]
fn loopback_and_proxy_runs_are_still_confined_by_landlock_and_seccomp() {
    for args in [
        &["--network", "loopback"][..],
        &["--allow", "127.0.0.1:1"][..],
    ] {
        let rw = rw_dir();
        let outside = dir();
        std::fs::write(outside.path().join("secret"), "s3cret").unwrap();
        let script = format!(
            "echo x > {out}/new; cat {out}/secret; echo x > /etc/airlock-escape; \
             ls /etc/ssl/private; echo ok > {rw}/ok",
            rw = s(rw.path()),
            out = s(outside.path())
        );
        let mut with_rw = args.to_vec();
        let rw_path = s(rw.path());
        with_rw.extend(["--rw", rw_path.as_str()]);
        let r = sh(&with_rw, &script);
        assert!(!outside.path().join("new").exists(), "{args:?}");
        assert!(!r.stdout.contains("s3cret"), "{args:?}: {}", r.stdout);
        assert!(!Path::new("/etc/airlock-escape").exists(), "{args:?}");
        assert_eq!(
            std::fs::read_to_string(rw.path().join("ok")).unwrap(),
            "ok\n",
            "{args:?}: {}",
            r.stderr
        );
        let r = py(
            args,
            "import socket, ctypes, os\n\
             for fam, kind in [(socket.AF_NETLINK, socket.SOCK_RAW), (socket.AF_PACKET, socket.SOCK_RAW), (socket.AF_INET, socket.SOCK_RAW)]:\n \
             try:\n  socket.socket(fam, kind)\n  print('OPENED')\n except OSError as e:\n  print('REFUSED', e.errno)",
        );
        assert_eq!(
            r.stdout.matches("REFUSED").count(),
            3,
            "{args:?}: {}{}",
            r.stdout,
            r.stderr
        );
        let r = sh(args, "mount -t tmpfs none /tmp 2>&1 && echo MOUNTED; true");
        assert!(!r.stdout.contains("MOUNTED"), "{args:?}: {}", r.stdout);
    }
}

#[test]
fn a_network_enabled_run_is_still_confined_by_landlock_and_seccomp() {
    let rw = rw_dir();
    let outside = dir();
    std::fs::write(outside.path().join("secret"), "s3cret").unwrap();
    let script = format!(
        "echo x > {out}/new; cat {out}/secret; echo x > /etc/hosts; echo x > /etc/airlock-escape; \
         ls /etc/ssl/private; echo ok > {rw}/ok",
        rw = s(rw.path()),
        out = s(outside.path())
    );
    let r = sh(&["--network", "--rw", &s(rw.path())], &script);
    assert!(!outside.path().join("new").exists());
    assert!(!r.stdout.contains("s3cret"), "{}", r.stdout);
    assert!(!Path::new("/etc/airlock-escape").exists());
    assert_ne!(std::fs::read_to_string("/etc/hosts").unwrap(), "x\n");
    assert_eq!(
        std::fs::read_to_string(rw.path().join("ok")).unwrap(),
        "ok\n",
        "{}",
        r.stderr
    );
    // The seccomp filter still stands: no netlink or raw sockets, no mount.
    let r = py(
        &["--network"],
        "import socket\nfor fam, kind in [(socket.AF_NETLINK, socket.SOCK_RAW), (socket.AF_PACKET, socket.SOCK_RAW)]:\n try:\n  socket.socket(fam, kind)\n  print('OPENED')\n except OSError as e:\n  print('REFUSED', e.errno)",
    );
    assert_eq!(
        r.stdout.matches("REFUSED 1").count(),
        2,
        "{}{}",
        r.stdout,
        r.stderr
    );
    let r = sh(&["--network"], "unshare -n true && echo UNSHARED; true");
    assert!(!r.stdout.contains("UNSHARED"), "{}", r.stdout);
}

#[test]
fn with_the_network_opt_in_the_resolver_files_are_readable_and_nothing_else_of_etc() {
    let script = "cat /etc/hosts; echo ---; cat /etc/nsswitch.conf; echo ---; id -un; \
                  ls /etc/ssl/private 2>/dev/null && echo PRIVATE; cat /etc/shadow 2>/dev/null && echo SHADOW; true";
    let r = sh(&["--network"], script);
    assert_eq!(r.exit_code(), Some(0), "{}", r.stderr);
    let mut parts = r.stdout.split("---\n");
    assert_eq!(
        parts.next().unwrap(),
        std::fs::read_to_string("/etc/hosts").unwrap()
    );
    assert_eq!(
        parts.next().unwrap(),
        std::fs::read_to_string("/etc/nsswitch.conf").unwrap()
    );
    let rest = parts.next().unwrap();
    // The sandbox's own /etc/passwd is still there beside the bound files.
    assert!(rest.starts_with("airlock\n"), "{rest}");
    assert!(
        !rest.contains("PRIVATE") && !rest.contains("SHADOW"),
        "{rest}"
    );
    // Without the opt-in, none of them.
    let r = sh(&[], "cat /etc/hosts 2>/dev/null && echo HOSTS; true");
    assert!(!r.stdout.contains("HOSTS"), "{}", r.stdout);
    // Resolving through /etc/hosts works.
    let r = py(
        &["--network"],
        "import socket\nprint(socket.getaddrinfo('localhost', 80, socket.AF_INET)[0][4][0])",
    );
    assert_eq!(r.stdout, "127.0.0.1\n", "{}", r.stderr);
}

// ---------------------------------------------------------------- grants at another path

#[test]
fn a_grant_at_another_path_inside_an_overlay_is_readable_and_read_only() {
    let lower = dir();
    let cache = dir();
    std::fs::write(lower.path().join("main.js"), "main\n").unwrap();
    std::fs::create_dir_all(cache.path().join("node_modules/left-pad")).unwrap();
    std::fs::write(cache.path().join("node_modules/left-pad/index.js"), "pad\n").unwrap();
    std::fs::write(cache.path().join("Cargo.lock"), "lock\n").unwrap();
    let wt = s(lower.path());
    let overlay = format!("{wt}:{wt}");
    let modules = format!(
        "{}:{wt}/node_modules",
        s(&cache.path().join("node_modules"))
    );
    let lock = format!("{}:{wt}/Cargo.lock", s(&cache.path().join("Cargo.lock")));
    let script = "cat main.js node_modules/left-pad/index.js Cargo.lock; \
                  (echo x > node_modules/left-pad/index.js) 2>/dev/null && echo WROTE1; \
                  (echo x > node_modules/new.js) 2>/dev/null && echo WROTE2; \
                  (echo x > Cargo.lock) 2>/dev/null && echo WROTE3; \
                  touch node_modules/x 2>&1; \
                  echo changed > main.js && cat main.js";
    let r = sh(
        &["--overlay", &overlay, "--ro-at", &modules, "--ro-at", &lock],
        script,
    );
    assert_eq!(r.exit_code(), Some(0), "{}", r.stderr);
    assert!(
        r.stdout.starts_with("main\npad\nlock\n"),
        "{}{}",
        r.stdout,
        r.stderr
    );
    assert!(!r.stdout.contains("WROTE"), "{}", r.stdout);
    assert!(
        r.stdout.contains("Read-only file system") || r.stdout.contains("Permission denied"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.ends_with("changed\n"), "{}", r.stdout);
    // Nothing reached the host: not the lower tree, not the cache.
    assert!(!lower.path().join("node_modules").exists());
    assert!(!lower.path().join("Cargo.lock").exists());
    assert_eq!(
        std::fs::read_to_string(lower.path().join("main.js")).unwrap(),
        "main\n"
    );
    assert_eq!(
        std::fs::read_to_string(cache.path().join("node_modules/left-pad/index.js")).unwrap(),
        "pad\n"
    );
    assert!(!cache.path().join("node_modules/new.js").exists());
    assert!(!cache.path().join("node_modules/x").exists());
}

#[test]
fn a_read_write_grant_at_another_path_writes_into_its_host_source() {
    let cache = rw_dir();
    let r = sh(
        &["--rw-at", &format!("{}:/work/cache", s(cache.path()))],
        "echo written > /work/cache/out",
    );
    assert_eq!(r.exit_code(), Some(0), "{}", r.stderr);
    assert_eq!(
        std::fs::read_to_string(cache.path().join("out")).unwrap(),
        "written\n"
    );
}

#[test]
fn a_grant_at_another_path_is_never_mounted_through_a_symlink_in_the_tree() {
    let lower = dir();
    let cache = dir();
    std::os::unix::fs::symlink("/etc", lower.path().join("node_modules")).unwrap();
    let wt = s(lower.path());
    let r = sandbox_raw(
        &[
            "--overlay",
            &format!("{wt}:{wt}"),
            "--ro-at",
            &format!("{}:{wt}/node_modules", s(cache.path())),
        ],
        &["/bin/true"],
    );
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(125), "{err}");
    assert!(err.contains("symlink"), "{err}");
}

#[test]
fn a_grant_at_another_path_inside_a_read_only_grant_needs_an_existing_mount_point() {
    let granted = dir();
    let cache = dir();
    let r = sandbox_raw(
        &[
            "--ro",
            &s(granted.path()),
            "--ro-at",
            &format!("{}:{}/node_modules", s(cache.path()), s(granted.path())),
        ],
        &["/bin/true"],
    );
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(125), "{err}");
    assert!(err.contains("create"), "{err}");
    assert!(!granted.path().join("node_modules").exists());
    // Where it exists, it is used.
    std::fs::create_dir(granted.path().join("node_modules")).unwrap();
    std::fs::write(cache.path().join("f"), "from the cache\n").unwrap();
    let r = sandbox(
        &[
            "--ro",
            &s(granted.path()),
            "--ro-at",
            &format!("{}:{}/node_modules", s(cache.path()), s(granted.path())),
        ],
        &["/bin/cat", &format!("{}/node_modules/f", s(granted.path()))],
    );
    assert_eq!(r.stdout, "from the cache\n", "{}", r.stderr);
}

// ---------------------------------------------------------------- filesystem

#[test]
fn write_outside_the_rw_roots_fails() {
    let ro = dir();
    let rw = rw_dir();
    let outside = dir();
    std::fs::write(ro.path().join("keep"), "original").unwrap();
    let script = format!(
        "echo x > {ro}/keep; echo x > {ro}/new; echo x > {out}/new; echo x > /etc/airlock-escape; echo x > /newfile; echo ok > {rw}/ok",
        ro = s(ro.path()),
        rw = s(rw.path()),
        out = s(outside.path())
    );
    let r = sh(&["--ro", &s(ro.path()), "--rw", &s(rw.path())], &script);
    assert_eq!(
        std::fs::read_to_string(ro.path().join("keep")).unwrap(),
        "original"
    );
    assert!(!ro.path().join("new").exists());
    assert!(!outside.path().join("new").exists());
    assert!(!Path::new("/etc/airlock-escape").exists());
    assert!(!Path::new("/newfile").exists());
    assert_eq!(
        std::fs::read_to_string(rw.path().join("ok")).unwrap(),
        "ok\n",
        "{}",
        r.stderr
    );
}

#[test]
fn a_write_into_lower_through_the_overlay_never_reaches_lower() {
    let lower = dir();
    std::fs::write(lower.path().join("f"), "lower\n").unwrap();
    std::fs::create_dir(lower.path().join("sub")).unwrap();
    let overlay = format!("{}:/work/tree", s(lower.path()));
    let script = "cat f; echo changed > f; echo new > g; rm -r sub; cat f; ls";
    let r = sh(&["--overlay", &overlay], script);
    assert_eq!(r.exit_code(), Some(0), "{}", r.stderr);
    assert!(r.stdout.starts_with("lower\nchanged\n"), "{}", r.stdout);
    assert!(r.stdout.contains('g'));
    assert_eq!(
        std::fs::read_to_string(lower.path().join("f")).unwrap(),
        "lower\n"
    );
    assert!(!lower.path().join("g").exists());
    assert!(lower.path().join("sub").is_dir());
    // The lower tree itself is not granted: not even visible at its own path.
    let r = sh(
        &["--overlay", &overlay],
        &format!("cat {}/f || echo HIDDEN", s(lower.path())),
    );
    assert!(r.stdout.contains("HIDDEN"), "{}", r.stdout);
}

#[test]
fn overlay_keep_puts_the_writes_in_the_scratch_directory() {
    let lower = dir();
    let scratch = dir();
    std::fs::write(lower.path().join("f"), "lower\n").unwrap();
    let overlay = format!("{}:/work/tree", s(lower.path()));
    let r = sh(
        &["--overlay", &overlay, "--overlay-keep", &s(scratch.path())],
        "echo changed > f",
    );
    assert_eq!(r.exit_code(), Some(0), "{}", r.stderr);
    assert_eq!(
        std::fs::read_to_string(scratch.path().join("upper/f")).unwrap(),
        "changed\n"
    );
    assert_eq!(
        std::fs::read_to_string(lower.path().join("f")).unwrap(),
        "lower\n"
    );
}

#[test]
fn a_symlink_planted_in_a_rw_root_cannot_write_outside() {
    let rw = rw_dir();
    let outside = dir();
    let target = outside.path().join("target");
    std::fs::write(&target, "untouched").unwrap();
    std::os::unix::fs::symlink(&target, rw.path().join("link")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", rw.path().join("passwd")).unwrap();
    let r = sh(
        &["--rw", &s(rw.path())],
        "echo pwned > link; echo pwned >> passwd; ln -s /etc/hostname own; echo pwned > own; cat link passwd own 2>&1; echo END",
    );
    assert!(r.stdout.contains("END"));
    // Inside, `/etc/passwd` is the sandbox's own three-line file; no line of the host's that
    // the sandbox's lacks may show (the host's always has more: daemon, bin, sys, ...).
    let host = std::fs::read_to_string("/etc/passwd").unwrap();
    let sandbox_own = sh(&[], "cat /etc/passwd").stdout;
    let host_only: Vec<&str> = host
        .lines()
        .filter(|l| !l.is_empty() && !sandbox_own.lines().any(|o| o == *l))
        .collect();
    assert!(!host_only.is_empty(), "host passwd: {host}");
    for line in host_only {
        assert!(
            !r.stdout.contains(line),
            "host /etc/passwd leaked ({line}): {}",
            r.stdout
        );
    }
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "untouched");
    assert!(
        !std::fs::read_to_string("/etc/passwd")
            .unwrap()
            .contains("pwned")
    );
}

#[test]
fn a_hardlink_to_an_outside_file_cannot_be_made() {
    let rw = rw_dir();
    let outside = dir();
    let secret = outside.path().join("secret");
    std::fs::write(&secret, "outside").unwrap();
    let r = sh(
        &["--rw", &s(rw.path())],
        &format!(
            "ln {sec} hl 2>&1 || echo NOLINK; ln /usr/bin/id idlink 2>&1 || echo NOLINK2; echo pwned > hl; ls",
            sec = s(&secret)
        ),
    );
    assert!(r.stdout.contains("NOLINK"), "{}", r.stdout);
    assert!(
        r.stdout.contains("NOLINK2"),
        "cross-root hardlink allowed: {}",
        r.stdout
    );
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "outside");
    assert!(!rw.path().join("idlink").exists());
}

#[test]
fn a_secret_file_outside_the_roots_cannot_be_read() {
    let home = dir();
    let ssh = home.path().join(".ssh");
    std::fs::create_dir(&ssh).unwrap();
    std::fs::write(
        ssh.join("id_rsa"),
        "-----BEGIN FAKE KEY----- airlock-secret",
    )
    .unwrap();
    let rw = rw_dir();
    let r = sh(
        &["--rw", &s(rw.path())],
        &format!(
            "cat {}/id_rsa 2>&1; cat /root/.ssh/id_rsa 2>&1; ls {} 2>&1; echo END",
            s(&ssh),
            s(home.path())
        ),
    );
    assert!(r.stdout.contains("END"));
    assert!(!r.stdout.contains("airlock-secret"), "{}", r.stdout);
    assert!(!r.stdout.contains("BEGIN"), "{}", r.stdout);
}

#[test]
fn host_files_outside_the_roots_are_not_visible() {
    let r = sh(
        &[],
        "ls /etc /home /sys /root 2>&1; cat /etc/hostname /etc/shadow 2>&1; echo END",
    );
    assert!(r.stdout.contains("END"));
    let host_name = std::fs::read_to_string("/etc/hostname").unwrap_or_default();
    if !host_name.trim().is_empty() {
        assert!(
            !r.stdout.contains(&format!("\n{}\n", host_name.trim())),
            "{}",
            r.stdout
        );
    }
    assert!(!r.stdout.contains("root:"), "{}", r.stdout);
}

#[test]
fn filling_the_disk_stops_at_the_file_size_limit() {
    let rw = rw_dir();
    let r = sh(
        &["--rw", &s(rw.path()), "--max-file-size", "8"],
        "head -c 67108864 /dev/zero > big; echo status=$?",
    );
    let size = std::fs::metadata(rw.path().join("big")).unwrap().len();
    assert!(size <= 8 * 1024 * 1024, "file grew to {size} bytes");
    assert!(!r.stdout.contains("status=0"), "{}", r.stdout);
    // The private /tmp is bounded too and vanishes with the sandbox.
    let r = sh(
        &[],
        "head -c 1073741824 /dev/zero > /tmp/big; echo status=$?",
    );
    assert!(!r.stdout.contains("status=0"), "{}", r.stdout);
}

// ---------------------------------------------------------------- processes and privileges

#[test]
fn the_parents_environ_cannot_be_read() {
    let me = std::process::id();
    let r = sandbox_with(
        &[("AIRLOCK_TEST_PARENT_SECRET", "s3cr3t-parent")],
        &[],
        &[
            "/bin/sh",
            "-c",
            &format!("cat /proc/{me}/environ /proc/1/environ /proc/*/environ 2>&1; echo END"),
        ],
    );
    assert!(r.stdout.contains("END"));
    assert!(!r.stdout.contains("s3cr3t-parent"), "{}", r.stdout);
}

#[test]
fn host_processes_are_invisible_and_cannot_be_signalled_or_traced() {
    let mut victim = Command::new("sleep").arg("60").spawn().unwrap();
    let pid = victim.id();
    let code = format!(
        r#"import os, ctypes
libc = ctypes.CDLL(None, use_errno=True)
for p in ({pid}, 1, os.getppid()):
    try:
        os.kill(p, 9)
        print('KILLED', p)
    except OSError as e:
        print('nokill', p, e.errno)
    r = libc.ptrace(16, p, 0, 0)
    print('ATTACHED' if r == 0 else 'noptrace', p, ctypes.get_errno())
print('pids', sorted(int(d) for d in os.listdir('/proc') if d.isdigit()))
"#
    );
    let r = py(&[], &code);
    assert!(!r.stdout.contains("KILLED"), "{}{}", r.stdout, r.stderr);
    assert!(!r.stdout.contains("ATTACHED"), "{}", r.stdout);
    assert!(r.stdout.contains("pids"), "{}", r.stderr);
    assert!(
        victim.try_wait().unwrap().is_none(),
        "a host process was killed"
    );
    victim.kill().unwrap();
    victim.wait().unwrap();
    let pids_line = r.stdout.lines().find(|l| l.starts_with("pids")).unwrap();
    let visible: Vec<u32> = pids_line
        .trim_start_matches("pids")
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect();
    assert!(
        !visible.contains(&pid),
        "host pid {pid} visible: {pids_line}"
    );
    assert!(
        visible.len() < 10,
        "too many processes visible: {pids_line}"
    );
}

#[test]
fn the_child_is_unprivileged_with_every_capability_dropped() {
    let r = sh(
        &[],
        "id -u; id -g; grep -E '^(Cap|NoNewPrivs|Seccomp:)' /proc/self/status",
    );
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines[0], "1000", "{}", r.stdout);
    assert_eq!(lines[1], "1000");
    for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        let line = lines.iter().find(|l| l.starts_with(set)).unwrap();
        assert!(line.ends_with("0000000000000000"), "{line}");
    }
    assert!(r.stdout.contains("NoNewPrivs:\t1"));
    assert!(r.stdout.contains("Seccomp:\t2"));
}

#[test]
fn a_setuid_binary_gains_no_privilege() {
    let rw = rw_dir();
    let suid = rw.path().join("id-suid");
    std::fs::copy("/usr/bin/id", &suid).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&suid, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let r = sh(
        &["--rw", &s(rw.path())],
        &format!(
            "{} -u; /usr/bin/su -c 'id -u' root 2>&1 </dev/null; /usr/bin/mount -t tmpfs x /tmp 2>&1; echo END",
            s(&suid)
        ),
    );
    assert!(r.stdout.contains("END"));
    assert!(r.stdout.starts_with("1000\n"), "{}", r.stdout);
    assert!(!r.stdout.lines().any(|l| l.trim() == "0"), "{}", r.stdout);
}

#[test]
fn mount_and_unshare_are_refused() {
    let r = py(
        &[],
        "import ctypes, os\nlibc=ctypes.CDLL(None, use_errno=True)\n\
print('mount', libc.mount(b'none', b'/tmp', b'tmpfs', 0, None), ctypes.get_errno())\n\
print('unshare', libc.unshare(0x10000000), ctypes.get_errno())\n\
print('unshare_ns', libc.unshare(0x00020000), ctypes.get_errno())",
    );
    assert!(
        r.stdout.contains(&format!("mount -1 {}", libc_eperm())),
        "{}{}",
        r.stdout,
        r.stderr
    );
    assert!(
        r.stdout.contains(&format!("unshare -1 {}", libc_eperm())),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains(&format!("unshare_ns -1 {}", libc_eperm())),
        "{}",
        r.stdout
    );
    let r = sh(&[], "mount -t tmpfs none /tmp 2>&1; echo status=$?");
    assert!(!r.stdout.contains("status=0"), "{}", r.stdout);
}

fn libc_eperm() -> i32 {
    1
}

#[test]
fn io_uring_is_refused() {
    let r = py(
        &[],
        "import ctypes\nlibc=ctypes.CDLL(None, use_errno=True)\nbuf=ctypes.create_string_buffer(256)\n\
r=libc.syscall(425, 8, buf)\nprint('io_uring_setup', r, ctypes.get_errno())",
    );
    assert!(
        r.stdout.contains("io_uring_setup -1 1"),
        "{}{}",
        r.stdout,
        r.stderr
    );
}

#[test]
fn bpf_perf_keyctl_userfaultfd_and_process_vm_are_refused() {
    let code = r#"import ctypes
libc = ctypes.CDLL(None, use_errno=True)
for name, nr in (('bpf', 321), ('perf_event_open', 298), ('keyctl', 250), ('userfaultfd', 323),
                 ('process_vm_readv', 310), ('ptrace', 101), ('kexec_load', 246)):
    r = libc.syscall(nr, 0, 0, 0, 0, 0)
    print(name, r, ctypes.get_errno())
"#;
    let r = py(&[], code);
    for name in [
        "bpf",
        "perf_event_open",
        "keyctl",
        "userfaultfd",
        "process_vm_readv",
        "ptrace",
        "kexec_load",
    ] {
        assert!(
            r.stdout.contains(&format!("{name} -1 1\n")),
            "{name}: {}{}",
            r.stdout,
            r.stderr
        );
    }
}

// ---------------------------------------------------------------- what the host sees
//
// Each case is judged from the host's side: its /proc, its listener, its FIFO's reader, its
// device nodes, the files left in a grant. The whole suite also runs as an unprivileged
// caller (`the_escape_suite_holds_for_an_unprivileged_caller`), whose own sockets and FIFOs
// these fixtures then are.

/// The host pid of the sandboxed `sleep` whose argument is `marker`, waiting for it to start.
fn sandboxed_sleeper(marker: &str) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let found = processes_with_arg(marker).into_iter().find(|p| {
            std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == "sleep")
        });
        if let Some(pid) = found {
            return pid.to_string();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the sandboxed sleep never appeared"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn the_sandboxed_process_is_never_root_on_the_host() {
    require_full_sandbox();
    use std::os::unix::fs::MetadataExt;
    let (uid, gid) = sandbox_host_ids();
    assert!(
        uid != 0 && gid != 0,
        "the doctor reports host ids {uid}:{gid}"
    );
    if !running_as_root() {
        // A non-root caller's command is the caller itself.
        assert_eq!(
            (uid, gid),
            (host_ids_of("self").0[1], host_ids_of("self").1[1])
        );
    }
    let rw = rw_dir();
    // Unique to this process: the escape suite runs this test again as another uid at the same
    // time, and each must find its own sleeper.
    let marker = format!("2.7183{:07}", std::process::id());
    let marker = marker.as_str();
    let mut caller = airlock()
        .args([
            "sandbox",
            "run",
            "--rw",
            &s(rw.path()),
            "--",
            "/bin/sh",
            "-c",
        ])
        .arg(format!("echo x > made; exec sleep {marker}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = sandboxed_sleeper(marker);
    let (uids, gids) = host_ids_of(&pid);
    assert!(caller.wait().unwrap().success());
    assert_eq!(uids, vec![uid; 4], "host Uid: of the sandboxed process");
    assert_eq!(gids, vec![gid; 4], "host Gid: of the sandboxed process");
    // What it wrote belongs to that identity, not to root.
    let made = std::fs::metadata(rw.path().join("made")).unwrap();
    assert_eq!((made.uid(), made.gid()), (uid, gid));
    // The run's summary says so too.
    let r = sh(&[], "true");
    assert_eq!(
        r.summary["host_uid"].as_u64(),
        Some(u64::from(uid)),
        "{}",
        r.summary
    );
    assert_eq!(
        r.summary["host_gid"].as_u64(),
        Some(u64::from(gid)),
        "{}",
        r.summary
    );
}

#[test]
fn a_root_callers_host_identity_is_configurable_but_never_root() {
    let (own_uid, own_gid) = (host_ids_of("self").0[1], host_ids_of("self").1[1]);
    let configured = [("AIRLOCK_SANDBOX_HOST_ID", "4242:4343")];
    let r = sandbox_with(&configured, &[], &["/bin/true"]);
    assert_eq!(r.exit_code(), Some(0), "{}", r.stderr);
    let expected = if running_as_root() {
        (4242, 4343)
    } else {
        // A non-root caller's command is the caller: there is nothing to configure.
        (own_uid, own_gid)
    };
    assert_eq!(
        (
            r.summary["host_uid"].as_u64(),
            r.summary["host_gid"].as_u64()
        ),
        (Some(u64::from(expected.0)), Some(u64::from(expected.1))),
        "{}",
        r.summary
    );
    if running_as_root() {
        for root in ["0", "0:4343", "4242:0"] {
            let out = airlock()
                .env("AIRLOCK_SANDBOX_HOST_ID", root)
                .args(["sandbox", "run", "--", "/bin/true"])
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(125), "{root}: {err}");
            assert!(
                err.contains("AIRLOCK_SANDBOX_HOST_ID") && err.contains("root"),
                "{err}"
            );
        }
    }
}

/// A python client inside: connects to the stream socket `stream` and sends to the datagram
/// socket `dgram`, printing CONNECTED, SENT or BLOCKED for each.
fn unix_client(stream: &Path, dgram: &Path) -> String {
    format!(
        "import socket\n\
         c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n\
         try:\n c.connect({stream:?}); c.sendall(b'leak'); print('CONNECTED')\n\
         except OSError as e:\n print('BLOCKED', e)\n\
         d = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n\
         try:\n d.sendto(b'leak', {dgram:?}); print('SENT')\n\
         except OSError as e:\n print('BLOCKED', e)\n",
        stream = s(stream),
        dgram = s(dgram)
    )
}

#[test]
fn a_host_socket_in_a_read_only_grant_cannot_be_reached() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::net::{UnixDatagram, UnixListener};
    let d = dir();
    let stream_path = d.path().join("listener.sock");
    let dgram_path = d.path().join("log.sock");
    let listener = UnixListener::bind(&stream_path).unwrap();
    let datagrams = UnixDatagram::bind(&dgram_path).unwrap();
    listener.set_nonblocking(true).unwrap();
    datagrams.set_nonblocking(true).unwrap();
    // Anyone on the host may connect (like /dev/log): only the sandbox stands in the way.
    for path in [&stream_path, &dgram_path] {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let client = unix_client(&stream_path, &dgram_path);
    let r = py(&["--ro", &s(d.path())], &client);
    assert_eq!(
        r.stdout.matches("BLOCKED").count(),
        2,
        "{}{}",
        r.stdout,
        r.stderr
    );
    assert!(
        listener.accept().is_err(),
        "the host listener saw a connection"
    );
    let mut buf = [0u8; 16];
    assert!(
        datagrams.recv(&mut buf).is_err(),
        "the host socket received a datagram"
    );
    // Granted on their own, the same sockets are reached: only the operator's grant opens one.
    let r = py(
        &["--ro", &s(&stream_path), "--ro", &s(&dgram_path)],
        &client,
    );
    assert!(
        r.stdout.contains("CONNECTED") && r.stdout.contains("SENT"),
        "{}{}",
        r.stdout,
        r.stderr
    );
    let (conn, _) = listener.accept().unwrap();
    conn.set_nonblocking(false).unwrap();
    let mut got = Vec::new();
    std::io::Read::read_to_end(&mut &conn, &mut got).unwrap();
    assert_eq!(got, b"leak");
    assert_eq!(datagrams.recv(&mut buf).unwrap(), 4);
}

#[test]
fn a_read_only_grant_shows_the_mounts_below_it_the_same_way() {
    use std::os::unix::net::UnixListener;
    if !running_as_root() {
        // A non-root caller's sandbox refuses such a grant (the kernel locks the mounts below
        // it); and this user cannot mount the fixture anyway.
        println!("skipped: mounting the fixture needs root");
        return;
    }
    let d = dir();
    let sub = d.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    assert!(
        Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=1m", "airlock-test"])
            .arg(&sub)
            .status()
            .unwrap()
            .success()
    );
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(sub.clone());
    std::fs::write(sub.join("file"), "below\n").unwrap();
    let sock = sub.join("host.sock");
    let listener = UnixListener::bind(&sock).unwrap();
    listener.set_nonblocking(true).unwrap();
    let r = py(
        &["--ro", &s(d.path())],
        &format!(
            "import socket\nprint(open({:?}).read(), end='')\n\
             c = socket.socket(socket.AF_UNIX)\n\
             try:\n c.connect({:?}); print('CONNECTED')\n\
             except OSError as e:\n print('BLOCKED', e)",
            s(&sub.join("file")),
            s(&sock)
        ),
    );
    assert!(
        r.stdout.starts_with("below\nBLOCKED"),
        "{}{}",
        r.stdout,
        r.stderr
    );
    assert!(
        listener.accept().is_err(),
        "the host listener saw a connection"
    );
}

/// A python writer inside: opens `fifo` for writing, without blocking and then blocking for at
/// most two seconds, and writes to it; prints WROTE or BLOCKED for each attempt.
fn fifo_writer(fifo: &Path) -> String {
    format!(
        "import os, signal\n\
         def give_up(*_):\n raise TimeoutError('no reader within 2 s')\n\
         signal.signal(signal.SIGALRM, give_up)\n\
         for flags in (os.O_WRONLY | os.O_NONBLOCK, os.O_WRONLY):\n\
         \x20signal.alarm(2)\n\
         \x20try:\n  fd = os.open({fifo:?}, flags); os.write(fd, b'leak'); print('WROTE', flush=True)\n\
         \x20except OSError as e:\n  print('BLOCKED', e, flush=True)\n\
         \x20signal.alarm(0)\n",
        fifo = s(fifo)
    )
}

#[test]
fn a_host_fifo_in_a_read_only_grant_cannot_be_written() {
    use std::io::{Read, Write};
    use std::os::unix::fs::PermissionsExt;
    for base in ["/tmp", "/var/tmp"] {
        let d = tempfile::tempdir_in(base).unwrap();
        let fifo = d.path().join("fifo");
        assert!(
            Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        std::fs::set_permissions(&fifo, std::fs::Permissions::from_mode(0o666)).unwrap();
        // The host's reader holds it open for reading (and writing, so that opening never
        // blocks here): a writer inside would have someone to write to.
        let mut reader = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&fifo)
            .unwrap();
        let mut host_reads = |what: &str| {
            reader.write_all(b"end\n").unwrap();
            let mut buf = [0u8; 64];
            let n = reader.read(&mut buf).unwrap();
            assert_eq!(
                &buf[..n],
                b"end\n",
                "{base}, {what}: the host's FIFO was written"
            );
        };
        let r = py(&["--ro", &s(d.path())], &fifo_writer(&fifo));
        assert_eq!(
            r.stdout.matches("BLOCKED").count(),
            2,
            "{base}: {}{}",
            r.stdout,
            r.stderr
        );
        host_reads("its directory granted read-only");
        // Granted read-only on its own: read-only still (or, where landlock's rule for the
        // private /tmp would let a non-root caller's command write it, refused outright).
        let out = sandbox_raw(&["--ro", &s(&fifo)], &[PYTHON, "-c", &fifo_writer(&fifo)]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.status.code() == Some(125) {
            assert!(!running_as_root() && base == "/tmp", "{base}: {stderr}");
            assert!(stderr.contains("FIFO granted read-only"), "{stderr}");
        } else {
            assert_eq!(out.status.code(), Some(0), "{base}: {stderr}");
            assert_eq!(
                stdout.matches("BLOCKED").count(),
                2,
                "{base}: {stdout}{stderr}"
            );
        }
        host_reads("granted read-only on its own");
    }
}

#[test]
fn the_hosts_device_nodes_cannot_be_changed_from_inside() {
    use std::os::unix::fs::MetadataExt;
    let devices = ["null", "zero", "full", "random", "urandom"];
    let state = || -> Vec<(u32, u32, u32, i64)> {
        devices
            .iter()
            .map(|d| {
                let m = std::fs::metadata(format!("/dev/{d}")).unwrap();
                (m.mode(), m.uid(), m.gid(), m.mtime())
            })
            .collect()
    };
    let before = state();
    let r = sh(
        &[],
        "for d in null zero full random urandom; do \
           chmod 0667 /dev/$d; chmod u+s /dev/$d; chown 1000:1000 /dev/$d; touch /dev/$d; \
         done 2>&1; echo data > /dev/null && echo WROTE; head -c 8 /dev/urandom | wc -c",
    );
    // The devices still work as devices.
    assert!(r.stdout.contains("WROTE"), "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.trim_end().ends_with('8'), "{}", r.stdout);
    assert_eq!(state(), before, "a host device node changed: {}", r.stdout);
}

/// Paths of files below `root` that carry a `security.capability` attribute, asked of the
/// host's python (the standard library has no extended-attribute calls).
fn files_with_capabilities(root: &Path) -> String {
    let out = Command::new(PYTHON)
        .args([
            "-c",
            "import os, sys\n\
             for top, dirs, files in os.walk(sys.argv[1]):\n\
             \x20for n in dirs + files:\n\
             \x20 p = os.path.join(top, n)\n\
             \x20 try:\n   os.getxattr(p, 'security.capability', follow_symlinks=False); print(p)\n\
             \x20 except OSError:\n   pass\n",
        ])
        .arg(root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Every file below `root` with its mode and owner.
fn files_below(root: &Path) -> Vec<(PathBuf, u32, u32)> {
    use std::os::unix::fs::MetadataExt;
    let mut found = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let meta = entry.path().symlink_metadata().unwrap();
            if meta.is_dir() {
                stack.push(entry.path());
            }
            found.push((entry.path(), meta.mode(), meta.uid()));
        }
    }
    found
}

/// Every way the command might leave a file that runs with its owner's ids or with file
/// capabilities, tried in its working directory; prints what it did.
const SET_ID_ATTEMPTS: &str = r#"cp /bin/sh rootsh; chmod 4755 rootsh; chmod u+s rootsh
chmod g+s rootsh; chmod 6755 rootsh; install -m 4755 /bin/sh rootsh2
/usr/bin/python3 -c "
import os, struct
for name, call in (
  ('open', lambda: os.close(os.open('rootsh3', os.O_CREAT | os.O_WRONLY, 0o4755))),
  ('chmod', lambda: os.chmod('rootsh', 0o4755)),
  ('fchmod', lambda: os.fchmod(os.open('rootsh', os.O_RDONLY), 0o2755)),
  ('mknod', lambda: os.mknod('rootsh4', 0o104755)),
  ('setcap', lambda: os.setxattr('rootsh', 'security.capability',
     struct.pack('<IIIII', 0x02000001, 1 << 7, 0, 0, 0))),
):
  try:
    call(); print('DONE', name)
  except OSError as e:
    print('REFUSED', name, e.errno)
"
ls -ln"#;

#[test]
fn nothing_the_sandbox_writes_can_run_with_its_owners_ids_on_the_host() {
    let (uid, _) = sandbox_host_ids();
    let rw = rw_dir();
    let lower = dir();
    let scratch = dir();
    std::fs::write(lower.path().join("tracked"), "x").unwrap();
    let wt = s(lower.path());
    for (args, written) in [
        (
            vec!["--rw".to_string(), s(rw.path())],
            rw.path().to_path_buf(),
        ),
        (
            vec![
                "--overlay".to_string(),
                format!("{wt}:{wt}"),
                "--overlay-keep".to_string(),
                s(scratch.path()),
                "--cwd".to_string(),
                wt.clone(),
            ],
            scratch.path().join("upper"),
        ),
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let r = sh(&args, SET_ID_ATTEMPTS);
        assert_eq!(r.exit_code(), Some(0), "{}{}", r.stdout, r.stderr);
        // The attempts ran: the copy is there, and every call that could set a bit failed.
        assert!(written.join("rootsh").is_file(), "{}{}", r.stdout, r.stderr);
        for name in ["open", "chmod", "fchmod", "mknod", "setcap"] {
            assert!(
                r.stdout.contains(&format!("REFUSED {name}")),
                "{name}: {}{}",
                r.stdout,
                r.stderr
            );
        }
        let files = files_below(&written);
        assert!(!files.is_empty());
        for (path, mode, owner) in &files {
            assert_eq!(
                mode & 0o6000,
                0,
                "{} has a set-id bit ({mode:o})",
                path.display()
            );
            assert_eq!(*owner, uid, "{} is owned by {owner}", path.display());
            assert_ne!(*owner, 0, "{} is root's", path.display());
        }
        assert_eq!(
            files_with_capabilities(&written),
            "",
            "file capabilities were set"
        );
    }
}

#[test]
fn every_writable_mount_is_nosuid_and_nodev() {
    let rw = rw_dir();
    let lower = dir();
    let r = sh(
        &[
            "--rw",
            &s(rw.path()),
            "--overlay",
            &format!("{}:/work/tree", s(lower.path())),
        ],
        "cat /proc/self/mountinfo",
    );
    assert_eq!(r.exit_code(), Some(0), "{}", r.stderr);
    for point in [
        s(rw.path()),
        "/work/tree".into(),
        "/tmp".into(),
        "/dev/shm".into(),
    ] {
        let line = r
            .stdout
            .lines()
            .find(|l| l.split(' ').nth(4) == Some(point.as_str()))
            .unwrap_or_else(|| panic!("{point} is not mounted: {}", r.stdout));
        let options: Vec<&str> = line.split(' ').nth(5).unwrap().split(',').collect();
        assert!(options.contains(&"rw"), "{line}");
        for flag in ["nosuid", "nodev"] {
            assert!(options.contains(&flag), "{point} lacks {flag}: {line}");
        }
    }
}

/// Set in the run of this suite as an unprivileged caller, which must not start it again.
const UNPRIVILEGED_RUN_ENV: &str = "AIRLOCK_IT_UNPRIVILEGED_RUN";
/// The uid (and gid) that run drops to: none of this host's users, and not a sandbox's default.
const UNPRIVILEGED_CALLER: u32 = 64321;

#[test]
fn the_escape_suite_holds_for_an_unprivileged_caller() {
    if std::env::var_os(UNPRIVILEGED_RUN_ENV).is_some() {
        return; // this is that run
    }
    if !running_as_root() {
        println!("this process is not root: the rest of this suite is the unprivileged run");
        return;
    }
    let Some(setpriv) = ["/usr/bin/setpriv", "/bin/setpriv"]
        .iter()
        .find(|p| Path::new(p).is_file())
    else {
        println!(
            "skipped: no setpriv to drop to uid {UNPRIVILEGED_CALLER}, so the suite cannot \
             run as an unprivileged caller here"
        );
        return;
    };
    let id = UNPRIVILEGED_CALLER.to_string();
    let home = dir();
    std::os::unix::fs::lchown(
        home.path(),
        Some(UNPRIVILEGED_CALLER),
        Some(UNPRIVILEGED_CALLER),
    )
    .unwrap();
    let out = Command::new(setpriv)
        .args(["--reuid", &id, "--regid", &id, "--clear-groups", "--"])
        .arg(std::env::current_exe().unwrap())
        .args([
            "sandbox::",
            "--test-threads=2",
            "--nocapture",
            "--skip",
            "sandbox::the_escape_suite_holds_for_an_unprivileged_caller",
        ])
        .env(UNPRIVILEGED_RUN_ENV, "1")
        .env("HOME", home.path())
        .current_dir(home.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the suite failed as uid {id}:\n{stdout}\n{stderr}"
    );
    let passed: usize = stdout
        .lines()
        .find_map(|l| l.strip_prefix("test result: ok. "))
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(
        passed > 50,
        "only {passed} tests ran as uid {id}:\n{stdout}"
    );
    // What was left out, and why, is in that run's output.
    for line in stdout.lines().filter(|l| l.starts_with("skipped:")) {
        println!("as uid {id}: {line}");
    }
}

// ---------------------------------------------------------------- limits

#[test]
fn a_fork_bomb_is_contained() {
    let marker = format!("airlock-forkbomb-{}", std::process::id());
    let r = sandbox(
        &["--max-procs", "64", "--timeout", "5"],
        &[
            "/bin/bash",
            "-c",
            &format!(
                "exec -a {marker} /bin/bash -c 'b() {{ b | b & }}; b; sleep 2; echo survived'"
            ),
        ],
    );
    assert!(r.code().is_some(), "airlock itself was killed");
    // The caller can still start processes, and no sandboxed process is left behind.
    assert!(Command::new("true").status().unwrap().success());
    let ps = Command::new("ps").args(["-eo", "args"]).output().unwrap();
    assert!(
        !String::from_utf8_lossy(&ps.stdout).contains(&marker),
        "a fork-bomb process outlived the sandbox"
    );
}

#[test]
fn a_memory_bomb_is_stopped() {
    let r = py(
        &["--memory", "128"],
        "x = bytearray(1 << 31)\nprint('ALLOCATED', len(x))",
    );
    assert!(!r.stdout.contains("ALLOCATED"), "{}", r.stdout);
    assert_ne!(r.exit_code(), Some(0));
    let oom_killed = r.summary["signal"].as_i64() == Some(9);
    assert!(
        oom_killed || r.stderr.contains("MemoryError"),
        "{}{}",
        r.stdout,
        r.stderr
    );
}

/// Runtimes reserve far more address space than they touch (a WebAssembly instance in Node.js
/// about 10 GB): with the memory cgroup as the limit, a 16 GB reservation under a 512 MB limit
/// works (touching past the limit is still stopped: `a_memory_bomb_is_stopped`). Where the
/// caller gets no memory cgroup (an unprivileged caller), the address-space limit is the only
/// memory limit and the reservation is refused.
#[test]
fn address_space_reserved_but_not_touched_is_not_a_memory_limit() {
    let script = "import mmap\n\
                  flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, 'MAP_NORESERVE', 0)\n\
                  m = mmap.mmap(-1, 16 << 30, flags=flags)\n\
                  m[0] = 1\n\
                  m[(16 << 30) - 1] = 1\n\
                  print('RESERVED', len(m))\n";
    let r = py(&["--memory", "512"], script);
    let cgroup_memory = r.summary["layers_applied"]
        .as_array()
        .is_some_and(|l| l.iter().any(|x| x == "cgroup_memory"));
    if cgroup_memory {
        assert_eq!(r.exit_code(), Some(0), "{}{}", r.stdout, r.stderr);
        assert!(r.stdout.contains("RESERVED 17179869184"), "{}", r.stdout);
    } else {
        assert_ne!(r.exit_code(), Some(0), "{}{}", r.stdout, r.stderr);
        assert!(r.stderr.contains("Cannot allocate memory"), "{}", r.stderr);
    }
}

#[test]
fn a_busy_loop_is_killed_at_the_timeout() {
    let r = sh(&["--timeout", "1"], "while :; do :; done");
    assert!(r.timed_out(), "{}", r.summary);
    assert_eq!(r.summary["signal"].as_i64(), Some(9));
    assert_eq!(r.code(), Some(124));
}

#[test]
fn sleeping_past_the_timeout_is_killed_with_its_whole_tree() {
    let marker = format!("airlock-sleep-marker-{}", std::process::id());
    let r = sh(
        &["--timeout", "1"],
        &format!("(exec -a {marker} sleep 300 &); sleep 300"),
    );
    assert!(r.timed_out(), "{}", r.summary);
    assert_eq!(r.code(), Some(124));
    let ps = Command::new("ps").args(["-eo", "args"]).output().unwrap();
    assert!(
        !String::from_utf8_lossy(&ps.stdout).contains(&marker),
        "a sandboxed process outlived the timeout"
    );
}

#[test]
fn a_grandchild_holding_stdout_does_not_hang_the_caller() {
    let r = sh(
        &["--timeout", "60"],
        "(sleep 300 &); (exec sleep 301 >&2 &); echo done",
    );
    assert_eq!(r.exit_code(), Some(0));
    assert!(!r.timed_out());
    assert!(r.stdout.contains("done"));
}

#[test]
fn output_is_capped_and_the_dropped_bytes_counted() {
    let r = sh(
        &["--max-output", "1000"],
        "head -c 100000 /dev/zero | tr '\\0' a; echo; echo tail >&2",
    );
    assert_eq!(
        r.summary["stdout_bytes"].as_u64().unwrap() + r.summary["stderr_bytes"].as_u64().unwrap(),
        1000
    );
    assert_eq!(
        r.summary["output_bytes_dropped"].as_u64(),
        Some(100000 + 1 + 5 - 1000)
    );
    assert_eq!(r.stdout.trim_end().len(), 1000);
}

// ---------------------------------------------------------------- environment

#[test]
fn the_callers_environment_does_not_arrive_unless_named() {
    let envs = [
        ("AIRLOCK_TEST_SECRET", "caller-secret-value"),
        ("AIRLOCK_TEST_NAMED", "named-value"),
    ];
    let r = sandbox_with(
        &envs,
        &["--env", "AIRLOCK_TEST_NAMED", "--env", "SET_HERE=x"],
        &["/usr/bin/env"],
    );
    assert!(!r.stdout.contains("caller-secret-value"), "{}", r.stdout);
    assert!(
        r.stdout.contains("AIRLOCK_TEST_NAMED=named-value"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("SET_HERE=x"));
    let names: Vec<&str> = r
        .stdout
        .lines()
        .filter_map(|l| l.split('=').next())
        .collect();
    assert_eq!(
        names,
        vec!["AIRLOCK_TEST_NAMED", "HOME", "PATH", "SET_HERE"],
        "{}",
        r.stdout
    );
}

#[test]
fn stdin_is_closed_and_the_child_has_its_own_session() {
    let r = py(
        &[],
        "import os, sys\nprint(repr(sys.stdin.read()))\nprint(os.getsid(0) == os.getpid(), os.getpgrp() == os.getpid())",
    );
    assert!(
        r.stdout.contains("''\nTrue True"),
        "{}{}",
        r.stdout,
        r.stderr
    );
}

#[test]
fn without_a_rw_grant_the_command_starts_in_the_private_tmp() {
    let r = sh(&[], "pwd; echo note > here && ls");
    assert_eq!(r.exit_code(), Some(0), "{}", r.stderr);
    assert_eq!(r.stdout, "/tmp\nhere\n");
    let rw = rw_dir();
    let r = sh(&["--rw", &s(rw.path())], "pwd");
    assert_eq!(r.stdout.trim_end(), s(rw.path()));
}

// ---------------------------------------------------------------- refusal and degraded runs

#[test]
fn a_missing_layer_refuses_the_run_and_names_the_feature() {
    require_full_sandbox();
    for layer in [
        "landlock_fs",
        "user_namespace",
        "seccomp",
        "overlay",
        "grant_overlay",
    ] {
        let lower = dir();
        let out = airlock()
            .env("AIRLOCK_SANDBOX_PRETEND_MISSING", layer)
            .args([
                "sandbox",
                "run",
                "--overlay",
                &format!("{}:/work/x", s(lower.path())),
                "--",
                "/bin/true",
            ])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(125), "{layer}: {stderr}");
        assert!(
            stderr.contains(&format!("missing layer: {layer}")),
            "{layer}: {stderr}"
        );
    }
}

#[test]
fn with_json_a_refusal_or_a_failed_exec_is_still_one_json_object() {
    require_full_sandbox();
    // (exit code, the JSON object on stdout) of `sandbox run --json -- cmd`.
    let run = |pretend: Option<&str>, cmd: &str| {
        let mut c = airlock();
        if let Some(layer) = pretend {
            c.env("AIRLOCK_SANDBOX_PRETEND_MISSING", layer);
        }
        let out = c
            .args(["sandbox", "run", "--json", "--", cmd])
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        (out.status.code(), v)
    };
    let (code, v) = run(Some("seccomp"), "/bin/true");
    assert_eq!(code, Some(125));
    assert_eq!(v["kind"], "refused", "{v}");
    assert_eq!(v["missing_layer"], "seccomp", "{v}");
    assert!(v["error"].as_str().unwrap().contains("seccomp"), "{v}");

    let (code, v) = run(None, "/no/such/program");
    assert_eq!(code, Some(127));
    assert_eq!(v["kind"], "setup", "{v}");
    assert_eq!(v["missing_layer"], Value::Null, "{v}");
    assert!(
        v["error"].as_str().unwrap().contains("/no/such/program"),
        "{v}"
    );
}

#[test]
fn allow_degraded_runs_weaker_and_lists_the_missing_layers() {
    let r = sandbox_with(
        &[("AIRLOCK_SANDBOX_PRETEND_MISSING", "seccomp,landlock_scope")],
        &["--allow-degraded"],
        &["/bin/true"],
    );
    assert_eq!(r.exit_code(), Some(0), "{}", r.stderr);
    let missing: Vec<&str> = r.summary["layers_missing"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let mut expected = vec!["landlock_scope".to_string(), "seccomp".to_string()];
    expected.extend(unavailable_optional_layers());
    assert_eq!(missing, expected);
}

#[test]
fn doctor_reports_every_layer_and_that_runs_are_not_refused() {
    require_full_sandbox();
    let out = airlock().args(["doctor", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["runs_refused"], Value::Bool(false));
    assert!(report["landlock_abi"].as_u64().unwrap() >= 6);
    assert_eq!(report["layers"].as_array().unwrap().len(), 18);
    // The privilege rows come from their own probes (a child that drops as the target does),
    // not from the user-namespace probe.
    let detail = |name: &str| {
        report["layers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["layer"] == name)
            .map(|l| l["detail"].as_str().unwrap().to_string())
            .unwrap()
    };
    assert!(detail("drop_capabilities").contains("empty"), "{report}");
    assert!(
        detail("unprivileged_uid").contains("nested user namespace"),
        "{report}"
    );
    // Who a run's command is on the host, and whether subordinate ids are configured.
    let host = &report["host"];
    let uid = host["identity"]["uid"].as_u64().unwrap();
    assert_ne!(uid, 0, "{report}");
    assert_eq!(
        host["idmapped_mounts"] == Value::Bool(true),
        running_as_root(),
        "{report}"
    );
    assert!(host["subordinate_ids"]["user"].is_string(), "{report}");
    assert!(
        detail("unprivileged_uid").contains(&format!("on the host uid {uid}")),
        "{report}"
    );
    let text = airlock().arg("doctor").output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("runs would be refused: no"), "{text}");
    assert!(
        text.contains(&format!("host identity of a run's command: uid {uid}")),
        "{text}"
    );
    assert!(text.contains("subordinate ids of "), "{text}");
    let refused = airlock()
        .env("AIRLOCK_SANDBOX_PRETEND_MISSING", "landlock_fs")
        .arg("doctor")
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stdout).contains("runs would be refused: yes"));
}

// ---------------------------------------------------------------- positive runs

#[test]
fn granted_roots_are_readable_and_rw_roots_writable() {
    let ro = dir();
    let rw = rw_dir();
    std::fs::write(ro.path().join("data"), "readable").unwrap();
    let r = sh(
        &["--ro", &s(ro.path()), "--rw", &s(rw.path())],
        &format!(
            "cat {}/data; mkdir sub; echo written > sub/out; echo tmp > /tmp/t && cat /tmp/t",
            s(ro.path())
        ),
    );
    assert_eq!(r.exit_code(), Some(0), "{}", r.stderr);
    assert_eq!(r.stdout, "readabletmp\n");
    assert_eq!(
        std::fs::read_to_string(rw.path().join("sub/out")).unwrap(),
        "written\n"
    );
    // Every layer but the overlay (none was asked for), less what a non-root caller lacks.
    let applied = r.summary["layers_applied"].as_array().unwrap();
    assert_eq!(
        applied.len() + unavailable_optional_layers().len(),
        17,
        "{}",
        r.summary
    );
    assert_eq!(
        layer_names(&r.summary, "layers_missing"),
        unavailable_optional_layers(),
        "{}",
        r.summary
    );
}

/// Whether a toolchain the test grants lies where this (non-root) user cannot read: say so and
/// let the test return. Root must always have it.
fn unreadable_for_a_non_root_caller(path: &Path) -> bool {
    if running_as_root() || std::fs::read_dir(path).is_ok() {
        return false;
    }
    println!(
        "skipped: as uid {}, {} (root's) cannot be read, so it cannot be granted",
        host_ids_of("self").0[1],
        path.display()
    );
    true
}

fn real_python() -> PathBuf {
    let versions = Path::new("/root/.pyenv/versions/3.11.7");
    let candidate = versions.join("bin/python3");
    let found = std::fs::canonicalize(&candidate).unwrap_or_else(|e| {
        panic!(
            "the Python test needs the pyenv interpreter {} ({e})",
            candidate.display()
        )
    });
    assert!(found.starts_with(versions));
    found
}

#[test]
fn a_python_unittest_suite_runs_green_inside() {
    if unreadable_for_a_non_root_caller(Path::new("/root/.pyenv/versions/3.11.7")) {
        return;
    }
    let python = real_python();
    let proj = rw_dir();
    std::fs::write(
        proj.path().join("calc.py"),
        "def add(a, b):\n    return a + b\n",
    )
    .unwrap();
    std::fs::write(
        proj.path().join("test_calc.py"),
        "import os, tempfile, unittest\nimport calc\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(calc.add(2, 3), 5)\n\n    def test_tmp(self):\n        with tempfile.NamedTemporaryFile() as f:\n            f.write(b'x')\n\n    def test_cwd_writable(self):\n        with open('out.txt', 'w') as f:\n            f.write('ok')\n",
    )
    .unwrap();
    let r = sandbox(
        &[
            "--ro",
            "/root/.pyenv/versions/3.11.7",
            "--rw",
            &s(proj.path()),
        ],
        &[&s(&python), "-m", "unittest", "-v"],
    );
    assert_eq!(r.exit_code(), Some(0), "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("Ran 3 tests"), "{}", r.stderr);
    assert!(r.stderr.contains("OK"));
}

#[test]
fn cargo_test_of_a_tiny_offline_crate_runs_green_inside() {
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let cargo_home = std::env::var("CARGO_HOME").unwrap_or_else(|_| format!("{home}/.cargo"));
    let rustup_home = std::env::var("RUSTUP_HOME").unwrap_or_else(|_| format!("{home}/.rustup"));
    if unreadable_for_a_non_root_caller(Path::new(&cargo_home))
        || unreadable_for_a_non_root_caller(Path::new(&rustup_home))
    {
        return;
    }
    let proj = rw_dir();
    std::fs::create_dir(proj.path().join("src")).unwrap();
    std::fs::write(
        proj.path().join("Cargo.toml"),
        "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n",
    )
    .unwrap();
    std::fs::write(
        proj.path().join("src/lib.rs"),
        "pub fn double(x: u32) -> u32 { x * 2 }\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn doubles() { assert_eq!(super::double(21), 42); }\n}\n",
    )
    .unwrap();
    let target = rw_dir();
    let path = format!("{cargo_home}/bin:/usr/bin:/bin");
    let r = sandbox(
        &[
            "--ro",
            &cargo_home,
            "--ro",
            &rustup_home,
            "--rw",
            &s(proj.path()),
            "--rw",
            &s(target.path()),
            "--env",
            &format!("CARGO_HOME={cargo_home}"),
            "--env",
            &format!("RUSTUP_HOME={rustup_home}"),
            "--env",
            &format!("PATH={path}"),
            "--env",
            &format!("CARGO_TARGET_DIR={}", s(target.path())),
            "--env",
            "CARGO_NET_OFFLINE=true",
            "--timeout",
            "300",
        ],
        &["cargo", "test", "--offline"],
    );
    assert_eq!(r.exit_code(), Some(0), "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("test tests::doubles ... ok"),
        "{}",
        r.stdout
    );
}

#[test]
fn the_command_starts_with_default_signal_dispositions_and_an_empty_mask() {
    // Every Rust program on the way (the CLI, the helper) ignores SIGPIPE, and posix_spawn
    // leaves glibc's internal signals ignored; none of that may reach the command.
    let r = sandbox(&[], &["cat", "/proc/self/status"]);
    assert_eq!(r.exit_code(), Some(0), "{}{}", r.stdout, r.stderr);
    for field in ["SigIgn:", "SigBlk:"] {
        let line = r
            .stdout
            .lines()
            .find(|l| l.starts_with(field))
            .unwrap_or_else(|| panic!("no {field} in {}", r.stdout));
        assert!(
            line[field.len()..].trim().chars().all(|c| c == '0'),
            "{line}"
        );
    }
    // So a writer into a closed pipe ends by SIGPIPE (128 + 13), as it does outside.
    let r = sandbox(
        &[],
        &[
            "bash",
            "-c",
            "yes | head -n1 >/dev/null; echo \"${PIPESTATUS[0]}\"",
        ],
    );
    assert_eq!(r.stdout.trim(), "141", "{}", r.stderr);
    assert!(!r.stderr.contains("Broken pipe"), "{}", r.stderr);
}

#[test]
fn the_sandbox_user_and_group_have_names_in_a_read_only_etc() {
    // Programs look their user up (`id -un`, `whoami`, Python's getpass.getuser()); without
    // an entry for uid 1000 they fail.
    let r = sh(
        &[],
        "id -un; id -gn; cat /etc/passwd /etc/group; \
         if (echo x > /etc/passwd) 2>/dev/null; then echo WROTE; fi",
    );
    assert_eq!(r.exit_code(), Some(0), "{}{}", r.stdout, r.stderr);
    let mut lines = r.stdout.lines();
    assert_eq!(lines.next(), Some("airlock"), "{}", r.stdout);
    assert_eq!(lines.next(), Some("airlock"), "{}", r.stdout);
    assert!(
        r.stdout
            .contains("airlock:x:1000:1000:airlock sandbox:/tmp:/bin/sh"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("airlock:x:1000:"), "{}", r.stdout);
    assert!(
        !r.stdout.contains("WROTE"),
        "the sandbox's /etc/passwd is writable"
    );
    // A granted /etc is the host's own, read as it is.
    let r = sh(&["--ro", "/etc"], "cat /etc/passwd");
    assert_eq!(r.exit_code(), Some(0), "{}", r.stderr);
    assert_eq!(r.stdout, std::fs::read_to_string("/etc/passwd").unwrap());
}

#[test]
fn a_failing_child_is_a_summary_not_an_error() {
    let r = sh(&[], "echo out; echo err >&2; exit 7");
    assert_eq!(r.code(), Some(7));
    assert_eq!(r.exit_code(), Some(7));
    assert_eq!(r.stdout, "out\n");
    assert_eq!(r.stderr, "err\n");
    let r = sh(&[], "kill -TERM $$");
    assert_eq!(r.summary["signal"].as_i64(), Some(15));
    assert_eq!(r.code(), Some(128 + 15));
}

#[test]
fn a_missing_command_is_a_setup_error() {
    require_full_sandbox();
    let out = airlock()
        .args(["sandbox", "run", "--", "no-such-command-airlock"])
        .output()
        .unwrap();
    // 127, as a shell says "command not found".
    assert_eq!(out.status.code(), Some(127));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no-such-command-airlock"));
}

/// The pids of processes whose command line has `arg` as one of its arguments.
fn processes_with_arg(arg: &str) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline"))
            && cmdline.split(|b| *b == 0).any(|a| a == arg.as_bytes())
        {
            pids.push(pid);
        }
    }
    pids
}

/// The path of `pid`'s cgroup in the v1 hierarchy of `controller`, as the host sees it.
fn v1_cgroup_of(pid: u32, controller: &str) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    text.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers
            .split(',')
            .any(|c| c == controller)
            .then(|| path.to_string())
    })
}

#[test]
fn the_sandbox_is_born_inside_its_cgroups_and_the_helper_leaves_them() {
    require_full_sandbox();
    if !running_as_root() {
        println!("skipped: as a non-root caller the sandbox has no cgroups (root's hierarchy)");
        return;
    }
    let marker = "2.713";
    let mut caller = airlock()
        .args(["sandbox", "run", "--max-procs", "77", "--", "sleep", marker])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let (sleeper, helper) = loop {
        // The caller's own command line has the marker too: the sleeper is the one running sleep.
        let sleepers: Vec<u32> = processes_with_arg(marker)
            .into_iter()
            .filter(|p| {
                std::fs::read_to_string(format!("/proc/{p}/comm"))
                    .is_ok_and(|c| c.trim() == "sleep")
            })
            .collect();
        let helpers: Vec<u32> = processes_with_arg("__airlock-sandbox-helper")
            .into_iter()
            .filter(|p| {
                std::fs::read_to_string(format!("/proc/{p}/stat")).is_ok_and(|stat| {
                    stat.rsplit(") ")
                        .next()
                        .and_then(|rest| rest.split(' ').nth(1))
                        == Some(caller.id().to_string().as_str())
                })
            })
            .collect();
        if let (Some(s), Some(h)) = (sleepers.first(), helpers.first()) {
            break (*s, *h);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the sandboxed sleep never appeared"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let mut run_cgroups = Vec::new();
    for controller in ["pids", "memory"] {
        let inside = v1_cgroup_of(sleeper, controller).unwrap();
        assert!(
            inside.starts_with("/airlock-sandbox-"),
            "the sandboxed process is in {controller} cgroup {inside}"
        );
        let outside = v1_cgroup_of(helper, controller).unwrap();
        assert_ne!(
            outside, inside,
            "the helper left the run's {controller} cgroup after cloning the sandbox"
        );
        run_cgroups.push(
            Path::new("/sys/fs/cgroup")
                .join(controller)
                .join(&inside[1..]),
        );
    }
    let pids_max = std::fs::read_to_string(run_cgroups[0].join("pids.max")).unwrap();
    assert_eq!(
        pids_max.trim(),
        "78",
        "the cgroup's limit is the run's --max-procs plus the sandbox's init"
    );
    assert!(caller.wait().unwrap().success());
    for dir in &run_cgroups {
        assert!(!dir.exists(), "{} was removed after the run", dir.display());
    }
}

/// A private copy of the `airlock` binary in `dir` (a hard link where possible).
fn airlock_copy(dir: &Path) -> PathBuf {
    let exe = dir.join("airlock");
    if std::fs::hard_link(env!("CARGO_BIN_EXE_airlock"), &exe).is_err() {
        std::fs::copy(env!("CARGO_BIN_EXE_airlock"), &exe).unwrap();
    }
    exe
}

fn script(path: &Path, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn runs_fall_back_to_the_callers_binary_without_a_usable_dedicated_helper() {
    require_full_sandbox();
    let d = dir();
    let exe = airlock_copy(d.path());
    let run = |cmd: &str| {
        Command::new(&exe)
            .args(["sandbox", "run", "--", "/bin/echo", cmd])
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    // No helper beside the binary: it re-executes itself as the helper.
    let out = run("alone");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "alone\n");
    // A helper from another build refuses the protocol (exit 126): the run falls back.
    let helper = d.path().join("airlock-sandbox-helper");
    script(&helper, "exit 126");
    let out = run("fallback");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "fallback\n");
    // Something else in the helper's place is an error that names it, not a silent weaker run.
    script(&helper, "exit 3");
    let out = run("broken");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&helper.display().to_string()) && err.contains("exit code 3"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn the_dedicated_helper_refuses_another_protocol_and_says_what_it_is() {
    let helper = env!("CARGO_BIN_EXE_airlock-sandbox-helper");
    let out = Command::new(helper)
        .args(["__airlock-sandbox-helper", "airlock-sandbox/0.0.0/0"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(126));
    assert!(out.stdout.is_empty() && out.stderr.is_empty());
    let out = Command::new(helper).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("airlock sandbox run"));
}

#[test]
fn cgroups_left_by_a_killed_helper_are_swept_by_the_next_run() {
    require_full_sandbox();
    if !running_as_root() {
        println!("skipped: as a non-root caller the sandbox has no cgroups (root's hierarchy)");
        return;
    }
    // A pid that no longer runs, as a helper killed with its caller leaves behind.
    let mut gone = Command::new("true").spawn().unwrap();
    let pid = gone.id();
    gone.wait().unwrap();
    let stale: Vec<PathBuf> = ["pids", "memory"]
        .iter()
        .map(|c| {
            Path::new("/sys/fs/cgroup")
                .join(c)
                .join(format!("airlock-sandbox-{pid}"))
        })
        .collect();
    for dir in &stale {
        std::fs::create_dir(dir).unwrap();
    }
    // The cgroup of a helper that still runs (here: named after this test process) stays.
    let live =
        Path::new("/sys/fs/cgroup/pids").join(format!("airlock-sandbox-{}", std::process::id()));
    std::fs::create_dir(&live).unwrap();
    let run = sandbox(&[], &["/bin/true"]);
    let live_kept = live.exists();
    let _ = std::fs::remove_dir(&live);
    assert_eq!(run.exit_code(), Some(0), "{}", run.stderr);
    for dir in &stale {
        assert!(!dir.exists(), "{} was swept", dir.display());
    }
    assert!(live_kept, "a live helper's cgroup was removed");
}

#[test]
fn output_into_a_closed_pipe_ends_quietly_instead_of_panicking() {
    // `airlock doctor | head -0`: the reader is gone before airlock writes its report.
    let mut child = airlock()
        .arg("doctor")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(141), "{stderr}");
}

// ---------------------------------------------------------------- accounting and bad input

/// `airlock sandbox run` with `args` and `cmd`, for runs that end before a summary.
fn sandbox_raw(args: &[&str], cmd: &[&str]) -> Output {
    require_full_sandbox();
    airlock()
        .args(["sandbox", "run"])
        .args(args)
        .arg("--")
        .args(cmd)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// A busy loop in the background; the script waits until it has used `ticks` clock ticks
/// (1/100 s) of CPU, so the loop is certainly still running when the sandbox ends.
fn burner_then(ticks: u32, then: &str) -> String {
    format!(
        "(while :; do :; done) & pid=$!; \
         while [ \"$(cut -d' ' -f14 /proc/$pid/stat)\" -lt {ticks} ]; do sleep 0.05; done; {then}"
    )
}

#[test]
fn cpu_time_of_processes_killed_at_the_end_is_counted() {
    // The command exits with its background burner still running: the burner is killed when
    // the sandbox ends, and its CPU time is the run's.
    let r = sh(&["--timeout", "60"], &burner_then(30, "exit 0"));
    assert_eq!(r.exit_code(), Some(0), "{}{}", r.stderr, r.summary);
    let cpu = r.summary["cpu_ms"].as_u64().unwrap();
    assert!(cpu >= 300, "cpu_ms {cpu} leaves out the killed burner");
}

#[test]
fn cpu_time_is_counted_when_the_timeout_kills_the_tree() {
    let r = sh(&["--timeout", "4"], &burner_then(30, "sleep 300"));
    assert!(r.timed_out(), "{}", r.summary);
    assert_eq!(r.summary["signal"].as_i64(), Some(9));
    let cpu = r.summary["cpu_ms"].as_u64().unwrap();
    assert!(cpu >= 300, "cpu_ms {cpu} leaves out the killed burner");
}

#[test]
fn a_process_limit_of_one_runs_the_command_but_no_child() {
    let r = sh(&["--max-procs", "1"], "/bin/true && echo forked");
    assert!(!r.stdout.contains("forked"), "{}", r.stdout);
    assert_ne!(r.exit_code(), Some(0));
    let r = sandbox(&["--max-procs", "1"], &["/bin/echo", "alone"]);
    assert_eq!(r.exit_code(), Some(0), "{}", r.stderr);
    assert_eq!(r.stdout.trim(), "alone");
}

#[test]
fn a_missing_or_unrunnable_command_exits_as_a_shell_would() {
    let missing = sandbox_raw(&[], &["no-such-command-airlock"]);
    assert_eq!(missing.status.code(), Some(127));
    let err = String::from_utf8_lossy(&missing.stderr);
    assert!(err.contains("command not found"), "{err}");
    let dir = sandbox_raw(&[], &["/usr"]);
    assert_eq!(dir.status.code(), Some(126));
    assert!(
        String::from_utf8_lossy(&dir.stderr).contains("it is a directory"),
        "{}",
        String::from_utf8_lossy(&dir.stderr)
    );
}

#[test]
fn bad_flags_and_grants_get_errors_that_name_them() {
    let d = tempfile::tempdir().unwrap();
    let lower = d.path().join("lower");
    std::fs::create_dir(&lower).unwrap();
    let dir = d.path().to_str().unwrap();
    let l = lower.to_str().unwrap();
    let cases: Vec<(Vec<String>, i32, &str)> = vec![
        (vec!["--timeout".into(), "1e20".into()], 2, "out of range"),
        (vec!["--timeout".into(), "1e-300".into()], 2, "out of range"),
        (vec!["--memory".into(), "0".into()], 2, "--memory"),
        (vec!["--max-procs".into(), "0".into()], 2, "--max-procs"),
        (
            vec!["--overlay".into(), ":/mnt/x".into()],
            2,
            "LOWER is empty",
        ),
        (
            vec!["--overlay".into(), format!("{l}:")],
            2,
            "MOUNTPOINT is empty",
        ),
        (
            vec!["--overlay".into(), format!("{l}:/")],
            125,
            "overlay mountpoint",
        ),
        (
            vec!["--overlay".into(), format!("{l}:/proc/x")],
            125,
            "/proc",
        ),
        (
            vec![
                "--overlay".into(),
                format!("{l}:/mnt/a"),
                "--overlay".into(),
                format!("{l}:/mnt/a"),
            ],
            125,
            "another --overlay",
        ),
        (vec!["--rw".into(), "/".into()], 125, "whole filesystem"),
        (
            vec!["--ro".into(), dir.into(), "--rw".into(), dir.into()],
            125,
            "both read-only and read-write",
        ),
        (
            vec!["--env".into(), "A B=1".into()],
            2,
            "not a variable name",
        ),
        (vec!["--env".into(), "=x".into()], 2, "not a variable name"),
        (
            vec!["--ro-at".into(), format!("{l}:node_modules")],
            125,
            "absolute path",
        ),
        (
            vec!["--ro-at".into(), format!("{l}:/work/../etc")],
            125,
            "`..`",
        ),
        (vec!["--ro-at".into(), l.into()], 2, "expected SRC:DST"),
        (vec!["--rw-at".into(), ":/work/x".into()], 2, "SRC is empty"),
    ];
    for (args, code, needle) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = sandbox_raw(&args, &["/bin/true"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

#[test]
fn a_granted_symlink_gives_access_to_its_target() {
    let d = tempfile::tempdir().unwrap();
    let target = d.path().join("target");
    std::fs::create_dir(&target).unwrap();
    std::fs::write(target.join("f"), "through the link\n").unwrap();
    hand_over(&target);
    let link = d.path().join("link");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let link = link.to_str().unwrap();
    let r = sandbox(&["--ro", link], &["/bin/cat", &format!("{link}/f")]);
    assert_eq!(r.stdout, "through the link\n", "{}", r.stderr);
    // Read-write through a link: the working directory is the link's target, and writes land
    // there.
    let r = sh(&["--rw", link], "pwd; echo x > written");
    assert_eq!(r.exit_code(), Some(0), "{}", r.stderr);
    assert_eq!(
        Path::new(r.stdout.trim()),
        target.canonicalize().unwrap().as_path()
    );
    assert!(target.join("written").exists());
}

#[test]
fn a_file_granted_read_write_does_not_become_the_working_directory() {
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("file");
    std::fs::write(&file, "").unwrap();
    hand_over(&file);
    let r = sandbox(&["--rw", file.to_str().unwrap()], &["/bin/pwd"]);
    assert_eq!(r.exit_code(), Some(0), "{}", r.stderr);
    // Not the file: the default, the private /tmp.
    assert_eq!(r.stdout.trim(), "/tmp");
}
