//! The network a sandboxed command may use, as a rule both sides apply: the four modes
//! ([`NetworkMode`]), the allowlist an egress proxy admits hosts by ([`AllowEntry`]), which
//! addresses are internal and refused even for an allowed name ([`internal_address`]), and
//! the record of an attempt the proxy refused ([`BlockedAttempt`]). No network I/O happens
//! here: the proxy that applies these rules is `airlock-egress`.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// How much network a sandboxed command gets, from none to the host's. Ordered from the
/// narrowest to the widest, so `a > b` reads "a is wider than b".
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum NetworkMode {
    /// No socket but unix ones.
    None,
    /// A network namespace of its own with `lo` up: inet sockets work on loopback, nothing
    /// else is reachable. The default for test runs, the base inventory and the witness.
    #[default]
    Loopback,
    /// Loopback plus an egress proxy outside the sandbox, the only way out, which admits the
    /// hosts of an allowlist.
    Proxy,
    /// The host's whole network; only where an operator writes it explicitly.
    Host,
}

impl NetworkMode {
    /// Every mode, narrowest first.
    pub const ALL: [NetworkMode; 4] = [
        NetworkMode::None,
        NetworkMode::Loopback,
        NetworkMode::Proxy,
        NetworkMode::Host,
    ];

    /// The name used in configuration, JSON and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            NetworkMode::None => "none",
            NetworkMode::Loopback => "loopback",
            NetworkMode::Proxy => "proxy",
            NetworkMode::Host => "host",
        }
    }
}

impl fmt::Display for NetworkMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for NetworkMode {
    type Err = NetworkError;
    fn from_str(s: &str) -> Result<Self, NetworkError> {
        NetworkMode::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| NetworkError::Mode(s.to_string()))
    }
}

/// A network rule that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetworkError {
    /// Not one of the four modes.
    #[error("{0:?} is not a network mode: use none, loopback, proxy or host")]
    Mode(String),
    /// An allowlist entry that is not a host, `*.suffix`, an IP literal, each with an
    /// optional `:PORT`.
    #[error(
        "{entry:?} is not an allowlist entry ({reason}); write a host (pypi.example.org), a \
         wildcard over a domain (*.example.org), or an IP literal (127.0.0.1, [::1]), each \
         with an optional :PORT"
    )]
    Entry {
        /// The entry as written.
        entry: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// What an allowlist entry names.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AllowTarget {
    /// One host name, lower case, without a trailing dot.
    Host(String),
    /// Every name below a domain (`*.example.org` is stored as `example.org`); not the
    /// domain itself, and never a public suffix.
    Below(String),
    /// One address. An address listed on its own is admitted even when internal: that is how
    /// a test reaches a server of its own on another loopback address through the proxy.
    Ip(IpAddr),
}

/// One entry of a network allowlist: a host, `*.domain` or an IP literal, with an optional
/// port. Without a port an entry admits 80 and 443 ([`DEFAULT_PORTS`]).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AllowEntry {
    /// The host, domain or address.
    pub target: AllowTarget,
    /// The one port admitted; `None` admits [`DEFAULT_PORTS`].
    pub port: Option<u16>,
}

/// The ports an entry without a port admits: HTTP and HTTPS.
pub const DEFAULT_PORTS: [u16; 2] = [80, 443];

impl AllowEntry {
    /// Whether this entry admits `host` (already normalised: lower case, no trailing dot, an
    /// address parsed as one) on `port`.
    pub fn admits(&self, host: &RequestHost, port: u16) -> bool {
        let port_ok = match self.port {
            Some(p) => p == port,
            None => DEFAULT_PORTS.contains(&port),
        };
        port_ok
            && match (&self.target, host) {
                (AllowTarget::Host(h), RequestHost::Name(n)) => h == n,
                (AllowTarget::Below(d), RequestHost::Name(n)) => n
                    .strip_suffix(d.as_str())
                    .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
                (AllowTarget::Ip(a), RequestHost::Ip(b)) => same_address(*a, *b),
                _ => false,
            }
    }
}

/// Two addresses that are one: an IPv4 address and its IPv4-mapped IPv6 form are the same.
fn same_address(a: IpAddr, b: IpAddr) -> bool {
    canonical(a) == canonical(b)
}

fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

impl fmt::Display for AllowEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.target, self.port) {
            (AllowTarget::Host(h), None) => f.write_str(h),
            (AllowTarget::Host(h), Some(p)) => write!(f, "{h}:{p}"),
            (AllowTarget::Below(d), None) => write!(f, "*.{d}"),
            (AllowTarget::Below(d), Some(p)) => write!(f, "*.{d}:{p}"),
            (AllowTarget::Ip(IpAddr::V6(a)), None) => write!(f, "{a}"),
            (AllowTarget::Ip(IpAddr::V6(a)), Some(p)) => write!(f, "[{a}]:{p}"),
            (AllowTarget::Ip(a), None) => write!(f, "{a}"),
            (AllowTarget::Ip(a), Some(p)) => write!(f, "{a}:{p}"),
        }
    }
}

impl FromStr for AllowEntry {
    type Err = NetworkError;
    fn from_str(s: &str) -> Result<Self, NetworkError> {
        let bad = |reason: &str| NetworkError::Entry {
            entry: s.to_string(),
            reason: reason.to_string(),
        };
        let text = s.trim();
        if text.is_empty() {
            return Err(bad("it is empty"));
        }
        if text.contains("://") || text.contains('/') {
            return Err(bad("it is a URL or a path; write only the host"));
        }
        // A bare IPv6 address (no port) has several colons and no brackets.
        if !text.starts_with('[')
            && text.matches(':').count() > 1
            && let Ok(v6) = text.parse::<Ipv6Addr>()
        {
            return Ok(AllowEntry {
                target: AllowTarget::Ip(IpAddr::V6(v6)),
                port: None,
            });
        }
        let (host, port) = split_port(text).map_err(|reason| bad(&reason))?;
        if let Some(inner) = host.strip_prefix('[') {
            let inner = inner
                .strip_suffix(']')
                .ok_or_else(|| bad("an IPv6 address in brackets lacks its `]`"))?;
            let v6: Ipv6Addr = inner
                .parse()
                .map_err(|_| bad("the part in brackets is not an IPv6 address"))?;
            return Ok(AllowEntry {
                target: AllowTarget::Ip(IpAddr::V6(v6)),
                port,
            });
        }
        if let Ok(v4) = host.parse::<Ipv4Addr>() {
            return Ok(AllowEntry {
                target: AllowTarget::Ip(IpAddr::V4(v4)),
                port,
            });
        }
        if let Some(domain) = host.strip_prefix("*.") {
            let domain = host_name(domain).map_err(|reason| bad(&reason))?;
            if is_public_suffix(&domain) {
                return Err(bad(&format!(
                    "`{domain}` is a public suffix, so `*.{domain}` would admit every site \
                     registered under it; list the domains you need"
                )));
            }
            return Ok(AllowEntry {
                target: AllowTarget::Below(domain),
                port,
            });
        }
        if host.contains('*') {
            return Err(bad(
                "a wildcard may only be the whole first label, as in *.example.org",
            ));
        }
        Ok(AllowEntry {
            target: AllowTarget::Host(host_name(host).map_err(|reason| bad(&reason))?),
            port,
        })
    }
}

/// Split `host:port` (the host possibly `[v6]`); the port, when given, 1 to 65535.
fn split_port(text: &str) -> Result<(&str, Option<u16>), String> {
    let split = if text.starts_with('[') {
        text.rfind("]:").map(|i| (&text[..=i], &text[i + 2..]))
    } else {
        text.rsplit_once(':')
    };
    match split {
        None => Ok((text, None)),
        Some((host, port)) => {
            let port: u32 = port
                .parse()
                .map_err(|_| format!("the port {port:?} is not a number"))?;
            if port == 0 || port > u32::from(u16::MAX) {
                return Err(format!("the port {port} is out of range (1 to 65535)"));
            }
            Ok((host, Some(port as u16)))
        }
    }
}

/// A host name as the proxy compares it: IDNA-mapped to ASCII, lower case, no trailing dot,
/// labels of letters, digits, `-` and `_`.
fn host_name(text: &str) -> Result<String, String> {
    let trimmed = text.strip_suffix('.').unwrap_or(text);
    let ascii = match url::Host::parse(trimmed) {
        Ok(url::Host::Domain(d)) => d,
        Ok(_) => return Err("it is an address where a name was expected".into()),
        Err(e) => return Err(format!("not a host name: {e}")),
    };
    if ascii.is_empty() || ascii.len() > 253 {
        return Err("a host name has 1 to 253 characters".into());
    }
    for label in ascii.split('.') {
        let ok_chars = label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if label.is_empty() || label.len() > 63 || !ok_chars {
            return Err(format!("the label {label:?} is not a host name label"));
        }
    }
    Ok(ascii)
}

/// Whether `domain` is itself a public suffix (`org`, `co.uk`, `github.io`), by the public
/// suffix list bundled with the `psl` crate. An unlisted top-level name counts as one.
pub fn is_public_suffix(domain: &str) -> bool {
    let lower = domain.to_ascii_lowercase();
    psl::suffix_str(&lower).is_none_or(|s| s == lower)
}

impl Serialize for AllowEntry {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for AllowEntry {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// The host a sandboxed client asked the proxy for, normalised for comparison.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RequestHost {
    /// A name, lower case, ASCII (IDNA-mapped), without a trailing dot.
    Name(String),
    /// An address, however it was spelled (`2130706433` and `127.1` are `127.0.0.1`).
    Ip(IpAddr),
}

impl RequestHost {
    /// Parse the host part of a request target (no port; IPv6 in brackets). `None` when it
    /// is no host at all.
    pub fn parse(text: &str) -> Option<RequestHost> {
        let text = text.strip_suffix('.').unwrap_or(text);
        match url::Host::parse(text).ok()? {
            url::Host::Domain(d) => host_name(&d).ok().map(RequestHost::Name),
            url::Host::Ipv4(a) => Some(RequestHost::Ip(IpAddr::V4(a))),
            url::Host::Ipv6(a) => Some(RequestHost::Ip(IpAddr::V6(a))),
        }
    }
}

impl fmt::Display for RequestHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestHost::Name(n) => f.write_str(n),
            RequestHost::Ip(IpAddr::V6(a)) => write!(f, "[{a}]"),
            RequestHost::Ip(a) => write!(f, "{a}"),
        }
    }
}

/// What an egress proxy admits: the allowlist, and whether only reads (`GET`, `HEAD`) pass.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EgressRules {
    /// The entries; empty admits nothing.
    pub allow: Vec<AllowEntry>,
    /// Only `GET` and `HEAD` of plain HTTP. A TLS tunnel (`CONNECT`) cannot be inspected, so
    /// with this switch it is refused.
    pub read_only: bool,
}

impl EgressRules {
    /// Whether some entry admits `host` on `port`.
    pub fn admits(&self, host: &RequestHost, port: u16) -> bool {
        self.allow.iter().any(|e| e.admits(host, port))
    }

    /// Whether `ip` on `port` is listed as an address of its own (which admits it even when
    /// it is internal).
    pub fn lists_address(&self, ip: IpAddr, port: u16) -> bool {
        self.admits(&RequestHost::Ip(ip), port)
    }
}

/// The network of a test run, on both sides: the mode and, for `proxy`, what the proxy
/// admits. It travels in the run's registration, so the witness runs with the same network
/// as the supervisor's runs, within what the broker allows (`witness_network`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestNetwork {
    /// The mode.
    #[serde(default)]
    pub mode: NetworkMode,
    /// The allowlist of the proxy (used with [`NetworkMode::Proxy`] only).
    #[serde(default)]
    pub allow: Vec<AllowEntry>,
    /// Only `GET` and `HEAD` pass the proxy ([`EgressRules::read_only`]).
    #[serde(default)]
    pub read_only: bool,
}

impl TestNetwork {
    /// Whether this is the default network (loopback, nothing allowed).
    pub fn is_default(&self) -> bool {
        *self == TestNetwork::default()
    }

    /// What the proxy admits.
    pub fn rules(&self) -> EgressRules {
        EgressRules {
            allow: self.allow.clone(),
            read_only: self.read_only,
        }
    }
}

/// Why an address is internal, for the refusal's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AddressClass {
    /// `127.0.0.0/8`, `::1`.
    Loopback,
    /// `10/8`, `172.16/12`, `192.168/16`, `fc00::/7`, `fec0::/10`.
    Private,
    /// `169.254/16`, `fe80::/10`: where cloud metadata services answer.
    LinkLocal,
    /// `100.64/10`, carrier-grade NAT and some clouds' metadata (`100.100.100.200`).
    SharedAddressSpace,
    /// `0.0.0.0/8`, `192.0.0.0/24`, `::`, broadcast, multicast, the reserved `240/4`,
    /// Teredo. (Documentation and benchmarking ranges are not refused: they reach nothing
    /// internal, and some networks front their package mirrors with them.)
    NotRoutable,
}

impl AddressClass {
    /// Words for a refusal.
    pub fn describe(self) -> &'static str {
        match self {
            AddressClass::Loopback => "a loopback address",
            AddressClass::Private => "a private address",
            AddressClass::LinkLocal => {
                "a link-local address (where cloud metadata services answer)"
            }
            AddressClass::SharedAddressSpace => "a shared (carrier-grade NAT) address",
            AddressClass::NotRoutable => "an address that is not publicly routable",
        }
    }
}

/// The class of an internal address, or `None` for a public one. IPv6 forms that carry an
/// IPv4 address (mapped, compatible, NAT64, 6to4) are judged by the address they carry;
/// Teredo is refused outright.
pub fn internal_address(ip: IpAddr) -> Option<AddressClass> {
    match ip {
        IpAddr::V4(v4) => internal_v4(v4),
        IpAddr::V6(v6) => internal_v6(v6),
    }
}

fn internal_v4(ip: Ipv4Addr) -> Option<AddressClass> {
    let [a, b, c, _] = ip.octets();
    if ip.is_loopback() {
        Some(AddressClass::Loopback)
    } else if ip.is_private() {
        Some(AddressClass::Private)
    } else if ip.is_link_local() {
        Some(AddressClass::LinkLocal)
    } else if a == 100 && (64..128).contains(&b) {
        Some(AddressClass::SharedAddressSpace)
    } else if a == 0 || a >= 224 || ip.is_broadcast() || (a == 192 && b == 0 && c == 0) {
        Some(AddressClass::NotRoutable)
    } else {
        None
    }
}

fn internal_v6(ip: Ipv6Addr) -> Option<AddressClass> {
    let seg = ip.segments();
    if let Some(v4) = ip.to_ipv4_mapped() {
        return internal_v4(v4);
    }
    if ip.is_loopback() {
        return Some(AddressClass::Loopback);
    }
    if ip.is_unspecified() || ip.is_multicast() {
        return Some(AddressClass::NotRoutable);
    }
    let embedded =
        |hi: u16, lo: u16| Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8);
    // IPv4-compatible (::a.b.c.d, deprecated) and NAT64 (64:ff9b::/96) carry an IPv4 address.
    if seg[..6] == [0; 6] {
        return internal_v4(embedded(seg[6], seg[7])).or(Some(AddressClass::NotRoutable));
    }
    if seg[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return internal_v4(embedded(seg[6], seg[7]));
    }
    // 6to4 (2002::/16) carries one in its second and third segments.
    if seg[0] == 0x2002 {
        return internal_v4(embedded(seg[1], seg[2]));
    }
    match seg[0] {
        s if s & 0xfe00 == 0xfc00 => Some(AddressClass::Private),
        s if s & 0xffc0 == 0xfe80 => Some(AddressClass::LinkLocal),
        s if s & 0xffc0 == 0xfec0 => Some(AddressClass::Private),
        // Teredo (2001:0::/32) hides its client's address.
        0x2001 if seg[1] == 0 => Some(AddressClass::NotRoutable),
        _ => None,
    }
}

/// Why the proxy refused an attempt.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum BlockReason {
    /// No allowlist entry names the host on that port.
    NotAllowed,
    /// The name is allowed but resolves to an internal address that is not itself listed.
    InternalAddress {
        /// The address.
        address: IpAddr,
        /// What kind of internal address it is.
        class: AddressClass,
    },
    /// The method is not a read and only reads are allowed (`CONNECT` counts, since a tunnel
    /// cannot be inspected).
    MethodNotAllowed {
        /// The method.
        method: String,
    },
    /// A plain-HTTP request whose `Host` header names another host than its URL.
    HostMismatch {
        /// The `Host` header as sent (shown escaped).
        header: String,
    },
    /// The allowed name did not resolve.
    Unresolved,
}

impl fmt::Display for BlockReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BlockReason::NotAllowed => f.write_str("not on the allowlist"),
            BlockReason::InternalAddress { address, class } => {
                write!(f, "resolves to {address}, {}", class.describe())
            }
            BlockReason::MethodNotAllowed { method } => {
                write!(
                    f,
                    "method {method:?} refused: only GET and HEAD are allowed"
                )
            }
            BlockReason::HostMismatch { header } => {
                write!(
                    f,
                    "its Host header {header:?} names another host than its URL"
                )
            }
            BlockReason::Unresolved => f.write_str("the name did not resolve"),
        }
    }
}

/// One attempt the egress proxy refused, recorded once per host and port of a command. (No
/// `deny_unknown_fields`: serde cannot combine it with the flattened reason.)
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct BlockedAttempt {
    /// The host as the client named it (normalised when it was a host; otherwise the text,
    /// cut to [`MAX_BLOCKED_HOST_CHARS`]; shown escaped).
    pub host: String,
    /// The port asked for.
    pub port: u16,
    /// Why it was refused.
    #[serde(flatten)]
    pub reason: BlockReason,
}

/// The longest host text a [`BlockedAttempt`] keeps.
pub const MAX_BLOCKED_HOST_CHARS: usize = 255;

/// At most this many blocked attempts are kept per command; later ones are counted only.
pub const MAX_BLOCKED_ATTEMPTS: usize = 64;

impl BlockedAttempt {
    /// `HOST:PORT`, as on the `blocked` lines of `airlock sandbox run`.
    pub fn target(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// The sentence the model and the approver read.
    pub fn sentence(&self) -> String {
        match &self.reason {
            BlockReason::NotAllowed => {
                format!("the test tried {}, which is not allowed", self.target())
            }
            other => format!(
                "the test tried {}, which was refused: {other}",
                self.target()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(s: &str) -> AllowEntry {
        s.parse().unwrap()
    }

    fn name(s: &str) -> RequestHost {
        RequestHost::parse(s).unwrap()
    }

    #[test]
    fn modes_are_ordered_narrowest_first_and_named() {
        assert!(NetworkMode::None < NetworkMode::Loopback);
        assert!(NetworkMode::Loopback < NetworkMode::Proxy);
        assert!(NetworkMode::Proxy < NetworkMode::Host);
        assert_eq!(NetworkMode::default(), NetworkMode::Loopback);
        for mode in NetworkMode::ALL {
            assert_eq!(mode.name().parse::<NetworkMode>().unwrap(), mode);
            assert_eq!(
                serde_json::to_string(&mode).unwrap(),
                format!("\"{}\"", mode.name())
            );
        }
        let err = "lan".parse::<NetworkMode>().unwrap_err().to_string();
        assert!(err.contains("\"lan\"") && err.contains("loopback"), "{err}");
    }

    #[test]
    fn entries_parse_and_print_back() {
        for text in [
            "pypi.example.org",
            "pypi.example.org:8443",
            "*.example.org",
            "*.example.org:443",
            "127.0.0.1",
            "127.0.0.2:8080",
            "::1",
            "[::1]:8080",
        ] {
            assert_eq!(entry(text).to_string(), text);
            let json = serde_json::to_string(&entry(text)).unwrap();
            let back: AllowEntry = serde_json::from_str(&json).unwrap();
            assert_eq!(back, entry(text));
        }
        assert_eq!(
            entry("Registry.Example.ORG.").to_string(),
            "registry.example.org"
        );
    }

    #[test]
    fn bad_entries_say_what_is_wrong() {
        for (text, says) in [
            ("", "empty"),
            ("https://pypi.example.org", "URL"),
            ("*.com", "public suffix"),
            ("*.co.uk", "public suffix"),
            ("*.github.io", "public suffix"),
            ("a.*.example.org", "wildcard"),
            ("host:0", "out of range"),
            ("host:70000", "out of range"),
            ("host:http", "not a number"),
            ("[::1", "`]`"),
            ("[nope]:80", "IPv6"),
            ("bad host", "not a host name"),
        ] {
            let err = text.parse::<AllowEntry>().unwrap_err().to_string();
            assert!(err.contains(says), "{text:?}: {err}");
            assert!(err.contains(&format!("{text:?}")), "{err}");
        }
    }

    #[test]
    fn entries_admit_their_host_and_port_only() {
        let plain = entry("files.example.org");
        assert!(plain.admits(&name("files.example.org"), 443));
        assert!(plain.admits(&name("FILES.example.org."), 80));
        assert!(!plain.admits(&name("files.example.org"), 22));
        assert!(!plain.admits(&name("evil.files.example.org"), 443));
        assert!(!plain.admits(&name("files.example.org.evil.net"), 443));
        let ported = entry("files.example.org:8443");
        assert!(ported.admits(&name("files.example.org"), 8443));
        assert!(!ported.admits(&name("files.example.org"), 443));
        let below = entry("*.example.org");
        assert!(below.admits(&name("a.example.org"), 443));
        assert!(below.admits(&name("a.b.example.org"), 443));
        assert!(!below.admits(&name("example.org"), 443));
        assert!(!below.admits(&name("badexample.org"), 443));
        let ip = entry("127.0.0.1:8080");
        assert!(ip.admits(&name("127.0.0.1"), 8080));
        // The same address however it is spelled.
        assert!(ip.admits(&name("2130706433"), 8080));
        assert!(ip.admits(&name("127.1"), 8080));
        assert!(ip.admits(&name("[::ffff:127.0.0.1]"), 8080));
        assert!(!ip.admits(&name("localhost"), 8080));
        assert!(!entry("localhost:8080").admits(&name("127.0.0.1"), 8080));
    }

    #[test]
    fn internal_addresses_are_classified_public_ones_are_not() {
        let class = |s: &str| internal_address(s.parse().unwrap());
        for (addr, want) in [
            ("127.0.0.1", AddressClass::Loopback),
            ("127.9.9.9", AddressClass::Loopback),
            ("10.1.2.3", AddressClass::Private),
            ("172.16.0.1", AddressClass::Private),
            ("192.168.1.1", AddressClass::Private),
            ("169.254.169.254", AddressClass::LinkLocal),
            ("100.100.100.200", AddressClass::SharedAddressSpace),
            ("0.0.0.0", AddressClass::NotRoutable),
            ("255.255.255.255", AddressClass::NotRoutable),
            ("224.0.0.1", AddressClass::NotRoutable),
            ("::1", AddressClass::Loopback),
            ("::", AddressClass::NotRoutable),
            ("fd00:ec2::254", AddressClass::Private),
            ("fe80::1", AddressClass::LinkLocal),
            ("::ffff:127.0.0.1", AddressClass::Loopback),
            ("::ffff:169.254.169.254", AddressClass::LinkLocal),
            ("::127.0.0.1", AddressClass::Loopback),
            ("64:ff9b::a9fe:a9fe", AddressClass::LinkLocal),
            ("2002:7f00:1::", AddressClass::Loopback),
            (
                "2001:0:4136:e378:8000:63bf:3fff:fdd2",
                AddressClass::NotRoutable,
            ),
            ("ff02::1", AddressClass::NotRoutable),
        ] {
            assert_eq!(class(addr), Some(want), "{addr}");
        }
        for public in [
            "93.184.216.34",
            "8.8.8.8",
            "2606:4700::1111",
            "2002:5db8:d822::",
        ] {
            assert_eq!(class(public), None, "{public}");
        }
    }

    #[test]
    fn test_network_defaults_to_loopback_and_reads_its_rules_flat() {
        let net: TestNetwork = serde_json::from_str("{}").unwrap();
        assert_eq!(net.mode, NetworkMode::Loopback);
        let net: TestNetwork = serde_json::from_str(
            r#"{"mode":"proxy","allow":["*.example.org","127.0.0.1:9"],"read_only":true}"#,
        )
        .unwrap();
        assert_eq!(net.mode, NetworkMode::Proxy);
        let rules = net.rules();
        assert!(rules.read_only);
        assert!(rules.admits(&name("x.example.org"), 443));
        assert!(rules.lists_address("127.0.0.1".parse().unwrap(), 9));
        assert!(serde_json::from_str::<TestNetwork>(r#"{"allow":["*.org"]}"#).is_err());
    }

    #[test]
    fn a_blocked_attempt_reads_as_a_sentence() {
        let b = BlockedAttempt {
            host: "httpbin.example.org".into(),
            port: 443,
            reason: BlockReason::NotAllowed,
        };
        assert_eq!(
            b.sentence(),
            "the test tried httpbin.example.org:443, which is not allowed"
        );
        let json = serde_json::to_value(&b).unwrap();
        assert_eq!(json["reason"], "not_allowed");
        assert_eq!(json["host"], "httpbin.example.org");
        // Stored and sent as JSON, read back the same, every reason.
        for reason in [
            BlockReason::NotAllowed,
            BlockReason::InternalAddress {
                address: "10.0.0.1".parse().unwrap(),
                class: AddressClass::Private,
            },
            BlockReason::MethodNotAllowed {
                method: "POST".into(),
            },
            BlockReason::HostMismatch {
                header: "other.example".into(),
            },
            BlockReason::Unresolved,
        ] {
            let b = BlockedAttempt {
                reason,
                ..b.clone()
            };
            let text = serde_json::to_string(&b).unwrap();
            assert_eq!(
                serde_json::from_str::<BlockedAttempt>(&text).unwrap(),
                b,
                "{text}"
            );
        }
    }
}
