//! The network transport of the real `airlock-broker serve`: TCP with mutual TLS beside the
//! Unix socket. A worker whose certificate the client CA signed is answered, over the same line
//! protocol; a client without a certificate, with a stranger's, speaking plain text or saying
//! nothing is refused, and the broker goes on serving both transports. A broken `[tls]` keeps
//! the broker from starting, naming the file.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use airlock_broker::BrokerReply;
use airlock_protocol::tls::{
    PROTOCOL_VERSIONS, provider, read_certificates, read_private_key, read_roots,
};
use airlock_protocol::{ClaimRequest, IssueKey, Request};
use airlock_testkit::tls::Pki;
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, StreamOwned};

use crate::harness::{BIN, Fixture, Options};

fn tls_tables(pki: &Pki) -> String {
    format!(
        "listen = \"127.0.0.1:0\"\n\n[tls]\ncert = \"{}\"\nkey = \"{}\"\nclient_ca = \"{}\"\n",
        pki.server_cert.display(),
        pki.server_key.display(),
        pki.ca.display()
    )
}

/// A fixture whose broker also listens with TLS; the certificates live in their own folder,
/// kept as long as the fixture.
fn tls_fixture() -> (Fixture, Pki, tempfile::TempDir) {
    let certs = tempfile::Builder::new()
        .prefix("broker-it-tls-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let pki = Pki::create(certs.path());
    let fx = Fixture::with(Options {
        extra_config: tls_tables(&pki),
        ..Options::default()
    });
    (fx, pki, certs)
}

/// Wait until the broker's log satisfies `done` (a line is written once the connection it
/// reports is closed); answers the log.
fn log_until(fx: &Fixture, done: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let log = std::fs::read_to_string(fx.dir.path().join("broker.log")).unwrap_or_default();
        if done(&log) {
            return log;
        }
        assert!(Instant::now() < deadline, "{log}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Start `serve` with its stderr in `<fixture>/broker.log`; answers the TLS listener's address.
fn start_logged(fx: &mut Fixture) -> String {
    let log = fx.dir.path().join("broker.log");
    let child = Command::new(BIN)
        .arg("--config")
        .arg(&fx.config)
        .arg("serve")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    fx.server = Some(child);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if let Some(address) = text
            .lines()
            .find_map(|l| l.strip_prefix("airlock-broker: listening on tls://"))
            && std::os::unix::net::UnixStream::connect(&fx.socket).is_ok()
        {
            return address.split_whitespace().next().unwrap().to_owned();
        }
        assert!(
            fx.server_exit().is_none(),
            "the broker exited: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        assert!(Instant::now() < deadline, "broker did not listen: {text}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn client_config(pki: &Pki, identity: Option<(&Path, &Path)>) -> Arc<ClientConfig> {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(PROTOCOL_VERSIONS)
        .unwrap()
        .with_root_certificates(read_roots("ca", &pki.ca).unwrap());
    Arc::new(match identity {
        Some((cert, key)) => builder
            .with_client_auth_cert(
                read_certificates("cert", cert).unwrap(),
                read_private_key("key", key).unwrap(),
            )
            .unwrap(),
        None => builder.with_no_client_auth(),
    })
}

type Tls = StreamOwned<ClientConnection, TcpStream>;

fn connect(address: &str, config: Arc<ClientConfig>) -> BufReader<Tls> {
    let tcp = TcpStream::connect(address).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let connection =
        ClientConnection::new(config, ServerName::try_from("localhost").unwrap()).unwrap();
    BufReader::new(StreamOwned::new(connection, tcp))
}

/// One request line and its reply line, or the I/O failure (a refused handshake).
fn exchange(stream: &mut BufReader<Tls>, request: &Request) -> std::io::Result<BrokerReply> {
    let mut line = serde_json::to_string(request).unwrap();
    line.push('\n');
    stream.get_mut().write_all(line.as_bytes())?;
    stream.get_mut().flush()?;
    let mut reply = String::new();
    if stream.read_line(&mut reply)? == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "closed without a reply",
        ));
    }
    Ok(serde_json::from_str(reply.trim_end()).unwrap())
}

fn claim(holder: &str, n: u64) -> Request {
    Request::Claim(ClaimRequest {
        issue: IssueKey {
            repository: "acme/calc".to_owned(),
            issue_number: n,
        },
        holder: holder.to_owned(),
        lease_secs: 600,
    })
}

#[test]
fn a_worker_with_a_certificate_of_the_client_ca_is_answered_over_tls_and_strangers_are_refused() {
    let (mut fx, pki, _certs) = tls_fixture();
    let address = start_logged(&mut fx);
    let worker = client_config(&pki, Some((&pki.client_cert, &pki.client_key)));

    // A worker: several requests on one connection, each answered as on the socket.
    let mut good = connect(&address, worker.clone());
    let reply = exchange(&mut good, &claim("worker-7", 1)).unwrap();
    assert!(
        matches!(reply, BrokerReply::Claimed { acquired: true, .. }),
        "{reply:?}"
    );
    let wt = fx.worktree("run-tls");
    let mut registration = fx.registration("run-tls", &wt);
    registration.repository = "acme/elsewhere".to_owned();
    let reply = exchange(&mut good, &Request::RegisterRun(Box::new(registration))).unwrap();
    match &reply {
        BrokerReply::Failed { message } => assert!(
            message.contains("repository \"acme/elsewhere\" is not configured in broker.toml"),
            "{message}"
        ),
        other => panic!("expected the refusal of an unknown repository, got {other:?}"),
    }
    drop(good);

    // No certificate, a stranger's certificate: refused in the handshake, never answered.
    for (who, config) in [
        ("no certificate", client_config(&pki, None)),
        (
            "a stranger's certificate",
            client_config(&pki, Some((&pki.other_client_cert, &pki.other_client_key))),
        ),
    ] {
        let mut refused = connect(&address, config);
        let result = exchange(&mut refused, &claim("stranger", 2));
        assert!(result.is_err(), "{who}: answered {result:?}");
    }

    // Plain text on the TLS port: no reply line, the connection closed.
    let mut plain = TcpStream::connect(&address).unwrap();
    plain
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    plain
        .write_all(format!("{}\n", serde_json::to_string(&claim("plain", 3)).unwrap()).as_bytes())
        .unwrap();
    let mut answer = Vec::new();
    let _ = plain.read_to_end(&mut answer);
    assert!(
        !String::from_utf8_lossy(&answer).contains("status"),
        "plain text was answered: {answer:?}"
    );

    // A client that connects and says nothing is let go: the broker closes the connection.
    let mut silent = TcpStream::connect(&address).unwrap();
    silent
        .set_read_timeout(Some(Duration::from_secs(120)))
        .unwrap();
    let mut nothing = Vec::new();
    let closed = silent.read_to_end(&mut nothing);
    assert!(
        closed.is_ok()
            || closed
                .as_ref()
                .is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset),
        "the silent connection was not closed by the broker: {closed:?}"
    );

    // The broker still serves both transports, issue 2 untouched by the strangers.
    let mut again = connect(&address, worker);
    let reply = exchange(&mut again, &claim("worker-7", 2)).unwrap();
    assert!(
        matches!(reply, BrokerReply::Claimed { acquired: true, .. }),
        "{reply:?}"
    );
    let reply = fx.client().request(&claim("worker-8", 1)).unwrap();
    assert!(matches!(reply, BrokerReply::ClaimTaken { .. }), "{reply:?}");

    // The log names each worker by its certificate's subject, and each refusal (no
    // certificate, the stranger, plain text, the silent client).
    let count = |log: &str, needle: &str| log.lines().filter(|l| l.contains(needle)).count();
    let log = log_until(&fx, |log| count(log, "refused: ") >= 4);
    assert_eq!(
        count(&log, ": CN=worker-7.test, O=airlock tests"),
        2,
        "{log}"
    );
    assert_eq!(count(&log, "refused: "), 4, "{log}");
}

/// Run `serve` with the fixture's configuration and expect it to stop; answers its stderr.
fn serve_fails(fx: &Fixture) -> String {
    let mut child = Command::new(BIN)
        .arg("--config")
        .arg(&fx.config)
        .arg("serve")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("serve kept running with a broken [tls]");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(!status.success(), "{stderr}");
    assert!(
        !fx.socket.exists(),
        "the socket appeared before [tls] was read"
    );
    stderr
}

#[test]
fn serve_refuses_to_start_on_a_missing_or_non_pem_tls_file_naming_it() {
    let (fx, pki, _certs) = tls_fixture();
    let config = std::fs::read_to_string(&fx.config).unwrap();

    std::fs::remove_file(&pki.server_cert).unwrap();
    let stderr = serve_fails(&fx);
    assert!(
        stderr.contains(&format!(
            "tls.cert {}: cannot read",
            pki.server_cert.display()
        )),
        "{stderr}"
    );

    std::fs::copy(&pki.client_cert, &pki.server_cert).unwrap();
    std::fs::write(&pki.server_key, "this is no key\n").unwrap();
    let stderr = serve_fails(&fx);
    assert!(
        stderr.contains(&format!(
            "tls.key {}: holds no PEM private key",
            pki.server_key.display()
        )),
        "{stderr}"
    );

    // `listen` alone is a configuration error naming what is missing, for every command.
    let listen_only = config.replace(&tls_tables(&pki), "listen = \"127.0.0.1:0\"\n");
    assert_ne!(listen_only, config);
    std::fs::write(&fx.config, listen_only).unwrap();
    let out = fx.cli(&["queue"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("listen is set but [tls] is missing"),
        "{stderr}"
    );
}
