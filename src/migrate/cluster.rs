//! The cluster's own storage migration: a `StorageVersionMigration`
//! (`storagemigration.k8s.io/v1`, KEP-4192, stable in Kubernetes 1.37) that
//! kube-controller-manager's storage-version-migrator controller carries out. Stencil
//! creates one for a parent resource and follows its conditions. Where the API is not
//! served, creating one is forbidden, the migration fails, or no controller takes it up
//! within [`PICKUP`], the caller rewrites the objects itself.

use std::time::Duration;

use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube::core::ApiResource;
use serde_json::{Value, json};

use crate::labels;

/// How long a new migration may wait for the controller to take it up.
const PICKUP: Duration = Duration::from_secs(60);

/// How often a running migration is looked at.
const POLL: Duration = Duration::from_secs(1);

/// How the cluster's migration ended.
#[derive(Debug)]
pub(super) enum Outcome {
    /// Every object is stored at the storage version.
    Succeeded,
    /// It succeeded, and its StorageVersionMigration could not be deleted after retries.
    Undeleted(kube::Error),
    /// The cluster could not migrate; the reason, for the log.
    Unavailable(String),
}

fn resource() -> ApiResource {
    ApiResource {
        group: "storagemigration.k8s.io".into(),
        version: "v1".into(),
        api_version: "storagemigration.k8s.io/v1".into(),
        kind: "StorageVersionMigration".into(),
        plural: "storageversionmigrations".into(),
    }
}

/// The name of the migration of `crd` in `switch`: one per switch, so a restarted
/// Stencil follows the migration it started instead of starting another, and never one
/// an earlier switch left.
pub(super) fn name(crd: &str, switch: &super::Switch) -> String {
    format!("{crd}-{}", switch.id)
}

/// How often deleting a finished migration is tried before the migration reports it.
const DELETE_TRIES: u32 = 5;

/// The status of condition `type_` of a migration, when it has one.
fn condition<'a>(svm: &'a Value, type_: &str) -> Option<(&'a str, &'a str)> {
    let c = svm
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)?;
    Some((c["status"].as_str()?, c["message"].as_str().unwrap_or_default()))
}

/// Where a migration stands, from its conditions.
fn judge(svm: &Value) -> Option<Outcome> {
    if condition(svm, "Succeeded").is_some_and(|(s, _)| s == "True") {
        return Some(Outcome::Succeeded);
    }
    match condition(svm, "Failed") {
        Some(("True", message)) => Some(Outcome::Unavailable(format!(
            "the cluster's migration failed: {message}"
        ))),
        _ => None,
    }
}

/// Migrates `group`'s resource `plural` through a StorageVersionMigration named `name`
/// for `switch`, and deletes it once it has ended (it is a one-shot request; a later
/// switch gets a fresh one). A delete that fails is tried again; a success whose
/// migration cannot be deleted is [`Outcome::Undeleted`], so nothing is pruned on it.
pub(super) async fn migrate(
    client: &kube::Client,
    group: &str,
    plural: &str,
    name: &str,
    switch: &super::Switch,
) -> Outcome {
    let served = client
        .list_api_group_resources("storagemigration.k8s.io/v1")
        .await
        .is_ok_and(|l| l.resources.iter().any(|r| r.name == "storageversionmigrations"));
    if !served {
        return Outcome::Unavailable("the cluster does not serve storagemigration.k8s.io/v1".into());
    }
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource());
    let outcome = follow(&api, group, plural, name, switch).await;
    for attempt in 1..=DELETE_TRIES {
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => break,
            Err(kube::Error::Api(s)) if s.code == 404 => break,
            Err(e) if attempt == DELETE_TRIES => {
                return match outcome {
                    Outcome::Succeeded => Outcome::Undeleted(e),
                    other => other,
                };
            }
            Err(e) => {
                tracing::warn!(migration = name, error = %e, "could not delete the finished StorageVersionMigration; trying again");
                tokio::time::sleep(POLL * attempt).await;
            }
        }
    }
    outcome
}

/// Whether `svm` was started by Stencil for `switch`.
fn started_for(svm: &Value, switch: &super::Switch) -> bool {
    svm.pointer("/metadata/annotations")
        .and_then(|a| a.get(labels::STORAGE_SWITCH))
        .and_then(Value::as_str)
        == Some(switch.id.as_str())
}

async fn follow(api: &Api<DynamicObject>, group: &str, plural: &str, name: &str, switch: &super::Switch) -> Outcome {
    let unavailable =
        |what: &str, e: kube::Error| Outcome::Unavailable(format!("{what} StorageVersionMigration {name}: {e}"));
    let existing = match api.get_opt(name).await {
        Ok(found) => found.map(|svm| serde_json::to_value(svm).unwrap_or_default()),
        Err(e) => return unavailable("reading", e),
    };
    if let Some(svm) = &existing
        && !started_for(svm, switch)
    {
        return Outcome::Unavailable(format!(
            "StorageVersionMigration {name} exists and was not started by Stencil for this storage switch ({}); it is not trusted",
            switch.id
        ));
    }
    if existing.is_none() {
        let svm: DynamicObject = match serde_json::from_value(json!({
            "apiVersion": "storagemigration.k8s.io/v1", "kind": "StorageVersionMigration",
            "metadata": {"name": name, "labels": {labels::MANAGED_BY: labels::MANAGED_BY_VALUE},
                "annotations": {labels::STORAGE_SWITCH: switch.id}},
            "spec": {"resource": {"group": group, "resource": plural}}}))
        {
            Ok(svm) => svm,
            Err(e) => return Outcome::Unavailable(e.to_string()),
        };
        if let Err(e) = api.create(&PostParams::default(), &svm).await {
            return unavailable("creating", e);
        }
        tracing::info!(migration = name, "created a StorageVersionMigration; following it");
    }
    let started = tokio::time::Instant::now();
    loop {
        let svm = match api.get(name).await {
            Ok(svm) => serde_json::to_value(&svm).unwrap_or_default(),
            Err(e) => return unavailable("reading", e),
        };
        if let Some(outcome) = judge(&svm) {
            return outcome;
        }
        let taken_up = svm
            .pointer("/status/conditions")
            .is_some_and(|c| c.as_array().is_some_and(|a| !a.is_empty()));
        if !taken_up && started.elapsed() > PICKUP {
            return Outcome::Unavailable(format!(
                "no controller took StorageVersionMigration {name} up within {} s (is kube-controller-manager's storage-version-migrator-controller on?)",
                PICKUP.as_secs()
            ));
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_migration_ends_on_its_succeeded_or_failed_condition() {
        let with = |conditions: Value| json!({"status": {"conditions": conditions}});
        assert!(judge(&json!({})).is_none(), "not taken up yet");
        let running = with(json!([{"type": "Running", "status": "True", "message": ""}]));
        assert!(judge(&running).is_none());
        let done = with(json!([{"type": "Running", "status": "False"}, {"type": "Succeeded", "status": "True"}]));
        assert!(matches!(judge(&done), Some(Outcome::Succeeded)));
        let failed = with(json!([{"type": "Failed", "status": "True", "message": "resource not found"}]));
        assert!(
            matches!(judge(&failed), Some(Outcome::Unavailable(m)) if m == "the cluster's migration failed: resource not found")
        );
        let switch = super::super::Switch::new(&["v1".to_string()], "v2", 1);
        let ours = json!({"metadata": {"annotations": {labels::STORAGE_SWITCH: switch.id}}});
        assert!(started_for(&ours, &switch));
        let other = super::super::Switch::new(&["v3".to_string()], "v2", 7);
        assert!(!started_for(&ours, &other), "a migration of another switch");
        assert!(!started_for(&json!({}), &switch), "one Stencil did not start");
    }
}
