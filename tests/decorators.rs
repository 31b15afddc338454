//! Decorators and selector lookups on the rig: children attached to objects Stencil does
//! not own (Namespaces, StatefulSets, ConfigMaps), which it never writes; parents that
//! start and stop matching; two decorators of one kind; a decorated kind that appears
//! later; and a selector lookup whose membership changes.

mod common;

use std::time::Duration;

use common::{TestNamespace, client, start_stencil, unique_group, wait_for};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, LimitRange, Namespace, ResourceQuota, Secret, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(90);

fn operator(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("operators/{name}.yaml"))
}

async fn merge<K>(api: &Api<K>, name: &str, patch: Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("patch {name}: {e}"));
}

/// Waits until `get` finds the object, or (with `present` false) until it is gone.
async fn presence<K, F, Fut>(what: &str, present: bool, get: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<Option<K>, kube::Error>>,
{
    let what = format!("{what} to be {}", if present { "there" } else { "gone" });
    wait_for(&what, TIMEOUT, || {
        let attempt = get();
        async move { matches!(attempt.await, Ok(o) if o.is_some() == present).then_some(()) }
    })
    .await
}

/// A Namespace that deletes itself when dropped.
struct OwnNamespace {
    api: Api<Namespace>,
    name: String,
}

impl OwnNamespace {
    async fn create(client: &Client, name: &str, labels: Value) -> OwnNamespace {
        let api: Api<Namespace> = Api::all(client.clone());
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap();
        api.create(&PostParams::default(), &ns).await.expect("create namespace");
        OwnNamespace {
            api,
            name: name.to_string(),
        }
    }
}

impl Drop for OwnNamespace {
    fn drop(&mut self) {
        let (api, name) = (self.api.clone(), self.name.clone());
        tokio::spawn(async move {
            let _ = api.delete(&name, &DeleteParams::background()).await;
        });
    }
}

fn suffix() -> String {
    unique_group().split('.').next().unwrap_or("x").to_string()
}

/// Every write Stencil made to one object: its path, or its status or finalize
/// subresource.
fn writes_to(stencil: &common::Stencil, path: &str) -> Vec<String> {
    stencil
        .writes
        .lock()
        .unwrap()
        .iter()
        .filter(|w| {
            let p = w.split_once(' ').map_or("", |(_, p)| p);
            let p = p.split('?').next().unwrap_or_default();
            p == path || p == format!("{path}/status") || p == format!("{path}/finalize")
        })
        .cloned()
        .collect()
}

#[tokio::test]
async fn namespace_defaults_decorate_a_labelled_namespace_without_ever_writing_it() {
    let client = client().await;
    let stencil = start_stencil(&[operator("namespace-defaults")], false).await;
    let name = format!("team-{}", suffix());
    let ns = OwnNamespace::create(&client, &name, json!({"stencil.dev/team": "payments"})).await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let created_rv = namespaces.get(&name).await.unwrap().resource_version();
    let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), &name);
    let limits: Api<LimitRange> = Api::namespaced(client.clone(), &name);
    let policies: Api<NetworkPolicy> = Api::namespaced(client.clone(), &name);
    presence("the quota", true, || quotas.get_opt("team-quota")).await;
    presence("the limits", true, || limits.get_opt("team-defaults")).await;
    presence("the default-deny policy", true, || policies.get_opt("default-deny")).await;
    let rv = || async { namespaces.get(&name).await.unwrap().resource_version() };
    assert_eq!(rv().await, created_rv, "decorating left the Namespace as it was");

    // An annotation tunes the quota.
    merge(
        &namespaces,
        &name,
        json!({"metadata": {"annotations": {"examples.stencil.dev/quota-pods": "7"}}}),
    )
    .await;
    wait_for("the quota to follow the annotation", TIMEOUT, || async {
        let q = quotas.get("team-quota").await.ok()?;
        let pods = q.spec?.hard?.get("pods")?.0.clone();
        (pods == "7").then_some(())
    })
    .await;
    let annotated_rv = namespaces.get(&name).await.unwrap().resource_version();

    // Removing the label removes the children.
    merge(
        &namespaces,
        &name,
        json!({"metadata": {"labels": {"stencil.dev/team": null}}}),
    )
    .await;
    presence("the quota", false, || quotas.get_opt("team-quota")).await;
    presence("the limits", false, || limits.get_opt("team-defaults")).await;
    presence("the default-deny policy", false, || policies.get_opt("default-deny")).await;
    let unlabelled_rv = namespaces.get(&name).await.unwrap().resource_version();

    // Labelling it again brings them back.
    merge(
        &namespaces,
        &name,
        json!({"metadata": {"labels": {"stencil.dev/team": "payments"}}}),
    )
    .await;
    presence("the quota again", true, || quotas.get_opt("team-quota")).await;
    let live = namespaces.get(&name).await.unwrap();
    assert!(
        live.finalizers().iter().all(|f| !f.starts_with("stencil.dev")),
        "a decorator puts no finalizer on its parent: {:?}",
        live.finalizers()
    );
    assert!(
        live.labels().keys().all(|k| k != "stencil.dev/parent-uid"),
        "a decorator labels only its children"
    );
    assert!(
        live.managed_fields()
            .iter()
            .all(|m| m.manager.as_deref() != Some("stencil")),
        "Stencil never wrote the Namespace: {:?}",
        live.managed_fields()
    );
    assert_ne!(annotated_rv, unlabelled_rv, "only the test's own patches changed it");
    let path = format!("/api/v1/namespaces/{name}");
    assert_eq!(
        writes_to(&stencil, &path),
        Vec::<String>::new(),
        "no write to the parent"
    );
    let labelled = stencil.reads.lock().unwrap().iter().any(|r| {
        r.starts_with("/api/v1/namespaces?")
            && (r.contains("labelSelector=stencil.dev%2Fteam") || r.contains("labelSelector=stencil.dev/team"))
    });
    assert!(
        labelled,
        "the Namespace watch selects on the server: {:?}",
        stencil
            .reads
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.starts_with("/api/v1/namespaces?"))
            .collect::<Vec<_>>()
    );
    drop(ns);
}

#[tokio::test]
async fn service_per_pod_follows_the_replicas_and_the_annotation() {
    let client = client().await;
    let stencil = start_stencil(&[operator("service-per-pod")], false).await;
    let ns = TestNamespace::new(&client, "spp").await;
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), &ns.name);
    let services: Api<Service> = Api::namespaced(client.clone(), &ns.name);
    let set: StatefulSet = serde_json::from_value(json!({
        "metadata": {"name": "kafka", "annotations": {"stencil.dev/service-per-pod": "true"}},
        "spec": {"replicas": 2, "serviceName": "kafka", "selector": {"matchLabels": {"app": "kafka"}},
            "template": {"metadata": {"labels": {"app": "kafka"}},
                "spec": {"containers": [{"name": "k", "image": "kafka", "ports": [{"containerPort": 9092}]}]}}}
    }))
    .unwrap();
    sets.create(&PostParams::default(), &set).await.unwrap();
    presence("kafka-0", true, || services.get_opt("kafka-0")).await;
    presence("kafka-1", true, || services.get_opt("kafka-1")).await;
    let svc = services.get("kafka-1").await.unwrap();
    let spec = svc.spec.unwrap();
    assert_eq!(
        spec.selector.unwrap()["statefulset.kubernetes.io/pod-name"],
        "kafka-1",
        "each Service selects its pod"
    );
    assert_eq!(spec.ports.unwrap()[0].port, 9092);

    merge(&sets, "kafka", json!({"spec": {"replicas": 3}})).await;
    presence("kafka-2", true, || services.get_opt("kafka-2")).await;
    merge(&sets, "kafka", json!({"spec": {"replicas": 1}})).await;
    presence("kafka-2", false, || services.get_opt("kafka-2")).await;
    presence("kafka-1", false, || services.get_opt("kafka-1")).await;
    assert!(services.get_opt("kafka-0").await.unwrap().is_some(), "kafka-0 stays");

    // An unannotated StatefulSet is not decorated; losing the annotation undecorates.
    merge(
        &sets,
        "kafka",
        json!({"metadata": {"annotations": {"stencil.dev/service-per-pod": null}}}),
    )
    .await;
    presence("kafka-0", false, || services.get_opt("kafka-0")).await;
    let path = format!("/apis/apps/v1/namespaces/{}/statefulsets/kafka", ns.name);
    assert_eq!(
        writes_to(&stencil, &path),
        Vec::<String>::new(),
        "no write to the parent"
    );
}

#[tokio::test]
async fn secret_propagation_follows_namespace_membership_and_the_source() {
    let client = client().await;
    let _stencil = start_stencil(&[operator("secret-propagation")], false).await;
    let s = suffix();
    let group = format!("g{s}");
    let source_ns = OwnNamespace::create(&client, &format!("src-{s}"), json!({})).await;
    let first = OwnNamespace::create(
        &client,
        &format!("one-{s}"),
        json!({"examples.stencil.dev/secret-group": group}),
    )
    .await;
    let secrets = |ns: &str| -> Api<Secret> { Api::namespaced(client.clone(), ns) };
    let source: Secret =
        serde_json::from_value(json!({"metadata": {"name": "creds"}, "stringData": {"token": "one"}})).unwrap();
    secrets(&source_ns.name)
        .create(&PostParams::default(), &source)
        .await
        .unwrap();
    let ar = kube::core::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk("examples.stencil.dev", "v1", "SecretPropagation"),
        "secretpropagations",
    );
    let props: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let prop: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "examples.stencil.dev/v1", "kind": "SecretPropagation",
        "metadata": {"name": format!("p-{s}")},
        "spec": {"source": {"namespace": source_ns.name, "name": "creds"}, "group": group}
    }))
    .unwrap();
    common::create_when_served(&props, &prop).await;
    let token = |ns: String| {
        let api = secrets(&ns);
        async move {
            let s = api.get_opt("creds").await.ok()??;
            let t = s.data?.get("token")?.0.clone();
            Some(String::from_utf8(t).unwrap_or_default())
        }
    };
    wait_for("the first copy", TIMEOUT, || token(first.name.clone())).await;

    // A namespace that joins gets the copy; the source namespace never does.
    let second = OwnNamespace::create(
        &client,
        &format!("two-{s}"),
        json!({"examples.stencil.dev/secret-group": group}),
    )
    .await;
    wait_for("the copy in a new namespace", TIMEOUT, || token(second.name.clone())).await;
    assert_eq!(
        secrets(&source_ns.name)
            .get("creds")
            .await
            .unwrap()
            .labels()
            .get("stencil.dev/child"),
        None,
        "the source is never overwritten"
    );

    // A changed source propagates.
    merge(
        &secrets(&source_ns.name),
        "creds",
        json!({"stringData": {"token": "two"}}),
    )
    .await;
    for ns in [&first.name, &second.name] {
        wait_for("the new token everywhere", TIMEOUT, || async {
            (token(ns.clone()).await? == "two").then_some(())
        })
        .await;
    }

    // A namespace that leaves loses its copy; the other keeps it.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    merge(
        &namespaces,
        &first.name,
        json!({"metadata": {"labels": {"examples.stencil.dev/secret-group": null}}}),
    )
    .await;
    let left = secrets(&first.name);
    presence("the copy in the namespace that left", false, || left.get_opt("creds")).await;
    assert!(token(second.name.clone()).await.is_some(), "the member keeps its copy");
    wait_for("the propagation to be Ready with one copy", TIMEOUT, || async {
        let p = props.get(&format!("p-{s}")).await.ok()?;
        let ready = common::condition(&serde_json::to_value(&p).ok()?, "Ready")?;
        (ready["status"] == "True" && p.data["status"]["copies"] == 1).then_some(())
    })
    .await;
    props
        .delete(&format!("p-{s}"), &DeleteParams::background())
        .await
        .unwrap();
}

/// A decorator of ConfigMaps labelled `key=yes` in `ns`, rendering `<parent>-<suffix>` and
/// `<parent>-shared` in `ns`.
fn configmap_decorator(name: &str, key: &str, own: &str) -> String {
    format!(
        "apiVersion: stencil.dev/v1alpha1
kind: OperatorDefinition
metadata:
  name: {name}
spec:
  parent: {{apiVersion: v1, kind: ConfigMap}}
  decorate:
    selector: {{matchLabels: {{{key}: \"yes\"}}}}
  children:
    - name: own
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata:
          name: {{{{ parent.metadata.name }}}}-{own}
        data:
          from: {{{{ parent.data.value | default('none') | quote }}}}
    - name: shared
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata:
          name: {{{{ parent.metadata.name }}}}-shared
        data:
          by: {own}
"
    )
}

#[tokio::test]
async fn two_decorators_of_one_kind_keep_their_own_children_and_report_a_shared_name() {
    let client = client().await;
    common::install_crd(&client, &stencil::crd::operator_definition_crd()).await;
    let ns = TestNamespace::new(&client, "deco2").await;
    let s = suffix();
    let key = format!("d{s}.example.com/decorate");
    let defs: Api<stencil::definition::OperatorDefinition> = Api::all(client.clone());
    let mut names = Vec::new();
    for own in ["a", "b"] {
        let name = format!("{own}-{s}.decorators.example.com");
        let text = configmap_decorator(&name, &key, own);
        let resource: stencil::definition::OperatorDefinition = stencil::yaml::document(&text).unwrap();
        defs.patch(&name, &PatchParams::apply("test"), &Patch::Apply(&resource))
            .await
            .unwrap();
        names.push(name);
    }
    let stencil = start_stencil(&[], true).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    let parent: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "p", "labels": {&key: "yes"}}, "data": {"value": "1"}}))
            .unwrap();
    cms.create(&PostParams::default(), &parent).await.unwrap();
    // A ConfigMap that does not match is left alone.
    let other: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "q"}})).unwrap();
    cms.create(&PostParams::default(), &other).await.unwrap();
    presence("a's child", true, || cms.get_opt("p-a")).await;
    presence("b's child", true, || cms.get_opt("p-b")).await;
    presence("the shared child", true, || cms.get_opt("p-shared")).await;
    // One holds the shared object and counts a ready parent; the other reports the
    // conflict on its definition's status. (Both may create it in the same instant; the
    // last writer's label decides, and the loser sees it on its next reconcile.)
    let status = |name: String| {
        let defs = defs.clone();
        async move { serde_json::to_value(defs.get(&name).await.ok()?).ok() }
    };
    let holder = wait_for("one holder and one conflict", TIMEOUT, || async {
        let holder = cms.get("p-shared").await.ok()?.labels()["stencil.dev/definition"].clone();
        let loser = names.iter().find(|n| **n != holder)?.clone();
        let (h, l) = (status(holder.clone()).await?, status(loser).await?);
        let failing = l.pointer("/status/failingParents/0")?;
        let loses = l["status"]["decoratedParents"] == 1
            && failing["reason"] == "Conflict"
            && failing["parent"] == format!("ConfigMap {}/p", ns.name);
        let holds = h["status"]["decoratedParents"] == 1 && h["status"]["readyParents"] == 1;
        (loses && holds).then_some(holder)
    })
    .await;

    assert_eq!(
        stencil.metric_sum("stencil_decorated_ready_parents{", &holder),
        1.0,
        "the counts are metrics too"
    );

    // A change to the parent re-renders both; neither prunes the other's child.
    merge(&cms, "p", json!({"data": {"value": "2"}})).await;
    for child in ["p-a", "p-b"] {
        wait_for("both children to follow", TIMEOUT, || async {
            (cms.get(child).await.ok()?.data?.get("from")? == "2").then_some(())
        })
        .await;
    }
    assert_eq!(cms.get("p-shared").await.unwrap().data.unwrap()["by"], holder[..1]);
    assert!(cms.get_opt("q-a").await.unwrap().is_none(), "q does not match");

    // The parent stops matching: both decorators remove their own children.
    merge(&cms, "p", json!({"metadata": {"labels": {&key: null}}})).await;
    for child in ["p-a", "p-b", "p-shared"] {
        presence(child, false, || cms.get_opt(child)).await;
    }
    let path = format!("/api/v1/namespaces/{}/configmaps/p", ns.name);
    assert_eq!(
        writes_to(&stencil, &path),
        Vec::<String>::new(),
        "no write to the parent"
    );
    for name in &names {
        defs.delete(name, &DeleteParams::default()).await.unwrap();
    }
}

#[tokio::test]
async fn a_decorator_of_a_kind_that_appears_later_starts_once_it_is_served() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "later").await;
    let group = unique_group();
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "apiVersion: stencil.dev/v1alpha1
kind: OperatorDefinition
metadata:
  name: gadget-notes.{group}
spec:
  parent: {{apiVersion: {group}/v1, kind: Gadget}}
  decorate: {{}}
  children:
    - name: note
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata:
          name: {{{{ parent.metadata.name }}}}-note
        data:
          colour: {{{{ parent.spec.colour | quote }}}}
"
    );
    std::fs::write(dir.path().join("d.yaml"), text).unwrap();
    let _stencil = start_stencil(&[dir.path().to_path_buf()], false).await;
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("gadgets.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}
    });
    common::install_crd(&client, &serde_json::from_value(crd).unwrap()).await;
    let ar = kube::core::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk(&group, "v1", "Gadget"),
        "gadgets",
    );
    let gadgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns.name, &ar);
    let gadget: DynamicObject = serde_json::from_value(json!({"apiVersion": format!("{group}/v1"), "kind": "Gadget",
        "metadata": {"name": "g"}, "spec": {"colour": "teal"}}))
    .unwrap();
    common::create_when_served(&gadgets, &gadget).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    wait_for("the decorated Gadget's note", TIMEOUT, || async {
        (cms.get_opt("g-note").await.ok()??.data?.get("colour")? == "teal").then_some(())
    })
    .await;
    let live = gadgets.get("g").await.unwrap();
    assert!(live.finalizers().is_empty(), "no finalizer on a decorated object");
    assert!(live.data.get("status").is_none(), "no status written");
}
