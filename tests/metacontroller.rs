//! metacontroller compatibility on the rig: the CompositeController and
//! DecoratorController CRDs Stencil prints install on the API server, and controller
//! objects written for metacontroller (every documented field) are stored and read back
//! unchanged, so nothing a user wrote is pruned when Stencil's CRDs replace
//! metacontroller's; and a CompositeController with a sync hook written in this test
//! from the documented protocol is served with `--compat metacontroller`.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use axum::routing::post;
use common::{TestNamespace, client, compat_stencil, install_crd, open_crd, serve_hooks, unique_group, wait_for};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, PostParams};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::{Value, json};
use stencil::metacontroller::api::{CompositeController, DecoratorController};

const TIMEOUT: Duration = Duration::from_secs(60);

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

/// A sync hook as a metacontroller user writes one: a parent `{selector, size, value}`
/// wants `size` ConfigMaps carrying `value`; its status counts the ConfigMaps observed.
async fn sync(calls: Arc<AtomicUsize>, body: String) -> String {
    calls.fetch_add(1, Ordering::SeqCst);
    let request: Value = serde_json::from_str(&body).unwrap();
    let parent = &request["parent"];
    let name = parent["metadata"]["name"].as_str().unwrap_or_default();
    let labels = parent["spec"]["selector"]["matchLabels"].clone();
    let size = parent["spec"]["size"].as_u64().unwrap_or(0);
    let children: Vec<Value> = (0..size)
        .map(|i| {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("{name}-{i}"), "labels": labels},
            "data": {"value": parent["spec"]["value"]}})
        })
        .collect();
    let observed = request["children"]["ConfigMap.v1"].as_object().map_or(0, |m| m.len());
    json!({"children": children, "status": {"observed": observed}}).to_string()
}

/// Serves [`sync`] on loopback, counting its calls in `calls`, and a finalize hook that
/// answers `finalized` as `finalized` holds, with no children.
async fn hook_server(calls: Arc<AtomicUsize>, finalized: Arc<AtomicBool>) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let finalize = post(move || {
        let done = finalized.load(Ordering::SeqCst);
        async move { json!({"children": [], "finalized": done}).to_string() }
    });
    let sync = post(move |body: String| sync(calls.clone(), body));
    let fail = post(|| async { (axum::http::StatusCode::INTERNAL_SERVER_ERROR, "the hook broke") });
    let app = axum::Router::new()
        .route("/sync", sync)
        .route("/finalize", finalize)
        .route("/fail", fail);
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    address
}

/// The host of the hooks of the test named `prefix`: the in-process Stencils of the
/// other tests, which serve every CompositeController too, cannot reach it.
fn hooks_host(prefix: &str) -> String {
    format!("hooks-{prefix}.test")
}

/// The rig set up for one CompositeController over `Pool`s: its namespace, the Pools'
/// API, the ConfigMaps' API, Stencil serving CompositeControllers, and the hooks' state.
struct Rig {
    ns: TestNamespace,
    pools: Api<DynamicObject>,
    configmaps: Api<ConfigMap>,
    controllers: Api<CompositeController>,
    controller: String,
    /// The hooks' host, which only this test's Stencil resolves (to its hook server).
    hooks: String,
    group: String,
    calls: Arc<AtomicUsize>,
    finalized: Arc<AtomicBool>,
    stencil: common::Stencil,
}

impl Rig {
    /// Stencil serving CompositeControllers, a fresh `Pool` kind and a namespace.
    async fn start(prefix: &str) -> Rig {
        let client = client().await;
        let group = unique_group();
        install_crd(&client, &open_crd(&group, "Pool", "pools", "Namespaced")).await;
        let ns = TestNamespace::new(&client, prefix).await;
        let (calls, finalized) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicBool::new(false)));
        let address = hook_server(calls.clone(), finalized.clone()).await;
        let stencil = compat_stencil(&client, &hooks_host(prefix), address).await;
        let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, "v1", "Pool"), "pools");
        Rig {
            pools: Api::namespaced_with(client.clone(), &ns.name, &resource),
            configmaps: Api::namespaced(client.clone(), &ns.name),
            controllers: Api::all(client.clone()),
            controller: format!("pools-{group}"),
            hooks: hooks_host(prefix),
            group,
            calls,
            finalized,
            ns,
            stencil,
        }
    }

    /// Creates the CompositeController over `Pool`s whose spec is `spec` with the
    /// parent resource's kind filled in and its hooks at this test's host.
    async fn serve(&self, spec: Value) {
        let mut spec: Value = serde_json::from_str(&spec.to_string().replace("hooks.test", &self.hooks)).unwrap();
        let parent = json!({"apiVersion": format!("{}/v1", self.group), "resource": "pools"});
        match spec.get_mut("parentResource").and_then(Value::as_object_mut) {
            Some(rule) => rule.extend(parent.as_object().unwrap().clone()),
            None => spec["parentResource"] = parent,
        }
        let cc: CompositeController = serde_json::from_value(json!({
            "apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController",
            "metadata": {"name": self.controller}, "spec": spec
        }))
        .unwrap();
        self.controllers
            .create(&PostParams::default(), &cc)
            .await
            .expect("created");
    }

    /// Applies Pool `name` with `size` ConfigMaps of `value`, selected by `pool=name`
    /// (or, with `generated`, by no selector of its own).
    async fn pool(&self, name: &str, size: u64, value: &str, generated: bool) -> DynamicObject {
        let mut spec = json!({"size": size, "value": value});
        if !generated {
            spec["selector"] = json!({"matchLabels": {"pool": name}});
        }
        let pool = json!({"apiVersion": format!("{}/v1", self.group), "kind": "Pool",
            "metadata": {"name": name}, "spec": spec});
        self.pools
            .patch(name, &PatchParams::apply("test").force(), &Patch::Apply(pool))
            .await
            .unwrap()
    }

    /// Touches Pool `name` (a label) so that it is synced again, and waits until the sync
    /// hook has been called twice more: the sync before it has then ended.
    async fn settle(&self, name: &str) {
        let before = self.calls.load(Ordering::SeqCst);
        for i in 0..2 {
            let touch = json!({"metadata": {"labels": {"touched": format!("{before}-{i}")}}});
            self.pools
                .patch(name, &PatchParams::default(), &Patch::Merge(&touch))
                .await
                .unwrap();
            wait_for("a sync", TIMEOUT, || async {
                (self.calls.load(Ordering::SeqCst) > before + i).then_some(())
            })
            .await;
        }
    }

    /// The number of sync calls once three seconds passed without one: a sync woken by
    /// anything before comes within the informer's latency, so none is pending then.
    async fn quiet(&self) -> usize {
        wait_for("three seconds without a sync", TIMEOUT, || async {
            let seen = self.calls.load(Ordering::SeqCst);
            tokio::time::sleep(Duration::from_secs(3)).await;
            (self.calls.load(Ordering::SeqCst) == seen).then_some(seen)
        })
        .await
    }

    /// ConfigMap `name` once it exists and `check` holds for it.
    async fn configmap(&self, name: &str, check: impl Fn(&ConfigMap) -> bool) -> ConfigMap {
        wait_for(name, TIMEOUT, || async {
            self.configmaps.get_opt(name).await.ok().flatten().filter(|c| check(c))
        })
        .await
    }

    async fn stop(self) {
        self.controllers
            .delete(&self.controller, &DeleteParams::default())
            .await
            .unwrap();
        drop(self.ns);
    }
}

fn value(cm: &ConfigMap) -> Option<&str> {
    cm.data.as_ref()?.get("value").map(String::as_str)
}

#[tokio::test]
async fn a_composite_controllers_sync_hook_decides_children_and_status() {
    let rig = Rig::start("mccomp").await;
    rig.serve(json!({"childResources": [{"apiVersion": "v1", "resource": "configmaps", "updateStrategy": {"method": "InPlace"}}],
            "hooks": {"sync": {"version": "v2", "webhook": {"url": "http://hooks.test/sync"}}}}),
    )
    .await;
    let uid = rig.pool("p1", 2, "a", false).await.metadata.uid.unwrap();
    for name in ["p1-0", "p1-1"] {
        let cm = rig.configmap(name, |_| true).await;
        let owner = &cm.metadata.owner_references.unwrap()[0];
        assert_eq!((owner.uid.as_str(), owner.controller), (uid.as_str(), Some(true)));
    }
    wait_for("the hook's status, with observedGeneration", TIMEOUT, || async {
        let p = rig.pools.get("p1").await.ok()?;
        let status = p.data.get("status")?;
        (status["observed"] == 2 && status["observedGeneration"] == 1).then_some(())
    })
    .await;
    rig.pool("p1", 1, "b", false).await;
    rig.configmap("p1-0", |c| value(c) == Some("b")).await;
    wait_for("p1-1 deleted", TIMEOUT, || async {
        rig.configmaps.get_opt("p1-1").await.ok()?.is_none().then_some(())
    })
    .await;
    // Converged, a sync writes nothing (to this test's objects: the other tests' controller
    // objects, whose hooks this Stencil cannot reach, are Events of their own).
    rig.settle("p1").await;
    rig.stencil.take_writes();
    rig.settle("p1").await;
    let ours = format!("/namespaces/{}/", rig.ns.name);
    let writes: Vec<String> = rig
        .stencil
        .take_writes()
        .into_iter()
        .filter(|w| w.contains(&ours) && !w.contains("/events"))
        .collect();
    assert_eq!(writes, Vec::<String>::new(), "no write when nothing changed");
    // Counted per controller object, as controller-runtime and Stencil's hook metrics.
    let name = format!("controller=\"CompositeController/{}\"", rig.controller);
    let hook_calls = rig.stencil.metric_sum("stencil_hook_calls_total{", &name);
    assert!(hook_calls >= 2.0, "{hook_calls}");
    let syncs = rig.stencil.metric_sum("controller_runtime_reconcile_total{", &name);
    assert!(syncs >= 2.0, "{syncs}");
    rig.stop().await;
}

#[tokio::test]
async fn on_delete_never_updates_a_child_and_one_deleted_by_hand_comes_back_as_the_newest_sync_says() {
    let rig = Rig::start("mcondelete").await;
    rig.serve(
        json!({"childResources": [{"apiVersion": "v1", "resource": "configmaps"}],
            "hooks": {"sync": {"webhook": {"url": "http://hooks.test/sync"}}}}),
    )
    .await;
    rig.pool("p8", 1, "a", false).await;
    let first = rig.configmap("p8-0", |_| true).await;
    rig.pool("p8", 1, "b", false).await;
    rig.settle("p8").await;
    let kept = rig.configmaps.get("p8-0").await.unwrap();
    assert_eq!(value(&kept), Some("a"), "OnDelete leaves an existing child as it is");
    assert_eq!(
        kept.metadata.resource_version, first.metadata.resource_version,
        "not written at all"
    );
    rig.configmaps.delete("p8-0", &DeleteParams::default()).await.unwrap();
    let back = rig.configmap("p8-0", |c| c.metadata.uid != first.metadata.uid).await;
    assert_eq!(value(&back), Some("b"));
    rig.stop().await;
}

#[tokio::test]
async fn recreate_keeps_a_field_set_out_of_band_until_the_answer_changes_then_recreates_once() {
    let rig = Rig::start("mcrecreate").await;
    rig.serve(json!({"childResources": [{"apiVersion": "v1", "resource": "configmaps", "updateStrategy": {"method": "Recreate"}}],
            "hooks": {"sync": {"webhook": {"url": "http://hooks.test/sync"}}}}),
    )
    .await;
    rig.pool("p1", 1, "a", false).await;
    let first = rig.configmap("p1-0", |_| true).await.metadata.uid.unwrap();
    let by_hand = json!({"metadata": {"annotations": {"by-hand": "yes"}}});
    rig.configmaps
        .patch("p1-0", &PatchParams::default(), &Patch::Merge(&by_hand))
        .await
        .unwrap();
    rig.settle("p1").await;
    let kept = rig.configmaps.get("p1-0").await.unwrap();
    assert_eq!(
        kept.metadata.uid.as_deref(),
        Some(first.as_str()),
        "an out-of-band field is no change"
    );
    assert!(kept.metadata.annotations.unwrap().contains_key("by-hand"));
    rig.pool("p1", 1, "b", false).await;
    let second = rig
        .configmap("p1-0", |c| {
            value(c) == Some("b") && c.metadata.uid.as_deref() != Some(first.as_str())
        })
        .await;
    assert!(!second.metadata.annotations.unwrap_or_default().contains_key("by-hand"));
    rig.settle("p1").await;
    let settled = rig.configmaps.get("p1-0").await.unwrap();
    assert_eq!(settled.metadata.uid, second.metadata.uid, "recreated exactly once");
    rig.stop().await;
}

#[tokio::test]
async fn a_finalize_hook_holds_the_parent_until_it_answers_finalized() {
    let rig = Rig::start("mcfinal").await;
    rig.serve(
        json!({"childResources": [{"apiVersion": "v1", "resource": "configmaps"}],
            "hooks": {"sync": {"webhook": {"url": "http://hooks.test/sync"}},
                "finalize": {"webhook": {"url": "http://hooks.test/finalize"}}}}),
    )
    .await;
    rig.pool("p1", 1, "a", false).await;
    rig.configmap("p1-0", |_| true).await;
    let finalizer = format!("metacontroller.io/compositecontroller-{}", rig.controller);
    wait_for("the finalizer", TIMEOUT, || async {
        let p = rig.pools.get("p1").await.ok()?;
        p.metadata.finalizers?.contains(&finalizer).then_some(())
    })
    .await;
    rig.pools.delete("p1", &DeleteParams::default()).await.unwrap();
    wait_for("the finalize hook's answer applied: no children", TIMEOUT, || async {
        rig.configmaps.get_opt("p1-0").await.ok()?.is_none().then_some(())
    })
    .await;
    assert!(
        rig.pools.get_opt("p1").await.unwrap().is_some(),
        "held while not finalized"
    );
    rig.finalized.store(true, Ordering::SeqCst);
    // A resync is not configured: the deletion of the child woke the last sync, so the
    // parent is woken again by touching it.
    let touch = json!({"metadata": {"labels": {"touched": "1"}}});
    rig.pools
        .patch("p1", &PatchParams::default(), &Patch::Merge(&touch))
        .await
        .unwrap();
    wait_for("the parent gone", TIMEOUT, || async {
        rig.pools.get_opt("p1").await.ok()?.is_none().then_some(())
    })
    .await;
    rig.stop().await;
}

#[tokio::test]
async fn children_metacontroller_made_are_taken_over_with_their_uids() {
    let rig = Rig::start("mctake").await;
    // Before Stencil serves the controller: a parent and the child metacontroller made for
    // it, with its controller reference, `controller-uid` label and last-applied annotation.
    let uid = rig.pool("p2", 1, "old", true).await.metadata.uid.unwrap();
    let made: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "p2-0", "labels": {"controller-uid": uid},
            "annotations": {"metacontroller.k8s.io/last-applied-configuration": "{}"},
            "ownerReferences": [{"apiVersion": format!("{}/v1", rig.group), "kind": "Pool", "name": "p2",
                "uid": uid, "controller": true, "blockOwnerDeletion": true}]},
        "data": {"value": "old"}
    }))
    .unwrap();
    let made = rig.configmaps.create(&PostParams::default(), &made).await.unwrap();
    rig.serve(json!({"generateSelector": true,
        "childResources": [{"apiVersion": "v1", "resource": "configmaps", "updateStrategy": {"method": "InPlace"}}],
        "hooks": {"sync": {"webhook": {"url": "http://hooks.test/sync"}}}}))
        .await;
    rig.pool("p2", 1, "new", true).await;
    let taken = rig.configmap("p2-0", |c| value(c) == Some("new")).await;
    assert_eq!(taken.metadata.uid, made.metadata.uid, "the child keeps its UID");
    let annotations = taken.metadata.annotations.unwrap_or_default();
    assert!(!annotations.contains_key("metacontroller.k8s.io/last-applied-configuration"));
    rig.stop().await;
}

#[tokio::test]
async fn a_failing_hook_is_an_event_with_its_answer_and_deletes_nothing() {
    let rig = Rig::start("mcfail").await;
    let uid = rig.pool("p3", 1, "a", false).await.metadata.uid.unwrap();
    let child: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "p3-0", "labels": {"pool": "p3"},
            "ownerReferences": [{"apiVersion": format!("{}/v1", rig.group), "kind": "Pool", "name": "p3",
                "uid": uid, "controller": true, "blockOwnerDeletion": true}]}
    }))
    .unwrap();
    rig.configmaps.create(&PostParams::default(), &child).await.unwrap();
    rig.serve(
        json!({"childResources": [{"apiVersion": "v1", "resource": "configmaps"}],
        "hooks": {"sync": {"webhook": {"url": "http://hooks.test/fail"}}}}),
    )
    .await;
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client().await, &rig.ns.name);
    // The other tests' Stencils, which cannot reach this hook, say so in events of their own.
    let note = wait_for("a Warning event quoting the hook's answer", TIMEOUT, || async {
        let list = events.list(&Default::default()).await.ok()?;
        list.items
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some("HookFailed"))
            .filter_map(|e| e.note)
            .find(|n| n.contains("the hook broke"))
    })
    .await;
    assert!(
        note.contains("500") && note.contains(&rig.controller) && note.contains("p3"),
        "{note}"
    );
    assert!(
        rig.configmaps.get_opt("p3-0").await.unwrap().is_some(),
        "nothing is deleted"
    );
    rig.stop().await;
}

#[tokio::test]
async fn an_orphan_that_matches_is_adopted_kept_when_wanted_and_deleted_when_not() {
    let rig = Rig::start("mcadopt").await;
    rig.serve(json!({"childResources": [{"apiVersion": "v1", "resource": "configmaps", "updateStrategy": {"method": "InPlace"}}],
        "hooks": {"sync": {"webhook": {"url": "http://hooks.test/sync"}}}}))
        .await;
    rig.pool("p4", 1, "a", false).await;
    rig.configmap("p4-0", |_| true).await;
    let orphan = |name: &str, pool: &str| -> ConfigMap {
        serde_json::from_value(json!({"metadata": {"name": name, "labels": {"pool": pool}}, "data": {"value": "x"}}))
            .unwrap()
    };
    // Its creation alone wakes the parent, which adopts it and, not wanting it, deletes it.
    rig.configmaps
        .create(&PostParams::default(), &orphan("stray", "p4"))
        .await
        .unwrap();
    wait_for("the stray orphan adopted and deleted", TIMEOUT, || async {
        rig.configmaps.get_opt("stray").await.ok()?.is_none().then_some(())
    })
    .await;
    // An orphan made before its parent, under the name the hook answers: adopted, then
    // updated in place.
    let wanted = rig
        .configmaps
        .create(&PostParams::default(), &orphan("p5-0", "p5"))
        .await
        .unwrap();
    rig.pool("p5", 1, "a", false).await;
    let adopted = rig.configmap("p5-0", |c| value(c) == Some("a")).await;
    assert_eq!(adopted.metadata.uid, wanted.metadata.uid, "adopted, not made anew");
    let owner = &adopted.metadata.owner_references.unwrap()[0];
    assert_eq!(owner.controller, Some(true));
    rig.stop().await;
}

#[tokio::test]
async fn ignore_status_changes_syncs_on_spec_and_metadata_only() {
    let rig = Rig::start("mcstatus").await;
    rig.serve(json!({"parentResource": {"ignoreStatusChanges": true},
        "childResources": [{"apiVersion": "v1", "resource": "configmaps"}],
        "hooks": {"sync": {"webhook": {"url": "http://hooks.test/sync"}}}}))
        .await;
    rig.pool("p6", 1, "a", false).await;
    rig.configmap("p6-0", |_| true).await;
    let before = rig.quiet().await;
    let status = json!({"status": {"external": 1}});
    rig.pools
        .patch_status("p6", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    let quiet = rig.quiet().await;
    assert_eq!(quiet, before, "a status change alone does not sync");
    rig.settle("p6").await;
    rig.stop().await;
}

#[tokio::test]
async fn a_controller_object_stencil_cannot_serve_says_why_on_its_status_and_in_an_event() {
    let rig = Rig::start("mcrefuse").await;
    rig.serve(json!({"childResources": [{"apiVersion": "v1", "resource": "configmaps",
            "updateStrategy": {"method": "RollingRecreate"}}],
        "hooks": {"sync": {"webhook": {"url": "http://hooks.test/sync"}}}}))
        .await;
    let served = |status: &'static str| {
        let controllers = rig.controllers.clone();
        let name = rig.controller.clone();
        async move {
            wait_for("the Served condition", TIMEOUT, || async {
                let cc = controllers.get(&name).await.ok()?;
                let conditions = cc.status?.0.get("conditions")?.as_array()?.clone();
                conditions
                    .into_iter()
                    .find(|c| c["type"] == "Served" && c["status"] == status)
            })
            .await
        }
    };
    let refused = served("False").await;
    assert_eq!(refused["reason"], "Unsupported");
    let message = refused["message"].as_str().unwrap();
    assert!(
        message.contains("spec.childResources[0].updateStrategy.method RollingRecreate"),
        "{message}"
    );
    assert!(refused["lastTransitionTime"].is_string());
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::all(client().await);
    wait_for("an Unsupported event on the controller object", TIMEOUT, || async {
        let list = events.list(&Default::default()).await.ok()?;
        list.items.into_iter().find(|e| {
            e.reason.as_deref() == Some("Unsupported")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(rig.controller.as_str())
        })
    })
    .await;
    rig.pool("p7", 1, "a", false).await;
    assert!(
        rig.configmaps.get_opt("p7-0").await.unwrap().is_none(),
        "not served at all"
    );
    // Fixed, it is served, and says so.
    let fixed = json!({"spec": {"childResources": [{"apiVersion": "v1", "resource": "configmaps"}]}});
    rig.controllers
        .patch(&rig.controller, &PatchParams::default(), &Patch::Merge(&fixed))
        .await
        .unwrap();
    served("True").await;
    rig.configmap("p7-0", |_| true).await;
    rig.stop().await;
}

/// A sync hook for cluster-scoped Realms: a ConfigMap in the Realm's `spec.namespace`
/// carrying `spec.value`, none once `spec.drop` is set.
fn realm_sync(request: &Value) -> Value {
    let realm = &request["parent"];
    let children: Vec<Value> = match realm["spec"]["drop"].as_bool() {
        Some(true) => Vec::new(),
        _ => vec![json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("{}-cm", realm["metadata"]["name"].as_str().unwrap_or_default()),
                "namespace": realm["spec"]["namespace"]},
            "data": {"value": realm["spec"]["value"]}})],
    };
    json!({"children": children})
}

#[tokio::test]
async fn a_cluster_scoped_parents_children_are_written_in_their_own_namespaces() {
    let client = client().await;
    let group = unique_group();
    install_crd(&client, &open_crd(&group, "Realm", "realms", "Cluster")).await;
    let ns = TestNamespace::new(&client, "mcrealm").await;
    let (address, _) = serve_hooks(&[("/sync", realm_sync)]).await;
    let host = format!("hooks-{group}.test");
    let _stencil = compat_stencil(&client, &host, address).await;
    let controllers: Api<CompositeController> = Api::all(client.clone());
    let name = format!("realms-{group}");
    let cc: CompositeController = serde_json::from_value(json!({
        "apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController",
        "metadata": {"name": name},
        "spec": {"parentResource": {"apiVersion": format!("{group}/v1"), "resource": "realms"},
            "generateSelector": true,
            "childResources": [{"apiVersion": "v1", "resource": "configmaps", "updateStrategy": {"method": "InPlace"}}],
            "hooks": {"sync": {"webhook": {"url": format!("http://{host}/sync")}}}}
    }))
    .unwrap();
    controllers.create(&PostParams::default(), &cc).await.unwrap();
    let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, "v1", "Realm"), "realms");
    let realms: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let realm = |spec: Value| json!({"apiVersion": format!("{group}/v1"), "kind": "Realm", "metadata": {"name": "r"}, "spec": spec});
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    let cm = |check: fn(&ConfigMap) -> bool| {
        let configmaps = configmaps.clone();
        async move {
            wait_for("r-cm", TIMEOUT, || async {
                configmaps.get_opt("r-cm").await.ok().flatten().filter(check)
            })
            .await
        }
    };
    for (value, check) in [
        ("a", (|c| value(c) == Some("a")) as fn(&ConfigMap) -> bool),
        ("b", |c| value(c) == Some("b")),
    ] {
        realms
            .patch(
                "r",
                &PatchParams::apply("test").force(),
                &Patch::Apply(realm(json!({"namespace": ns.name, "value": value}))),
            )
            .await
            .unwrap();
        cm(check).await;
    }
    realms
        .patch(
            "r",
            &PatchParams::apply("test").force(),
            &Patch::Apply(realm(json!({"namespace": ns.name, "drop": true}))),
        )
        .await
        .unwrap();
    wait_for("r-cm deleted", TIMEOUT, || async {
        configmaps.get_opt("r-cm").await.ok()?.is_none().then_some(())
    })
    .await;
    realms.delete("r", &DeleteParams::default()).await.unwrap();
    controllers.delete(&name, &DeleteParams::default()).await.unwrap();
}
