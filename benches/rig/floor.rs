//! The floor for B2: a plain client that watches the parents of one namespace and creates
//! their three children the moment a parent appears, with Stencil's concurrency and owner
//! references as Stencil sets them. The same create→children measurement against it, in
//! the same run, is the least the rig allows; Stencil's B2 reads as a ratio to it, idle
//! and while N parents arrive at once.
//!
//! [`Beside`] runs the same client beside a running Stencil, on a kind Stencil does not
//! serve, so B2 in another namespace during B1's burst reads against what the API
//! server gives a plain client at that moment.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use tokio::task::JoinHandle;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use super::{
    APPS, PLAIN_CONCURRENCY, Parents, apply_all, apps, bulk_names, clear, count_children, create_parents, latency,
    namespace, record_latency, until,
};

const NS: &str = "bench-floor";

/// The parents of the floor beside Stencil: a kind of its own, which Stencil does not serve.
const FLOORS: Parents = Parents {
    group: "floor.bench.stencil.dev",
    version: "v1",
    kind: "Floor",
    plural: "floors",
};

/// The namespace of the floor beside Stencil.
const BESIDE_NS: &str = "bench-floor-beside";

/// The three children of `parent`, a `kind`, as the bench definition renders them, each
/// owned by it.
fn children(parent: &DynamicObject, kind: Parents, replicas: u64) -> [(&'static str, Value); 3] {
    let name = parent.name_any();
    let meta = json!({"name": name, "labels": {"app.kubernetes.io/managed-by": "bench-floor"},
        "ownerReferences": [{"apiVersion": format!("{}/{}", kind.group, kind.version), "kind": kind.kind,
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

/// Creates `parent`'s children in `ns`; one that exists already (a relist) is left as it is.
async fn create_children(client: Client, (ns, kind): (&str, Parents), parent: DynamicObject, replicas: u64) {
    for (plural, child) in children(&parent, kind, replicas) {
        let (group, version) = match child["apiVersion"].as_str().unwrap_or_default().split_once('/') {
            Some((g, v)) => (g.to_string(), v.to_string()),
            None => (String::new(), "v1".to_string()),
        };
        let kind = child["kind"].as_str().unwrap_or_default().to_string();
        let ar = kube::core::ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk(&group, &version, &kind),
            plural,
        );
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
        let object: DynamicObject = serde_json::from_value(child).expect("a child");
        match api.create(&PostParams::default(), &object).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => eprintln!("floor: creating a {kind}: {e}"),
        }
    }
}

/// Watches the `kind` parents of `ns` and creates each new one's children.
async fn serve(client: Client, (ns, kind): (&'static str, Parents), replicas: u64) {
    let mut seen = HashSet::new();
    watcher(apps(&client, ns, kind), watcher::Config::default())
        .applied_objects()
        .filter_map(|parent| std::future::ready(parent.ok()))
        .filter(move |parent| std::future::ready(seen.insert(parent.uid().unwrap_or_default())))
        .for_each_concurrent(PLAIN_CONCURRENCY, |parent| {
            create_children(client.clone(), (ns, kind), parent, replicas)
        })
        .await;
}

/// The floor serving [`FLOORS`] in [`BESIDE_NS`] while Stencil runs.
pub(super) struct Beside {
    client: Client,
    samples: usize,
    task: JoinHandle<()>,
}

impl Beside {
    /// Installs the floor's kind, starts serving it and records its idle B2.
    pub(super) async fn start(
        client: &Client,
        (samples, replicas): (usize, u64),
        results: &mut BTreeMap<&'static str, Value>,
    ) -> Beside {
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{}.{}", FLOORS.plural, FLOORS.group)},
            "spec": {"group": FLOORS.group, "scope": "Namespaced",
                "names": {"kind": FLOORS.kind, "plural": FLOORS.plural, "singular": "floor", "listKind": "FloorList"},
                "versions": [{"name": FLOORS.version, "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}});
        apply_all(client, vec![crd]).await;
        namespace(client, BESIDE_NS).await;
        let api = apps(client, BESIDE_NS, FLOORS);
        until("the Floor kind to be served", Duration::from_secs(60), || async {
            api.list(&ListParams::default().limit(1)).await.is_ok()
        })
        .await;
        let beside = Beside {
            client: client.clone(),
            samples,
            task: tokio::spawn(serve(client.clone(), (BESIDE_NS, FLOORS), replicas)),
        };
        let idle = beside.sample("idle").await;
        record_latency(results, ["b2_beside_idle_p50_ms", "b2_beside_idle_p99_ms"], &idle);
        beside
    }

    /// B2 against the floor, its sample names starting with `prefix`.
    pub(super) async fn sample(&self, prefix: &str) -> Vec<Duration> {
        latency(&self.client, BESIDE_NS, self.samples, prefix, FLOORS).await
    }

    /// Records the floor's B2 during the burst (`busy`) and Stencil's other namespace
    /// against it, and stops.
    pub(super) async fn stop(self, busy: &[Duration], results: &mut BTreeMap<&'static str, Value>) {
        self.task.abort();
        record_latency(results, ["b2_beside_p50_ms", "b2_beside_p99_ms"], busy);
        for (ratio, over, under) in [
            ("b2_beside_over_idle", "b2_beside_p50_ms", "b2_beside_idle_p50_ms"),
            ("b2_tenant_over_beside", "b2_tenant_p50_ms", "b2_beside_p50_ms"),
        ] {
            insert_ratio(results, ratio, over, under);
        }
        let _ = Api::<Namespace>::all(self.client)
            .delete(BESIDE_NS, &DeleteParams::default())
            .await;
    }
}

/// `over / under` as `ratio`, when both were measured.
pub(super) fn insert_ratio(results: &mut BTreeMap<&'static str, Value>, ratio: &'static str, over: &str, under: &str) {
    let value = |key: &str| results.get(key).and_then(Value::as_f64);
    if let (Some(o), Some(u)) = (value(over), value(under)) {
        results.insert(ratio, json!(o / u));
    }
}

/// B2 against the floor, idle and during the creation of N parents; the ratios use
/// Stencil's B2 already in `results`.
pub(super) async fn run(
    client: &Client,
    (n, samples, replicas): (usize, usize, u64),
    results: &mut BTreeMap<&'static str, Value>,
) {
    namespace(client, NS).await;
    let floor = tokio::spawn(serve(client.clone(), (NS, APPS), replicas));
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
        insert_ratio(results, ratio, stencil, floor);
    }
    let _ = Api::<Namespace>::all(client.clone())
        .delete(NS, &DeleteParams::default())
        .await;
}
