//! `stencil.dev/paused: "true"` on a parent, or on its definition: Stencil writes nothing
//! for that parent (no child, no prune, no finalizer change, no deletion of children)
//! but a `Paused` condition on its status, until the annotation goes. A paused parent
//! being deleted keeps Stencil's finalizer, so its deletion waits and its status says so.

use kube::api::DynamicObject;
use kube::runtime::controller::Action;

use super::context::describe_object;
use super::{Context, status_write};
use crate::compile::CompiledDefinition;
use crate::labels;

/// Who holds a parent still.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PausedBy {
    /// The annotation on the parent itself.
    Parent,
    /// The annotation on its definition.
    Definition,
}

/// Whether `parent` of `def` is held still, and by whom.
pub fn paused_by(def: &CompiledDefinition, parent: &DynamicObject) -> Option<PausedBy> {
    if labels::paused(parent.metadata.annotations.as_ref()) {
        Some(PausedBy::Parent)
    } else if def.paused {
        Some(PausedBy::Definition)
    } else {
        None
    }
}

/// Holds a paused parent: its status gets the `Paused` condition (a decorator's object is
/// never written), and the parent waits for a change: the annotation's removal, or the
/// definition's, wakes it. A status the API server refuses is logged, not retried: a held
/// parent has nothing else to do.
pub(super) async fn hold(ctx: &Context, parent: &DynamicObject, by: PausedBy) -> Action {
    if ctx.def.spec.is_decorator() {
        return Action::await_change();
    }
    let on = match by {
        PausedBy::Parent => "this parent".to_string(),
        PausedBy::Definition => format!("OperatorDefinition {}", ctx.def.name),
    };
    let mut message = format!(
        "{} is \"true\" on {on}: Stencil writes nothing for this parent until it is removed",
        labels::PAUSED
    );
    if parent.metadata.deletion_timestamp.is_some() {
        message.push_str("; the deletion waits for that");
    }
    let status = crate::render::paused_status(parent.data.get("status"), &message);
    if let Err(e) = status_write::write(ctx, parent, &status).await {
        tracing::warn!(definition = %ctx.def.name, parent = %describe_object(parent), error = %e, "could not say Paused on the status");
    }
    Action::await_change()
}
