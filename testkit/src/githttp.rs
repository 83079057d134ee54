//! A smart-HTTP git server on 127.0.0.1 for tests: `git http-backend` (CGI) behind a small
//! HTTP/1.1 server with Basic authentication that answers a wrong or missing password with 401.
//! Every request is recorded. Pushes are refused on demand by a pre-receive hook that exits 1
//! while a marker file exists in the bare repository.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

/// One request the server answered.
#[derive(Debug, Clone)]
pub struct GitRequest {
    /// `GET` or `POST`.
    pub method: String,
    /// The path below the server, e.g. `/remote.git/git-receive-pack`.
    pub path: String,
    /// The query string without `?` (`service=git-receive-pack`).
    pub query: String,
    /// Whether it carried the right user and password.
    pub authorized: bool,
    /// The HTTP status it got.
    pub status: u16,
    /// Every header value as sent (so a test can check that no token leaked elsewhere).
    pub headers: Vec<(String, String)>,
}

/// The running server. It serves every bare repository below `root`.
pub struct GitHttpServer {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// The project root (`GIT_PROJECT_ROOT`).
    pub root: PathBuf,
    requests: Arc<Mutex<Vec<GitRequest>>>,
}

const REJECT_MARKER: &str = "airlock-test-reject-pushes";

impl GitHttpServer {
    /// Serve the bare repositories below `root`, accepting only `user`:`password`.
    pub fn start(root: &Path, user: &str, password: &str) -> GitHttpServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let base = format!("http://{}", listener.local_addr().expect("local addr"));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let expected = format!("Basic {}", base64(format!("{user}:{password}").as_bytes()));
        let (root2, seen, user) = (root.to_path_buf(), requests.clone(), user.to_owned());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let (root, seen, expected, user) =
                    (root2.clone(), seen.clone(), expected.clone(), user.clone());
                std::thread::spawn(move || {
                    let _ = serve_one(stream, &root, &expected, &user, &seen);
                });
            }
        });
        GitHttpServer {
            base,
            root: root.to_path_buf(),
            requests,
        }
    }

    /// The URL of the bare repository at `root/<rel>` (e.g. `remote.git`).
    pub fn url(&self, rel: &str) -> String {
        format!("{}/{}", self.base, rel.trim_start_matches('/'))
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<GitRequest> {
        self.requests.lock().unwrap().clone()
    }

    /// Pack uploads that reached `git-receive-pack` authorized and were answered 200 (a push
    /// that sent objects or ref updates; an up-to-date push sends none).
    pub fn receive_pack_posts(&self) -> usize {
        self.requests()
            .iter()
            .filter(|r| {
                r.method == "POST"
                    && r.path.ends_with("/git-receive-pack")
                    && r.authorized
                    && r.status == 200
            })
            .count()
    }

    /// Make the bare repository `root/<rel>` refuse (or accept again) every push, with a
    /// pre-receive hook that exits 1 while a marker file exists.
    pub fn reject_pushes(&self, rel: &str, reject: bool) {
        let repo = self.root.join(rel);
        let hook = repo.join("hooks/pre-receive");
        std::fs::create_dir_all(repo.join("hooks")).unwrap();
        std::fs::write(
            &hook,
            format!(
                "#!/bin/sh\nif [ -e \"{}\" ]; then echo 'pushes are closed on this test server' >&2; exit 1; fi\nexit 0\n",
                repo.join(REJECT_MARKER).display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
        let marker = repo.join(REJECT_MARKER);
        if reject {
            std::fs::write(marker, "").unwrap();
        } else {
            let _ = std::fs::remove_file(marker);
        }
    }
}

fn serve_one(
    stream: TcpStream,
    root: &Path,
    expected_auth: &str,
    user: &str,
    seen: &Mutex<Vec<GitRequest>>,
) -> std::io::Result<()> {
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    let mut first = String::new();
    if reader.read_line(&mut first)? == 0 {
        return Ok(());
    }
    let mut parts = first.split_whitespace();
    let method = parts.next().unwrap_or("").to_owned();
    let target = parts.next().unwrap_or("").to_owned();
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p.to_owned(), q.to_owned()),
        None => (target.clone(), String::new()),
    };
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            break;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.push((k.trim().to_owned(), v.trim().to_owned()));
        }
    }
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    };
    if header("Expect").is_some_and(|e| e.eq_ignore_ascii_case("100-continue")) {
        writer.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
    }
    let body = if header("Transfer-Encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked")) {
        read_chunked(&mut reader)?
    } else {
        let len: usize = header("Content-Length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0u8; len];
        reader.read_exact(&mut body)?;
        body
    };
    let authorized = header("Authorization").as_deref() == Some(expected_auth);
    let mut record = GitRequest {
        method: method.clone(),
        path: path.clone(),
        query: query.clone(),
        authorized,
        status: 401,
        headers: headers.clone(),
    };
    if !authorized {
        seen.lock().unwrap().push(record);
        let text = "authentication required\n";
        write!(
            writer,
            "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"airlock-test\"\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
            text.len()
        )?;
        return writer.flush();
    }
    let mut cgi = Command::new("git");
    cgi.arg("http-backend")
        .env("GIT_PROJECT_ROOT", root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("REQUEST_METHOD", &method)
        .env("PATH_INFO", &path)
        .env("QUERY_STRING", &query)
        .env("CONTENT_TYPE", header("Content-Type").unwrap_or_default())
        .env("CONTENT_LENGTH", body.len().to_string())
        .env("REMOTE_USER", user)
        .env("REMOTE_ADDR", "127.0.0.1")
        .env("SERVER_PROTOCOL", "HTTP/1.1")
        .env("GATEWAY_INTERFACE", "CGI/1.1")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if let Some(encoding) = header("Content-Encoding") {
        cgi.env("HTTP_CONTENT_ENCODING", encoding);
    }
    if let Some(protocol) = header("Git-Protocol") {
        cgi.env("GIT_PROTOCOL", protocol);
    }
    let mut child = cgi.spawn()?;
    let mut stdin = child.stdin.take().expect("piped stdin");
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(&body);
    });
    let mut out = Vec::new();
    child
        .stdout
        .take()
        .expect("piped stdout")
        .read_to_end(&mut out)?;
    let _ = feeder.join();
    let _ = child.wait();
    // The CGI reply: a header block (`Status:` among it), a blank line, the body.
    let (head, reply_body) = split_cgi(&out);
    let mut status_line = "200 OK".to_owned();
    let mut reply_headers = Vec::new();
    for line in head.lines() {
        if let Some((k, v)) = line.split_once(':') {
            if k.trim().eq_ignore_ascii_case("Status") {
                status_line = v.trim().to_owned();
            } else {
                reply_headers.push(format!("{}: {}", k.trim(), v.trim()));
            }
        }
    }
    record.status = status_line
        .split_whitespace()
        .next()
        .and_then(|c| c.parse().ok())
        .unwrap_or(500);
    seen.lock().unwrap().push(record);
    let mut reply = format!("HTTP/1.1 {status_line}\r\n");
    for h in reply_headers {
        reply.push_str(&h);
        reply.push_str("\r\n");
    }
    reply.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        reply_body.len()
    ));
    writer.write_all(reply.as_bytes())?;
    writer.write_all(reply_body)?;
    writer.flush()
}

fn split_cgi(out: &[u8]) -> (String, &[u8]) {
    for (i, w) in out.windows(2).enumerate() {
        if w == b"\n\n" {
            return (
                String::from_utf8_lossy(&out[..i]).into_owned(),
                &out[i + 2..],
            );
        }
        if w == b"\r\n" && out[i + 2..].starts_with(b"\r\n") {
            return (
                String::from_utf8_lossy(&out[..i]).into_owned(),
                &out[i + 4..],
            );
        }
    }
    (String::from_utf8_lossy(out).into_owned(), &[])
}

fn read_chunked(reader: &mut impl BufRead) -> std::io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut size = String::new();
        reader.read_line(&mut size)?;
        let size = size.trim().split(';').next().unwrap_or("0");
        let n = usize::from_str_radix(size, 16)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        if n == 0 {
            // Trailers, up to the blank line.
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line)? == 0 || line.trim().is_empty() {
                    return Ok(body);
                }
            }
        }
        let start = body.len();
        body.resize(start + n, 0);
        reader.read_exact(&mut body[start..])?;
        let mut crlf = [0u8; 2];
        reader.read_exact(&mut crlf)?;
    }
}

/// Standard base64 with padding (for the expected `Authorization` header).
pub fn base64(input: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in input.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[test]
fn base64_matches_the_rfc_examples() {
    assert_eq!(base64(b"f"), "Zg==");
    assert_eq!(base64(b"fo"), "Zm8=");
    assert_eq!(base64(b"foo"), "Zm9v");
    assert_eq!(base64(b"foobar"), "Zm9vYmFy");
}
