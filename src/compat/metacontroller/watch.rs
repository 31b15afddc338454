//! The controller over one parent resource of a controller object: a change of a parent
//! wakes it (of its status too, unless the controller ignores status changes), and so
//! does a change of a child it controls; for a CompositeController, an object nobody
//! controls wakes every parent whose selector matches it, which adopts it.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash as _, Hasher as _};
use std::sync::Arc;

use futures::StreamExt as _;
use kube::core::DynamicObject;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{Controller, WatchStreamExt as _, watcher};
use kube::{Api, Client, ResourceExt as _};

use super::Hooks;
use super::related::Related;
use super::resolve::Resolved;
use super::served::{Role, Served};
use super::sync::{Context, error_policy, reconcile};
use crate::metacontroller::claim;
use crate::metacontroller::plan::ChildKind;

/// Parents synced at once per parent resource.
const CONCURRENCY: u16 = 16;

/// Serves the parents of `parent` (those with `labels`, a label query, when given) for
/// `served` until dropped.
pub(super) async fn serve_parents(
    client: Client,
    hooks: Arc<Hooks>,
    served: Served,
    parent: Resolved,
    children: Vec<(Resolved, ChildKind)>,
    labels: Option<String>,
) {
    let mut config = watcher::Config::default();
    if let Some(labels) = &labels {
        config = config.labels(labels);
    }
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &parent.resource);
    let writer = reflector::store::Writer::new(parent.resource.clone());
    let store = writer.as_reader();
    let changes = watcher(api, config).default_backoff().reflect(writer).applied_objects();
    let changes = if served.ignore_status_changes {
        changes.predicate_filter(all_but_status, Default::default()).boxed()
    } else {
        changes.boxed()
    };
    let mut controller = Controller::for_stream_with(changes, store.clone(), parent.resource.clone());
    for (child, _) in &children {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &child.resource);
        let wakes = parents_woken(store.clone(), parent.clone(), served.role.clone());
        controller = controller.watches_with(api, child.resource.clone(), watcher::Config::default(), wakes);
    }
    let (wake, woken) = futures::channel::mpsc::unbounded();
    let version = served.customize.as_ref().and_then(|h| h.version).unwrap_or_default();
    let related = Related::new(client.clone(), store, parent.resource.clone(), version, wake);
    let context = Arc::new(Context::new(client, hooks, served, parent, children, related));
    controller
        .reconcile_on(woken)
        .with_config(kube::runtime::controller::Config::default().concurrency(CONCURRENCY))
        .run(reconcile, error_policy, context)
        .for_each(|_| async {})
        .await;
}

/// What of a parent a sync that ignores status changes is woken by: its generation (its
/// spec), labels, annotations, finalizers and deletion.
fn all_but_status(object: &DynamicObject) -> Option<u64> {
    let mut hasher = DefaultHasher::new();
    let meta = &object.metadata;
    meta.generation.hash(&mut hasher);
    meta.labels.hash(&mut hasher);
    meta.annotations.hash(&mut hasher);
    meta.finalizers.hash(&mut hasher);
    meta.deletion_timestamp.is_some().hash(&mut hasher);
    Some(hasher.finish())
}

/// Which parents an event of a child wakes: its controller when that is a parent, or,
/// for a composite's object nobody controls, every parent in its namespace (or
/// cluster-scoped) whose selector matches it (to adopt it).
fn parents_woken(
    parents: Store<DynamicObject>,
    parent: Resolved,
    role: Role,
) -> impl Fn(DynamicObject) -> Vec<ObjectRef<DynamicObject>> + Send + Sync + 'static {
    let Resolved {
        resource, namespaced, ..
    } = parent;
    move |child: DynamicObject| {
        let controller = child
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|r| r.controller == Some(true));
        if let Some(owner) = controller {
            let group = owner.api_version.rsplit_once('/').map_or("", |(g, _)| g);
            if owner.kind != resource.kind || group != resource.group {
                return Vec::new();
            }
            let parent = ObjectRef::new_with(&owner.name, resource.clone());
            return vec![match child.namespace().filter(|_| namespaced) {
                Some(ns) => parent.within(&ns),
                None => parent,
            }];
        }
        let Role::Composite { generate_selector } = role else {
            return Vec::new();
        };
        let labels = child.metadata.labels.clone().unwrap_or_default();
        parents
            .state()
            .iter()
            .filter(|p| p.namespace() == child.namespace() || p.namespace().is_none())
            .filter(|p| {
                let parent = serde_json::json!({"metadata": {"uid": p.uid()}, "spec": p.data.get("spec")});
                claim::parent_selector(&parent, generate_selector).is_ok_and(|s| s.matches(Some(&labels)))
            })
            .map(|p| ObjectRef::from_obj_with(p.as_ref(), resource.clone()))
            .collect()
    }
}
