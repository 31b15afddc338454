//! Deleting the owned children of a parent that is gone, as soon as its deletion is seen.
//! The garbage collector would delete them too, but it works through its own queue and
//! can take minutes for a thousand parents; it remains the safety net for a missed event.

use std::sync::Arc;

use futures::StreamExt;
use kube::ResourceExt;
use kube::api::{DeleteParams, DynamicObject, Preconditions};
use kube::runtime::reflector::ObjectRef;

use super::{APPLY_CONCURRENCY, Context};

/// True when the deleted `parent` is still absent from the parent store: a parent
/// recreated meanwhile under the same name has another UID.
pub(super) fn is_gone(ctx: &Context, parent: &DynamicObject) -> bool {
    let key = ObjectRef::from_obj_with(parent, ctx.parents.resolved.resource.clone());
    ctx.parents
        .store
        .get(&key)
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
        .for_each_concurrent(APPLY_CONCURRENCY, |child| async move {
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
