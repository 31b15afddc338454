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
    if let (Some(uid), Some(version)) = (&answer.metadata.uid, &answer.metadata.resource_version)
        && as_read(parent, &answer)
    {
        ctx.ledger().expect_echo(&ctx.parent_key(parent), uid, version);
    }
    Ok(())
}

/// Whether the parent after the status write (`answer`) is the one the pass read
/// (`read`) but for its status and Stencil's own finalizer: the same generation, labels,
/// annotations, other finalizers and deletion. Only then is the write's watch event
/// nothing new. Otherwise another hand changed the parent before the write landed, and a
/// watch that skipped that change's own event (a relist, a coalesced update) must still
/// wake the parent: a deletion seen only in the echo would otherwise never be torn down.
fn as_read(read: &DynamicObject, answer: &DynamicObject) -> bool {
    let (r, a) = (&read.metadata, &answer.metadata);
    let others = |m: &kube::api::ObjectMeta| {
        let all = m.finalizers.iter().flatten();
        all.filter(|f| *f != crate::labels::FINALIZER)
            .cloned()
            .collect::<Vec<_>>()
    };
    r.generation == a.generation
        && r.labels == a.labels
        && r.annotations == a.annotations
        && r.deletion_timestamp == a.deletion_timestamp
        && others(r) == others(a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ObjectMeta;
    use serde_json::json;

    /// The parent the pass read, changed by `edit`.
    fn parent(edit: impl FnOnce(&mut ObjectMeta)) -> DynamicObject {
        let p = json!({"apiVersion": "example.org/v1", "kind": "Widget",
            "metadata": {"name": "w", "namespace": "ns", "generation": 1, "labels": {"a": "b"}}});
        let mut p: DynamicObject = serde_json::from_value(p).unwrap();
        edit(&mut p.metadata);
        p
    }

    #[test]
    fn only_an_answer_that_shows_the_parent_as_read_is_an_echo() {
        let read = parent(|_| {});
        assert!(as_read(&read, &parent(|m| m.resource_version = Some("9".into()))));
        assert!(
            as_read(
                &read,
                &parent(|m| m.finalizers = Some(vec![crate::labels::FINALIZER.into()]))
            ),
            "Stencil's own finalizer, added by the same pass"
        );
        let deleted = parent(|m| {
            m.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Default::default()));
        });
        assert!(!as_read(&read, &deleted), "a deletion the pass did not see");
        assert!(!as_read(&read, &parent(|m| m.generation = Some(2))));
        assert!(!as_read(&read, &parent(|m| m.labels = None)));
        assert!(!as_read(
            &read,
            &parent(|m| m.annotations = Some([("x".into(), "y".into())].into()))
        ));
        assert!(!as_read(
            &read,
            &parent(|m| m.finalizers = Some(vec!["example.org/other".into()]))
        ));
    }
}
