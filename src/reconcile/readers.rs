//! Which parents care about which objects: the lookup objects they read, the selections
//! their selector lookups read, and the objects they would write but another holds. An
//! event on such an object wakes exactly those parents; an event is matched against each
//! distinct selection once, not against every parent. Each parent has one entry, replaced on every reconcile and removed with the
//! parent, so an index holds what live parents care about now and no more.

use std::collections::{HashMap, HashSet};

use kube::api::{DynamicObject, ObjectMeta};
use kube::runtime::reflector::ObjectRef;

use crate::gvk::Gvk;
use crate::object_key::ObjectKey;
use crate::selector::Matcher;

type Parent = ObjectRef<DynamicObject>;

/// What a selector lookup reads: objects of a kind, in one namespace or (none) every one,
/// that a selector matches.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct LookupSelection {
    pub(super) gvk: Gvk,
    pub(super) namespace: Option<String>,
    pub(super) matcher: Matcher,
}

impl LookupSelection {
    /// Whether an object of the selection's kind with this metadata belongs to it now.
    pub(super) fn matches(&self, meta: &ObjectMeta) -> bool {
        (self.namespace.is_none() || meta.namespace == self.namespace) && self.matcher.matches(meta.labels.as_ref())
    }
}

/// Objects (or selections) by reader, and readers by object.
pub(super) struct Readers<K = ObjectKey> {
    reads: HashMap<Parent, Vec<K>>,
    readers: HashMap<K, HashSet<Parent>>,
}

impl<K> Default for Readers<K> {
    fn default() -> Self {
        Readers {
            reads: HashMap::new(),
            readers: HashMap::new(),
        }
    }
}

impl<K: std::hash::Hash + Eq + Clone> Readers<K> {
    /// Records that `parent` reads exactly `objects` now.
    pub(super) fn set(&mut self, parent: &Parent, objects: Vec<K>) {
        if self.reads.get(parent) == Some(&objects) {
            return;
        }
        self.forget(parent);
        if objects.is_empty() {
            return;
        }
        for o in &objects {
            self.readers.entry(o.clone()).or_default().insert(parent.clone());
        }
        self.reads.insert(parent.clone(), objects);
    }

    /// Drops a parent that is gone.
    pub(super) fn forget(&mut self, parent: &Parent) {
        for o in self.reads.remove(parent).unwrap_or_default() {
            if let Some(set) = self.readers.get_mut(&o) {
                set.remove(parent);
                if set.is_empty() {
                    self.readers.remove(&o);
                }
            }
        }
    }

    /// The parents that read `object`.
    pub(super) fn readers(&self, object: &K) -> Vec<Parent> {
        self.readers
            .get(object)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Everything some parent reads, each once.
    pub(super) fn read(&self) -> impl Iterator<Item = &K> {
        self.readers.keys()
    }

    /// Every parent that reads something.
    pub(super) fn parents(&self) -> impl Iterator<Item = &Parent> {
        self.reads.keys()
    }

    /// How many parents read anything (for tests and bounds).
    #[cfg(test)]
    fn len(&self) -> (usize, usize) {
        (self.reads.len(), self.readers.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gvk::Gvk;
    use kube::core::ApiResource;

    fn parent(name: &str) -> Parent {
        let ar = ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&());
        ObjectRef::new_with(name, ar).within("ns")
    }

    fn cm(name: &str) -> ObjectKey {
        ObjectKey::new(&Gvk::parse("v1", "ConfigMap").unwrap(), Some("ns"), name)
    }

    #[test]
    fn a_new_reconcile_replaces_what_a_parent_reads() {
        let mut r = Readers::default();
        r.set(&parent("p"), vec![cm("a")]);
        r.set(&parent("p"), vec![cm("b")]);
        assert!(r.readers(&cm("a")).is_empty(), "the old read is gone");
        assert_eq!(r.readers(&cm("b")), [parent("p")]);
    }

    #[test]
    fn a_forgotten_parent_leaves_nothing_behind() {
        let mut r = Readers::default();
        for i in 0..100 {
            r.set(&parent(&format!("p{i}")), vec![cm("shared"), cm(&format!("own{i}"))]);
        }
        assert_eq!(r.readers(&cm("shared")).len(), 100);
        for i in 0..100 {
            r.forget(&parent(&format!("p{i}")));
        }
        assert_eq!(r.len(), (0, 0));
    }
}
