//! Objects Stencil did not create: never written, adopted only when the child says so and
//! nobody else controls them, and another parent's child left to it.

use super::*;

/// `orders`' ConfigMap, made by hand: no Stencil label, written by kubectl.
fn hand_made(owners: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "w-cm", "namespace": "ns", "uid": "hand-uid", "resourceVersion": "7",
            "ownerReferences": owners, "managedFields": [{"manager": "kubectl-client-side-apply"}]},
        "data": {"size": "precious"}})
}

fn adopting(definition: &str) -> String {
    definition.replace("    - name: cm\n", "    - name: cm\n      adopt: IfUnowned\n")
}

#[tokio::test]
async fn a_hand_made_object_is_never_written_and_the_conflict_is_said_once() {
    let mut w = World::existing(&definition(), vec![hand_made(json!([]))]);
    let sent = w.reconcile(parent(None)).await;
    let short: Vec<String> = sent.iter().map(Seen::short).collect();
    assert_eq!(
        short,
        [
            "PATCH /api/v1/namespaces/ns/configmaps/w-cm",
            "GET /api/v1/namespaces/ns/configmaps/w-cm",
            "PATCH /apis/example.org/v1/namespaces/ns/widgets/w/status",
        ],
        "a create-only apply, refused because the name is taken; a read; the parent's status"
    );
    assert_eq!(sent[0].body["metadata"]["resourceVersion"], apply::CREATE_ONLY);
    assert_eq!(
        w.stored("w-cm"),
        hand_made(json!([])),
        "the hand-made object is as it was"
    );
    let status = sent[2].body["status"].clone();
    let ready = status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Ready")
        .unwrap()
        .clone();
    assert_eq!(
        (ready["status"].as_str(), ready["reason"].as_str()),
        (Some("False"), Some("Conflict"))
    );
    let message = ready["message"].as_str().unwrap();
    assert!(
        message.contains("ConfigMap ns/w-cm") && message.contains("kubectl-client-side-apply"),
        "{message}"
    );
    assert_eq!(events(&w, "Conflict"), 1);
    // The same state again: no write, no second event.
    let mut with_status = parent(Some(status));
    with_status["metadata"]["resourceVersion"] = json!("2");
    let again = w.reconcile(with_status).await;
    assert_eq!(
        again.iter().map(Seen::short).collect::<Vec<_>>(),
        [
            "PATCH /api/v1/namespaces/ns/configmaps/w-cm",
            "GET /api/v1/namespaces/ns/configmaps/w-cm"
        ]
    );
    assert_eq!(w.stored("w-cm"), hand_made(json!([])));
    assert_eq!(events(&w, "Conflict"), 0, "the cleared log holds no new Conflict event");
}

#[tokio::test]
async fn an_unowned_object_is_adopted_when_the_child_says_so() {
    let mut w = World::existing(&adopting(&definition()), vec![hand_made(json!([]))]);
    let sent = w.reconcile(parent(None)).await;
    let applies: Vec<&Seen> = sent
        .iter()
        .filter(|s| s.method == "PATCH" && s.path.ends_with("/configmaps/w-cm"))
        .collect();
    assert_eq!(
        applies.len(),
        2,
        "a refused create-only apply, then the adoption: {sent:?}"
    );
    let apply = applies[1];
    assert!(
        apply.query.contains("force=true"),
        "adoption takes the fields over: {}",
        apply.query
    );
    assert_eq!(apply.body["metadata"]["labels"][labels::PARENT_UID], "parent-uid");
    assert_eq!(apply.body["metadata"]["ownerReferences"][0]["uid"], "parent-uid");
    assert_eq!(events(&w, "Adopted"), 1);
}

#[tokio::test]
async fn an_object_another_controller_controls_is_not_adopted() {
    let rs =
        json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "uid": "rs-uid", "controller": true}]);
    let mut w = World::existing(&adopting(&definition()), vec![hand_made(rs.clone())]);
    let sent = w.reconcile(parent(None)).await;
    assert!(
        sent.iter()
            .filter(|s| s.path.ends_with("/configmaps/w-cm") && s.method != "GET")
            .all(|s| s.body["metadata"]["resourceVersion"] == apply::CREATE_ONLY && !s.query.contains("force")),
        "only a create that cannot write it: {sent:?}"
    );
    assert_eq!(w.stored("w-cm"), hand_made(rs));
    let status = &sent.last().unwrap().body["status"];
    assert!(
        status.to_string().contains("controlled by ReplicaSet web-1"),
        "{status}"
    );
}

#[tokio::test]
async fn another_parents_object_in_the_store_stays_with_it_without_a_request() {
    let mut w = World::new();
    let mut theirs = hand_made(
        json!([{"apiVersion": "example.org/v1", "kind": "Widget", "name": "first", "uid": "first-uid", "controller": true}]),
    );
    theirs["metadata"]["labels"] = json!({labels::PARENT_UID: "first-uid", labels::PARENT_NAME: "first",
        labels::PARENT_NAMESPACE: "ns", labels::DEFINITION: "widgets.example.org", labels::CHILD: "cm"});
    w.children.apply(theirs);
    let sent = w.reconcile(parent(None)).await;
    assert_eq!(
        sent.iter().map(Seen::short).collect::<Vec<_>>(),
        ["PATCH /apis/example.org/v1/namespaces/ns/widgets/w/status"]
    );
    assert!(sent[0].body.to_string().contains("parent ns/first"), "{}", sent[0].body);
}
