//! A sharded member's side of a parent's placement: it reconciles only the parents
//! labelled with its own name, hands a draining parent over, and deletes the children of
//! a parent that left its watch only once the API server says the parent is gone.
//!
//! A parent leaves a member's watch in two ways that look alike from inside: it was
//! deleted, or its `stencil.dev/shard` label changed (a handover, a move from a member
//! that was gone). Both arrive as a delete event, and a relist reports both as missing;
//! only the first may delete children.
//!
//! A parent that arrives from another member brings children this member's watch does
//! not see (they carry the old member's label until this one applies them): its first
//! pass here lists them from the API server, so a child its template no longer renders is
//! pruned rather than left behind.

use std::sync::Arc;

use kube::ResourceExt;
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::runtime::controller::Action;
use serde_json::json;

use super::context::describe_object;
use super::teardown::listed_children;
use super::{Context, Operation, ReconcileError};
use crate::labels;
use crate::shard::{Duty, Placement, duty};

/// What a member does with a parent before anything else: `None` to reconcile it, or
/// the pass's outcome when the parent is not this member's to write.
///
/// # Errors
///
/// The handover patch fails for another reason than the parent having changed or gone.
pub(super) async fn gate(ctx: &Context, parent: &DynamicObject) -> Result<Option<Action>, ReconcileError> {
    let Some(member) = ctx.shard() else {
        return Ok(None);
    };
    let uid = parent.metadata.uid.as_deref().unwrap_or_default();
    match duty(Placement::of(uid, parent.metadata.labels.as_ref()), member) {
        Duty::Reconcile => Ok(None),
        Duty::Skip => Ok(Some(Action::await_change())),
        Duty::Release => {
            hand_over(ctx, parent).await?;
            Ok(Some(Action::await_change()))
        }
    }
}

/// Acknowledges a drain: removes the shard and drain labels from the version of the
/// parent this pass read, so the sharder may assign it anew. Reconciles of one parent
/// never overlap, so none of this member's is still writing when the labels go; the
/// resourceVersion makes the patch fail if the parent changed meanwhile, and the next
/// event brings it back here.
async fn hand_over(ctx: &Context, parent: &DynamicObject) -> Result<(), ReconcileError> {
    let Some(name) = parent.metadata.name.as_deref() else {
        return Ok(());
    };
    let member = ctx.shard().unwrap_or_default();
    let patch = json!({"metadata": {
        "resourceVersion": parent.metadata.resource_version,
        "labels": {labels::SHARD: null, labels::DRAIN: null},
        "annotations": {labels::MOVED_FROM: member},
    }});
    match ctx
        .parent_api(parent)
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => {
            ctx.forget(&ctx.parent_key(parent));
            tracing::info!(parent = %describe_object(parent), "handed over to another member");
            Ok(())
        }
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
        Err(source) => Err(ReconcileError::Kube {
            action: Operation::Handover,
            object: describe_object(parent),
            source,
        }),
    }
}

/// Whether a parent that left this member's watch was deleted, so its children may go.
/// Unsharded, the watch saw every parent, so leaving it is a deletion. Sharded, a parent
/// whose last known labels name another member moved; one that still names this member
/// is looked up: only a parent the API server no longer has (or has under another UID)
/// is gone. An unanswered lookup says no, and the garbage collector stays the safety net.
pub(super) async fn deleted(ctx: &Context, parent: &DynamicObject) -> bool {
    let Some(member) = ctx.shard() else {
        return true;
    };
    let still_mine = parent
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(labels::SHARD))
        .is_some_and(|s| s == member);
    if !still_mine {
        return false;
    }
    let Some(name) = parent.metadata.name.as_deref() else {
        return false;
    };
    match ctx.parent_api(parent).get_opt(name).await {
        Ok(None) => true,
        Ok(Some(live)) => live.metadata.uid != parent.metadata.uid,
        Err(e) => {
            tracing::debug!(parent = %describe_object(parent), error = %e, "could not confirm a deletion; the garbage collector will");
            false
        }
    }
}

/// Whether the parent has just moved here and its children are still labelled for the
/// member it left.
pub(super) fn arrived(ctx: &Context, parent: &DynamicObject) -> bool {
    ctx.shard().is_some() && parent.annotations().contains_key(labels::MOVED_FROM)
}

/// The children of a parent that has just arrived: those this member's watch holds, and
/// those the API server lists with the parent's UID and this definition's label.
///
/// # Errors
///
/// The list fails.
pub(super) async fn children_on_arrival(
    ctx: &Context,
    parent: &DynamicObject,
    uid: &str,
    observed: Vec<Arc<DynamicObject>>,
) -> Result<Vec<Arc<DynamicObject>>, ReconcileError> {
    let mut all = observed;
    for listed in listed_children(ctx, parent, uid).await? {
        let ours = listed.labels().get(labels::DEFINITION).map(String::as_str) == Some(ctx.definition_label());
        if ours && !all.iter().any(|o| o.metadata.uid == listed.metadata.uid) {
            all.push(listed);
        }
    }
    Ok(all)
}

/// Removes the arrival annotation once a pass has applied and pruned the children.
///
/// # Errors
///
/// The patch fails.
pub(super) async fn settled(ctx: &Context, parent: &DynamicObject) -> Result<(), ReconcileError> {
    let patch = json!({"metadata": {"annotations": {labels::MOVED_FROM: null}}});
    match ctx
        .parent_api(parent)
        .patch(&parent.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(source) => Err(ReconcileError::Kube {
            action: Operation::Handover,
            object: describe_object(parent),
            source,
        }),
    }
}
