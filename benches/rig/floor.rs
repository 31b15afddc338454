//! The floor for B2: a plain client that watches the parents of one namespace and creates
//! their three children the moment a parent appears, with Stencil's concurrency and owner
//! references as Stencil sets them. The same create→children measurement against it, in
//! the same run, is the least the rig allows; Stencil's B2 reads as a ratio to it, idle
//! and while N parents arrive at once.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use super::{
    APPS, PLAIN_CONCURRENCY, apps, bulk_names, clear, count_children, create_parents, latency, namespace,
    record_latency, until,
};

const NS: &str = "bench-floor";

/// The three children of `parent`, as the bench definition renders them, each owned by it.
fn children(parent: &DynamicObject, replicas: u64) -> [(&'static str, Value); 3] {
    let name = parent.name_any();
    let meta = json!({"name": name, "labels": {"app.kubernetes.io/managed-by": "bench-floor"},
        "ownerReferences": [{"apiVersion": format!("{}/{}", APPS.group, APPS.version), "kind": APPS.kind,
            "name": name, "uid": parent.uid().unwrap_or_default(), "controller": true, "blockOwnerDeletion": true}]});
    [
        (
            "configmaps",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"greeting": "hello"}}),
        ),
        (
            "services",
            json!({"apiVersion": "v1", "kind": "Service", "metadata": meta,
            "spec": {"clusterIP": "None", "selector": {"app": name}, "ports": [{"port": 80}]}}),
        ),
        (
            "deployments",
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "app",
                    "image": "nginx", "resources": {"requests": {"cpu": "1000m", "memory": "64Mi"}}}]}}}}),
        ),
    ]
}

/// Creates `parent`'s children; one that exists already (a relist) is left as it is.
async fn create_children(client: Client, parent: DynamicObject, replicas: u64) {
    for (plural, child) in children(&parent, replicas) {
        let (group, version) = match child["apiVersion"].as_str().unwrap_or_default().split_once('/') {
            Some((g, v)) => (g.to_string(), v.to_string()),
            None => (String::new(), "v1".to_string()),
        };
        let kind = child["kind"].as_str().unwrap_or_default().to_string();
        let ar = kube::core::ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk(&group, &version, &kind),
            plural,
        );
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &ar);
        let object: DynamicObject = serde_json::from_value(child).expect("a child");
        match api.create(&PostParams::default(), &object).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => eprintln!("floor: creating a {kind}: {e}"),
        }
    }
}

/// Watches the parents of the floor's namespace and creates each new one's children.
async fn serve(client: Client, replicas: u64) {
    let mut seen = HashSet::new();
    watcher(apps(&client, NS, APPS), watcher::Config::default())
        .applied_objects()
        .filter_map(|parent| std::future::ready(parent.ok()))
        .filter(move |parent| std::future::ready(seen.insert(parent.uid().unwrap_or_default())))
        .for_each_concurrent(PLAIN_CONCURRENCY, |parent| {
            create_children(client.clone(), parent, replicas)
        })
        .await;
}

/// B2 against the floor, idle and during the creation of N parents; the ratios use
/// Stencil's B2 already in `results`.
pub(super) async fn run(
    client: &Client,
    (n, samples, replicas): (usize, usize, u64),
    results: &mut BTreeMap<&'static str, Value>,
) {
    namespace(client, NS).await;
    let floor = tokio::spawn(serve(client.clone(), replicas));
    let api = apps(client, NS, APPS);
    let idle = latency(client, NS, samples, "lat", APPS).await;
    record_latency(results, ["b2_floor_idle_p50_ms", "b2_floor_idle_p99_ms"], &idle);
    clear(client, &api, NS).await;
    let names = bulk_names(n, samples);
    let ((), busy) = tokio::join!(
        create_parents(&api, &names, APPS),
        latency(client, NS, samples, "busy", APPS)
    );
    record_latency(results, ["b2_floor_busy_p50_ms", "b2_floor_busy_p99_ms"], &busy);
    until("the floor's children", Duration::from_secs(1800), || async {
        count_children(client, NS).await >= 3 * n
    })
    .await;
    floor.abort();
    for (ratio, stencil, floor) in [
        ("b2_idle_ratio", "b2_idle_p50_ms", "b2_floor_idle_p50_ms"),
        ("b2_busy_ratio", "b2_busy_p50_ms", "b2_floor_busy_p50_ms"),
    ] {
        let value = |key: &str| results.get(key).and_then(Value::as_f64);
        if let (Some(s), Some(f)) = (value(stencil), value(floor)) {
            results.insert(ratio, json!(s / f));
        }
    }
    let _ = Api::<Namespace>::all(client.clone())
        .delete(NS, &DeleteParams::default())
        .await;
}
