//! Storage migration on the rig: a definition's storage version moves and every object
//! is stored anew at it, through the cluster's StorageVersionMigration or Stencil's own
//! rewrite (checked by reading etcd past the API server), `storedVersions` is pruned and
//! the old version can go; a rewrite killed midway resumes without starting over.

mod common;

use std::time::Duration;

use common::{TestNamespace, client, spawn_stencil_env, unique_group, wait_established, wait_for};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(60);

/// A whole migration: through the cluster, the controller manager's migrator, loaded by
/// the rest of the suite running beside it, took over 60 s on a fresh rig.
const MIGRATION_TIMEOUT: Duration = Duration::from_secs(180);

fn object(value: Value) -> DynamicObject {
    serde_json::from_value(value).unwrap()
}

/// A two-version definition whose versions share a schema, storing at `storage`.
fn widgets(group: &str, storage: &str, versions: &[&str]) -> String {
    let versions: String = versions
        .iter()
        .map(|v| {
            format!(
                "      - name: {v}\n        storage: {}\n        schema:\n          openAPIV3Schema:\n            type: object\n            properties:\n              spec: {{type: object, properties: {{size: {{type: integer}}}}}}\n              status: {{type: object, x-kubernetes-preserve-unknown-fields: true}}\n",
                *v == storage
            )
        })
        .collect();
    format!(
        "apiVersion: stencil.dev/v1alpha1\nkind: OperatorDefinition\nmetadata:\n  name: widgets.{group}\nspec:\n  parent:\n    apiVersion: {group}/{storage}\n    kind: Widget\n  crd:\n    names: {{plural: widgets}}\n    versions:\n{versions}  children:\n    - name: cm\n      template: |\n        apiVersion: v1\n        kind: ConfigMap\n        metadata:\n          name: {{{{ parent.metadata.name }}}}\n        data:\n          size: {{{{ parent.spec.size | string | quote }}}}\n"
    )
}

#[tokio::test]
async fn a_storage_version_switch_migrates_every_object_through_the_cluster_and_prunes_stored_versions() {
    storage_version_switch(stencil::migrate::Method::Auto).await;
}

#[tokio::test]
async fn a_storage_version_switch_migrates_every_object_by_rewrites_and_prunes_stored_versions() {
    storage_version_switch(stencil::migrate::Method::Rewrite).await;
}

/// The apiVersion etcd holds each of `names` at, read past the API server.
async fn stored_at(group: &str, ns: &str, names: impl Iterator<Item = String>) -> Vec<String> {
    let mut versions = Vec::new();
    for name in names {
        let obj = common::stored_in_etcd(&format!("/registry/{group}/widgets/{ns}/{name}"))
            .await
            .unwrap_or_else(|| panic!("etcd has no {ns}/{name}"));
        versions.push(obj["apiVersion"].as_str().unwrap_or_default().to_string());
    }
    versions
}

/// Five Widgets stored at v1; the definition switches storage to v2; every object ends
/// up stored at v2 in etcd (by `method`), `storedVersions` is pruned, and v1 can go.
async fn storage_version_switch(method: stencil::migrate::Method) {
    let client = client().await;
    let ns = TestNamespace::new(&client, "migrate").await;
    let group = unique_group();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("widgets.yaml");
    std::fs::write(&file, widgets(&group, "v1", &["v1", "v2"])).unwrap();
    let stencil = common::start_stencil_options(stencil::runtime::Options {
        definitions: vec![dir.path().to_path_buf()],
        cluster_definitions: false,
        storage_migration: method,
        ..Default::default()
    })
    .await;
    let crd_name = format!("widgets.{group}");
    wait_established(&client, &crd_name).await;
    let v1: Api<DynamicObject> = common::widgets(&client, &group, &ns.name);
    for i in 0..5 {
        let w = object(json!({"apiVersion": format!("{group}/v1"), "kind": "Widget",
            "metadata": {"name": format!("w{i}"), "namespace": ns.name}, "spec": {"size": i}}));
        common::create_when_served(&v1, &w).await;
    }
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let stored = |c: &CustomResourceDefinition| c.status.as_ref().and_then(|s| s.stored_versions.clone());
    assert_eq!(
        stored(&crds.get(&crd_name).await.unwrap()),
        Some(vec!["v1".to_string()])
    );

    let names = || (0..5).map(|i| format!("w{i}"));
    let v1_only = vec![format!("{group}/v1"); 5];
    assert_eq!(stored_at(&group, &ns.name, names()).await, v1_only);

    std::fs::write(&file, widgets(&group, "v2", &["v1", "v2"])).unwrap();
    wait_for("storedVersions to be pruned to v2", MIGRATION_TIMEOUT, || async {
        let crd = crds.get(&crd_name).await.ok()?;
        let storage = crd.spec.versions.iter().find(|v| v.storage)?.name.clone();
        (storage == "v2" && stored(&crd) == Some(vec!["v2".to_string()])).then_some(())
    })
    .await;
    let v2_only = vec![format!("{group}/v2"); 5];
    assert_eq!(
        stored_at(&group, &ns.name, names()).await,
        v2_only,
        "etcd holds every object at v2"
    );
    let rewrites = stencil
        .take_writes()
        .iter()
        .filter(|w| w.starts_with("PUT") && w.contains("/widgets/"))
        .count();
    match method {
        stencil::migrate::Method::Auto => assert_eq!(rewrites, 0, "the cluster migrated, not Stencil"),
        stencil::migrate::Method::Rewrite => assert_eq!(rewrites, 5, "Stencil rewrote each object"),
    }

    // Nothing is stored at v1 any more, so dropping it is not a breaking change.
    std::fs::write(&file, widgets(&group, "v2", &["v2"])).unwrap();
    wait_for("v1 to be dropped from the CRD", TIMEOUT, || async {
        let crd = crds.get(&crd_name).await.ok()?;
        (crd.spec.versions.len() == 1).then_some(())
    })
    .await;
    let ar2 = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, "v2", "Widget"), "widgets");
    let v2: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns.name, &ar2);
    let all = wait_for("the widgets to be served at v2", TIMEOUT, || async {
        v2.list(&Default::default()).await.ok().filter(|l| l.items.len() == 5)
    })
    .await;
    let mut sizes: Vec<i64> = all
        .items
        .iter()
        .filter_map(|w| w.data["spec"]["size"].as_i64())
        .collect();
    sizes.sort();
    assert_eq!(sizes, vec![0, 1, 2, 3, 4], "every object survived the switch");
}

#[tokio::test]
async fn a_rewrite_killed_midway_resumes_without_starting_over() {
    const N: usize = 40;
    let client = client().await;
    let ns = TestNamespace::new(&client, "resume").await;
    let group = unique_group();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("widgets.yaml");
    std::fs::write(&file, widgets(&group, "v1", &["v1", "v2"])).unwrap();
    let crd_name = format!("widgets.{group}");
    let v1: Api<DynamicObject> = common::widgets(&client, &group, &ns.name);
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    {
        let _first = common::start_stencil(&[dir.path().to_path_buf()], false).await;
        wait_established(&client, &crd_name).await;
        for i in 0..N {
            let w = object(json!({"apiVersion": format!("{group}/v1"), "kind": "Widget",
                "metadata": {"name": format!("w{i}"), "namespace": ns.name}, "spec": {"size": i}}));
            common::create_when_served(&v1, &w).await;
        }
        wait_for("every child", TIMEOUT, || async {
            let managed = kube::api::ListParams::default().labels("app.kubernetes.io/managed-by=stencil");
            (cms.list(&managed).await.ok()?.items.len() == N).then_some(())
        })
        .await;
        // Every status written too, so that the next Stencil has nothing to write but
        // the migration.
        wait_for("every parent Ready", TIMEOUT, || async {
            (common::count_ready(&v1).await == N).then_some(())
        })
        .await;
    }

    // The storage moves to v2. A Stencil that dies before its 21st write: the CRD, the
    // record of the switch, then eighteen rewrites. The definition keeps serving its
    // parents at v1, so their children's ownerReferences do not change and the migrating
    // Stencil has nothing else to write.
    let switched = widgets(&group, "v2", &["v1", "v2"]).replace(
        &format!("    apiVersion: {group}/v2\n    kind: Widget"),
        &format!("    apiVersion: {group}/v1\n    kind: Widget"),
    );
    assert!(switched.contains(&format!("apiVersion: {group}/v1\n    kind: Widget")));
    std::fs::write(&file, switched).unwrap();
    let args = vec![
        format!("--definitions={}", dir.path().display()),
        "--no-cluster-definitions".to_string(),
        "--storage-migration=rewrite".to_string(),
    ];
    let kubeconfig = common::kubeconfig_path();
    let abort = [("STENCIL_FAULT_ABORT_AFTER_WRITES", "20".to_string())];
    let mut crashing = spawn_stencil_env(&args, &kubeconfig, dir.path().join("a.log"), &abort);
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    while crashing.child.try_wait().unwrap().is_none() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the migrating Stencil never reached its write limit"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let record = |c: &CustomResourceDefinition| {
        c.metadata
            .annotations
            .as_ref()?
            .get("stencil.dev/storage-switched-at")
            .cloned()
    };
    let kept = record(&crds.get(&crd_name).await.unwrap());
    assert!(
        kept.as_deref().is_some_and(|r| r.starts_with("v2-") && r.contains(':')),
        "the switch is recorded: {kept:?}"
    );
    // What the first Stencil rewrote carries a resourceVersion past the switch.
    let since: u64 = kept.unwrap().rsplit_once(':').unwrap().1.parse().unwrap();
    let listed = v1.list(&Default::default()).await.unwrap();
    let past = |w: &DynamicObject| {
        w.metadata
            .resource_version
            .as_deref()
            .and_then(|rv| rv.parse::<u64>().ok())
            > Some(since)
    };
    let done_before = listed.items.iter().filter(|w| past(w)).count();
    assert!(done_before > 0, "the first Stencil rewrote some before it died");

    let healthy = spawn_stencil_env(&args, &kubeconfig, dir.path().join("b.log"), &[]);
    wait_for("storedVersions to be pruned to v2", TIMEOUT, || async {
        let crd = crds.get(&crd_name).await.ok()?;
        let stored = crd.status?.stored_versions?;
        (stored == vec!["v2".to_string()]).then_some(())
    })
    .await;
    let rewrites = healthy.requests(&["PUT"]).await;
    println!("the first Stencil rewrote {done_before} of {N}, the restarted one {rewrites}");
    assert_eq!(
        rewrites,
        (N - done_before) as f64,
        "the restarted Stencil rewrites only what the first one had not: nothing twice, nothing left"
    );
    let names = (0..N).map(|i| format!("w{i}"));
    let v2_only = vec![format!("{group}/v2"); N];
    assert_eq!(
        stored_at(&group, &ns.name, names).await,
        v2_only,
        "etcd holds every object at v2"
    );
    assert_eq!(
        record(&crds.get(&crd_name).await.unwrap()),
        None,
        "the record goes with the migration"
    );
}
