//! metacontroller compatibility on the rig: the CompositeController and
//! DecoratorController CRDs Stencil prints install on the API server, and controller
//! objects written for metacontroller (every documented field) are stored and read back
//! unchanged, so nothing a user wrote is pruned when Stencil's CRDs replace
//! metacontroller's.

mod common;

use common::{client, install_crd};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};
use stencil::metacontroller::api::{CompositeController, DecoratorController};

/// A CompositeController using every field metacontroller documents.
fn composite(name: &str) -> Value {
    json!({
        "apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController",
        "metadata": {"name": name},
        "spec": {
            "parentResource": {"apiVersion": "ctl.example.com/v1", "resource": "catsets",
                "revisionHistory": {"fieldPaths": ["spec.template"]},
                "labelSelector": {"matchLabels": {"tier": "gold"}}, "ignoreStatusChanges": true},
            "childResources": [
                {"apiVersion": "v1", "resource": "pods", "updateStrategy": {"method": "RollingRecreate",
                    "statusChecks": {"conditions": [{"type": "Ready", "status": "True", "reason": "Up"}]}}},
                {"apiVersion": "v1", "resource": "persistentvolumeclaims"}],
            "hooks": {
                "customize": {"version": "v2", "webhook": {"service": {"name": "hooks", "namespace": "tools", "port": 8080, "protocol": "http"}, "path": "/customize"}},
                "sync": {"version": "v2", "webhook": {"url": "http://hooks.tools/sync", "timeout": "10s",
                    "etag": {"enabled": true, "cacheTimeoutSeconds": 60, "cacheCleanupSeconds": 300},
                    "responseUnMarshallMode": "strict",
                    "authorization": {"type": "Bearer", "secretRef": {"name": "t", "namespace": "tools", "key": "token"}}}},
                "finalize": {"webhook": {"url": "http://hooks.tools/finalize"}}
            },
            "endpointConfigs": [{"host": "hooks.tools", "caBundle": {"inline": "PEM"}}],
            "resyncPeriodSeconds": 30,
            "generateSelector": true
        }
    })
}

/// A DecoratorController using every field metacontroller documents.
fn decorator(name: &str) -> Value {
    json!({
        "apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "DecoratorController",
        "metadata": {"name": name},
        "spec": {
            "resources": [{"apiVersion": "apps/v1", "resource": "statefulsets",
                "labelSelector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]},
                "annotationSelector": {"matchAnnotations": {"a": "b"}, "matchExpressions": [{"key": "ports", "operator": "Exists"}]}}],
            "attachments": [{"apiVersion": "v1", "resource": "services", "updateStrategy": {"method": "InPlace"}}],
            "hooks": {"sync": {"webhook": {"url": "http://hooks.tools/sync-services"}}},
            "resyncPeriodSeconds": 60
        }
    })
}

#[tokio::test]
async fn controller_objects_written_for_metacontroller_are_stored_unchanged() {
    let client = client().await;
    for crd in stencil::metacontroller::crds() {
        install_crd(&client, &crd).await;
    }
    let composites: Api<CompositeController> = Api::all(client.clone());
    let decorators: Api<DecoratorController> = Api::all(client.clone());
    let name = format!("compat-{}", std::process::id());
    let written = composite(&name);
    let typed: CompositeController = serde_json::from_value(written.clone()).unwrap();
    let stored = composites
        .create(&PostParams::default(), &typed)
        .await
        .expect("created");
    assert_eq!(serde_json::to_value(&stored.spec).unwrap(), written["spec"]);
    let written = decorator(&name);
    let typed: DecoratorController = serde_json::from_value(written.clone()).unwrap();
    let stored = decorators
        .create(&PostParams::default(), &typed)
        .await
        .expect("created");
    assert_eq!(serde_json::to_value(&stored.spec).unwrap(), written["spec"]);
    composites.delete(&name, &DeleteParams::default()).await.unwrap();
    decorators.delete(&name, &DeleteParams::default()).await.unwrap();
}
