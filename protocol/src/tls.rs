//! The TLS settings both ends of the network transport share: the crypto provider, the one
//! protocol version, and how their PEM files are read. The broker's listener and the
//! supervisor's client take them from here, so the two cannot drift apart.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// A PEM file of the TLS configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("{key} {}: {message}", path.display())]
pub struct PemError {
    /// The configuration key that names the file (`tls.cert`, `[broker] tls_ca`, ...).
    pub key: String,
    /// The file.
    pub path: PathBuf,
    /// What is wrong with it.
    pub message: String,
}

/// The longest a TLS handshake may take, on either end (and a worker's TCP connect): a silent
/// client cannot hold one of the broker's threads, and a broker that accepts but never
/// answers cannot hold a worker.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// The crypto provider of both ends: `ring`, the one ureq already links.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The protocol versions spoken: TLS 1.3 only (both ends are airlock's own).
pub static PROTOCOL_VERSIONS: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS13];

/// Every certificate of the PEM file `path` (a chain: the leaf first), which must hold at
/// least one; `key` names the configuration key in errors.
pub fn read_certificates(key: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, PemError> {
    let error = |message: String| PemError {
        key: key.to_owned(),
        path: path.to_path_buf(),
        message,
    };
    check_readable(path).map_err(error)?;
    let certificates = CertificateDer::pem_file_iter(path)
        .and_then(|items| items.collect::<Result<Vec<_>, _>>())
        .map_err(|e| error(format!("not a PEM certificate file: {e}")))?;
    if certificates.is_empty() {
        return Err(error(
            "holds no PEM certificate (a `-----BEGIN CERTIFICATE-----` section)".to_owned(),
        ));
    }
    Ok(certificates)
}

/// The private key of the PEM file `path` (PKCS#8, PKCS#1 or SEC1); `key` names the
/// configuration key in errors.
pub fn read_private_key(key: &str, path: &Path) -> Result<PrivateKeyDer<'static>, PemError> {
    let error = |message: String| PemError {
        key: key.to_owned(),
        path: path.to_path_buf(),
        message,
    };
    check_readable(path).map_err(error)?;
    PrivateKeyDer::from_pem_file(path).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => error(
            "holds no PEM private key (a `-----BEGIN PRIVATE KEY-----` section or its RSA or EC \
             form)"
                .to_owned(),
        ),
        other => error(format!("not a PEM private key file: {other}")),
    })
}

/// A trust store of every certificate of the PEM file `path` (a CA); `key` names the
/// configuration key in errors.
pub fn read_roots(key: &str, path: &Path) -> Result<rustls::RootCertStore, PemError> {
    let mut roots = rustls::RootCertStore::empty();
    for certificate in read_certificates(key, path)? {
        roots.add(certificate).map_err(|e| PemError {
            key: key.to_owned(),
            path: path.to_path_buf(),
            message: format!("not a usable CA certificate: {e}"),
        })?;
    }
    Ok(roots)
}

/// A missing or unreadable file is said as such, not as a PEM syntax error.
fn check_readable(path: &Path) -> Result<(), String> {
    std::fs::File::open(path)
        .map(drop)
        .map_err(|e| format!("cannot read: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_file_and_a_file_that_is_not_pem_are_named_with_their_key() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let err = read_certificates("tls.cert", &missing).unwrap_err();
        assert_eq!(err.key, "tls.cert");
        assert!(
            err.to_string().contains("missing.pem: cannot read"),
            "{err}"
        );
        let garbage = dir.path().join("garbage.pem");
        std::fs::write(&garbage, "not a certificate\n").unwrap();
        let err = read_certificates("tls.client_ca", &garbage).unwrap_err();
        assert!(
            err.to_string().contains("holds no PEM certificate"),
            "{err}"
        );
        let err = read_private_key("tls.key", &garbage).unwrap_err();
        assert!(
            err.to_string().contains("holds no PEM private key"),
            "{err}"
        );
        let broken = dir.path().join("broken.pem");
        std::fs::write(&broken, "-----BEGIN CERTIFICATE-----\nAAAA\n").unwrap();
        let err = read_certificates("tls.cert", &broken).unwrap_err();
        assert!(
            err.to_string().contains("not a PEM certificate file"),
            "{err}"
        );
    }
}
