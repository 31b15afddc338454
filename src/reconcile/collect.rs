//! Deleting the owned children of a parent that is gone, as soon as its deletion is seen.
//! The garbage collector would delete them too, but it works through its own queue and
//! can take minutes for a thousand parents; it remains the safety net for a missed event.
//!
//! A decorator holds no finalizer on the objects it decorates, so it cleans up after a
//! parent in three ways: the reconcile of a parent it no longer decorates (an annotation
//! changed, or the parent is terminating), the watch's delete event of a parent that is
//! gone or no longer matches the label selector, and [`strays`], a check of every child
//! against the parent store that runs every few seconds. The last one is what makes a
//! crash safe: whatever was missed while no Stencil ran is found on the next check.

use std::sync::Arc;

use futures::StreamExt;
use kube::ResourceExt;
use kube::api::{DeleteParams, DynamicObject, Preconditions};
use kube::runtime::reflector::ObjectRef;

use super::{Context, ReconcileError, apply, teardown};
use kube::runtime::controller::Action;

/// True when the deleted `parent` is still absent from the parent store: a parent
/// recreated meanwhile under the same name has another UID.
pub(super) fn is_gone(ctx: &Context, parent: &DynamicObject) -> bool {
    let key = ObjectRef::from_obj_with(parent, ctx.parents.resolved.resource.clone());
    ctx.parent(&key)
        .is_none_or(|live| live.metadata.uid != parent.metadata.uid)
}

/// Deletes the children that still name `parent` as their owner. Each delete carries the
/// child's UID and resourceVersion as preconditions: a child that changed since it was
/// seen (the garbage collector orphaning it, for a parent deleted with
/// `propagationPolicy: Orphan`) is left alone.
pub(super) async fn children(ctx: &Context, parent: &DynamicObject) {
    let Some(uid) = parent.metadata.uid.clone() else {
        return;
    };
    let owned: Vec<Arc<DynamicObject>> = ctx
        .observed(&uid)
        .into_iter()
        .filter(|c| c.owner_references().iter().any(|r| r.uid == uid))
        .collect();
    futures::stream::iter(owned)
        .for_each_concurrent(apply::CONCURRENCY, |child| async move {
            let Some(api) = ctx.child_api(&child) else {
                return;
            };
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: child.metadata.uid.clone(),
                    resource_version: child.metadata.resource_version.clone(),
                }),
                ..DeleteParams::background()
            };
            match api.delete(&child.name_any(), &params).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
                Err(e) => tracing::debug!(child = %child.name_any(), error = %e,
                        "deleting a deleted parent's child failed; the garbage collector will"),
            }
        })
        .await;
}

/// How soon a decorator looks again at a parent whose children are on their way out.
const UNDECORATE_RETRY: std::time::Duration = std::time::Duration::from_secs(2);

/// Removes a decorator's children from a parent it no longer decorates: each is pruned
/// or orphaned as its `deletionPolicy` says, in reverse dependsOn order.
pub(super) async fn undecorate(ctx: &Context, parent: &DynamicObject) -> Result<Action, ReconcileError> {
    ctx.forget(&ctx.parent_key(parent));
    let uid = parent.uid().unwrap_or_default();
    let children = ctx.observed(&uid);
    if children.is_empty() {
        return Ok(Action::requeue(ctx.resync()));
    }
    let blocking = teardown::teardown(ctx, parent, &uid, &children, false).await?;
    Ok(if blocking.is_empty() {
        Action::requeue(ctx.resync())
    } else {
        tracing::info!(definition = %ctx.def.name, parent = %parent.name_any(), "undecorating; waiting for {}", blocking.join(", "));
        Action::requeue(UNDECORATE_RETRY)
    })
}

/// One pass of [`undecorate`] for a parent that is gone from the store; [`strays`] makes
/// the passes that follow, so a teardown in waves needs no task per parent.
pub(super) async fn undecorate_gone(ctx: &Context, parent: &DynamicObject) {
    if let Err(e) = undecorate(ctx, parent).await {
        tracing::warn!(definition = %ctx.def.name, parent = %parent.name_any(), error = %e, "could not undecorate; retrying");
    }
}

/// A decorator's relist check: every parent UID its children name that is not in the
/// parent store (deleted, or no longer matching the label selector) has its children
/// removed. It does nothing while a watch fails, since a stale store could then look
/// like a missing parent.
pub async fn strays(ctx: &Context) {
    if !ctx.def.spec.is_decorator() || ctx.problem().is_some() {
        return;
    }
    let live = ctx.parent_uids();
    for uid in ctx.parents_named() {
        if live.contains(&uid) {
            continue;
        }
        let children = ctx.observed(&uid);
        let Some(first) = children.first() else {
            continue;
        };
        let parent = absent_parent(ctx, first, &uid);
        tracing::info!(definition = %ctx.def.name, parent = %parent.name_any(), "the decorated object is gone; removing its children");
        undecorate_gone(ctx, &parent).await;
    }
}

/// The parent a child's labels name, as far as they tell (its events still find it).
fn absent_parent(ctx: &Context, child: &DynamicObject, uid: &str) -> DynamicObject {
    let l = child.labels();
    let name = l.get(crate::labels::PARENT_NAME).cloned().unwrap_or_default();
    let mut parent = DynamicObject::new(&name, &ctx.parents.resolved.resource);
    parent.metadata.namespace = l.get(crate::labels::PARENT_NAMESPACE).cloned();
    parent.metadata.uid = Some(uid.to_string());
    parent
}
