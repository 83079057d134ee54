//! The proxy against real sockets on loopback: what it admits, and every way around it the
//! network issue names (a listed name resolving to an internal address, DNS rebinding, IPv6
//! and other spellings of an address, a port not listed, an absolute URI for another host, a
//! Host header that differs, a pipelined second request). Every server here listens on
//! 127.0.0.1; no test connects anywhere else.

use airlock_egress::{EgressProxy, Resolve, Verdict};
use airlock_policies::network::{AllowEntry, BlockReason, EgressRules, RequestHost};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn rules(entries: &[&str]) -> EgressRules {
    EgressRules {
        allow: entries
            .iter()
            .map(|e| e.parse::<AllowEntry>().unwrap())
            .collect(),
        read_only: false,
    }
}

/// A proxy serving on a loopback port of its own, as the sandbox would hand it one.
fn start(proxy: &Arc<EgressProxy>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let p = Arc::clone(proxy);
    std::thread::spawn(move || p.serve(listener));
    port
}

/// An origin server that answers each connection with what it received, once.
fn origin() -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    std::thread::spawn(move || {
        for conn in listener.incoming().take(16) {
            let Ok(mut conn) = conn else { continue };
            conn.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let mut head = String::new();
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                head.push_str(&line);
            }
            let mut tail = Vec::new();
            let _ = reader.read_to_end(&mut tail);
            head.push_str(&String::from_utf8_lossy(&tail));
            log.lock().unwrap().push(head.clone());
            let body = format!("origin saw: {head}");
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = conn.shutdown(Shutdown::Both);
        }
    });
    (port, seen)
}

/// An echo server for tunnels.
fn echo() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming().take(8) {
            let Ok(mut conn) = conn else { continue };
            std::thread::spawn(move || {
                let mut r = conn.try_clone().unwrap();
                let _ = io::copy(&mut r, &mut conn);
            });
        }
    });
    port
}

fn exchange(proxy_port: u16, request: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", proxy_port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let _ = s.shutdown(Shutdown::Write);
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

#[test]
fn a_listed_address_is_tunnelled_and_served() {
    let echo_port = echo();
    let (origin_port, seen) = origin();
    let proxy = EgressProxy::new(rules(&[
        &format!("127.0.0.1:{echo_port}"),
        &format!("127.0.0.1:{origin_port}"),
    ]));
    let port = start(&proxy);

    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "CONNECT 127.0.0.1:{echo_port} HTTP/1.1\r\nHost: 127.0.0.1:{echo_port}\r\n\r\nping"
    )
    .unwrap();
    let mut buf = vec![0u8; 256];
    let mut got = Vec::new();
    while !String::from_utf8_lossy(&got).ends_with("ping") {
        let n = s.read(&mut buf).unwrap();
        assert!(
            n > 0,
            "tunnel closed early: {:?}",
            String::from_utf8_lossy(&got)
        );
        got.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");

    let reply = exchange(
        port,
        &format!(
            "GET http://127.0.0.1:{origin_port}/path?q=1 HTTP/1.1\r\nHost: 127.0.0.1:{origin_port}\r\nProxy-Connection: keep-alive\r\n\r\n"
        ),
    );
    assert!(reply.starts_with("HTTP/1.1 200 OK"), "{reply}");
    let head = seen.lock().unwrap()[0].clone();
    assert!(head.starts_with("GET /path?q=1 HTTP/1.1\r\n"), "{head}");
    assert!(
        !head.to_ascii_lowercase().contains("proxy-connection"),
        "{head}"
    );
    assert!(head.contains("Connection: close"), "{head}");
    assert!(proxy.blocked().is_empty());
}

#[test]
fn a_host_or_port_not_listed_is_refused_and_recorded_once() {
    let (origin_port, seen) = origin();
    let proxy = EgressProxy::new(rules(&["127.0.0.1:1"]));
    let port = start(&proxy);
    for _ in 0..3 {
        let reply = exchange(
            port,
            &format!("CONNECT 127.0.0.1:{origin_port} HTTP/1.1\r\n\r\n"),
        );
        assert!(reply.starts_with("HTTP/1.1 403"), "{reply}");
        assert!(reply.contains("not on the allowlist"), "{reply}");
    }
    let reply = exchange(
        port,
        "GET http://not-listed.example/ HTTP/1.1\r\nHost: not-listed.example\r\n\r\n",
    );
    assert!(reply.starts_with("HTTP/1.1 403"), "{reply}");
    let blocked = proxy.blocked();
    let targets: Vec<String> = blocked.iter().map(|b| b.target()).collect();
    assert_eq!(
        targets,
        vec![
            format!("127.0.0.1:{origin_port}"),
            "not-listed.example:80".to_string()
        ]
    );
    assert!(blocked.iter().all(|b| b.reason == BlockReason::NotAllowed));
    assert!(
        seen.lock().unwrap().is_empty(),
        "nothing reached the origin"
    );
}

#[test]
fn other_spellings_of_an_address_are_that_address() {
    let (origin_port, _seen) = origin();
    // Listed as 127.0.0.1: the IPv6-mapped and decimal spellings are the same address and
    // pass; ::1 is another address and does not.
    let proxy = EgressProxy::new(rules(&[&format!("127.0.0.1:{origin_port}")]));
    let port = start(&proxy);
    let reply = exchange(
        port,
        &format!("CONNECT [::ffff:127.0.0.1]:{origin_port} HTTP/1.1\r\n\r\n"),
    );
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    let reply = exchange(
        port,
        &format!("CONNECT 2130706433:{origin_port} HTTP/1.1\r\n\r\n"),
    );
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    let reply = exchange(
        port,
        &format!("CONNECT [::1]:{origin_port} HTTP/1.1\r\n\r\n"),
    );
    assert!(reply.starts_with("HTTP/1.1 403"), "{reply}");
    // An unlisted internal address is refused whatever its spelling.
    for target in [
        "169.254.169.254:80",
        "[fd00:ec2::254]:80",
        "0x7f.1:80",
        "[::]:80",
    ] {
        let reply = exchange(port, &format!("CONNECT {target} HTTP/1.1\r\n\r\n"));
        assert!(reply.starts_with("HTTP/1.1 403"), "{target}: {reply}");
    }
}

#[test]
fn an_absolute_uri_for_another_host_or_a_differing_host_header_is_refused() {
    let (origin_port, seen) = origin();
    let proxy = EgressProxy::new(rules(&[&format!("127.0.0.1:{origin_port}")]));
    let port = start(&proxy);
    // The URL names an allowed host, the Host header another: a virtual host behind the same
    // address would answer for the header's host.
    let reply = exchange(
        port,
        &format!(
            "GET http://127.0.0.1:{origin_port}/ HTTP/1.1\r\nHost: metadata.internal.example\r\n\r\n"
        ),
    );
    assert!(reply.starts_with("HTTP/1.1 403"), "{reply}");
    assert!(reply.contains("Host header"), "{reply}");
    // Origin-form (talking to the proxy as if it were the server) is not a proxy request.
    let reply = exchange(
        port,
        &format!("GET / HTTP/1.1\r\nHost: 127.0.0.1:{origin_port}\r\n\r\n"),
    );
    assert!(reply.starts_with("HTTP/1.1 400"), "{reply}");
    // https is not forwarded as a plain request.
    let reply = exchange(
        port,
        &format!("GET https://127.0.0.1:{origin_port}/ HTTP/1.1\r\n\r\n"),
    );
    assert!(reply.starts_with("HTTP/1.1 400"), "{reply}");
    assert!(seen.lock().unwrap().is_empty());
    assert!(
        proxy
            .blocked()
            .iter()
            .any(|b| matches!(b.reason, BlockReason::HostMismatch { .. }))
    );
}

#[test]
fn a_pipelined_second_request_never_reaches_the_origin() {
    let (origin_port, seen) = origin();
    let proxy = EgressProxy::new(rules(&[&format!("127.0.0.1:{origin_port}")]));
    let port = start(&proxy);
    let reply = exchange(
        port,
        &format!(
            "POST http://127.0.0.1:{origin_port}/a HTTP/1.1\r\nHost: 127.0.0.1:{origin_port}\r\nContent-Length: 4\r\n\r\nbody\
             GET http://127.0.0.1:{origin_port}/b HTTP/1.1\r\nHost: other.example\r\n\r\n"
        ),
    );
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1);
    assert!(
        seen[0].ends_with("\r\nbody") || seen[0].ends_with("body"),
        "{}",
        seen[0]
    );
    assert!(!seen[0].contains("/b"), "{}", seen[0]);
}

#[test]
fn read_only_passes_get_and_head_and_refuses_the_rest_and_tunnels() {
    let (origin_port, seen) = origin();
    let mut r = rules(&[&format!("127.0.0.1:{origin_port}")]);
    r.read_only = true;
    let proxy = EgressProxy::new(r);
    let port = start(&proxy);
    let get = exchange(
        port,
        &format!("GET http://127.0.0.1:{origin_port}/ HTTP/1.1\r\n\r\n"),
    );
    assert!(get.starts_with("HTTP/1.1 200"), "{get}");
    let post = exchange(
        port,
        &format!("POST http://127.0.0.1:{origin_port}/ HTTP/1.1\r\nContent-Length: 0\r\n\r\n"),
    );
    assert!(post.starts_with("HTTP/1.1 403"), "{post}");
    let tunnel = exchange(
        port,
        &format!("CONNECT 127.0.0.1:{origin_port} HTTP/1.1\r\n\r\n"),
    );
    assert!(tunnel.starts_with("HTTP/1.1 403"), "{tunnel}");
    assert_eq!(seen.lock().unwrap().len(), 1);
}

/// A resolver with fixed answers, counting its lookups.
struct Fixed(Vec<IpAddr>, Mutex<usize>);

impl Resolve for Fixed {
    fn resolve(&self, _host: &str, _port: u16) -> io::Result<Vec<IpAddr>> {
        *self.1.lock().unwrap() += 1;
        Ok(self.0.clone())
    }
}

fn ips(list: &[&str]) -> Vec<IpAddr> {
    list.iter().map(|s| s.parse().unwrap()).collect()
}

#[test]
fn an_allowed_name_resolving_to_an_internal_address_is_refused() {
    let host = RequestHost::parse("registry.example.org").unwrap();
    for answers in [
        vec!["127.0.0.1"],
        vec!["10.0.0.7"],
        vec!["169.254.169.254"],
        vec!["::1"],
        vec!["::ffff:192.168.0.1"],
        // Rebinding: one public answer and one internal one is refused as a whole.
        vec!["93.184.216.34", "127.0.0.1"],
    ] {
        let proxy = EgressProxy::with_resolver(
            rules(&["registry.example.org"]),
            Box::new(Fixed(ips(&answers), Mutex::new(0))),
        );
        match proxy.decide(&host, 443) {
            Verdict::Refuse(BlockReason::InternalAddress { .. }) => {}
            other => panic!("{answers:?}: {other:?}"),
        }
    }
    // A public answer is admitted, and the connection goes to the address that was checked.
    let proxy = EgressProxy::with_resolver(
        rules(&["registry.example.org"]),
        Box::new(Fixed(ips(&["93.184.216.34"]), Mutex::new(0))),
    );
    assert_eq!(
        proxy.decide(&host, 443),
        Verdict::Connect("93.184.216.34:443".parse().unwrap())
    );
    // Listed on its own, an internal address is the operator's choice.
    let proxy = EgressProxy::with_resolver(
        rules(&["registry.example.org:8080", "127.0.0.1:8080"]),
        Box::new(Fixed(ips(&["127.0.0.1"]), Mutex::new(0))),
    );
    assert_eq!(
        proxy.decide(&host, 8080),
        Verdict::Connect("127.0.0.1:8080".parse().unwrap())
    );
    // Not listed at all: refused before any lookup.
    let counting = Fixed(ips(&["93.184.216.34"]), Mutex::new(0));
    let proxy = EgressProxy::with_resolver(rules(&[]), Box::new(counting));
    assert_eq!(
        proxy.decide(&host, 443),
        Verdict::Refuse(BlockReason::NotAllowed)
    );
}

#[test]
fn localhost_by_name_is_refused_through_the_real_resolver() {
    let (origin_port, seen) = origin();
    let proxy = EgressProxy::new(rules(&[&format!("localhost:{origin_port}")]));
    let port = start(&proxy);
    let reply = exchange(
        port,
        &format!("CONNECT localhost:{origin_port} HTTP/1.1\r\n\r\n"),
    );
    assert!(reply.starts_with("HTTP/1.1 403"), "{reply}");
    assert!(reply.contains("loopback"), "{reply}");
    assert!(seen.lock().unwrap().is_empty());
}

#[test]
fn garbage_and_oversized_heads_get_a_400_and_the_proxy_lives_on() {
    let (origin_port, _seen) = origin();
    let proxy = EgressProxy::new(rules(&[&format!("127.0.0.1:{origin_port}")]));
    let port = start(&proxy);
    assert!(exchange(port, "\x16\x03\x01 not http\r\n\r\n").starts_with("HTTP/1.1 400"));
    let huge = format!(
        "GET http://127.0.0.1:{origin_port}/ HTTP/1.1\r\nX: {}\r\n\r\n",
        "a".repeat(40_000)
    );
    assert!(exchange(port, &huge).starts_with("HTTP/1.1 400"));
    assert!(exchange(port, "CONNECT nohostport HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 400"));
    let ok = exchange(
        port,
        &format!("GET http://127.0.0.1:{origin_port}/ HTTP/1.1\r\n\r\n"),
    );
    assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
}
