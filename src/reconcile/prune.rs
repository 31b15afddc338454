//! Pruning: deleting a parent's children that are no longer rendered. Children of a
//! waiting child entry are kept; nothing is pruned after a failed render (the caller
//! never gets here then).

use std::sync::Arc;

use kube::ResourceExt;
use kube::api::DynamicObject;
use serde_json::Value;

use super::{Context, ReconcileError, apply, describe, to_json};
use crate::labels;
use crate::render::RenderOutput;

fn same(a: &Value, b: &Value) -> bool {
    let group = |v: &Value| {
        let av = v.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
        av.rsplit_once('/').map_or("", |(g, _)| g).to_string()
    };
    let field = |v: &Value, p: &str| v.pointer(p).and_then(Value::as_str).map(str::to_string);
    group(a) == group(b)
        && field(a, "/kind") == field(b, "/kind")
        && field(a, "/metadata/namespace") == field(b, "/metadata/namespace")
        && field(a, "/metadata/name") == field(b, "/metadata/name")
}

/// Deletes every observed child that the render no longer wants.
pub(super) async fn run(
    ctx: &Context,
    parent: &DynamicObject,
    out: &RenderOutput,
    observed: &[Arc<DynamicObject>],
) -> Result<(), ReconcileError> {
    for obj in observed {
        let child = obj.labels().get(labels::CHILD).cloned().unwrap_or_default();
        if out.waiting.iter().any(|w| w.child == child) {
            continue;
        }
        let live = to_json(obj);
        if out.children.iter().any(|c| same(&c.object, &live)) {
            continue;
        }
        let Some(api) = ctx.child_api(obj) else {
            continue;
        };
        apply::delete(ctx, parent, &api, &obj.name_any(), &live, "Pruned")
            .await
            .map_err(|source| ReconcileError::Kube {
                action: "prune",
                object: describe(&live),
                source,
            })?;
    }
    Ok(())
}
