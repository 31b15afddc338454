//! Applying one desired child: server-side apply as `stencil`, skipped when the live
//! object already matches, with the child's update policy. An object that is not this
//! parent's is never written ([`crate::ownership`]): the child reports a conflict, or
//! adopts the object when it may. Only `updatePolicy: Recreate` ever deletes a child to
//! change it; a change the API server refuses as immutable is otherwise reported. Every
//! write carries a precondition: a create only creates, and an update or an adoption
//! writes only the object that was judged, by its uid.

use std::sync::Arc;

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::runtime::reflector::ObjectRef;
use serde_json::Value;

use super::context::describe;
use super::fresh::Freshness;
use super::{Context, Operation, ReconcileError};
use crate::applied;
use crate::definition::UpdatePolicy;
use crate::immutable;
use crate::labels;
use crate::metrics;
use crate::object_key::{ObjectKey, to_json};
use crate::ownership::{self, OwnershipVerdict};
use crate::render::DesiredChild;
use crate::watch::CatchUp;

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
    /// When the kind's store last caught up.
    store: Arc<CatchUp>,
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
    let live = watch
        .get(&oref)
        .or_else(|| ctx.ledger().unseen.get(&ObjectKey::of_value(obj)?))
        .map(|o| to_json(&o));
    Ok(Located {
        api,
        name: oref.name,
        live,
        store: watch.catch_up(),
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
    /// event, [`event_for_writes`]), and the object as the API server answered the write.
    Written(String, Box<DynamicObject>),
    /// Nothing is in line yet and nothing is wrong: a Recreate deleted the old object, or
    /// the object went or changed since it was judged. The parent is looked at again
    /// within a second.
    Retry,
    /// A Recreate waits for the old object, deleted already, to go: its deletion wakes
    /// the parent; no second DELETE is sent.
    Replacing,
    /// The object exists and is not this parent's; nothing was written.
    Conflict(String),
    /// The change needs a field the API server holds immutable, and the child may not be
    /// recreated: nothing was written or deleted. Says which object and field.
    Immutable(String),
}

/// Brings one child in line: judged (whose object it is, whether it is in line
/// already), then written, then the API server's answer read.
pub(super) async fn child(
    ctx: &Context,
    parent: &DynamicObject,
    child: &DesiredChild,
    fresh: &Freshness,
) -> Result<Applied, ReconcileError> {
    let (desired, hash) = applied::with_hash(child.object.clone());
    let Located { api, name, live, store } = locate(ctx, &desired)?;
    let w = ChildWrite {
        ctx,
        parent,
        child,
        what: describe(&desired),
        desired,
        hash,
        api,
        name,
        fresh,
        store,
    };
    let live = match live {
        Some(live) => live,
        None => match w.create().await? {
            Created::Answered(applied) => return Ok(applied),
            Created::Taken(found) => found,
        },
    };
    let uid = parent.metadata.uid.as_deref().unwrap_or_default();
    match ownership::judge(
        Some(&live),
        uid,
        &ctx.def.name,
        ctx.def.spec.is_decorator(),
        child.adopt,
    ) {
        OwnershipVerdict::Conflict(message) => return Ok(Applied::Conflict(message)),
        OwnershipVerdict::Adopt => return w.adopt(&live).await,
        OwnershipVerdict::Absent | OwnershipVerdict::Ours => {}
    }
    if let Some(applied) = w.in_line_or_recreated(&live).await {
        return applied;
    }
    w.update(&live).await
}

/// One desired child on its way to the API server.
struct ChildWrite<'a> {
    ctx: &'a Context,
    parent: &'a DynamicObject,
    child: &'a DesiredChild,
    /// The object to apply, carrying its hash.
    desired: Value,
    hash: String,
    api: Api<DynamicObject>,
    name: String,
    /// The object as messages name it.
    what: String,
    /// Whether the pass's copy of the parent may change its children.
    fresh: &'a Freshness,
    /// When the kind's store last caught up: a create is kept until it shows it.
    store: Arc<CatchUp>,
}

/// What a create found.
enum Created {
    /// It ended the child's apply: created, or gone again after a conflict.
    Answered(Applied),
    /// The name is taken: the object there, to be judged.
    Taken(Value),
}

impl ChildWrite<'_> {
    fn kube_err(&self, action: Operation) -> impl FnOnce(kube::Error) -> ReconcileError {
        let object = self.what.clone();
        move |source| ReconcileError::Kube { action, object, source }
    }

    /// Counts a failed write and says it on the parent, then hands the error back.
    async fn failed(&self, error: ReconcileError) -> ReconcileError {
        count(self.ctx, &self.desired, "error");
        self.ctx
            .event(
                self.parent,
                EventType::Warning,
                "Error",
                format!("{}: {error}", self.what),
            )
            .await;
        error
    }

    /// Creates a child its watch does not hold. The store holds only Stencil's objects:
    /// one that is not there may still exist, made by hand or by another controller. A
    /// create that cannot write an existing object finds that out in the same request;
    /// only a name that is taken is read and judged, so the usual create costs no extra
    /// round trip.
    async fn create(&self) -> Result<Created, ReconcileError> {
        let params = PatchParams::apply(labels::FIELD_MANAGER);
        let body = with_precondition(&self.desired, None);
        let error = match self.api.patch(&self.name, &params, &Patch::Apply(&body)).await {
            Ok(answer) => return Ok(Created::Answered(self.written(false, answer))),
            Err(kube::Error::Api(status)) if status.code == 409 => match self.api.get_opt(&self.name).await {
                // Gone again already: the next pass creates it.
                Ok(None) => return Ok(Created::Answered(Applied::Retry)),
                Ok(Some(found)) => return Ok(Created::Taken(to_json(&found))),
                Err(e) => self.kube_err(Operation::Read)(e),
            },
            Err(e) => self.kube_err(Operation::Apply)(e),
        };
        Err(self.failed(error).await)
    }

    /// Takes over an object nobody controls, as the child allows.
    async fn adopt(&self, live: &Value) -> Result<Applied, ReconcileError> {
        let params = PatchParams::apply(labels::FIELD_MANAGER).force();
        let body = with_precondition(&self.desired, Some(live));
        match self.api.patch(&self.name, &params, &Patch::Apply(&body)).await {
            // Replaced since it was judged: judged again on the next pass.
            Err(kube::Error::Api(status)) if status.code == 409 => return Ok(Applied::Retry),
            other => other.map_err(self.kube_err(Operation::Adopt))?,
        };
        count(self.ctx, &self.desired, "adopted");
        let message = format!("{} adopted: nobody controlled it", self.what);
        self.ctx.event(self.parent, EventType::Normal, "Adopted", message).await;
        Ok(Applied::Done)
    }

    /// Nothing to write (the live object matches, this pass's own write is still on its
    /// way, or the child is created once), or a Recreate of a changed child: its answer.
    async fn in_line_or_recreated(&self, live: &Value) -> Option<Result<Applied, ReconcileError>> {
        let ctx = self.ctx;
        let stored = applied::live_hash(live);
        let same_hash = stored == Some(self.hash.as_str());
        let live_uid = live
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let behind = ctx
            .ledger()
            .behind(&ctx.parent_key(self.parent), live_uid, stored, &self.hash);
        if behind
            || self.child.update_policy == UpdatePolicy::OnCreate
            || (same_hash && applied::live_contains(live, &self.desired))
        {
            ctx.metrics
                .apply_skipped_total
                .get_or_create(&metrics::definition(&ctx.def.name))
                .inc();
            return Some(Ok(Applied::Done));
        }
        if self.child.update_policy == UpdatePolicy::Recreate && !same_hash {
            return Some(self.recreate(live).await);
        }
        None
    }

    /// Updates this parent's object. Another manager that took one of its fields loses
    /// it to Stencil's value, and the Warning says whose it was (still only that object,
    /// by uid).
    async fn update(&self, live: &Value) -> Result<Applied, ReconcileError> {
        if !self.fresh.current(self.ctx, self.parent).await? {
            return Ok(Applied::Retry);
        }
        let params = PatchParams::apply(labels::FIELD_MANAGER);
        let body = with_precondition(&self.desired, Some(live));
        let result = match self.api.patch(&self.name, &params, &Patch::Apply(&body)).await {
            Err(kube::Error::Api(status)) if field_conflict(&status) => {
                let message = format!("{}: {}; forcing Stencil's values", self.what, status.message);
                self.ctx
                    .event(self.parent, EventType::Warning, "Conflict", message)
                    .await;
                self.api
                    .patch(&self.name, &params.clone().force(), &Patch::Apply(&body))
                    .await
            }
            other => other,
        };
        match result {
            Ok(answer) => Ok(self.written(true, answer)),
            // Replaced since it was judged: nothing was written; judged again next pass.
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(Applied::Retry),
            Err(kube::Error::Api(status)) if immutable::refusal(&status).is_some() => {
                self.immutable(live, &immutable::refusal(&status).unwrap_or_default())
                    .await
            }
            Err(e) => Err(self.failed(self.kube_err(Operation::Apply)(e)).await),
        }
    }

    /// A change to an immutable field (a Job's template, a claim's storage class) can
    /// only be made by recreating the object, which may destroy data: only a child whose
    /// author chose Recreate is recreated; any other says which `fields` and what to do.
    async fn immutable(&self, live: &Value, fields: &str) -> Result<Applied, ReconcileError> {
        if self.child.update_policy == UpdatePolicy::Recreate {
            return self.recreate(live).await;
        }
        count(self.ctx, &self.desired, "immutable");
        Ok(Applied::Immutable(format!(
            "{}: the change needs a field that cannot change in place ({fields}); nothing was written or \
             deleted: revert the change, or set updatePolicy: Recreate on child `{}` to replace the object",
            self.what, self.child.child
        )))
    }

    async fn recreate(&self, live: &Value) -> Result<Applied, ReconcileError> {
        if !self.fresh.current(self.ctx, self.parent).await? {
            return Ok(Applied::Retry);
        }
        recreate(self.ctx, self.parent, &self.api, live, &self.desired)
            .await
            .map_err(self.kube_err(Operation::Delete))
    }

    /// Counts a write that created or updated the child, and remembers it until the
    /// child's store holds it.
    fn written(&self, updated: bool, answer: DynamicObject) -> Applied {
        let verb = if updated { "updated" } else { "created" };
        count(self.ctx, &self.desired, verb);
        if let Some(uid) = &answer.metadata.uid {
            let me = self.ctx.parent_key(self.parent);
            let mut ledger = self.ctx.ledger();
            ledger.wrote(&me, uid, &self.hash);
            if let Some(version) = &answer.metadata.resource_version {
                ledger.expect_echo(&me, uid, version);
            }
            if updated {
                ledger.unseen.updated(&answer);
            } else {
                let parent_uid = self.parent.metadata.uid.as_deref().unwrap_or_default();
                ledger
                    .unseen
                    .created(parent_uid, Arc::new(answer.clone()), self.store.clone());
            }
        }
        Applied::Written(format!("{} {verb}", self.what), Box::new(answer))
    }
}

/// Tells the writes of one pass in one event: a new parent's children cost one event
/// write, not one each.
pub(super) async fn event_for_writes(ctx: &Context, parent: &DynamicObject, writes: &[String]) {
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
    live: &Value,
    desired: &Value,
) -> Result<Applied, kube::Error> {
    if live.pointer("/metadata/deletionTimestamp").is_some() {
        return Ok(Applied::Replacing);
    }
    super::delete::child(ctx, parent, api, live, "Recreate", true).await?;
    count(ctx, desired, "recreated");
    Ok(Applied::Retry)
}

fn count(ctx: &Context, obj: &Value, result: &str) {
    let labels = metrics::ApplyLabels {
        definition: ctx.def.name.clone(),
        kind: obj.get("kind").and_then(Value::as_str).unwrap_or_default().to_string(),
        result: result.to_string(),
    };
    ctx.metrics.children_applied_total.get_or_create(&labels).inc();
}
