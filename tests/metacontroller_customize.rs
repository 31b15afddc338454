//! The customize hook on the rig, with hooks written in this test from the documented
//! protocol: a v2 CompositeController whose parents relate ConfigMaps of another
//! namespace by label; each related ConfigMap is copied into the parent's namespace, a
//! new related ConfigMap syncs the parent again, a deleted one takes its copy with it,
//! and the customize hook is asked once per parent generation.

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::{TestNamespace, client, compat_stencil, install_crd, open_crd, serve_hooks, unique_group, wait_for};
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

fn shared(name: &str, value: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": {"shared": "yes"}},
        "data": {"value": value}}))
    .unwrap()
}

#[tokio::test]
async fn related_objects_in_another_namespace_are_sent_and_their_changes_sync_the_parent() {
    let client = client().await;
    let group = unique_group();
    install_crd(&client, &open_crd(&group, "Share", "shares", "Namespaced")).await;
    let (home, source) = (
        TestNamespace::new(&client, "mccustom").await,
        TestNamespace::new(&client, "mcsource").await,
    );
    let (address, calls) = serve_hooks(&[("/customize", customize), ("/sync", sync)]).await;
    // A host of this run's own: a controller object left by an earlier run cannot call in.
    let host = format!("hooks-{group}.test");
    let _stencil = compat_stencil(&client, &host, address).await;
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
    shares
        .patch(
            "s",
            &PatchParams::apply("test"),
            &Patch::Apply(share(json!({"sourceNamespace": source.name, "note": "x"}))),
        )
        .await
        .unwrap();
    wait_for("the customize hook asked for the new generation", TIMEOUT, || async {
        (calls[0].load(Ordering::SeqCst) >= 2).then_some(())
    })
    .await;
    sources.delete("one", &DeleteParams::default()).await.unwrap();
    wait_for("copy-one deleted", TIMEOUT, || async {
        copies.get_opt("copy-one").await.ok()?.is_none().then_some(())
    })
    .await;
    assert_eq!(calls[0].load(Ordering::SeqCst), 2, "asked once per generation");
    controllers.delete(&name, &DeleteParams::default()).await.unwrap();
}
