//! The customize hook on the rig, with hooks written in this test from the documented
//! protocol: a v2 CompositeController whose parents relate ConfigMaps of another
//! namespace by label; each related ConfigMap is copied into the parent's namespace, a
//! new related ConfigMap syncs the parent again, a deleted one takes its copy with it,
//! and the customize hook is asked once per parent generation.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::routing::post;
use common::{TestNamespace, client, install_crd, start_stencil_options, unique_group, wait_for};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use stencil::metacontroller::api::CompositeController;

const TIMEOUT: Duration = Duration::from_secs(60);

/// The customize hook: ConfigMaps labelled `shared=yes` in the parent's
/// `spec.sourceNamespace`.
fn customize(request: &Value) -> Value {
    let source = &request["parent"]["spec"]["sourceNamespace"];
    json!({"relatedResources": [{"apiVersion": "v1", "resource": "configmaps", "namespace": source,
        "labelSelector": {"matchLabels": {"shared": "yes"}}}]})
}

/// The sync hook: a copy of each related ConfigMap (v2 keys: `namespace/name`) in the
/// parent's namespace, and their count in the status.
fn sync(request: &Value) -> Value {
    let related = request["related"]["ConfigMap.v1"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let source = request["parent"]["spec"]["sourceNamespace"]
        .as_str()
        .unwrap_or_default();
    assert!(related.keys().all(|k| k.starts_with(&format!("{source}/"))), "v2 keys");
    let copies: Vec<Value> = related
        .values()
        .map(|cm| {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("copy-{}", cm["metadata"]["name"].as_str().unwrap_or_default())},
                "data": cm["data"]})
        })
        .collect();
    json!({"children": copies, "status": {"related": related.len()}})
}

/// Serves both hooks on loopback; `calls` counts customize calls, then sync calls.
async fn hook_server(calls: Arc<[AtomicUsize; 2]>) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let route = |i: usize, hook: fn(&Value) -> Value| {
        let calls = calls.clone();
        post(move |body: String| async move {
            calls[i].fetch_add(1, Ordering::SeqCst);
            hook(&serde_json::from_str(&body).unwrap()).to_string()
        })
    };
    let app = axum::Router::new()
        .route("/customize", route(0, customize))
        .route("/sync", route(1, sync));
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    address
}

/// A namespaced `Share` kind in `group`, any spec and status.
fn share_crd(
    group: &str,
) -> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("shares.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"plural": "shares", "singular": "share", "kind": "Share"},
            "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}
    }))
    .unwrap()
}

fn shared(name: &str, value: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": {"shared": "yes"}},
        "data": {"value": value}}))
    .unwrap()
}

#[tokio::test]
async fn related_objects_in_another_namespace_are_sent_and_their_changes_sync_the_parent() {
    let client = client().await;
    for crd in stencil::metacontroller::crds() {
        install_crd(&client, &crd).await;
    }
    let group = unique_group();
    install_crd(&client, &share_crd(&group)).await;
    let (home, source) = (
        TestNamespace::new(&client, "mccustom").await,
        TestNamespace::new(&client, "mcsource").await,
    );
    let calls = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
    let address = hook_server(calls.clone()).await;
    let host = "hooks-mccustomize.test";
    let _stencil = start_stencil_options(stencil::runtime::Options {
        cluster_definitions: false,
        compat_metacontroller: true,
        hook_overrides: [(host.to_string(), address)].into(),
        ..Default::default()
    })
    .await;
    let sources: Api<ConfigMap> = Api::namespaced(client.clone(), &source.name);
    let copies: Api<ConfigMap> = Api::namespaced(client.clone(), &home.name);
    sources
        .create(&PostParams::default(), &shared("one", "1"))
        .await
        .unwrap();
    let name = format!("shares-{group}");
    let controllers: Api<CompositeController> = Api::all(client.clone());
    let cc: CompositeController = serde_json::from_value(json!({
        "apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController",
        "metadata": {"name": name},
        "spec": {"parentResource": {"apiVersion": format!("{group}/v1"), "resource": "shares"},
            "childResources": [{"apiVersion": "v1", "resource": "configmaps", "updateStrategy": {"method": "InPlace"}}],
            "generateSelector": true,
            "hooks": {"customize": {"version": "v2", "webhook": {"url": format!("http://{host}/customize")}},
                "sync": {"version": "v2", "webhook": {"url": format!("http://{host}/sync")}}}}
    }))
    .unwrap();
    controllers.create(&PostParams::default(), &cc).await.unwrap();
    let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, "v1", "Share"), "shares");
    let shares: Api<DynamicObject> = Api::namespaced_with(client.clone(), &home.name, &resource);
    let share = |spec: Value| json!({"apiVersion": format!("{group}/v1"), "kind": "Share", "metadata": {"name": "s"}, "spec": spec});
    shares
        .patch(
            "s",
            &PatchParams::apply("test"),
            &Patch::Apply(share(json!({"sourceNamespace": source.name}))),
        )
        .await
        .unwrap();
    let copy = |name: &'static str| {
        let copies = copies.clone();
        async move { wait_for(name, TIMEOUT, || async { copies.get_opt(name).await.ok().flatten() }).await }
    };
    copy("copy-one").await;
    // A new related object, in a namespace the parent is not in, syncs it.
    sources
        .create(&PostParams::default(), &shared("two", "2"))
        .await
        .unwrap();
    copy("copy-two").await;
    wait_for("the status counting both", TIMEOUT, || async {
        let s = shares.get("s").await.ok()?;
        (s.data.get("status")?["related"] == 2).then_some(())
    })
    .await;
    assert_eq!(calls[0].load(Ordering::SeqCst), 1, "asked once for the generation");
    // A spec change asks the customize hook again; a deleted related object takes its copy.
    let syncs = calls[1].load(Ordering::SeqCst);
    shares
        .patch(
            "s",
            &PatchParams::apply("test"),
            &Patch::Apply(share(json!({"sourceNamespace": source.name, "note": "x"}))),
        )
        .await
        .unwrap();
    wait_for("a sync of the new generation", TIMEOUT, || async {
        (calls[1].load(Ordering::SeqCst) > syncs).then_some(())
    })
    .await;
    assert_eq!(calls[0].load(Ordering::SeqCst), 2, "asked again for the new generation");
    sources.delete("one", &DeleteParams::default()).await.unwrap();
    wait_for("copy-one deleted", TIMEOUT, || async {
        copies.get_opt("copy-one").await.ok()?.is_none().then_some(())
    })
    .await;
    controllers.delete(&name, &DeleteParams::default()).await.unwrap();
}
