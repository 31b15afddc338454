//! B10: the conversion webhook. The bundled website operator runs with its webhook on
//! loopback; one Website holds a field its v1alpha1 cannot (so every conversion takes
//! the lossless path, the costlier one). GETs at v1 (no conversion) and at v1alpha1
//! (one ConversionReview each) are timed one after another; the difference is what a
//! conversion adds, and Stencil's own histogram gives the time inside the webhook. Then
//! N Websites (paused, so Stencil writes nothing for them) are listed whole at v1, the
//! storage version, and at v1alpha1 through the webhook: the time per object at each,
//! and Stencil's CPU per object converted.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

use super::{
    Controller, create_all, free_port, kubeconfig_path, namespace, percentile, record_latency, root, stencil_bin, until,
};

const GROUP: &str = "examples.stencil.dev";

fn sites(client: &Client, version: &str, ns: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, version, "Website"), "websites");
    Api::namespaced_with(client.clone(), ns, &ar)
}

async fn timed(api: &Api<DynamicObject>, samples: usize) -> Vec<Duration> {
    let mut out = Vec::with_capacity(samples);
    for _ in 0..samples {
        let started = Instant::now();
        api.get("docs").await.expect("read the Website");
        out.push(started.elapsed());
    }
    out.sort();
    out
}

/// The pure conversion of one Website, timed without a cluster: v1 → v1alpha1 (the
/// lossless path, with the conversion-data annotation) and back, mean ns per object.
fn pure(site: &Value, results: &mut BTreeMap<&'static str, Value>) {
    let path = root().join("operators/website.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let (defs, diagnostics) = stencil::compile::compile_file(&path.display().to_string(), &text);
    assert!(diagnostics.0.is_empty(), "{diagnostics}");
    let def = &defs[0];
    const ROUNDS: u32 = 2_000;
    let started = Instant::now();
    for _ in 0..ROUNDS {
        let old = stencil::convert::convert(def, site, "v1alpha1").expect("v1 to v1alpha1");
        stencil::convert::convert(def, &old, "v1").expect("and back");
    }
    let per_object = started.elapsed().as_nanos() as f64 / f64::from(2 * ROUNDS);
    results.insert("b10_convert_ns_per_object", json!(per_object.round()));
}

/// How many times each list is read.
const LIST_ROUNDS: u32 = 5;

/// Creates `n` paused copies of `site`.
async fn paused_copies(api: &Api<DynamicObject>, site: &DynamicObject, n: usize) {
    let copies = (0..n).map(|i| {
        let mut copy = site.clone();
        copy.metadata.name = Some(format!("site-{i}"));
        copy.metadata.annotations = Some([("stencil.dev/paused".to_string(), "true".to_string())].into());
        copy
    });
    create_all(api, copies, "the Websites").await;
}

/// Reads `api`'s list [`LIST_ROUNDS`] times; the mean time per object listed.
async fn per_object(api: &Api<DynamicObject>) -> Duration {
    let started = Instant::now();
    let mut objects = 0;
    for _ in 0..LIST_ROUNDS {
        objects += api
            .list(&ListParams::default())
            .await
            .expect("list the Websites")
            .items
            .len();
    }
    started.elapsed() / u32::try_from(objects.max(1)).unwrap_or(u32::MAX)
}

/// B10 at list scale over `n` paused Websites like `site`.
async fn lists(
    stencil: &Controller,
    (v1, old): (&Api<DynamicObject>, &Api<DynamicObject>),
    site: &DynamicObject,
    n: usize,
    results: &mut BTreeMap<&'static str, Value>,
) {
    paused_copies(v1, site, n).await;
    // Stencil's one pass of each (its Paused condition) ends before the CPU is counted.
    until("every Website to say Paused", Duration::from_secs(300), || async {
        let listed = v1
            .list(&ListParams::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default();
        let paused = |w: &DynamicObject| {
            w.data["status"]["conditions"]
                .as_array()
                .is_some_and(|c| c.iter().any(|c| c["type"] == "Paused"))
        };
        listed.iter().filter(|w| paused(w)).count() >= n
    })
    .await;
    let storage = per_object(v1).await;
    let cpu = stencil.cpu_seconds();
    let spoke = per_object(old).await;
    let cpu = stencil.cpu_seconds() - cpu;
    let objects = (n + 1) as f64 * f64::from(LIST_ROUNDS);
    let micros = |d: Duration| d.as_secs_f64() * 1e6;
    results.insert("b10_list_v1_us_per_object", json!(micros(storage)));
    results.insert("b10_list_converted_us_per_object", json!(micros(spoke)));
    results.insert("b10_list_ratio", json!(micros(spoke) / micros(storage)));
    results.insert("b10_list_webhook_cpu_us_per_object", json!(cpu * 1e6 / objects));
}

/// Runs B10 with `samples` reads at each version, and its lists over `n` Websites.
pub(super) async fn run(
    client: &Client,
    dir: &Path,
    (n, samples): (usize, usize),
    results: &mut BTreeMap<&'static str, Value>,
) {
    let defs = dir.join("conversion");
    std::fs::create_dir_all(&defs).unwrap();
    std::fs::copy(root().join("operators/website.yaml"), defs.join("website.yaml")).unwrap();
    let ns = "bench-convert";
    namespace(client, ns).await;
    let metrics = format!("127.0.0.1:{}", free_port());
    let port = free_port();
    let mut command = Command::new(stencil_bin());
    command
        .args(["run", "--no-cluster-definitions"])
        .arg(format!("--definitions={}", defs.display()))
        .arg(format!("--metrics-addr={metrics}"))
        .arg(format!("--webhook-addr=127.0.0.1:{port}"))
        .arg(format!("--webhook-url=https://127.0.0.1:{port}"))
        .arg(format!("--namespace={ns}"))
        .env("POD_NAMESPACE", ns)
        .env("RUST_LOG", "stencil=warn");
    let log = root().join("target/bench/stencil-convert.log");
    // The admin kubeconfig: the webhook's Secret is outside the bench's generated RBAC.
    let stencil = Controller::spawn(command, metrics, &kubeconfig_path(), &log);
    until("the website definition to serve", Duration::from_secs(60), || async {
        stencil.metric("stencil_definitions{state=\"running\"}").await >= 1.0
    })
    .await;
    let site: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{GROUP}/v1"), "kind": "Website",
        "metadata": {"name": "docs", "namespace": ns},
        "spec": {"content": {"index.html": "hi"}, "domains": ["docs.example.com", "www.docs.example.com"],
                 "tls": true, "ingressClassName": "nginx"}
    }))
    .unwrap();
    pure(&serde_json::to_value(&site).unwrap(), results);
    let v1 = sites(client, "v1", ns);
    let old = sites(client, "v1alpha1", ns);
    until("the Website to be created", Duration::from_secs(60), || async {
        v1.create(&PostParams::default(), &site).await.is_ok() || v1.get("docs").await.is_ok()
    })
    .await;
    until("the webhook to convert", Duration::from_secs(60), || async {
        old.get("docs").await.is_ok()
    })
    .await;
    let plain = timed(&v1, samples).await;
    let before = (
        stencil.metric("stencil_conversion_review_seconds_sum").await,
        stencil.metric("stencil_conversion_review_seconds_count").await,
    );
    let converted = timed(&old, samples).await;
    let after = (
        stencil.metric("stencil_conversion_review_seconds_sum").await,
        stencil.metric("stencil_conversion_review_seconds_count").await,
    );
    record_latency(results, ["b10_get_v1_p50_ms", "b10_get_v1_p99_ms"], &plain);
    record_latency(
        results,
        ["b10_get_converted_p50_ms", "b10_get_converted_p99_ms"],
        &converted,
    );
    let added = percentile(&converted, 0.5).as_secs_f64() - percentile(&plain, 0.5).as_secs_f64();
    results.insert("b10_added_p50_ms", json!(added * 1000.0));
    let reviews = after.1 - before.1;
    results.insert("b10_reviews", json!(reviews));
    results.insert(
        "b10_webhook_mean_ms",
        json!(if reviews > 0.0 {
            (after.0 - before.0) / reviews * 1000.0
        } else {
            f64::NAN
        }),
    );
    lists(&stencil, (&v1, &old), &site, n, results).await;
    let _ = Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .delete(ns, &Default::default())
        .await;
    drop(stencil);
}
