//! A pass and the watch events of its own writes: a pass ahead of its store writes nothing
//! twice, and a clean pass expects its echoes so they wake no second pass.

use super::*;

/// A pass woken before the watch event of its own last write (by the parent's status
/// write, say) finds the child as it was before that write: it writes nothing again.
#[tokio::test]
async fn a_pass_ahead_of_the_store_does_not_write_its_own_write_again() {
    let mut w = World::new();
    let mut child = w.create_child().await;
    // The mock answers every write with this uid: the stored child is the same object.
    child["metadata"]["uid"] = json!("answered-uid");
    w.children.apply(child);
    let first = w.reconcile(resized(4)).await;
    assert_eq!(
        configmap_writes(&first),
        ["PATCH w-cm"],
        "positive control: the edit is written"
    );
    let again = w.reconcile(resized(4)).await;
    assert!(
        configmap_writes(&again).is_empty(),
        "the store still shows the child before the write: {again:?}"
    );
    let mut caught_up = first[0].body.clone();
    caught_up["metadata"]["uid"] = json!("answered-uid");
    w.children.apply(caught_up);
    let settled = w.reconcile(resized(4)).await;
    assert!(configmap_writes(&settled).is_empty(), "{settled:?}");
    let changed = w.reconcile(resized(5)).await;
    assert_eq!(
        configmap_writes(&changed),
        ["PATCH w-cm"],
        "a new change is written at once"
    );
}

/// A pass that wrote a child and the status, with nothing left to wait for, expects the
/// watch events of those writes, so they wake no second pass.
#[tokio::test]
async fn a_clean_pass_expects_the_echoes_of_its_own_writes() {
    let mut w = World::new();
    let sent = w.reconcile(parent(None)).await;
    assert_eq!(sent.len(), 2, "positive control: the child and the status: {sent:?}");
    let obj: DynamicObject = serde_json::from_value(parent(None)).unwrap();
    let me = w.ctx.parent_key(&obj);
    let meta = |uid: &str, version: &str| kube::api::ObjectMeta {
        uid: Some(uid.into()),
        resource_version: Some(version.into()),
        ..Default::default()
    };
    // The mock answers a child write with its body, and the status write with the parent
    // at resourceVersion 1; every answer carries the uid `answered-uid`.
    assert!(w.ctx.is_echo(&me, &meta("answered-uid", apply::CREATE_ONLY)));
    assert!(w.ctx.is_echo(&me, &meta("answered-uid", "1")));
    assert!(
        !w.ctx.is_echo(&me, &meta("answered-uid", "2")),
        "a later change of the parent is news"
    );
}
