//! `airlock-broker serve`: the transports supervisors talk to, the Unix socket (mode 0600)
//! and, when configured, TCP with mutual TLS (`crate::tls`); one thread per connection and one
//! JSON reply line per request line on both, through the same per-connection loop.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, ToSocketAddrs};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::service::Broker;
use airlock_protocol::{BrokerReply, Request};

/// Longest request line accepted: an `open_pr` that carries its change (a patch of at most
/// [`airlock_protocol::MAX_PATCH_BYTES`], base64) with its arguments fits.
pub const MAX_REQUEST_BYTES: u64 = 16 * 1024 * 1024;

/// Bind the socket at `path` with mode 0600. The socket is created under a temporary name,
/// restricted, then renamed into place, so it is never reachable with wider permissions. A
/// stale socket left by a killed broker is replaced; a live one is an error. `before_listening`
/// runs once this process is known to be the only broker on `path`, before the socket appears
/// (clean-up of a killed predecessor's leftovers).
pub fn bind(path: &Path, before_listening: impl FnOnce() -> Result<()>) -> Result<UnixListener> {
    if let Some(parent) = path.parent()
        && !parent.as_os_str().is_empty()
    {
        std::fs::create_dir_all(parent)
            .map_err(Error::io(format!("creating {}", parent.display())))?;
    }
    if let Ok(meta) = path.symlink_metadata() {
        if !meta.file_type().is_socket() {
            return Err(Error::Io {
                context: format!("socket path {}", path.display()),
                source: std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    "exists and is not a socket",
                ),
            });
        }
        if UnixStream::connect(path).is_ok() {
            return Err(Error::Io {
                context: format!("socket {}", path.display()),
                source: std::io::Error::new(
                    std::io::ErrorKind::AddrInUse,
                    "another broker is listening",
                ),
            });
        }
        std::fs::remove_file(path).map_err(Error::io(format!(
            "removing stale socket {}",
            path.display()
        )))?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let listener =
        UnixListener::bind(&tmp).map_err(Error::io(format!("binding {}", tmp.display())))?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))
        .map_err(Error::io(format!("restricting {}", tmp.display())))?;
    before_listening()?;
    std::fs::rename(&tmp, path).map_err(Error::io(format!(
        "moving the socket to {}",
        path.display()
    )))?;
    Ok(listener)
}

/// Serve connections until the process is stopped.
pub fn serve(broker: Arc<Broker>, listener: UnixListener) -> Result<()> {
    for stream in listener.incoming() {
        let stream = match stream {
            Ok(s) => s,
            Err(e) => {
                tracing_like_log(&format!("accept failed: {e}"));
                continue;
            }
        };
        let broker = broker.clone();
        std::thread::spawn(move || {
            if let Err(e) = handle_connection(&broker, stream) {
                tracing_like_log(&format!("connection ended: {e}"));
            }
        });
    }
    Ok(())
}

/// How long an authenticated TLS connection may stay silent between two requests (a
/// supervisor opens one connection per request): a peer whose host went away without closing
/// the connection frees its thread after this.
pub const TLS_IDLE_TIMEOUT: Duration = Duration::from_secs(600);

/// Bind the TCP listener of `listen` (`HOST:PORT`; port 0 picks a free port).
pub fn bind_tls(listen: &str) -> Result<TcpListener> {
    let addresses: Vec<_> = listen
        .to_socket_addrs()
        .map_err(Error::io(format!("resolving listen = {listen:?}")))?
        .collect();
    TcpListener::bind(&addresses[..]).map_err(Error::io(format!("binding listen = {listen:?}")))
}

/// Serve TLS connections until the process is stopped: each on a thread of its own, its
/// handshake bounded by [`crate::tls::HANDSHAKE_TIMEOUT`], the client's certificate subject
/// logged, then the same line protocol as the Unix socket.
pub fn serve_tls(
    broker: Arc<Broker>,
    listener: TcpListener,
    config: Arc<rustls::ServerConfig>,
) -> Result<()> {
    for stream in listener.incoming() {
        let stream = match stream {
            Ok(s) => s,
            Err(e) => {
                tracing_like_log(&format!("tls accept failed: {e}"));
                continue;
            }
        };
        let (broker, config) = (broker.clone(), config.clone());
        std::thread::spawn(move || {
            let peer = stream
                .peer_addr()
                .map_or_else(|_| "an unknown address".to_owned(), |a| a.to_string());
            let (stream, subject) = match crate::tls::accept(stream, &config) {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing_like_log(&format!("tls connection from {peer} refused: {e}"));
                    return;
                }
            };
            tracing_like_log(&format!("tls connection from {peer}: {subject}"));
            let timeouts = stream
                .sock
                .set_read_timeout(Some(TLS_IDLE_TIMEOUT))
                .and_then(|()| stream.sock.set_write_timeout(Some(TLS_IDLE_TIMEOUT)));
            let ended = timeouts.and_then(|()| handle_connection(&broker, stream));
            match ended {
                Ok(()) => {}
                // A client that closes without TLS's close_notify ends its connection all
                // the same: it had its replies.
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {}
                Err(e) => tracing_like_log(&format!("tls connection from {subject} ended: {e}")),
            }
        });
    }
    Ok(())
}

fn tracing_like_log(line: &str) {
    eprintln!("airlock-broker: {line}");
}

/// One connection's requests, a line each, answered in order until the peer closes (either
/// transport: the Unix socket or an authenticated TLS stream).
fn handle_connection<S: Read + Write>(broker: &Arc<Broker>, stream: S) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        let n = std::io::Read::take(&mut reader, MAX_REQUEST_BYTES + 1).read_line(&mut line)?;
        if n == 0 {
            return Ok(());
        }
        let reply = if n as u64 > MAX_REQUEST_BYTES {
            BrokerReply::Failed {
                message: format!("request longer than {MAX_REQUEST_BYTES} bytes"),
            }
        } else {
            match serde_json::from_str::<Request>(line.trim_end()) {
                Ok(request) => {
                    let registered = match &request {
                        Request::RegisterRun(run) => Some(run.clone()),
                        _ => None,
                    };
                    let reply = broker.handle(request);
                    // A registered run's base full run is taken now, beside its agent's work,
                    // for its witness to reuse.
                    if let (Some(run), BrokerReply::Registered { .. }) = (registered, &reply) {
                        let broker = Arc::clone(broker);
                        std::thread::spawn(move || crate::intake::warm_base(&broker, &run));
                    }
                    reply
                }
                Err(e) => BrokerReply::Failed {
                    message: format!("not a request: {e}"),
                },
            }
        };
        let mut text = serde_json::to_string(&reply).unwrap_or_else(|e| {
            format!("{{\"status\":\"failed\",\"message\":\"cannot encode reply: {e}\"}}")
        });
        text.push('\n');
        let writer = reader.get_mut();
        writer.write_all(text.as_bytes())?;
        writer.flush()?;
        if n as u64 > MAX_REQUEST_BYTES {
            return Ok(());
        }
    }
}
