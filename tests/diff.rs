//! `stencil diff` and `stencil render --from-cluster` on the rig: an edit that adds a
//! child, changes a field and drops a child, across 20 parents, gives the exact counts
//! and kubectl diff's exit codes, with zero writes (the API server's own request counts
//! say so); `render --from-cluster` gives what the controller applied. Its own test
//! binary, so no other test writes while the writes are counted.

mod common;

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use common::{TestNamespace, child, client, count_ready, definition, spawn_stencil, unique_group, wait_established};
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams};
use serde_json::{Value, json};

const PARENTS: usize = 20;

fn cm(suffix: &str, data: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{{{ parent.metadata.name }}}}-{suffix}\ndata:\n  {data}"
    )
}

fn stencil(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stencil"))
        .args(args)
        .env("KUBECONFIG", common::kubeconfig_path())
        .output()
        .expect("run stencil")
}

/// Writes (or, with `dry_run`, dry runs) the API server has served on Widgets (creates,
/// updates, patches and applies) and ConfigMaps (patches and applies, what a diff would
/// send). The count is cluster-wide, so verbs other controllers use while earlier tests'
/// namespaces go are left out: the namespace controller's deletes (it retries the delete
/// of a terminating namespace's Widgets of every group), the garbage collector's, and the
/// root CA publisher's creates and updates. A delete by `stencil diff` would show in the
/// resource versions the test compares.
async fn writes(client: &Client, dry_run: bool) -> f64 {
    let text = client
        .request_text(http::Request::get("/metrics").body(Vec::new()).unwrap())
        .await
        .expect("the API server's metrics");
    let dry = if dry_run { "dry_run=\"All\"" } else { "dry_run=\"\"" };
    let verb = |l: &str, verbs: &[&str]| verbs.iter().any(|v| l.contains(&format!("verb=\"{v}\"")));
    text.lines()
        .filter(|l| l.starts_with("apiserver_request_total{") && l.contains(dry))
        .filter(|l| {
            (l.contains("resource=\"widgets\"") && verb(l, &["POST", "PUT", "PATCH", "APPLY"]))
                || (l.contains("resource=\"configmaps\"") && verb(l, &["PATCH", "APPLY"]))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn write_definition(dir: &Path, name: &str, group: &str, children: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, definition(group, children, "")).unwrap();
    path.display().to_string()
}

#[tokio::test]
async fn diff_counts_an_edit_across_twenty_parents_without_writing_and_render_reads_the_cluster() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "diff").await;
    let group = unique_group();
    let scratch = tempfile::tempdir().unwrap();
    let defs = scratch.path().join("defs");
    std::fs::create_dir_all(&defs).unwrap();
    let old_children = format!(
        "{}{}",
        child("keep", &cm("keep", "v: \"1\"")),
        child("dropped", &cm("dropped", "x: y"))
    );
    let old = write_definition(&defs, "widgets.yaml", &group, &old_children);
    let new_children = format!(
        "{}{}",
        child("keep", &cm("keep", "v: \"2\"")),
        child("added", &cm("added", "a: b"))
    );
    let new = write_definition(scratch.path(), "new.yaml", &group, &new_children);
    let broken = write_definition(scratch.path(), "broken.yaml", &group, &child("keep", "{{ oops"));

    let stencil_process = spawn_stencil(
        &[
            format!("--definitions={}", defs.display()),
            "--no-cluster-definitions".into(),
        ],
        &common::kubeconfig_path(),
        scratch.path().join("stencil.log"),
    );
    wait_established(&client, &format!("widgets.{group}")).await;
    let widgets: Api<DynamicObject> = common::widgets(&client, &group, &ns.name);
    for i in 0..PARENTS {
        let w: DynamicObject = serde_json::from_value(json!({"apiVersion": format!("{group}/v1"), "kind": "Widget",
            "metadata": {"name": format!("w{i}")}, "spec": {}}))
        .unwrap();
        common::create_when_served(&widgets, &w).await;
    }
    common::wait_for("every parent Ready", Duration::from_secs(120), || async {
        (count_ready(&widgets).await == PARENTS).then_some(())
    })
    .await;
    drop(stencil_process);

    // render --from-cluster gives what the controller applied.
    let rendered = stencil(&[
        "render",
        "--definition",
        &old,
        "--from-cluster",
        "widget/w3",
        "-n",
        &ns.name,
        "-o",
        "json",
    ]);
    assert!(
        rendered.status.success(),
        "{}",
        String::from_utf8_lossy(&rendered.stderr)
    );
    let rendered: Value = serde_json::from_slice(&rendered.stdout).unwrap();
    let configmaps: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    assert_eq!(rendered["children"].as_array().unwrap().len(), 2, "{rendered}");
    for desired in rendered["children"].as_array().unwrap() {
        let name = desired["metadata"]["name"].as_str().unwrap();
        let live = serde_json::to_value(configmaps.get(name).await.unwrap()).unwrap();
        assert!(
            stencil::applied::live_contains(&live, desired),
            "{name}: {desired} vs {live}"
        );
    }
    assert_eq!(
        rendered["status"]["conditions"][0]["reason"], "AllChildrenReady",
        "{rendered}"
    );

    let resource_versions = |list: Vec<k8s_openapi::api::core::v1::ConfigMap>| {
        list.into_iter()
            .map(|c| {
                (
                    c.metadata.name.unwrap_or_default(),
                    c.metadata.resource_version.unwrap_or_default(),
                )
            })
            .collect::<Vec<_>>()
    };
    let before = resource_versions(configmaps.list(&ListParams::default()).await.unwrap().items);
    let (writes_before, dry_before) = (writes(&client, false).await, writes(&client, true).await);

    let unchanged = stencil(&["diff", "--definition", &old, "-n", &ns.name]);
    let text = String::from_utf8_lossy(&unchanged.stdout);
    assert_eq!(
        unchanged.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&unchanged.stderr)
    );
    assert!(
        text.contains("20 parents: 0 children created, 0 updated, 0 recreated, 0 pruned"),
        "{text}"
    );

    let changed = stencil(&["diff", "--definition", &new, "-n", &ns.name]);
    let text = String::from_utf8_lossy(&changed.stdout);
    assert_eq!(
        changed.status.code(),
        Some(1),
        "{text}{}",
        String::from_utf8_lossy(&changed.stderr)
    );
    assert!(
        text.contains("20 parents: 20 children created, 20 updated, 0 recreated, 20 pruned"),
        "{text}"
    );
    assert!(
        text.contains(&format!("  + ConfigMap {}/w0-added (created)", ns.name)),
        "{text}"
    );
    assert!(
        text.contains(&format!("  - ConfigMap {}/w0-dropped (pruned)", ns.name)),
        "{text}"
    );
    assert!(text.contains("-  v: '1'") || text.contains("-  v: \"1\""), "{text}");

    let json = stencil(&["diff", "--definition", &new, "-n", &ns.name, "-o", "json"]);
    let report: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(report["summary"]["updated"], 20, "{report}");

    let failed = stencil(&["diff", "--definition", &broken, "-n", &ns.name]);
    assert_eq!(
        failed.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&failed.stderr)
    );

    assert_eq!(
        writes(&client, false).await,
        writes_before,
        "stencil diff wrote to the cluster"
    );
    assert!(
        writes(&client, true).await >= dry_before + 40.0,
        "the changes were dry-run applied"
    );
    let after = resource_versions(configmaps.list(&ListParams::default()).await.unwrap().items);
    assert_eq!(before, after, "no child changed");
}
