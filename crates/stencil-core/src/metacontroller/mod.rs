//! metacontroller compatibility, purely: the CompositeController and DecoratorController
//! objects (`api`), the hook protocol (`hook`), which objects a parent claims (`claim`),
//! what an update method does to an existing child (`update`), where an object stands in
//! a controller's life (`lifecycle`), what a decorator does (`decorate`), the writes that bring
//! children to a hook's answer (`plan`), what Stencil serves (`support`), and the names
//! metacontroller writes on the objects it manages, so that Stencil serving the same
//! controller objects reads and writes what metacontroller would.

pub mod api;
pub mod claim;
pub mod decorate;
pub mod hook;
pub mod lifecycle;
pub mod plan;
pub mod related;
pub mod support;
pub mod update;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt as _;

/// The annotation metacontroller's client-side apply leaves on children; Stencil removes
/// it before its first server-side apply of a child it takes over.
pub const LAST_APPLIED: &str = "metacontroller.k8s.io/last-applied-configuration";

/// The annotation on a decorator's attachments naming the DecoratorController.
pub const DECORATOR_CONTROLLER: &str = "metacontroller.k8s.io/decorator-controller";

/// The finalizer a CompositeController with a finalize hook puts on its parents.
pub fn composite_finalizer(controller: &str) -> String {
    format!("metacontroller.io/compositecontroller-{controller}")
}

/// The finalizer a DecoratorController with a finalize hook puts on its objects.
pub fn decorator_finalizer(controller: &str) -> String {
    format!("metacontroller.io/decoratorcontroller-{controller}")
}

/// The annotation the API server requires on a CRD of a `*.k8s.io` group, with the value
/// metacontroller's CRDs carry (a group outside Kubernetes' own review).
const API_APPROVAL: (&str, &str) = ("api-approved.kubernetes.io", "unapproved, request not yet submitted");

/// The CRDs of CompositeController and DecoratorController, as Stencil installs them.
pub fn crds() -> Vec<CustomResourceDefinition> {
    let mut crds = vec![api::CompositeController::crd(), api::DecoratorController::crd()];
    for crd in &mut crds {
        let (key, value) = API_APPROVAL;
        crd.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(key.into(), value.into());
    }
    crds
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_crds_are_cluster_scoped_with_metacontrollers_names() {
        let crds = crds();
        let names: Vec<_> = crds
            .iter()
            .map(|c| c.metadata.name.clone().unwrap_or_default())
            .collect();
        assert_eq!(
            names,
            [
                "compositecontrollers.metacontroller.k8s.io",
                "decoratorcontrollers.metacontroller.k8s.io"
            ]
        );
        for crd in &crds {
            assert_eq!(crd.spec.scope, "Cluster");
            assert_eq!(crd.spec.versions[0].name, "v1alpha1");
            let approval = crd.metadata.annotations.as_ref().and_then(|a| a.get(API_APPROVAL.0));
            assert!(
                approval.is_some_and(|v| v.starts_with("unapproved")),
                "a k8s.io group needs it"
            );
        }
        assert_eq!(crds[0].spec.names.short_names, Some(vec!["cc".into(), "cctl".into()]));
    }

    #[test]
    fn the_chart_ships_the_generated_crds() {
        let crds: Vec<serde_json::Value> = crds().iter().map(|c| serde_json::to_value(c).unwrap()).collect();
        let shipped = include_str!("../../../../charts/stencil/files/metacontroller-crds.yaml");
        assert!(
            shipped == crate::yaml::to_stream(&crds).unwrap(),
            "charts/stencil/files/metacontroller-crds.yaml is stale; run `make chart`"
        );
    }

    #[test]
    fn a_controller_object_written_for_metacontroller_reads_and_writes_back_the_same() {
        let written = serde_json::json!({
            "apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController",
            "metadata": {"name": "catset-controller"},
            "spec": {
                "parentResource": {"apiVersion": "ctl.enisoc.com/v1", "resource": "catsets",
                    "revisionHistory": {"fieldPaths": ["spec.template"]}},
                "childResources": [
                    {"apiVersion": "v1", "resource": "pods", "updateStrategy": {"method": "RollingRecreate",
                        "statusChecks": {"conditions": [{"type": "Ready", "status": "True"}]}}},
                    {"apiVersion": "v1", "resource": "persistentvolumeclaims"}],
                "hooks": {"sync": {"version": "v2", "webhook": {"url": "http://catset.metacontroller/sync", "timeout": "10s"}}},
                "generateSelector": true
            }
        });
        let read: api::CompositeController = serde_json::from_value(written.clone()).unwrap();
        assert_eq!(read.spec.child_resources[0].rule.resource, "pods");
        assert_eq!(
            read.spec.hooks.as_ref().unwrap().sync.as_ref().unwrap().version,
            Some(api::HookVersion::V2)
        );
        let mut back = serde_json::to_value(&read).unwrap();
        back.as_object_mut().unwrap().remove("status");
        assert_eq!(back, written);
    }
}
