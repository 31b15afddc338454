//! The children this controller created that their watch has not shown yet. A watch
//! event normally follows its write within milliseconds, but a slow watch (or one that
//! relists) can hold it far longer. A pass in that window would find the child absent:
//! it would write it again, judge the parent's status without it, or tear the parent
//! down without it. Until the watch tells of the object (any event of its uid), or
//! [`STORE_LAG`] passes with its store current (an outage or a relist does not count),
//! passes take the API server's answer to the write for it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use kube::api::DynamicObject;

use super::ledger::STORE_LAG;
use crate::object_key::ObjectKey;
use crate::watch::CatchUp;

/// How many entries are kept before the expired ones are swept, at least.
const SWEEP_FLOOR: usize = 64;

/// Created children the watch has not shown, by object and by parent uid.
#[derive(Default)]
pub(super) struct Unseen {
    objects: HashMap<ObjectKey, Entry>,
    by_parent: HashMap<String, Vec<ObjectKey>>,
    /// The number of entries at which expired ones are swept next: sweeping at twice
    /// the size left keeps a burst of creates linear.
    sweep_at: usize,
}

struct Entry {
    parent_uid: String,
    object: Arc<DynamicObject>,
    at: Instant,
    /// When the store of the object's kind last caught up.
    store: Arc<CatchUp>,
}

impl Entry {
    /// Kept while its store is behind, and for [`STORE_LAG`] after both the create and
    /// the store's catching up: a watch down longer than that brings the object later.
    fn fresh(&self, now: Instant) -> bool {
        self.store
            .since()
            .is_none_or(|current| now.duration_since(self.at.max(current)) < STORE_LAG)
    }
}

impl Unseen {
    /// Notes that a pass of the parent `parent_uid` created `object` (the API server's
    /// answer), which the watch whose store is `store` will show.
    pub(super) fn created(&mut self, parent_uid: &str, object: Arc<DynamicObject>, store: Arc<CatchUp>) {
        let Some(key) = ObjectKey::of_object(&object) else {
            return;
        };
        self.sweep();
        let entry = Entry {
            parent_uid: parent_uid.to_string(),
            object,
            at: Instant::now(),
            store,
        };
        if let Some(old) = self.objects.insert(key.clone(), entry) {
            self.unlink(&old.parent_uid, &key);
        }
        self.by_parent.entry(parent_uid.to_string()).or_default().push(key);
    }

    /// Notes a later write of an object still unseen, so passes read the newest answer.
    pub(super) fn updated(&mut self, object: &DynamicObject) {
        if self.objects.is_empty() {
            return;
        }
        let Some(key) = ObjectKey::of_object(object) else {
            return;
        };
        if let Some(entry) = self.objects.get_mut(&key)
            && entry.object.metadata.uid == object.metadata.uid
        {
            entry.object = Arc::new(object.clone());
        }
    }

    /// The object at `key` when this controller created it recently and its watch has
    /// not shown it yet.
    pub(super) fn get(&self, key: &ObjectKey) -> Option<Arc<DynamicObject>> {
        let now = Instant::now();
        let entry = self.objects.get(key)?;
        entry.fresh(now).then(|| entry.object.clone())
    }

    /// The unseen children of the parent `parent_uid`.
    pub(super) fn children_of(&self, parent_uid: &str) -> Vec<Arc<DynamicObject>> {
        self.by_parent
            .get(parent_uid)
            .into_iter()
            .flatten()
            .filter_map(|key| self.get(key))
            .collect()
    }

    /// Adds to `stored`, the children of the parent `parent_uid` its store holds, those
    /// created that it does not hold yet. A name the store holds speaks for itself from
    /// then on.
    pub(super) fn add_to(&mut self, parent_uid: &str, stored: &mut Vec<Arc<DynamicObject>>) {
        for object in self.children_of(parent_uid) {
            let Some(key) = ObjectKey::of_object(&object) else {
                continue;
            };
            if stored.iter().any(|c| ObjectKey::of_object(c).as_ref() == Some(&key)) {
                self.seen(&key, object.metadata.uid.as_deref());
            } else {
                stored.push(object);
            }
        }
    }

    /// The watch told of the object at `key` as `uid`: its store holds it (or holds its
    /// deletion) from now on. An event of an older object under the same name (one
    /// deleted before the create, held by a slow watch) tells nothing of the new one.
    pub(super) fn seen(&mut self, key: &ObjectKey, uid: Option<&str>) {
        let Some(entry) = self.objects.get(key) else {
            return;
        };
        if entry.object.metadata.uid.as_deref() != uid {
            return;
        }
        let parent = entry.parent_uid.clone();
        self.objects.remove(key);
        self.unlink(&parent, key);
    }

    /// Drops what is kept of the parent `parent_uid`'s children.
    pub(super) fn forget(&mut self, parent_uid: &str) {
        for key in self.by_parent.remove(parent_uid).unwrap_or_default() {
            self.objects.remove(&key);
        }
    }

    fn unlink(&mut self, parent_uid: &str, key: &ObjectKey) {
        if let Some(keys) = self.by_parent.get_mut(parent_uid) {
            keys.retain(|k| k != key);
            if keys.is_empty() {
                self.by_parent.remove(parent_uid);
            }
        }
    }

    /// Drops the entries past [`STORE_LAG`] once there are enough of them to matter.
    fn sweep(&mut self) {
        if self.objects.len() < self.sweep_at.max(SWEEP_FLOOR) {
            return;
        }
        let now = Instant::now();
        let expired: Vec<(ObjectKey, String)> = self
            .objects
            .iter()
            .filter(|(_, e)| !e.fresh(now))
            .map(|(k, e)| (k.clone(), e.parent_uid.clone()))
            .collect();
        for (key, parent) in expired {
            self.objects.remove(&key);
            self.unlink(&parent, &key);
        }
        self.sweep_at = self.objects.len() * 2;
    }

    /// How many objects are kept (tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.objects.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn configmap(name: &str, uid: &str) -> Arc<DynamicObject> {
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "ns", "uid": uid, "resourceVersion": "1"}});
        Arc::new(serde_json::from_value(object).unwrap())
    }

    /// A store that has been current for a long while.
    fn current() -> Arc<CatchUp> {
        Arc::new(CatchUp::caught_up_at(Instant::now() - STORE_LAG * 2))
    }

    fn key(name: &str) -> ObjectKey {
        ObjectKey::of_object(&configmap(name, "")).unwrap()
    }

    #[test]
    fn a_created_child_is_found_until_its_own_event_comes() {
        let mut unseen = Unseen::default();
        unseen.created("p", configmap("a", "u1"), current());
        unseen.created("p", configmap("b", "u2"), current());
        assert_eq!(unseen.children_of("p").len(), 2);
        assert_eq!(unseen.get(&key("a")).unwrap().metadata.uid.as_deref(), Some("u1"));
        assert!(unseen.children_of("other").is_empty());
        unseen.seen(&key("a"), Some("u0"));
        assert!(
            unseen.get(&key("a")).is_some(),
            "an event of an older object of that name says nothing"
        );
        unseen.seen(&key("a"), Some("u1"));
        assert!(unseen.get(&key("a")).is_none(), "its own event: the store holds it");
        assert_eq!(unseen.children_of("p").len(), 1);
        unseen.seen(&key("b"), Some("u2"));
        assert!(unseen.by_parent.is_empty() && unseen.len() == 0, "nothing kept");
        unseen.created("p", configmap("c", "u3"), current());
        unseen.forget("p");
        assert!(unseen.by_parent.is_empty() && unseen.len() == 0, "a parent forgotten");
    }

    #[test]
    fn a_later_write_replaces_the_answer_kept() {
        let mut unseen = Unseen::default();
        unseen.created("p", configmap("a", "u1"), current());
        let mut newer = (*configmap("a", "u1")).clone();
        newer.metadata.resource_version = Some("2".into());
        unseen.updated(&newer);
        unseen.updated(&configmap("a", "u9"));
        let kept = unseen.get(&key("a")).unwrap();
        assert_eq!(kept.metadata.resource_version.as_deref(), Some("2"));
        assert_eq!(kept.metadata.uid.as_deref(), Some("u1"), "another object is not it");
    }

    #[test]
    fn an_object_created_again_moves_to_its_new_parent() {
        let mut unseen = Unseen::default();
        unseen.created("p", configmap("a", "u1"), current());
        unseen.created("q", configmap("a", "u2"), current());
        assert!(unseen.children_of("p").is_empty());
        assert_eq!(unseen.children_of("q").len(), 1);
        assert_eq!(unseen.len(), 1);
    }

    #[test]
    fn an_entry_outlives_the_lag_while_its_store_is_behind_and_for_the_lag_after() {
        let mut unseen = Unseen::default();
        let just = Instant::now() - STORE_LAG / 2;
        unseen.created("p", configmap("behind", "u1"), Arc::new(CatchUp::default()));
        unseen.created("p", configmap("caught-up", "u2"), Arc::new(CatchUp::caught_up_at(just)));
        unseen.created("p", configmap("current", "u3"), current());
        for entry in unseen.objects.values_mut() {
            entry.at = Instant::now() - STORE_LAG * 3;
        }
        assert!(unseen.get(&key("behind")).is_some(), "its watch is down or relisting");
        assert!(unseen.get(&key("caught-up")).is_some(), "its store caught up only now");
        assert!(
            unseen.get(&key("current")).is_none(),
            "positive control: past the lag with its store current"
        );
    }

    #[test]
    fn expired_entries_are_swept_once_there_are_enough() {
        let mut unseen = Unseen::default();
        let old = Instant::now() - STORE_LAG;
        for i in 0..SWEEP_FLOOR {
            unseen.created("p", configmap(&format!("c{i}"), &format!("u{i}")), current());
        }
        for entry in unseen.objects.values_mut() {
            entry.at = old;
        }
        assert!(unseen.children_of("p").is_empty(), "expired entries are not read");
        unseen.created("p", configmap("new", "n"), current());
        assert_eq!(unseen.len(), 1, "the sweep dropped the expired ones");
        assert_eq!(unseen.by_parent["p"], vec![key("new")]);
    }
}
