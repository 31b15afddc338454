//! CRD changes that could lose data, on the rig: a refused breaking change leaves the
//! CRD as it is, says why on the definition's status and keeps the last good version
//! serving; the annotation forces it.

mod common;

use std::time::Duration;

use common::{TestNamespace, child, client, definition, start_stencil, unique_group, wait_established, wait_for};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::json;
use stencil::definition::OperatorDefinition;

const TIMEOUT: Duration = Duration::from_secs(90);

/// A Widget definition whose spec has `size` and, when `tier`, a `tier` property.
fn widgets(group: &str, tier: bool, annotation: bool) -> OperatorDefinition {
    let tier = if tier { ", tier: {type: string}" } else { "" };
    let text = definition(
        group,
        &child(
            "cm",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ parent.metadata.name }}-cm\ndata:\n  size: {{ parent.spec.size | quote }}",
        ),
        "",
    )
    .replace(
        stencil_core::fixtures::OPEN_SPEC,
        &format!("spec: {{type: object, properties: {{size: {{type: integer}}{tier}}}}}"),
    );
    let mut def: OperatorDefinition = stencil::yaml::document(&text).unwrap();
    if annotation {
        def.metadata.annotations =
            Some([("stencil.dev/allow-breaking-changes".to_string(), "true".to_string())].into());
    }
    def
}

#[tokio::test]
async fn a_breaking_crd_change_is_refused_until_forced_and_the_last_good_version_serves() {
    let client = client().await;
    common::install_crd(&client, &stencil::crd::operator_definition_crd()).await;
    let group = unique_group();
    let name = format!("widgets.{group}");
    let defs: Api<OperatorDefinition> = Api::all(client.clone());
    let apply = |def: OperatorDefinition| {
        let defs = defs.clone();
        let name = name.clone();
        async move {
            defs.patch(&name, &PatchParams::apply("test").force(), &Patch::Apply(&def))
                .await
                .unwrap();
        }
    };
    apply(widgets(&group, true, false)).await;
    let _stencil = start_stencil(&[], true).await;
    wait_established(&client, &name).await;
    let ns = TestNamespace::new(&client, "schema").await;
    let ar = kube::core::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk(&group, "v1", "Widget"),
        "widgets",
    );
    let parents: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns.name, &ar);
    let w: DynamicObject = serde_json::from_value(json!({"apiVersion": format!("{group}/v1"), "kind": "Widget",
        "metadata": {"name": "w"}, "spec": {"size": 1, "tier": "gold"}}))
    .unwrap();
    common::create_when_served(&parents, &w).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    let size_is = |want: &'static str| {
        let cms = cms.clone();
        async move { (cms.get_opt("w-cm").await.ok()??.data?.get("size")? == want).then_some(()) }
    };
    wait_for("the child", TIMEOUT, || size_is("1")).await;

    // Removing `tier` would drop the stored value: refused, with the path on the status.
    apply(widgets(&group, false, false)).await;
    let ready = wait_for("the refusal on the status", TIMEOUT, || async {
        let d = serde_json::to_value(defs.get(&name).await.ok()?).ok()?;
        let c = common::condition(&d, "Ready")?;
        (c["reason"] == "BreakingSchemaChange").then_some(c)
    })
    .await;
    let message = ready["message"].as_str().unwrap();
    assert!(message.contains("v1: .spec.tier is removed"), "{message}");
    assert!(message.contains("allow-breaking-changes"), "{message}");
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let has_tier = || async {
        let crd = crds.get(&name).await.unwrap();
        let schema = crd.spec.versions[0].schema.clone().unwrap().open_api_v3_schema.unwrap();
        schema.properties.unwrap()["spec"]
            .properties
            .as_ref()
            .is_some_and(|p| p.contains_key("tier"))
    };
    assert!(has_tier().await, "the CRD is unchanged");
    // `stencil diff` says so before anyone runs it.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("widgets.yaml");
    std::fs::write(&file, stencil::yaml::to_string(&widgets(&group, false, false)).unwrap()).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_stencil"))
        .args(["diff", "--definition", file.to_str().unwrap()])
        .env("KUBECONFIG", common::kubeconfig_path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "a breaking CRD change is a change: {text}");
    assert!(text.contains(&format!("CRD {name}: BREAKING")), "{text}");
    assert!(text.contains("v1: .spec.tier is removed"), "{text}");
    // The last good version keeps serving.
    let bump = json!({"spec": {"size": 2}});
    parents
        .patch("w", &PatchParams::default(), &Patch::Merge(&bump))
        .await
        .unwrap();
    wait_for("the last good version to serve", TIMEOUT, || size_is("2")).await;

    // The annotation forces it.
    apply(widgets(&group, false, true)).await;
    wait_for("the forced change", TIMEOUT, || async {
        (!has_tier().await).then_some(())
    })
    .await;
    wait_for("the definition Ready again", TIMEOUT, || async {
        let d = serde_json::to_value(defs.get(&name).await.ok()?).ok()?;
        (common::condition(&d, "Ready")?["status"] == "True").then_some(())
    })
    .await;
    defs.delete(&name, &Default::default()).await.unwrap();
}

#[tokio::test]
async fn a_crd_stencil_did_not_install_is_never_written_until_handed_over() {
    let client = client().await;
    common::install_crd(&client, &stencil::crd::operator_definition_crd()).await;
    let group = unique_group();
    let name = format!("widgets.{group}");
    // A CRD of the same name, made by someone else (a Helm chart, a hand): no Stencil label.
    let theirs: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": name},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "integer"}, "tier": {"type": "string"}}},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}}))
    .unwrap();
    common::install_crd(&client, &theirs).await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let before = crds.get(&name).await.unwrap();
    let defs: Api<OperatorDefinition> = Api::all(client.clone());
    defs.patch(
        &name,
        &PatchParams::apply("test").force(),
        &Patch::Apply(&widgets(&group, true, false)),
    )
    .await
    .unwrap();
    let _stencil = start_stencil(&[], true).await;
    let ready = wait_for("the refusal on the status", TIMEOUT, || async {
        let d = serde_json::to_value(defs.get(&name).await.ok()?).ok()?;
        let c = common::condition(&d, "Ready")?;
        (c["reason"] == "CrdNotOurs").then_some(c)
    })
    .await;
    let message = ready["message"].as_str().unwrap();
    assert!(
        message.contains("was not installed by Stencil") && message.contains("stencil.dev/adopt"),
        "{message}"
    );
    let after = crds.get(&name).await.unwrap();
    assert_eq!(
        after.metadata.resource_version, before.metadata.resource_version,
        "the CRD was not written"
    );
    // Its owner hands it over: Stencil manages it from then on.
    crds.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {"stencil.dev/adopt": "true"}}})),
    )
    .await
    .unwrap();
    wait_for("Stencil to take the CRD over", TIMEOUT, || async {
        let crd = crds.get(&name).await.ok()?;
        let labels = crd.metadata.labels.unwrap_or_default();
        (labels.get("app.kubernetes.io/managed-by").map(String::as_str) == Some("stencil")).then_some(())
    })
    .await;
    defs.delete(&name, &Default::default()).await.unwrap();
}
