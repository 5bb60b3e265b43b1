//! Test certificate authorities and server certificates (rcgen), and TLS clients that trust
//! exactly one such authority.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose};

pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl TestCa {
    pub fn new(name: &str) -> TestCa {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        params.distinguished_name.push(DnType::CommonName, name);
        TestCa { issuer: CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap() }
    }

    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// Writes this CA (`STEM-ca.pem`) and a server certificate for localhost and 127.0.0.1 it
    /// signed (`STEM-cert.pem`, `STEM-key.pem`) into `dir`; returns (ca, cert, key).
    pub fn write_server(&self, dir: &Path, stem: &str) -> (PathBuf, PathBuf, PathBuf) {
        let key = KeyPair::generate().unwrap();
        let params = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let paths = [
            dir.join(format!("{stem}-ca.pem")),
            dir.join(format!("{stem}-cert.pem")),
            dir.join(format!("{stem}-key.pem")),
        ];
        std::fs::write(&paths[0], self.pem()).unwrap();
        std::fs::write(&paths[1], cert.pem()).unwrap();
        std::fs::write(&paths[2], key.serialize_pem()).unwrap();
        let [ca, cert, key] = paths;
        (ca, cert, key)
    }

    /// A client that trusts this CA only.
    pub fn connector(&self) -> tokio_rustls::TlsConnector {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.issuer.der().clone()).unwrap();
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        tokio_rustls::TlsConnector::from(Arc::new(config))
    }
}

/// A TLS connection to `addr` (127.0.0.1:PORT) checked as `localhost` against `ca`.
pub async fn connect(
    addr: &str,
    ca: &TestCa,
) -> std::io::Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    ca.connector().connect(name, tcp).await
}
