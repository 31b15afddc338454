//! Releasing the parents of a kind that no definition serves any more: Stencil's
//! finalizer comes off every parent, so none is left undeletable, after the parents being
//! deleted have been torn down as the definition says. A paused parent (or every parent
//! of a paused definition) gets no write, the release included: it keeps its finalizer,
//! so the children the garbage collector cannot reach (other namespaces, cluster-scoped)
//! are not leaked by a teardown the pause held back.

use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt;
use kube::api::DynamicObject;

use super::dependencies::{Dependencies, resolve, share};
use crate::compile::CompiledDefinition;
use crate::reconcile;

/// How long a removed definition goes on tearing down the parents that were being deleted
/// before it releases them anyway, so none is left undeletable.
const TEARDOWN_BEFORE_RELEASE: Duration = Duration::from_secs(300);

/// Removes Stencil's finalizer from every parent of a definition that nobody serves any
/// more, so no parent is left undeletable. Parents being deleted are torn down first, as
/// the definition says, so their children that the garbage collector cannot reach do not
/// leak. Paused parents are left as they are.
pub(super) async fn release_parents(deps: Dependencies, def: Arc<CompiledDefinition>) {
    let parents = match deps.watches.acquire(&def.parent, share(&deps, &def), &def.name).await {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!(definition = %def.name, error = %e, "cannot release the parents' finalizers");
            return;
        }
    };
    let held = |p: &DynamicObject| reconcile::paused_by(&def, p).is_some();
    let (paused, free): (Vec<_>, Vec<_>) = parents.objects().into_iter().partition(|p| held(p));
    if !paused.is_empty() {
        let names: Vec<String> = paused.iter().map(|p| p.name_any()).collect();
        tracing::warn!(definition = %def.name, parents = ?names, "paused parents keep Stencil's finalizer: nothing serves them until a definition for the kind is applied again, unpaused");
    }
    let deleting: Vec<_> = free
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_some())
        .collect();
    if !deleting.is_empty() {
        finish_teardowns(&deps, &def, deleting).await;
    }
    for parent in parents.objects().into_iter().filter(|p| !held(p)) {
        let namespace = parent.namespace();
        let api = crate::discovery::api(&deps.client, namespace.as_deref(), &parents.resolved.resource);
        if let Err(e) = reconcile::release(&api, &parent, &[]).await {
            tracing::warn!(parent = %parent.name_any(), error = %e, "could not release the finalizer");
        }
    }
    tracing::info!(definition = %def.name, kind = %def.parent, "nobody serves the kind now; its parents were released");
}

/// Reconciles each parent being deleted until its teardown is done (its finalizer
/// released), or until [`TEARDOWN_BEFORE_RELEASE`] has passed.
async fn finish_teardowns(deps: &Dependencies, def: &Arc<CompiledDefinition>, deleting: Vec<Arc<DynamicObject>>) {
    let ctx = match resolve(deps, def, &def.all_child_kinds()).await {
        Ok(ctx) => Arc::new(ctx),
        Err((_, message)) => {
            tracing::warn!(definition = %def.name, "cannot finish the teardowns before the release: {message}");
            return;
        }
    };
    let deadline = tokio::time::Instant::now() + TEARDOWN_BEFORE_RELEASE;
    for parent in deleting {
        let key = kube::runtime::reflector::ObjectRef::from_obj_with(&*parent, ctx.parents.resolved.resource.clone());
        let mut current = Some(parent);
        while let Some(parent) = current {
            if reconcile::reconcile(parent.clone(), ctx.clone()).await.is_ok() {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                tracing::warn!(definition = %def.name, parent = %parent.name_any(), "the teardown did not finish within {TEARDOWN_BEFORE_RELEASE:?}; releasing the parent anyway");
                break;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
            current = ctx.parent(&key);
        }
    }
}
