//! [`ObjectKey`]: one object's identity (group, kind, namespace, name), the one way
//! Stencil names an object in indexes, comparisons and messages. The version is left out
//! on purpose: the same object read at two versions is one object.

use kube::core::DynamicObject;
use serde_json::Value;

use crate::gvk::Gvk;

/// An object's identity.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    /// The API group; empty for the core group.
    pub group: String,
    /// The kind.
    pub kind: String,
    /// The namespace; none for a cluster-scoped object.
    pub namespace: Option<String>,
    /// The name.
    pub name: String,
}

impl ObjectKey {
    /// The key of an object of kind `gvk`; an empty namespace counts as none.
    pub fn new(gvk: &Gvk, namespace: Option<&str>, name: &str) -> ObjectKey {
        ObjectKey {
            group: gvk.group.clone(),
            kind: gvk.kind.clone(),
            namespace: namespace.filter(|ns| !ns.is_empty()).map(str::to_string),
            name: name.to_string(),
        }
    }

    /// The key of an object as JSON, when it has an apiVersion, a kind and a name.
    pub fn of_value(obj: &Value) -> Option<ObjectKey> {
        let gvk = Gvk::parse(obj.get("apiVersion")?.as_str()?, obj.get("kind")?.as_str()?).ok()?;
        let name = obj.pointer("/metadata/name")?.as_str()?;
        Some(ObjectKey::new(
            &gvk,
            obj.pointer("/metadata/namespace").and_then(Value::as_str),
            name,
        ))
    }

    /// The key of a stored object (stores give every object its apiVersion and kind).
    pub fn of_object(obj: &DynamicObject) -> Option<ObjectKey> {
        let types = obj.types.as_ref()?;
        let gvk = Gvk::parse(&types.api_version, &types.kind).ok()?;
        Some(ObjectKey::new(
            &gvk,
            obj.metadata.namespace.as_deref(),
            obj.metadata.name.as_deref()?,
        ))
    }
}

/// An object as JSON, the form render and rules read: a watched object, a parent, a child.
pub fn to_json(obj: &DynamicObject) -> Value {
    serde_json::to_value(obj).unwrap_or_default()
}

impl std::fmt::Display for ObjectKey {
    /// `Kind namespace/name`, or `Kind name` for a cluster-scoped object.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {ns}/{}", self.kind, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_version_is_not_part_of_the_identity() {
        let a = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "n"}});
        let b =
            json!({"apiVersion": "apps/v1beta1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "n"}});
        assert_eq!(ObjectKey::of_value(&a), ObjectKey::of_value(&b));
        assert_eq!(ObjectKey::of_value(&a).unwrap().to_string(), "Deployment n/d");
    }

    #[test]
    fn kinds_of_one_name_in_two_groups_differ() {
        let a = json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "metadata": {"name": "g"}});
        let b = json!({"apiVersion": "networking.istio.io/v1", "kind": "Gateway", "metadata": {"name": "g"}});
        assert_ne!(ObjectKey::of_value(&a), ObjectKey::of_value(&b));
    }
}
