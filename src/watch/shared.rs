//! One watched kind's state: its store, an index of objects by parent UID, and the
//! subscribers its events fan out to. The task that feeds it lives in the parent module.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use kube::api::DynamicObject;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher::Event;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use super::backoff::WatchFailure;
use crate::discovery::Resolved;
use crate::gvk::Gvk;
use crate::labels;

type Subscribers = Mutex<Vec<UnboundedSender<Arc<DynamicObject>>>>;

/// One running watch of a kind.
pub struct SharedWatch {
    /// The kind.
    pub gvk: Gvk,
    /// How to reach it and its scope.
    pub resolved: Resolved,
    /// The one namespace its list and watch are confined to; none for a cluster-wide one.
    pub namespace: Option<String>,
    /// Every object seen, kept current.
    pub store: Store<DynamicObject>,
    subscribers: Subscribers,
    deletion_subscribers: Subscribers,
    failure: tokio::sync::watch::Sender<Option<WatchFailure>>,
    /// Objects by their `stencil.dev/definition` and `stencil.dev/parent-uid` labels, so
    /// a reconcile finds a parent's children without scanning the store.
    by_parent: Mutex<ParentIndex>,
    /// A relist under way: the store keeps its old state until the relist is done.
    relist: Mutex<Option<Relist>>,
    /// Objects whose name is too long for a label value, by UID: a child's
    /// `stencil.dev/parent-name` label holds a hashed form of such a name, so its parent
    /// is found by the `stencil.dev/parent-uid` label instead.
    long_named: Mutex<HashMap<String, ObjectRef<DynamicObject>>>,
}

/// What a relist has seen so far, to publish once the store holds it.
struct Relist {
    /// The store before the relist: what is missing from it after was deleted meanwhile.
    before: Vec<Arc<DynamicObject>>,
    /// Every object the relist listed.
    listed: Vec<ObjectRef<DynamicObject>>,
}

/// Object keys by definition (`stencil.dev/definition`) and parent UID, and each
/// object's definition and parent UID. A definition finds its own children, and the
/// parents they name, without looking at another definition's.
#[derive(Default)]
struct ParentIndex {
    children: HashMap<String, HashMap<String, HashSet<ObjectRef<DynamicObject>>>>,
    parent_of: HashMap<ObjectRef<DynamicObject>, (String, String)>,
}

impl ParentIndex {
    fn remove(&mut self, key: &ObjectRef<DynamicObject>) {
        let Some((definition, uid)) = self.parent_of.remove(key) else {
            return;
        };
        if let Some(parents) = self.children.get_mut(&definition) {
            if let Some(set) = parents.get_mut(&uid) {
                set.remove(key);
                if set.is_empty() {
                    parents.remove(&uid);
                }
            }
            if parents.is_empty() {
                self.children.remove(&definition);
            }
        }
    }

    fn insert(&mut self, key: ObjectRef<DynamicObject>, obj: &DynamicObject) {
        self.remove(&key);
        let labels = obj.metadata.labels.as_ref();
        if let Some(uid) = labels.and_then(|l| l.get(labels::PARENT_UID)) {
            let definition = labels
                .and_then(|l| l.get(labels::DEFINITION))
                .cloned()
                .unwrap_or_default();
            self.children
                .entry(definition.clone())
                .or_default()
                .entry(uid.clone())
                .or_default()
                .insert(key.clone());
            self.parent_of.insert(key, (definition, uid.clone()));
        }
    }
}

impl SharedWatch {
    /// A watch of `gvk` whose events arrive through [`SharedWatch::observe`].
    pub(super) fn new(gvk: Gvk, resolved: Resolved, namespace: Option<String>, store: Store<DynamicObject>) -> Self {
        SharedWatch {
            gvk,
            resolved,
            namespace,
            store,
            subscribers: Mutex::new(Vec::new()),
            deletion_subscribers: Mutex::new(Vec::new()),
            failure: tokio::sync::watch::Sender::new(None),
            by_parent: Mutex::new(ParentIndex::default()),
            relist: Mutex::new(None),
            long_named: Mutex::new(HashMap::new()),
        }
    }

    /// The API this watch lists and watches through: a list through it sees what the
    /// watch would, fresh from the API server.
    pub fn api(&self, client: kube::Client) -> kube::Api<DynamicObject> {
        match &self.namespace {
            Some(ns) => kube::Api::namespaced_with(client, ns, &self.resolved.resource),
            None => kube::Api::all_with(client, &self.resolved.resource),
        }
    }

    /// A receiver of every object in the store now and of every object that changes or
    /// disappears from now on. The sender is registered while the store is read, under
    /// the lock that publishing takes after storing, so no event falls between the two:
    /// an object stored meanwhile arrives at most twice, never zero times.
    pub fn subscribe(&self) -> UnboundedReceiver<Arc<DynamicObject>> {
        let (tx, rx) = unbounded_channel();
        let mut subscribers = self.subscribers.lock().expect("subscribers lock");
        for obj in self.store.state() {
            let _ = tx.send(obj);
        }
        #[cfg(test)]
        tests::between_snapshot_and_registration();
        subscribers.push(tx);
        rx
    }

    /// A receiver of every object whose deletion the watch reports from now on. A
    /// deletion that happened while the watch was relisting is not reported.
    pub fn subscribe_deletions(&self) -> UnboundedReceiver<Arc<DynamicObject>> {
        let (tx, rx) = unbounded_channel();
        self.deletion_subscribers.lock().expect("subscribers lock").push(tx);
        rx
    }

    /// Why the watch is failing, if it is: a forbidden list or watch names the missing rule.
    pub fn error(&self) -> Option<String> {
        self.failure.borrow().as_ref().map(|f| f.message.clone())
    }

    /// Follows the watch's failures, for a caller waiting on its first list.
    pub(super) fn failures(&self) -> tokio::sync::watch::Receiver<Option<WatchFailure>> {
        self.failure.subscribe()
    }

    /// The objects of `definition` (its `stencil.dev/definition` label value) labelled
    /// with this parent UID.
    pub fn children_of(&self, definition: &str, uid: &str) -> Vec<Arc<DynamicObject>> {
        let keys: Vec<ObjectRef<DynamicObject>> = self
            .by_parent
            .lock()
            .expect("index lock")
            .children
            .get(definition)
            .and_then(|parents| parents.get(uid))
            .map(|set| set.iter().cloned().collect())
            .unwrap_or_default();
        keys.iter().filter_map(|k| self.store.get(k)).collect()
    }

    /// Every parent UID that an object of `definition` names.
    pub fn parent_uids(&self, definition: &str) -> Vec<String> {
        self.by_parent
            .lock()
            .expect("index lock")
            .children
            .get(definition)
            .map(|parents| parents.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// Records a failing list or watch.
    pub(super) fn failed(&self, failure: WatchFailure) {
        self.failure.send_replace(Some(failure));
    }

    /// Takes one event that the store has already applied: clears a failure, keeps the
    /// parent index in step and tells the subscribers.
    pub(super) fn observe(&self, event: &Event<DynamicObject>) {
        if self.failure.borrow().is_some() {
            self.failure.send_replace(None);
        }
        self.index(event);
        match event {
            Event::Apply(o) => self.publish_stored(o),
            Event::Delete(o) => self.publish_deletion(o),
            // The store swaps in a relist's objects only at its end: a subscriber that
            // looked one up before would miss a new object or read an old copy, so they
            // are published then, with what the relist found deleted.
            Event::Init => {
                *self.relist.lock().expect("relist lock") = Some(Relist {
                    before: self.store.state(),
                    listed: Vec::new(),
                });
            }
            Event::InitApply(o) => match self.relist.lock().expect("relist lock").as_mut() {
                Some(relist) => relist.listed.push(self.key(o)),
                None => self.publish_stored(o),
            },
            Event::InitDone => {
                let Some(relist) = self.relist.lock().expect("relist lock").take() else {
                    return;
                };
                for key in &relist.listed {
                    if let Some(stored) = self.store.get(key) {
                        send_all(&self.subscribers, &stored);
                    }
                }
                for gone in relist.before.iter().filter(|o| self.store.get(&self.key(o)).is_none()) {
                    send_all(&self.subscribers, gone);
                    send_all(&self.deletion_subscribers, gone);
                }
            }
        }
    }

    fn key(&self, o: &DynamicObject) -> ObjectRef<DynamicObject> {
        ObjectRef::from_obj_with(o, self.resolved.resource.clone())
    }

    fn index(&self, event: &Event<DynamicObject>) {
        let mut index = self.by_parent.lock().expect("index lock");
        let mut long_named = self.long_named.lock().expect("long names lock");
        let long = |o: &DynamicObject| {
            let name = o.metadata.name.as_deref().unwrap_or_default();
            let uid = o
                .metadata
                .uid
                .clone()
                .filter(|_| crate::render::label_value(name) != name);
            uid.map(|uid| (uid, self.key(o)))
        };
        match event {
            Event::Apply(o) | Event::InitApply(o) => {
                index.insert(self.key(o), o);
                long_named.extend(long(o));
            }
            Event::Delete(o) => {
                index.remove(&self.key(o));
                if let Some((uid, _)) = long(o) {
                    long_named.remove(&uid);
                }
            }
            Event::Init => {}
            // A relist may have dropped objects deleted meanwhile: rebuild from the store.
            Event::InitDone => {
                *index = ParentIndex::default();
                long_named.clear();
                for o in self.store.state() {
                    index.insert(self.key(&o), &o);
                    long_named.extend(long(&o));
                }
            }
        }
    }

    /// The object of `uid`, when its name is too long for a label value.
    pub fn long_named(&self, uid: &str) -> Option<ObjectRef<DynamicObject>> {
        self.long_named.lock().expect("long names lock").get(uid).cloned()
    }

    /// Publishes the store's own copy of an object that was just stored, sparing a deep
    /// copy per event.
    fn publish_stored(&self, obj: &DynamicObject) {
        let stored = self.store.get(&self.key(obj)).unwrap_or_else(|| Arc::new(obj.clone()));
        send_all(&self.subscribers, &stored);
    }

    fn publish_deletion(&self, obj: &DynamicObject) {
        let obj = Arc::new(obj.clone());
        send_all(&self.subscribers, &obj);
        send_all(&self.deletion_subscribers, &obj);
    }
}

/// Sends to every subscriber, forgetting those that have gone.
fn send_all(subscribers: &Subscribers, obj: &Arc<DynamicObject>) {
    subscribers
        .lock()
        .expect("subscribers lock")
        .retain(|tx| tx.send(obj.clone()).is_ok());
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::ApiResource;
    use kube::runtime::reflector::store::Writer;

    fn configmap(name: &str, uid: &str) -> DynamicObject {
        let mut o =
            DynamicObject::new(name, &ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&())).within("ns");
        o.metadata.labels = Some([(labels::PARENT_UID.to_string(), uid.to_string())].into());
        o
    }

    fn watch() -> (Writer<DynamicObject>, SharedWatch) {
        let ar = ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&());
        let writer = Writer::new(ar.clone());
        let gvk = Gvk::parse("v1", "ConfigMap").unwrap();
        let resolved = Resolved {
            resource: ar,
            namespaced: true,
        };
        let shared = SharedWatch::new(gvk, resolved, None, writer.as_reader());
        (writer, shared)
    }

    fn feed(writer: &mut Writer<DynamicObject>, shared: &SharedWatch, event: Event<DynamicObject>) {
        writer.apply_watcher_event(&event);
        shared.observe(&event);
    }

    /// A relist's objects reach subscribers only once the store holds them: a parent
    /// created during the relist is found, one edited is read at its new version, and one
    /// deleted meanwhile is published as deleted.
    #[test]
    fn a_relist_publishes_what_the_store_holds_after_it() {
        let (mut writer, shared) = watch();
        feed(&mut writer, &shared, Event::Apply(configmap("kept", "u1")));
        feed(&mut writer, &shared, Event::Apply(configmap("deleted", "u1")));
        let mut rx = shared.subscribe();
        let mut deletions = shared.subscribe_deletions();
        while rx.try_recv().is_ok() {}
        let mut edited = configmap("kept", "u1");
        edited.metadata.resource_version = Some("2".into());
        feed(&mut writer, &shared, Event::Init);
        feed(&mut writer, &shared, Event::InitApply(edited));
        feed(&mut writer, &shared, Event::InitApply(configmap("new", "u1")));
        assert!(rx.try_recv().is_err(), "nothing is published before the store holds it");
        feed(&mut writer, &shared, Event::InitDone);
        let mut published = Vec::new();
        while let Ok(o) = rx.try_recv() {
            let name = o.metadata.name.clone().unwrap();
            let stored = shared
                .store
                .get(&shared.key(&o))
                .map(|s| s.metadata.resource_version.clone());
            published.push((name, stored.is_some(), o.metadata.resource_version.clone()));
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

    #[test]
    fn an_object_stored_before_subscribing_is_delivered_from_the_snapshot() {
        let (mut writer, shared) = watch();
        feed(&mut writer, &shared, Event::Apply(configmap("a", "u1")));
        let mut rx = shared.subscribe();
        feed(&mut writer, &shared, Event::Apply(configmap("b", "u1")));
        let mut names = Vec::new();
        while let Ok(o) = rx.try_recv() {
            names.push(o.metadata.name.clone().unwrap());
        }
        assert_eq!(names, ["a", "b"]);
    }

    thread_local! {
        /// Run by `subscribe` between reading the store and registering its sender.
        static BETWEEN: std::cell::RefCell<Option<Box<dyn FnOnce()>>> = const { std::cell::RefCell::new(None) };
    }

    pub(super) fn between_snapshot_and_registration() {
        if let Some(hook) = BETWEEN.with(|b| b.borrow_mut().take()) {
            hook();
        }
    }

    /// The race the old subscribe had: an object stored and published after the snapshot
    /// but before the sender was registered was never delivered. Another thread stores and
    /// publishes one exactly there; it must arrive.
    #[test]
    fn no_object_falls_between_the_snapshot_and_the_registration() {
        let (writer, shared) = watch();
        let shared = Arc::new(shared);
        let writer = Arc::new(Mutex::new(writer));
        let (feeder_shared, feeder_writer) = (shared.clone(), writer.clone());
        let feeder = Arc::new(Mutex::new(None));
        let slot = feeder.clone();
        BETWEEN.with(|b| {
            *b.borrow_mut() = Some(Box::new(move || {
                let (done_tx, done_rx) = std::sync::mpsc::channel();
                let thread = std::thread::spawn(move || {
                    feed(
                        &mut feeder_writer.lock().unwrap(),
                        &feeder_shared,
                        Event::Apply(configmap("late", "u1")),
                    );
                    let _ = done_tx.send(());
                });
                // Publishing waits for the lock subscribe holds, so it cannot finish here;
                // an unguarded subscribe would let it finish before the registration.
                let _ = done_rx.recv_timeout(std::time::Duration::from_millis(200));
                *slot.lock().unwrap() = Some(thread);
            }))
        });
        let mut rx = shared.subscribe();
        let thread = feeder.lock().unwrap().take().expect("the hook ran");
        thread.join().unwrap();
        let got = std::iter::from_fn(|| rx.try_recv().ok()).find(|o| o.metadata.name.as_deref() == Some("late"));
        assert!(got.is_some(), "the object stored during subscribe was never delivered");
    }

    #[test]
    fn the_parent_index_follows_deletions_and_relists() {
        let (mut writer, shared) = watch();
        feed(&mut writer, &shared, Event::Apply(configmap("a", "u1")));
        feed(&mut writer, &shared, Event::Apply(configmap("b", "u2")));
        assert_eq!(shared.children_of("", "u1").len(), 1);
        feed(&mut writer, &shared, Event::Delete(configmap("a", "u1")));
        assert!(shared.children_of("", "u1").is_empty());
        feed(&mut writer, &shared, Event::Init);
        feed(&mut writer, &shared, Event::InitDone);
        assert!(shared.children_of("", "u2").is_empty(), "a relist without b drops it");
    }

    #[test]
    fn each_definition_sees_only_its_own_children_and_parents() {
        let (mut writer, shared) = watch();
        let of = |name: &str, definition: &str| {
            let mut o = configmap(name, "u1");
            if let Some(l) = o.metadata.labels.as_mut() {
                l.insert(labels::DEFINITION.to_string(), definition.to_string());
            }
            o
        };
        feed(&mut writer, &shared, Event::Apply(of("a", "first")));
        feed(&mut writer, &shared, Event::Apply(of("b", "second")));
        assert_eq!(shared.children_of("first", "u1").len(), 1);
        assert_eq!(shared.parent_uids("second"), ["u1"]);
        assert!(shared.parent_uids("third").is_empty());
        // Relabelled to another definition, the object moves with it.
        feed(&mut writer, &shared, Event::Apply(of("a", "second")));
        assert!(shared.children_of("first", "u1").is_empty());
        assert_eq!(shared.children_of("second", "u1").len(), 2);
    }
}
