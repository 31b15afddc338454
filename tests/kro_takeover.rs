//! Taking over from kro on the rig: instances kro served, with kro stopped and its CRD
//! handed over (`stencil.dev/adopt`), are served by the imported definition. Their
//! children keep their UIDs, an edit reaches them, and deleting an instance is not held
//! by the finalizer kro left on it.

mod common;

use common::kro::{TIMEOUT, apply};
use common::{TestNamespace, client, condition, start_stencil, unique_group, wait_for};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

/// An RGD in `group` with two resources, the second reading the first.
fn rgd(group: &str) -> Value {
    let text = format!(
        r#"
apiVersion: kro.run/v1alpha1
kind: ResourceGraphDefinition
metadata:
  name: takeover-{group}
spec:
  schema:
    apiVersion: v1alpha1
    kind: TakeoverApp
    group: {group}
    spec:
      greeting: string | default="hello"
    status:
      config: ${{config.metadata.name}}
  resources:
    - id: config
      template:
        apiVersion: v1
        kind: ConfigMap
        metadata:
          name: ${{schema.metadata.name}}-config
        data:
          greeting: ${{schema.spec.greeting}}
    - id: app
      template:
        apiVersion: apps/v1
        kind: Deployment
        metadata:
          name: ${{schema.metadata.name}}
        spec:
          replicas: 1
          selector:
            matchLabels:
              app: ${{schema.metadata.name}}
          template:
            metadata:
              labels:
                app: ${{schema.metadata.name}}
            spec:
              containers:
                - name: app
                  image: registry.example/app:1
                  env:
                    - name: CONFIG
                      value: ${{config.metadata.name}}
"#
    );
    stencil::yaml::documents(&text).unwrap().remove(0)
}

/// The UIDs of an instance's ConfigMap and Deployment, once both exist.
async fn children_uids(client: &Client, ns: &str, name: &str) -> (String, String) {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let deploys: Api<Deployment> = Api::namespaced(client.clone(), ns);
    wait_for(&format!("{name}'s children"), TIMEOUT, || async {
        let cm = cms.get_opt(&format!("{name}-config")).await.ok()??;
        let deploy = deploys.get_opt(name).await.ok()??;
        Some((cm.uid()?, deploy.uid()?))
    })
    .await
}

/// Whether Stencil's pass said the instance is ready (kro's own `Ready` says so too, for
/// another reason).
fn by_stencil(live: &Value) -> bool {
    condition(live, "Ready").is_some_and(|c| c["status"] == "True" && c["reason"] == "AllChildrenReady")
}

/// Waits until the instance `name` says `state` and holds `check`.
async fn served(api: &Api<DynamicObject>, name: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    wait_for(&format!("{name} {what}"), TIMEOUT, || async {
        let live = serde_json::to_value(api.get(name).await.ok()?).ok()?;
        (live["status"]["state"] == "ACTIVE" && check(&live)).then_some(live)
    })
    .await
}

#[tokio::test]
async fn stencil_takes_over_kros_instances_and_their_children() {
    let client = client().await;
    let build = common::kro::build();
    let group = unique_group();
    let ns = TestNamespace::new(&client, "kro-takeover").await;
    let rgd = rgd(&group);
    let instance = |name: &str| {
        json!({"apiVersion": format!("{group}/v1alpha1"), "kind": "TakeoverApp",
               "metadata": {"name": name, "namespace": ns.name}, "spec": {"greeting": "hi"}})
    };
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(&group, "v1alpha1", "TakeoverApp"),
        "takeoverapps",
    );
    let instances: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns.name, &resource);

    common::kro::install_crds(&client, &build).await;
    let before = {
        let _kro = common::kro::start(&build, "kro-takeover");
        apply(&client, &rgd, &ns.name).await;
        let mut uids = Vec::new();
        for name in ["kept", "gone"] {
            apply(&client, &instance(name), &ns.name).await;
            served(&instances, name, "served by kro", |_| true).await;
            uids.push(children_uids(&client, &ns.name, name).await);
        }
        uids
    };

    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let handover = json!({"metadata": {"annotations": {"stencil.dev/adopt": "true"}}});
    crds.patch(
        &format!("takeoverapps.{group}"),
        &PatchParams::default(),
        &Patch::Merge(&handover),
    )
    .await
    .unwrap();
    let text = rgd_text(&rgd);
    let translated = stencil::import_kro::import("rgd.yaml", &text).unwrap().remove(0);
    let dir = std::env::temp_dir().join(format!("kro-takeover-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("definition.yaml");
    std::fs::write(&path, &translated.text).unwrap();
    let _stencil = start_stencil(&[path], false).await;

    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    for (i, name) in ["kept", "gone"].into_iter().enumerate() {
        wait_for(&format!("{name}'s ConfigMap adopted"), TIMEOUT, || async {
            let cm = cms.get(&format!("{name}-config")).await.ok()?;
            cm.labels().contains_key("stencil.dev/parent-uid").then_some(())
        })
        .await;
        let live = served(&instances, name, "served by Stencil", by_stencil).await;
        assert_eq!(live["status"]["config"], format!("{name}-config"), "{live:#}");
        assert_eq!(
            children_uids(&client, &ns.name, name).await,
            before[i],
            "{name}'s children are the objects kro made"
        );
    }

    let edit = json!({"spec": {"greeting": "hello again"}});
    instances
        .patch("kept", &PatchParams::default(), &Patch::Merge(&edit))
        .await
        .unwrap();
    wait_for("the edit reaches the ConfigMap", TIMEOUT, || async {
        let cm = cms.get("kept-config").await.ok()?;
        (cm.data?.get("greeting")? == "hello again").then_some(())
    })
    .await;

    instances.delete("gone", &DeleteParams::default()).await.unwrap();
    wait_for("gone is deleted, kro's finalizer released", TIMEOUT, || async {
        instances.get_opt("gone").await.ok()?.is_none().then_some(())
    })
    .await;
    wait_for("gone's ConfigMap deleted", TIMEOUT, || async {
        cms.get_opt("gone-config").await.ok()?.is_none().then_some(())
    })
    .await;
    let kept = instances.get("kept").await.unwrap();
    assert!(
        kept.finalizers().iter().any(|f| f == "kro.run/finalizer"),
        "a parent that is not deleted keeps kro's finalizer: {:?}",
        kept.finalizers()
    );

    forget(&client, &rgd).await;
}

/// The RGD as the file `stencil import kro` reads.
fn rgd_text(rgd: &Value) -> String {
    stencil::yaml::to_string(rgd).unwrap()
}

/// Deletes the RGD, which keeps kro's finalizer now that kro is stopped, so that no kro a
/// later test starts serves it again.
async fn forget(client: &Client, rgd: &Value) {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kro.run", "v1alpha1", "ResourceGraphDefinition"),
        "resourcegraphdefinitions",
    );
    let rgds: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let name = rgd["metadata"]["name"].as_str().unwrap();
    let release = json!({"metadata": {"finalizers": null}});
    rgds.patch(name, &PatchParams::default(), &Patch::Merge(&release))
        .await
        .unwrap();
    rgds.delete(name, &DeleteParams::default()).await.unwrap();
}
