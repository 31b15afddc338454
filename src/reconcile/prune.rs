//! Pruning: deleting a parent's children that are no longer rendered. Children of a
//! waiting child entry are kept; nothing is pruned after a failed render (the caller
//! never gets here then). Only this parent's objects are seen here (its parent-uid
//! label); one already terminating is not deleted again, and one failed deletion does not
//! stop the others: each is published as a Warning event, and the parent's status says so.

use std::sync::Arc;

use kube::ResourceExt;
use kube::api::DynamicObject;
use kube::runtime::events::EventType;

use super::context::describe;
use super::fresh::Freshness;
use super::{Context, Operation, ReconcileError, delete};
use crate::labels;
use crate::object_key::ObjectKey;
use crate::object_key::to_json;
use crate::render::RenderOutput;

/// Deletes every observed child that the render no longer wants.
pub(super) async fn run(
    ctx: &Context,
    parent: &DynamicObject,
    out: &RenderOutput,
    observed: &[Arc<DynamicObject>],
    fresh: &Freshness,
) -> Result<(), ReconcileError> {
    let mut errors = Vec::new();
    for obj in observed {
        if obj.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let child = obj.labels().get(labels::CHILD).cloned().unwrap_or_default();
        if out.waiting.iter().any(|w| w.child == child) {
            continue;
        }
        let live = to_json(obj);
        let key = ObjectKey::of_value(&live);
        if out.children.iter().any(|c| ObjectKey::of_value(&c.object) == key) {
            continue;
        }
        let Some(api) = ctx.child_api(obj) else {
            continue;
        };
        // A newer parent may render it again: its watch event brings the next pass.
        if !fresh.current(ctx, parent).await? {
            return Ok(());
        }
        if let Err(source) = delete::child(ctx, parent, &api, &live, "Pruned", false).await {
            ctx.event(
                parent,
                EventType::Warning,
                "Error",
                format!("could not prune {}: {source}", describe(&live)),
            )
            .await;
            errors.push(ReconcileError::Kube {
                action: Operation::Prune,
                object: describe(&live),
                source,
            });
        }
    }
    ReconcileError::all(errors)
}
