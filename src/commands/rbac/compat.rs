//! Least-privilege RBAC for metacontroller's controller objects, purely: the controller
//! objects themselves (read, and a refused one's status written), each parent or
//! decorated kind (read, patched for finalizers, labels and annotations, its status
//! written), each child or attachment kind (the child verbs). Resource rules name their
//! plural already, and `--compat metacontroller` watches every namespace, so everything
//! is granted cluster-wide. What only the hooks know at run time is a note.

use serde_json::Value;

use super::{CHILD_VERBS, PARENT_VERBS, RuleSet, STATUS_VERBS};
use stencil::metacontroller::api::{CompositeController, DecoratorController, ResourceRule};

/// The group of kinds metacontroller's controller objects belong to.
const GROUP: &str = "metacontroller.k8s.io";

/// Kinds whose objects grant or bind permissions: creating them needs more than `create`.
const GRANTING: &[&str] = &["roles", "clusterroles", "rolebindings", "clusterrolebindings"];

/// A document that is not a controller object Stencil can read.
#[derive(Debug, thiserror::Error)]
#[error("document {index}: {message}")]
pub struct ControllerError {
    index: usize,
    message: String,
}

/// Grants on `cluster` what serving `objects` (CompositeController and
/// DecoratorController documents) needs; the notes of what only run time knows.
///
/// # Errors
///
/// A document is of another kind, or does not read as its kind.
pub fn controllers(objects: &[Value], cluster: &mut RuleSet) -> Result<Vec<String>, ControllerError> {
    for kind in ["compositecontrollers", "decoratorcontrollers"] {
        cluster.grant(GROUP, kind, &["list", "watch"], &[]);
        cluster.grant(GROUP, &format!("{kind}/status"), &["patch"], &[]);
    }
    let mut notes = Vec::new();
    for (index, object) in objects.iter().enumerate() {
        let fail = |message: String| ControllerError { index, message };
        let (name, parents, children, customize) = match object.get("kind").and_then(Value::as_str) {
            Some("CompositeController") => {
                let cc: CompositeController =
                    serde_json::from_value(object.clone()).map_err(|e| fail(e.to_string()))?;
                let hooks = cc.spec.hooks.clone().unwrap_or_default();
                (
                    cc.metadata.name.clone().unwrap_or_default(),
                    vec![cc.spec.parent_resource.rule.clone()],
                    cc.spec
                        .child_resources
                        .iter()
                        .map(|c| c.rule.clone())
                        .collect::<Vec<_>>(),
                    hooks.customize.is_some(),
                )
            }
            Some("DecoratorController") => {
                let dc: DecoratorController =
                    serde_json::from_value(object.clone()).map_err(|e| fail(e.to_string()))?;
                let hooks = dc.spec.hooks.clone().unwrap_or_default();
                (
                    dc.metadata.name.clone().unwrap_or_default(),
                    dc.spec.resources.iter().map(|r| r.rule.clone()).collect(),
                    dc.spec.attachments.iter().map(|a| a.rule.clone()).collect(),
                    hooks.customize.is_some(),
                )
            }
            other => {
                return Err(fail(format!(
                    "kind `{}` is not CompositeController or DecoratorController",
                    other.unwrap_or_default()
                )));
            }
        };
        for rule in &parents {
            let group = group(rule);
            cluster.grant(group, &rule.resource, PARENT_VERBS, &[]);
            cluster.grant(group, &format!("{}/status", rule.resource), STATUS_VERBS, &[]);
        }
        for rule in &children {
            cluster.grant(group(rule), &rule.resource, CHILD_VERBS, &[]);
            if group(rule) == "rbac.authorization.k8s.io" && GRANTING.contains(&rule.resource.as_str()) {
                notes.push(format!(
                    "{name}: its hooks create {}, whose names and rules only they know: grant `escalate` and `bind` on them, or every permission they grant",
                    rule.resource
                ));
            }
        }
        if customize {
            notes.push(format!(
                "{name}: its customize hook relates kinds only it knows: grant list and watch on each (and on namespaces for a namespaceSelector)"
            ));
        }
    }
    Ok(notes)
}

/// The API group of `rule` (`""` for the core group).
fn group(rule: &ResourceRule) -> &str {
    rule.api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn each_kind_a_controller_names_gets_exactly_its_verbs() {
        let objects = [
            json!({"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController",
                "metadata": {"name": "catset"},
                "spec": {"parentResource": {"apiVersion": "ctl.example.com/v1", "resource": "catsets"},
                    "childResources": [{"apiVersion": "v1", "resource": "pods"}],
                    "hooks": {"sync": {"webhook": {"url": "http://h/sync"}}}}}),
            json!({"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "DecoratorController",
                "metadata": {"name": "roles"},
                "spec": {"resources": [{"apiVersion": "apiextensions.k8s.io/v1", "resource": "customresourcedefinitions"}],
                    "attachments": [{"apiVersion": "rbac.authorization.k8s.io/v1", "resource": "clusterroles"}],
                    "hooks": {"sync": {"webhook": {"url": "http://h/sync"}}, "customize": {"webhook": {"url": "http://h/c"}}}}}),
        ];
        let mut rules = RuleSet::default();
        let notes = controllers(&objects, &mut rules).unwrap();
        let expected = json!([
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "delete", "get", "list", "patch", "watch"]},
            {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": ["get", "list", "patch", "watch"]},
            {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions/status"], "verbs": ["patch"]},
            {"apiGroups": ["ctl.example.com"], "resources": ["catsets"], "verbs": ["get", "list", "patch", "watch"]},
            {"apiGroups": ["ctl.example.com"], "resources": ["catsets/status"], "verbs": ["patch"]},
            {"apiGroups": ["metacontroller.k8s.io"], "resources": ["compositecontrollers"], "verbs": ["list", "watch"]},
            {"apiGroups": ["metacontroller.k8s.io"], "resources": ["compositecontrollers/status"], "verbs": ["patch"]},
            {"apiGroups": ["metacontroller.k8s.io"], "resources": ["decoratorcontrollers"], "verbs": ["list", "watch"]},
            {"apiGroups": ["metacontroller.k8s.io"], "resources": ["decoratorcontrollers/status"], "verbs": ["patch"]},
            {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["create", "delete", "get", "list", "patch", "watch"]}
        ]);
        assert_eq!(Value::from(rules.policy_rules()), expected);
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[0].starts_with("roles: its hooks create clusterroles"));
        assert!(notes[1].starts_with("roles: its customize hook"));
    }

    #[test]
    fn a_document_of_another_kind_is_named() {
        let error = controllers(&[json!({"kind": "ConfigMap"})], &mut RuleSet::default()).unwrap_err();
        assert_eq!(
            error.to_string(),
            "document 0: kind `ConfigMap` is not CompositeController or DecoratorController"
        );
    }
}
