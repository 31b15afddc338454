//! Writing a parent's status through its status subresource, only when it changed, keeping
//! each condition's lastTransitionTime while its status stays the same.

use kube::api::{DynamicObject, Patch, PatchParams};
use serde_json::{Map, Value};

use super::context::describe_object;
use super::{Context, ReconcileError};

/// The rendered status with `Ready` False (and `Reconciling` True) for `reason`: a child
/// could not be applied (`ApplyFailed`), or its object is not this parent's (`Conflict`).
pub(super) fn not_ready(rendered: &Value, reason: &str, message: &str) -> Value {
    let mut status = rendered.clone();
    if let Some(conditions) = status.get_mut("conditions").and_then(Value::as_array_mut) {
        conditions.retain(|c| c["type"] != "Ready" && c["type"] != "Reconciling");
        let generation = rendered.get("observedGeneration").cloned().unwrap_or(Value::Null);
        for type_ in ["Ready", "Reconciling"] {
            let mut c = serde_json::json!({"type": type_, "status": if type_ == "Ready" { "False" } else { "True" },
                "reason": reason, "message": message});
            if !generation.is_null() {
                c["observedGeneration"] = generation.clone();
            }
            conditions.push(c);
        }
    }
    status
}

/// Patches the parent's status when it differs from what is there.
pub(super) async fn write(ctx: &Context, parent: &DynamicObject, rendered: &Value) -> Result<(), ReconcileError> {
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
    ctx.parent_api(parent)
        .patch_status(
            &parent.metadata.name.clone().unwrap_or_default(),
            &PatchParams::default(),
            &Patch::Merge(&body),
        )
        .await
        .map_err(|source| ReconcileError::Kube {
            action: "write status of",
            object: describe_object(parent),
            source,
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_failed_apply_turns_ready_false_and_keeps_the_rest() {
        let rendered = json!({"observedGeneration": 3, "url": "x", "conditions": [
            {"type": "Available", "status": "True"}, {"type": "Ready", "status": "True"}]});
        let failed = not_ready(&rendered, "ApplyFailed", "apply Service s: forbidden");
        assert_eq!(failed["url"], "x");
        let ready = failed["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "Ready")
            .unwrap();
        assert_eq!(
            (ready["status"].as_str(), ready["reason"].as_str()),
            (Some("False"), Some("ApplyFailed"))
        );
        assert_eq!(ready["observedGeneration"], 3);
        assert_eq!(failed["conditions"].as_array().unwrap().len(), 3);
    }
}
