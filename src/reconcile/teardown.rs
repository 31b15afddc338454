//! Deleting or orphaning a deleted (or undecorated) parent's children, each as its
//! deletion policy says: deletions in reverse `dependsOn` order, the finalize children
//! last, a child the garbage collector or a `--cascade=orphan` deletion has orphaned kept,
//! and before the finalizer goes, a fresh LIST that shows nothing is left.

use std::collections::BTreeSet;
use std::sync::Arc;

use kube::ResourceExt;
use kube::api::{DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

use super::context::{describe, describe_object};
use super::{Context, Operation, ReconcileError, delete};
use crate::compile::CompiledDefinition;
use crate::definition::DeletionPolicy;
use crate::labels;
use crate::object_key::to_json;
use crate::render;

/// The deletion policy of the child entry that produced `child`: its own, or else the
/// definition's.
fn policy_of(def: &CompiledDefinition, child: &DynamicObject) -> DeletionPolicy {
    child
        .labels()
        .get(labels::CHILD)
        .and_then(|name| def.entry_index(name))
        .and_then(|i| def.entry(i).deletion_policy)
        .unwrap_or(def.spec.finalize.deletion_policy)
}

/// Whether a child of a deleted parent would carry the parent's ownerReference, so its
/// teardown rests on whether it still does ([`orphaned_by_collector`]).
fn carries_owner_reference(def: &CompiledDefinition, parent: &DynamicObject, child: &DynamicObject) -> bool {
    if parent.metadata.deletion_timestamp.is_none() || def.spec.is_decorator() {
        return false;
    }
    let ownable = parent.namespace().is_none() || parent.namespace() == child.namespace();
    ownable
        && child
            .labels()
            .get(labels::CHILD)
            .and_then(|name| def.entry_index(name))
            .is_some_and(|i| render::collected_by_garbage_collector(def, def.entry(i)))
}

/// Whether the garbage collector has orphaned a child of a deleted parent: the child would
/// carry the parent's ownerReference, and it does not any more. That is what a deletion
/// with `--cascade=orphan` does, so the child is kept even once the API server has taken
/// the `orphan` finalizer off the parent.
fn orphaned_by_collector(def: &CompiledDefinition, parent: &DynamicObject, child: &DynamicObject) -> bool {
    let uid = parent.uid();
    carries_owner_reference(def, parent, child)
        && !child.owner_references().iter().any(|o| Some(&o.uid) == uid.as_ref())
}

/// Strips Stencil's ownerReference and labels from a child that outlives its parent, so a
/// later parent of the same name does not silently inherit it.
async fn orphan(ctx: &Context, child: &DynamicObject, uid: &str) -> Result<(), ReconcileError> {
    let Some(api) = ctx.child_api(child) else {
        return Ok(());
    };
    let owners: Vec<_> = child
        .owner_references()
        .iter()
        .filter(|o| o.uid != uid)
        .cloned()
        .collect();
    let mut strip = serde_json::Map::new();
    for key in [
        labels::DEFINITION,
        labels::PARENT_UID,
        labels::PARENT_NAME,
        labels::PARENT_NAMESPACE,
        labels::CHILD,
        labels::MANAGED_BY,
    ] {
        strip.insert(key.to_string(), Value::Null);
    }
    // Guarded by the resourceVersion the owners were read at: an owner added meanwhile is
    // not dropped (the patch fails and the next pass reads again).
    let patch = json!({"metadata": {"ownerReferences": owners, "labels": strip,
        "resourceVersion": child.resource_version()}});
    api.patch(&child.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|source| ReconcileError::Kube {
            action: Operation::Orphan,
            object: describe_object(child),
            source,
        })?;
    Ok(())
}

/// Tears `children` down, the ordinary ones first and the finalize children once those
/// are gone (or orphans every one, with `keep_all`); returns what is still on its way
/// out.
pub(super) async fn phases(
    ctx: &Context,
    parent: &DynamicObject,
    uid: &str,
    children: Vec<Arc<DynamicObject>>,
    keep_all: bool,
) -> Result<Vec<String>, ReconcileError> {
    let def = ctx.def_for(parent);
    let (last, first): (Vec<_>, Vec<_>) = children.into_iter().partition(|c| {
        c.labels()
            .get(labels::CHILD)
            .and_then(|name| def.entry_index(name))
            .is_some_and(|i| def.is_finalize(i))
    });
    let mut blocking = teardown(ctx, parent, uid, &first, keep_all).await?;
    if blocking.is_empty() {
        blocking = teardown(ctx, parent, uid, &last, keep_all).await?;
    } else if !last.is_empty() {
        blocking.push("then the finalize children".to_string());
    }
    Ok(blocking)
}

/// Every object of the definition's child kinds that carries the parent's UID label, as
/// the API server lists it now (whatever definition name it carries).
pub(super) async fn listed_children(
    ctx: &Context,
    parent: &DynamicObject,
    uid: &str,
) -> Result<Vec<Arc<DynamicObject>>, ReconcileError> {
    let params = ListParams::default().labels(&format!("{}={uid}", labels::PARENT_UID));
    let mut all = Vec::new();
    for w in &ctx.children {
        let list = w
            .api(ctx.client.clone())
            .list(&params)
            .await
            .map_err(|source| ReconcileError::Kube {
                action: Operation::ListChildren,
                object: describe_object(parent),
                source,
            })?;
        let types = kube::core::TypeMeta {
            api_version: w.resolved.resource.api_version.clone(),
            kind: w.resolved.resource.kind.clone(),
        };
        all.extend(list.items.into_iter().map(|mut o| {
            o.types = Some(types.clone());
            Arc::new(o)
        }));
    }
    Ok(all)
}

/// Deletes or orphans `children` of one phase (the ordinary ones, or the finalize ones):
/// deletions in reverse dependsOn order, an entry's objects only once no entry that
/// depends on it has objects left (a StatefulSet before the Secret it mounts). With
/// `keep_all` every child is orphaned. Returns what is still on its way out; every
/// failed request is reported.
pub(super) async fn teardown(
    ctx: &Context,
    parent: &DynamicObject,
    uid: &str,
    children: &[Arc<DynamicObject>],
    keep_all: bool,
) -> Result<Vec<String>, ReconcileError> {
    let reason = if ctx.def.spec.is_decorator() {
        "Pruned"
    } else {
        "Deleted"
    };
    let def = ctx.def_for(parent);
    let (orphaned, deleted): (Vec<_>, Vec<_>) = children.iter().partition(|c| {
        keep_all || policy_of(&def, c) == DeletionPolicy::Orphan || orphaned_by_collector(&def, parent, c)
    });
    let mut errors = Vec::new();
    for child in &orphaned {
        if let Err(e) = orphan(ctx, child, uid).await {
            errors.push(e);
        }
    }
    let present: BTreeSet<String> = deleted
        .iter()
        .filter_map(|c| c.labels().get(labels::CHILD).cloned())
        .collect();
    let held = |entry: &str| {
        def.entries()
            .any(|(_, c)| present.contains(&c.name) && c.depends_on.iter().any(|d| d == entry))
    };
    let mut blocking = Vec::new();
    let mut later = BTreeSet::new();
    for child in &deleted {
        let entry = child
            .labels()
            .get(labels::CHILD)
            .map(String::as_str)
            .unwrap_or_default();
        if held(entry) {
            later.insert(entry.to_string());
            continue;
        }
        let live = to_json(child);
        if child.metadata.deletion_timestamp.is_some() {
            let finalizers = child.finalizers().join(", ");
            blocking.push(format!("{} (finalizers: {finalizers})", describe(&live)));
            continue;
        }
        let Some(api) = ctx.child_api(child) else {
            continue;
        };
        // Kept or deleted as the ownerReference says: the deletion holds only for the
        // object as read, since a lagging store may not show the garbage collector's
        // orphaning yet.
        let as_read = carries_owner_reference(&def, parent, child);
        match delete::child(ctx, parent, &api, &live, reason, as_read).await {
            Ok(true) => blocking.push(describe(&live)),
            // Gone already, or changed since it was read: a watch that lags (or is
            // broken) must not hold the parent; the fresh list before the finalizer goes
            // judges again.
            Ok(false) => {}
            Err(source) => errors.push(ReconcileError::Kube {
                action: Operation::Delete,
                object: describe(&live),
                source,
            }),
        }
    }
    if !later.is_empty() {
        blocking.push(format!(
            "then {} (in reverse dependsOn order)",
            later.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    ReconcileError::all(errors)?;
    Ok(blocking)
}
