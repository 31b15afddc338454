//! The fault suite's invariants: no orphaned child, no duplicate, no parent stuck on a
//! finalizer.

use std::time::Duration;

use kube::Client;
use kube::api::Api;

/// True when the fault suite runs in full (`make test-faults`), not its fast cases.
pub fn full_faults() -> bool {
    std::env::var("STENCIL_FAULTS").is_ok_and(|v| v == "full")
}

/// Why the fault suite's invariants do not hold for parents `parents` and the managed
/// ConfigMaps of `namespaces`, or `None` when they hold: no orphaned child (every child's
/// parent exists with the UID it names), no duplicate (one child per parent and child
/// entry), and no parent stuck on a finalizer.
pub async fn invariants_broken(
    client: &Client,
    parents: &Api<kube::api::DynamicObject>,
    namespaces: &[&str],
) -> Option<String> {
    use kube::ResourceExt;
    use std::collections::{HashMap, HashSet};
    let listed = match parents.list(&Default::default()).await {
        Ok(l) => l.items,
        Err(e) => return Some(format!("listing parents: {e}")),
    };
    let mut problems = Vec::new();
    for p in &listed {
        if p.metadata.deletion_timestamp.is_some() {
            problems.push(format!(
                "parent {} is stuck deleting ({:?})",
                p.name_any(),
                p.finalizers()
            ));
        }
    }
    let uids: HashSet<String> = listed.iter().filter_map(|p| p.uid()).collect();
    let mut seen: HashMap<(String, String), String> = HashMap::new();
    for ns in namespaces {
        let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), ns);
        let lp = kube::api::ListParams::default().labels("app.kubernetes.io/managed-by=stencil");
        let children = match cms.list(&lp).await {
            Ok(l) => l.items,
            Err(e) => return Some(format!("listing children in {ns}: {e}")),
        };
        for cm in children {
            let labels = cm.labels();
            let uid = labels.get("stencil.dev/parent-uid").cloned().unwrap_or_default();
            let entry = labels.get("stencil.dev/child").cloned().unwrap_or_default();
            let name = format!("{ns}/{}", cm.name_any());
            if !uids.contains(&uid) {
                problems.push(format!("orphan {name} (parent uid {uid})"));
            }
            if let Some(other) = seen.insert((uid, entry), name.clone()) {
                problems.push(format!("duplicate children {other} and {name}"));
            }
        }
    }
    (!problems.is_empty()).then(|| problems.join("; "))
}

/// Waits until the invariants hold (children of deleted parents take a moment to go).
pub async fn assert_invariants(client: &Client, parents: &Api<kube::api::DynamicObject>, namespaces: &[&str]) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let broken = invariants_broken(client, parents, namespaces).await;
        let Some(problem) = broken else { return };
        assert!(tokio::time::Instant::now() < deadline, "invariants broken: {problem}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
