//! B8: a decorator. The bundled namespace-defaults decorator (a quota, default limits and
//! a NetworkPolicy per labelled Namespace) runs alone while many Namespaces that it does
//! not match exist; then Namespaces are labelled one at a time (the latency from the
//! label to the three children) and N at once (convergence). Its memory is read before
//! the non-matching Namespaces exist, after, and once N match. B9 then runs the bundled
//! secret-propagation operator over the same Namespaces: one selector lookup whose set is
//! the N labelled ones, to measure what a lookup watch of every Namespace costs.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{LimitRange, Namespace, ResourceQuota};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::{
    Controller, PLAIN_CONCURRENCY, create_all, record_latency, root, service_account_kubeconfig, stencil_rbac, until,
};

const LABEL: &str = "stencil.dev/team";

fn name(i: usize) -> String {
    format!("b8-{i}")
}

async fn label(api: &Api<Namespace>, i: usize) {
    let patch = json!({"metadata": {"labels": {LABEL: "bench"}}});
    api.patch(&name(i), &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("label a namespace");
}

/// How many Namespaces have all three children.
async fn decorated(client: &Client) -> usize {
    let lp = ListParams::default().labels("app.kubernetes.io/managed-by=stencil");
    let count = |n: Result<usize, kube::Error>| n.unwrap_or(0);
    let quotas = count(
        Api::<ResourceQuota>::all(client.clone())
            .list(&lp)
            .await
            .map(|l| l.items.len()),
    );
    let limits = count(
        Api::<LimitRange>::all(client.clone())
            .list(&lp)
            .await
            .map(|l| l.items.len()),
    );
    let policies = count(
        Api::<NetworkPolicy>::all(client.clone())
            .list(&lp)
            .await
            .map(|l| l.items.len()),
    );
    quotas.min(limits).min(policies)
}

/// Runs B8 with `others` Namespaces, `samples` latency samples and `n` converged at once.
pub(super) async fn run(
    client: &Client,
    dir: &Path,
    (others, samples, n): (usize, usize, usize),
    results: &mut BTreeMap<&'static str, Value>,
) {
    let others = others.max(samples + n);
    let stencil = start_decorator(client, dir).await;
    let (before, _) = stencil.rss_kib();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    create_namespaces(&namespaces, others).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (after, _) = stencil.rss_kib();
    results.insert("b8_others", json!(others));
    results.insert("b8_rss_before_mib", json!(before as f64 / 1024.0));
    results.insert("b8_rss_others_mib", json!(after as f64 / 1024.0));
    let lat = label_latency(client, &namespaces, samples).await;
    record_latency(results, ["b8_label_p50_ms", "b8_label_p99_ms"], &lat);
    let started = Instant::now();
    label_at_once(client, &namespaces, samples..samples + n).await;
    results.insert("b8_converge_s", json!(started.elapsed().as_secs_f64()));
    results.insert("b8_rss_matching_mib", json!(stencil.rss_kib().0 as f64 / 1024.0));
    stencil.stop();
    propagate(client, dir, samples + n, results).await;
    // Left to the namespace controller; the rig goes down after the bench.
    for i in 0..others {
        let _ = namespaces.delete(&name(i), &DeleteParams::background()).await;
    }
}

/// Starts Stencil with the bundled namespace-defaults decorator alone, as a service
/// account with its derived RBAC, and waits until it serves.
async fn start_decorator(client: &Client, dir: &Path) -> Controller {
    let defs = dir.join("decorator");
    std::fs::create_dir_all(&defs).unwrap();
    std::fs::copy(
        root().join("operators/namespace-defaults.yaml"),
        defs.join("namespace-defaults.yaml"),
    )
    .unwrap();
    let kubeconfig = service_account_kubeconfig(client, "stencil", stencil_rbac(&defs), dir).await;
    let log = root().join("target/bench/stencil-decorator.log");
    let stencil = Controller::stencil(&defs, &kubeconfig, &log);
    until("the decorator to serve", Duration::from_secs(60), || async {
        stencil.metric("stencil_definitions{state=\"running\"}").await >= 1.0
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    stencil
}

/// Creates the bench's `count` Namespaces (one that exists already is fine).
async fn create_namespaces(namespaces: &Api<Namespace>, count: usize) {
    let all = (0..count).map(|i| serde_json::from_value(json!({"metadata": {"name": name(i)}})).unwrap());
    create_all(namespaces, all, "namespaces").await;
}

/// Labels the first `samples` Namespaces one at a time; each sample is the time from
/// its label until its three children exist, sorted.
async fn label_latency(client: &Client, namespaces: &Api<Namespace>, samples: usize) -> Vec<Duration> {
    let mut lat = Vec::new();
    for i in 0..samples {
        let ns = name(i);
        let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), &ns);
        let limits: Api<LimitRange> = Api::namespaced(client.clone(), &ns);
        let policies: Api<NetworkPolicy> = Api::namespaced(client.clone(), &ns);
        let started = Instant::now();
        label(namespaces, i).await;
        loop {
            let (q, l, p) = tokio::join!(
                quotas.get_opt("team-quota"),
                limits.get_opt("team-defaults"),
                policies.get_opt("default-deny")
            );
            if matches!((q, l, p), (Ok(Some(_)), Ok(Some(_)), Ok(Some(_)))) {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(600),
                "{ns} never got its children"
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        lat.push(started.elapsed());
    }
    lat.sort();
    lat
}

/// Labels the Namespaces `which` at once and waits until every labelled one (the
/// samples' included) is decorated.
async fn label_at_once(client: &Client, namespaces: &Api<Namespace>, which: std::ops::Range<usize>) {
    let all = which.end;
    futures::stream::iter(which)
        .map(|i| {
            let api = namespaces.clone();
            async move { label(&api, i).await }
        })
        .buffer_unordered(PLAIN_CONCURRENCY)
        .collect::<Vec<_>>()
        .await;
    until(
        "every labelled namespace decorated",
        Duration::from_secs(1800),
        || async { decorated(client).await >= all },
    )
    .await;
}

/// B9: one SecretPropagation copying a Secret into the `members` labelled Namespaces,
/// with every bench Namespace in the lookup watch.
async fn propagate(client: &Client, dir: &Path, members: usize, results: &mut BTreeMap<&'static str, Value>) {
    let defs = dir.join("propagation");
    std::fs::create_dir_all(&defs).unwrap();
    std::fs::copy(
        root().join("operators/secret-propagation.yaml"),
        defs.join("secret-propagation.yaml"),
    )
    .unwrap();
    let kubeconfig = service_account_kubeconfig(client, "stencil", stencil_rbac(&defs), dir).await;
    let log = root().join("target/bench/stencil-propagation.log");
    let stencil = Controller::stencil(&defs, &kubeconfig, &log);
    let ar = kube::core::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk("examples.stencil.dev", "v1", "SecretPropagation"),
        "secretpropagations",
    );
    let props: Api<kube::api::DynamicObject> = Api::all_with(client.clone(), &ar);
    until(
        "the SecretPropagation kind to be served",
        Duration::from_secs(120),
        || async { props.list(&ListParams::default().limit(1)).await.is_ok() },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (idle, _) = stencil.rss_kib();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let patch = json!({"metadata": {"labels": {"examples.stencil.dev/secret-group": "bench"}}});
    futures::stream::iter(0..members)
        .map(|i| {
            let api = namespaces.clone();
            let patch = patch.clone();
            async move {
                api.patch(&name(i), &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .expect("label a member")
            }
        })
        .buffer_unordered(PLAIN_CONCURRENCY)
        .collect::<Vec<_>>()
        .await;
    let source: k8s_openapi::api::core::v1::Secret =
        serde_json::from_value(json!({"metadata": {"name": "b9-source"}, "stringData": {"token": "t"}})).unwrap();
    let secrets = Api::<k8s_openapi::api::core::v1::Secret>::namespaced(client.clone(), "bench");
    let _ = secrets.create(&PostParams::default(), &source).await;
    let prop: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "examples.stencil.dev/v1", "kind": "SecretPropagation", "metadata": {"name": "b9"},
        "spec": {"source": {"namespace": "bench", "name": "b9-source"}, "group": "bench"}
    }))
    .unwrap();
    let started = Instant::now();
    props
        .create(&PostParams::default(), &prop)
        .await
        .expect("create the propagation");
    let copies = Api::<k8s_openapi::api::core::v1::Secret>::all(client.clone());
    let lp = ListParams::default().labels("stencil.dev/child=copies");
    until("every copy", Duration::from_secs(1800), || async {
        copies.list(&lp).await.is_ok_and(|l| l.items.len() >= members)
    })
    .await;
    results.insert("b9_members", json!(members));
    results.insert("b9_copies_s", json!(started.elapsed().as_secs_f64()));
    results.insert("b9_rss_idle_mib", json!(idle as f64 / 1024.0));
    results.insert("b9_rss_mib", json!(stencil.rss_kib().0 as f64 / 1024.0));
    let _ = props.delete("b9", &DeleteParams::background()).await;
    stencil.stop();
}
