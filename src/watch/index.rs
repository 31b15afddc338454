//! A watch's index of objects by the parent they name: keys by definition
//! (`stencil.dev/definition`) and parent UID, and each object's definition and parent
//! UID, so a definition finds its own children, and the parents they name, without
//! looking at another definition's. Keys are a namespace and a name only: the index
//! holds one entry per child of every parent, so it is kept small.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use kube::api::ObjectMeta;

use crate::labels;

/// An object's namespace and name, in one allocation.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Name {
    /// `namespace/name`, or `/name` for a cluster-scoped object (a namespace is never empty).
    joined: Box<str>,
}

impl Name {
    pub(super) fn of(meta: &ObjectMeta) -> Name {
        let namespace = meta.namespace.as_deref().unwrap_or_default();
        let name = meta.name.as_deref().unwrap_or_default();
        Name {
            joined: format!("{namespace}/{name}").into_boxed_str(),
        }
    }

    pub(super) fn namespace(&self) -> Option<&str> {
        Some(self.split().0).filter(|ns| !ns.is_empty())
    }

    pub(super) fn name(&self) -> &str {
        self.split().1
    }

    fn split(&self) -> (&str, &str) {
        // Namespaces are DNS labels: the first slash ends one.
        self.joined.split_once('/').unwrap_or(("", &self.joined))
    }
}

/// Children by definition and parent UID, and what each child names.
#[derive(Default)]
pub(super) struct ParentIndex {
    children: HashMap<Arc<str>, HashMap<Arc<str>, HashSet<Name>>>,
    parent_of: HashMap<Name, (Arc<str>, Arc<str>)>,
}

impl ParentIndex {
    /// Forgets the object `key` names.
    pub(super) fn remove(&mut self, key: &Name) {
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

    /// Indexes the object with this metadata by the parent its labels name, if any.
    pub(super) fn insert(&mut self, meta: &ObjectMeta) {
        let key = Name::of(meta);
        self.remove(&key);
        let labels = meta.labels.as_ref();
        let Some(uid) = labels.and_then(|l| l.get(labels::PARENT_UID)) else {
            return;
        };
        let definition = labels
            .and_then(|l| l.get(labels::DEFINITION))
            .map_or("", String::as_str);
        // The definition and UID strings are shared by every child that names them.
        let definition: Arc<str> = self
            .children
            .get_key_value(definition)
            .map_or_else(|| definition.into(), |(d, _)| d.clone());
        let parents = self.children.entry(definition.clone()).or_default();
        let uid: Arc<str> = parents
            .get_key_value(uid.as_str())
            .map_or_else(|| uid.as_str().into(), |(u, _)| u.clone());
        parents.entry(uid.clone()).or_default().insert(key.clone());
        self.parent_of.insert(key, (definition, uid));
    }

    /// The objects of `definition` that name the parent `uid`.
    pub(super) fn children_of(&self, definition: &str, uid: &str) -> Vec<Name> {
        self.children
            .get(definition)
            .and_then(|parents| parents.get(uid))
            .map(|set| set.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Every parent UID an object of `definition` names.
    pub(super) fn parent_uids(&self, definition: &str) -> Vec<String> {
        self.children
            .get(definition)
            .map(|parents| parents.keys().map(|u| u.to_string()).collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(namespace: Option<&str>, name: &str, definition: &str, uid: &str) -> ObjectMeta {
        ObjectMeta {
            namespace: namespace.map(Into::into),
            name: Some(name.into()),
            labels: Some(
                [
                    (labels::DEFINITION.to_string(), definition.to_string()),
                    (labels::PARENT_UID.to_string(), uid.to_string()),
                ]
                .into(),
            ),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn a_name_keeps_its_namespace_or_its_absence() {
        let namespaced = Name::of(&meta(Some("ns"), "a/b", "d", "u"));
        assert_eq!((namespaced.namespace(), namespaced.name()), (Some("ns"), "a/b"));
        let cluster = Name::of(&meta(None, "a", "d", "u"));
        assert_eq!((cluster.namespace(), cluster.name()), (None, "a"));
    }

    #[test]
    fn a_child_moves_with_its_labels_and_leaves_no_empty_entries() {
        let mut index = ParentIndex::default();
        index.insert(&meta(Some("ns"), "a", "d", "u1"));
        index.insert(&meta(Some("ns"), "b", "d", "u1"));
        index.insert(&meta(None, "a", "d", "u1"));
        assert_eq!(index.children_of("d", "u1").len(), 3);
        index.insert(&meta(Some("ns"), "a", "e", "u2"));
        assert_eq!(index.children_of("d", "u1").len(), 2);
        assert_eq!(index.parent_uids("e"), ["u2"]);
        index.remove(&Name::of(&meta(Some("ns"), "a", "e", "u2")));
        assert!(index.parent_uids("e").is_empty());
        assert!(!index.children.contains_key("e"), "an emptied definition is dropped");
    }
}
