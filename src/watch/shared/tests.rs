//! The shared watch's fan-out: snapshots, relists and the index, fed by hand.

use super::*;
use crate::labels;
use kube::core::ApiResource;

fn configmap(name: &str, uid: &str) -> DynamicObject {
    let mut o =
        DynamicObject::new(name, &ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&())).within("ns");
    o.metadata.labels = Some([(labels::PARENT_UID.to_string(), uid.to_string())].into());
    o
}

fn watch() -> SharedWatch {
    let ar = ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&());
    let gvk = Gvk::parse("v1", "ConfigMap").unwrap();
    let resolved = Resolved {
        resource: ar,
        namespaced: true,
    };
    SharedWatch::new(gvk, resolved, None)
}

/// A relist's objects reach subscribers only once the store holds them: a parent
/// created during the relist is found, one edited is read at its new version, and one
/// deleted meanwhile is published as deleted.
#[test]
fn a_relist_publishes_what_the_store_holds_after_it() {
    let shared = watch();
    shared.observe(Event::Apply(configmap("kept", "u1")));
    shared.observe(Event::Apply(configmap("deleted", "u1")));
    let mut rx = shared.subscribe();
    let mut deletions = shared.subscribe_deletions();
    while rx.try_recv().is_ok() {}
    let mut edited = configmap("kept", "u1");
    edited.metadata.resource_version = Some("2".into());
    shared.observe(Event::Init);
    shared.observe(Event::InitApply(edited));
    shared.observe(Event::InitApply(configmap("new", "u1")));
    assert!(rx.try_recv().is_err(), "nothing is published before the store holds it");
    shared.observe(Event::InitDone);
    let mut published = Vec::new();
    while let Ok(o) = rx.try_recv() {
        let name = o.name.clone().unwrap();
        let stored = shared
            .get(&shared.key_of(&o))
            .map(|s| s.metadata.resource_version.clone());
        published.push((name, stored.is_some(), o.resource_version.clone()));
    }
    assert_eq!(
        published,
        [
            ("kept".to_string(), true, Some("2".to_string())),
            ("new".to_string(), true, None),
            ("deleted".to_string(), false, None),
        ],
        "each listed object is in the store when published; the deleted one is not"
    );
    let gone = deletions.try_recv().expect("the deletion is published");
    assert_eq!(gone.metadata.name.as_deref(), Some("deleted"));
}

/// A subscriber of changes gets none of the objects stored before it subscribed.
#[test]
fn changes_leave_out_what_the_store_held_before() {
    let shared = watch();
    shared.observe(Event::Apply(configmap("a", "u1")));
    let mut rx = shared.changes();
    shared.observe(Event::Apply(configmap("b", "u1")));
    shared.observe(Event::Delete(configmap("a", "u1")));
    let names: Vec<_> = std::iter::from_fn(|| rx.try_recv().ok())
        .map(|o| o.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["b", "a"]);
}

#[test]
fn an_object_stored_before_subscribing_is_delivered_from_the_snapshot() {
    let shared = watch();
    shared.observe(Event::Apply(configmap("a", "u1")));
    let mut rx = shared.subscribe();
    shared.observe(Event::Apply(configmap("b", "u1")));
    let mut names = Vec::new();
    while let Ok(o) = rx.try_recv() {
        names.push(o.name.clone().unwrap());
    }
    assert_eq!(names, ["a", "b"]);
}

/// The race the old subscribe had: an object stored and published after the snapshot
/// but before the sender was registered was never delivered. Another thread stores and
/// publishes one exactly there; it must arrive.
#[test]
fn no_object_falls_between_the_snapshot_and_the_registration() {
    let shared = Arc::new(watch());
    let feeder_shared = shared.clone();
    let feeder = Arc::new(Mutex::new(None));
    let slot = feeder.clone();
    let between = move || {
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            feeder_shared.observe(Event::Apply(configmap("late", "u1")));
            let _ = done_tx.send(());
        });
        // Publishing waits for the lock subscribe holds, so it cannot finish here;
        // an unguarded subscribe would let it finish before the registration.
        let _ = done_rx.recv_timeout(std::time::Duration::from_millis(200));
        *slot.lock().unwrap() = Some(thread);
    };
    let mut rx = shared.subscribe_with(between);
    let thread = feeder.lock().unwrap().take().expect("the hook ran");
    thread.join().unwrap();
    let got = std::iter::from_fn(|| rx.try_recv().ok()).find(|o| o.name.as_deref() == Some("late"));
    assert!(got.is_some(), "the object stored during subscribe was never delivered");
}

#[test]
fn the_parent_index_follows_deletions_and_relists() {
    let shared = watch();
    shared.observe(Event::Apply(configmap("a", "u1")));
    shared.observe(Event::Apply(configmap("b", "u2")));
    assert_eq!(shared.children_of("", "u1").len(), 1);
    shared.observe(Event::Delete(configmap("a", "u1")));
    assert!(shared.children_of("", "u1").is_empty());
    shared.observe(Event::Init);
    shared.observe(Event::InitDone);
    assert!(shared.children_of("", "u2").is_empty(), "a relist without b drops it");
}

#[test]
fn each_definition_sees_only_its_own_children_and_parents() {
    let shared = watch();
    let of = |name: &str, definition: &str| {
        let mut o = configmap(name, "u1");
        if let Some(l) = o.metadata.labels.as_mut() {
            l.insert(labels::DEFINITION.to_string(), definition.to_string());
        }
        o
    };
    shared.observe(Event::Apply(of("a", "first")));
    shared.observe(Event::Apply(of("b", "second")));
    assert_eq!(shared.children_of("first", "u1").len(), 1);
    assert_eq!(shared.parent_uids("second"), ["u1"]);
    assert!(shared.parent_uids("third").is_empty());
    // Relabelled to another definition, the object moves with it.
    shared.observe(Event::Apply(of("a", "second")));
    assert!(shared.children_of("first", "u1").is_empty());
    assert_eq!(shared.children_of("second", "u1").len(), 2);
}

/// A failure shows until an event clears it or, for a quiet kind whose watch resumed
/// without an event, until no retry has repeated it for a while.
#[tokio::test(start_paused = true)]
async fn a_watch_failure_clears_with_an_event_or_fades_when_no_retry_repeats_it() {
    let shared = watch();
    let refused = kube::core::Status::failure("connection refused", "ServiceUnavailable").with_code(503);
    let failure = || {
        WatchFailure::new(
            kube::runtime::watcher::Error::WatchError(Box::new(refused.clone())),
            &ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()),
        )
    };
    shared.failed(failure());
    assert!(
        shared
            .error()
            .is_some_and(|e| e.starts_with("watching configmaps: ") && e.contains("connection refused"))
    );
    shared.observe(Event::Apply(configmap("a", "u1")));
    assert_eq!(shared.error(), None, "an event clears it");

    shared.failed(failure());
    tokio::time::advance(std::time::Duration::from_secs(8)).await;
    shared.failed(failure());
    tokio::time::advance(std::time::Duration::from_secs(15)).await;
    assert!(shared.error().is_some(), "repeated 15 s ago: still failing");
    tokio::time::advance(std::time::Duration::from_secs(10)).await;
    assert_eq!(shared.error(), None, "no retry failed for 25 s: the watch resumed");
}

/// The store is behind from its first list's start to its end, from a failure to the
/// first event after it, and through a relist; it caught up at the end of each.
#[test]
fn the_store_is_behind_through_a_list_and_a_failure_and_caught_up_after() {
    let shared = watch();
    let store = shared.catch_up();
    assert_eq!(store.since(), None, "no list yet");
    shared.observe(Event::Init);
    shared.observe(Event::InitApply(configmap("a", "u1")));
    assert_eq!(store.since(), None, "the first list is under way");
    shared.observe(Event::InitDone);
    let listed = store.since().expect("caught up at the list's end");
    shared.observe(Event::Apply(configmap("b", "u1")));
    assert_eq!(
        store.since(),
        Some(listed),
        "an event of a current store changes nothing"
    );

    let refused = kube::core::Status::failure("connection refused", "ServiceUnavailable").with_code(503);
    shared.failed(WatchFailure::new(
        kube::runtime::watcher::Error::WatchError(Box::new(refused)),
        &ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()),
    ));
    assert_eq!(store.since(), None, "a failed watch is behind");
    shared.observe(Event::Apply(configmap("c", "u1")));
    assert!(store.since().is_some(), "the resumed watch's first event");

    shared.observe(Event::Init);
    assert_eq!(store.since(), None, "a relist is under way");
    shared.observe(Event::InitApply(configmap("c", "u1")));
    shared.observe(Event::InitDone);
    assert!(store.since().is_some_and(|t| t >= listed));
}

/// A refused list names the rule to add and keeps the API server's answer as its source.
#[test]
fn a_forbidden_list_names_the_rule_and_keeps_its_source() {
    let status = kube::core::Status::failure("secrets is forbidden", "Forbidden").with_code(403);
    let refused = kube::runtime::watcher::Error::InitialListFailed(kube::Error::Api(Box::new(status)));
    let error = WatchFailure::new(refused, &ApiResource::erase::<k8s_openapi::api::core::v1::Secret>(&())).to_error();
    assert_eq!(error.reason(), "Forbidden");
    assert!(error.to_string().contains("add the rule"), "{error}");
    let source = std::error::Error::source(&error).expect("a typed source");
    assert!(source.to_string().contains("secrets is forbidden"), "{source}");
}
