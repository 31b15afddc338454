//! B2 while every parent is re-checked. N parents of a definition whose one child (a
//! ConfigMap) reads a shared Secret through a lookup converge; then the bench touches
//! that Secret every [`WAVE_EVERY`], which wakes all N parents at once, as a relist or a
//! wave of resyncs does, with nothing for Stencil to write and one request for the API
//! server. Meanwhile new parents of the same definition are created one by one and timed
//! from create to child. A new parent should not wait behind those N passes:
//! `b2_recheck_p50_ms` against the same definition idle (`b2_recheck_idle_p50_ms`).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use stencil_core::fixtures::{self, ParentKind, child};

use super::lite::teardown;
use super::observe::Observer;
use super::{
    Controller, GROUP, Parents, app, apps, create_parents, namespace, record_latency, root, service_account_kubeconfig,
    stencil_rbac, until,
};

const RECHECKS: Parents = Parents {
    group: GROUP,
    version: "v1",
    kind: "Recheck",
    plural: "rechecks",
};

const NS: &str = "bench-recheck";

/// The Secret every parent reads.
const SHARED: &str = "shared";

/// How often the shared Secret is touched.
const WAVE_EVERY: Duration = Duration::from_secs(2);

/// The definition: one ConfigMap per parent, which names the shared Secret it read.
fn definition() -> String {
    let kind = ParentKind {
        group: GROUP,
        kind: "Recheck",
        plural: "rechecks",
    };
    let lookup = format!(
        "  lookups:\n    - name: shared\n      apiVersion: v1\n      kind: Secret\n      nameTemplate: {SHARED}\n"
    );
    let config = child(
        "config",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ parent.metadata.name }}\ndata:\n  greeting: {{ parent.spec.greeting | quote }}\n  shared: {{ lookups.shared.metadata.name | quote }}",
    );
    fixtures::definition(kind, &config, &lookup)
}

/// B2 on the definition idle, then while the shared Secret is touched, N parents
/// converged; records the keys `b2_recheck_*`.
pub(super) async fn run(
    client: &Client,
    dir: &Path,
    (n, samples): (usize, usize),
    results: &mut BTreeMap<&'static str, Value>,
) {
    let defs = dir.join("recheck-definitions");
    std::fs::create_dir_all(&defs).unwrap();
    std::fs::write(defs.join("rechecks.yaml"), definition()).unwrap();
    let kubeconfig = service_account_kubeconfig(client, "stencil", stencil_rbac(&defs), dir).await;
    namespace(client, NS).await;
    let secrets = Api::<Secret>::namespaced(client.clone(), NS);
    let shared: Secret = serde_json::from_value(json!({"metadata": {"name": SHARED}})).unwrap();
    secrets.create(&PostParams::default(), &shared).await.unwrap();
    let stencil = Controller::stencil(&defs, &kubeconfig, &root().join("target/bench/stencil-recheck.log"));
    let api = apps(client, NS, RECHECKS);
    until(
        "Stencil to serve the Recheck definition",
        Duration::from_secs(120),
        || async {
            api.list(&ListParams::default().limit(1)).await.is_ok()
                && stencil.metric("stencil_definitions{state=\"running\"}").await >= 1.0
        },
    )
    .await;
    let idle = sample(client, samples, "idle").await;
    record_latency(results, ["b2_recheck_idle_p50_ms", "b2_recheck_idle_p99_ms"], &idle);
    let mut observer = Observer::start(client, NS, RECHECKS).await;
    let names: Vec<String> = (0..n).map(|i| format!("recheck-{i}")).collect();
    create_parents(&api, &names, RECHECKS).await;
    // Each parent has one ConfigMap (the shared Secret is not Stencil's).
    let all = n + samples;
    observer.converged(all, all, Duration::from_secs(1800)).await;
    drop(observer);
    let passes_before = stencil.metric("controller_runtime_reconcile_total").await;
    let done = AtomicBool::new(false);
    let waves = AtomicUsize::new(0);
    let started = Instant::now();
    let ((), busy) = tokio::join!(touch_until(&secrets, &done, &waves), async {
        let busy = sample(client, samples, "busy").await;
        done.store(true, Ordering::Relaxed);
        busy
    });
    let passes = stencil.metric("controller_runtime_reconcile_total").await - passes_before;
    record_latency(results, ["b2_recheck_p50_ms", "b2_recheck_p99_ms"], &busy);
    results.insert("b2_recheck_n", json!(n));
    results.insert("b2_recheck_waves", json!(waves.load(Ordering::Relaxed)));
    results.insert(
        "b2_recheck_passes_per_s",
        json!(passes / started.elapsed().as_secs_f64()),
    );
    let p50 = |key: &str| results.get(key).and_then(Value::as_f64).unwrap_or(f64::NAN);
    let ratio = p50("b2_recheck_p50_ms") / p50("b2_recheck_idle_p50_ms");
    results.insert("b2_recheck_over_idle", json!(ratio));
    teardown(client, NS, RECHECKS).await;
    stencil.stop();
}

/// Touches the shared Secret every [`WAVE_EVERY`] until `done`, counting the touches.
async fn touch_until(secrets: &Api<Secret>, done: &AtomicBool, waves: &AtomicUsize) {
    while !done.load(Ordering::Relaxed) {
        let wave = waves.fetch_add(1, Ordering::Relaxed) + 1;
        let patch = Patch::Merge(json!({"metadata": {"annotations": {"bench.stencil.dev/wave": wave.to_string()}}}));
        secrets.patch(SHARED, &PatchParams::default(), &patch).await.unwrap();
        let next = Instant::now() + WAVE_EVERY;
        while !done.load(Ordering::Relaxed) && Instant::now() < next {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// Creates `samples` parents one by one, each timed from its create until its ConfigMap
/// exists.
async fn sample(client: &Client, samples: usize, prefix: &str) -> Vec<Duration> {
    let api = apps(client, NS, RECHECKS);
    let cms = Api::<ConfigMap>::namespaced(client.clone(), NS);
    let mut out = Vec::with_capacity(samples);
    for i in 0..samples {
        let name = format!("{prefix}-{i}");
        let started = Instant::now();
        api.create(&PostParams::default(), &app(&name, RECHECKS)).await.unwrap();
        while !matches!(cms.get_opt(&name).await, Ok(Some(_))) {
            assert!(
                started.elapsed() < Duration::from_secs(600),
                "{name} never got its ConfigMap"
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        out.push(started.elapsed());
    }
    out.sort();
    out
}
