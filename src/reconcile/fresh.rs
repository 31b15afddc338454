//! Whether a pass's copy of its parent is current enough to change the parent's
//! children by. A copy a watch event brought is: one process sees a parent's versions
//! in order. A copy that came from a list may not be: a lagging API server or watch
//! cache can serve a list older than what the previous Stencil (or this one, before a
//! relist) acted on, and children written from it would go back to an older spec, or be
//! pruned for a spec that has changed since. Before a child is updated, recreated or
//! pruned, such a copy is read again, once per pass; when the API server holds a newer
//! parent, the pass changes nothing, and the watch's event of the newer one brings the
//! next pass.

use kube::ResourceExt;
use kube::api::DynamicObject;
use tokio::sync::OnceCell;

use super::context::describe_object;
use super::{Context, Operation, ReconcileError};

/// One pass's answer, asked for at most once.
#[derive(Default)]
pub(super) struct Freshness(OnceCell<bool>);

impl Freshness {
    /// Whether `parent`, the pass's copy, may change its children.
    ///
    /// # Errors
    ///
    /// Reading the parent again failed.
    pub(super) async fn current(&self, ctx: &Context, parent: &DynamicObject) -> Result<bool, ReconcileError> {
        if !ctx.parents.as_listed(&parent.metadata) {
            return Ok(true);
        }
        self.0.get_or_try_init(|| read_again(ctx, parent)).await.copied()
    }

    /// Whether the pass found its copy of the parent older than the API server's.
    pub(super) fn stale(&self) -> bool {
        self.0.get() == Some(&false)
    }
}

/// Whether the API server holds `parent` at the version the pass read.
async fn read_again(ctx: &Context, parent: &DynamicObject) -> Result<bool, ReconcileError> {
    let now = ctx
        .parent_api(parent)
        .get_opt(&parent.name_any())
        .await
        .map_err(|source| ReconcileError::Kube {
            action: Operation::Read,
            object: describe_object(parent),
            source,
        })?;
    let current = now.is_some_and(|p| p.metadata.resource_version == parent.metadata.resource_version);
    if !current {
        tracing::info!(definition = %ctx.def.name, parent = %describe_object(parent),
            "the listed copy of the parent is older than the API server's: its children stay as they are until the watch brings the newer one");
    }
    Ok(current)
}
