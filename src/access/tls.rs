//! TLS for the daemon's network doors: the certificate and key of `server.tls_cert` and
//! `server.tls_key`, served by the `tls:` JSON-RPC listener and the web page, and read again
//! on SIGHUP (a pair that does not load is reported and the one in use kept), so a renewed
//! certificate needs no restart.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum_server::tls_rustls::RustlsConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::config::ServerSettings;
use crate::error::{Error, Result};

/// The certificate in use, shared by every TLS listener of the process.
pub struct ServerTls {
    cert: PathBuf,
    key: PathBuf,
    config: RustlsConfig,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls").field("cert", &self.cert).field("key", &self.key).finish_non_exhaustive()
    }
}

impl ServerTls {
    /// The configured pair, or `None` when TLS is not configured.
    pub fn configured(settings: &ServerSettings) -> Result<Option<Arc<ServerTls>>> {
        if settings.tls_cert.as_os_str().is_empty() {
            return Ok(None);
        }
        let config = server_config(&settings.tls_cert, &settings.tls_key)?;
        Ok(Some(Arc::new(ServerTls {
            cert: settings.tls_cert.clone(),
            key: settings.tls_key.clone(),
            config: RustlsConfig::from_config(config),
        })))
    }

    /// For a listener of its own: the handshake with the current certificate.
    pub fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        tokio_rustls::TlsAcceptor::from(self.config.get_inner())
    }

    /// For the web server, which reads the current certificate at each handshake itself.
    pub fn rustls(&self) -> RustlsConfig {
        self.config.clone()
    }

    /// Reads the files again; the pair in use stays when they do not load.
    pub fn reload(&self) -> Result<()> {
        self.config.reload_from_config(server_config(&self.cert, &self.key)?);
        Ok(())
    }

    /// Reloads on every SIGHUP for as long as the process runs.
    pub fn reload_on_sighup(self: Arc<Self>) {
        let Ok(mut hangups) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) else {
            tracing::warn!("cannot install a SIGHUP handler: the TLS certificate is read at start only");
            return;
        };
        tokio::spawn(async move {
            while hangups.recv().await.is_some() {
                match self.reload() {
                    Ok(()) => tracing::info!(cert = %self.cert.display(), "reloaded the TLS certificate"),
                    Err(e) => {
                        tracing::error!(error = %e, "the TLS certificate did not reload; still serving the old one")
                    }
                }
            }
        });
    }
}

fn server_config(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>> {
    let bad = |path: &Path, what: &str, e: &dyn std::fmt::Display| {
        Error::Config(format!("{} ({what}): {e}; give a PEM file", path.display()))
    };
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| bad(cert, "server.tls_cert", &e))?
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| bad(cert, "server.tls_cert", &e))?;
    if chain.is_empty() {
        return Err(bad(cert, "server.tls_cert", &"no certificate in it"));
    }
    let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| bad(key, "server.tls_key", &e))?;
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Internal(format!("TLS setup: {e}")))?
        .with_no_client_auth()
        .with_single_cert(chain, key_der)
        .map_err(|e| Error::Config(format!("server.tls_cert and server.tls_key do not make a pair: {e}")))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
