//! Writing a parent's status through its status subresource, only when it changed, keeping
//! each condition's lastTransitionTime while its status stays the same; for a decorator,
//! recording it instead.

use kube::api::{DynamicObject, Patch, PatchParams};
use serde_json::{Map, Value};

use super::context::describe_object;
use super::{Context, Operation, ReconcileError};

/// Patches the parent's status when it differs from what is there. A decorator never
/// writes its parent: the outcome is recorded for the definition's status instead.
pub(super) async fn write(ctx: &Context, parent: &DynamicObject, rendered: &Value) -> Result<(), ReconcileError> {
    if ctx.def.spec.is_decorator() {
        ctx.record_outcome(parent, rendered);
        return Ok(());
    }
    let current = parent.data.get("status");
    let next = crate::conditions::with_times(rendered, current);
    if current == Some(&next) {
        return Ok(());
    }
    // A merge patch keeps keys it does not mention, so keys Stencil no longer writes are nulled.
    let mut patch = next.as_object().cloned().unwrap_or_default();
    if let Some(Value::Object(old)) = current {
        for k in old.keys() {
            patch.entry(k.clone()).or_insert(Value::Null);
        }
    }
    let body = Value::Object(Map::from_iter([("status".to_string(), Value::Object(patch))]));
    let answer = ctx
        .parent_api(parent)
        .patch_status(
            &parent.metadata.name.clone().unwrap_or_default(),
            &PatchParams::default(),
            &Patch::Merge(&body),
        )
        .await
        .map_err(|source| ReconcileError::Kube {
            action: Operation::WriteStatus,
            object: describe_object(parent),
            source,
        })?;
    if let (Some(uid), Some(version)) = (&answer.metadata.uid, &answer.metadata.resource_version) {
        ctx.ledger().expect_echo(&ctx.parent_key(parent), uid, version);
    }
    Ok(())
}
