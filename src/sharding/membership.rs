//! A member's place in the ring: a Lease named after the member, labelled with the ring,
//! held and renewed exactly as the leader Lease is ([`crate::leader::Election`]). Its
//! fence closes at the renew deadline after the last renewal, so a member that stops
//! renewing (paused, cut off) has stopped writing before the sharder, a Lease duration
//! after it last saw a renewal, moves its parents.

use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::labels;
use crate::leader::{Election, ElectionError, Settings};
use crate::metrics::Metrics;

/// Joins `ring` as `settings.identity`, on a Lease of that name in `settings.namespace`.
///
/// # Errors
///
/// The Lease cannot be created or labelled, or the election on it cannot start.
pub async fn join(
    client: Client,
    settings: &Settings,
    ring: &str,
    metrics: &Metrics,
) -> Result<Election, ElectionError> {
    let own = Settings {
        name: settings.identity.clone(),
        ..settings.clone()
    };
    label_lease(&client, &own, ring)
        .await
        .map_err(|source| ElectionError::Ring {
            lease: format!("{}/{}", own.namespace, own.name),
            source,
        })?;
    Election::start(client, &own, metrics).await
}

/// Creates the member's Lease with the ring label, or adds the label to one that exists
/// (a restarted member's).
async fn label_lease(client: &Client, own: &Settings, ring: &str) -> Result<(), kube::Error> {
    let api: Api<Lease> = Api::namespaced(client.clone(), &own.namespace);
    let lease: Lease = serde_json::from_value(json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": own.name, "labels": {labels::RING: ring}},
        "spec": {},
    }))
    .expect("a Lease");
    match api.create(&PostParams::default(), &lease).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let patch = json!({"metadata": {"labels": {labels::RING: ring}}});
            api.patch(&own.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map(|_| ())
        }
        Err(e) => Err(e),
    }
}
