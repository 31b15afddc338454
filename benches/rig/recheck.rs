//! B2 while every parent is re-checked: the latency samples taken again while the bench
//! touches every parent's ConfigMap with an annotation, round after round, 32 at a time,
//! which wakes each parent as a relist of a child kind or a wave of resyncs would, with
//! nothing for Stencil to write. A new parent should not wait behind those passes:
//! `b2_recheck_p50_ms` against `b2_idle_p50_ms` (`b2_recheck_over_idle`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};

use super::{APPS, apps, count_children, latency, record_latency, until};

/// The annotation the bench touches.
const TOUCHED: &str = "bench.stencil.dev/touched";

/// Requests in flight while touching.
const IN_FLIGHT: usize = 32;

/// Samples B2 in `ns`, whose parents `names` are converged, while their ConfigMaps are
/// touched; the samples are deleted after.
pub(super) async fn run(
    client: &Client,
    ns: &str,
    (names, samples): (&[String], usize),
    results: &mut BTreeMap<&'static str, Value>,
) {
    let cms = Api::<ConfigMap>::namespaced(client.clone(), ns);
    let done = AtomicBool::new(false);
    let touched = AtomicUsize::new(0);
    let started = Instant::now();
    let ((), sampled) = tokio::join!(touch_until(&cms, names, (&done, &touched)), async {
        let sampled = latency(client, ns, samples, "recheck", APPS).await;
        done.store(true, Ordering::Relaxed);
        sampled
    });
    let rate = touched.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64();
    record_latency(results, ["b2_recheck_p50_ms", "b2_recheck_p99_ms"], &sampled);
    results.insert("b2_recheck_touches_per_s", json!(rate));
    for (ratio, of) in [
        ("b2_recheck_over_idle", "b2_recheck_p50_ms"),
        ("b2_busy_over_idle", "b2_busy_p50_ms"),
    ] {
        let value = |key: &str| results.get(key).and_then(Value::as_f64);
        if let (Some(s), Some(idle)) = (value(of), value("b2_idle_p50_ms")) {
            results.insert(ratio, json!(s / idle));
        }
    }
    remove_samples(client, ns, names.len(), samples).await;
}

/// Annotates each parent's ConfigMap, round after round, until `done`; counts the
/// patches answered.
async fn touch_until(cms: &Api<ConfigMap>, names: &[String], (done, touched): (&AtomicBool, &AtomicUsize)) {
    let mut round = 0u64;
    while !done.load(Ordering::Relaxed) {
        round += 1;
        let patch = Patch::Merge(json!({"metadata": {"annotations": {TOUCHED: round.to_string()}}}));
        let params = PatchParams::default();
        futures::stream::iter(names)
            .take_while(|_| futures::future::ready(!done.load(Ordering::Relaxed)))
            .map(|name| cms.patch(name, &params, &patch))
            .buffer_unordered(IN_FLIGHT)
            .for_each(|answer| {
                if answer.is_ok() {
                    touched.fetch_add(1, Ordering::Relaxed);
                }
                futures::future::ready(())
            })
            .await;
    }
}

/// Deletes the samples and waits until only the converged parents' children are left.
async fn remove_samples(client: &Client, ns: &str, n: usize, samples: usize) {
    let api = apps(client, ns, APPS);
    for i in 0..samples {
        let _ = api.delete(&format!("recheck-{i}"), &DeleteParams::default()).await;
    }
    until("the re-check samples to be gone", Duration::from_secs(600), || async {
        count_children(client, ns).await == 3 * n
    })
    .await;
}
