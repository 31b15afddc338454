//! The authoring loop on the rig: `stencil new` writes a definition that validates, passes
//! its golden case and becomes Ready on a cluster as written; `kubectl wait` reads its
//! health through the kstatus conditions; a template that reads another child without
//! `dependsOn` waits for it instead of failing the parent.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{
    TestNamespace, child, client, condition, definition, run_tool, start_stencil, unique_group, wait_established,
    wait_for,
};
use kube::api::{Api, DeleteParams, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};

fn stencil(args: &[&str], dir: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_stencil"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run stencil")
}

fn ok(out: &std::process::Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn a_new_definition_validates_tests_and_becomes_ready_on_the_rig() {
    let scratch = tempfile::tempdir().unwrap();
    let group = unique_group();
    let new = ["new", "Cache", "--group", group.as_str(), "--dir", "cache"];
    ok(&stencil(&new, scratch.path()), "stencil new");
    let again = stencil(&new, scratch.path());
    assert_eq!(again.status.code(), Some(1), "a second run must refuse");
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("refusing to overwrite"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    // The directory as `stencil new` wrote it: the definition, its example parent and its
    // golden case. Only the definition is one; the rest is left out, not an error.
    ok(&stencil(&["validate", "cache"], scratch.path()), "stencil validate");
    let explicit = stencil(&["validate", "cache/example.yaml"], scratch.path());
    let said = String::from_utf8_lossy(&explicit.stdout);
    assert!(
        explicit.status.code() == Some(1) && said.contains("example.yaml:3:1") && said.contains("found"),
        "a file named on its own must hold definitions: {said}"
    );
    ok(&stencil(&["test", "cache/tests"], scratch.path()), "stencil test");

    let dir = scratch.path().join("cache");
    let client = client().await;
    let _stencil = start_stencil(std::slice::from_ref(&dir), false).await;
    wait_established(&client, &format!("caches.{group}")).await;
    let example: DynamicObject = serde_json::from_value(
        stencil::yaml::document(&std::fs::read_to_string(dir.join("example.yaml")).unwrap()).unwrap(),
    )
    .unwrap();
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, "v1", "Cache"), "caches");
    let caches: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    common::create_when_served(&caches, &example).await;
    wait_for("the example Cache to be Ready", Duration::from_secs(90), || async {
        let c = condition(&caches.get("example").await.ok()?.data, "Ready")?;
        (c["status"] == "True").then_some(())
    })
    .await;
    let waited = run_tool(
        "kubectl",
        &[
            "wait",
            "--for=condition=Ready",
            &format!("caches.{group}/example"),
            "-n",
            "default",
            "--timeout=60s",
        ],
    );
    assert!(waited.contains("condition met"), "{waited}");
    caches.delete("example", &DeleteParams::default()).await.unwrap();
}

#[tokio::test]
async fn reading_another_child_without_depends_on_waits_for_it_and_then_renders() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "reads").await;
    let group = unique_group();
    let db =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ parent.metadata.name }}-db\ndata:\n  host: db.internal";
    let app = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ parent.metadata.name }}-app\ndata:\n  host: {{ children.db.data.host }}";
    // `app` comes first and reads `db`, which does not exist on the first reconcile.
    let dir = tempfile::tempdir().unwrap();
    let text = definition(&group, &format!("{}{}", child("app", app), child("db", db)), "");
    std::fs::write(dir.path().join("d.yaml"), &text).unwrap();
    let validate = stencil(&["validate", "d.yaml"], dir.path());
    ok(&validate, "stencil validate");
    let hint = String::from_utf8_lossy(&validate.stderr);
    assert!(hint.contains("reads children.db without `dependsOn: [db]`"), "{hint}");
    let _stencil = start_stencil(&[dir.path().to_path_buf()], false).await;
    wait_established(&client, &format!("widgets.{group}")).await;
    let widgets: Api<DynamicObject> = common::widgets(&client, &group, &ns.name);
    let w: DynamicObject = serde_json::from_value(serde_json::json!({"apiVersion": format!("{group}/v1"),
        "kind": "Widget", "metadata": {"name": "w"}, "spec": {}}))
    .unwrap();
    common::create_when_served(&widgets, &w).await;
    wait_for("the widget Ready", Duration::from_secs(90), || async {
        let c = condition(&widgets.get("w").await.ok()?.data, "Ready")?;
        (c["status"] == "True").then_some(())
    })
    .await;
    let configmaps: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    let app = configmaps.get("w-app").await.unwrap();
    assert_eq!(app.data.unwrap()["host"], "db.internal");
    let parent = widgets.get("w").await.unwrap();
    assert!(
        condition(&parent.data, "Stalled").is_none_or(|c| c["status"] != "True"),
        "the parent never stalled: {:?}",
        parent.data["status"]
    );
}
