//! The controller of one definition: a thin shell around the pure renderer. kube's
//! controller calls [`reconcile`] for each parent; it counts the pass and runs it as a
//! [`pass::Pass`] (gate, render, finalizer, apply, prune, status), and [`error_policy`]
//! retries a failed one with backoff. Every event that calls for a pass waits in
//! [`lanes`] until kube's queue has room: new parents and changed specs first, namespaces
//! in turn, then re-checks and resyncs.

mod apply;
mod collect;
mod context;
mod decorated;
mod delete;
mod error;
mod events;
mod finalize;
mod fresh;
mod lanes;
mod ledger;
mod pass;
mod pause;
mod prune;
mod readers;
mod rendering;
mod resync;
mod revision_split;
mod shard;
mod status_write;
mod teardown;
mod triggers;
mod unseen;

pub use collect::strays;
pub use context::Context;
pub use decorated::Decorated;
pub use error::{Operation, ReconcileError};
pub use finalize::release;
pub use pause::paused_by;
pub use revision_split::{Split, Stable};

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::DynamicObject;
use kube::runtime::controller::{Action, Config, Controller};

use crate::metrics;
use crate::watch::Stored;
use context::describe_object;
use lanes::Lanes;
use ledger::Verdict;
use resync::Resyncs;
use triggers::{Role, stream_from, triggers};

/// Deleted parents whose children are collected at once.
const COLLECT_CONCURRENCY: usize = 4;

/// How soon a parent looks again after a pass that let an echo of its own write go and
/// then found something to wait for.
const ECHO_REPLACED: Duration = Duration::from_millis(100);

/// Reconciles one parent.
///
/// # Errors
///
/// A write, read or status update the API server refuses or does not answer, a render that
/// waits on another object, or a child kind that is not watched; the controller retries
/// with backoff ([`error_policy`]).
pub async fn reconcile(parent: Arc<DynamicObject>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let me = ctx.parent_key(&parent);
    let begun = ctx.ledger().begin(&me);
    let counted = Counted::start(&ctx, begun.since);
    let span = tracing::info_span!("reconcile", definition = %ctx.def.name, parent = %describe_object(&parent));
    let pass = pass::Pass::new(&ctx, &parent, begun.conflict);
    let ended = tracing::Instrument::instrument(pass.run(), span).await;
    let mut result = ended.answer;
    let verdict = match &result {
        Ok(_) => Verdict::Succeeded,
        Err(e) => Verdict::Failed { refused: e.forbidden() },
    };
    // An echo of this pass's own write was let go, but the pass left something to wait
    // for (a child held back, a retry): the wake-up the echo was is given back.
    if ctx.ledger().end(&me, ended.left, verdict) && result.is_ok() {
        result = Ok(Action::requeue(ECHO_REPLACED));
    }
    if let Err(e) = &result
        && !matches!(e, ReconcileError::Waiting(_))
        && !e.transient()
    {
        ctx.record_for_rollout(&parent, revision_split::Outcome::Failed(e.to_string()));
    }
    counted.finish(&ctx, result.is_ok());
    result
}

/// A pass as the metrics count it: in flight from its start, then timed and counted by
/// its result.
struct Counted {
    in_flight: prometheus_client::metrics::gauge::Gauge,
    started: std::time::Instant,
}

impl Counted {
    /// A pass starts, serving a request that arrived at `since`.
    fn start(ctx: &Context, since: Option<std::time::Instant>) -> Counted {
        let name = &ctx.def.name;
        if let Some(since) = since {
            ctx.metrics
                .workqueue_queue_duration_seconds
                .get_or_create(&metrics::queue(name))
                .observe(since.elapsed().as_secs_f64());
        }
        let in_flight = ctx
            .metrics
            .reconciles_in_flight
            .get_or_create(&metrics::definition(name))
            .clone();
        in_flight.inc();
        Counted {
            in_flight,
            started: std::time::Instant::now(),
        }
    }

    /// The pass ended, successfully or not.
    fn finish(self, ctx: &Context, succeeded: bool) {
        self.in_flight.dec();
        ctx.metrics
            .reconciled(&ctx.def.name, self.started.elapsed().as_secs_f64(), succeeded);
    }
}

/// Requeues a failed parent with exponential backoff: 0.5 s doubling to 5 minutes.
pub fn error_policy(parent: Arc<DynamicObject>, error: &ReconcileError, ctx: Arc<Context>) -> Action {
    let me = ctx.parent_key(&parent);
    let unreachable = error.unreachable();
    // An unreachable API server is everyone's problem and costs nothing to retry: parents
    // come back within seconds of it, instead of after a backoff grown during the outage.
    // Its retries are counted apart: the first refusal after it (a kind not served yet by
    // an API server just started) backs off from 0.5 s, not from where the outage left.
    let n = ctx.ledger().failed(&me, unreachable, 10);
    let cap = if unreachable {
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
async fn collect_deleted(ctx: Arc<Context>, lanes: Arc<Lanes>, resyncs: Resyncs) {
    let deletions = stream_from(ctx.parents.subscribe_deletions());
    deletions
        .for_each_concurrent(COLLECT_CONCURRENCY, |parent| {
            let ctx = ctx.clone();
            let (lanes, resyncs) = (lanes.clone(), resyncs.clone());
            async move {
                if collect::is_gone(&ctx, &parent) {
                    let me = ctx.parent_key(&parent);
                    lanes.forget(&me, parent.metadata.uid.as_deref());
                    resyncs.cancel(me.clone());
                    ctx.forget(&me);
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
    let lanes = Lanes::new(concurrency);
    let (resyncs, timer) = Resyncs::start(lanes.clone());
    let timer = tokio::spawn(timer);
    let collector = tokio::spawn(collect_deleted(ctx.clone(), lanes.clone(), resyncs.clone()));
    let resource = ctx.parents.resolved.resource.clone();
    let stored = move |r: ledger::ParentKey| r.into_kind_unchecked::<Stored>(resource.clone());
    let feed = tokio::spawn(feed(ctx.clone(), lanes.clone()));
    let controller = Controller::for_stream_with(
        futures::stream::pending(),
        ctx.parents.reader(),
        ctx.parents.resolved.resource.clone(),
    )
    .with_config(Config::default().concurrency(concurrency))
    .graceful_shutdown_on(stop)
    .reconcile_on(lanes.clone().released().map(stored));
    let name = ctx.def.name.clone();
    let gone = lanes.clone();
    controller
        .run(
            move |parent: Arc<Stored>, ctx: Arc<Context>| {
                let (lanes, resyncs) = (lanes.clone(), resyncs.clone());
                async move {
                    let parent = ctx.parents.whole(&parent);
                    let me = ctx.parent_key(&parent);
                    let _turn = lanes.start(&me);
                    let answer = reconcile(parent, ctx.clone()).await;
                    resyncs.after_pass(me, answer, ctx.resync())
                }
            },
            |parent: Arc<Stored>, error: &ReconcileError, ctx: Arc<Context>| {
                error_policy(ctx.parents.whole(&parent), error, ctx)
            },
            ctx.clone(),
        )
        .for_each(|result| {
            match result {
                // Deleted before its turn: it holds no place in the queue.
                Err(kube::runtime::controller::Error::ObjectNotFound(r)) => {
                    gone.forget(&ctx.parents.key_at(r.namespace.as_deref(), &r.name), None)
                }
                Err(e) => tracing::debug!(definition = %name, error = %e, "controller"),
                Ok(_) => {}
            }
            futures::future::ready(())
        })
        .await;
    feed.abort();
    collector.abort();
    timer.abort();
}

/// Sorts every event that may call for a pass into the lanes: the parents' own (less
/// the echoes of Stencil's writes), their children's and lookups' events, and nudges.
async fn feed(ctx: Arc<Context>, lanes: Arc<Lanes>) {
    let mut rechecks = futures::stream::SelectAll::new();
    for w in &ctx.children {
        rechecks.push(triggers(&ctx, w, Role::Child).boxed());
    }
    for w in &ctx.lookups {
        rechecks.push(triggers(&ctx, w, Role::Lookup).boxed());
    }
    if let Some(nudges) = ctx.take_nudges() {
        rechecks.push(nudges.boxed());
    }
    let parents = stream_from(ctx.parents.subscribe()).for_each(|meta| {
        let me = ctx.parents.key_of(&meta);
        if !ctx.is_echo(&me, &meta) {
            ctx.requested(&me);
            let served = ctx.parents.served_generation(&me);
            lanes.parent_event(me, &meta, served);
        }
        futures::future::ready(())
    });
    let rechecks = rechecks.for_each(|parent| {
        lanes.recheck(parent);
        futures::future::ready(())
    });
    futures::join!(parents, rechecks);
}

#[cfg(test)]
mod tests;
