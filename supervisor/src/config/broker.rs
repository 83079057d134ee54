//! `[broker]`: where the pull-request broker is (a Unix socket on this host, or TLS to another
//! host), how long its replies may take and how the run's tree reaches it.

use super::{ConfigError, Result, optional_seconds};
use crate::transport::{BrokerEndpoint, EndpointError, TlsSettings};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// `[broker]`: where the pull-request broker listens.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BrokerConfig {
    /// The broker's Unix socket, on this host. One of `socket` and `url`.
    pub socket: Option<PathBuf>,
    /// The broker on another host: `tls://HOST:PORT` (or any form of
    /// [`BrokerEndpoint::parse`]). One of `socket` and `url`; `tls://` needs `tls_ca`,
    /// `tls_cert` and `tls_key`.
    pub url: Option<String>,
    /// The CA that signed the broker's certificate (PEM), with `url = "tls://..."`.
    pub tls_ca: Option<PathBuf>,
    /// This worker's client certificate (PEM), signed by the broker's `[tls] client_ca`.
    pub tls_cert: Option<PathBuf>,
    /// This worker's private key (PEM).
    pub tls_key: Option<PathBuf>,
    /// The name the broker's certificate must carry; defaults to the host of `url`.
    pub tls_server_name: Option<String>,
    /// The repository's name in the broker's `broker.toml` (`[repositories."owner/name"]`);
    /// defaults to `--repo` as given.
    pub repository: Option<String>,
    /// How long to wait for the broker's answer to a request; its answer to `open_pr` comes
    /// after a witness that runs the test command four times. Defaults to
    /// [`BrokerConfig::reply_timeout`]'s `4 × tests.timeout_secs + 120`.
    #[serde(alias = "reply_timeout", deserialize_with = "optional_seconds")]
    pub reply_timeout_secs: Option<u64>,
    /// How long to keep reconnecting and resending an `open_pr` whose connection to the broker
    /// broke (a broker restart), with the same idempotency key. The broker is told this window
    /// at registration and abandons an intake it takes up again later, so the run's outcome
    /// and the queue agree. Defaults to [`DEFAULT_RECONNECT_SECS`].
    #[serde(alias = "reconnect", deserialize_with = "optional_seconds")]
    pub reconnect_secs: Option<u64>,
    /// How the broker gets the run's tree: `"shared"` (it reads the worktree: the broker
    /// runs on this host and the worktree lies under its runs root) or `"bytes"` (every
    /// `open_pr` carries the change as a git patch against the pin and the broker rebuilds the
    /// tree from its own clone: a broker on another host). Default: shared for a Unix socket,
    /// bytes for a network broker.
    #[serde(default)]
    pub tree: Option<airlock_protocol::TreeTransfer>,
}

/// The default `[broker] reconnect_secs`.
pub const DEFAULT_RECONNECT_SECS: u64 = 600;

impl BrokerConfig {
    /// Where the broker is: `socket`, or `url` with the `tls_*` files for `tls://`; `None`
    /// when neither is set. Setting both, a `tls://` url without its three files, or a `tls_*`
    /// key without a `tls://` url is an error naming the key.
    pub fn endpoint(&self) -> std::result::Result<Option<BrokerEndpoint>, EndpointError> {
        let tls_keys = [
            ("tls_ca", self.tls_ca.is_some()),
            ("tls_cert", self.tls_cert.is_some()),
            ("tls_key", self.tls_key.is_some()),
            ("tls_server_name", self.tls_server_name.is_some()),
        ];
        let endpoint = match (&self.socket, &self.url) {
            (Some(_), Some(_)) => {
                return Err(EndpointError::Config {
                    key: "url",
                    problem: "set either socket (the broker's Unix socket on this host) or url \
                              (tls://HOST:PORT, a broker on another host), not both"
                        .to_owned(),
                });
            }
            (None, None) => None,
            (Some(socket), None) => Some(BrokerEndpoint::Unix(socket.clone())),
            (None, Some(url)) => Some(BrokerEndpoint::parse(url)?),
        };
        match endpoint {
            Some(BrokerEndpoint::Tls(tls)) => {
                let (Some(ca), Some(cert), Some(key)) =
                    (&self.tls_ca, &self.tls_cert, &self.tls_key)
                else {
                    let missing: Vec<&str> = tls_keys[..3]
                        .iter()
                        .filter(|(_, set)| !set)
                        .map(|(name, _)| *name)
                        .collect();
                    return Err(EndpointError::Config {
                        key: missing.first().copied().unwrap_or("tls_ca"),
                        problem: format!(
                            "url = {:?} needs tls_ca (the CA of the broker's certificate), \
                             tls_cert and tls_key (this worker's certificate and key); missing: {}",
                            self.url.as_deref().unwrap_or_default(),
                            missing.join(", ")
                        ),
                    });
                };
                if let Some(name) = &self.tls_server_name
                    && rustls::pki_types::ServerName::try_from(name.as_str()).is_err()
                {
                    return Err(EndpointError::Config {
                        key: "tls_server_name",
                        problem: format!("{name:?} is not a host name or an IP address"),
                    });
                }
                Ok(Some(BrokerEndpoint::Tls(tls).with_tls(TlsSettings {
                    ca: ca.clone(),
                    cert: cert.clone(),
                    key: key.clone(),
                    server_name: self.tls_server_name.clone(),
                })))
            }
            other => match tls_keys.iter().find(|(_, set)| *set) {
                Some((name, _)) => Err(EndpointError::Config {
                    key: name,
                    problem: "is only read with url = \"tls://HOST:PORT\" (a broker on another \
                              host); a Unix socket needs no certificate"
                        .to_owned(),
                }),
                None => Ok(other),
            },
        }
    }

    /// Point this configuration at the broker at `url` (`airlock worker --broker`): a Unix
    /// socket replaces `socket`, a `tls://` address replaces `url` and keeps the `tls_*` files.
    pub fn point_at(&mut self, url: &str) -> std::result::Result<(), EndpointError> {
        match BrokerEndpoint::parse(url)? {
            BrokerEndpoint::Unix(path) => {
                self.socket = Some(path);
                self.url = None;
            }
            BrokerEndpoint::Tls(_) => {
                self.socket = None;
                self.url = Some(url.to_owned());
            }
        }
        self.endpoint().map(|_| ())
    }

    /// How the broker gets the run's tree: `tree` when set; else shared (the broker reads the
    /// worktree) with a Unix socket on this host, bytes with a broker on another (`url`).
    pub fn tree_transfer(&self) -> airlock_protocol::TreeTransfer {
        self.tree.unwrap_or(if self.url.is_some() {
            airlock_protocol::TreeTransfer::Bytes
        } else {
            airlock_protocol::TreeTransfer::Shared
        })
    }

    /// The reconnect window in seconds.
    pub fn reconnect_secs(&self) -> u64 {
        self.reconnect_secs.unwrap_or(DEFAULT_RECONNECT_SECS)
    }

    /// The wait for one broker reply: `reply_timeout_secs`, else long enough for a witness of
    /// four test commands of `tests_timeout_secs` each.
    pub fn reply_timeout(&self, tests_timeout_secs: u64) -> std::time::Duration {
        std::time::Duration::from_secs(
            self.reply_timeout_secs
                .unwrap_or_else(|| tests_timeout_secs.saturating_mul(4).saturating_add(120)),
        )
    }
}

impl BrokerConfig {
    /// The endpoint's keys agree, and a reply may take at least a second.
    pub(super) fn validate(&self, invalid: &dyn Fn(&str, &str) -> ConfigError) -> Result<()> {
        self.endpoint().map_err(|e| match e {
            EndpointError::Config { key, problem } => invalid(&format!("broker.{key}"), &problem),
            parse @ EndpointError::Parse { .. } => invalid("broker.url", &parse.to_string()),
        })?;
        if self.reply_timeout_secs == Some(0) {
            return Err(invalid("broker.reply_timeout_secs", "must be at least 1"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use std::path::Path;

    #[test]
    fn the_broker_reply_wait_covers_a_witness_of_four_test_commands() {
        let c = Config::parse("[tests]\ntimeout_secs = 600\n", Path::new("airlock.toml")).unwrap();
        assert_eq!(
            c.broker.reply_timeout(c.tests.timeout_secs),
            std::time::Duration::from_secs(2520)
        );
        let c = Config::parse(
            "[broker]\nreply_timeout_secs = 90\n",
            Path::new("airlock.toml"),
        )
        .unwrap();
        assert_eq!(
            c.broker.reply_timeout(c.tests.timeout_secs),
            std::time::Duration::from_secs(90)
        );
        let err = Config::parse(
            "[broker]\nreply_timeout_secs = 0\n",
            Path::new("airlock.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("broker.reply_timeout_secs"), "{err}");
    }

    #[test]
    fn the_broker_is_a_socket_or_a_tls_url_with_its_three_files() {
        let load = |broker: &str| {
            let mut c = Config::parse(&format!("[broker]\n{broker}"), Path::new("airlock.toml"))?;
            c.resolve_relative_to(Path::new("/etc/airlock"));
            Ok::<_, ConfigError>(c.broker.endpoint().unwrap())
        };
        assert_eq!(load("").unwrap(), None);
        assert_eq!(
            load("socket = \"b.sock\"\n").unwrap(),
            Some(BrokerEndpoint::Unix("/etc/airlock/b.sock".into()))
        );
        let tls = "url = \"tls://broker.internal:8643\"\ntls_ca = \"tls/ca.pem\"\n\
                   tls_cert = \"tls/w.pem\"\ntls_key = \"/keys/w.key\"\n";
        assert_eq!(
            load(tls).unwrap(),
            Some(BrokerEndpoint::Tls(crate::transport::TlsEndpoint {
                host: "broker.internal".to_owned(),
                port: 8643,
                settings: Some(TlsSettings {
                    ca: "/etc/airlock/tls/ca.pem".into(),
                    cert: "/etc/airlock/tls/w.pem".into(),
                    key: "/keys/w.key".into(),
                    server_name: None,
                }),
            }))
        );
        let named = load(&format!("{tls}tls_server_name = \"broker.acme.test\"\n")).unwrap();
        let Some(BrokerEndpoint::Tls(t)) = named else {
            panic!("{named:?}");
        };
        assert_eq!(
            t.settings.unwrap().server_name.as_deref(),
            Some("broker.acme.test")
        );
        for (text, needle) in [
            (
                format!("socket = \"b.sock\"\n{tls}"),
                "`broker.url` set either socket",
            ),
            (
                tls.replace("tls_ca = \"tls/ca.pem\"\n", ""),
                "`broker.tls_ca` url = \"tls://broker.internal:8643\" needs tls_ca",
            ),
            (
                tls.replace("tls_key = \"/keys/w.key\"\n", ""),
                "missing: tls_key",
            ),
            (
                "socket = \"b.sock\"\ntls_cert = \"w.pem\"\n".to_owned(),
                "`broker.tls_cert` is only read with url = \"tls://HOST:PORT\"",
            ),
            (
                "url = \"broker:8643\"\ntls_ca = \"ca.pem\"\n".to_owned(),
                "`broker.tls_ca` is only read with url",
            ),
            (
                "url = \"tcp://broker:8643\"\n".to_owned(),
                "\"tcp://broker:8643\" is not a broker address: unknown scheme (accepted: \
                 unix:/PATH, /PATH or tls://HOST:PORT)",
            ),
            (
                format!("{tls}tls_server_name = \"not a name\"\n"),
                "`broker.tls_server_name` \"not a name\" is not a host name",
            ),
        ] {
            let err = load(&text).unwrap_err().to_string();
            assert!(err.contains(needle), "{needle}: {err}");
        }
    }
}
