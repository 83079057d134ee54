//! The proxy itself: one thread per client connection, HTTP/1.1 `CONNECT` tunnels and
//! absolute-URI plain-HTTP requests, each admitted by [`EgressRules`] before any byte leaves.
//!
//! What it guards against, in the order it checks: a request that is not a proxy request
//! (origin-form, a scheme other than `http`), a plain-HTTP `Host` header that names another
//! host than the URL (virtual-hosting around the allowlist), a method other than a read when
//! only reads pass, a host or port no entry admits, a name that does not resolve, and a name
//! that resolves to an internal address (loopback, private, link-local, metadata) not listed on
//! its own. Names are resolved once, every answer is checked, and the connection goes to a
//! checked address: a name whose answers change between two lookups (DNS rebinding) gains
//! nothing. A plain-HTTP request is forwarded alone, with `Connection: close`, and the
//! client's further bytes are dropped, so a second, pipelined request cannot ride on an
//! admitted connection.

use airlock_policies::network::{
    BlockReason, BlockedAttempt, EgressRules, MAX_BLOCKED_ATTEMPTS, MAX_BLOCKED_HOST_CHARS,
    RequestHost, internal_address,
};
use std::collections::BTreeSet;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The longest request head the proxy reads.
pub const MAX_HEAD_BYTES: usize = 32 * 1024;
/// How long a client has to send its request head.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the proxy waits for an upstream connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// Client connections served at once; more are answered `503`.
pub const MAX_CONNECTIONS: usize = 256;

/// Name resolution, outside the sandbox. The system's resolver by default; tests give their
/// own.
pub trait Resolve: Send + Sync {
    /// Every address `host` resolves to.
    fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<IpAddr>>;
}

/// The host's resolver (`getaddrinfo`).
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemResolver;

impl Resolve for SystemResolver {
    fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<IpAddr>> {
        Ok((host, port).to_socket_addrs()?.map(|a| a.ip()).collect())
    }
}

/// An allowlisting HTTP proxy for one command. Share it with `Arc`; [`EgressProxy::serve`]
/// runs its accept loop, [`EgressProxy::blocked`] says what it refused.
pub struct EgressProxy {
    rules: EgressRules,
    resolver: Box<dyn Resolve>,
    blocked: Mutex<Refusals>,
    active: AtomicUsize,
}

#[derive(Default)]
struct Refusals {
    seen: BTreeSet<(String, u16)>,
    list: Vec<BlockedAttempt>,
    more: usize,
}

impl std::fmt::Debug for EgressProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EgressProxy")
            .field("rules", &self.rules)
            .finish_non_exhaustive()
    }
}

/// What the proxy decided for one request, before connecting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Connect to this address.
    Connect(SocketAddr),
    /// Refused, for this reason.
    Refuse(BlockReason),
}

impl EgressProxy {
    /// A proxy that admits what `rules` admit, resolving with the system's resolver.
    pub fn new(rules: EgressRules) -> Arc<EgressProxy> {
        EgressProxy::with_resolver(rules, Box::new(SystemResolver))
    }

    /// A proxy with its own resolver.
    pub fn with_resolver(rules: EgressRules, resolver: Box<dyn Resolve>) -> Arc<EgressProxy> {
        Arc::new(EgressProxy {
            rules,
            resolver,
            blocked: Mutex::new(Refusals::default()),
            active: AtomicUsize::new(0),
        })
    }

    /// The rules it applies.
    pub fn rules(&self) -> &EgressRules {
        &self.rules
    }

    /// Accept and serve connections until `accept` fails (the listener was shut down).
    pub fn serve(self: &Arc<Self>, listener: TcpListener) {
        loop {
            let client = match listener.accept() {
                Ok((client, _)) => client,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => continue,
                Err(_) => return,
            };
            if self.active.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
                self.active.fetch_sub(1, Ordering::SeqCst);
                let mut client = client;
                let _ = respond(
                    &mut client,
                    503,
                    "Service Unavailable",
                    "too many connections",
                );
                continue;
            }
            let me = Arc::clone(self);
            let spawned = std::thread::Builder::new()
                .name("airlock-egress-conn".into())
                .spawn(move || {
                    let _ = me.handle(client);
                    me.active.fetch_sub(1, Ordering::SeqCst);
                });
            if spawned.is_err() {
                self.active.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }

    /// The refused attempts so far, once per host and port, in the order first seen (at most
    /// [`MAX_BLOCKED_ATTEMPTS`]).
    pub fn blocked(&self) -> Vec<BlockedAttempt> {
        self.blocked
            .lock()
            .map(|r| r.list.clone())
            .unwrap_or_default()
    }

    /// Refused attempts past [`MAX_BLOCKED_ATTEMPTS`], counted only.
    pub fn blocked_beyond_limit(&self) -> usize {
        self.blocked.lock().map(|r| r.more).unwrap_or(0)
    }

    /// Decide a request for `host` on `port`: the allowlist, then the name's addresses.
    pub fn decide(&self, host: &RequestHost, port: u16) -> Verdict {
        if !self.rules.admits(host, port) {
            return Verdict::Refuse(BlockReason::NotAllowed);
        }
        match host {
            // An address is admitted only when listed on its own, so it may be internal.
            RequestHost::Ip(ip) => Verdict::Connect(SocketAddr::new(*ip, port)),
            RequestHost::Name(name) => {
                let addresses = match self.resolver.resolve(name, port) {
                    Ok(a) if !a.is_empty() => a,
                    _ => return Verdict::Refuse(BlockReason::Unresolved),
                };
                for ip in &addresses {
                    if let Some(class) = internal_address(*ip)
                        && !self.rules.lists_address(*ip, port)
                    {
                        return Verdict::Refuse(BlockReason::InternalAddress {
                            address: *ip,
                            class,
                        });
                    }
                }
                Verdict::Connect(SocketAddr::new(addresses[0], port))
            }
        }
    }

    fn record(&self, host: &str, port: u16, reason: BlockReason) {
        // What the client named is shown to people: printable ASCII only, the rest `?`.
        let host: String = host
            .chars()
            .take(MAX_BLOCKED_HOST_CHARS)
            .map(|c| if c.is_ascii_graphic() { c } else { '?' })
            .collect();
        let Ok(mut refusals) = self.blocked.lock() else {
            return;
        };
        if !refusals.seen.insert((host.clone(), port)) {
            return;
        }
        if refusals.list.len() >= MAX_BLOCKED_ATTEMPTS {
            refusals.more += 1;
            return;
        }
        refusals.list.push(BlockedAttempt { host, port, reason });
    }

    fn refuse(
        &self,
        client: &mut TcpStream,
        host: &str,
        port: u16,
        reason: BlockReason,
    ) -> io::Result<()> {
        let body = format!(
            "airlock egress proxy: {host}:{port} refused: {reason}. The run's network \
             allowlist decides what a sandboxed command may reach.\n"
        );
        self.record(host, port, reason);
        respond(client, 403, "Forbidden", &body)
    }

    /// Decide `host` on `port` and connect to the checked address; a refusal (403) or an
    /// unreachable upstream (502) is answered to the client and gives `None`.
    fn admit_and_connect(
        &self,
        client: &mut TcpStream,
        host: &RequestHost,
        shown: &str,
        port: u16,
    ) -> io::Result<Option<TcpStream>> {
        let address = match self.decide(host, port) {
            Verdict::Connect(a) => a,
            Verdict::Refuse(reason) => {
                self.refuse(client, shown, port, reason)?;
                return Ok(None);
            }
        };
        match TcpStream::connect_timeout(&address, CONNECT_TIMEOUT) {
            Ok(s) => Ok(Some(s)),
            Err(e) => {
                let body = format!("airlock egress proxy: could not reach {shown}:{port}: {e}\n");
                respond(client, 502, "Bad Gateway", &body)?;
                Ok(None)
            }
        }
    }

    fn handle(&self, mut client: TcpStream) -> io::Result<()> {
        client.set_read_timeout(Some(HEAD_TIMEOUT))?;
        let Some((head, rest)) = read_head(&mut client)? else {
            return respond(&mut client, 400, "Bad Request", "no complete request head");
        };
        let mut headers = [httparse::EMPTY_HEADER; 96];
        let mut request = httparse::Request::new(&mut headers);
        match request.parse(&head) {
            Ok(httparse::Status::Complete(_)) => {}
            _ => return respond(&mut client, 400, "Bad Request", "malformed request head"),
        }
        let (Some(method), Some(target)) = (request.method, request.path) else {
            return respond(&mut client, 400, "Bad Request", "malformed request line");
        };
        let method = method.to_string();
        let target = target.to_string();
        let headers: Vec<(String, Vec<u8>)> = request
            .headers
            .iter()
            .map(|h| (h.name.to_string(), h.value.to_vec()))
            .collect();
        client.set_read_timeout(None)?;
        if method.eq_ignore_ascii_case("CONNECT") {
            self.tunnel(client, &target, rest)
        } else {
            self.forward(client, &method, &target, &headers, rest)
        }
    }

    fn tunnel(&self, mut client: TcpStream, authority: &str, rest: Vec<u8>) -> io::Result<()> {
        let Some((host_text, port)) = split_authority(authority, None) else {
            return respond(
                &mut client,
                400,
                "Bad Request",
                "CONNECT needs HOST:PORT as its target",
            );
        };
        let Some(host) = RequestHost::parse(host_text) else {
            let shown = host_text.to_string();
            return self.refuse(&mut client, &shown, port, BlockReason::NotAllowed);
        };
        let shown = host.to_string();
        if self.rules.read_only {
            let reason = BlockReason::MethodNotAllowed {
                method: "CONNECT".into(),
            };
            return self.refuse(&mut client, &shown, port, reason);
        }
        let Some(mut upstream) = self.admit_and_connect(&mut client, &host, &shown, port)? else {
            return Ok(());
        };
        client.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")?;
        if !rest.is_empty() {
            upstream.write_all(&rest)?;
        }
        relay(client, upstream)
    }

    fn forward(
        &self,
        mut client: TcpStream,
        method: &str,
        target: &str,
        headers: &[(String, Vec<u8>)],
        rest: Vec<u8>,
    ) -> io::Result<()> {
        let Ok(url) = url::Url::parse(target) else {
            return respond(
                &mut client,
                400,
                "Bad Request",
                "this is an egress proxy: send absolute http:// URLs, or CONNECT for https",
            );
        };
        if url.scheme() != "http" {
            return respond(
                &mut client,
                400,
                "Bad Request",
                "only http:// URLs are forwarded; https goes through CONNECT",
            );
        }
        let (Some(host_text), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
            return respond(&mut client, 400, "Bad Request", "the URL names no host");
        };
        let Some(host) = RequestHost::parse(host_text) else {
            return respond(
                &mut client,
                400,
                "Bad Request",
                "the URL's host is not a host",
            );
        };
        let shown = host.to_string();
        if let Some(value) = header(headers, "host") {
            let text = String::from_utf8_lossy(value).into_owned();
            let same = split_authority(&text, Some(80))
                .and_then(|(h, p)| RequestHost::parse(h).map(|h| (h, p)))
                .is_some_and(|(h, p)| h == host && p == port);
            if !same {
                let reason = BlockReason::HostMismatch {
                    header: text.chars().take(MAX_BLOCKED_HOST_CHARS).collect(),
                };
                return self.refuse(&mut client, &shown, port, reason);
            }
        }
        if self.rules.read_only && !matches!(method, "GET" | "HEAD") {
            let reason = BlockReason::MethodNotAllowed {
                method: method.chars().take(32).collect(),
            };
            return self.refuse(&mut client, &shown, port, reason);
        }
        if header(headers, "transfer-encoding").is_some() {
            return respond(
                &mut client,
                411,
                "Length Required",
                "the egress proxy forwards request bodies with a Content-Length only",
            );
        }
        let body_len = match header(headers, "content-length") {
            None => 0,
            Some(v) => match std::str::from_utf8(v)
                .ok()
                .and_then(|t| t.trim().parse::<u64>().ok())
            {
                Some(n) => n,
                None => return respond(&mut client, 400, "Bad Request", "bad Content-Length"),
            },
        };
        let Some(mut upstream) = self.admit_and_connect(&mut client, &host, &shown, port)? else {
            return Ok(());
        };
        let mut path = url.path().to_string();
        if let Some(query) = url.query() {
            path.push('?');
            path.push_str(query);
        }
        let mut out = format!("{method} {path} HTTP/1.1\r\n").into_bytes();
        for (name, value) in headers {
            if is_hop_by_hop(name) {
                continue;
            }
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value);
            out.extend_from_slice(b"\r\n");
        }
        if header(headers, "host").is_none() {
            out.extend_from_slice(format!("Host: {}\r\n", url_authority(&url)).as_bytes());
        }
        out.extend_from_slice(b"Connection: close\r\n\r\n");
        upstream.write_all(&out)?;
        // The body and nothing after it: a pipelined second request is dropped.
        let first = rest.len().min(body_len as usize);
        upstream.write_all(&rest[..first])?;
        let remaining = body_len - first as u64;
        if remaining > 0 {
            io::copy(&mut (&client).take(remaining), &mut upstream)?;
        }
        io::copy(&mut upstream, &mut client)?;
        let _ = client.shutdown(Shutdown::Both);
        Ok(())
    }
}

/// Read up to the end of the request head; returns it and the bytes that followed it.
fn read_head(client: &mut TcpStream) -> io::Result<Option<(Vec<u8>, Vec<u8>)>> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        let n = match client.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        if n == 0 {
            return Ok(None);
        }
        let from = buf.len().saturating_sub(3);
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf[from..].windows(4).position(|w| w == b"\r\n\r\n") {
            let end = from + end + 4;
            let rest = buf.split_off(end);
            return Ok(Some((buf, rest)));
        }
        if buf.len() > MAX_HEAD_BYTES {
            return Ok(None);
        }
    }
}

/// `HOST:PORT` (the host possibly `[v6]`); with `default_port`, the port may be left out.
fn split_authority(text: &str, default_port: Option<u16>) -> Option<(&str, u16)> {
    let text = text.trim();
    let (host, port) = if let Some(inner) = text.strip_prefix('[') {
        let end = inner.find(']')?;
        let after = &inner[end + 1..];
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p),
            None if after.is_empty() => None,
            None => return None,
        };
        (&text[..end + 2], port)
    } else {
        match text.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (text, None),
        }
    };
    let port = match port {
        Some(p) => p.parse::<u16>().ok().filter(|p| *p != 0)?,
        None => default_port?,
    };
    (!host.is_empty()).then_some((host, port))
}

fn header<'a>(headers: &'a [(String, Vec<u8>)], name: &str) -> Option<&'a [u8]> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_slice())
}

fn is_hop_by_hop(name: &str) -> bool {
    [
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authorization",
        "proxy-authenticate",
        "te",
        "trailer",
        "upgrade",
    ]
    .iter()
    .any(|h| name.eq_ignore_ascii_case(h))
}

fn url_authority(url: &url::Url) -> String {
    match (url.host_str(), url.port()) {
        (Some(h), Some(p)) => format!("{h}:{p}"),
        (Some(h), None) => h.to_string(),
        _ => String::new(),
    }
}

fn respond(client: &mut TcpStream, code: u16, reason: &str, body: &str) -> io::Result<()> {
    let text = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    client.write_all(text.as_bytes())?;
    let _ = client.shutdown(Shutdown::Write);
    Ok(())
}

/// Copy both ways until each side has finished sending.
fn relay(client: TcpStream, upstream: TcpStream) -> io::Result<()> {
    let (mut c_read, mut u_write) = (client.try_clone()?, upstream.try_clone()?);
    let up = std::thread::Builder::new()
        .name("airlock-egress-up".into())
        .spawn(move || {
            let _ = io::copy(&mut c_read, &mut u_write);
            let _ = u_write.shutdown(Shutdown::Write);
        })?;
    let (mut u_read, mut c_write) = (upstream, client);
    let _ = io::copy(&mut u_read, &mut c_write);
    let _ = c_write.shutdown(Shutdown::Write);
    let _ = up.join();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorities_split_with_and_without_ports() {
        assert_eq!(
            split_authority("example.org:443", None),
            Some(("example.org", 443))
        );
        assert_eq!(split_authority("[::1]:8080", None), Some(("[::1]", 8080)));
        assert_eq!(split_authority("[::1]", Some(80)), Some(("[::1]", 80)));
        assert_eq!(
            split_authority("example.org", Some(80)),
            Some(("example.org", 80))
        );
        assert_eq!(split_authority("example.org", None), None);
        assert_eq!(split_authority("example.org:0", None), None);
        assert_eq!(split_authority("example.org:99999", None), None);
        assert_eq!(split_authority("[::1]x:80", None), None);
        assert_eq!(split_authority(":80", None), None);
    }
}
