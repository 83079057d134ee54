//! The network listener's TLS: the server configuration built from `[tls]` (mutual TLS: a
//! client without a certificate signed by `client_ca` is refused in the handshake), the
//! bounded handshake, and the peer's identity as a person reads it in the log.

use std::io;
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Instant;

use airlock_protocol::tls::{
    PROTOCOL_VERSIONS, provider, read_certificates, read_private_key, read_roots,
};
use rustls::server::WebPkiClientVerifier;
use rustls::{ServerConfig, ServerConnection, StreamOwned};

use crate::config::TlsConfig;
use crate::error::{Error, Result};

pub use airlock_protocol::tls::HANDSHAKE_TIMEOUT;

/// An authenticated TLS connection to a supervisor.
pub type TlsStream = StreamOwned<ServerConnection, TcpStream>;

/// The server configuration of `[tls]`; every file is read now, so a missing or broken one
/// stops `serve` before it listens, naming the file.
pub fn server_config(files: &TlsConfig) -> Result<Arc<ServerConfig>> {
    let chain = read_certificates("tls.cert", &files.cert)?;
    let key = read_private_key("tls.key", &files.key)?;
    let roots = read_roots("tls.client_ca", &files.client_ca)?;
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
        .build()
        .map_err(|e| {
            Error::TlsSetup(format!("tls.client_ca {}: {e}", files.client_ca.display()))
        })?;
    let config = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(PROTOCOL_VERSIONS)
        .map_err(|e| Error::TlsSetup(e.to_string()))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|e| {
            Error::TlsSetup(format!(
                "tls.cert {} with tls.key {}: {e}",
                files.cert.display(),
                files.key.display()
            ))
        })?;
    Ok(Arc::new(config))
}

/// Complete the handshake on `tcp` within [`HANDSHAKE_TIMEOUT`]; answers the stream and the
/// subject of the client's certificate (which the verifier has checked against `client_ca`).
pub fn accept(mut tcp: TcpStream, config: &Arc<ServerConfig>) -> io::Result<(TlsStream, String)> {
    let mut connection = ServerConnection::new(config.clone()).map_err(io::Error::other)?;
    let deadline = Instant::now() + HANDSHAKE_TIMEOUT;
    while connection.is_handshaking() {
        let left = deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "no complete handshake within {} s",
                        HANDSHAKE_TIMEOUT.as_secs()
                    ),
                )
            })?;
        tcp.set_read_timeout(Some(left))?;
        tcp.set_write_timeout(Some(left))?;
        if let Err(e) = connection.complete_io(&mut tcp) {
            // Tell the client why (the alert rustls queued), best effort.
            let _ = connection.write_tls(&mut tcp);
            return Err(e);
        }
    }
    let subject = connection
        .peer_certificates()
        .and_then(|chain| chain.first())
        .map(|leaf| {
            subject_of(leaf.as_ref())
                .unwrap_or_else(|| "a certificate whose subject cannot be read".to_owned())
        })
        .unwrap_or_else(|| "no certificate".to_owned());
    Ok((StreamOwned::new(connection, tcp), subject))
}

/// The subject of a DER certificate as `CN=..., O=...` (RFC 4514 order, read by
/// `x509-parser`, control characters escaped), or `None` when it cannot be read.
pub fn subject_of(certificate: &[u8]) -> Option<String> {
    let (rest, parsed) = x509_parser::parse_x509_certificate(certificate).ok()?;
    if !rest.is_empty() {
        return None;
    }
    let subject = parsed.subject().to_string();
    Some(airlock_policies::terminal::escaped(&subject).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;

    #[test]
    fn the_subject_of_a_worker_certificate_is_read_and_garbage_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let pki = airlock_testkit::tls::Pki::create(dir.path());
        let der = CertificateDer::from_pem_file(&pki.client_cert).unwrap();
        assert_eq!(
            subject_of(der.as_ref()).as_deref(),
            Some("CN=worker-7.test, O=airlock tests")
        );
        for cut in [0, 1, 10, der.as_ref().len() / 2] {
            assert_eq!(subject_of(&der.as_ref()[..cut]), None, "cut at {cut}");
        }
        assert_eq!(subject_of(b"\x30\x84\xff\xff\xff\xff"), None);
    }

    #[test]
    fn serve_refuses_a_key_that_does_not_match_the_certificate() {
        let dir = tempfile::tempdir().unwrap();
        let pki = airlock_testkit::tls::Pki::create(dir.path());
        let err = server_config(&TlsConfig {
            cert: pki.server_cert.clone(),
            key: pki.client_key.clone(),
            client_ca: pki.ca.clone(),
        })
        .unwrap_err();
        assert!(err.to_string().contains("tls.cert"), "{err}");
        assert!(
            server_config(&TlsConfig {
                cert: pki.server_cert.clone(),
                key: pki.server_key.clone(),
                client_ca: pki.ca.clone(),
            })
            .is_ok()
        );
    }
}
