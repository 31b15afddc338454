//! The controller of one definition: a thin shell around the pure renderer. For each
//! parent, in order: finalize or ensure the finalizer, render (on the blocking pool, off
//! the async threads), apply, prune, write status.

mod apply;
mod collect;
mod context;
mod error;
mod events;
mod finalize;
mod ledger;
mod pause;
mod prune;
mod readers;
mod rendering;
mod rollout;
mod shard;
mod status;
mod teardown;
mod triggers;

pub use collect::strays;
pub use context::{Context, Decorated};
pub use error::{Operation, ReconcileError};
pub use finalize::release;
pub use pause::paused_by;
pub use rollout::{Split, Stable};

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::DynamicObject;
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::events::EventType;
use serde_json::Value;

use crate::metrics;
use crate::object_key::ObjectKey;
use crate::render;
use crate::watch::Stored;
use context::describe_object;
use rendering::{render_failed, render_off_thread};
use triggers::{Role, stream_from, triggers};

/// Children of one parent applied at once.
const APPLY_CONCURRENCY: usize = 8;

/// Deleted parents whose children are collected at once.
const COLLECT_CONCURRENCY: usize = 4;

/// How soon a parent in conflict over an object looks at it again.
const CONFLICT_RETRY: Duration = Duration::from_secs(60);

/// How soon a parent looks again after a pass that let an echo of its own write go and
/// then found something to wait for.
const ECHO_REPLACED: Duration = Duration::from_millis(100);

/// How soon a parent whose Recreate waits for the old object looks again, should the
/// object's deletion not wake it.
const REPLACING_RETRY: Duration = Duration::from_secs(10);

/// Reconciles one parent.
///
/// # Errors
///
/// A write, read or status update the API server refuses or does not answer, a render that
/// waits on another object, or a child kind that is not watched; the controller retries
/// with backoff ([`error_policy`]).
pub async fn reconcile(parent: Arc<DynamicObject>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let me = ctx.parent_ref(&parent);
    let name = ctx.def.name.clone();
    let since = ctx.ledger().serve(&me);
    if let Some(since) = since {
        ctx.metrics
            .workqueue_queue_duration_seconds
            .get_or_create(&metrics::queue(&name))
            .observe(since.elapsed().as_secs_f64());
    }
    let in_flight = ctx
        .metrics
        .reconciles_in_flight
        .get_or_create(&metrics::definition(&name))
        .clone();
    in_flight.inc();
    let started = std::time::Instant::now();
    let span = tracing::info_span!("reconcile", definition = %name, parent = %describe_object(&parent));
    ctx.ledger().pass_started(&me);
    let mut result = tracing::Instrument::instrument(reconcile_inner(&parent, &ctx), span).await;
    // An echo of this pass's own write was let go, but the pass left something to wait
    // for (a child held back, a retry): the wake-up the echo was is given back.
    if ctx.ledger().pass_ended(&me) && result.is_ok() {
        result = Ok(Action::requeue(ECHO_REPLACED));
    }
    in_flight.dec();
    ctx.metrics
        .reconcile_time_seconds
        .get_or_create(&metrics::controller(&name))
        .observe(started.elapsed().as_secs_f64());
    let outcome = if result.is_ok() { "success" } else { "error" };
    ctx.metrics
        .reconcile_total
        .get_or_create(&metrics::ResultLabels {
            controller: name.clone(),
            result: outcome.into(),
        })
        .inc();
    match &result {
        Ok(_) => ctx.ledger().succeeded(&me),
        Err(e) => {
            if !matches!(e, ReconcileError::Waiting(_)) && !e.transient() {
                ctx.passed(&parent, rollout::Outcome::Failed(e.to_string()));
            }
            ctx.metrics
                .reconcile_errors_total
                .get_or_create(&metrics::controller(&name))
                .inc();
            if let Some(message) = e.forbidden() {
                ctx.ledger().refused(&me, message);
            }
        }
    }
    result
}

async fn reconcile_inner(parent: &Arc<DynamicObject>, ctx: &Arc<Context>) -> Result<Action, ReconcileError> {
    if let Some(action) = shard::gate(ctx, parent).await? {
        return Ok(action);
    }
    if let Some(by) = pause::paused_by(&ctx.def, parent) {
        return Ok(pause::hold(ctx, parent, by).await);
    }
    let decorator = ctx.def.spec.is_decorator();
    if decorator && (parent.metadata.deletion_timestamp.is_some() || !ctx.decorates(&parent.metadata)) {
        return collect::undecorate(ctx, parent).await;
    }
    if parent.metadata.deletion_timestamp.is_some() {
        return finalize::run(ctx, parent).await;
    }
    let uid = parent.metadata.uid.clone().unwrap_or_default();
    let arrived = shard::arrived(ctx, parent);
    let observed_objects = if arrived {
        shard::children_on_arrival(ctx, parent, &uid, ctx.observed(&uid)).await?
    } else {
        ctx.observed(&uid)
    };
    let render_started = std::time::Instant::now();
    let (parent_json, rendered) = render_off_thread(ctx, parent, &observed_objects, render::render).await?;
    ctx.metrics
        .template_render_seconds
        .get_or_create(&metrics::definition(&ctx.def.name))
        .observe(render_started.elapsed().as_secs_f64());
    let out = match rendered {
        Ok(out) => out,
        Err(failure) => {
            ctx.passed(parent, rollout::Outcome::Failed(failure.to_string()));
            return render_failed(ctx, parent, &parent_json, failure).await;
        }
    };
    tracing::debug!(
        observed = observed_objects.len(),
        desired = out.children.len(),
        waiting = out.waiting.len(),
        "rendered"
    );
    // The garbage collector removes children that carry the parent's ownerReference; the
    // finalizer is needed only for the others, to orphan children, and to delete them in
    // reverse dependsOn order.
    // A decorator holds no finalizer on an object it does not own; it tracks the children
    // the garbage collector cannot remove by their labels instead ([`collect::strays`]).
    let needs_finalizer = finalize::teardown_needs_stencil(&ctx.def_for(parent))
        || out.children.iter().any(|c| !finalize::owned_by_parent(&c.object));
    if !decorator && needs_finalizer {
        finalize::ensure(ctx, parent).await?;
    }
    // Children that are rendered together do not depend on each other (dependsOn holds
    // a child back until its dependencies are ready), so they are applied concurrently.
    let mut requeue: Option<Duration> = None;
    let mut conflicts: Vec<(ObjectKey, String)> = Vec::new();
    let mut immutable: Vec<String> = Vec::new();
    // One child's failure does not hold back the others; it stops the prune.
    let mut failed: Option<ReconcileError> = None;
    let mut writes = Vec::new();
    let mut answers = Vec::new();
    for batch in out.children.chunks(APPLY_CONCURRENCY) {
        let applies: Vec<_> = batch.iter().map(|child| apply::child(ctx, parent, child)).collect();
        for (result, child) in futures::future::join_all(applies).await.into_iter().zip(batch) {
            match result {
                Ok(apply::Applied::Done) => {}
                Ok(apply::Applied::Written(what, answer)) => {
                    writes.push(what);
                    answers.push(*answer);
                }
                Ok(apply::Applied::Soon) => requeue = sooner(requeue, Duration::from_secs(1)),
                Ok(apply::Applied::Replacing) => requeue = sooner(requeue, REPLACING_RETRY),
                Ok(apply::Applied::Immutable(message)) => immutable.push(message),
                Ok(apply::Applied::Conflict(message)) => {
                    if let Some(key) = ObjectKey::of_value(&child.object) {
                        conflicts.push((key, message));
                    }
                }
                Err(e) => {
                    failed.get_or_insert(e);
                }
            }
        }
    }
    apply::tell(ctx, parent, &writes).await;
    if let Some(e) = failed {
        return Err(not_ready_after(ctx, parent, &out.status, "ApplyFailed", e).await);
    }
    if let Err(e) = prune::run(ctx, parent, &out, &observed_objects).await {
        return Err(not_ready_after(ctx, parent, &out.status, "PruneFailed", e).await);
    }
    // Children held back by dependsOn may still carry the old member's label: the list
    // is repeated until none is.
    if arrived && out.waiting.is_empty() {
        shard::settled(ctx, parent).await?;
    }
    let rendered_status = if answers.is_empty() {
        out.status
    } else {
        rendering::status_after_writes(ctx, parent, &observed_objects, answers, out.status).await
    };
    let me = ctx.parent_ref(parent);
    // A conflict needs another's object to go; an immutable change needs the author or
    // the user. Either holds the parent back, said once, with nothing deleted.
    let reason = if conflicts.is_empty() { "Immutable" } else { "Conflict" };
    let message = conflicts
        .iter()
        .map(|(_, m)| m.as_str())
        .chain(immutable.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join("; ");
    let in_conflict = !conflicts.is_empty();
    ctx.ledger()
        .waits_for(&me, conflicts.into_iter().map(|(k, _)| k).collect());
    if message.is_empty() {
        ctx.ledger().conflict(&me, None);
        status::write(ctx, parent, &rendered_status).await?;
        ctx.passed(parent, rollout::outcome_of(&rendered_status));
        if requeue.is_none() && out.waiting.is_empty() && !arrived {
            ctx.ledger().ended_clean(&me);
        }
    } else {
        // A Warning event once per change of the conflict, not on every resync.
        let changed = ctx.ledger().conflict(&me, Some(message.clone()));
        if changed {
            tracing::warn!(definition = %ctx.def.name, parent = %describe_object(parent), "{reason}: {message}");
            ctx.event(parent, EventType::Warning, reason, message.clone()).await;
        }
        status::write(ctx, parent, &render::not_ready(&rendered_status, reason, &message)).await?;
        ctx.passed(parent, rollout::Outcome::Failed(format!("{reason}: {message}")));
        if in_conflict {
            // A holder's child that goes wakes this parent through the watch; an object
            // made by hand is not watched, so it is looked at again within a minute.
            requeue = sooner(requeue, CONFLICT_RETRY);
        }
    }
    Ok(Action::requeue(requeue.map_or(ctx.resync(), |r| r.min(ctx.resync()))))
}

/// Says on the parent's status why it is not Ready (`reason`, and the error), and hands
/// the error back to be retried with backoff.
async fn not_ready_after(
    ctx: &Context,
    parent: &DynamicObject,
    rendered: &Value,
    reason: &str,
    error: ReconcileError,
) -> ReconcileError {
    // A refused request says what to grant; several errors are each said as they are.
    let message = match &error {
        ReconcileError::Several(_) => None,
        single => single.forbidden(),
    };
    let message = message.unwrap_or_else(|| error.to_string());
    let status = render::not_ready(rendered, reason, &message);
    if let Err(status_error) = status::write(ctx, parent, &status).await {
        tracing::warn!(error = %status_error, "could not write the status");
    }
    error
}

/// The sooner of a planned requeue and `after`.
fn sooner(planned: Option<Duration>, after: Duration) -> Option<Duration> {
    Some(planned.map_or(after, |p| p.min(after)))
}

/// Requeues a failed parent with exponential backoff: 0.5 s doubling to 5 minutes.
pub fn error_policy(parent: Arc<DynamicObject>, error: &ReconcileError, ctx: Arc<Context>) -> Action {
    let me = ctx.parent_ref(&parent);
    let n = ctx.ledger().failed(&me, 10);
    // An unreachable API server is everyone's problem and costs nothing to retry: parents
    // come back within seconds of it, instead of after a backoff grown during the outage.
    let cap = if error.unreachable() {
        Duration::from_secs(5)
    } else {
        Duration::from_secs(300)
    };
    let delay = Duration::from_millis(500u64 << (n - 1)).min(cap);
    ctx.metrics
        .workqueue_retries_total
        .get_or_create(&metrics::queue(&ctx.def.name))
        .inc();
    let parent = describe_object(&parent);
    match error {
        ReconcileError::Waiting(what) => {
            tracing::info!(definition = %ctx.def.name, %parent, "waiting for {what}")
        }
        _ => {
            tracing::warn!(definition = %ctx.def.name, %parent, error = %error, retry_in = ?delay, "reconcile failed")
        }
    }
    Action::requeue(delay)
}

/// Forgets deleted parents and deletes their owned children, a bounded number at once.
async fn collect_deleted(ctx: Arc<Context>) {
    let deletions = stream_from(ctx.parents.subscribe_deletions());
    deletions
        .for_each_concurrent(COLLECT_CONCURRENCY, |parent| {
            let ctx = ctx.clone();
            async move {
                if collect::is_gone(&ctx, &parent) {
                    ctx.forget(&ctx.parent_ref(&parent));
                    // Held still: the garbage collector, not Stencil, removes what it owned.
                    if pause::paused_by(&ctx.def, &parent).is_some() {
                        return;
                    }
                    if !shard::deleted(&ctx, &parent).await {
                        return;
                    }
                    if ctx.def.spec.is_decorator() {
                        collect::undecorate_gone(&ctx, &parent).await;
                    } else {
                        collect::children(&ctx, &parent).await;
                    }
                }
            }
        })
        .await;
}

/// Runs the controller until `stop` resolves. kube's controller reads parents from the
/// watch's compact store; each pass reads its parent whole.
pub async fn run(
    ctx: Arc<Context>,
    concurrency: u16,
    stop: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let counting = ctx.clone();
    let parent_events = stream_from(ctx.parents.subscribe()).filter_map(move |meta| {
        let me = counting.parents.key_of(&meta);
        let echo = counting.is_echo(&me, &meta);
        if !echo {
            counting.requested(&me);
        }
        futures::future::ready((!echo).then_some(me))
    });
    let collector = tokio::spawn(collect_deleted(ctx.clone()));
    let resource = ctx.parents.resolved.resource.clone();
    let stored = move |r: ledger::ParentRef| r.into_kind_unchecked::<Stored>(resource.clone());
    let mut controller = Controller::for_stream_with(
        futures::stream::pending(),
        ctx.parents.reader(),
        ctx.parents.resolved.resource.clone(),
    )
    .with_config(Config::default().concurrency(concurrency))
    .graceful_shutdown_on(stop)
    .reconcile_on(parent_events.map(stored.clone()));
    for w in &ctx.children {
        controller = controller.reconcile_on(triggers(&ctx, w, Role::Child).map(stored.clone()));
    }
    for w in &ctx.lookups {
        controller = controller.reconcile_on(triggers(&ctx, w, Role::Lookup).map(stored.clone()));
    }
    if let Some(nudges) = ctx.take_nudges() {
        controller = controller.reconcile_on(nudges.map(stored.clone()));
    }
    let name = ctx.def.name.clone();
    controller
        .run(
            |parent: Arc<Stored>, ctx: Arc<Context>| reconcile(ctx.parents.whole(&parent), ctx),
            |parent: Arc<Stored>, error: &ReconcileError, ctx: Arc<Context>| {
                error_policy(ctx.parents.whole(&parent), error, ctx)
            },
            ctx,
        )
        .for_each(|result| {
            if let Err(e) = result {
                tracing::debug!(definition = %name, error = %e, "controller");
            }
            futures::future::ready(())
        })
        .await;
    collector.abort();
}

#[cfg(test)]
mod tests;
