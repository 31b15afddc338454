//! Applying one desired child: server-side apply as `stencil`, skipped when the live
//! object already matches, with the child's update policy. An object that is not this
//! parent's is never written ([`crate::ownership`]): the child reports a conflict, or
//! adopts the object when it may. Only `updatePolicy: Recreate` ever deletes a child to
//! change it; a change the API server refuses as immutable is otherwise reported. Every
//! write carries a precondition: a create only creates, and an update or an adoption
//! writes only the object that was judged, by its uid.

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions};
use kube::runtime::events::EventType;
use kube::runtime::reflector::ObjectRef;
use serde_json::Value;

use super::context::describe;
use super::{Context, Operation, ReconcileError};
use crate::applied;
use crate::definition::UpdatePolicy;
use crate::immutable;
use crate::labels;
use crate::metrics;
use crate::object_key::to_json;
use crate::ownership::{self, OwnershipVerdict};
use crate::render::DesiredChild;

pub(super) use crate::applied::CREATE_ONLY;

/// The object to apply, with its precondition: the uid of the live object judged, or
/// [`CREATE_ONLY`] when there is none.
fn with_precondition(desired: &Value, live: Option<&Value>) -> Value {
    let mut body = desired.clone();
    match live.and_then(|l| l.pointer("/metadata/uid")).and_then(Value::as_str) {
        Some(uid) => body["metadata"]["uid"] = uid.into(),
        None => body["metadata"]["resourceVersion"] = CREATE_ONLY.into(),
    }
    body
}

/// Whether a 409 is server-side apply's field conflict (another manager owns a field),
/// not a failed precondition.
fn field_conflict(status: &kube::core::Status) -> bool {
    status.code == 409
        && status
            .details
            .iter()
            .flat_map(|d| &d.causes)
            .any(|c| c.reason == "FieldManagerConflict")
}

/// Where a desired child lives: its kind's API, its key and its live state.
struct Located {
    api: Api<DynamicObject>,
    name: String,
    live: Option<Value>,
}

/// Finds a desired child through its kind's watch.
fn locate(ctx: &Context, obj: &Value) -> Result<Located, ReconcileError> {
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default();
    let watch = ctx
        .child_watch(api_version, kind)
        .ok_or_else(|| ReconcileError::UnknownKind(format!("{api_version}/{kind}")))?;
    let ar = &watch.resolved.resource;
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut oref = ObjectRef::new_with(name, ar.clone());
    let namespace = obj.pointer("/metadata/namespace").and_then(Value::as_str);
    if let Some(ns) = namespace {
        oref = oref.within(ns);
    }
    let api = crate::discovery::api(&ctx.client, namespace, ar);
    let live = watch.get(&oref).map(|o| to_json(&o));
    Ok(Located {
        api,
        name: oref.name,
        live,
    })
}

/// Children of one parent applied (or deleted) at once.
pub(super) const CONCURRENCY: usize = 8;

/// What applying one child came to.
#[derive(Debug, PartialEq)]
pub(super) enum Applied {
    /// The child was in line already.
    Done,
    /// The child was created or updated: which object and which (for the pass's one
    /// event, [`tell`]), and the object as the API server answered the write.
    Written(String, Box<DynamicObject>),
    /// A Recreate deleted the old object: reconcile again soon to create the new one.
    Soon,
    /// A Recreate waits for the old object, deleted already, to go: its deletion wakes
    /// the parent; no second DELETE is sent.
    Replacing,
    /// The object exists and is not this parent's; nothing was written.
    Conflict(String),
    /// The change needs a field the API server holds immutable, and the child may not be
    /// recreated: nothing was written or deleted. Says which object and field.
    Immutable(String),
}

/// Brings one child in line.
pub(super) async fn child(
    ctx: &Context,
    parent: &DynamicObject,
    child: &DesiredChild,
) -> Result<Applied, ReconcileError> {
    let (desired, hash) = applied::with_hash(child.object.clone());
    let Located { api, name, live } = locate(ctx, &desired)?;
    let what = describe(&desired);
    let kube_err = |action: Operation| {
        let object = what.clone();
        move |source| ReconcileError::Kube { action, object, source }
    };
    // The store holds only Stencil's objects: one that is not there may still exist,
    // made by hand or by another controller. A create that cannot write an existing
    // object finds that out in the same request; only a name that is taken is read and
    // judged, so the usual create costs no extra round trip.
    let live = match live {
        Some(l) => Some(l),
        None => {
            let params = PatchParams::apply(labels::FIELD_MANAGER);
            let taken = match api
                .patch(&name, &params, &Patch::Apply(&with_precondition(&desired, None)))
                .await
            {
                Ok(answer) => return Ok(written(ctx, parent, (&desired, &hash), &what, false, answer)),
                Err(kube::Error::Api(status)) if status.code == 409 => match api.get_opt(&name).await {
                    // Gone again already: the next pass creates it.
                    Ok(None) => return Ok(Applied::Soon),
                    Ok(Some(found)) => Ok(to_json(&found)),
                    Err(e) => Err(kube_err(Operation::Read)(e)),
                },
                Err(e) => Err(kube_err(Operation::Apply)(e)),
            };
            match taken {
                Ok(found) => Some(found),
                Err(e) => {
                    count(ctx, &desired, "error");
                    ctx.event(parent, EventType::Warning, "Error", format!("{what}: {e}"))
                        .await;
                    return Err(e);
                }
            }
        }
    };
    let uid = parent.metadata.uid.as_deref().unwrap_or_default();
    let adopting = match ownership::judge(
        live.as_ref(),
        uid,
        &ctx.def.name,
        ctx.def.spec.is_decorator(),
        child.adopt,
    ) {
        OwnershipVerdict::Conflict(message) => return Ok(Applied::Conflict(message)),
        OwnershipVerdict::Adopt => true,
        OwnershipVerdict::Absent | OwnershipVerdict::Ours => false,
    };
    if adopting {
        let params = PatchParams::apply(labels::FIELD_MANAGER).force();
        match api
            .patch(
                &name,
                &params,
                &Patch::Apply(&with_precondition(&desired, live.as_ref())),
            )
            .await
        {
            // Replaced since it was judged: judged again on the next pass.
            Err(kube::Error::Api(status)) if status.code == 409 => return Ok(Applied::Soon),
            other => other.map_err(kube_err(Operation::Adopt))?,
        };
        count(ctx, &desired, "adopted");
        ctx.event(
            parent,
            EventType::Normal,
            "Adopted",
            format!("{what} adopted: nobody controlled it"),
        )
        .await;
        return Ok(Applied::Done);
    }

    if let Some(live) = &live {
        let stored = applied::live_hash(live);
        let same_hash = stored == Some(hash.as_str());
        let live_uid = live
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let behind = ctx.ledger().behind(&ctx.parent_ref(parent), live_uid, stored, &hash);
        if behind
            || child.update_policy == UpdatePolicy::OnCreate
            || (same_hash && applied::live_contains(live, &desired))
        {
            ctx.metrics
                .apply_skipped_total
                .get_or_create(&metrics::definition(&ctx.def.name))
                .inc();
            return Ok(Applied::Done);
        }
        if child.update_policy == UpdatePolicy::Recreate && !same_hash {
            return recreate(ctx, parent, &api, &name, live, &desired)
                .await
                .map_err(kube_err(Operation::Delete));
        }
    }

    let params = PatchParams::apply(labels::FIELD_MANAGER);
    let body = with_precondition(&desired, live.as_ref());
    let result = match api.patch(&name, &params, &Patch::Apply(&body)).await {
        // Another manager took a field of an object that is this parent's: Stencil's
        // value wins, and the Warning says whose it was. Still only that object, by uid.
        Err(kube::Error::Api(status)) if live.is_some() && field_conflict(&status) => {
            ctx.event(
                parent,
                EventType::Warning,
                "Conflict",
                format!("{what}: {}; forcing Stencil's values", status.message),
            )
            .await;
            api.patch(&name, &params.clone().force(), &Patch::Apply(&body)).await
        }
        other => other,
    };
    match result {
        Ok(answer) => Ok(written(ctx, parent, (&desired, &hash), &what, live.is_some(), answer)),
        // The object appeared since the read (a create), or was replaced since it was
        // judged (an update): nothing was written; it is judged again on the next pass.
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(Applied::Soon),
        // A change to an immutable field (a Job's template, a claim's storage class) can
        // only be made by recreating the object, which may destroy data: only a child
        // whose author chose Recreate is recreated.
        Err(kube::Error::Api(status)) if live.is_some() && immutable::refusal(&status).is_some() => {
            let live = live.as_ref().expect("checked above");
            if child.update_policy == UpdatePolicy::Recreate {
                return recreate(ctx, parent, &api, &name, live, &desired)
                    .await
                    .map_err(kube_err(Operation::Delete));
            }
            count(ctx, &desired, "immutable");
            let fields = immutable::refusal(&status).unwrap_or_default();
            Ok(Applied::Immutable(format!(
                "{what}: the change needs a field that cannot change in place ({fields}); nothing was written or \
                 deleted: revert the change, or set updatePolicy: Recreate on child `{}` to replace the object",
                child.child
            )))
        }
        Err(e) => {
            count(ctx, &desired, "error");
            ctx.event(parent, EventType::Warning, "Error", format!("{what}: {e}"))
                .await;
            Err(kube_err(Operation::Apply)(e))
        }
    }
}

/// Counts a write that created or updated a child, and remembers it until the child's
/// store holds it.
fn written(
    ctx: &Context,
    parent: &DynamicObject,
    (desired, hash): (&Value, &str),
    what: &str,
    updated: bool,
    answer: DynamicObject,
) -> Applied {
    let verb = if updated { "updated" } else { "created" };
    count(ctx, desired, verb);
    if let Some(uid) = &answer.metadata.uid {
        let me = ctx.parent_ref(parent);
        let mut ledger = ctx.ledger();
        ledger.wrote(&me, uid, hash);
        if let Some(version) = &answer.metadata.resource_version {
            ledger.expect_echo(&me, uid, version);
        }
    }
    Applied::Written(format!("{what} {verb}"), Box::new(answer))
}

/// Tells the writes of one pass in one event: a new parent's children cost one event
/// write, not one each.
pub(super) async fn tell(ctx: &Context, parent: &DynamicObject, writes: &[String]) {
    if writes.is_empty() {
        return;
    }
    let reason = if writes.iter().all(|w| w.ends_with(" created")) {
        "Created"
    } else if writes.iter().all(|w| w.ends_with(" updated")) {
        "Updated"
    } else {
        "Applied"
    };
    ctx.event(parent, EventType::Normal, reason, writes.join("; ")).await;
}

/// Deletes the live object so that the next pass creates it anew, once: an object already
/// terminating (a claim held by `pvc-protection`) is waited for, not deleted again.
async fn recreate(
    ctx: &Context,
    parent: &DynamicObject,
    api: &Api<DynamicObject>,
    name: &str,
    live: &Value,
    desired: &Value,
) -> Result<Applied, kube::Error> {
    if live.pointer("/metadata/deletionTimestamp").is_some() {
        return Ok(Applied::Replacing);
    }
    delete(ctx, parent, api, name, live, "Recreate").await?;
    count(ctx, desired, "recreated");
    Ok(Applied::Soon)
}

fn count(ctx: &Context, obj: &Value, result: &str) {
    let labels = metrics::ApplyLabels {
        definition: ctx.def.name.clone(),
        kind: obj.get("kind").and_then(Value::as_str).unwrap_or_default().to_string(),
        result: result.to_string(),
    };
    ctx.metrics.children_applied_total.get_or_create(&labels).inc();
}

/// Deletes a child with a UID precondition, so an object recreated meanwhile is kept.
/// True when a deletion was asked for; false when the object was gone already, or is
/// another object of the same name now.
pub(super) async fn delete(
    ctx: &Context,
    parent: &DynamicObject,
    api: &Api<DynamicObject>,
    name: &str,
    live: &Value,
    reason: &str,
) -> Result<bool, kube::Error> {
    let uid = live
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .map(str::to_string);
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid,
            resource_version: None,
        }),
        ..DeleteParams::background()
    };
    match api.delete(name, &params).await {
        Ok(_) => {
            ctx.event(parent, EventType::Normal, reason, format!("{} deleted", describe(live)))
                .await;
            Ok(true)
        }
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}
