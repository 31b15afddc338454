//! metacontroller's DecoratorControllers served by `stencil run --compat metacontroller`
//! on the rig, with hooks written in this test from the documented protocol: a decorator
//! on a cluster-scoped kind (CRDs selected by an annotation) attaching ClusterRoles and
//! finalizing them when a CRD opts out; a decorator on a namespaced kind without a
//! finalize hook, whose status and labels reach the object, whose `resyncAfterSeconds`
//! calls it again unprompted and whose attachments stay when the object opts out.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{TestNamespace, client, compat_stencil, install_crd, open_crd, serve_hooks, unique_group, wait_for};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt as _};
use serde_json::{Value, json};
use stencil::metacontroller::api::DecoratorController;

const TIMEOUT: Duration = Duration::from_secs(60);

/// The annotation that lends an attachment to its DecoratorController.
const DECORATOR: &str = "metacontroller.k8s.io/decorator-controller";

/// A v2 sync hook for CRDs: a ClusterRole that reads the CRD's kind, and a label.
fn sync_roles(request: &Value) -> Value {
    let crd = &request["object"];
    let name = crd["metadata"]["name"].as_str().unwrap_or_default();
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": format!("{name}-reader")},
        "rules": [{"apiGroups": [crd["spec"]["group"]], "resources": [crd["spec"]["names"]["plural"]],
            "verbs": ["get", "list", "watch"]}]});
    json!({"labels": {"roles-decorated": "yes"}, "attachments": [role]})
}

/// Its finalize hook: no attachments, the label removed, finalized once no ClusterRole is
/// observed.
fn finalize_roles(request: &Value) -> Value {
    assert_eq!(request["finalizing"], true);
    let observed = request["attachments"]["ClusterRole.rbac.authorization.k8s.io/v1"]
        .as_object()
        .map_or(0, |m| m.len());
    json!({"labels": {"roles-decorated": null}, "attachments": [], "finalized": observed == 0})
}

/// A v1 sync hook for Pools: a ConfigMap named after the Pool, an annotation, a status
/// counting the attachments observed (v1 keys: by name), and a resync after a second.
fn sync_pool(request: &Value) -> Value {
    let pool = &request["object"];
    let name = pool["metadata"]["name"].as_str().unwrap_or_default();
    let observed = request["attachments"]["ConfigMap.v1"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    assert!(observed.keys().all(|k| !k.contains('/')), "v1 keys are names");
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("{name}-cfg")},
        "data": {"pool": name}});
    json!({"annotations": {"decorated": "yes"}, "status": {"attachments": observed.len()},
        "attachments": [cm], "resyncAfterSeconds": 1})
}

/// Stencil serving metacontroller's controller objects, with the hooks of the test
/// named `prefix` at a host only its Stencil resolves.
async fn start(prefix: &str) -> (Client, String, Arc<Vec<AtomicUsize>>, common::Stencil) {
    let client = client().await;
    let (address, calls) = serve_hooks(&[
        ("/sync-roles", sync_roles),
        ("/finalize-roles", finalize_roles),
        ("/sync-pool", sync_pool),
    ])
    .await;
    let host = format!("hooks-{prefix}.test");
    let stencil = compat_stencil(&client, &host, address).await;
    (client, host, calls, stencil)
}

async fn decorate(client: &Client, name: &str, spec: Value) -> Api<DecoratorController> {
    let api: Api<DecoratorController> = Api::all(client.clone());
    let dc: DecoratorController = serde_json::from_value(json!({
        "apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "DecoratorController",
        "metadata": {"name": name}, "spec": spec
    }))
    .unwrap();
    api.create(&PostParams::default(), &dc).await.expect("created");
    api
}

/// A CRD of kind `Thing` in `group`, annotated with `annotations`.
fn thing_crd(group: &str, annotations: Value) -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("things.{group}"), "annotations": annotations},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"plural": "things", "singular": "thing", "kind": "Thing"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .unwrap()
}

#[tokio::test]
async fn a_decorator_on_crds_attaches_cluster_roles_and_finalizes_them_when_a_crd_opts_out() {
    let (client, host, calls, _stencil) = start("dcroles").await;
    let opt_in = format!("stencil.test/roles-{}", std::process::id());
    let (chosen, other) = (unique_group(), unique_group());
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    install_crd(&client, &thing_crd(&chosen, json!({(opt_in.clone()): "read"}))).await;
    install_crd(&client, &thing_crd(&other, json!({}))).await;
    let name = format!("roles-{}", std::process::id());
    let decorators = decorate(
        &client,
        &name,
        json!({
            "resources": [{"apiVersion": "apiextensions.k8s.io/v1", "resource": "customresourcedefinitions",
                "annotationSelector": {"matchExpressions": [{"key": opt_in, "operator": "Exists"}]}}],
            "attachments": [{"apiVersion": "rbac.authorization.k8s.io/v1", "resource": "clusterroles"}],
            "hooks": {"sync": {"version": "v2", "webhook": {"url": format!("http://{host}/sync-roles")}},
                "finalize": {"version": "v2", "webhook": {"url": format!("http://{host}/finalize-roles")}}}
        }),
    )
    .await;
    let roles: Api<ClusterRole> = Api::all(client.clone());
    let crd_name = format!("things.{chosen}");
    let role = wait_for("the ClusterRole attached", TIMEOUT, || async {
        roles.get_opt(&format!("{crd_name}-reader")).await.ok().flatten()
    })
    .await;
    let crd = crds.get(&crd_name).await.unwrap();
    let owner = &role.metadata.owner_references.clone().unwrap()[0];
    assert_eq!(
        (owner.uid.as_str(), owner.controller),
        (crd.uid().unwrap().as_str(), Some(true))
    );
    assert_eq!(role.annotations().get(DECORATOR), Some(&name));
    assert_eq!(role.rules.unwrap()[0].resources, Some(vec!["things".to_string()]));
    let finalizer = format!("metacontroller.io/decoratorcontroller-{name}");
    wait_for("the label and the finalizer on the CRD", TIMEOUT, || async {
        let crd = crds.get(&crd_name).await.ok()?;
        (crd.labels().get("roles-decorated").map(String::as_str) == Some("yes")
            && crd.finalizers().contains(&finalizer))
        .then_some(())
    })
    .await;
    // The CRD opts out: the finalize hook removes its role, then lets it go.
    let opt_out = json!({"metadata": {"annotations": {(opt_in.clone()): null}}});
    crds.patch(&crd_name, &PatchParams::default(), &Patch::Merge(&opt_out))
        .await
        .unwrap();
    wait_for("the role gone, the finalizer and label removed", TIMEOUT, || async {
        let crd = crds.get(&crd_name).await.ok()?;
        let role = roles.get_opt(&format!("{crd_name}-reader")).await.ok()?;
        (role.is_none() && !crd.finalizers().contains(&finalizer) && !crd.labels().contains_key("roles-decorated"))
            .then_some(())
    })
    .await;
    assert!(calls[1].load(Ordering::SeqCst) >= 1, "the finalize hook was called");
    let untouched = crds.get(&format!("things.{other}")).await.unwrap();
    assert!(!untouched.finalizers().contains(&finalizer) && !untouched.labels().contains_key("roles-decorated"));
    assert!(
        roles
            .get_opt(&format!("things.{other}-reader"))
            .await
            .unwrap()
            .is_none()
    );
    decorators.delete(&name, &DeleteParams::default()).await.unwrap();
    for group in [chosen, other] {
        crds.delete(&format!("things.{group}"), &DeleteParams::default())
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn a_decorator_without_a_finalize_hook_writes_status_resyncs_and_leaves_attachments_on_opt_out() {
    let (client, host, calls, _stencil) = start("dcpool").await;
    let group = unique_group();
    install_crd(&client, &open_crd(&group, "Pool", "pools", "Namespaced")).await;
    let ns = TestNamespace::new(&client, "dcpool").await;
    let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, "v1", "Pool"), "pools");
    let pools: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns.name, &resource);
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    let name = format!("pools-{group}");
    let decorators = decorate(
        &client,
        &name,
        json!({
            "resources": [{"apiVersion": format!("{group}/v1"), "resource": "pools",
                "labelSelector": {"matchLabels": {"decorate": "yes"}}}],
            "attachments": [{"apiVersion": "v1", "resource": "configmaps"}],
            "hooks": {"sync": {"webhook": {"url": format!("http://{host}/sync-pool")}}}
        }),
    )
    .await;
    for (pool, label) in [("chosen", "yes"), ("passed", "no")] {
        let object = json!({"apiVersion": format!("{group}/v1"), "kind": "Pool",
            "metadata": {"name": pool, "labels": {"decorate": label}}, "spec": {}});
        pools
            .patch(pool, &PatchParams::apply("test"), &Patch::Apply(object))
            .await
            .unwrap();
    }
    let attached = wait_for("the ConfigMap attached", TIMEOUT, || async {
        configmaps.get_opt("chosen-cfg").await.ok().flatten()
    })
    .await;
    assert_eq!(attached.annotations().get(DECORATOR), Some(&name));
    wait_for(
        "the annotation and the hook's status, without observedGeneration",
        TIMEOUT,
        || async {
            let pool = pools.get("chosen").await.ok()?;
            let status = pool.data.get("status")?;
            (pool.annotations().get("decorated").map(String::as_str) == Some("yes")
                && status == &json!({"attachments": 1}))
                .then_some(())
        },
    )
    .await;
    let before = calls[2].load(Ordering::SeqCst);
    wait_for(
        "resyncAfterSeconds calling the hook again unprompted",
        TIMEOUT,
        || async { (calls[2].load(Ordering::SeqCst) >= before + 3).then_some(()) },
    )
    .await;
    assert!(
        configmaps.get_opt("passed-cfg").await.unwrap().is_none(),
        "not selected"
    );
    let pool = pools.get("chosen").await.unwrap();
    assert!(pool.finalizers().is_empty(), "no finalize hook, no finalizer");
    // It opts out: no hook is called for it any more and its attachment stays.
    let opt_out = json!({"metadata": {"labels": {"decorate": "no"}}});
    pools
        .patch("chosen", &PatchParams::default(), &Patch::Merge(&opt_out))
        .await
        .unwrap();
    let stopped = wait_for("the resyncs stopped", TIMEOUT, || async {
        let seen = calls[2].load(Ordering::SeqCst);
        tokio::time::sleep(Duration::from_secs(3)).await;
        (calls[2].load(Ordering::SeqCst) == seen).then_some(seen)
    })
    .await;
    assert!(stopped > before);
    let kept = configmaps.get("chosen-cfg").await.unwrap();
    assert_eq!(kept.metadata.uid, attached.metadata.uid, "the attachment stays");
    decorators.delete(&name, &DeleteParams::default()).await.unwrap();
}
