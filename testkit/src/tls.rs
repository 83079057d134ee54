//! Certificates for the broker's TLS transport, made fresh by each test with `rcgen`: a CA, a
//! broker certificate for `localhost` and `127.0.0.1`, a worker's client certificate signed by
//! the CA, and a second, unrelated CA with a client certificate of its own (a stranger).

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// The subject common name of [`Pki::client_cert`].
pub const WORKER_NAME: &str = "worker-7.test";

/// PEM files, each written under the directory given to [`Pki::create`].
#[derive(Debug, Clone)]
pub struct Pki {
    /// The CA that signed the broker's and the worker's certificates.
    pub ca: PathBuf,
    /// The broker's certificate (chain of one), for `localhost` and `127.0.0.1`.
    pub server_cert: PathBuf,
    /// The broker's private key.
    pub server_key: PathBuf,
    /// The worker's client certificate, subject `CN=worker-7.test, O=airlock tests`.
    pub client_cert: PathBuf,
    /// The worker's private key.
    pub client_key: PathBuf,
    /// Another CA, which the broker does not trust.
    pub other_ca: PathBuf,
    /// A client certificate signed by [`Pki::other_ca`].
    pub other_client_cert: PathBuf,
    /// Its private key.
    pub other_client_key: PathBuf,
}

struct Authority {
    key: KeyPair,
    params: CertificateParams,
}

impl Authority {
    fn new(name: &str) -> Authority {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        Authority { key, params }
    }

    fn pem(&self) -> String {
        self.params.self_signed(&self.key).unwrap().pem()
    }

    /// A leaf certificate and its key, as PEM.
    fn sign(
        &self,
        names: &[&str],
        common_name: &str,
        usage: ExtendedKeyUsagePurpose,
    ) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>())
                .unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params
            .distinguished_name
            .push(DnType::OrganizationName, "airlock tests");
        params.extended_key_usages = vec![usage];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        let issuer = Issuer::from_params(&self.params, &self.key);
        let cert = params.signed_by(&key, &issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

impl Pki {
    /// Make the certificates and write them to `dir` (created when missing).
    pub fn create(dir: &Path) -> Pki {
        std::fs::create_dir_all(dir).unwrap();
        let write = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        let ca = Authority::new("airlock test CA");
        let (server_cert, server_key) = ca.sign(
            &["localhost", "127.0.0.1"],
            "broker.test",
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        let (client_cert, client_key) =
            ca.sign(&[], WORKER_NAME, ExtendedKeyUsagePurpose::ClientAuth);
        let other = Authority::new("a stranger's CA");
        let (other_client_cert, other_client_key) =
            other.sign(&[], "stranger.test", ExtendedKeyUsagePurpose::ClientAuth);
        Pki {
            ca: write("ca.pem", &ca.pem()),
            server_cert: write("broker.pem", &server_cert),
            server_key: write("broker.key", &server_key),
            client_cert: write("worker.pem", &client_cert),
            client_key: write("worker.key", &client_key),
            other_ca: write("other-ca.pem", &other.pem()),
            other_client_cert: write("stranger.pem", &other_client_cert),
            other_client_key: write("stranger.key", &other_client_key),
        }
    }
}
