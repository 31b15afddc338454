//! A sharded rollout's reports, carried on the membership Leases: each member writes how
//! its share of a step is doing onto its own Lease (one annotation per definition, written
//! when it changes), and the leader reads every other held Lease of the ring to judge the
//! step on the whole ring ([`crate::rollout::across`]).

use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;

use super::Member;
use crate::labels;
use crate::rollout::{ShareReport, report_annotation as annotation};

/// Writes `report` onto `member`'s own Lease.
///
/// # Errors
///
/// The API server refused the patch.
pub async fn publish(
    client: &Client,
    member: &Member,
    definition: &str,
    report: &ShareReport,
) -> Result<(), kube::Error> {
    let api: Api<Lease> = Api::namespaced(client.clone(), &member.namespace);
    let text = serde_json::to_string(report).expect("a report is JSON");
    let patch = json!({"metadata": {"annotations": {annotation(definition): text}}});
    api.patch(&member.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
}

/// Every other member of `member`'s ring that holds its Lease, with its report for
/// `definition` when it wrote one that reads. A released Lease (a member that stopped)
/// has no share: the sharder moves its parents to the others.
///
/// # Errors
///
/// The Leases could not be listed.
pub async fn others(
    client: &Client,
    member: &Member,
    definition: &str,
) -> Result<Vec<(String, Option<ShareReport>)>, kube::Error> {
    let api: Api<Lease> = Api::namespaced(client.clone(), &member.namespace);
    let ring = format!("{}={}", labels::RING, member.ring);
    let key = annotation(definition);
    let leases = api.list(&ListParams::default().labels(&ring)).await?;
    Ok(leases
        .items
        .into_iter()
        .filter_map(|lease| {
            let name = lease.metadata.name?;
            let holder = lease.spec.and_then(|s| s.holder_identity);
            if name == member.name || holder.as_deref() != Some(name.as_str()) {
                return None;
            }
            let report = lease
                .metadata
                .annotations
                .and_then(|a| a.get(&key).and_then(|text| serde_json::from_str(text).ok()));
            Some((name, report))
        })
        .collect())
}
