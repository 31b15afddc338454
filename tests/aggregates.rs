//! Aggregates on the rig: a Job-like parent runs N Pods as a collection; its `Complete`
//! condition counts the Pods that succeeded against `spec.completions`, is latched, and
//! stays set after a Pod is deleted; a summary ConfigMap that reads the Pods is created
//! only once every one of them is ready.

mod common;

use std::time::Duration;

use common::{TestNamespace, client, condition, definition, start_stencil, unique_group, wait_for};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(90);

/// Pods no node can take (the test plays the kubelet), a summary over them, and the
/// aggregate status.
const CHILDREN: &str = r#"    - name: summary
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata:
          name: {{ parent.metadata.name }}-summary
        data:
          pods: {{ children.pods | map(attribute='metadata.name') | join(',') | quote }}
    - name: pods
      collection: true
      template: |
        {% for i in range(parent.spec.completions) %}
        ---
        apiVersion: v1
        kind: Pod
        metadata:
          name: {{ parent.metadata.name }}-{{ i }}
        spec:
          restartPolicy: Never
          nodeSelector: {stencil.dev/test: no-such-node}
          containers: [{name: work, image: busybox}]
        {% endfor %}
"#;

const STATUS: &str = r#"  status:
    fields:
      succeeded: "{{ children.pods | selectattr('status.phase', 'eq', 'Succeeded') | list | length }}"
    conditions:
      - type: Complete
        latch: true
        reason: AllSucceeded
        when: "{{ children.pods | selectattr('status.phase', 'eq', 'Succeeded') | list | length >= parent.spec.completions }}"
"#;

async fn succeed(pods: &Api<Pod>, name: &str) {
    pods.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(&json!({"status": {"phase": "Succeeded"}})),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn a_job_like_parent_completes_by_an_aggregate_that_stays_latched() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "aggregates").await;
    let group = unique_group();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("batch.yaml");
    std::fs::write(&file, definition(&group, CHILDREN, STATUS)).unwrap();
    let _stencil = start_stencil(&[file], false).await;

    let widgets: Api<DynamicObject> = common::widgets(&client, &group, &ns.name);
    let batch: DynamicObject = serde_json::from_value(json!({"apiVersion": format!("{group}/v1"), "kind": "Widget",
        "metadata": {"name": "b"}, "spec": {"completions": 3}}))
    .unwrap();
    common::create_when_served(&widgets, &batch).await;
    let status = |pred: fn(&Value) -> bool| {
        let widgets = widgets.clone();
        async move {
            let w = serde_json::to_value(widgets.get("b").await.ok()?).ok()?;
            pred(&w["status"]).then_some(w["status"].clone())
        }
    };

    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    let names = ["b-0", "b-1", "b-2"];
    wait_for("three Pods", TIMEOUT, || async {
        let list = pods.list(&ListParams::default()).await.ok()?;
        (list.items.len() == 3).then_some(())
    })
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    for name in &names[..2] {
        succeed(&pods, name).await;
    }
    // Two of three: counted, not complete, and the summary still waits for the whole pool.
    let partial = wait_for("two succeeded", TIMEOUT, || status(|s| s["succeeded"] == 2)).await;
    let complete = condition(&json!({"status": partial}), "Complete").unwrap();
    assert_eq!(complete["status"], "False");
    let ready = condition(&json!({"status": partial}), "Ready").unwrap();
    assert!(
        ready["message"].as_str().unwrap().contains("summary (on pods)"),
        "{ready}"
    );
    assert!(
        cms.get_opt("b-summary").await.unwrap().is_none(),
        "the summary was created before every Pod was ready"
    );

    succeed(&pods, names[2]).await;
    let done = wait_for("Complete", TIMEOUT, || status(|s| s["succeeded"] == 3)).await;
    assert_eq!(
        condition(&json!({"status": done}), "Complete").unwrap()["status"],
        "True"
    );
    let summary = wait_for("the summary", TIMEOUT, || async {
        cms.get_opt("b-summary").await.ok()?
    })
    .await;
    // The pool in creation order, which the API server's clock decides: compared as a set.
    let mut pool: Vec<String> = summary.data.unwrap()["pods"].split(',').map(str::to_string).collect();
    pool.sort();
    assert_eq!(pool, names);

    // A Pod deleted afterwards is made anew and has not succeeded; Complete stays.
    let old = pods.get(names[0]).await.unwrap().metadata.uid;
    pods.delete(names[0], &Default::default()).await.unwrap();
    wait_for("the Pod made anew", TIMEOUT, || async {
        let pod = pods.get_opt(names[0]).await.ok()??;
        (pod.metadata.uid != old && pod.metadata.deletion_timestamp.is_none()).then_some(())
    })
    .await;
    let after = wait_for("the count to drop", TIMEOUT, || status(|s| s["succeeded"] == 2)).await;
    let kept = condition(&json!({"status": after}), "Complete").unwrap();
    assert_eq!(
        (kept["status"].as_str(), kept["reason"].as_str()),
        (Some("True"), Some("AllSucceeded")),
        "{after}"
    );

    // A spec change evaluates it afresh.
    widgets
        .patch(
            "b",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"completions": 4}})),
        )
        .await
        .unwrap();
    wait_for("Complete reset by the spec change", TIMEOUT, || {
        status(|s| {
            s["observedGeneration"] == 2
                && s["conditions"]
                    .as_array()
                    .is_some_and(|c| c.iter().any(|c| c["type"] == "Complete" && c["status"] == "False"))
        })
    })
    .await;
}
