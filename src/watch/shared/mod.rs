//! One watched kind's state: its store (objects kept compact, see [`Stored`]), an index
//! of objects by parent UID, and the subscribers its events fan out to. The task that
//! feeds it lives in the parent module.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use kube::api::{DynamicObject, ObjectMeta};
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher::Event;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use super::backoff::WatchFailure;
use super::catch_up::CatchUp;
use super::index::{Name, ParentIndex};
use super::stored::Stored;
use crate::discovery::Resolved;
use crate::gvk::Gvk;

/// Receivers of what a watch sees: the metadata of each object that changes, or whole
/// deleted objects.
type Subscribers<T> = Mutex<Senders<T>>;

/// The senders to the receivers of one kind of news.
type Senders<T> = Vec<UnboundedSender<Arc<T>>>;

/// One running watch of a kind.
pub struct SharedWatch {
    /// The kind.
    pub gvk: Gvk,
    /// How to reach it and its scope.
    pub resolved: Resolved,
    /// The one namespace its list and watch are confined to; none for a cluster-wide one.
    pub namespace: Option<String>,
    /// Every object seen, kept current.
    store: Store<Stored>,
    /// What keeps the store current; only the watch's own task writes.
    writer: Mutex<Writer<Stored>>,
    subscribers: Subscribers<ObjectMeta>,
    deletion_subscribers: Subscribers<DynamicObject>,
    failure: tokio::sync::watch::Sender<Option<WatchFailure>>,
    /// When the store last caught up with the API server.
    catch_up: Arc<CatchUp>,
    /// Objects by their `stencil.dev/definition` and `stencil.dev/parent-uid` labels, so
    /// a reconcile finds a parent's children without scanning the store.
    by_parent: Mutex<ParentIndex>,
    /// A relist under way: the store keeps its old state until the relist is done.
    relist: Mutex<Option<Relist>>,
    /// The highest resourceVersion among the objects of the last (re)list: a stored
    /// object at or below it has not changed since that list, which a lagging API
    /// server may have served old. Events bring higher versions.
    listed_up_to: AtomicU64,
    /// Objects whose name is too long for a label value, by UID: a child's
    /// `stencil.dev/parent-name` label holds a hashed form of such a name, so its parent
    /// is found by the `stencil.dev/parent-uid` label instead.
    long_named: Mutex<HashMap<String, ObjectRef<DynamicObject>>>,
}

/// What a relist has seen so far, to publish once the store holds it.
struct Relist {
    /// The store before the relist: what is missing from it after was deleted meanwhile.
    before: Vec<Arc<Stored>>,
    /// Every object the relist listed.
    listed: Vec<ObjectRef<DynamicObject>>,
    /// The highest resourceVersion among them.
    highest: u64,
}

impl SharedWatch {
    /// A watch of `gvk` whose events arrive through [`SharedWatch::observe`].
    pub(super) fn new(gvk: Gvk, resolved: Resolved, namespace: Option<String>) -> Self {
        let writer = Writer::new(resolved.resource.clone());
        SharedWatch {
            gvk,
            resolved,
            namespace,
            store: writer.as_reader(),
            writer: Mutex::new(writer),
            subscribers: Mutex::new(Vec::new()),
            deletion_subscribers: Mutex::new(Vec::new()),
            failure: tokio::sync::watch::Sender::new(None),
            catch_up: Arc::new(CatchUp::default()),
            by_parent: Mutex::new(ParentIndex::default()),
            relist: Mutex::new(None),
            listed_up_to: AtomicU64::new(0),
            long_named: Mutex::new(HashMap::new()),
        }
    }

    /// The object `key` names, as the store holds it now.
    pub fn get(&self, key: &ObjectRef<DynamicObject>) -> Option<Arc<DynamicObject>> {
        self.stored(key).map(|s| self.whole(&s))
    }

    /// Every object the store holds now.
    pub fn objects(&self) -> Vec<Arc<DynamicObject>> {
        self.store.state().iter().map(|s| self.whole(s)).collect()
    }

    /// How many objects the store holds.
    pub fn len(&self) -> usize {
        self.store.len()
    }

    /// What `f` takes from each stored object's metadata, reading no object whole.
    pub fn scan_metadata<T>(&self, f: impl FnMut(&ObjectMeta) -> Option<T>) -> Vec<T> {
        self.store
            .state()
            .iter()
            .map(|s| kube::Resource::meta(&**s))
            .filter_map(f)
            .collect()
    }

    /// The store as kube's controller reads it: what it reconciles is looked up there.
    pub fn reader(&self) -> Store<Stored> {
        self.store.clone()
    }

    /// Waits until the first list is stored.
    pub async fn synced(&self) {
        let _ = self.store.wait_until_ready().await;
    }

    /// A stored object whole, as an object of this watch's kind.
    pub fn whole(&self, stored: &Stored) -> Arc<DynamicObject> {
        Arc::new(stored.object(&self.resolved.resource))
    }

    /// Whether the stored copy with this metadata may be as a list served it: not brought
    /// by an event since. A version that is not a number counts as listed.
    pub fn as_listed(&self, meta: &ObjectMeta) -> bool {
        version(meta).is_none_or(|v| v <= self.listed_up_to.load(Ordering::Relaxed))
    }

    /// The generation the stored copy of `key` says its controller served
    /// (`status.observedGeneration`).
    pub fn served_generation(&self, key: &ObjectRef<DynamicObject>) -> Option<i64> {
        self.stored(key)?.served_generation()
    }

    /// Whether the store holds the object `key` names.
    pub fn holds(&self, key: &ObjectRef<DynamicObject>) -> bool {
        self.stored(key).is_some()
    }

    fn stored(&self, key: &ObjectRef<DynamicObject>) -> Option<Arc<Stored>> {
        self.store
            .get(&key.clone().into_kind_unchecked(self.resolved.resource.clone()))
    }

    /// The API this watch lists and watches through: a list through it sees what the
    /// watch would, fresh from the API server.
    pub fn api(&self, client: kube::Client) -> kube::Api<DynamicObject> {
        crate::discovery::api(&client, self.namespace.as_deref(), &self.resolved.resource)
    }

    /// A receiver of the metadata of every object in the store now and of every object
    /// that changes or disappears from now on: what wakes a parent is read from
    /// metadata, and the store is not read whole for it. The sender is registered while
    /// the store is read, under the lock that storing and publishing an event hold, so
    /// each event falls wholly before the snapshot or wholly after the registration:
    /// every object arrives, and a list's objects once.
    pub fn subscribe(&self) -> UnboundedReceiver<Arc<ObjectMeta>> {
        self.subscribe_with(|| {})
    }

    /// [`Self::subscribe`], running `between` after the snapshot and before the sender
    /// is registered: where a test puts a concurrent write.
    fn subscribe_with(&self, between: impl FnOnce()) -> UnboundedReceiver<Arc<ObjectMeta>> {
        let (tx, rx) = unbounded_channel();
        let mut subscribers = self.subscribers.lock().expect("subscribers lock");
        for meta in self.scan_metadata(|m| Some(Arc::new(m.clone()))) {
            let _ = tx.send(meta);
        }
        between();
        subscribers.push(tx);
        rx
    }

    /// A receiver of the metadata of every object that changes or disappears from now
    /// on, without the store's present objects: for a subscriber whose reader looks at
    /// the whole store anyway when it starts (a definition's children and lookups, read
    /// by every parent's first pass). A restart then queues nothing per stored object.
    pub fn changes(&self) -> UnboundedReceiver<Arc<ObjectMeta>> {
        let (tx, rx) = unbounded_channel();
        self.subscribers.lock().expect("subscribers lock").push(tx);
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

    /// When the store last caught up with the API server (None while it is behind), for
    /// whoever keeps what it may not show yet.
    pub fn catch_up(&self) -> Arc<CatchUp> {
        self.catch_up.clone()
    }

    /// Follows the watch's failures, for a caller waiting on its first list.
    pub(super) fn failures(&self) -> tokio::sync::watch::Receiver<Option<WatchFailure>> {
        self.failure.subscribe()
    }

    /// The objects of `definition` (its `stencil.dev/definition` label value) labelled
    /// with this parent UID.
    pub fn children_of(&self, definition: &str, uid: &str) -> Vec<Arc<DynamicObject>> {
        let names = self.by_parent.lock().expect("index lock").children_of(definition, uid);
        names
            .iter()
            .filter_map(|n| self.get(&self.key_at(n.namespace(), n.name())))
            .collect()
    }

    /// Every parent UID that an object of `definition` names.
    pub fn parent_uids(&self, definition: &str) -> Vec<String> {
        self.by_parent.lock().expect("index lock").parent_uids(definition)
    }

    /// Records a failing list or watch.
    pub(super) fn failed(&self, failure: WatchFailure) {
        self.catch_up.fell_behind();
        self.failure.send_replace(Some(failure));
    }

    /// Takes one event of the watch: stores it, clears a failure, keeps the parent index
    /// in step and tells the subscribers. Subscribing waits meanwhile, so a subscriber's
    /// snapshot is taken wholly before an event or wholly after it is published: a
    /// restart's first list reaches a subscriber once, not from both.
    pub(super) fn observe(&self, event: Event<DynamicObject>) {
        let mut subscribers = self.subscribers.lock().expect("subscribers lock");
        self.writer
            .lock()
            .expect("writer lock")
            .apply_watcher_event(&Stored::event(&event));
        let recovered = self.failure.borrow().is_some();
        if recovered {
            self.failure.send_replace(None);
        }
        self.index(&event);
        if recovered && matches!(event, Event::Apply(_) | Event::Delete(_)) {
            // A watch that resumed where it failed brings what it missed from here on.
            self.catch_up.caught_up();
        }
        match event {
            Event::Apply(o) => send_all(&mut subscribers, &Arc::new(o.metadata)),
            Event::Delete(o) => {
                send_all(&mut subscribers, &Arc::new(o.metadata.clone()));
                self.publish_deletion(Arc::new(o));
            }
            // The store swaps in a relist's objects only at its end: a subscriber that
            // looked one up before would miss a new object or read an old copy, so they
            // are published then, with what the relist found deleted.
            Event::Init => {
                self.catch_up.fell_behind();
                *self.relist.lock().expect("relist lock") = Some(Relist {
                    before: self.store.state(),
                    listed: Vec::new(),
                    highest: 0,
                });
            }
            Event::InitApply(o) => match self.relist.lock().expect("relist lock").as_mut() {
                Some(relist) => {
                    relist.highest = relist.highest.max(version(&o.metadata).unwrap_or_default());
                    relist.listed.push(self.key(&o));
                }
                None => send_all(&mut subscribers, &Arc::new(o.metadata)),
            },
            Event::InitDone => {
                self.catch_up.caught_up();
                let relist = self.relist.lock().expect("relist lock").take();
                if let Some(relist) = relist {
                    self.relisted(relist, &mut subscribers);
                }
            }
        }
    }

    /// Publishes what a relist listed once the store holds it, and what it found deleted
    /// meanwhile. Every listed object is published, changed or not: a relist re-checks
    /// every parent, as a resync does, in case something was missed while the watch was
    /// down.
    fn relisted(&self, relist: Relist, subscribers: &mut Senders<ObjectMeta>) {
        self.listed_up_to.store(relist.highest, Ordering::Relaxed);
        for key in &relist.listed {
            if let Some(stored) = self.stored(key) {
                send_all(subscribers, &Arc::new(kube::Resource::meta(&*stored).clone()));
            }
        }
        for gone in relist
            .before
            .iter()
            .filter(|o| !self.holds(&self.key_of(kube::Resource::meta(&***o))))
        {
            send_all(subscribers, &Arc::new(kube::Resource::meta(&**gone).clone()));
            self.publish_deletion(self.whole(gone));
        }
    }

    fn key(&self, o: &DynamicObject) -> ObjectRef<DynamicObject> {
        self.key_of(&o.metadata)
    }

    /// The key of the object with this metadata.
    pub fn key_of(&self, meta: &ObjectMeta) -> ObjectRef<DynamicObject> {
        self.key_at(meta.namespace.as_deref(), meta.name.as_deref().unwrap_or_default())
    }

    /// The key of the object with this namespace and name.
    pub fn key_at(&self, namespace: Option<&str>, name: &str) -> ObjectRef<DynamicObject> {
        let key = ObjectRef::new_with(name, self.resolved.resource.clone());
        match namespace {
            Some(ns) => key.within(ns),
            None => key,
        }
    }

    fn index(&self, event: &Event<DynamicObject>) {
        let mut index = self.by_parent.lock().expect("index lock");
        let mut long_named = self.long_named.lock().expect("long names lock");
        let long = |meta: &ObjectMeta, key: &ObjectRef<DynamicObject>| {
            let name = meta.name.as_deref().unwrap_or_default();
            let uid = meta.uid.clone().filter(|_| crate::labels::label_value(name) != name);
            uid.map(|uid| (uid, key.clone()))
        };
        match event {
            Event::Apply(o) | Event::InitApply(o) => {
                long_named.extend(long(&o.metadata, &self.key(o)));
                index.insert(&o.metadata);
            }
            Event::Delete(o) => {
                index.remove(&Name::of(&o.metadata));
                if let Some((uid, _)) = long(&o.metadata, &self.key(o)) {
                    long_named.remove(&uid);
                }
            }
            Event::Init => {}
            // A relist may have dropped objects deleted meanwhile: rebuild from the store.
            Event::InitDone => {
                *index = ParentIndex::default();
                long_named.clear();
                for s in self.store.state() {
                    let meta = kube::Resource::meta(&*s);
                    long_named.extend(long(meta, &self.key_of(meta)));
                    index.insert(meta);
                }
            }
        }
    }

    /// The object of `uid`, when its name is too long for a label value.
    pub fn long_named(&self, uid: &str) -> Option<ObjectRef<DynamicObject>> {
        self.long_named.lock().expect("long names lock").get(uid).cloned()
    }

    fn publish_deletion(&self, obj: Arc<DynamicObject>) {
        send_all(&mut self.deletion_subscribers.lock().expect("subscribers lock"), &obj);
    }
}

/// An object's resourceVersion as a number. The API server's versions are etcd
/// revisions, which only grow; anything else is taken as unknown.
fn version(meta: &ObjectMeta) -> Option<u64> {
    meta.resource_version.as_deref()?.parse().ok()
}

/// Sends to every subscriber, forgetting those that have gone.
fn send_all<T>(subscribers: &mut Senders<T>, obj: &Arc<T>) {
    subscribers.retain(|tx| tx.send(obj.clone()).is_ok());
}

#[cfg(test)]
mod tests;
