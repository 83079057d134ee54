//! `airlock-broker serve`: the Unix socket (mode 0600) supervisors talk to, one thread per
//! connection, one JSON reply line per request line.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::protocol::{BrokerReply, Request};
use crate::service::Broker;

/// Longest request line accepted (the open_pr arguments are bounded far below this).
pub const MAX_REQUEST_BYTES: u64 = 1024 * 1024;

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

fn tracing_like_log(line: &str) {
    eprintln!("airlock-broker: {line}");
}

fn handle_connection(broker: &Broker, stream: UnixStream) -> std::io::Result<()> {
    let mut writer = stream.try_clone()?;
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
                Ok(request) => broker.handle(request),
                Err(e) => BrokerReply::Failed {
                    message: format!("not a request: {e}"),
                },
            }
        };
        let mut text = serde_json::to_string(&reply).unwrap_or_else(|e| {
            format!("{{\"status\":\"failed\",\"message\":\"cannot encode reply: {e}\"}}")
        });
        text.push('\n');
        writer.write_all(text.as_bytes())?;
        writer.flush()?;
        if n as u64 > MAX_REQUEST_BYTES {
            return Ok(());
        }
    }
}
