//! A definition written in CEL on the rig (`tests/golden/cel/definition.yaml`: children
//! written as objects, CEL rules): the API server takes what its objects render, a child
//! waits for the one it reads, readiness and status follow the live objects, an edit
//! that turns an `omit()` field on reaches the child, and a child whose `includeWhen`
//! stops holding is pruned with the child that depends on it; a `forEach` child follows
//! its list.

mod common;

use std::time::Duration;

use common::{TestNamespace, client, start_stencil, unique_group, wait_established, wait_for};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::networking::v1::Ingress;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
use stencil::definition::OperatorDefinition;

const TIMEOUT: Duration = Duration::from_secs(120);

/// The golden definition, served in `group`.
fn webapps(group: &str) -> OperatorDefinition {
    let text = std::fs::read_to_string("tests/golden/cel/definition.yaml").unwrap();
    stencil::yaml::document(&text.replace("cel.stencil.dev", group)).unwrap()
}

#[tokio::test]
async fn a_cel_definition_serves_its_objects_and_rules_on_the_rig() {
    let client = client().await;
    common::install_crd(&client, &stencil::crd::operator_definition_crd()).await;
    let group = unique_group();
    let name = format!("webapps.{group}");
    let defs: Api<OperatorDefinition> = Api::all(client.clone());
    defs.patch(
        &name,
        &PatchParams::apply("test").force(),
        &Patch::Apply(&webapps(&group)),
    )
    .await
    .expect("the OperatorDefinition CRD takes object children");
    let _stencil = start_stencil(&[], true).await;
    wait_established(&client, &name).await;
    let ns = TestNamespace::new(&client, "cel").await;
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, "v1", "WebApp"), "webapps");
    let apps: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns.name, &ar);
    let app = serde_json::from_value(json!({"apiVersion": format!("{group}/v1"), "kind": "WebApp",
        "metadata": {"name": "shop"}, "spec": {"replicas": 2, "labels": {"team": "store"}}}))
    .unwrap();
    let created = common::create_when_served(&apps, &app).await;

    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    let config = wait_for("the ConfigMap", TIMEOUT, || async {
        config_maps.get("shop-config").await.ok()
    })
    .await;
    let data = config.data.unwrap();
    assert_eq!(data["settings.json"], r#"{"image":"nginx:1.27","replicas":2}"#);
    let uid = created.metadata.uid.clone().unwrap();
    assert_eq!(data["token"].len(), 12, "random.seededString(12, uid) over {uid}");

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    let deployment = wait_for("the Deployment", TIMEOUT, || async {
        deployments.get("shop").await.ok()
    })
    .await;
    let spec = &deployment.spec;
    assert_eq!(spec.replicas, Some(2));
    assert_eq!(spec.paused, None, "omit() leaves `paused` out");
    let labels = deployment.metadata.labels.clone().unwrap();
    assert_eq!((labels["app"].as_str(), labels["team"].as_str()), ("shop", "store"));

    let holds = |object: &Value, type_: &str| common::condition(object, type_).is_some_and(|c| c["status"] == "True");
    let object = wait_for("the WebApp Ready with its CEL status", TIMEOUT, || async {
        let object = apps.get("shop").await.ok()?.data;
        holds(&object, "Ready").then_some(object)
    })
    .await;
    let status = &object["status"];
    assert_eq!(status["availableReplicas"], 2, "{status}");
    assert_eq!(status["endpoint"], Value::from(format!("shop.{}.svc", ns.name)));
    assert_eq!(status["size"], "small");
    assert!(holds(&object, "Serving"), "{status}");

    apps.patch(
        "shop",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"paused": true}})),
    )
    .await
    .unwrap();
    wait_for("the Deployment paused", TIMEOUT, || async {
        let d = deployments.get("shop").await.ok()?;
        (d.spec.paused == Some(true)).then_some(())
    })
    .await;

    let ingresses: Api<Ingress> = Api::namespaced(client.clone(), &ns.name);
    assert!(
        ingresses.get_opt("shop").await.unwrap().is_none(),
        "no host, no Ingress"
    );
    let host = json!({"spec": {"host": "shop.example.org"}});
    apps.patch("shop", &PatchParams::default(), &Patch::Merge(host))
        .await
        .unwrap();
    wait_for("the Ingress and the links it brings", TIMEOUT, || async {
        let links = config_maps.get_opt("shop-links").await.ok()??;
        ingresses.get_opt("shop").await.ok()?.map(|_| links)
    })
    .await;
    let no_host = json!({"spec": {"host": null}});
    apps.patch("shop", &PatchParams::default(), &Patch::Merge(no_host))
        .await
        .unwrap();
    wait_for("the Ingress and the links pruned", TIMEOUT, || async {
        let links = config_maps.get_opt("shop-links").await.ok()?;
        let ingress = ingresses.get_opt("shop").await.ok()?;
        (links.is_none() && ingress.is_none()).then_some(())
    })
    .await;

    let zones = json!({"spec": {"zones": ["east", "west"]}});
    apps.patch("shop", &PatchParams::default(), &Patch::Merge(zones))
        .await
        .unwrap();
    wait_for("a ConfigMap per zone, counted in the status", TIMEOUT, || async {
        config_maps.get_opt("shop-west").await.ok()??;
        config_maps.get_opt("shop-east").await.ok()??;
        (apps.get("shop").await.ok()?.data["status"]["zones"] == 2).then_some(())
    })
    .await;
    let east = json!({"spec": {"zones": ["east"]}});
    apps.patch("shop", &PatchParams::default(), &Patch::Merge(east))
        .await
        .unwrap();
    wait_for("the west zone's ConfigMap pruned", TIMEOUT, || async {
        let west = config_maps.get_opt("shop-west").await.ok()?;
        west.is_none().then_some(())
    })
    .await;
    assert!(config_maps.get_opt("shop-east").await.unwrap().is_some());
}
