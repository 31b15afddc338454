//! The parent finalizer `stencil.dev/finalizer`: added on the first reconcile where the
//! garbage collector cannot clean up alone; on deletion, each child goes by its deletion
//! policy (the child's, or else the definition's): `Delete` removes it and waits for it
//! to go, `Orphan` strips Stencil's ownerReference and labels; then the finalizer is
//! removed. Deletions go in waves, in reverse `dependsOn` order: a child is deleted only
//! once every child that depends on it is gone.

use std::collections::BTreeSet;

use kube::ResourceExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::controller::Action;
use serde_json::{Value, json};

use super::context::{describe, describe_object};
use super::{Context, ReconcileError, apply, to_json};
use crate::definition::DeletionPolicy;
use crate::labels;

fn has_finalizer(obj: &DynamicObject) -> bool {
    obj.finalizers().iter().any(|f| f == labels::FINALIZER)
}

/// Rewrites the parent's finalizers with `edit`, guarded by its resourceVersion; on a
/// conflict the parent is read again and the edit retried, so a stale cache costs one
/// round trip instead of a requeue.
async fn edit_finalizers(
    api: &Api<DynamicObject>,
    parent: &DynamicObject,
    edit: impl Fn(&[String]) -> Option<Vec<String>>,
) -> Result<(), kube::Error> {
    let mut current = parent.clone();
    for attempt in 0..3 {
        let Some(finalizers) = edit(current.finalizers()) else {
            return Ok(());
        };
        let patch = json!({"metadata": {"finalizers": finalizers, "resourceVersion": current.resource_version()}});
        match api
            .patch(&current.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Err(kube::Error::Api(s)) if s.code == 409 && attempt < 2 => current = api.get(&current.name_any()).await?,
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
            other => return other.map(|_| ()),
        }
    }
    Ok(())
}

/// Whether a desired child carries its parent's controller ownerReference, so the garbage
/// collector deletes it with the parent.
pub(super) fn owned_by_parent(child: &Value) -> bool {
    child
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|refs| refs.iter().any(|r| r.get("controller") == Some(&Value::Bool(true))))
}

/// Adds the finalizer when it is missing.
pub(super) async fn ensure(ctx: &Context, parent: &DynamicObject) -> Result<(), ReconcileError> {
    if has_finalizer(parent) {
        return Ok(());
    }
    let add = |f: &[String]| {
        (!f.iter().any(|x| x == labels::FINALIZER)).then(|| {
            let mut all = f.to_vec();
            all.push(labels::FINALIZER.to_string());
            all
        })
    };
    edit_finalizers(&ctx.parent_api(parent), parent, add)
        .await
        .map_err(|source| ReconcileError::Kube {
            action: "update finalizers of",
            object: describe_object(parent),
            source,
        })
}

/// Removes Stencil's finalizer from a parent, leaving any other.
pub async fn release(api: &Api<DynamicObject>, parent: &DynamicObject) -> Result<(), kube::Error> {
    let remove = |f: &[String]| {
        f.iter()
            .any(|x| x == labels::FINALIZER)
            .then(|| f.iter().filter(|x| *x != labels::FINALIZER).cloned().collect())
    };
    edit_finalizers(api, parent, remove).await
}

/// The deletion policy of the child entry that produced `child`: its own, or else the
/// definition's.
pub(super) fn policy_of(ctx: &Context, child: &DynamicObject) -> DeletionPolicy {
    let entry = child.labels().get(labels::CHILD);
    ctx.def
        .spec
        .children
        .iter()
        .find(|c| Some(&c.name) == entry)
        .and_then(|c| c.deletion_policy)
        .unwrap_or(ctx.def.spec.finalize.deletion_policy)
}

/// Whether deleting a parent needs Stencil, not only the garbage collector: a child may
/// be orphaned (it must be stripped in time), or children depend on each other (they go
/// in reverse dependsOn order).
pub(super) fn teardown_needs_stencil(ctx: &Context) -> bool {
    let default = ctx.def.spec.finalize.deletion_policy;
    ctx.def
        .spec
        .children
        .iter()
        .any(|c| c.deletion_policy.unwrap_or(default) == DeletionPolicy::Orphan || !c.depends_on.is_empty())
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
    let patch = json!({"metadata": {"ownerReferences": owners, "labels": strip}});
    api.patch(&child.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|source| ReconcileError::Kube {
            action: "orphan",
            object: describe_object(child),
            source,
        })?;
    Ok(())
}

/// Cleans up after a deleted parent, then releases it: each child is deleted or orphaned
/// as its policy says, deletions in reverse dependsOn order; a child already terminating
/// is waited for, not deleted again; one failed request does not stop the others.
pub(super) async fn run(ctx: &Context, parent: &DynamicObject) -> Result<Action, ReconcileError> {
    if !has_finalizer(parent) {
        return Ok(Action::await_change());
    }
    let uid = parent.uid().unwrap_or_default();
    let children = ctx.observed(&uid);
    let (orphaned, deleted): (Vec<_>, Vec<_>) = children
        .into_iter()
        .partition(|c| policy_of(ctx, c) == DeletionPolicy::Orphan);
    let mut errors = Vec::new();
    for child in &orphaned {
        if let Err(e) = orphan(ctx, child, &uid).await {
            errors.push(e);
        }
    }
    // Reverse dependsOn order: an entry's objects go only once no entry that depends on
    // it has objects left (a StatefulSet before the Secret it mounts).
    let present: BTreeSet<String> = deleted
        .iter()
        .filter_map(|c| c.labels().get(labels::CHILD).cloned())
        .collect();
    let held = |entry: &str| {
        ctx.def
            .spec
            .children
            .iter()
            .any(|c| present.contains(&c.name) && c.depends_on.iter().any(|d| d == entry))
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
        match apply::delete(ctx, parent, &api, &child.name_any(), &live, "Deleted").await {
            Ok(()) => blocking.push(describe(&live)),
            Err(source) => errors.push(ReconcileError::Kube {
                action: "delete",
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
    if !blocking.is_empty() {
        let message = format!("deleting; waiting for {}", blocking.join(", "));
        let status = json!({"conditions": [crate::conditions::condition("Ready", false, "Deleting", &message, None)]});
        super::status::write(ctx, parent, &status).await?;
        return Err(ReconcileError::Waiting(message));
    }
    release(&ctx.parent_api(parent), parent)
        .await
        .map_err(|source| ReconcileError::Kube {
            action: "release",
            object: describe_object(parent),
            source,
        })?;
    Ok(Action::await_change())
}
