//! Shared watches: one reflector per kind (and label selector), shared by every definition
//! that uses the kind. kube's shared reflectors do not take DynamicObject, so each watch
//! keeps its own store and fans its events out to subscribers.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event, watcher};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use crate::discovery::{self, DiscoveryError, Resolved};
use crate::gvk::Gvk;
use crate::labels;

/// Which objects of a kind a watch sees.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Selection {
    /// Every object: parents and lookups.
    All,
    /// Only objects Stencil manages (`app.kubernetes.io/managed-by=stencil`): children.
    Managed,
}

/// One running watch of a kind.
pub struct SharedWatch {
    /// The kind.
    pub gvk: Gvk,
    /// How to reach it and its scope.
    pub resolved: Resolved,
    /// Every object seen, kept current.
    pub store: Store<DynamicObject>,
    subscribers: Mutex<Vec<UnboundedSender<Arc<DynamicObject>>>>,
    deletion_subscribers: Mutex<Vec<UnboundedSender<Arc<DynamicObject>>>>,
    last_error: Mutex<Option<String>>,
    /// Objects by their `stencil.dev/parent-uid` label, so a reconcile finds a parent's
    /// children without scanning the store.
    by_parent: Mutex<ParentIndex>,
}

/// Object keys by parent UID, and each object's parent UID.
#[derive(Default)]
struct ParentIndex {
    children: HashMap<String, HashSet<ObjectRef<DynamicObject>>>,
    parent_of: HashMap<ObjectRef<DynamicObject>, String>,
}

impl ParentIndex {
    fn remove(&mut self, key: &ObjectRef<DynamicObject>) {
        if let Some(uid) = self.parent_of.remove(key)
            && let Some(set) = self.children.get_mut(&uid)
        {
            set.remove(key);
            if set.is_empty() {
                self.children.remove(&uid);
            }
        }
    }

    fn insert(&mut self, key: ObjectRef<DynamicObject>, obj: &DynamicObject) {
        self.remove(&key);
        if let Some(uid) = obj.metadata.labels.as_ref().and_then(|l| l.get(labels::PARENT_UID)) {
            self.children.entry(uid.clone()).or_default().insert(key.clone());
            self.parent_of.insert(key, uid.clone());
        }
    }
}

impl SharedWatch {
    /// A receiver of every object that changes or disappears from now on, primed with the
    /// objects already in the store.
    pub fn subscribe(&self) -> UnboundedReceiver<Arc<DynamicObject>> {
        let (tx, rx) = unbounded_channel();
        for obj in self.store.state() {
            let _ = tx.send(obj);
        }
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
    pub fn error(&self) -> Option<String> {
        self.last_error.lock().expect("error lock").clone()
    }

    /// The objects labelled with this parent UID.
    pub fn children_of(&self, uid: &str) -> Vec<Arc<DynamicObject>> {
        let keys: Vec<ObjectRef<DynamicObject>> = self
            .by_parent
            .lock()
            .expect("index lock")
            .children
            .get(uid)
            .map(|set| set.iter().cloned().collect())
            .unwrap_or_default();
        keys.iter().filter_map(|k| self.store.get(k)).collect()
    }

    /// Keeps the parent index in step with one watch event.
    fn index(&self, event: &Event<DynamicObject>) {
        let key = |o: &DynamicObject| ObjectRef::from_obj_with(o, self.resolved.resource.clone());
        let mut index = self.by_parent.lock().expect("index lock");
        match event {
            Event::Apply(o) | Event::InitApply(o) => index.insert(key(o), o),
            Event::Delete(o) => index.remove(&key(o)),
            Event::Init => {}
            // A relist may have dropped objects deleted meanwhile: rebuild from the store.
            Event::InitDone => {
                *index = ParentIndex::default();
                for o in self.store.state() {
                    index.insert(key(&o), &o);
                }
            }
        }
    }

    fn set_error(&self, error: Option<String>) {
        *self.last_error.lock().expect("error lock") = error;
    }

    /// Publishes the store's own copy of an object that was just stored, sparing a deep
    /// copy per event.
    fn publish_stored(&self, obj: &DynamicObject) {
        let key = ObjectRef::from_obj_with(obj, self.resolved.resource.clone());
        let stored = self.store.get(&key).unwrap_or_else(|| Arc::new(obj.clone()));
        self.publish(stored);
    }

    fn publish(&self, obj: Arc<DynamicObject>) {
        send_all(&self.subscribers, &obj);
    }

    fn publish_deletion(&self, obj: &DynamicObject) {
        let obj = Arc::new(obj.clone());
        send_all(&self.subscribers, &obj);
        send_all(&self.deletion_subscribers, &obj);
    }
}

/// Sends to every subscriber, forgetting those that have gone.
fn send_all(subscribers: &Mutex<Vec<UnboundedSender<Arc<DynamicObject>>>>, obj: &Arc<DynamicObject>) {
    subscribers
        .lock()
        .expect("subscribers lock")
        .retain(|tx| tx.send(obj.clone()).is_ok());
}

/// All watches of the process, keyed by kind and selection.
pub struct Watches {
    client: Client,
    namespaces: Vec<String>,
    running: Mutex<HashMap<(Gvk, Selection), Arc<SharedWatch>>>,
}

impl Watches {
    /// An empty set; `namespaces` restricts namespaced kinds (empty: every namespace).
    pub fn new(client: Client, namespaces: Vec<String>) -> Self {
        Watches {
            client,
            namespaces,
            running: Mutex::new(HashMap::new()),
        }
    }

    /// The watch of a kind, started on first use; its store is filled before it returns.
    pub async fn get(&self, gvk: &Gvk, selection: Selection) -> Result<Arc<SharedWatch>, DiscoveryError> {
        let key = (gvk.clone(), selection.clone());
        if let Some(w) = self.running.lock().expect("watches lock").get(&key) {
            return Ok(w.clone());
        }
        let resolved = discovery::resolve(&self.client, gvk).await?;
        let mut writer = reflector::store::Writer::<DynamicObject>::new(resolved.resource.clone());
        let store = writer.as_reader();
        let shared = {
            let mut running = self.running.lock().expect("watches lock");
            if let Some(w) = running.get(&key) {
                return Ok(w.clone());
            }
            let shared = Arc::new(SharedWatch {
                gvk: gvk.clone(),
                resolved: resolved.clone(),
                store: store.clone(),
                subscribers: Mutex::new(Vec::new()),
                deletion_subscribers: Mutex::new(Vec::new()),
                last_error: Mutex::new(None),
                by_parent: Mutex::new(ParentIndex::default()),
            });
            running.insert(key, shared.clone());
            crate::metrics::METRICS.watched_kinds.set(running.len() as i64);
            shared
        };
        let config = match selection {
            Selection::All => watcher::Config::default(),
            Selection::Managed => {
                watcher::Config::default().labels(&format!("{}={}", labels::MANAGED_BY, labels::MANAGED_BY_VALUE))
            }
        };
        // One namespace is watched there alone (least privilege); several share one
        // cluster-wide watch whose events are filtered.
        let api = match (resolved.namespaced, self.namespaces.as_slice()) {
            (true, [only]) => Api::namespaced_with(self.client.clone(), only, &resolved.resource),
            _ => Api::all_with(self.client.clone(), &resolved.resource),
        };
        let keep: Vec<String> = if resolved.namespaced {
            self.namespaces.clone()
        } else {
            Vec::new()
        };
        let in_scope = move |o: &DynamicObject| {
            keep.is_empty() || o.metadata.namespace.as_ref().is_some_and(|ns| keep.contains(ns))
        };
        let mut events = watcher(api, config).backoff(RetryBackoff::new()).boxed();
        let fan_out = shared.clone();
        let types = kube::core::TypeMeta {
            api_version: resolved.resource.api_version.clone(),
            kind: resolved.resource.kind.clone(),
        };
        // Items of a list response carry no apiVersion and kind; every stored object does.
        // Managed fields are dropped: nothing reads them, and they are often half of an
        // object's size, so they would be most of the stores' memory.
        let typed = move |event: Result<Event<DynamicObject>, watcher::Error>| {
            event.map(|e| {
                e.modify(|o| {
                    if o.types.is_none() {
                        o.types = Some(types.clone());
                    }
                    o.metadata.managed_fields = None;
                })
            })
        };
        tokio::spawn(async move {
            while let Some(event) = events.next().await {
                match typed(event) {
                    Ok(Event::Apply(o) | Event::InitApply(o) | Event::Delete(o)) if !in_scope(&o) => {}
                    Ok(event) => {
                        fan_out.set_error(None);
                        writer.apply_watcher_event(&event);
                        fan_out.index(&event);
                        match &event {
                            Event::Apply(o) | Event::InitApply(o) => fan_out.publish_stored(o),
                            Event::Delete(o) => fan_out.publish_deletion(o),
                            Event::Init | Event::InitDone => {}
                        }
                    }
                    Err(e) => {
                        tracing::warn!(kind = %fan_out.gvk, error = %e, "watch failed; retrying");
                        fan_out.set_error(Some(describe_watch_error(&e, &fan_out.resolved.resource)));
                    }
                }
            }
        });
        // A store is ready once its first list has arrived.
        let _ = store.wait_until_ready().await;
        Ok(shared)
    }
}

/// How long a failing watch waits before it tries again: 0.5 s doubling to 5 s, so a
/// watch is back within seconds of the API server (kube's default waits up to 30 s).
struct RetryBackoff {
    builder: backon::ExponentialBuilder,
    delays: backon::ExponentialBackoff,
}

impl RetryBackoff {
    fn new() -> Self {
        let builder = backon::ExponentialBuilder::default()
            .with_min_delay(std::time::Duration::from_millis(500))
            .with_max_delay(std::time::Duration::from_secs(5))
            .with_jitter()
            .without_max_times();
        RetryBackoff {
            delays: backon::BackoffBuilder::build(builder),
            builder,
        }
    }
}

impl Iterator for RetryBackoff {
    type Item = std::time::Duration;

    fn next(&mut self) -> Option<Self::Item> {
        self.delays.next()
    }
}

impl kube::runtime::utils::Backoff for RetryBackoff {
    fn reset(&mut self) {
        self.delays = backon::BackoffBuilder::build(self.builder);
    }
}

/// A watch error as a status message; a forbidden one names the rule to add.
fn describe_watch_error(e: &watcher::Error, ar: &kube::core::ApiResource) -> String {
    let inner = match e {
        watcher::Error::InitialListFailed(k) | watcher::Error::WatchStartFailed(k) | watcher::Error::WatchFailed(k) => {
            Some(k)
        }
        _ => None,
    };
    match inner {
        Some(kube::Error::Api(status)) if status.code == 403 => format!(
            "forbidden to list and watch {}: add the rule {}",
            ar.plural,
            crate::rbac::missing_rule(&ar.group, &ar.plural, "list, watch")
        ),
        _ => format!("watching {}: {e}", ar.plural),
    }
}
