//! TLS for the API server: a certificate authority and a server certificate for 127.0.0.1 and
//! localhost, generated at start. kubectl (client-go) sends bearer tokens only over TLS, so a
//! token-protected cluster must speak HTTPS for kubectl to authenticate.

use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::TlsAcceptor;

use crate::error::SimError;

/// The server's TLS material.
pub struct Tls {
    /// The CA certificate (PEM) clients trust (`certificate-authority-data`).
    pub ca_pem: String,
    /// Accepts TLS connections with the server certificate.
    pub acceptor: TlsAcceptor,
}

fn tls_error(e: impl std::fmt::Display) -> SimError {
    SimError::Config(format!("cannot set up TLS: {e}"))
}

/// Generates a CA and a server certificate and the acceptor that serves it.
pub fn generate() -> Result<Tls, SimError> {
    let ca_key = KeyPair::generate().map_err(tls_error)?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(tls_error)?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "kubeferry-sim-ca");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca_params.self_signed(&ca_key).map_err(tls_error)?;
    let issuer = Issuer::new(ca_params, ca_key);

    let server_key = KeyPair::generate().map_err(tls_error)?;
    let mut server_params =
        CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
            .map_err(tls_error)?;
    server_params
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    server_params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    server_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let server_cert = server_params
        .signed_by(&server_key, &issuer)
        .map_err(tls_error)?;

    let chain = vec![
        CertificateDer::from(server_cert.der().to_vec()),
        CertificateDer::from(ca_cert.der().to_vec()),
    ];
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(server_key.serialize_der()));
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(tls_error)?
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .map_err(tls_error)?;
    // Only HTTP/1.1 is served; clients that offer h2 fall back to it.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Tls {
        ca_pem: ca_cert.pem(),
        acceptor: TlsAcceptor::from(Arc::new(config)),
    })
}
