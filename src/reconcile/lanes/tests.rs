//! The lanes' order, bound and bookkeeping, each test one rule a wrong lane would break.

use super::*;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::reflector::ObjectRef;

fn parent(name: &str) -> ParentKey {
    let ar = ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&());
    ObjectRef::<DynamicObject>::new_with(name, ar).within("ns")
}

fn meta(uid: &str, generation: i64) -> ObjectMeta {
    ObjectMeta {
        uid: Some(uid.into()),
        generation: Some(generation),
        ..ObjectMeta::default()
    }
}

fn queue(room: usize) -> Queue {
    Queue {
        room,
        ..Queue::default()
    }
}

#[test]
fn a_parent_is_new_when_first_seen_when_its_spec_changes_and_when_its_deletion_begins() {
    let mut q = queue(2);
    assert!(q.is_new(&meta("a", 1), None));
    assert!(
        !q.is_new(&meta("a", 1), None),
        "the same generation again is a re-check"
    );
    assert!(q.is_new(&meta("a", 2), Some(1)));
    let mut deleting = meta("a", 2);
    deleting.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Default::default()));
    assert!(q.is_new(&deleting, Some(2)));
    q.forget(&parent("a"), Some("a"));
    assert!(q.is_new(&meta("a", 2), None), "a forgotten parent is seen afresh");
}

/// After a restart every parent is seen for the first time: one whose status says its
/// spec was served is a re-check; one not yet served, or served at another
/// generation, or being deleted, goes first.
#[test]
fn a_parent_first_seen_already_served_is_a_recheck() {
    let mut q = queue(2);
    assert!(!q.is_new(&meta("served", 3), Some(3)));
    assert!(q.is_new(&meta("edited-meanwhile", 4), Some(3)));
    assert!(q.is_new(&meta("never-served", 1), None));
    let mut deleting = meta("deleting", 3);
    deleting.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Default::default()));
    assert!(q.is_new(&deleting, Some(3)));
    assert!(q.is_new(&meta("served", 4), Some(3)), "then its next spec is new");
}

/// A pass of `name` running, as the controller starts it from the queue.
fn running(q: &mut Queue, name: &str) {
    q.fresh(parent(name));
    assert_eq!(q.release(), Some(parent(name)), "{name} goes to the queue");
    q.started(&parent(name));
}

#[test]
fn a_recheck_waits_while_running_and_queued_passes_fill_the_room() {
    let mut q = queue(2);
    running(&mut q, "new-1");
    q.fresh(parent("new-2"));
    q.hold(parent("old"));
    assert_eq!(q.release(), Some(parent("new-2")));
    assert_eq!(q.release(), None, "one running and one queued fill a room of two");
    q.started(&parent("new-2"));
    assert_eq!(q.release(), None, "two running fill it");
    q.ended();
    assert_eq!(q.release(), Some(parent("old")));
    assert_eq!(q.release(), None, "held once, released once");
}

#[test]
fn new_work_waits_while_running_and_queued_passes_fill_the_room() {
    let mut q = queue(2);
    running(&mut q, "a");
    running(&mut q, "b");
    q.fresh(parent("c"));
    assert_eq!(q.release(), None, "two running fill a room of two");
    q.ended();
    assert_eq!(q.release(), Some(parent("c")));
}

#[test]
fn a_new_parent_goes_ahead_of_every_held_recheck() {
    let mut q = queue(2);
    running(&mut q, "running");
    for i in 0..100 {
        q.hold(parent(&format!("old-{i}")));
    }
    q.fresh(parent("new"));
    assert_eq!(q.release(), Some(parent("new")));
    assert_eq!(q.release(), None, "the new parent's pass takes the room left");
    q.started(&parent("new"));
    q.ended();
    assert_eq!(q.release(), Some(parent("old-0")), "then re-checks go, oldest first");
}

#[test]
fn new_parents_take_turns_by_namespace() {
    let mut q = queue(1);
    let within = |ns: &str, name: &str| parent(name).within(ns);
    for i in 0..100 {
        q.fresh(within("burst", &format!("b{i}")));
    }
    q.fresh(within("quiet", "q"));
    assert_eq!(q.release(), Some(within("burst", "b0")));
    assert_eq!(
        q.release(),
        Some(within("quiet", "q")),
        "one of the burst, then the other namespace"
    );
}

#[test]
fn a_recheck_of_a_queued_a_waiting_or_a_held_parent_is_not_held_twice() {
    let mut q = queue(1);
    q.fresh(parent("a"));
    q.hold(parent("a"));
    q.fresh(parent("queued"));
    assert_eq!(q.release(), Some(parent("a")));
    q.hold(parent("a"));
    q.hold(parent("b"));
    q.hold(parent("b"));
    q.started(&parent("a"));
    q.ended();
    assert_eq!(q.release(), Some(parent("queued")));
    q.started(&parent("queued"));
    q.ended();
    assert_eq!(
        q.release(),
        Some(parent("b")),
        "a was waiting and then queued; b is held once"
    );
    assert_eq!(q.release(), None);
    q.started(&parent("b"));
    q.hold(parent("b"));
    q.ended();
    assert_eq!(
        q.release(),
        Some(parent("b")),
        "a running parent is re-checked after its pass"
    );
}

#[test]
fn new_work_for_a_parent_already_queued_goes_again() {
    let mut q = queue(1);
    q.fresh(parent("a"));
    assert_eq!(q.release(), Some(parent("a")));
    q.fresh(parent("a"));
    assert_eq!(
        q.release(),
        Some(parent("a")),
        "not lost if the queued pass never starts"
    );
    q.started(&parent("a"));
    assert!(q.queued.is_empty(), "counted once");
}

#[test]
fn new_work_replaces_a_held_recheck_of_the_same_parent() {
    let mut q = queue(1);
    q.hold(parent("a"));
    q.fresh(parent("a"));
    assert_eq!(q.release(), Some(parent("a")));
    q.started(&parent("a"));
    q.ended();
    assert_eq!(q.release(), None, "one pass serves both");
}

#[test]
fn with_no_pass_running_a_recheck_goes_whatever_the_queue_holds() {
    let mut q = queue(1);
    q.fresh(parent("never-started"));
    assert_eq!(q.release(), Some(parent("never-started")));
    q.hold(parent("old"));
    assert_eq!(q.release(), Some(parent("old")));
    q.started(&parent("old"));
    q.hold(parent("older"));
    assert_eq!(q.release(), None, "one running fills a room of one");
}

#[test]
fn a_forgotten_parent_leaves_the_queue_and_the_lanes() {
    let mut q = queue(2);
    running(&mut q, "running");
    q.fresh(parent("gone"));
    assert_eq!(q.release(), Some(parent("gone")));
    q.fresh(parent("waiting"));
    q.hold(parent("held"));
    assert_eq!(q.release(), None, "one running and one queued fill a room of two");
    q.forget(&parent("gone"), None);
    q.forget(&parent("waiting"), None);
    q.forget(&parent("held"), None);
    assert!(q.queued.is_empty() && q.fresh.is_empty() && q.held.is_empty());
    q.hold(parent("next"));
    assert_eq!(q.release(), Some(parent("next")), "the forgotten parents hold no place");
}

#[tokio::test]
async fn the_released_stream_yields_a_recheck_when_a_turn_ends() {
    use futures::StreamExt;
    let lanes = Lanes::new(1);
    let turn = lanes.start(&parent("running"));
    lanes.recheck(parent("old"));
    let mut released = Box::pin(lanes.clone().released());
    let early = tokio::time::timeout(std::time::Duration::from_millis(50), released.next()).await;
    assert!(early.is_err(), "no room while a pass runs");
    drop(turn);
    let next = tokio::time::timeout(std::time::Duration::from_secs(5), released.next()).await;
    assert_eq!(next.expect("released once the turn ends"), Some(parent("old")));
}
