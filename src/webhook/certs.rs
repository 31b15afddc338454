//! The webhook's serving certificate: read from a directory (cert-manager's, or your
//! own), or generated once with a CA and kept in a Secret so that every replica serves
//! the same one. The CA is what each converting CRD trusts.

use std::path::Path;
use std::sync::Arc;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::crd::Endpoint;

/// Annotation on the generated Secret: the host names its certificate covers.
const HOSTS: &str = "stencil.dev/webhook-hosts";

/// How long a generated certificate is valid.
const VALIDITY_DAYS: i64 = 3650;

/// A certificate that cannot be read, made or kept.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// A file of `--webhook-cert-dir` cannot be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The PEM does not hold a usable certificate and key.
    #[error("{what}: {message}")]
    Pem {
        /// Which certificate.
        what: String,
        /// What is wrong.
        message: String,
    },
    /// Generating a certificate failed.
    #[error("generating the webhook certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// The Secret that keeps the certificate cannot be read or written.
    #[error("keeping the webhook certificate in Secret {namespace}/{name}: {source}")]
    Secret {
        /// The Secret's namespace.
        namespace: String,
        /// The Secret's name.
        name: String,
        /// What the API server said.
        source: kube::Error,
    },
}

/// A serving certificate chain, its key, and the CA bundle that verifies it (PEM).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Certificates {
    /// The serving certificate, then any intermediates.
    pub cert: Vec<u8>,
    /// The private key.
    pub key: Vec<u8>,
    /// The CA the API server trusts.
    pub ca: Vec<u8>,
}

/// The names the API server uses to reach `endpoint`, which the certificate must cover.
pub fn hosts(endpoint: &Endpoint) -> Vec<String> {
    match endpoint {
        Endpoint::Service { namespace, name } => vec![
            format!("{name}.{namespace}.svc"),
            format!("{name}.{namespace}.svc.cluster.local"),
            format!("{name}.{namespace}"),
            name.clone(),
        ],
        Endpoint::Url(url) => {
            let rest = url.split_once("://").map_or(url.as_str(), |(_, r)| r);
            let authority = rest.split('/').next().unwrap_or_default();
            let host = match authority.strip_prefix('[') {
                Some(v6) => v6.split(']').next().unwrap_or_default(),
                None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
            };
            vec![host.to_string()]
        }
    }
}

/// A fresh CA, and a serving certificate it signs for `hosts`.
///
/// # Errors
///
/// The certificates cannot be made (a host that is not a DNS name or IP address).
pub fn generate(hosts: &[String]) -> Result<Certificates, CertError> {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
    let now = time::OffsetDateTime::now_utc();
    let valid = |p: &mut CertificateParams| {
        p.not_before = now - time::Duration::hours(1);
        p.not_after = now + time::Duration::days(VALIDITY_DAYS);
    };
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "stencil-webhook-ca");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    valid(&mut ca_params);
    let ca_key = KeyPair::generate()?;
    let ca = ca_params.self_signed(&ca_key)?;
    let mut params = CertificateParams::new(hosts.to_vec())?;
    params.distinguished_name.push(
        DnType::CommonName,
        hosts.first().map_or("stencil-webhook", String::as_str),
    );
    valid(&mut params);
    let key = KeyPair::generate()?;
    let issuer = Issuer::new(ca_params, ca_key);
    let cert = params.signed_by(&key, &issuer)?;
    Ok(Certificates {
        cert: cert.pem().into_bytes(),
        key: key.serialize_pem().into_bytes(),
        ca: ca.pem().into_bytes(),
    })
}

/// The certificate in `dir`: `tls.crt` and `tls.key`, and `ca.crt` when the CA is not
/// the certificate itself (as cert-manager writes them).
///
/// # Errors
///
/// A file is missing or is not PEM.
pub fn read_dir(dir: &Path) -> Result<Certificates, CertError> {
    let read = |name: &str| {
        let path = dir.join(name);
        std::fs::read(&path).map_err(|source| CertError::Read {
            path: path.display().to_string(),
            source,
        })
    };
    let cert = read("tls.crt")?;
    let key = read("tls.key")?;
    let ca = match read("ca.crt") {
        Ok(ca) if !ca.is_empty() => ca,
        _ => cert.clone(),
    };
    Ok(Certificates { cert, key, ca })
}

/// The TLS settings that serve `certs`, with the ring provider Stencil's client uses too.
///
/// # Errors
///
/// The certificate or key cannot serve TLS.
pub fn server_config(certs: &Certificates, what: &str) -> Result<Arc<ServerConfig>, CertError> {
    let pem = |message: String| CertError::Pem {
        what: what.to_string(),
        message,
    };
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&certs.cert)
        .collect::<Result<_, _>>()
        .map_err(|e| pem(format!("tls.crt: {e}")))?;
    if chain.is_empty() {
        return Err(pem("tls.crt holds no certificate".into()));
    }
    let key = PrivateKeyDer::from_pem_slice(&certs.key).map_err(|e| pem(format!("tls.key: {e}")))?;
    let config = ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_no_client_auth().with_single_cert(chain, key))
        .map_err(|e| pem(e.to_string()))?;
    Ok(Arc::new(config))
}

/// The certificate kept in Secret `namespace/name`, made (or remade, when it does not
/// cover `hosts`) if needed. Replicas racing to make it all end up with the one stored.
///
/// # Errors
///
/// The Secret cannot be read or written, or what it holds cannot serve.
pub async fn from_secret(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    hosts: &[String],
) -> Result<Certificates, CertError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let fail = |source| CertError::Secret {
        namespace: namespace.to_string(),
        name: name.to_string(),
        source,
    };
    loop {
        let live = api.get_opt(name).await.map_err(fail)?;
        if let Some(certs) = live.as_ref().and_then(|s| stored(s, hosts)) {
            return Ok(certs);
        }
        let certs = generate(hosts)?;
        let data = [("tls.crt", &certs.cert), ("tls.key", &certs.key), ("ca.crt", &certs.ca)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), ByteString(v.clone())))
            .collect();
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                namespace: Some(namespace.to_string()),
                resource_version: live.as_ref().and_then(|s| s.metadata.resource_version.clone()),
                labels: Some([(crate::labels::MANAGED_BY.into(), crate::labels::MANAGED_BY_VALUE.into())].into()),
                annotations: Some([(HOSTS.to_string(), hosts.join(","))].into()),
                ..ObjectMeta::default()
            },
            type_: Some("kubernetes.io/tls".into()),
            data: Some(data),
            ..Secret::default()
        };
        let written = match &live {
            None => api.create(&PostParams::default(), &secret).await,
            Some(_) => api.replace(name, &PostParams::default(), &secret).await,
        };
        match written {
            Ok(_) => {
                tracing::info!(namespace, name, hosts = ?hosts, "generated the webhook certificate");
                return Ok(certs);
            }
            // Another replica wrote it first: use theirs.
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(e) => return Err(fail(e)),
        }
    }
}

/// The certificate a Secret holds, if it covers `hosts`.
pub fn stored(secret: &Secret, hosts: &[String]) -> Option<Certificates> {
    let covered: Vec<&str> = secret
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(HOSTS))
        .map(|h| h.split(',').collect())
        .unwrap_or_default();
    if !hosts.iter().all(|h| covered.contains(&h.as_str())) {
        return None;
    }
    let data = secret.data.as_ref()?;
    let field = |k: &str| data.get(k).map(|b| b.0.clone()).filter(|b| !b.is_empty());
    Some(Certificates {
        cert: field("tls.crt")?,
        key: field("tls.key")?,
        ca: field("ca.crt")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_certificate_serves_and_covers_its_hosts() {
        let hosts = hosts(&Endpoint::Url("https://127.0.0.1:9443".into()));
        assert_eq!(hosts, vec!["127.0.0.1".to_string()]);
        let certs = generate(&hosts).unwrap();
        assert!(String::from_utf8_lossy(&certs.ca).starts_with("-----BEGIN CERTIFICATE-----"));
        server_config(&certs, "generated").unwrap();
        let broken = Certificates {
            key: b"not a key".to_vec(),
            ..certs
        };
        let e = server_config(&broken, "--webhook-cert-dir").unwrap_err().to_string();
        assert!(e.contains("tls.key"), "{e}");
    }

    #[test]
    fn a_service_endpoint_is_covered_by_its_cluster_names() {
        let names = hosts(&Endpoint::Service {
            namespace: "stencil-system".into(),
            name: "stencil-webhook".into(),
        });
        assert!(names.contains(&"stencil-webhook.stencil-system.svc".to_string()));
        assert_eq!(
            hosts(&Endpoint::Url("https://[::1]:9443/x".into())),
            vec!["::1".to_string()]
        );
    }

    #[test]
    fn a_secret_that_misses_a_host_is_not_used() {
        let certs = generate(&["a.example".to_string()]).unwrap();
        let secret = Secret {
            metadata: ObjectMeta {
                annotations: Some([(HOSTS.to_string(), "a.example".to_string())].into()),
                ..ObjectMeta::default()
            },
            data: Some(
                [("tls.crt", &certs.cert), ("tls.key", &certs.key), ("ca.crt", &certs.ca)]
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), ByteString(v.clone())))
                    .collect(),
            ),
            ..Secret::default()
        };
        assert_eq!(stored(&secret, &["a.example".to_string()]), Some(certs));
        assert_eq!(stored(&secret, &["b.example".to_string()]), None);
    }

    #[test]
    fn a_directory_without_a_ca_trusts_the_certificate_itself() {
        let dir = tempfile::tempdir().unwrap();
        let certs = generate(&["x.example".to_string()]).unwrap();
        std::fs::write(dir.path().join("tls.crt"), &certs.cert).unwrap();
        std::fs::write(dir.path().join("tls.key"), &certs.key).unwrap();
        let read = read_dir(dir.path()).unwrap();
        assert_eq!(read.ca, certs.cert);
        let e = read_dir(&dir.path().join("missing")).unwrap_err().to_string();
        assert!(e.contains("tls.crt"), "{e}");
    }
}
