//! TLS as the API server sees the conversion webhook: which certificate it presents, and
//! a fresh CA with a serving certificate for loopback.

/// The certificates in a PEM bundle, as DER.
pub fn pem_certificates(pem: &[u8]) -> Vec<Vec<u8>> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject as _;
    CertificateDer::pem_slice_iter(pem)
        .map(|c| c.expect("a PEM certificate").to_vec())
        .collect()
}

/// The serving certificate the webhook on loopback `port` presents, verified against
/// the CA in `ca_pem` for the name 127.0.0.1; none while nothing listens there or the
/// handshake fails.
pub fn presented_certificate(port: u16, ca_pem: &[u8]) -> Option<Vec<u8>> {
    use std::io::Write as _;
    let mut roots = rustls::RootCertStore::empty();
    for der in pem_certificates(ca_pem) {
        roots.add(der.into()).ok()?;
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .ok()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").ok()?;
    let mut conn = rustls::ClientConnection::new(std::sync::Arc::new(config), name).ok()?;
    let mut tcp = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    tcp.set_read_timeout(Some(std::time::Duration::from_secs(5))).ok()?;
    let mut tls = rustls::Stream::new(&mut conn, &mut tcp);
    tls.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .ok()?;
    Some(conn.peer_certificates()?.first()?.to_vec())
}

/// A fresh CA and a serving certificate it signs for 127.0.0.1, as PEM: (certificate,
/// key, CA).
pub fn loopback_certificates() -> (String, String, String) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, KeyUsagePurpose};
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
    let ca_key = KeyPair::generate().unwrap();
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&key, &Issuer::new(ca_params, ca_key))
        .unwrap();
    (cert.pem(), key.serialize_pem(), ca.pem())
}

/// The arguments of a leader-elected replica in namespace `ns` serving `group`'s
/// definitions from `defs`, its webhook on loopback `port`, the CRDs told to call
/// `called` (as a Service reaches any replica), its certificate kept in Secret
/// `webhook-cert`.
pub fn webhook_replica_args(defs: &std::path::Path, ns: &str, group: &str, port: u16, called: u16) -> Vec<String> {
    vec![
        format!("--definitions={}", defs.display()),
        format!("--namespace={ns}"),
        "--no-cluster-definitions".to_string(),
        "--leader-elect".to_string(),
        format!("--leader-election-id=stencil-{}", &group[..9]),
        format!("--leader-election-namespace={ns}"),
        format!("--webhook-addr=127.0.0.1:{port}"),
        format!("--webhook-url=https://127.0.0.1:{called}"),
        "--webhook-secret=webhook-cert".to_string(),
    ]
}
