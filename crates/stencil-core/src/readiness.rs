//! Default readiness of an observed object when its child declares no `readyWhen`:
//! rules for the common built-in kinds, then the generic kstatus-style rules.

use serde_json::Value;

/// Whether an object is ready, and if not, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    /// The object is ready.
    Ready,
    /// The object is not ready yet, for the stated reason.
    NotReady(String),
}

impl Readiness {
    /// True for [`Readiness::Ready`].
    pub fn is_ready(&self) -> bool {
        matches!(self, Readiness::Ready)
    }
}

fn int(v: &Value, path: &[&str]) -> Option<i64> {
    path.iter().try_fold(v, |v, k| v.get(*k))?.as_i64()
}

fn string<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter().try_fold(v, |v, k| v.get(*k))?.as_str()
}

/// The status of condition `type_`, if the object reports it.
fn condition<'a>(v: &'a Value, type_: &str) -> Option<&'a str> {
    v.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))?
        .get("status")?
        .as_str()
}

fn check(ok: bool, reason: impl FnOnce() -> String) -> Readiness {
    if ok {
        Readiness::Ready
    } else {
        Readiness::NotReady(reason())
    }
}

/// The controller has seen the object's latest spec.
fn generation_observed(obj: &Value) -> Result<(), Readiness> {
    match (
        int(obj, &["metadata", "generation"]),
        int(obj, &["status", "observedGeneration"]),
    ) {
        (Some(g), Some(o)) if o < g => Err(Readiness::NotReady(format!(
            "observedGeneration {o} is behind generation {g}"
        ))),
        _ => Ok(()),
    }
}

/// The default readiness of an observed object, by kind.
pub fn default_readiness(obj: &Value) -> Readiness {
    let api_version = string(obj, &["apiVersion"]).unwrap_or_default();
    let kind = string(obj, &["kind"]).unwrap_or_default();
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    if let Err(not_ready) = generation_observed(obj) {
        return not_ready;
    }
    match (group, kind) {
        ("apps", "Deployment") => deployment(obj),
        ("apps", "StatefulSet") => statefulset(obj),
        ("apps", "DaemonSet") => daemonset(obj),
        ("batch", "Job") => job(obj),
        ("", "PersistentVolumeClaim") => {
            let phase = string(obj, &["status", "phase"]).unwrap_or("Pending");
            check(phase == "Bound", || format!("phase is {phase}, waiting for Bound"))
        }
        ("", "Pod") => {
            let ready =
                condition(obj, "Ready") == Some("True") || string(obj, &["status", "phase"]) == Some("Succeeded");
            check(ready, || "the Pod is not Ready".to_string())
        }
        ("", "Service" | "ConfigMap" | "Secret") => Readiness::Ready,
        _ => match condition(obj, "Ready") {
            Some("True") | None => Readiness::Ready,
            Some(other) => Readiness::NotReady(format!("condition Ready is {other}")),
        },
    }
}

fn deployment(obj: &Value) -> Readiness {
    let want = int(obj, &["spec", "replicas"]).unwrap_or(1);
    let updated = int(obj, &["status", "updatedReplicas"]).unwrap_or(0);
    let available = int(obj, &["status", "availableReplicas"]).unwrap_or(0);
    if condition(obj, "Progressing") == Some("False") {
        return Readiness::NotReady("the rollout exceeded its progress deadline".into());
    }
    if condition(obj, "Available") != Some("True") {
        return Readiness::NotReady("condition Available is not True".into());
    }
    check(updated >= want && available >= want, || {
        format!("{updated} of {want} replicas updated, {available} available")
    })
}

fn statefulset(obj: &Value) -> Readiness {
    let want = int(obj, &["spec", "replicas"]).unwrap_or(1);
    let ready = int(obj, &["status", "readyReplicas"]).unwrap_or(0);
    if ready != want {
        return Readiness::NotReady(format!("{ready} of {want} replicas ready"));
    }
    let on_delete = string(obj, &["spec", "updateStrategy", "type"]) == Some("OnDelete");
    let current = string(obj, &["status", "currentRevision"]);
    let update = string(obj, &["status", "updateRevision"]);
    check(on_delete || current == update, || {
        "the rollout to the update revision is not complete".to_string()
    })
}

fn daemonset(obj: &Value) -> Readiness {
    let desired = int(obj, &["status", "desiredNumberScheduled"]).unwrap_or(0);
    let ready = int(obj, &["status", "numberReady"]).unwrap_or(0);
    let updated = int(obj, &["status", "updatedNumberScheduled"]).unwrap_or(0);
    check(ready >= desired && updated >= desired, || {
        format!("{ready} of {desired} pods ready, {updated} updated")
    })
}

fn job(obj: &Value) -> Readiness {
    if condition(obj, "Failed") == Some("True") {
        return Readiness::NotReady("the Job failed".into());
    }
    check(condition(obj, "Complete") == Some("True"), || {
        "the Job has not completed".to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cond(t: &str, s: &str) -> Value {
        json!({"type": t, "status": s})
    }

    #[test]
    fn deployment_needs_available_and_updated_replicas() {
        let mut d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"generation": 2},
            "spec": {"replicas": 2}, "status": {"observedGeneration": 2, "updatedReplicas": 2, "availableReplicas": 2,
            "conditions": [cond("Available", "True")]}});
        assert!(default_readiness(&d).is_ready());
        d["status"]["updatedReplicas"] = json!(1);
        assert!(!default_readiness(&d).is_ready());
        d["status"]["updatedReplicas"] = json!(2);
        d["status"]["observedGeneration"] = json!(1);
        assert!(!default_readiness(&d).is_ready());
    }

    #[test]
    fn statefulset_needs_ready_replicas_on_the_update_revision() {
        let mut s = json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "spec": {"replicas": 3},
            "status": {"readyReplicas": 3, "currentRevision": "a", "updateRevision": "a"}});
        assert!(default_readiness(&s).is_ready());
        s["status"]["updateRevision"] = json!("b");
        assert!(!default_readiness(&s).is_ready());
        s["status"]["updateRevision"] = json!("a");
        s["status"]["readyReplicas"] = json!(2);
        assert_eq!(
            default_readiness(&s),
            Readiness::NotReady("2 of 3 replicas ready".into())
        );
    }

    #[test]
    fn daemonset_job_pvc_and_pod() {
        let ds = json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "status": {"desiredNumberScheduled": 2, "numberReady": 1, "updatedNumberScheduled": 2}});
        assert!(!default_readiness(&ds).is_ready());
        let job =
            json!({"apiVersion": "batch/v1", "kind": "Job", "status": {"conditions": [cond("Complete", "True")]}});
        assert!(default_readiness(&job).is_ready());
        let failed =
            json!({"apiVersion": "batch/v1", "kind": "Job", "status": {"conditions": [cond("Failed", "True")]}});
        assert!(!default_readiness(&failed).is_ready());
        let pvc = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "status": {"phase": "Pending"}});
        assert!(!default_readiness(&pvc).is_ready());
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "status": {"conditions": [cond("Ready", "True")]}});
        assert!(default_readiness(&pod).is_ready());
    }

    #[test]
    fn plain_objects_are_ready_once_they_exist_and_others_follow_their_ready_condition() {
        assert!(default_readiness(&json!({"apiVersion": "v1", "kind": "ConfigMap"})).is_ready());
        assert!(default_readiness(&json!({"apiVersion": "v1", "kind": "Service"})).is_ready());
        let custom =
            json!({"apiVersion": "x.io/v1", "kind": "Backup", "status": {"conditions": [cond("Ready", "False")]}});
        assert!(!default_readiness(&custom).is_ready());
    }
}
