//! The proof that the chart's RBAC is enough: install the chart into the rig, run
//! `stencil run` outside the cluster with a token of the chart's ServiceAccount, reconcile
//! a bundled example to Ready, scrape the metrics, then remove one rule and see the
//! missing permission reported.

mod common;

use std::time::Duration;

use common::{TestNamespace, client, run_tool, token_kubeconfig, wait_for};
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(90);

#[tokio::test]
async fn the_charts_rbac_is_enough_and_a_missing_rule_is_reported() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "install").await;
    let release = format!("st{:06x}", rand::random::<u32>() & 0xffffff);
    let chart = format!("{}/charts/stencil", env!("CARGO_MANIFEST_DIR"));
    run_tool(
        "helm",
        &[
            "install",
            &release,
            &chart,
            "--namespace",
            &ns.name,
            "--set",
            "bundledOperators=true",
            "--set",
            "clusterDefinitions=false",
            "--wait=false",
        ],
    );
    let sa = format!("{release}-stencil");
    let token = run_tool(
        "kubectl",
        &["create", "token", &sa, "--namespace", &ns.name, "--duration", "1h"],
    );
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = token_kubeconfig(token.trim(), dir.path());
    // Only the website operator, confined to this namespace, so other tests' parents are
    // left to their own Stencil.
    let defs = dir.path().join("definitions");
    std::fs::create_dir(&defs).unwrap();
    std::fs::copy(
        format!("{}/operators/website.yaml", env!("CARGO_MANIFEST_DIR")),
        defs.join("website.yaml"),
    )
    .unwrap();
    let webhook = common::free_port();
    let args = vec![
        format!("--definitions={}", defs.display()),
        format!("--namespace={}", ns.name),
        "--no-cluster-definitions".to_string(),
        // The website's v1alpha1 converts: the webhook's certificate goes into the
        // chart's Secret, which the chart's Role alone lets Stencil keep.
        format!("--webhook-addr=127.0.0.1:{webhook}"),
        format!("--webhook-url=https://127.0.0.1:{webhook}"),
        format!("--webhook-secret={release}-stencil-webhook-cert"),
    ];
    let env = [("POD_NAMESPACE", ns.name.clone())];
    let stencil = common::spawn_stencil_env(&args, &kubeconfig, dir.path().join("stencil.log"), &env);

    let ready = wait_for("/readyz", TIMEOUT, || async {
        stencil.get("/readyz").await.filter(|(s, _)| *s == 200)
    })
    .await;
    assert_eq!(ready.1, "ok");
    assert_eq!(stencil.get("/healthz").await.unwrap().0, 200);

    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("examples.stencil.dev", "v1", "Website"),
        "websites",
    );
    let sites: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns.name, &ar);
    let site = |name: &str| {
        json!({"apiVersion": "examples.stencil.dev/v1", "kind": "Website",
        "metadata": {"name": name}, "spec": {"domains": [format!("{name}.example.com")], "content": {"index.html": "hi"}}})
    };
    let params = PatchParams::apply("test");
    let docs = Patch::Apply(site("docs"));
    common::once_served(|| sites.patch("docs", &params, &docs))
        .await
        .unwrap();
    wait_for(
        "the Website to be Ready as the chart's ServiceAccount",
        TIMEOUT,
        || async {
            let s = sites.get("docs").await.ok()?;
            let conditions = s.data.pointer("/status/conditions")?.as_array()?.clone();
            conditions
                .iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
                .then_some(())
        },
    )
    .await;
    let sample = "controller_runtime_reconcile_total{controller=\"websites.examples.stencil.dev\",result=\"success\"}";
    let reconciles = wait_for("reconcile metrics", TIMEOUT, || async {
        stencil.metric(sample).await.filter(|n| *n > 0.0)
    })
    .await;
    assert!(reconciles >= 1.0);
    let (_, metrics) = stencil.get("/metrics").await.unwrap();
    for name in [
        "workqueue_adds_total",
        "controller_runtime_reconcile_time_seconds_bucket",
        "stencil_children_applied_total",
        "stencil_watched_kinds",
        "stencil_definitions",
    ] {
        assert!(metrics.contains(name), "/metrics lacks {name}");
    }

    // Take away the right to write Ingresses: the next Website's Ingress is refused, and
    // the refusal names the rule to add.
    let role = run_tool(
        "kubectl",
        &["get", "clusterrole", &format!("{release}-stencil"), "-o", "json"],
    );
    let mut role: Value = serde_json::from_str(&role).unwrap();
    let rules: Vec<Value> = role["rules"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["resources"][0] != "ingresses")
        .cloned()
        .collect();
    role["rules"] = Value::Array(rules);
    let file = dir.path().join("role.json");
    std::fs::write(&file, role.to_string()).unwrap();
    run_tool("kubectl", &["replace", "-f", file.to_str().unwrap()]);
    sites.patch("blog", &params, &Patch::Apply(site("blog"))).await.unwrap();
    let events: Api<Event> = Api::namespaced(client.clone(), &ns.name);
    wait_for("an event naming the missing rule", TIMEOUT, || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items.into_iter().find(|e| {
            e.message.as_deref().unwrap_or_default().contains("ingresses") && e.type_.as_deref() == Some("Warning")
        })
    })
    .await;
    wait_for("the log line naming the rule to add", TIMEOUT, || async {
        let logs = stencil.logs();
        (logs.contains("add the rule") && logs.contains("ingresses")).then_some(())
    })
    .await;
    run_tool("helm", &["uninstall", &release, "--namespace", &ns.name]);
}
