//! A parent whose stored copy came from a list is read again before its children are
//! changed.

use serde_json::json;

use super::mock::Seen;
use super::world::{World, configmap_writes, parent};

/// Where the mock API serves the Widget `ns/w`.
const WIDGET: &str = "/apis/example.org/v1/namespaces/ns/widgets/w";

/// A world whose child `w-cm` says `size: "5"` (a newer parent's rendering) and whose
/// parent store holds [`parent`] (size 3, resourceVersion 1) from a list, with the API
/// server holding the parent at `version`.
async fn listed_with_api_at(version: &str) -> World {
    let mut w = World::new();
    let mut child = w.create_child().await;
    child["data"]["size"] = json!("5");
    w.children.apply(child);
    w.parents.list(vec![parent(None)]);
    let mut now = parent(None);
    now["metadata"]["resourceVersion"] = json!(version);
    w.objects.lock().unwrap().insert(WIDGET.to_string(), now);
    w
}

#[tokio::test]
async fn a_listed_parent_older_than_the_api_servers_changes_no_child() {
    let mut w = listed_with_api_at("2").await;
    let sent = w.reconcile(parent(None)).await;
    let short: Vec<String> = sent.iter().map(Seen::short).collect();
    assert_eq!(
        short,
        [format!("GET {WIDGET}")],
        "the parent is read again, and nothing written"
    );
}

#[tokio::test]
async fn a_listed_parent_the_api_server_confirms_brings_its_child_in_line_reading_it_once() {
    let mut w = listed_with_api_at("1").await;
    let sent = w.reconcile(parent(None)).await;
    assert_eq!(configmap_writes(&sent).len(), 1, "{sent:?}");
    let reads = sent.iter().filter(|s| s.method == "GET" && s.path == WIDGET).count();
    assert_eq!(reads, 1, "{sent:?}");
    // A copy a watch event brought is current: no read.
    let mut newer = parent(None);
    newer["metadata"]["resourceVersion"] = json!("2");
    newer["spec"]["size"] = json!(7);
    let sent = w.reconcile(newer).await;
    assert!(!sent.iter().any(|s| s.path == WIDGET && s.method == "GET"), "{sent:?}");
}
