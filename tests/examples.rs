//! The main job as a new user runs it: every bundled definition in `operators/` runs in
//! one Stencil (with its conversion webhook), every object in `examples/` is applied, and
//! each one settles: a parent of a definition's own kind reports `Ready=True`, and an
//! object a decorator decorates gets its children. The group is renamed per run and each
//! object moves into the test's namespace (cluster-scoped ones get a unique name), so
//! runs never meet.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use common::{TestNamespace, client, once_served, unique_group, wait_for};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::{ApiResource, Scope};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use stencil::compile::CompiledDefinition;

const SETTLE: Duration = Duration::from_secs(120);

/// `dir`'s YAML files with the examples' group replaced by `group`, written into `into`.
fn renamed(dir: &str, group: &str, into: &std::path::Path) -> Vec<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path)
                .unwrap()
                .replace("examples.stencil.dev", group);
            let out = into.join(path.file_name().unwrap());
            std::fs::write(&out, text).unwrap();
            out
        })
        .collect()
}

/// The API resource and scope of `obj`'s kind, once the API server serves it.
async fn resource_of(client: &Client, obj: &Value) -> (ApiResource, Scope) {
    let (group, version) = match obj["apiVersion"].as_str().unwrap().split_once('/') {
        Some((g, v)) => (g.to_string(), v.to_string()),
        None => (String::new(), obj["apiVersion"].as_str().unwrap().to_string()),
    };
    let gvk = GroupVersionKind::gvk(&group, &version, obj["kind"].as_str().unwrap());
    wait_for(&format!("{gvk:?} to be served"), SETTLE, || async {
        let (ar, caps) = kube::discovery::pinned_kind(client, &gvk).await.ok()?;
        Some((ar, caps.scope))
    })
    .await
}

fn api(client: &Client, ar: &ApiResource, ns: Option<&str>) -> Api<DynamicObject> {
    match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, ar),
        None => Api::all_with(client.clone(), ar),
    }
}

/// How many objects of the definition's child kinds carry the parent's UID label.
async fn children_of(client: &Client, def: &CompiledDefinition, uid: &str) -> usize {
    let selector = format!("{}={uid}", stencil::labels::PARENT_UID);
    let mut found = 0;
    for gvk in def.child_kinds.iter().flatten() {
        let kind = GroupVersionKind::gvk(&gvk.group, &gvk.version, &gvk.kind);
        let Ok((ar, _)) = kube::discovery::pinned_kind(client, &kind).await else {
            continue;
        };
        let list = Api::<DynamicObject>::all_with(client.clone(), &ar)
            .list(&ListParams::default().labels(&selector))
            .await;
        found += list.map(|l| l.items.len()).unwrap_or(0);
    }
    found
}

#[tokio::test]
async fn every_bundled_example_settles_under_the_bundled_definitions() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "examples").await;
    let group = unique_group();
    let dir = tempfile::tempdir().unwrap();
    let definitions = renamed("operators", &group, dir.path());
    let compiled: Vec<CompiledDefinition> = definitions
        .iter()
        .flat_map(|path| {
            let text = std::fs::read_to_string(path).unwrap();
            let (defs, diagnostics) = stencil::compile::compile_file(&path.display().to_string(), &text);
            assert!(diagnostics.0.is_empty(), "{}: {diagnostics}", path.display());
            defs
        })
        .collect();
    let webhook = common::loopback_webhook(&ns.name, "webhook-cert");
    let _stencil = common::start_stencil_with(&definitions, false, Some(webhook)).await;

    // The secret the SecretPropagation example copies, in the namespace it names.
    let source = json!({"metadata": {"name": "registry-credentials"}, "stringData": {"token": "t"}});
    Api::<Secret>::namespaced(client.clone(), &ns.name)
        .create(&PostParams::default(), &serde_json::from_value(source).unwrap())
        .await
        .unwrap();

    let examples = tempfile::tempdir().unwrap();
    let mut applied: Vec<(DynamicObject, ApiResource, Option<String>)> = Vec::new();
    for path in renamed("examples", &group, examples.path()) {
        let text = std::fs::read_to_string(&path).unwrap();
        let mut obj = stencil::yaml::document(&text).unwrap();
        let (ar, scope) = resource_of(&client, &obj).await;
        let namespace = match scope {
            Scope::Namespaced => {
                obj["metadata"]["namespace"] = ns.name.clone().into();
                Some(ns.name.clone())
            }
            Scope::Cluster => {
                let name = format!("{}-{}", ns.name, obj["metadata"]["name"].as_str().unwrap());
                obj["metadata"]["name"] = name.into();
                None
            }
        };
        if let Some(source) = obj.pointer_mut("/spec/source/namespace") {
            *source = ns.name.clone().into();
        }
        let name = obj["metadata"]["name"].as_str().unwrap().to_string();
        let target = api(&client, &ar, namespace.as_deref());
        let (params, patch) = (PatchParams::apply("stencil-test"), Patch::Apply(&obj));
        let created = once_served(|| target.patch(&name, &params, &patch))
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        applied.push((created, ar, namespace));
    }

    let definitions_by_kind: BTreeMap<(String, String), &CompiledDefinition> = compiled
        .iter()
        .map(|d| ((d.parent.group.clone(), d.parent.kind.clone()), d))
        .collect();
    for (obj, ar, namespace) in &applied {
        let key = (ar.group.clone(), ar.kind.clone());
        let def = definitions_by_kind
            .get(&key)
            .unwrap_or_else(|| panic!("no bundled definition for example {}/{}", ar.kind, obj.name_any()));
        let what = format!("example {} {} to settle", ar.kind, obj.name_any());
        if def.spec.crd.is_some() {
            let target = api(&client, ar, namespace.as_deref());
            let status = wait_for(&what, SETTLE, || async {
                let live = target.get(&obj.name_any()).await.ok()?;
                let ready = common::condition(&live.data, "Ready")?;
                (ready["status"] == "True").then_some(ready)
            })
            .await;
            assert_eq!(status["status"], "True");
        } else {
            let uid = obj.uid().unwrap();
            let count = wait_for(&what, SETTLE, || async {
                let n = children_of(&client, def, &uid).await;
                (n > 0).then_some(n)
            })
            .await;
            assert!(count > 0);
        }
    }

    // Cluster-scoped examples go while Stencil still runs, so their teardown completes.
    for (obj, ar, namespace) in applied.iter().filter(|(_, _, ns)| ns.is_none()) {
        let target = api(&client, ar, namespace.as_deref());
        let _ = target.delete(&obj.name_any(), &DeleteParams::default()).await;
        wait_for(&format!("{} {} to go", ar.kind, obj.name_any()), SETTLE, || async {
            target.get_opt(&obj.name_any()).await.ok()?.is_none().then_some(())
        })
        .await;
    }
}
