//! An object as a watch's store keeps it: its metadata typed, because keys, labels and
//! owners are read on every event, and the rest (spec, status, data) as compact JSON
//! text, parsed again when a pass reads the object. A parsed body (serde_json's `Value`
//! with ordered maps) takes five to ten times the bytes of its text, and a store holds
//! every object of its kind for as long as the process runs, while a pass reads a few.
//! `status.observedGeneration` is kept aside, read when a parent is first seen.

use std::borrow::Cow;

use kube::api::{DynamicObject, ObjectMeta};
use kube::core::{ApiResource, DynamicResourceScope, TypeMeta};
use kube::runtime::watcher::Event;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// One stored object; [`Stored::object`] gives it back whole.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    metadata: ObjectMeta,
    /// Everything beside `apiVersion`, `kind` and `metadata`, as JSON text.
    body: Box<str>,
    /// `status.observedGeneration`: the generation the object's controller last served.
    served: Option<i64>,
}

impl Stored {
    /// Keeps `obj`'s metadata and its body as text.
    pub fn compact(obj: &DynamicObject) -> Stored {
        Stored {
            metadata: obj.metadata.clone(),
            body: serde_json::to_string(&obj.data)
                .expect("a JSON value serializes")
                .into_boxed_str(),
            served: obj.data.pointer("/status/observedGeneration").and_then(Value::as_i64),
        }
    }

    /// The generation its `status.observedGeneration` says was served, if it says one.
    pub fn served_generation(&self) -> Option<i64> {
        self.served
    }

    /// The object whole again, as an object of `resource`.
    pub fn object(&self, resource: &ApiResource) -> DynamicObject {
        DynamicObject {
            types: Some(TypeMeta {
                api_version: resource.api_version.clone(),
                kind: resource.kind.clone(),
            }),
            metadata: self.metadata.clone(),
            // The text was written from a `Value` by the same serializer.
            data: serde_json::from_str(&self.body).expect("stored JSON parses"),
        }
    }

    /// A store's event for a watch's event.
    pub fn event(event: &Event<DynamicObject>) -> Event<Stored> {
        match event {
            Event::Apply(o) => Event::Apply(Stored::compact(o)),
            Event::Delete(o) => Event::Delete(Stored::compact(o)),
            Event::InitApply(o) => Event::InitApply(Stored::compact(o)),
            Event::Init => Event::Init,
            Event::InitDone => Event::InitDone,
        }
    }
}

impl kube::Resource for Stored {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }

    fn group(dt: &ApiResource) -> Cow<'_, str> {
        dt.group.as_str().into()
    }

    fn version(dt: &ApiResource) -> Cow<'_, str> {
        dt.version.as_str().into()
    }

    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// kube's controller asks that what it reconciles can be read from the API server; a
/// stored object is read as an object and kept compact.
impl<'de> Deserialize<'de> for Stored {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        DynamicObject::deserialize(deserializer).map(|o| Stored::compact(&o))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_stored_object_reads_back_as_it_was_with_its_kind() {
        let resource = ApiResource::erase::<k8s_openapi::api::apps::v1::Deployment>(&());
        let original: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "ns", "labels": {"app": "web"}},
            "spec": {"replicas": 3, "ratio": 0.25, "big": u64::MAX, "paused": false,
                "template": {"spec": {"containers": [{"name": "app", "image": "nginx"}]}}},
            "status": {"conditions": [{"type": "Available", "status": "True"}]},
        }))
        .unwrap();
        let stored = Stored::compact(&original);
        let mut listed = original.clone();
        listed.types = None;
        assert_eq!(
            Stored::compact(&listed).object(&resource),
            original,
            "the kind comes from the resource"
        );
        assert_eq!(stored.object(&resource), original);
        assert_eq!(
            serde_json::to_string(&stored.object(&resource).data).unwrap(),
            serde_json::to_string(&original.data).unwrap(),
            "keys keep their order"
        );
        let text = serde_json::to_string(&original).unwrap();
        let read: Stored = serde_json::from_str(&text).unwrap();
        assert_eq!(read, stored);
        assert_eq!(stored.served_generation(), None, "no observedGeneration in its status");
    }

    #[test]
    fn the_served_generation_is_read_from_the_status() {
        let served = |status: Value| {
            let o: DynamicObject = serde_json::from_value(json!({
                "apiVersion": "example.com/v1", "kind": "App", "metadata": {"name": "a"}, "status": status,
            }))
            .unwrap();
            Stored::compact(&o).served_generation()
        };
        assert_eq!(served(json!({"observedGeneration": 4})), Some(4));
        assert_eq!(served(json!({"observedGeneration": "4"})), None, "not a number");
        assert_eq!(served(json!({})), None);
    }
}
