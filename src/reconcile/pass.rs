//! One reconcile of one parent, as a value ([`Pass`]). Its steps are methods, run in the
//! order a reader expects by [`Pass::run`]: the gate (another member's parent, a pause, a
//! decorator's object that left, a deletion), the children found, the render, the
//! finalizer, the applies, the prune, and the status with the pass's answer (when to
//! look again). Each step hands what it produced to the next.

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use kube::api::DynamicObject;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use serde_json::Value;

use super::context::describe_object;
use super::fresh::Freshness;
use super::ledger::Left;
use super::rendering::{render_failed, render_off_thread, status_after_writes};
use super::{Context, ReconcileError, apply, collect, finalize, pause, prune, revision_split, shard, status_write};
use crate::metrics;
use crate::object_key::ObjectKey;
use crate::render::{self, RenderOutput};

/// How soon a parent in conflict over an object looks at it again.
const CONFLICT_RETRY: Duration = Duration::from_secs(60);

/// How soon a parent whose Recreate waits for the old object looks again, should the
/// object's deletion not wake it.
const REPLACING_RETRY: Duration = Duration::from_secs(10);

/// How soon a parent whose Recreate deleted the old object looks again, to create the
/// new one.
const RECREATE_RETRY: Duration = Duration::from_secs(1);

/// A pass's answer: when to look at the parent again, or the error to retry with backoff.
type Answer = Result<Action, ReconcileError>;

/// One reconcile of one parent.
pub(super) struct Pass<'a> {
    ctx: &'a Arc<Context>,
    parent: &'a Arc<DynamicObject>,
    /// The conflict the parent reported before this pass, so that it is said once.
    reported: Option<String>,
    /// What the pass leaves in the ledger, once it reached its answer.
    left: Option<Left>,
    /// Whether the parent has just come from another member of the ring: its children
    /// are looked up anew, and the handover ends once none is held back.
    arrived: bool,
    /// The parent's children as the watches (or, on arrival, the API server) show them.
    observed: Vec<Arc<DynamicObject>>,
    /// Whether the parent as the pass read it may change its children.
    fresh: Freshness,
}

/// How a pass ended: its answer, and what it leaves in the ledger when it reached one.
pub(super) struct Ended {
    pub(super) answer: Answer,
    pub(super) left: Option<Left>,
}

/// What applying a pass's children came to.
#[derive(Default)]
struct Applies {
    /// The soonest a child asked to be looked at again.
    requeue: Option<Duration>,
    /// Objects that exist and are another's, each with what to say.
    conflicts: Vec<(ObjectKey, String)>,
    /// Changes the API server holds immutable, each with what to say.
    immutable: Vec<String>,
    /// The first error: it stops the prune, not the other children.
    failed: Option<ReconcileError>,
    /// What was created or updated, for the pass's one event.
    writes: Vec<String>,
    /// The written children as the API server answered.
    answers: Vec<DynamicObject>,
}

impl<'a> Pass<'a> {
    /// A pass of `parent`, whose conflict at the end of its last pass was `reported`.
    pub(super) fn new(ctx: &'a Arc<Context>, parent: &'a Arc<DynamicObject>, reported: Option<String>) -> Self {
        Pass {
            ctx,
            parent,
            reported,
            left: None,
            arrived: false,
            observed: Vec::new(),
            fresh: Freshness::default(),
        }
    }

    /// Runs the pass to its end.
    pub(super) async fn run(mut self) -> Ended {
        let answer = self.steps().await;
        Ended {
            answer,
            left: self.left,
        }
    }

    /// Runs the steps in order; a step that ends the pass gives its answer.
    async fn steps(&mut self) -> Answer {
        if let ControlFlow::Break(answer) = self.gate().await {
            return answer;
        }
        self.observe().await?;
        let out = match self.render().await {
            ControlFlow::Continue(out) => out,
            ControlFlow::Break(answer) => return answer,
        };
        self.ensure_finalizer(&out).await?;
        let applies = self.apply(&out).await;
        if let Some(e) = applies.failed {
            return Err(self.not_ready_after(&out.status, "ApplyFailed", e).await);
        }
        if let Err(e) = prune::run(self.ctx, self.parent, &out, &self.observed, &self.fresh).await {
            return Err(self.not_ready_after(&out.status, "PruneFailed", e).await);
        }
        // Children held back by dependsOn may still carry the old member's label: the
        // list is repeated until none is.
        if self.arrived && out.waiting.is_empty() {
            shard::settled(self.ctx, self.parent).await?;
        }
        self.answer(out, applies).await
    }

    /// Ends the pass before any render when the parent is not this pass's to serve as
    /// usual: another member's, paused, a decorator's object that left or is deleted, or
    /// a parent being deleted (its teardown).
    async fn gate(&self) -> ControlFlow<Answer> {
        let (ctx, parent) = (self.ctx, self.parent);
        match shard::gate(ctx, parent).await {
            Ok(None) => {}
            Ok(Some(action)) => return ControlFlow::Break(Ok(action)),
            Err(e) => return ControlFlow::Break(Err(e)),
        }
        if let Some(by) = pause::paused_by(&ctx.def, parent) {
            return ControlFlow::Break(Ok(pause::hold(ctx, parent, by).await));
        }
        let deleting = parent.metadata.deletion_timestamp.is_some();
        if ctx.def.spec.is_decorator() && (deleting || !ctx.decorates(&parent.metadata)) {
            return ControlFlow::Break(collect::undecorate(ctx, parent).await);
        }
        if deleting {
            return ControlFlow::Break(finalize::run(ctx, parent).await);
        }
        ControlFlow::Continue(())
    }

    /// Finds the parent's children: from the watches, or from the API server when the
    /// parent has just arrived from another member.
    async fn observe(&mut self) -> Result<(), ReconcileError> {
        let uid = self.parent.metadata.uid.clone().unwrap_or_default();
        self.arrived = shard::arrived(self.ctx, self.parent);
        if self.arrived {
            // Another member wrote its children since: what this one created is history.
            self.ctx.ledger().unseen.forget(&uid);
        }
        let seen = self.ctx.observed(&uid);
        self.observed = if self.arrived {
            shard::children_on_arrival(self.ctx, self.parent, &uid, seen).await?
        } else {
            seen
        };
        Ok(())
    }

    /// Renders the parent off the async threads. A failed render is said on the status
    /// and ends the pass.
    async fn render(&self) -> ControlFlow<Answer, RenderOutput> {
        let ctx = self.ctx;
        let started = std::time::Instant::now();
        let (parent_json, rendered) = match render_off_thread(ctx, self.parent, &self.observed, render::render).await {
            Ok(rendered) => rendered,
            Err(e) => return ControlFlow::Break(Err(e)),
        };
        ctx.metrics
            .template_render_seconds
            .get_or_create(&metrics::definition(&ctx.def.name))
            .observe(started.elapsed().as_secs_f64());
        match rendered {
            Ok(out) => {
                tracing::debug!(
                    observed = self.observed.len(),
                    desired = out.children.len(),
                    waiting = out.waiting.len(),
                    "rendered"
                );
                ControlFlow::Continue(out)
            }
            Err(failure) => {
                ctx.record_for_rollout(self.parent, revision_split::Outcome::Failed(failure.to_string()));
                ControlFlow::Break(render_failed(ctx, self.parent, &parent_json, failure).await)
            }
        }
    }

    /// Puts Stencil's finalizer on the parent when its teardown needs Stencil: the
    /// garbage collector removes children that carry the parent's ownerReference, so the
    /// finalizer is needed only for the others, to orphan children, and to delete them in
    /// reverse dependsOn order. A decorator holds none on an object it does not own (it
    /// finds the children the garbage collector cannot remove by their labels instead).
    async fn ensure_finalizer(&self, out: &RenderOutput) -> Result<(), ReconcileError> {
        let ctx = self.ctx;
        let needs = finalize::teardown_needs_stencil(&ctx.def_for(self.parent))
            || out.children.iter().any(|c| !finalize::owned_by_parent(&c.object));
        if needs && !ctx.def.spec.is_decorator() {
            finalize::ensure(ctx, self.parent).await?;
        }
        Ok(())
    }

    /// Applies the rendered children, a batch at once (children rendered together do
    /// not depend on each other: dependsOn holds a child back until its dependencies are
    /// ready), and publishes one event for what was written.
    async fn apply(&self, out: &RenderOutput) -> Applies {
        let mut applies = Applies::default();
        for batch in out.children.chunks(apply::CONCURRENCY) {
            let results = futures::future::join_all(
                batch
                    .iter()
                    .map(|c| apply::child(self.ctx, self.parent, c, &self.fresh)),
            )
            .await;
            for (result, child) in results.into_iter().zip(batch) {
                applies.record(result, &child.object);
            }
        }
        apply::event_for_writes(self.ctx, self.parent, &applies.writes).await;
        applies
    }

    /// Writes the status and gives the pass's answer. A conflict needs another's object
    /// to go; an immutable change needs the author or the user: either holds the parent
    /// back, said once (a Warning event per change, not per resync), with nothing
    /// deleted.
    async fn answer(&mut self, out: RenderOutput, applies: Applies) -> Answer {
        let (ctx, parent) = (self.ctx, self.parent);
        // Its status would be the older parent's: the newer one's pass writes it.
        if self.fresh.stale() {
            return Ok(Action::requeue(RECREATE_RETRY));
        }
        let status = if applies.answers.is_empty() {
            out.status
        } else {
            status_after_writes(ctx, parent, &self.observed, applies.answers, out.status).await
        };
        let mut requeue = applies.requeue;
        let in_conflict = !applies.conflicts.is_empty();
        let reason = if in_conflict { "Conflict" } else { "Immutable" };
        let message = applies
            .conflicts
            .iter()
            .map(|(_, m)| m.as_str())
            .chain(applies.immutable.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join("; ");
        let conflict = (!message.is_empty()).then(|| message.clone());
        let said_before = self.reported == conflict;
        self.left = Some(Left {
            conflict,
            waits_for: applies.conflicts.into_iter().map(|(k, _)| k).collect(),
            clean: false,
        });
        if message.is_empty() {
            status_write::write(ctx, parent, &status).await?;
            ctx.record_for_rollout(parent, revision_split::outcome_of(&status));
            let clean = requeue.is_none() && out.waiting.is_empty() && !self.arrived;
            if let Some(left) = &mut self.left {
                left.clean = clean;
            }
        } else {
            if !said_before {
                tracing::warn!(definition = %ctx.def.name, parent = %describe_object(parent), "{reason}: {message}");
                ctx.event(parent, EventType::Warning, reason, message.clone()).await;
            }
            status_write::write(ctx, parent, &render::not_ready(&status, reason, &message)).await?;
            ctx.record_for_rollout(parent, revision_split::Outcome::Failed(format!("{reason}: {message}")));
            if in_conflict {
                // A holder's child that goes wakes this parent through the watch; an
                // object made by hand is not watched, so it is looked at again within a
                // minute.
                requeue = sooner(requeue, CONFLICT_RETRY);
            }
        }
        Ok(Action::requeue(requeue.map_or(ctx.resync(), |r| r.min(ctx.resync()))))
    }

    /// Says on the parent's status why it is not Ready (`reason`, and the error), and
    /// hands the error back to be retried with backoff.
    async fn not_ready_after(&self, rendered: &Value, reason: &str, error: ReconcileError) -> ReconcileError {
        // A refused request says what to grant; several errors are each said as they are.
        let message = match &error {
            ReconcileError::Several(_) => None,
            single => single.forbidden(),
        };
        let message = message.unwrap_or_else(|| error.to_string());
        let status = render::not_ready(rendered, reason, &message);
        if let Err(status_error) = status_write::write(self.ctx, self.parent, &status).await {
            tracing::warn!(error = %status_error, "could not write the status");
        }
        error
    }
}

impl Applies {
    /// Adds one child's apply.
    fn record(&mut self, result: Result<apply::Applied, ReconcileError>, child: &Value) {
        match result {
            Ok(apply::Applied::Done) => {}
            Ok(apply::Applied::Written(what, answer)) => {
                self.writes.push(what);
                self.answers.push(*answer);
            }
            Ok(apply::Applied::Retry) => self.requeue = sooner(self.requeue, RECREATE_RETRY),
            Ok(apply::Applied::Replacing) => self.requeue = sooner(self.requeue, REPLACING_RETRY),
            Ok(apply::Applied::Immutable(message)) => self.immutable.push(message),
            Ok(apply::Applied::Conflict(message)) => {
                if let Some(key) = ObjectKey::of_value(child) {
                    self.conflicts.push((key, message));
                }
            }
            Err(e) => {
                self.failed.get_or_insert(e);
            }
        }
    }
}

/// The sooner of a planned requeue and `after`.
fn sooner(planned: Option<Duration>, after: Duration) -> Option<Duration> {
    Some(planned.map_or(after, |p| p.min(after)))
}
