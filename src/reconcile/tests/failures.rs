//! Writes the API server refuses: nothing is deleted because of one, each is said once on
//! the parent's status or the definition's, and the other children are still written.

use super::*;

/// The 422 the API server sends for a change to an immutable ConfigMap's data.
fn immutable_refusal() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Invalid", "code": 422,
        "message": "ConfigMap \"w-cm\" is invalid: data: Forbidden: field is immutable when `immutable` is set",
        "details": {"name": "w-cm", "kind": "ConfigMap", "causes": [{"reason": "FieldValueForbidden",
            "message": "Forbidden: field is immutable when `immutable` is set", "field": "data"}]}})
}

#[tokio::test]
async fn an_immutable_change_deletes_nothing_and_the_parent_says_which_field_once() {
    let mut w = World::new();
    w.create_child().await;
    w.refusals
        .lock()
        .unwrap()
        .insert("/api/v1/namespaces/ns/configmaps/w-cm".into(), immutable_refusal());
    let sent = w.reconcile(resized(4)).await;
    assert!(
        !sent.iter().any(|s| s.method == "DELETE"),
        "nothing is deleted: {sent:?}"
    );
    let status = &sent.last().unwrap().body["status"];
    let ready = status["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        (ready["status"].as_str(), ready["reason"].as_str()),
        (Some("False"), Some("Immutable")),
        "{status}"
    );
    let message = ready["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("ConfigMap ns/w-cm") && message.contains("data: Forbidden") && message.contains("Recreate"),
        "the message names the object, the field and the way out: {message}"
    );
    assert_eq!(events(&w, "Immutable"), 1);
    let again = w.reconcile(resized(4)).await;
    assert!(!again.iter().any(|s| s.method == "DELETE"), "{again:?}");
    assert_eq!(events(&w, "Immutable"), 0, "said once, not on every pass");
}

#[tokio::test]
async fn a_recreate_child_is_deleted_once_and_waited_for_while_it_terminates() {
    let recreate = definition().replace("    - name: cm\n", "    - name: cm\n      updatePolicy: Recreate\n");
    let mut w = World::with(&recreate);
    let mut child = w.create_child().await;
    let sent = w.reconcile(resized(4)).await;
    assert_eq!(
        configmap_writes(&sent),
        ["DELETE w-cm"],
        "Recreate deletes the old object"
    );
    // Something holds the object (a finalizer): it terminates, and stays.
    child["metadata"]["deletionTimestamp"] = json!("2026-12-04T00:00:00Z");
    child["metadata"]["finalizers"] = json!(["example.org/hold"]);
    w.children.apply(child);
    for _ in 0..3 {
        let sent = w.reconcile(resized(4)).await;
        assert_eq!(
            configmap_writes(&sent),
            Vec::<String>::new(),
            "no DELETE while it terminates"
        );
    }
}

#[tokio::test]
async fn one_failed_child_does_not_hold_back_the_later_ones_and_nothing_is_pruned() {
    let many = definition().replace(
        "    - name: cm\n      template: |\n        apiVersion: v1\n        kind: ConfigMap\n        metadata:\n          name: {{ parent.metadata.name }}-cm\n",
        "    - name: cm\n      collection: true\n      template: |\n        {% for i in range(12) %}\n        ---\n        apiVersion: v1\n        kind: ConfigMap\n        metadata:\n          name: {{ parent.metadata.name }}-cm-{{ i }}\n        {% endfor %}\n",
    );
    let mut w = World::with(&many.replace("        data:\n          size: {{ parent.spec.size | quote }}\n", ""));
    w.refusals.lock().unwrap().insert(
        "/api/v1/namespaces/ns/configmaps/w-cm-0".into(),
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "InternalError", "code": 500, "message": "etcd is slow"}),
    );
    w.parents.apply(parent(None));
    let obj: DynamicObject = serde_json::from_value(parent(None)).unwrap();
    let result = reconcile(Arc::new(obj), w.ctx.clone()).await;
    assert!(result.is_err(), "the failure is retried");
    let applied = w
        .seen
        .lock()
        .unwrap()
        .iter()
        .filter(|s| s.method == "PATCH" && s.path.contains("/configmaps/w-cm-"))
        .count();
    assert_eq!(applied, 12, "every child was applied, in every batch");
}

#[tokio::test]
async fn a_failed_prune_is_said_on_the_status_and_in_an_event() {
    let mut w = World::new();
    let mut old = w.create_child().await;
    old["metadata"]["name"] = json!("w-old");
    old["metadata"]["uid"] = json!("old-uid");
    w.children.apply(old);
    w.refusals.lock().unwrap().insert(
        "/api/v1/namespaces/ns/configmaps/w-old".into(),
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "InternalError", "code": 500, "message": "etcd is slow"}),
    );
    w.parents.apply(parent(None));
    w.seen.lock().unwrap().clear();
    let obj: DynamicObject = serde_json::from_value(parent(None)).unwrap();
    assert!(reconcile(Arc::new(obj), w.ctx.clone()).await.is_err(), "retried");
    let status = w
        .seen
        .lock()
        .unwrap()
        .iter()
        .rev()
        .find(|s| s.path.ends_with("/widgets/w/status"))
        .map(|s| s.body["status"].clone())
        .expect("the status is written");
    assert!(status.to_string().contains("PruneFailed"), "{status}");
    assert_eq!(events(&w, "Error"), 1, "the failed delete is published");
}

#[tokio::test]
async fn one_parents_refusal_stays_on_the_definition_while_another_parent_succeeds() {
    let mut w = World::new();
    w.refusals.lock().unwrap().insert(
        "/api/v1/namespaces/ns/configmaps/w-cm".into(),
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden", "code": 403,
            "message": "configmaps \"w-cm\" is forbidden", "details": {"kind": "configmaps"}}),
    );
    w.parents.apply(parent(None));
    let refused: DynamicObject = serde_json::from_value(parent(None)).unwrap();
    assert!(reconcile(Arc::new(refused), w.ctx.clone()).await.is_err());
    assert!(
        w.ctx.problem().is_some_and(|p| p.contains("forbidden")),
        "{:?}",
        w.ctx.problem()
    );
    let mut other = parent(None);
    other["metadata"]["name"] = json!("v");
    other["metadata"]["uid"] = json!("other-uid");
    w.parents.apply(other.clone());
    let other: DynamicObject = serde_json::from_value(other).unwrap();
    reconcile(Arc::new(other), w.ctx.clone())
        .await
        .expect("the other parent is served");
    assert!(
        w.ctx.problem().is_some_and(|p| p.contains("w-cm")),
        "another parent's success does not clear the refusal: {:?}",
        w.ctx.problem()
    );
}
