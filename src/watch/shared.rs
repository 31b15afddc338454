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

    /// The object `key` names, as the store holds it now.
    pub fn get(&self, key: &ObjectRef<DynamicObject>) -> Option<Arc<DynamicObject>> {
        self.store.get(key)
    }

    /// Every object the store holds now.
    pub fn objects(&self) -> Vec<Arc<DynamicObject>> {
        self.store.state()
    }

    /// The API this watch lists and watches through: a list through it sees what the
    /// watch would, fresh from the API server.
    pub fn api(&self, client: kube::Client) -> kube::Api<DynamicObject> {
        crate::discovery::api(&client, self.namespace.as_deref(), &self.resolved.resource)
    }

    /// A receiver of every object in the store now and of every object that changes or
    /// disappears from now on. The sender is registered while the store is read, under
    /// the lock that publishing takes after storing, so no event falls between the two:
    /// an object stored meanwhile arrives at most twice, never zero times.
    pub fn subscribe(&self) -> UnboundedReceiver<Arc<DynamicObject>> {
        self.subscribe_with(|| {})
    }

    /// [`Self::subscribe`], running `between` after the snapshot and before the sender
    /// is registered: where a test puts a concurrent write.
    fn subscribe_with(&self, between: impl FnOnce()) -> UnboundedReceiver<Arc<DynamicObject>> {
        let (tx, rx) = unbounded_channel();
        let mut subscribers = self.subscribers.lock().expect("subscribers lock");
        for obj in self.store.state() {
            let _ = tx.send(obj);
        }
        between();
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
    /// A failure no retry has repeated for a while is over (see [`WatchFailure::current`]).
    pub fn error(&self) -> Option<String> {
        self.failure
            .borrow()
            .as_ref()
            .filter(|f| f.current())
            .map(|f| f.to_error().to_string())
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
                .filter(|_| crate::labels::label_value(name) != name);
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
mod tests;
