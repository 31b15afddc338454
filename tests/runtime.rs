//! The runtime core on the rig: a definition whose child kind Stencil may not list says
//! so on its status without holding up the next definition, and lookups of two kinds that
//! share a name in different groups each find their own object.

mod common;

use std::time::{Duration, Instant};

use common::{
    CM, TestNamespace, child, client, definition, install_crd, run_tool, spawn_stencil, start_stencil,
    token_kubeconfig, unique_group, wait_for,
};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
use stencil::definition::OperatorDefinition;

const TIMEOUT: Duration = Duration::from_secs(90);

const SECRET: &str = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {{ parent.metadata.name }}-secret\nstringData:\n  size: {{ parent.spec.size | quote }}";

/// The condition of `type_` on an OperatorDefinition, as (status, reason, message).
async fn definition_condition(
    defs: &Api<OperatorDefinition>,
    name: &str,
    type_: &str,
) -> Option<(String, String, String)> {
    let status = defs.get_status(name).await.ok()?.status?;
    let c = status.conditions.iter().find(|c| c.type_ == type_)?;
    Some((c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// Creates Widget `name` of `group` in `ns` with `spec.size`, once the kind is served,
/// and returns the Widgets of that namespace.
async fn create_widget(client: &kube::Client, group: &str, ns: &str, name: &str, size: i64) -> Api<DynamicObject> {
    let widgets: Api<DynamicObject> = common::widgets(client, group, ns);
    let widget: DynamicObject = serde_json::from_value(json!({"apiVersion": format!("{group}/v1"), "kind": "Widget",
        "metadata": {"name": name}, "spec": {"size": size}}))
    .unwrap();
    common::create_when_served(&widgets, &widget).await;
    widgets
}

/// The RBAC `stencil rbac` derives for every definition in `dir`, without any rule on
/// `forbidden` (a resource plural), bound to `namespace/sa`.
fn rbac_without(dir: &std::path::Path, name: &str, namespace: &str, sa: &str, forbidden: &str) -> Vec<Value> {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_stencil"))
        .args(["rbac", "--definitions"])
        .arg(dir)
        .args(["--name", name, "--service-account", &format!("{namespace}/{sa}")])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut docs: Vec<Value> = stencil::yaml::documents(&String::from_utf8(out.stdout).unwrap()).unwrap();
    let mut removed = 0;
    for doc in &mut docs {
        if let Some(rules) = doc.get_mut("rules").and_then(Value::as_array_mut) {
            for rule in rules.iter_mut() {
                if let Some(resources) = rule.get_mut("resources").and_then(Value::as_array_mut) {
                    let before = resources.len();
                    resources.retain(|r| r != forbidden);
                    removed += before - resources.len();
                }
            }
            rules.retain(|r| r["resources"].as_array().is_none_or(|a| !a.is_empty()));
        }
    }
    assert!(removed > 0, "the derived RBAC had no rule on {forbidden}");
    docs
}

#[tokio::test]
async fn a_forbidden_child_kind_is_reported_and_does_not_hold_up_the_next_definition() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "forbidden").await;
    let (group_a, group_b) = (unique_group(), unique_group());
    let text_a = definition(&group_a, &child("secret", SECRET), "");
    let text_b = definition(&group_b, &child("cm", CM), "");
    let dir = tempfile::tempdir().unwrap();
    let both = dir.path().join("both");
    std::fs::create_dir(&both).unwrap();
    std::fs::write(both.join("a.yaml"), &text_a).unwrap();
    std::fs::write(both.join("b.yaml"), &text_b).unwrap();

    // A ServiceAccount with what `stencil rbac` derives for both definitions, less Secrets.
    let sa = "stencil";
    run_tool("kubectl", &["create", "serviceaccount", sa, "--namespace", &ns.name]);
    let role = format!("stencil-forbidden-{}", &group_a[..9]);
    let rbac = dir.path().join("rbac.yaml");
    std::fs::write(
        &rbac,
        stencil::yaml::to_stream(&rbac_without(&both, &role, &ns.name, sa, "secrets")).unwrap(),
    )
    .unwrap();
    run_tool("kubectl", &["apply", "-f", rbac.to_str().unwrap()]);
    let token = run_tool(
        "kubectl",
        &["create", "token", sa, "--namespace", &ns.name, "--duration", "1h"],
    );
    let kubeconfig = token_kubeconfig(token.trim(), dir.path());
    install_crd(&client, &stencil::crd::operator_definition_crd()).await;
    // Only this test's definitions: another test's leftover one would share the status
    // writer and the registry.
    let selector = format!("stencil-test={}", &group_a[..9]);
    let stencil = spawn_stencil(
        &[format!("--definition-selector={selector}")],
        &kubeconfig,
        dir.path().join("stencil.log"),
    );
    wait_for("stencil to be ready", TIMEOUT, || async {
        (stencil.get("/readyz").await?.0 == 200).then_some(())
    })
    .await;

    let defs: Api<OperatorDefinition> = Api::all(client.clone());
    let apply = |text: &str| {
        let mut resource: OperatorDefinition = stencil::yaml::document(text).unwrap();
        let (key, value) = selector.split_once('=').unwrap();
        resource.metadata.labels = Some([(key.to_string(), value.to_string())].into());
        let defs = defs.clone();
        async move {
            let name = resource.metadata.name.clone().unwrap();
            defs.patch(&name, &PatchParams::apply("test"), &Patch::Apply(&resource))
                .await
                .unwrap();
            name
        }
    };
    let started = Instant::now();
    let name_a = apply(&text_a).await;
    let (_, _, message) = wait_for("definition A to report Forbidden", TIMEOUT, || async {
        definition_condition(&defs, &name_a, "Ready")
            .await
            .filter(|(s, r, _)| s == "False" && r == "Forbidden")
    })
    .await;
    let forbidden_after = started.elapsed();
    assert!(message.contains("secrets") && message.contains("list"), "{message}");

    let started = Instant::now();
    let name_b = apply(&text_b).await;
    wait_for("definition B to serve", TIMEOUT, || async {
        definition_condition(&defs, &name_b, "Ready")
            .await
            .filter(|(s, _, _)| s == "True")
    })
    .await;
    let serving_after = started.elapsed();
    create_widget(&client, &group_b, &ns.name, "b", 2).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    wait_for("definition B's child", TIMEOUT, || async {
        cms.get_opt("b-cm").await.ok()?
    })
    .await;
    eprintln!(
        "Forbidden reported {:.1} s after the definition; the next definition served {:.1} s after it",
        forbidden_after.as_secs_f64(),
        serving_after.as_secs_f64()
    );
    assert!(
        forbidden_after < Duration::from_secs(10),
        "Forbidden took {forbidden_after:?}; log:\n{}",
        stencil.logs()
    );
    assert!(
        serving_after < Duration::from_secs(10),
        "the next definition took {serving_after:?}; log:\n{}",
        stencil.logs()
    );
    let _ = defs.delete(&name_a, &Default::default()).await;
    let _ = defs.delete(&name_b, &Default::default()).await;
    for kind in ["ClusterRole", "ClusterRoleBinding"] {
        let _ = run_tool("kubectl", &["delete", kind, &role, "--ignore-not-found"]);
    }
}

fn gateway_crd(group: &str) -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("gateways.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"plural": "gateways", "singular": "gateway", "kind": "Gateway", "listKind": "GatewayList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .unwrap()
}

#[tokio::test]
async fn lookups_of_one_kind_name_in_two_groups_each_find_their_own() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "gateways").await;
    let (gw1, gw2) = (unique_group(), unique_group());
    install_crd(&client, &gateway_crd(&gw1)).await;
    install_crd(&client, &gateway_crd(&gw2)).await;
    let group = unique_group();
    let lookups = format!(
        "  lookups:\n    - name: first\n      apiVersion: {gw1}/v1\n      kind: Gateway\n      nameTemplate: edge\n\
         \x20   - name: second\n      apiVersion: {gw2}/v1\n      kind: Gateway\n      nameTemplate: edge\n"
    );
    let reader = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ parent.metadata.name }}-cm\ndata:\n  first: {{ lookups.first.spec.owner | quote }}\n  second: {{ lookups.second.spec.owner | quote }}";
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("d.yaml"),
        definition(&group, &child("cm", reader), &lookups),
    )
    .unwrap();
    let _stencil = start_stencil(&[dir.path().to_path_buf()], false).await;

    let gateway = |g: &str, owner: &str| -> DynamicObject {
        serde_json::from_value(json!({"apiVersion": format!("{g}/v1"), "kind": "Gateway",
            "metadata": {"name": "edge", "namespace": ns.name}, "spec": {"owner": owner}}))
        .unwrap()
    };
    let api = |g: &str| {
        let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(g, "v1", "Gateway"), "gateways");
        Api::<DynamicObject>::namespaced_with(client.clone(), &ns.name, &ar)
    };
    let params = PatchParams::apply("test");
    api(&gw1)
        .patch("edge", &params, &Patch::Apply(&gateway(&gw1, "gateway-api")))
        .await
        .unwrap();
    api(&gw2)
        .patch("edge", &params, &Patch::Apply(&gateway(&gw2, "istio")))
        .await
        .unwrap();
    create_widget(&client, &group, &ns.name, "w", 1).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    let data = |first: &'static str, second: &'static str| {
        let cms = cms.clone();
        async move {
            let cm = cms.get_opt("w-cm").await.ok()??;
            let d = cm.data?;
            (d.get("first").map(String::as_str) == Some(first) && d.get("second").map(String::as_str) == Some(second))
                .then_some(())
        }
    };
    wait_for("each lookup to read its own group's Gateway", TIMEOUT, || {
        data("gateway-api", "istio")
    })
    .await;
    // A change to the second group's object re-renders its reader, and only that value moves.
    api(&gw2)
        .patch("edge", &params, &Patch::Apply(&gateway(&gw2, "istio-2")))
        .await
        .unwrap();
    wait_for("the second lookup's change to arrive", TIMEOUT, || {
        data("gateway-api", "istio-2")
    })
    .await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for g in [&gw1, &gw2] {
        let _ = crds.delete(&format!("gateways.{g}"), &Default::default()).await;
    }
}

#[tokio::test]
async fn a_watch_stops_when_no_definition_uses_its_kind_any_more() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "release").await;
    let group = unique_group();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("d.yaml");
    std::fs::write(&file, definition(&group, &child("cm", CM), "")).unwrap();
    let stencil = start_stencil(&[dir.path().to_path_buf()], false).await;
    let watched = || stencil.metric_sum("stencil_watched_kinds", "");
    wait_for("the parent and child watches", TIMEOUT, || async {
        (watched() == 2.0).then_some(())
    })
    .await;
    // Positive control: the watches serve, a parent gets its child.
    create_widget(&client, &group, &ns.name, "r", 1).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    wait_for("the child", TIMEOUT, || async { cms.get_opt("r-cm").await.ok()? }).await;
    std::fs::remove_file(&file).unwrap();
    wait_for("every watch to stop once the definition is gone", TIMEOUT, || async {
        (watched() == 0.0).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_first_list_slower_than_the_sync_timeout_completes_and_serves() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "slowlist").await;
    let group = unique_group();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("d.yaml"), definition(&group, &child("cm", CM), "")).unwrap();
    // Every first list takes longer than a millisecond: each attempt reports the wait,
    // and the list it started goes on, so a later attempt finds it complete.
    let _stencil = common::start_stencil_options(stencil::runtime::Options {
        definitions: vec![dir.path().to_path_buf()],
        // Only its own file: an admin serving every cluster definition would rewrite the
        // status of the definition the forbidden-kind test runs beside it.
        cluster_definitions: false,
        sync_timeout: Duration::from_millis(1),
        ..Default::default()
    })
    .await;
    create_widget(&client, &group, &ns.name, "slow", 1).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    wait_for(
        "the child of a definition whose lists outlast the sync timeout",
        TIMEOUT,
        || async { cms.get_opt("slow-cm").await.ok()? },
    )
    .await;
}

#[tokio::test]
async fn a_child_kind_removed_while_stencil_was_down_is_pruned_after_the_restart() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "forgotten").await;
    let group = unique_group();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("d.yaml");
    let both = format!("{}{}", child("cm", CM), child("secret", SECRET));
    std::fs::write(&file, definition(&group, &both, "")).unwrap();
    let stencil = start_stencil(&[dir.path().to_path_buf()], false).await;
    create_widget(&client, &group, &ns.name, "w", 1).await;
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), &ns.name);
    wait_for("the Secret child", TIMEOUT, || async {
        secrets.get_opt("w-secret").await.ok()?
    })
    .await;

    // Stencil stops; the Secret child leaves the definition; Stencil starts again knowing
    // nothing in memory of the kind it wrote before.
    drop(stencil);
    std::fs::write(&file, definition(&group, &child("cm", CM), "")).unwrap();
    let _stencil = start_stencil(&[dir.path().to_path_buf()], false).await;
    wait_for("the Secret of the removed child to be pruned", TIMEOUT, || async {
        secrets.get_opt("w-secret").await.ok()?.is_none().then_some(())
    })
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    assert!(
        cms.get_opt("w-cm").await.unwrap().is_some(),
        "the remaining child stays"
    );
}

#[tokio::test]
async fn with_namespace_a_child_outside_the_served_namespaces_is_refused_on_the_parent() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "served").await;
    let other = TestNamespace::new(&client, "unserved").await;
    let group = unique_group();
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = CM.replace("metadata:\n", &format!("metadata:\n  namespace: {}\n", other.name));
    let children = format!("{}{}", child("cm", CM), child("elsewhere", &elsewhere));
    let extra = format!("  allowedNamespaces: [{}]\n", other.name);
    std::fs::write(dir.path().join("d.yaml"), definition(&group, &children, &extra)).unwrap();
    let _stencil = common::start_stencil_options(stencil::runtime::Options {
        definitions: vec![dir.path().to_path_buf()],
        cluster_definitions: false,
        namespaces: vec![ns.name.clone()],
        ..Default::default()
    })
    .await;
    let widgets = create_widget(&client, &group, &ns.name, "w", 1).await;
    let message = wait_for("the parent to say why", TIMEOUT, || async {
        let w = widgets.get("w").await.ok()?;
        let ready = common::condition(&w.data, "Ready")?;
        (ready["status"] == "False").then(|| ready["message"].as_str().unwrap_or_default().to_string())
    })
    .await;
    assert!(
        message.contains(&format!("`{}`, which this Stencil does not serve", other.name)),
        "{message}"
    );
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &other.name);
    assert!(
        cms.get_opt("w-cm").await.unwrap().is_none(),
        "nothing is written where it could not be pruned"
    );
}
