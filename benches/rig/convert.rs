//! B10: the conversion webhook. The bundled website operator runs with its webhook on
//! loopback; one Website holds a field its v1alpha1 cannot (so every conversion takes
//! the lossless path, the costlier one). GETs at v1 (no conversion) and at v1alpha1
//! (one ConversionReview each) are timed one after another; the difference is what a
//! conversion adds, and Stencil's own histogram gives the time inside the webhook.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

use super::{Controller, free_port, kubeconfig_path, namespace, percentile, record_latency, root, stencil_bin, until};

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

/// Runs B10 with `samples` reads at each version.
pub(super) async fn run(client: &Client, dir: &Path, samples: usize, results: &mut BTreeMap<&'static str, Value>) {
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
    let _ = Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .delete(ns, &Default::default())
        .await;
    drop(stencil);
}
