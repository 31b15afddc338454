//! A watch fed by hand, for the controller's unit tests.

use std::sync::{Arc, Weak};

use kube::api::DynamicObject;
use kube::runtime::watcher::Event;

use super::{Running, SharedWatch, WatchLease, WatchSelection};
use crate::discovery;
use crate::gvk::Gvk;

/// A watch fed by hand, for unit tests of what the controller decides: no task, no API
/// server; [`HandFed::apply`] stores an object as a watch event would.
pub(crate) struct HandFed {
    /// The lease the controller holds.
    pub lease: WatchLease,
}

impl HandFed {
    /// An empty, synced watch of `gvk`, served as `plural`.
    pub(crate) fn new(gvk: &Gvk, plural: &str, namespaced: bool) -> HandFed {
        let resource = kube::core::ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk(&gvk.group, &gvk.version, &gvk.kind),
            plural,
        );
        let resolved = discovery::Resolved { resource, namespaced };
        let shared = Arc::new(SharedWatch::new(gvk.clone(), resolved, None));
        shared.observe(Event::Init);
        shared.observe(Event::InitDone);
        let running = Running {
            key: (gvk.clone(), WatchSelection::All),
            shared,
            task: tokio::spawn(async {}).abort_handle(),
            registry: Weak::new(),
        };
        HandFed {
            lease: WatchLease {
                running: Arc::new(running),
            },
        }
    }

    /// Stores `obj` (JSON) as a watch event would.
    pub(crate) fn apply(&mut self, obj: serde_json::Value) {
        self.event(Event::Apply(serde_json::from_value(obj).expect("an object")));
    }

    /// Stores `objects` (JSON) as a watch's (re)list would.
    pub(crate) fn list(&mut self, objects: Vec<serde_json::Value>) {
        self.event(Event::Init);
        for obj in objects {
            self.event(Event::InitApply(serde_json::from_value(obj).expect("an object")));
        }
        self.event(Event::InitDone);
    }

    /// Removes `obj` (JSON) as a watch's delete event would.
    pub(crate) fn delete(&mut self, obj: serde_json::Value) {
        self.event(Event::Delete(serde_json::from_value(obj).expect("an object")));
    }

    fn event(&mut self, event: Event<DynamicObject>) {
        self.lease.observe(event);
    }
}
