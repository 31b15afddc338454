//! B1b: N parents whose three children (a ConfigMap, a Secret and a headless Service)
//! need nothing from the controller manager and are ready once they exist, so that
//! convergence is bound by the controller and the API server alone. Stencil, a plain
//! client making the same writes, and kro (when built) converge the same N in turn, each
//! in a fresh namespace, timed from the first create to the last parent Ready.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, Service};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use stencil_core::fixtures::{self, ParentKind, child};

use super::{
    Controller, GROUP, PLAIN_CONCURRENCY, Parents, app, apply_all, apps, count_children, count_ready, create_parents,
    delete_all, kro_dir, namespace, root, service_account_kubeconfig, stencil_rbac, until,
};

pub(super) const LITES: Parents = Parents {
    group: GROUP,
    version: "v1",
    kind: "Lite",
    plural: "lites",
};

const KRO_LITES: Parents = Parents {
    group: "kro.run",
    version: "v1alpha1",
    kind: "KLite",
    plural: "klites",
};

/// The B1b definition: three children that are ready as soon as they exist.
pub(super) fn definition() -> String {
    let lite = ParentKind {
        group: GROUP,
        kind: "Lite",
        plural: "lites",
    };
    let meta = "metadata:\n  name: {{ parent.metadata.name }}";
    let children = [
        child(
            "config",
            &format!(
                "apiVersion: v1\nkind: ConfigMap\n{meta}\ndata:\n  greeting: {{{{ parent.spec.greeting | quote }}}}"
            ),
        ),
        child(
            "secret",
            &format!(
                "apiVersion: v1\nkind: Secret\n{meta}\nstringData:\n  greeting: {{{{ parent.spec.greeting | quote }}}}"
            ),
        ),
        child(
            "service",
            &format!(
                "apiVersion: v1\nkind: Service\n{meta}\nspec:\n  clusterIP: None\n  selector: {{app: {{{{ parent.metadata.name }}}}}}\n  ports: [{{port: 80}}]"
            ),
        ),
    ];
    fixtures::definition(lite, &children.concat(), "")
}

/// kro's equivalent graph: the same three children, no readiness rule.
fn kro_graph() -> Value {
    let name = "${schema.metadata.name}";
    let greeting = "${schema.spec.greeting}";
    json!({
        "apiVersion": "kro.run/v1alpha1",
        "kind": "ResourceGraphDefinition",
        "metadata": {"name": "klites"},
        "spec": {
            "schema": {"apiVersion": "v1alpha1", "kind": "KLite", "spec": {"greeting": "string"}},
            "resources": [
                {"id": "config", "template": {"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": name}, "data": {"greeting": greeting}}},
                {"id": "secret", "template": {"apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": name}, "stringData": {"greeting": greeting}}},
                {"id": "service", "template": {"apiVersion": "v1", "kind": "Service",
                    "metadata": {"name": name},
                    "spec": {"clusterIP": "None", "selector": {"app": name}, "ports": [{"port": 80}]}}},
            ],
        },
    })
}

fn names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("lite-{i}")).collect()
}

/// Creates N parents at once and waits until each has its children and is Ready.
pub(super) async fn converge(client: &Client, ns: &str, n: usize, p: Parents) -> Duration {
    let api = apps(client, ns, p);
    let started = Instant::now();
    create_parents(&api, &names(n), p).await;
    until(
        &format!("B1b convergence in {ns}"),
        Duration::from_secs(3600),
        || async { count_children(client, ns).await >= 3 * n && count_ready(&api).await >= n },
    )
    .await;
    started.elapsed()
}

/// Deletes every parent of `ns` and waits for their children to go.
pub(super) async fn teardown(client: &Client, ns: &str, p: Parents) {
    delete_all(&apps(client, ns, p)).await;
    until(
        &format!("B1b children in {ns} to go"),
        Duration::from_secs(1800),
        || async { count_children(client, ns).await == 0 },
    )
    .await;
}

/// The limit: per parent, the parent, its three children and its Ready status, from a
/// plain client with Stencil's concurrency.
async fn plain(client: &Client, n: usize) -> Duration {
    let ns = "bench-lite-plain";
    namespace(client, ns).await;
    let started = Instant::now();
    futures::stream::iter(names(n))
        .map(|name| {
            let client = client.clone();
            async move {
                let pp = PostParams::default();
                let parents = apps(&client, ns, LITES);
                parents.create(&pp, &app(&name, LITES)).await?;
                let meta = json!({"name": name, "labels": {"app.kubernetes.io/managed-by": "bench-plain"}});
                let cm: ConfigMap = serde_json::from_value(json!({"metadata": meta, "data": {"greeting": "hello"}})).unwrap();
                Api::<ConfigMap>::namespaced(client.clone(), ns).create(&pp, &cm).await?;
                let secret: Secret = serde_json::from_value(json!({"metadata": meta, "stringData": {"greeting": "hello"}})).unwrap();
                Api::<Secret>::namespaced(client.clone(), ns).create(&pp, &secret).await?;
                let svc: Service = serde_json::from_value(json!({"metadata": meta,
                    "spec": {"clusterIP": "None", "selector": {"app": name}, "ports": [{"port": 80}]}})).unwrap();
                Api::<Service>::namespaced(client.clone(), ns).create(&pp, &svc).await?;
                let ready = json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Plain", "message": ""}]}});
                parents.patch_status(&name, &PatchParams::default(), &Patch::Merge(&ready)).await?;
                Ok::<_, kube::Error>(())
            }
        })
        .buffer_unordered(PLAIN_CONCURRENCY)
        .try_collect::<Vec<_>>()
        .await
        .expect("plain client writes");
    let elapsed = started.elapsed();
    let _ = Api::<Namespace>::all(client.clone())
        .delete(ns, &DeleteParams::default())
        .await;
    elapsed
}

/// kro converging the same N, or why it did not run.
async fn kro(client: &Client, n: usize, dir: &Path) -> Result<Duration, String> {
    let kro = kro_dir()?;
    let kubeconfig = service_account_kubeconfig(client, "kro", super::kro_rbac(), dir).await;
    super::kro_crds(client, &kro).await;
    let controller = Controller::kro(&kro.join("kro"), &kubeconfig, &root().join("target/bench/kro-lite.log"));
    apply_all(client, vec![kro_graph()]).await;
    let ns = "bench-lite-kro";
    namespace(client, ns).await;
    let api = apps(client, ns, KRO_LITES);
    until("kro to serve the KLite kind", Duration::from_secs(120), || async {
        api.list(&ListParams::default().limit(1)).await.is_ok()
    })
    .await;
    let took = converge(client, ns, n, KRO_LITES).await;
    teardown(client, ns, KRO_LITES).await;
    controller.stop();
    Ok(took)
}

/// B1b at N: Stencil, then the plain client, then kro.
pub(super) async fn run(client: &Client, dir: &Path, n: usize, results: &mut BTreeMap<&'static str, Value>) {
    let defs = dir.join("lite-definitions");
    std::fs::create_dir_all(&defs).unwrap();
    std::fs::write(defs.join("lites.yaml"), definition()).unwrap();
    let kubeconfig = service_account_kubeconfig(client, "stencil", stencil_rbac(&defs), dir).await;
    let ns = "bench-lite";
    namespace(client, ns).await;
    let stencil = Controller::stencil(&defs, &kubeconfig, &root().join("target/bench/stencil-lite.log"));
    let api = apps(client, ns, LITES);
    until("the Lite kind to be served", Duration::from_secs(120), || async {
        api.list(&ListParams::default().limit(1)).await.is_ok()
    })
    .await;
    until(
        "Stencil to serve the Lite definition",
        Duration::from_secs(60),
        || async { stencil.metric("stencil_definitions{state=\"running\"}").await >= 1.0 },
    )
    .await;
    let base_rss = stencil.rss_kib().0;
    let cpu_before = stencil.cpu_seconds();
    let took = converge(client, ns, n, LITES).await;
    let rss = stencil.rss_kib().0;
    let passes = stencil.metric("controller_runtime_reconcile_total").await;
    results.insert("b1b_passes_per_parent", json!(passes / n as f64));
    results.insert("b1b_n", json!(n));
    results.insert("b1b_converge_s", json!(took.as_secs_f64()));
    results.insert("b1b_rss_mib", json!(rss as f64 / 1024.0));
    results.insert("b1b_base_rss_mib", json!(base_rss as f64 / 1024.0));
    results.insert(
        "b1b_kib_per_parent",
        json!(rss.saturating_sub(base_rss) as f64 / n as f64),
    );
    results.insert(
        "b1b_cpu_s_per_1k",
        json!((stencil.cpu_seconds() - cpu_before) * 1000.0 / n as f64),
    );
    teardown(client, ns, LITES).await;
    stencil.stop();

    let limit = plain(client, n).await;
    results.insert("b1b_plain_s", json!(limit.as_secs_f64()));
    results.insert("b1b_ratio", json!(took.as_secs_f64() / limit.as_secs_f64()));
    match kro(client, n, dir).await {
        Ok(kro) => {
            results.insert("b1b_kro_s", json!(kro.as_secs_f64()));
            results.insert("b1b_kro_ratio", json!(kro.as_secs_f64() / took.as_secs_f64()));
        }
        Err(why) => {
            results.insert("b1b_kro_skipped", json!(why));
        }
    }
}
