//! Smoke tests proving the rig is a real control plane: kwok runs Pods, the garbage
//! collector follows ownerReferences, CRD schemas and status subresources are enforced,
//! and server-side apply reports conflicts between field managers.

mod common;

use std::time::Duration;

use common::{TestNamespace, client, once_served, wait_established, wait_for};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(60);

#[tokio::test]
async fn a_deployment_becomes_available_through_kwok() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "deploy").await;
    let api: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    let deploy: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}
    }))
    .unwrap();
    api.create(&PostParams::default(), &deploy).await.unwrap();
    wait_for("Deployment web to be Available", TIMEOUT, || async {
        let d = api.get("web").await.ok()?;
        let status = d.status?;
        let ok = status
            .conditions?
            .iter()
            .any(|c| c.type_.as_deref() == Some("Available") && c.status.as_deref() == Some("True"));
        (ok && status.available_replicas == Some(2)).then_some(())
    })
    .await;
    // The availability is kwok's doing: two Pods, bound to its fake Nodes and Running.
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    let running: Vec<Pod> = pods
        .list(&kube::api::ListParams::default().labels("app=web"))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .collect();
    assert_eq!(running.len(), 2, "{running:?}");
    assert!(
        running
            .iter()
            .all(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
    );
}

#[tokio::test]
async fn the_garbage_collector_deletes_an_owned_configmap() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "gc").await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    let owner = api
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "owner"}})).unwrap(),
        )
        .await
        .unwrap();
    let uid = owner.metadata.uid.clone().unwrap();
    let owned: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "owned",
        "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid}]}}))
    .unwrap();
    api.create(&PostParams::default(), &owned).await.unwrap();
    api.delete("owner", &DeleteParams::default()).await.unwrap();
    wait_for("the owned ConfigMap to be garbage-collected", TIMEOUT, || async {
        matches!(api.get_opt("owned").await, Ok(None)).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_crd_schema_rejects_invalid_objects_and_its_status_subresource_works() {
    let client = client().await;
    let suffix: u32 = rand::random();
    let group = format!("g{suffix:08x}.rig.stencil.dev");
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": format!("widgets.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "required": ["size"], "properties": {
                        "size": {"type": "integer", "minimum": 1, "maximum": 10}}},
                    "status": {"type": "object", "properties": {"phase": {"type": "string"}}}}}}}]}
    }))
    .unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let name = format!("widgets.{group}");
    wait_established(&client, &name).await;

    let ns = TestNamespace::new(&client, "crd").await;
    let gvk = GroupVersionKind::gvk(&group, "v1", "Widget");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "widgets");
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns.name, &ar);
    let object = |size: i64| {
        serde_json::from_value::<DynamicObject>(json!({"apiVersion": format!("{group}/v1"), "kind": "Widget",
            "metadata": {"name": "w"}, "spec": {"size": size}}))
        .unwrap()
    };
    let (params, too_big) = (PostParams::default(), object(50));
    let err = once_served(|| api.create(&params, &too_big))
        .await
        .expect_err("size 50 violates the schema");
    let kube::Error::Api(status) = err else { panic!("{err}") };
    assert_eq!(status.code, 422, "{status:?}");

    api.create(&PostParams::default(), &object(3)).await.unwrap();
    // A status written through the main resource is dropped; through /status it sticks.
    let with_status = json!({"apiVersion": format!("{group}/v1"), "kind": "Widget", "metadata": {"name": "w"},
        "status": {"phase": "Ready"}});
    let ssa = PatchParams::apply("rig-test");
    api.patch("w", &ssa, &Patch::Apply(&with_status)).await.unwrap();
    assert_eq!(api.get("w").await.unwrap().data.get("status"), None);
    api.patch_status("w", &ssa, &Patch::Apply(&with_status)).await.unwrap();
    let phase = api.get("w").await.unwrap().data["status"]["phase"].clone();
    assert_eq!(phase, json!("Ready"));
    crds.delete(&name, &DeleteParams::default()).await.unwrap();
}

#[tokio::test]
async fn server_side_apply_reports_a_conflict_between_field_managers() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "ssa").await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    let cm = |value: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shared"}, "data": {"key": value}});
    api.patch("shared", &PatchParams::apply("first"), &Patch::Apply(&cm("a")))
        .await
        .unwrap();
    let err = api
        .patch("shared", &PatchParams::apply("second"), &Patch::Apply(&cm("b")))
        .await
        .expect_err("a second manager changing an owned field conflicts");
    let kube::Error::Api(status) = err else { panic!("{err}") };
    assert_eq!(status.code, 409, "{status:?}");
    assert!(
        status.message.contains("first"),
        "the conflict names the owner: {}",
        status.message
    );
    api.patch("shared", &PatchParams::apply("second").force(), &Patch::Apply(&cm("b")))
        .await
        .unwrap();
    assert_eq!(api.get("shared").await.unwrap().data.unwrap()["key"], "b");
}
