//! The scale subresource on the rig: `kubectl scale` drives a parent whose CRD version
//! declares `scale`, and the child follows.

mod common;

use std::time::Duration;

use common::{TestNamespace, client, run_tool, unique_group, wait_established, wait_for};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, DynamicObject};
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(90);

#[tokio::test]
async fn kubectl_scale_drives_a_website_and_its_deployment_follows() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "scale").await;
    // The bundled website in a group of its own, so no other test shares its CRD.
    let group = unique_group();
    let dir = tempfile::tempdir().unwrap();
    let website = dir.path().join("website.yaml");
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/operators/website.yaml")).unwrap();
    std::fs::write(&website, text.replace("examples.stencil.dev", &group)).unwrap();
    let webhook = common::loopback_webhook(&ns.name, "webhook-cert");
    let _stencil = common::start_stencil_with(&[website], false, Some(webhook)).await;
    let resource = format!("websites.{group}/docs");
    wait_established(&client, &format!("websites.{group}")).await;
    let ar = kube::core::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk(&group, "v1", "Website"),
        "websites",
    );
    let sites: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns.name, &ar);
    let site: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{group}/v1"), "kind": "Website", "metadata": {"name": "docs"},
        "spec": {"replicas": 1, "content": {"index.html": "hello"}}
    }))
    .unwrap();
    common::create_when_served(&sites, &site).await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    let replicas = |want: i32| {
        let deployments = deployments.clone();
        async move {
            let d = deployments.get_opt("docs").await.ok()??;
            (d.spec.replicas == Some(want)).then_some(())
        }
    };
    wait_for("the Deployment with one replica", TIMEOUT, || replicas(1)).await;

    run_tool("kubectl", &["scale", "-n", &ns.name, &resource, "--replicas=4"]);
    wait_for("the Deployment to follow kubectl scale", TIMEOUT, || replicas(4)).await;
    let parent = sites.get("docs").await.unwrap();
    assert_eq!(
        parent.data["spec"]["replicas"], 4,
        "the scale subresource wrote spec.replicas"
    );
    let scale = run_tool(
        "kubectl",
        &["get", "-n", &ns.name, &resource, "--subresource=scale", "-o", "json"],
    );
    let scale: serde_json::Value = serde_json::from_str(&scale).unwrap();
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["spec"]["replicas"], 4);
}
