//! One definition's controller over the mock API service, with hand-fed stores for its
//! parents and children, and the parents, definitions and readings the cases share.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use stencil_core::fixtures::{CONFIGMAP, ParentKind, bare_definition, child};

use super::mock::{MockApi, Objects, Refusals, Seen};
use crate::compile::compile_file;
use crate::gvk::Gvk;
use crate::labels;
use crate::metrics::Metrics;
use crate::reconcile::{Action, Context, DynamicObject, ReconcileError, reconcile};
use crate::watch::HandFed;

/// The parent kind of every case.
const WIDGET: ParentKind<'static> = ParentKind {
    group: "example.org",
    kind: "Widget",
    plural: "widgets",
};

/// A Widget definition with the one child `cm`.
pub(super) fn definition() -> String {
    bare_definition(WIDGET, &child("cm", CONFIGMAP), "")
}

/// A Widget definition whose child `app` depends on its child `creds`.
pub(super) fn waves() -> String {
    let creds = child(
        "creds",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ parent.metadata.name }}-creds",
    );
    let app = child(
        "app",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ parent.metadata.name }}-app",
    );
    bare_definition(WIDGET, &format!("{creds}{app}      dependsOn: [creds]\n"), "")
}

/// The Widget definition of [`definition`], inheriting kro's finalizer.
pub(super) fn inheriting() -> String {
    bare_definition(
        WIDGET,
        &child("cm", CONFIGMAP),
        "  finalize:\n    inheritFinalizers: [kro.run/finalizer]\n",
    )
}

/// The Widget `ns/w` at generation 1 with `spec.size` 3, and `status` if given.
pub(super) fn parent(status: Option<Value>) -> Value {
    let mut p = json!({"apiVersion": "example.org/v1", "kind": "Widget",
        "metadata": {"name": "w", "namespace": "ns", "uid": "parent-uid", "generation": 1, "resourceVersion": "1"},
        "spec": {"size": 3}});
    if let Some(s) = status {
        p["status"] = s;
    }
    p
}

/// A definition whose child template spends most of its fuel before it renders.
pub(super) fn busy_definition() -> String {
    definition().replace(
        "          size: {{ parent.spec.size | quote }}",
        "          size: {% for i in range(300) %}{% for j in range(1000) %}{% endfor %}{% endfor %}{{ parent.spec.size | quote }}",
    )
}

/// A Widget definition's controller over the mock API service, its stores fed by hand.
pub(super) struct World {
    pub(super) ctx: Arc<Context>,
    /// The parents' store.
    pub(super) parents: HandFed,
    /// The ConfigMaps' store.
    pub(super) children: HandFed,
    /// What the service saw.
    pub(super) seen: Arc<Mutex<Vec<Seen>>>,
    /// Writes the service refuses, by path.
    pub(super) refusals: Refusals,
    /// The ConfigMaps the service holds, by path.
    pub(super) objects: Objects,
}

impl World {
    /// A world of [`definition`].
    pub(super) fn new() -> World {
        World::with(&definition())
    }

    /// A world of the definition `text`.
    pub(super) fn with(text: &str) -> World {
        World::existing(text, Vec::new())
    }

    /// A world in which `existing` objects are on the API server but not in the store
    /// (made by hand or by another controller).
    pub(super) fn existing(text: &str, existing: Vec<Value>) -> World {
        let (mut defs, diags) = compile_file("d.yaml", text);
        assert!(diags.0.is_empty(), "{diags}");
        let def = Arc::new(defs.remove(0));
        let parents = HandFed::new(&def.parent, "widgets", true);
        let children = HandFed::new(&Gvk::parse("v1", "ConfigMap").unwrap(), "configmaps", true);
        let MockApi {
            client,
            seen,
            objects,
            refusals,
        } = MockApi::start(existing, parent(None));
        let ctx = Arc::new(Context::new(
            client,
            def,
            Arc::new(Metrics::new()),
            parents.lease.clone(),
            vec![children.lease.clone()],
            Vec::new(),
        ));
        World {
            ctx,
            parents,
            children,
            seen,
            refusals,
            objects,
        }
    }

    /// The ConfigMap `name` of namespace `ns` as the mock API holds it.
    pub(super) fn stored(&self, name: &str) -> Value {
        let path = format!("/api/v1/namespaces/ns/configmaps/{name}");
        self.objects.lock().unwrap().get(&path).cloned().unwrap_or(Value::Null)
    }

    /// Reconciles a new parent and stores the child it applied, as the watch would;
    /// returns the stored child.
    pub(super) async fn create_child(&mut self) -> Value {
        let first = self.reconcile(parent(None)).await;
        let mut child = first[0].body.clone();
        child["metadata"]["uid"] = json!("child-uid");
        self.children.apply(child.clone());
        child
    }

    /// Reconciles a deleted parent as it is now; returns what the reconcile came to and
    /// the requests sent as `METHOD path`, events left out.
    pub(super) async fn reconcile_deleted(&mut self, deleted: Value) -> (Result<Action, ReconcileError>, Vec<String>) {
        self.parents.apply(deleted.clone());
        self.seen.lock().unwrap().clear();
        let obj: DynamicObject = serde_json::from_value(deleted).unwrap();
        let result = reconcile(Arc::new(obj), self.ctx.clone()).await;
        (result, self.sent().iter().map(Seen::short).collect())
    }

    /// Reconciles the parent as it is now; returns the requests sent, events left out.
    pub(super) async fn reconcile(&mut self, parent: Value) -> Vec<Seen> {
        self.parents.apply(parent.clone());
        self.seen.lock().unwrap().clear();
        let obj: DynamicObject = serde_json::from_value(parent).unwrap();
        reconcile(Arc::new(obj), self.ctx.clone()).await.expect("reconcile");
        self.sent()
    }

    /// The requests sent since the last clear, events left out.
    fn sent(&self) -> Vec<Seen> {
        let seen = self.seen.lock().unwrap();
        seen.iter().filter(|s| !s.path.contains("/events")).cloned().collect()
    }
}

/// The condition `type_` of `status`, or null.
pub(super) fn condition(status: &Value, type_: &str) -> Value {
    status["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == type_))
        .cloned()
        .unwrap_or(Value::Null)
}

/// How many events of `reason` were written since the last clear.
pub(super) fn events(w: &World, reason: &str) -> usize {
    w.seen
        .lock()
        .unwrap()
        .iter()
        .filter(|s| s.path.contains("/events") && s.body["reason"] == reason)
        .count()
}

/// The configmap writes among `sent`, as `METHOD name`.
pub(super) fn configmap_writes(sent: &[Seen]) -> Vec<String> {
    sent.iter()
        .filter(|s| s.method != "GET" && s.path.contains("/configmaps/"))
        .map(|s| format!("{} {}", s.method, s.path.rsplit('/').next().unwrap()))
        .collect()
}

/// The parent at generation 2 with `spec.size` = `size`.
pub(super) fn resized(size: u64) -> Value {
    let mut p = parent(None);
    p["spec"]["size"] = json!(size);
    p["metadata"]["generation"] = json!(2);
    p
}

/// A deleted parent whose child the API server has, but the watch has not shown yet
/// (created just before the deletion, or its watch broken).
pub(super) fn deleted_with_finalizer() -> Value {
    let mut deleted = parent(None);
    deleted["metadata"]["deletionTimestamp"] = json!("2026-12-03T00:00:00Z");
    deleted["metadata"]["finalizers"] = json!([labels::FINALIZER]);
    deleted
}
