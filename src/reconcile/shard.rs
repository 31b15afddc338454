//! A sharded member's side of a parent's placement: it reconciles only the parents
//! labelled with its own name, hands a draining parent over, and deletes the children of
//! a parent that left its watch only once the API server says the parent is gone.
//!
//! A parent leaves a member's watch in two ways that look alike from inside: it was
//! deleted, or its `stencil.dev/shard` label changed (a handover, a move from a member
//! that was gone). Both arrive as a delete event, and a relist reports both as missing;
//! only the first may delete children.

use kube::api::{DynamicObject, Patch, PatchParams};
use kube::runtime::controller::Action;
use serde_json::json;

use super::context::describe_object;
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
    let patch = json!({"metadata": {
        "resourceVersion": parent.metadata.resource_version,
        "labels": {labels::SHARD: null, labels::DRAIN: null},
    }});
    match ctx
        .parent_api(parent)
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => {
            ctx.forget(&ctx.parent_ref(parent));
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
