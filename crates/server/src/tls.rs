//! TLS with rustls: the certificate and key from PEM files, and a listener that completes
//! handshakes off the accept loop so that a slow or broken client cannot hold up others.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tracing::debug;

/// How long a client may take to complete the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Why TLS cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file could not be read or holds nothing usable.
    #[error("tls.{field} {path}: {message}")]
    File {
        /// `certFile` or `keyFile`.
        field: &'static str,
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// rustls refused the pair.
    #[error("tls: the certificate and key cannot be used together: {0}")]
    Config(#[from] rustls::Error),
}

/// A rustls server configuration from a PEM certificate chain and private key.
pub fn server_config(cert_file: &Path, key_file: &Path) -> Result<rustls::ServerConfig, TlsError> {
    let file_error = |field, path: &Path, message: String| TlsError::File {
        field,
        path: path.display().to_string(),
        message,
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert_file)
        .map_err(|e| file_error("certFile", cert_file, e.to_string()))?
        .collect::<Result<_, _>>()
        .map_err(|e| file_error("certFile", cert_file, e.to_string()))?;
    if certs.is_empty() {
        return Err(file_error(
            "certFile",
            cert_file,
            "holds no PEM certificate".into(),
        ));
    }
    let key = PrivateKeyDer::from_pem_file(key_file).map_err(|e| {
        file_error(
            "keyFile",
            key_file,
            format!("no usable PEM private key: {e}"),
        )
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// A listener handing out TLS streams whose handshakes have completed.
pub struct TlsListener {
    handshaken: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
    accepting: tokio::task::JoinHandle<()>,
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

impl TlsListener {
    /// Serves TLS with `config` on `listener`.
    pub fn new(listener: TcpListener, config: rustls::ServerConfig) -> std::io::Result<Self> {
        let local = listener.local_addr()?;
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let (sender, handshaken) = mpsc::channel(64);
        let accepting = tokio::spawn(async move {
            loop {
                let (stream, peer) = match listener.accept().await {
                    Ok(accepted) => accepted,
                    Err(error) => {
                        // Out of file descriptors and the like: wait, as axum's own loop does.
                        debug!(message = "accept failed", %error);
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let acceptor = acceptor.clone();
                let sender = sender.clone();
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => {
                            let _ = sender.send((tls, peer)).await;
                        }
                        Ok(Err(error)) => {
                            debug!(message = "TLS handshake failed", %peer, %error);
                        }
                        Err(_) => debug!(message = "TLS handshake timed out", %peer),
                    }
                });
            }
        });
        Ok(Self {
            handshaken,
            local,
            accepting,
        })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.handshaken.recv().await {
            Some(accepted) => accepted,
            // The accept loop never ends on its own; it is stopped only with the listener.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}
