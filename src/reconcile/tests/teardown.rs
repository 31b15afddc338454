//! A deleted parent: its finalizer goes only once the API server confirms no child is
//! left, its children go in reverse `dependsOn` order, and the orphan cascade keeps them.

use super::*;

#[tokio::test]
async fn a_deleted_parent_without_children_only_loses_its_finalizer() {
    let mut w = World::new();
    let mut deleted = parent(None);
    deleted["metadata"]["deletionTimestamp"] = json!("2026-12-03T00:00:00Z");
    deleted["metadata"]["finalizers"] = json!([labels::FINALIZER, "other.example.org/keep"]);
    let sent = w.reconcile(deleted).await;
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert_eq!(
        sent[0].short(),
        "GET /api/v1/configmaps",
        "the API server confirms that no child is left"
    );
    assert!(
        sent[0]
            .query
            .contains("labelSelector=stencil.dev%2Fparent-uid%3Dparent-uid")
    );
    assert_eq!(sent[1].method, "PATCH");
    assert_eq!(sent[1].path, "/apis/example.org/v1/namespaces/ns/widgets/w");
    assert_eq!(
        sent[1].body["metadata"]["finalizers"],
        json!(["other.example.org/keep"]),
        "only Stencil's finalizer goes"
    );
    assert_eq!(
        sent[1].body["metadata"]["resourceVersion"], "1",
        "guarded by the resourceVersion"
    );
}

#[tokio::test]
async fn a_deleted_parent_with_an_inherited_finalizer_is_torn_down_then_released_of_it() {
    let mut w = World::with(&inheriting());
    let child = w.create_child().await;
    let mut deleted = parent(None);
    deleted["metadata"]["deletionTimestamp"] = json!("2026-12-03T00:00:00Z");
    deleted["metadata"]["finalizers"] = json!(["kro.run/finalizer", "other.example.org/keep"]);
    let (result, sent) = w.reconcile_deleted(deleted.clone()).await;
    assert!(matches!(result, Err(ReconcileError::Waiting(_))), "{result:?}");
    assert_eq!(
        sent[0], "DELETE /api/v1/namespaces/ns/configmaps/w-cm",
        "the inherited finalizer holds the parent for Stencil's teardown"
    );
    w.children.delete(child);
    w.objects.lock().unwrap().clear();
    let sent = w.reconcile(deleted).await;
    let release = sent.last().expect("a release");
    assert_eq!(release.method, "PATCH");
    assert_eq!(
        release.body["metadata"]["finalizers"],
        json!(["other.example.org/keep"]),
        "the inherited finalizer goes with the teardown done; another stays"
    );
}

#[tokio::test]
async fn a_finalizer_the_definition_does_not_inherit_is_not_stencils_to_release() {
    let mut w = World::new();
    let mut deleted = parent(None);
    deleted["metadata"]["deletionTimestamp"] = json!("2026-12-03T00:00:00Z");
    deleted["metadata"]["finalizers"] = json!(["kro.run/finalizer"]);
    let sent = w.reconcile(deleted).await;
    assert!(sent.is_empty(), "{sent:?}");
}

#[tokio::test]
async fn a_deleted_parent_whose_garbage_collector_cannot_help_deletes_its_children_first() {
    let mut w = World::new();
    w.create_child().await;
    let (result, sent) = w.reconcile_deleted(deleted_with_finalizer()).await;
    assert!(
        matches!(result, Err(ReconcileError::Waiting(_))),
        "it waits for the child to go"
    );
    assert_eq!(
        sent,
        [
            "DELETE /api/v1/namespaces/ns/configmaps/w-cm",
            "PATCH /apis/example.org/v1/namespaces/ns/widgets/w/status",
        ],
        "the child is deleted and the finalizer stays until it is gone"
    );
}

#[tokio::test]
async fn teardown_goes_in_reverse_depends_on_order() {
    let mut w = World::with(&waves());
    let first = w.reconcile(parent(None)).await;
    assert_eq!(configmap_writes(&first), ["PATCH w-creds"], "app waits for creds");
    let creds = first
        .iter()
        .find(|s| s.method == "PATCH" && s.path.ends_with("/w-creds"))
        .unwrap()
        .body
        .clone();
    w.children.apply(creds);
    let second = w.reconcile(parent(None)).await;
    assert_eq!(configmap_writes(&second), ["PATCH w-app"]);
    let app = second
        .iter()
        .find(|s| s.method == "PATCH" && s.path.ends_with("/w-app"))
        .unwrap()
        .body
        .clone();
    w.children.apply(app.clone());
    assert!(
        first
            .iter()
            .any(|s| s.body["metadata"]["finalizers"] == json!([labels::FINALIZER])),
        "children that depend on each other need the finalizer, even where the garbage collector could clean up"
    );

    let mut deleted = parent(None);
    deleted["metadata"]["deletionTimestamp"] = json!("2026-12-03T00:00:00Z");
    deleted["metadata"]["finalizers"] = json!([labels::FINALIZER]);
    w.parents.apply(deleted.clone());
    let run = |w: &World| {
        let obj: DynamicObject = serde_json::from_value(deleted.clone()).unwrap();
        let ctx = w.ctx.clone();
        w.seen.lock().unwrap().clear();
        async move { reconcile(Arc::new(obj), ctx).await }
    };
    let waiting = run(&w).await;
    assert_eq!(
        configmap_writes(&w.seen.lock().unwrap()),
        ["DELETE w-app"],
        "the dependent goes first"
    );
    let Err(ReconcileError::Waiting(message)) = waiting else {
        panic!("{waiting:?}")
    };
    assert!(
        message.contains("then creds"),
        "the parent says what comes next: {message}"
    );
    w.children.delete(app);
    let _ = run(&w).await;
    assert_eq!(
        configmap_writes(&w.seen.lock().unwrap()),
        ["DELETE w-creds"],
        "then what it depended on"
    );
}

#[tokio::test]
async fn the_finalizer_stays_while_the_api_server_lists_a_child_the_store_does_not_have() {
    let late = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "w-late", "namespace": "ns", "uid": "late-uid",
            "labels": {labels::PARENT_UID: "parent-uid", labels::CHILD: "cm", labels::DEFINITION: "widgets.example.org"},
            "ownerReferences": [{"apiVersion": "example.org/v1", "kind": "Widget", "name": "w", "uid": "parent-uid", "controller": true}]}});
    let mut w = World::existing(&definition(), vec![late]);
    let (result, sent) = w.reconcile_deleted(deleted_with_finalizer()).await;
    assert!(matches!(result, Err(ReconcileError::Waiting(_))), "{result:?}");
    assert_eq!(
        sent,
        [
            "GET /api/v1/configmaps",
            "DELETE /api/v1/namespaces/ns/configmaps/w-late",
            "PATCH /apis/example.org/v1/namespaces/ns/widgets/w/status",
        ],
        "the fresh list finds the child, which is deleted; the finalizer stays"
    );
}

#[tokio::test]
async fn a_child_already_gone_does_not_hold_its_parent() {
    let mut w = World::new();
    w.create_child().await;
    // The child is gone from the API server, but its watch has not said so.
    w.refusals
        .lock()
        .unwrap()
        .insert("/api/v1/namespaces/ns/configmaps/w-cm".into(), mock::not_found());
    let obj: DynamicObject = serde_json::from_value(deleted_with_finalizer()).unwrap();
    w.parents.apply(deleted_with_finalizer());
    w.seen.lock().unwrap().clear();
    let result = reconcile(Arc::new(obj), w.ctx.clone()).await;
    assert!(result.is_ok(), "{result:?}");
    let finalizers = w.seen.lock().unwrap().iter().any(|s| {
        s.method == "PATCH" && s.path.ends_with("/widgets/w") && s.body["metadata"]["finalizers"] == json!([])
    });
    assert!(
        finalizers,
        "the finalizer is released: a 404 is not something to wait for"
    );
}

#[tokio::test]
async fn a_parent_deleted_with_the_orphan_cascade_keeps_every_child() {
    let mut w = World::new();
    w.create_child().await;
    let mut deleted = deleted_with_finalizer();
    deleted["metadata"]["finalizers"] = json!(["orphan", labels::FINALIZER]);
    w.parents.apply(deleted.clone());
    w.seen.lock().unwrap().clear();
    let obj: DynamicObject = serde_json::from_value(deleted).unwrap();
    let _ = reconcile(Arc::new(obj), w.ctx.clone()).await;
    let seen = w.seen.lock().unwrap().clone();
    assert!(
        !seen.iter().any(|s| s.method == "DELETE"),
        "--cascade=orphan deletes no child: {seen:?}"
    );
    let strip = seen
        .iter()
        .find(|s| s.method == "PATCH" && s.path.ends_with("/configmaps/w-cm"))
        .expect("the child is orphaned");
    assert_eq!(strip.body["metadata"]["labels"][labels::PARENT_UID], Value::Null);
}
