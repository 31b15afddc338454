//! A sharded member's reconciles: it writes only for the parents labelled with its name,
//! hands a draining parent over with one patch, and deletes no child of a parent that
//! merely left its watch.

use super::*;

/// The world of [`World::new`], its controller member `a` of a sharded ring.
fn member_a() -> World {
    let mut w = World::new();
    let ctx = Arc::try_unwrap(w.ctx).ok().expect("the only handle on the context");
    w.ctx = Arc::new(ctx.sharded_as(Some("a")));
    w
}

fn placed(shard: &str, draining: bool) -> Value {
    let mut p = parent(None);
    p["metadata"]["labels"] = json!({labels::SHARD: shard});
    if draining {
        p["metadata"]["labels"][labels::DRAIN] = json!("true");
    }
    p
}

#[tokio::test]
async fn a_member_writes_its_own_parents_children_with_its_shard_label() {
    let mut w = member_a();
    let sent = w.reconcile(placed("a", false)).await;
    let apply = sent
        .iter()
        .find(|s| s.path.ends_with("/configmaps/w-cm"))
        .expect("the child is applied");
    assert_eq!(apply.body["metadata"]["labels"][labels::SHARD], "a");
}

#[tokio::test]
async fn a_member_sends_nothing_for_another_members_parent() {
    let mut w = member_a();
    let sent = w.reconcile(placed("b", false)).await;
    assert!(sent.is_empty(), "{sent:?}");
    let unplaced = w.reconcile(parent(None)).await;
    assert!(
        unplaced.is_empty(),
        "an unassigned parent waits for the sharder: {unplaced:?}"
    );
}

#[tokio::test]
async fn a_draining_parent_is_handed_over_with_one_conditional_patch_and_no_child_write() {
    let mut w = member_a();
    let sent = w.reconcile(placed("a", true)).await;
    let short: Vec<String> = sent.iter().map(Seen::short).collect();
    assert_eq!(short, ["PATCH /apis/example.org/v1/namespaces/ns/widgets/w"]);
    let body = &sent[0].body["metadata"];
    assert_eq!(
        body["resourceVersion"], "1",
        "the patch applies to the version read only"
    );
    assert_eq!(body["labels"][labels::SHARD], Value::Null);
    assert_eq!(body["labels"][labels::DRAIN], Value::Null);
    assert!(
        body["labels"].as_object().is_some_and(|l| l.len() == 2),
        "both labels are removed, nothing else: {body}"
    );
    assert_eq!(
        body["annotations"][labels::MOVED_FROM],
        "a",
        "the next member learns where the children are"
    );
}

#[tokio::test]
async fn an_arriving_parent_takes_its_children_over_and_prunes_the_one_no_longer_rendered() {
    let mut w = member_a();
    w.reconcile(placed("a", false)).await;
    // The children as the member the parent left wrote them: labelled with its name, and
    // not in this member's watch. One of them is no longer rendered.
    {
        let mut objects = w.objects.lock().unwrap();
        let path = "/api/v1/namespaces/ns/configmaps/w-cm";
        let mut cm = objects[path].clone();
        cm["metadata"]["labels"][labels::SHARD] = json!("b");
        let mut old = cm.clone();
        old["metadata"]["name"] = json!("w-old");
        old["metadata"]["uid"] = json!("old-uid");
        objects.insert(path.to_string(), cm);
        objects.insert("/api/v1/namespaces/ns/configmaps/w-old".to_string(), old);
    }
    let mut arrived = placed("a", false);
    arrived["metadata"]["annotations"] = json!({labels::MOVED_FROM: "b"});
    let sent = w.reconcile(arrived).await;
    let short: Vec<String> = sent.iter().map(Seen::short).collect();
    assert!(
        short.contains(&"GET /api/v1/configmaps".to_string()),
        "the children are listed: {short:?}"
    );
    let relabelled = sent
        .iter()
        .rfind(|s| s.method == "PATCH" && s.path.ends_with("/configmaps/w-cm"))
        .expect("the rendered child is applied");
    assert_eq!(relabelled.body["metadata"]["labels"][labels::SHARD], "a");
    assert!(
        short.contains(&"DELETE /api/v1/namespaces/ns/configmaps/w-old".to_string()),
        "the child no longer rendered is pruned: {short:?}"
    );
    let settled = sent
        .iter()
        .find(|s| s.method == "PATCH" && s.path == "/apis/example.org/v1/namespaces/ns/widgets/w")
        .expect("the arrival is settled");
    assert_eq!(settled.body["metadata"]["annotations"][labels::MOVED_FROM], Value::Null);
}

#[tokio::test]
async fn a_parent_that_moved_is_not_a_deletion_and_one_that_went_is_confirmed_first() {
    let w = member_a();
    let moved: DynamicObject = serde_json::from_value(placed("b", false)).unwrap();
    assert!(!shard::deleted(&w.ctx, &moved).await, "relabelled for another member");
    assert!(w.seen.lock().unwrap().is_empty(), "decided without a request");

    let gone: DynamicObject = serde_json::from_value(placed("a", false)).unwrap();
    assert!(shard::deleted(&w.ctx, &gone).await, "the API server has no such parent");
    let sent: Vec<String> = w.seen.lock().unwrap().iter().map(Seen::short).collect();
    assert_eq!(sent, ["GET /apis/example.org/v1/namespaces/ns/widgets/w"]);

    let unsharded = World::new();
    assert!(
        shard::deleted(&unsharded.ctx, &moved).await,
        "unsharded, leaving the watch is a deletion"
    );
    assert!(unsharded.seen.lock().unwrap().is_empty());
}
