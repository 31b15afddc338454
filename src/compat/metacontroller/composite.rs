//! One CompositeController's controller: its parent and child resources resolved to kinds
//! through discovery (retried until the API server serves them), then a controller over
//! the parents that a change to a parent, or to a child it controls, wakes.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use kube::core::{ApiResource, DynamicObject, GroupVersion};
use kube::discovery::{ApiCapabilities, Scope, pinned_group};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{Controller, watcher};
use kube::{Api, Client, ResourceExt as _};

use super::sync::{Context, error_policy, reconcile};
use crate::hooks::HookClient;
use crate::metacontroller::api::{CompositeController, ResourceRule};
use crate::metacontroller::claim;
use crate::metacontroller::plan::ChildKind;
use crate::selector::Matcher;

/// How long an unserved resource waits before discovery is asked again.
const RETRY: Duration = Duration::from_secs(5);

/// Parents reconciled at once per CompositeController.
const CONCURRENCY: u16 = 16;

/// A resource rule resolved.
#[derive(Clone, Debug)]
pub(super) struct Resolved {
    pub(super) resource: ApiResource,
    pub(super) namespaced: bool,
}

/// Serves `cc` until dropped.
pub(super) async fn run(client: Client, hooks: Arc<HookClient>, cc: Arc<CompositeController>) {
    let name = cc.name_any();
    let parent = resolve_until_served(&client, &name, &cc.spec.parent_resource.rule).await;
    let mut children = Vec::new();
    for rule in &cc.spec.child_resources {
        children.push((resolve_until_served(&client, &name, &rule.rule).await, rule.clone()));
    }
    let mut parents = watcher::Config::default();
    if let Some(selector) = &cc.spec.parent_resource.label_selector {
        match Matcher::new(selector) {
            Ok(m) => parents = parents.labels(m.query()),
            Err(e) => {
                tracing::error!(controller = %name, error = %e, "parentResource.labelSelector does not parse; not served");
                return;
            }
        }
    }
    let parent_api: Api<DynamicObject> = Api::all_with(client.clone(), &parent.resource);
    let mut controller = Controller::new_with(parent_api, parents, parent.resource.clone());
    let generate = cc.spec.generate_selector.unwrap_or(false);
    for (child, _) in &children {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &child.resource);
        let wakes = parents_woken(controller.store(), parent.clone(), generate);
        controller = controller.watches_with(api, child.resource.clone(), watcher::Config::default(), wakes);
    }
    let kinds = children
        .iter()
        .map(|(c, rule)| (c.clone(), child_kind(c, rule)))
        .collect();
    let context = Arc::new(Context::new(client, hooks, cc, parent, kinds));
    controller
        .with_config(kube::runtime::controller::Config::default().concurrency(CONCURRENCY))
        .run(reconcile, error_policy, context)
        .for_each(|_| async {})
        .await;
}

/// Which parents an event of a child wakes: its controller when that is a parent, or,
/// for an object nobody controls, every parent in its namespace (or cluster-scoped)
/// whose selector matches it (to adopt it).
fn parents_woken(
    parents: Store<DynamicObject>,
    parent: Resolved,
    generate: bool,
) -> impl Fn(DynamicObject) -> Vec<ObjectRef<DynamicObject>> + Send + Sync + 'static {
    let Resolved { resource, namespaced } = parent;
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
        let labels = child.metadata.labels.clone().unwrap_or_default();
        parents
            .state()
            .iter()
            .filter(|p| p.namespace() == child.namespace() || p.namespace().is_none())
            .filter(|p| {
                let parent = serde_json::json!({"metadata": {"uid": p.uid()}, "spec": p.data.get("spec")});
                claim::parent_selector(&parent, generate).is_ok_and(|s| s.matches(Some(&labels)))
            })
            .map(|p| ObjectRef::from_obj_with(p.as_ref(), resource.clone()))
            .collect()
    }
}

fn child_kind(resolved: &Resolved, rule: &crate::metacontroller::api::ChildResourceRule) -> ChildKind {
    ChildKind {
        api_version: resolved.resource.api_version.clone(),
        kind: resolved.resource.kind.clone(),
        namespaced: resolved.namespaced,
        method: rule.update_strategy.as_ref().and_then(|s| s.method).unwrap_or_default(),
    }
}

/// `rule` resolved, asking again every [`RETRY`] until the API server serves it.
async fn resolve_until_served(client: &Client, controller: &str, rule: &ResourceRule) -> Resolved {
    loop {
        match resolve(client, rule).await {
            Ok(resolved) => return resolved,
            Err(e) => {
                tracing::warn!(controller, resource = %rule.resource, api_version = %rule.api_version, error = %e, "waiting for the resource to be served");
                tokio::time::sleep(RETRY).await;
            }
        }
    }
}

/// The kind the API server serves as `rule.resource` in `rule.apiVersion`.
async fn resolve(client: &Client, rule: &ResourceRule) -> Result<Resolved, String> {
    let gv: GroupVersion = rule.api_version.parse().map_err(|e| format!("{e}"))?;
    let group = pinned_group(client, &gv).await.map_err(|e| e.to_string())?;
    group
        .versioned_resources(&gv.version)
        .into_iter()
        .find(|(r, _)| r.plural == rule.resource)
        .map(|(resource, caps): (ApiResource, ApiCapabilities)| Resolved {
            resource,
            namespaced: caps.scope == Scope::Namespaced,
        })
        .ok_or_else(|| format!("{} serves no resource {}", rule.api_version, rule.resource))
}
