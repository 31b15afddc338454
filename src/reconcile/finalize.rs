//! The parent finalizer `stencil.dev/finalizer`: added on the first reconcile where the
//! garbage collector cannot clean up alone; on deletion, each child goes by its deletion
//! policy (the child's, or else the definition's): `Delete` removes it and waits for it
//! to go, `Orphan` strips Stencil's ownerReference and labels; then the finalizer is
//! removed. Deletions go in waves, in reverse `dependsOn` order: a child is deleted only
//! once every child that depends on it is gone. A finalize step (`finalize.children`
//! and `finalize.until`, bounded by `finalize.timeoutSeconds`) runs before the teardown
//! ([`super::teardown`]), and its children go last.

use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use serde_json::{Value, json};

use super::context::describe_object;
use super::teardown::{listed_children, phases};
use super::{Context, Operation, ReconcileError, apply};
use crate::compile::CompiledDefinition;
use crate::conditions::condition;
use crate::definition::DeletionPolicy;
use crate::labels;
use crate::render;

/// The condition that records the end of the finalize step.
const FINALIZED: &str = "Finalized";

/// The finalizer the API server puts on an object deleted with `propagationPolicy:
/// Orphan` (`kubectl delete --cascade=orphan`): its dependents are to be kept.
const ORPHAN_CASCADE: &str = "orphan";

fn has_finalizer(obj: &DynamicObject) -> bool {
    obj.finalizers().iter().any(|f| f == labels::FINALIZER)
}

/// Whether a deleted parent waits for Stencil: it carries Stencil's finalizer, or one the
/// definition inherits from the controller that served the parent before.
fn held(def: &CompiledDefinition, parent: &DynamicObject) -> bool {
    let inherited = &def.spec.finalize.inherit_finalizers;
    has_finalizer(parent) || parent.finalizers().iter().any(|f| inherited.contains(f))
}

/// Rewrites the parent's finalizers with `edit`, guarded by its resourceVersion; on a
/// conflict the parent is read again and the edit retried, so a stale cache costs one
/// round trip instead of a requeue.
async fn edit_finalizers(
    api: &Api<DynamicObject>,
    parent: &DynamicObject,
    edit: impl Fn(&[String]) -> Option<Vec<String>>,
) -> Result<(), kube::Error> {
    let mut current = parent.clone();
    for attempt in 0..3 {
        let Some(finalizers) = edit(current.finalizers()) else {
            return Ok(());
        };
        let patch = json!({"metadata": {"finalizers": finalizers, "resourceVersion": current.resource_version()}});
        match api
            .patch(&current.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Err(kube::Error::Api(s)) if s.code == 409 && attempt < 2 => current = api.get(&current.name_any()).await?,
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
            other => return other.map(|_| ()),
        }
    }
    Ok(())
}

/// Whether a desired child carries its parent's controller ownerReference, so the garbage
/// collector deletes it with the parent.
pub(super) fn owned_by_parent(child: &Value) -> bool {
    child
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|refs| refs.iter().any(|r| r.get("controller") == Some(&Value::Bool(true))))
}

/// Adds the finalizer when it is missing.
pub(super) async fn ensure(ctx: &Context, parent: &DynamicObject) -> Result<(), ReconcileError> {
    if has_finalizer(parent) {
        return Ok(());
    }
    let add = |f: &[String]| {
        (!f.iter().any(|x| x == labels::FINALIZER)).then(|| {
            let mut all = f.to_vec();
            all.push(labels::FINALIZER.to_string());
            all
        })
    };
    edit_finalizers(&ctx.parent_api(parent), parent, add)
        .await
        .map_err(|source| ReconcileError::Kube {
            action: Operation::UpdateFinalizers,
            object: describe_object(parent),
            source,
        })
}

/// Removes Stencil's finalizer from a parent, and the `inherited` ones, leaving any other.
///
/// # Errors
///
/// The API server refuses the patch or cannot be reached.
pub async fn release(
    api: &Api<DynamicObject>,
    parent: &DynamicObject,
    inherited: &[String],
) -> Result<(), kube::Error> {
    let ours = |x: &String| x == labels::FINALIZER || inherited.contains(x);
    let remove = |f: &[String]| {
        f.iter()
            .any(ours)
            .then(|| f.iter().filter(|x| !ours(x)).cloned().collect())
    };
    edit_finalizers(api, parent, remove).await
}

/// Whether deleting a parent needs Stencil, not only the garbage collector: there is a
/// finalize step, a child may be orphaned (it must be stripped in time), or children
/// depend on each other (they go in reverse dependsOn order).
pub(super) fn teardown_needs_stencil(def: &CompiledDefinition) -> bool {
    let default = def.spec.finalize.deletion_policy;
    def.spec.finalize.has_step()
        || def
            .entries()
            .any(|(_, c)| c.deletion_policy.unwrap_or(default) == DeletionPolicy::Orphan || !c.depends_on.is_empty())
}

/// Cleans up after a deleted parent, then releases it. First the finalize step, when the
/// definition has one ([`step`]); then each child is deleted or orphaned as its policy
/// says, deletions in reverse dependsOn order, the finalize children last; a child
/// already terminating is waited for, not deleted again; one failed request does not
/// stop the others.
pub(super) async fn run(ctx: &Arc<Context>, parent: &Arc<DynamicObject>) -> Result<Action, ReconcileError> {
    let def = ctx.def_for(parent);
    if !held(&def, parent) {
        return Ok(Action::await_change());
    }
    let uid = parent.uid().unwrap_or_default();
    let children = ctx.observed(&uid);
    // Deleted with `--cascade=orphan`: every child is kept, as the garbage collector keeps
    // the dependents; the finalize step, which prepares a teardown, does not run.
    let keep_all = parent.finalizers().iter().any(|f| f == ORPHAN_CASCADE);
    // The `Finalized` condition is the step's record: once it is written, a restarted
    // Stencil goes on with the teardown instead of rendering the finalize children again.
    let me = ctx.parent_key(parent);
    let remembered = || ctx.ledger().finalized(&me);
    let finalized = match finalized_condition(parent).or_else(remembered) {
        Some(c) => Some(c),
        None if def.spec.finalize.has_step() && !keep_all => match step(ctx, parent, &children).await? {
            Step::Pending(action) => return Ok(action),
            Step::Done(c) => {
                ctx.ledger().finish(&me, c.clone());
                Some(c)
            }
        },
        None => None,
    };
    // The step may have created finalize children in this very pass: look again.
    let children = if finalized.is_some() {
        ctx.observed(&uid)
    } else {
        children
    };
    let blocking = async {
        let blocking = phases(ctx, parent, &uid, children, keep_all).await?;
        if !blocking.is_empty() {
            return Ok(blocking);
        }
        // The store may lag behind a child created just before the deletion, or a
        // child's watch may be broken: before the finalizer goes, the API server itself
        // says that nothing of the parent's is left.
        let listed = listed_children(ctx, parent, &uid).await?;
        if listed.is_empty() {
            return Ok(Vec::new());
        }
        phases(ctx, parent, &uid, listed, keep_all).await
    };
    match blocking.await {
        Ok(blocking) if blocking.is_empty() => {}
        Ok(blocking) => {
            let message = format!("deleting; waiting for {}", blocking.join(", "));
            best_effort(ctx, parent, write_deleting(ctx, parent, &message, finalized).await);
            return Err(ReconcileError::Waiting(message));
        }
        // The parent says why its deletion is stuck, not only the log.
        Err(e) => {
            let message = format!("deleting; {e}");
            best_effort(ctx, parent, write_deleting(ctx, parent, &message, finalized).await);
            return Err(e);
        }
    }
    release(&ctx.parent_api(parent), parent, &def.spec.finalize.inherit_finalizers)
        .await
        .map_err(|source| ReconcileError::Kube {
            action: Operation::Release,
            object: describe_object(parent),
            source,
        })?;
    Ok(Action::await_change())
}

/// Logs a status write that failed where the teardown must go on regardless: the status
/// is a record, and a parent whose CRD has no status subresource (or whose status
/// cannot be written for any reason) must still be finalized within its timeout.
fn best_effort(ctx: &Context, parent: &DynamicObject, written: Result<(), ReconcileError>) {
    if let Err(e) = written {
        tracing::warn!(definition = %ctx.def.name, parent = %describe_object(parent), error = %e, "status not written; the teardown goes on");
    }
}

/// Writes `Ready=False` with reason `Deleting`, keeping the `Finalized` record.
async fn write_deleting(
    ctx: &Context,
    parent: &DynamicObject,
    message: &str,
    finalized: Option<Value>,
) -> Result<(), ReconcileError> {
    let mut conditions = vec![condition("Ready", false, "Deleting", message, None)];
    conditions.extend(finalized);
    super::status_write::write(ctx, parent, &json!({ "conditions": conditions })).await
}

/// The parent's `Finalized=True` condition, once the finalize step has ended.
fn finalized_condition(parent: &DynamicObject) -> Option<Value> {
    parent
        .data
        .pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| c.get("type") == Some(&json!(FINALIZED)) && c.get("status") == Some(&json!("True")))
        .cloned()
}

/// Where the finalize step stands.
enum Step {
    /// Still running: look again then (a finalize child's change comes sooner).
    Pending(Action),
    /// Ended, by `finalize.until` or by the timeout: the `Finalized` condition to keep.
    Done(Value),
}

/// The finalize step: renders and applies the finalize children, then checks
/// `finalize.until` (or, without it, that every finalize child is ready). Nothing in it
/// can hold the parent longer than `finalize.timeoutSeconds` from its deletion: a render
/// or apply that fails counts as not done, and past the timeout Stencil emits
/// `FinalizeTimeout` and tears down anyway.
async fn step(
    ctx: &Arc<Context>,
    parent: &Arc<DynamicObject>,
    children: &[Arc<DynamicObject>],
) -> Result<Step, ReconcileError> {
    let seconds = ctx.def_for(parent).spec.finalize.timeout_seconds;
    let timeout = Duration::from_secs(u64::from(seconds));
    let elapsed = since_deletion(parent);
    let (_, rendered) = super::rendering::render_off_thread(ctx, parent, children, render::render_finalize).await?;
    let mut pending = Vec::new();
    match rendered {
        Ok(out) => {
            let fresh = super::fresh::Freshness::default();
            let applies: Vec<_> = out
                .children
                .iter()
                .map(|c| apply::child(ctx, parent, c, &fresh))
                .collect();
            let mut writes = Vec::new();
            for result in futures::future::join_all(applies).await {
                match result {
                    Ok(apply::Applied::Written(what, _)) => writes.push(what),
                    Ok(apply::Applied::Done | apply::Applied::Retry | apply::Applied::Replacing) => {}
                    Ok(apply::Applied::Conflict(message) | apply::Applied::Immutable(message)) => pending.push(message),
                    Err(e) => pending.push(e.to_string()),
                }
            }
            apply::event_for_writes(ctx, parent, &writes).await;
            pending.extend(out.pending);
        }
        Err(failure) => {
            ctx.event(parent, EventType::Warning, "Error", failure.to_string())
                .await;
            pending.push(format!("the finalize children failed to render: {failure}"));
        }
    }
    let done = |reason: &str, message: &str| condition(FINALIZED, true, reason, message, None);
    // The `Finalized` record is written where it can be; where it cannot, the step runs
    // again on the next pass (it is idempotent) and ends the same way.
    if pending.is_empty() {
        let c = done("Finalized", "the finalize step completed");
        let written = write_deleting(ctx, parent, "deleting the children", Some(c.clone())).await;
        best_effort(ctx, parent, written);
        return Ok(Step::Done(c));
    }
    let why = pending.join("; ");
    if elapsed >= timeout {
        let message = format!("the finalize step did not complete within {seconds}s ({why}); tearing down anyway");
        tracing::warn!(definition = %ctx.def.name, parent = %describe_object(parent), "{message}");
        // The condition is written before the teardown, so the event is emitted once.
        let c = done("FinalizeTimeout", &message);
        let written = write_deleting(ctx, parent, "deleting the children", Some(c.clone())).await;
        best_effort(ctx, parent, written);
        ctx.event(parent, EventType::Warning, "FinalizeTimeout", message).await;
        return Ok(Step::Done(c));
    }
    let message = format!("finalizing: waiting for {why}");
    let status = json!({"conditions": [
        condition("Ready", false, "Finalizing", &message, None),
        condition(FINALIZED, false, "Finalizing", &message, None),
    ]});
    best_effort(ctx, parent, super::status_write::write(ctx, parent, &status).await);
    Ok(Step::Pending(Action::requeue((timeout - elapsed).min(ctx.resync()))))
}

/// How long ago the parent was deleted, by this machine's clock.
fn since_deletion(parent: &DynamicObject) -> Duration {
    let Some(deleted) = &parent.metadata.deletion_timestamp else {
        return Duration::ZERO;
    };
    Duration::try_from(k8s_openapi::jiff::Timestamp::now().duration_since(deleted.0)).unwrap_or_default()
}
