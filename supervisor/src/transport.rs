//! Where the broker is and how a supervisor reaches it: its Unix socket on this host, or TCP
//! with mutual TLS for a broker on another host (the worker presents its client certificate
//! and checks the broker's against the CA it was given). Both carry the same line protocol;
//! [`crate::adapters::BrokerSocket`] speaks it over whichever [`BrokerStream`] this opens.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use airlock_protocol::tls::{
    HANDSHAKE_TIMEOUT, PROTOCOL_VERSIONS, provider, read_certificates, read_private_key, read_roots,
};
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, StreamOwned};

/// The forms a broker address takes, for error messages.
pub const ACCEPTED_FORMS: &str = "unix:/PATH, /PATH or tls://HOST:PORT";

/// A broker address that cannot be used, or a `[broker]` configuration that does not name one
/// way to reach it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    /// The text is none of the accepted forms.
    #[error("{text:?} is not a broker address: {problem} (accepted: {ACCEPTED_FORMS})")]
    Parse {
        /// What was given.
        text: String,
        /// What is wrong with it.
        problem: String,
    },
    /// A `[broker]` key is missing, extra or wrong for the transport chosen.
    #[error("[broker] {key}: {problem}")]
    Config {
        /// The key of `[broker]` (`url`, `tls_ca`, ...).
        key: &'static str,
        /// What is wrong and what to set.
        problem: String,
    },
}

/// How this worker authenticates to a broker over TLS and what it trusts: PEM files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// The CA that signed the broker's certificate (`[broker] tls_ca`).
    pub ca: PathBuf,
    /// This worker's client certificate chain (`[broker] tls_cert`).
    pub cert: PathBuf,
    /// This worker's private key (`[broker] tls_key`).
    pub key: PathBuf,
    /// The name the broker's certificate must carry (`[broker] tls_server_name`); the host of
    /// the address when unset.
    pub server_name: Option<String>,
}

/// A broker reached over TCP with mutual TLS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsEndpoint {
    /// Host name or address (an IPv6 address without its brackets).
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// The worker's certificate and trust; `None` for an address parsed alone (a command-line
    /// `--broker URL`) until the configuration's are added with [`BrokerEndpoint::with_tls`].
    pub settings: Option<TlsSettings>,
}

/// Where the broker listens: parsed once, from `[broker] socket` or `url` or a command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BrokerEndpoint {
    /// The broker's Unix socket on this host.
    Unix(PathBuf),
    /// The broker on another host, over TLS.
    Tls(TlsEndpoint),
}

impl BrokerEndpoint {
    /// Read an address: `unix:/PATH` (or `unix:///PATH`), a bare path, or `tls://HOST:PORT`
    /// (an IPv6 host in brackets). A TLS address carries no credentials yet.
    pub fn parse(text: &str) -> Result<BrokerEndpoint, EndpointError> {
        let refuse = |problem: &str| EndpointError::Parse {
            text: text.to_owned(),
            problem: problem.to_owned(),
        };
        if let Some(rest) = text.strip_prefix("tls://") {
            let rest = rest.strip_suffix('/').unwrap_or(rest);
            if rest.contains(['/', '@', '?', '#']) {
                return Err(refuse(
                    "a tls:// address is HOST:PORT only (no path, user or query)",
                ));
            }
            let (host, port) = rest
                .rsplit_once(':')
                .ok_or_else(|| refuse("the port is missing"))?;
            let port: u16 = port
                .parse()
                .ok()
                .filter(|p| *p != 0)
                .ok_or_else(|| refuse("the port is not a number from 1 to 65535"))?;
            let host = match host.strip_prefix('[') {
                Some(inner) => inner
                    .strip_suffix(']')
                    .ok_or_else(|| refuse("an IPv6 host's bracket is not closed"))?,
                None if host.contains(':') => {
                    return Err(refuse("an IPv6 host goes in brackets: tls://[::1]:8643"));
                }
                None => host,
            };
            if host.is_empty() {
                return Err(refuse("the host is missing"));
            }
            return Ok(BrokerEndpoint::Tls(TlsEndpoint {
                host: host.to_owned(),
                port,
                settings: None,
            }));
        }
        let path = match text.strip_prefix("unix:") {
            Some(rest) => rest.strip_prefix("//").unwrap_or(rest),
            None if text.contains("://") => return Err(refuse("unknown scheme")),
            None => text,
        };
        if path.is_empty() {
            return Err(refuse("the socket path is missing"));
        }
        Ok(BrokerEndpoint::Unix(PathBuf::from(path)))
    }

    /// This endpoint with the worker's TLS settings (a Unix socket is left as it is).
    pub fn with_tls(self, settings: TlsSettings) -> BrokerEndpoint {
        match self {
            BrokerEndpoint::Tls(endpoint) => BrokerEndpoint::Tls(TlsEndpoint {
                settings: Some(settings),
                ..endpoint
            }),
            unix => unix,
        }
    }

    /// Connect; over TLS the handshake is complete (within [`HANDSHAKE_TIMEOUT`]) when this
    /// returns. `timeout` bounds every later read and write.
    pub fn connect(&self, timeout: Duration) -> Result<BrokerStream, ConnectError> {
        let stream = match self {
            BrokerEndpoint::Unix(path) => {
                BrokerStream::Unix(UnixStream::connect(path).map_err(ConnectError::Unreachable)?)
            }
            BrokerEndpoint::Tls(endpoint) => BrokerStream::Tls(Box::new(endpoint.connect()?)),
        };
        stream.set_timeouts(timeout).map_err(ConnectError::Broken)?;
        Ok(stream)
    }
}

impl TlsEndpoint {
    fn client_config(&self) -> Result<(Arc<ClientConfig>, ServerName<'static>), ConnectError> {
        let settings = self.settings.as_ref().ok_or_else(|| {
            ConnectError::Unusable(
                "no client certificate for a tls:// broker: set [broker] tls_ca, tls_cert and \
                 tls_key"
                    .to_owned(),
            )
        })?;
        let unusable = |e: airlock_protocol::tls::PemError| ConnectError::Unusable(e.to_string());
        let roots = read_roots("[broker] tls_ca", &settings.ca).map_err(unusable)?;
        let chain = read_certificates("[broker] tls_cert", &settings.cert).map_err(unusable)?;
        let key = read_private_key("[broker] tls_key", &settings.key).map_err(unusable)?;
        let config = ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(PROTOCOL_VERSIONS)
            .map_err(|e| ConnectError::Unusable(e.to_string()))?
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .map_err(|e| {
                ConnectError::Unusable(format!(
                    "[broker] tls_cert {} with tls_key {}: {e}",
                    settings.cert.display(),
                    settings.key.display()
                ))
            })?;
        let name = settings.server_name.as_deref().unwrap_or(&self.host);
        let server_name = ServerName::try_from(name.to_owned())
            .map_err(|e| ConnectError::Unusable(format!("{name:?} is not a server name: {e}")))?;
        Ok((Arc::new(config), server_name))
    }

    fn connect(&self) -> Result<TlsStream, ConnectError> {
        let (config, server_name) = self.client_config()?;
        let addresses = (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(ConnectError::Unreachable)?;
        let mut last = io::Error::new(io::ErrorKind::NotFound, "the host has no address");
        let mut tcp = None;
        for address in addresses {
            match TcpStream::connect_timeout(&address, HANDSHAKE_TIMEOUT) {
                Ok(s) => {
                    tcp = Some(s);
                    break;
                }
                Err(e) => last = e,
            }
        }
        let mut tcp = tcp.ok_or(ConnectError::Unreachable(last))?;
        let handshake = |e: io::Error| {
            if is_tls_refusal(&e) {
                ConnectError::Refused(e)
            } else if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) {
                ConnectError::HandshakeTimedOut
            } else {
                ConnectError::Broken(e)
            }
        };
        tcp.set_read_timeout(Some(HANDSHAKE_TIMEOUT))
            .map_err(ConnectError::Broken)?;
        tcp.set_write_timeout(Some(HANDSHAKE_TIMEOUT))
            .map_err(ConnectError::Broken)?;
        let mut connection = ClientConnection::new(config, server_name)
            .map_err(|e| ConnectError::Unusable(e.to_string()))?;
        while connection.is_handshaking() {
            connection.complete_io(&mut tcp).map_err(handshake)?;
        }
        Ok(StreamOwned::new(connection, tcp))
    }
}

impl fmt::Display for BrokerEndpoint {
    /// The socket's path as it is, or `tls://HOST:PORT`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BrokerEndpoint::Unix(path) => write!(f, "{}", path.display()),
            BrokerEndpoint::Tls(TlsEndpoint { host, port, .. }) if host.contains(':') => {
                write!(f, "tls://[{host}]:{port}")
            }
            BrokerEndpoint::Tls(TlsEndpoint { host, port, .. }) => {
                write!(f, "tls://{host}:{port}")
            }
        }
    }
}

impl From<&Path> for BrokerEndpoint {
    fn from(path: &Path) -> Self {
        BrokerEndpoint::Unix(path.to_path_buf())
    }
}

impl From<PathBuf> for BrokerEndpoint {
    fn from(path: PathBuf) -> Self {
        BrokerEndpoint::Unix(path)
    }
}

impl From<&PathBuf> for BrokerEndpoint {
    fn from(path: &PathBuf) -> Self {
        BrokerEndpoint::Unix(path.clone())
    }
}

impl From<&BrokerEndpoint> for BrokerEndpoint {
    fn from(endpoint: &BrokerEndpoint) -> Self {
        endpoint.clone()
    }
}

/// Why a connection to the broker could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// Nothing answered: the broker is not listening (it may be restarting).
    #[error("{0}")]
    Unreachable(io::Error),
    /// Connected, then the connection broke before it could be used.
    #[error("{0}")]
    Broken(io::Error),
    /// The TLS handshake did not complete in time.
    #[error("no TLS handshake within {} s", HANDSHAKE_TIMEOUT.as_secs())]
    HandshakeTimedOut,
    /// The TLS handshake failed: the broker refused this worker's certificate, or this worker
    /// refused the broker's. Trying again changes nothing.
    #[error("TLS refused: {0}")]
    Refused(io::Error),
    /// This worker's own TLS settings cannot be used (a missing or broken PEM file).
    #[error("{0}")]
    Unusable(String),
}

type TlsStream = StreamOwned<ClientConnection, TcpStream>;

/// An open connection to the broker, over either transport.
pub enum BrokerStream {
    /// The Unix socket.
    Unix(UnixStream),
    /// TCP with TLS, the handshake done.
    Tls(Box<TlsStream>),
}

impl BrokerStream {
    /// Bound every read and write from now on by `timeout`.
    pub fn set_timeouts(&self, timeout: Duration) -> io::Result<()> {
        let timeout = Some(timeout).filter(|t| !t.is_zero());
        match self {
            BrokerStream::Unix(s) => {
                s.set_read_timeout(timeout)?;
                s.set_write_timeout(timeout)
            }
            BrokerStream::Tls(s) => {
                s.sock.set_read_timeout(timeout)?;
                s.sock.set_write_timeout(timeout)
            }
        }
    }
}

impl Read for BrokerStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            BrokerStream::Unix(s) => s.read(buf),
            BrokerStream::Tls(s) => s.read(buf),
        }
    }
}

impl Write for BrokerStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            BrokerStream::Unix(s) => s.write(buf),
            BrokerStream::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            BrokerStream::Unix(s) => s.flush(),
            BrokerStream::Tls(s) => s.flush(),
        }
    }
}

/// Whether `error` is TLS's own (an alert from the broker, a certificate this worker does not
/// trust) rather than the connection's: resending the same request would meet it again.
pub fn is_tls_refusal(error: &io::Error) -> bool {
    error
        .get_ref()
        .is_some_and(|inner| inner.is::<rustls::Error>())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tls(host: &str, port: u16) -> BrokerEndpoint {
        BrokerEndpoint::Tls(TlsEndpoint {
            host: host.to_owned(),
            port,
            settings: None,
        })
    }

    #[test]
    fn every_accepted_form_parses() {
        let unix = |p: &str| BrokerEndpoint::Unix(PathBuf::from(p));
        assert_eq!(
            BrokerEndpoint::parse("/run/airlock/broker.sock"),
            Ok(unix("/run/airlock/broker.sock"))
        );
        assert_eq!(
            BrokerEndpoint::parse("unix:/run/b.sock"),
            Ok(unix("/run/b.sock"))
        );
        assert_eq!(
            BrokerEndpoint::parse("unix:///run/b.sock"),
            Ok(unix("/run/b.sock"))
        );
        assert_eq!(BrokerEndpoint::parse("b.sock"), Ok(unix("b.sock")));
        assert_eq!(
            BrokerEndpoint::parse("tls://broker.internal:8643"),
            Ok(tls("broker.internal", 8643))
        );
        assert_eq!(
            BrokerEndpoint::parse("tls://10.0.0.2:8643/"),
            Ok(tls("10.0.0.2", 8643))
        );
        assert_eq!(
            BrokerEndpoint::parse("tls://[::1]:8643"),
            Ok(tls("::1", 8643))
        );
        assert_eq!(tls("::1", 8643).to_string(), "tls://[::1]:8643");
        assert_eq!(tls("h", 1).to_string(), "tls://h:1");
        assert_eq!(unix("/b.sock").to_string(), "/b.sock");
    }

    #[test]
    fn a_bad_address_is_refused_naming_the_accepted_forms() {
        for (text, problem) in [
            ("", "the socket path is missing"),
            ("unix:", "the socket path is missing"),
            ("tcp://broker:8643", "unknown scheme"),
            ("https://broker:8643", "unknown scheme"),
            ("tls://broker", "the port is missing"),
            ("tls://broker:", "not a number"),
            ("tls://broker:0", "not a number"),
            ("tls://broker:99999", "not a number"),
            ("tls://:8643", "the host is missing"),
            ("tls://::1:8643", "in brackets"),
            ("tls://[::1:8643", "bracket is not closed"),
            ("tls://user@broker:8643", "HOST:PORT only"),
            ("tls://broker:8643/queue", "HOST:PORT only"),
        ] {
            let err = BrokerEndpoint::parse(text).unwrap_err();
            let shown = err.to_string();
            assert!(shown.contains(problem), "{text:?}: {shown}");
            assert!(shown.contains(ACCEPTED_FORMS), "{text:?}: {shown}");
        }
    }

    #[test]
    fn tls_settings_are_added_to_a_tls_address_only() {
        let settings = TlsSettings {
            ca: "ca.pem".into(),
            cert: "w.pem".into(),
            key: "w.key".into(),
            server_name: None,
        };
        let BrokerEndpoint::Tls(t) = tls("h", 1).with_tls(settings.clone()) else {
            panic!("still tls");
        };
        assert_eq!(t.settings, Some(settings.clone()));
        let unix = BrokerEndpoint::Unix("/b.sock".into());
        assert_eq!(unix.clone().with_tls(settings), unix);
    }

    #[test]
    fn a_tls_endpoint_without_settings_or_with_missing_files_says_what_to_set() {
        let Err(err) = tls("127.0.0.1", 9).connect(Duration::from_secs(1)) else {
            panic!("connected without a certificate");
        };
        assert!(matches!(err, ConnectError::Unusable(_)), "{err:?}");
        assert!(
            err.to_string().contains("tls_ca, tls_cert and tls_key"),
            "{err}"
        );
        let missing = tls("127.0.0.1", 9).with_tls(TlsSettings {
            ca: "/nonexistent/ca.pem".into(),
            cert: "/nonexistent/w.pem".into(),
            key: "/nonexistent/w.key".into(),
            server_name: None,
        });
        let Err(err) = missing.connect(Duration::from_secs(1)) else {
            panic!("connected without a certificate");
        };
        assert!(
            err.to_string()
                .contains("[broker] tls_ca /nonexistent/ca.pem: cannot read"),
            "{err}"
        );
    }
}
