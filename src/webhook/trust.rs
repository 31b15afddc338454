//! Rotating the webhook's certificate without a failed conversion: the converting CRDs
//! are made to trust the new CA before the new certificate is served.
//!
//! When a replica's certificate changes (cert-manager renews it, the Secret is made
//! again), it publishes the CA bundle the CRDs should trust (the new CA, then the one it
//! served until now), waits until every converting CRD it reads trusts the new CA, and
//! only then serves the new certificate. The leader writes the bundle it publishes into
//! each converting CRD's `caBundle` ([`keep_trusted`]): replicas still serving the old
//! certificate stay trusted meanwhile. A replica whose CRDs never come to trust the new
//! CA (no leader rotates) serves it after [`TRUST_WAIT`] anyway, and says so.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;
use tokio::sync::{mpsc, watch};

use super::{Conversions, certs};
use crate::crd::Webhook;
use crate::leader::Leadership;

/// How long a replica waits for the CRDs to trust its new CA before it serves it anyway.
const TRUST_WAIT: Duration = Duration::from_secs(300);

/// How often the leader and a waiting replica look at the CRDs again.
const LOOK: Duration = Duration::from_millis(250);

/// The certificates in a PEM bundle, as DER.
fn ders(pem: &[u8]) -> Vec<Vec<u8>> {
    CertificateDer::pem_slice_iter(pem)
        .filter_map(Result::ok)
        .map(|c| c.as_ref().to_vec())
        .collect()
}

/// The bundle to trust while moving from `old` to `new`: `new`'s certificates, then
/// `old`'s that `new` lacks.
pub(super) fn bundle(new: &[u8], old: &[u8]) -> Vec<u8> {
    let fresh = ders(new);
    let mut out = new.to_vec();
    if !out.is_empty() && !out.ends_with(b"\n") {
        out.push(b'\n');
    }
    for der in ders(old).into_iter().filter(|d| !fresh.contains(d)) {
        out.extend_from_slice(pem(&der).as_bytes());
    }
    out
}

/// One certificate as PEM.
fn pem(der: &[u8]) -> String {
    let config = pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF);
    pem::encode_config(&pem::Pem::new("CERTIFICATE", der), config)
}

/// Whether `webhook`'s `caBundle` holds every certificate of `ca`.
fn trusts(webhook: &Webhook, ca: &[u8]) -> bool {
    let held = ders(&webhook.ca_bundle);
    ders(ca).iter().all(|d| held.contains(d))
}

/// The converting CRDs that send their reviews to `endpoint`, by name, with the webhook
/// each points at.
fn ours(conversions: &Conversions, endpoint: &crate::crd::Endpoint) -> Vec<(String, Webhook)> {
    conversions
        .live_webhooks()
        .into_iter()
        .filter(|(_, w)| w.endpoint == *endpoint)
        .collect()
}

/// Serves each certificate `fresh` brings once the CRDs trust its CA, publishing what they
/// should trust on `trust`, until `fresh` ends.
pub(super) async fn rotate(
    mut current: certs::Certificates,
    mut fresh: mpsc::UnboundedReceiver<certs::Certificates>,
    tls: axum_server::tls_rustls::RustlsConfig,
    trust: watch::Sender<Webhook>,
    conversions: Conversions,
    what: String,
) {
    while let Some(next) = fresh.recv().await {
        if next == current {
            continue;
        }
        let config = match certs::server_config(&next, &what) {
            Ok(config) => config,
            Err(e) => {
                tracing::warn!(error = %e, "keeping the last webhook certificate");
                continue;
            }
        };
        let endpoint = trust.borrow().endpoint.clone();
        trust.send_modify(|w| w.ca_bundle = bundle(&next.ca, &current.ca));
        let deadline = tokio::time::Instant::now() + TRUST_WAIT;
        while !ours(&conversions, &endpoint).iter().all(|(_, w)| trusts(w, &next.ca)) {
            if tokio::time::Instant::now() >= deadline {
                tracing::warn!(source = %what, "the converting CRDs do not trust the new webhook CA after {TRUST_WAIT:?}; serving it anyway");
                break;
            }
            tokio::time::sleep(LOOK).await;
        }
        tls.reload_from_config(config);
        tracing::info!(source = %what, "reloaded the webhook certificate");
        current = next;
    }
}

/// While this process leads, writes the bundle `trust` holds into the `caBundle` of each
/// converting CRD that sends its reviews here and lacks part of it. `client` is the
/// leader's (fenced); the write touches `caBundle` alone.
pub async fn keep_trusted(
    client: kube::Client,
    leadership: Leadership,
    mut trust: watch::Receiver<Webhook>,
    conversions: Conversions,
) {
    let api: Api<CustomResourceDefinition> = Api::all(client);
    loop {
        if leadership.now() {
            let webhook = trust.borrow_and_update().clone();
            for (name, live) in ours(&conversions, &webhook.endpoint) {
                if trusts(&live, &webhook.ca_bundle) {
                    continue;
                }
                let patch = serde_json::json!({"spec": {"conversion": {"webhook": {"clientConfig": {
                    "caBundle": k8s_openapi::ByteString(webhook.ca_bundle.clone())}}}}});
                match api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                    Ok(_) => tracing::info!(crd = %name, "the CRD trusts the webhook's CA bundle"),
                    Err(e) => {
                        tracing::warn!(crd = %name, error = %e, "cannot write the webhook's CA bundle; retrying")
                    }
                }
            }
        }
        tokio::select! {
            changed = trust.changed() => if changed.is_err() { return },
            () = tokio::time::sleep(LOOK * 4) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ca(host: &str) -> Vec<u8> {
        certs::generate(&[host.to_string()]).unwrap().ca
    }

    fn trusting(bundle: &[u8]) -> Webhook {
        Webhook {
            endpoint: crate::crd::Endpoint::Url("https://127.0.0.1:9443".into()),
            ca_bundle: bundle.to_vec(),
        }
    }

    #[test]
    fn a_rotation_trusts_the_new_ca_and_the_old_one_until_it_is_served() {
        let (old, new) = (ca("a.example"), ca("a.example"));
        let both = bundle(&new, &old);
        assert_eq!(ders(&both), [ders(&new), ders(&old)].concat());
        assert_eq!(ders(&bundle(&new, &new)), ders(&new), "no certificate twice");
        assert_eq!(
            ders(&bundle(&new, &both)),
            ders(&both),
            "the old bundle's extras stay once"
        );
        assert!(trusts(&trusting(&both), &new) && trusts(&trusting(&both), &old));
        assert!(!trusts(&trusting(&old), &new), "a CRD that knows only the old CA");
        assert!(!trusts(&trusting(&old), &both));
    }
}
