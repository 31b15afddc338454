//! The registry's side of a rollout: before a definition's controller starts, its
//! revision is kept and the rollout to it read ([`prepare`]); while it runs, the leader
//! moves the rollout step by step on the health of the moved parents ([`Driver`]), and
//! every replica follows what is saved (the leader's steps, `stencil rollout` commands).

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::events::EventType;

use super::dependencies::{Dependencies, sharded};
use super::report::Report;
use crate::compile::CompiledDefinition;
use crate::definition::{OperatorDefinition, RolloutPhase, RolloutStatus, RolloutStrategy};
use crate::metrics::{self, RevisionLabels};
use crate::reconcile::{Context, Split, Stable};
use crate::revisions::{Kept, Revisions};
use crate::rollout::{Decision, Health, ShareReport, across, decide, settle};
use crate::sharding::health;
use crate::source::Origin;

/// Keeps the definition's revision (the leader) or reads it (a replica that does not
/// lead), and builds the rollout the controller serves; none when Stencil keeps no
/// revisions. `Err` says why it must wait: a canary definition is not served before its
/// rollout is known, so no parent takes the edit early; an immediate one serves even
/// when its revision cannot be kept, and says so.
pub(super) async fn prepare(
    deps: &Dependencies,
    origin: &Origin,
    def: &CompiledDefinition,
) -> Result<Option<Arc<Split>>, (&'static str, String)> {
    let Some(home) = &deps.home else {
        return Ok(None);
    };
    let canary = def.spec.rollout.strategy == RolloutStrategy::Canary;
    let revisions = Revisions::new(&deps.client, home, &def.name);
    let kept = if deps.leadership.now() {
        revisions.keep(&def.spec, &crate::conditions::now()).await.map(Some)
    } else {
        revisions.read(&def.spec).await
    };
    let kept = match kept {
        Ok(Some(kept)) => kept,
        Ok(None) if canary => {
            return Err((
                "Waiting",
                "waiting for the leader to keep the definition's revision".into(),
            ));
        }
        Ok(None) => return Ok(None),
        Err(e) if canary => return Err(("RevisionNotKept", format!("{e}; a Canary rollout waits for it"))),
        Err(e) => {
            let message = format!("{e}; the definition serves on, without its revision history");
            deps.reports.send(origin, Report::RevisionFailed { message });
            return Ok(None);
        }
    };
    deps.reports.send(origin, Report::Rollout(kept.rollout.clone()));
    let stable = stable(&kept, &def.name)?;
    Ok(Some(Arc::new(Split::new(kept.rollout, stable))))
}

/// The current revision's name and definition, when it is not the updated one.
fn stable(kept: &Kept, name: &str) -> Result<Option<Stable>, (&'static str, String)> {
    let current = &kept.rollout.current_revision;
    if *current == kept.rollout.updated_revision {
        return Ok(None);
    }
    let spec = kept
        .spec(current)
        .ok_or_else(|| ("RevisionNotKept", format!("revision {current} is not kept any more")))?;
    let resource = OperatorDefinition::new(name, spec.clone());
    let def = crate::compile::compile_resource(&resource).map_err(|d| {
        (
            "RevisionInvalid",
            format!("revision {current} does not compile any more: {d}"),
        )
    })?;
    Ok(Some((current.clone(), Arc::new(def))))
}

/// Moves one definition's rollout. The leader decides each step and saves it on the
/// newest revision before any parent moves; every replica reads what is saved there, so
/// a `stencil rollout` command, or the leader's step, reaches it.
pub(super) struct Driver {
    revisions: Revisions,
    def: Arc<CompiledDefinition>,
    origin: Origin,
    /// Looks so far, to read the saved state every [`IDLE_READS`]th one while nothing moves.
    looks: std::sync::atomic::AtomicU64,
    /// The state last counted in the metrics.
    counted: std::sync::Mutex<Option<RolloutStatus>>,
    /// The report last written on this member's Lease, when parents are sharded.
    published: std::sync::Mutex<Option<ShareReport>>,
    /// The metrics' labels set so far, removed when the driver goes.
    labels: std::sync::Mutex<Vec<RevisionLabels>>,
    metrics: Arc<crate::metrics::Metrics>,
}

impl Drop for Driver {
    fn drop(&mut self) {
        self.metrics.rollout_step.remove(&metrics::definition(&self.def.name));
        for labels in self.labels.lock().expect("labels").iter() {
            self.metrics.rollout_parents.remove(labels);
        }
    }
}

/// How often a rollout looks at its moved parents, and reads its saved state.
const TICK: Duration = Duration::from_secs(1);

/// While no rollout moves, the saved state is read every this many ticks (a command may
/// start one moving again).
const IDLE_READS: u64 = 5;

impl Driver {
    /// The driver of `def`'s rollout, when Stencil keeps its revisions.
    pub(super) fn new(
        deps: &Dependencies,
        origin: &Origin,
        def: &Arc<CompiledDefinition>,
        ctx: &Context,
    ) -> Option<Self> {
        ctx.split()?;
        let home = deps.home.as_ref()?;
        Some(Driver {
            revisions: Revisions::new(&deps.client, home, &def.name),
            def: def.clone(),
            origin: origin.clone(),
            looks: std::sync::atomic::AtomicU64::new(0),
            counted: std::sync::Mutex::new(None),
            published: std::sync::Mutex::new(None),
            labels: std::sync::Mutex::new(Vec::new()),
            metrics: deps.metrics.clone(),
        })
    }

    /// Looks at the rollout every [`TICK`] until the controller stops (the task is
    /// dropped with it).
    pub(super) async fn run(self, deps: &Dependencies, ctx: &Context) {
        loop {
            tokio::time::sleep(TICK).await;
            self.tick(deps, ctx).await;
        }
    }

    /// One look: what is saved is taken up when it changed (a command, or the leader's
    /// step seen by another replica); then the leader decides the next move and, when
    /// there is one, saves it before the parents follow.
    async fn tick(&self, deps: &Dependencies, ctx: &Context) {
        let Some(split) = ctx.split() else { return };
        let state = split.state();
        let moving = crate::rollout::splits(&state);
        let looks = self.looks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if !moving && !looks.is_multiple_of(IDLE_READS) {
            return;
        }
        let version = match self.revisions.saved(&state.updated_revision).await {
            Ok(Some((saved, _))) if saved != state => return self.adopt(deps, ctx, saved).await,
            Ok(Some((_, version))) => version,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(definition = %self.def.name, error = %e, "could not read the rollout's state");
                return;
            }
        };
        self.count(deps, ctx, &state);
        // A paused definition holds its rollout where it is, as it holds its parents.
        let decides = deps.leadership.now() && !self.def.paused;
        // Only a sharded member reports its share; an unsharded standby has none to count.
        let reports = sharded(deps, &self.def).is_some();
        if !moving || !(decides || reports) {
            return;
        }
        let Some(health) = ctx.rollout_health() else { return };
        self.report(deps, &state, &health).await;
        if !decides {
            return;
        }
        let Some(health) = self.across_ring(deps, &state, health).await else {
            return;
        };
        let decision = decide(&self.def.spec.rollout, &state, &health, elapsed(&state));
        if matches!(decision, Decision::Wait(_)) {
            return;
        }
        let next = settle(&self.def.spec.rollout, &state, &decision, &crate::conditions::now());
        // Saved first, only over the state just read: a command given meanwhile wins.
        if let Err(e) = self
            .revisions
            .save(&state.updated_revision, &next, Some(&version))
            .await
        {
            tracing::info!(definition = %self.def.name, error = %e, "the rollout's next step was not saved; looking again");
            return;
        }
        tracing::info!(definition = %self.def.name, ?decision, "rollout moved");
        if matches!(self.origin, Origin::Cluster { .. }) {
            let (type_, reason) = match next.phase {
                RolloutPhase::Complete => (EventType::Normal, "RolloutComplete"),
                RolloutPhase::Progressing => (EventType::Normal, "RolloutStep"),
                RolloutPhase::Paused => (EventType::Warning, "RolloutPaused"),
                RolloutPhase::RolledBack => (EventType::Warning, "RolloutFailed"),
            };
            ctx.definition_event(type_, reason, super::report::rollout_condition(&next).1)
                .await;
        }
        self.adopt(deps, ctx, next).await;
    }

    /// Writes this member's share of the step onto its Lease when it changed, so the
    /// leader judges the step on the whole ring.
    async fn report(&self, deps: &Dependencies, state: &RolloutStatus, health: &Health) {
        let Some(member) = sharded(deps, &self.def) else {
            return;
        };
        let report = ShareReport::of(state, health);
        if self.published.lock().expect("published report").as_ref() == Some(&report) {
            return;
        }
        match health::publish(&deps.client, member, &self.def.name, &report).await {
            Ok(()) => *self.published.lock().expect("published report") = Some(report),
            Err(e) => {
                tracing::warn!(definition = %self.def.name, error = %e, "could not report the rollout's health on the membership Lease")
            }
        }
    }

    /// The step's health over the whole ring when parents are sharded: this member's own
    /// and every other member's report. None when the reports cannot be read: the step
    /// waits.
    async fn across_ring(&self, deps: &Dependencies, state: &RolloutStatus, own: Health) -> Option<Health> {
        let Some(member) = sharded(deps, &self.def) else {
            return Some(own);
        };
        match health::others(&deps.client, member, &self.def.name).await {
            Ok(others) => Some(across(state, own, others.iter().map(|(m, r)| (m.as_str(), r.as_ref())))),
            Err(e) => {
                tracing::warn!(definition = %self.def.name, error = %e, "could not read the ring's rollout reports; the step waits");
                None
            }
        }
    }

    /// Serves `next`: the current revision's definition compiled when it changed, the
    /// parents whose revision changed looked at again, the status told.
    async fn adopt(&self, deps: &Dependencies, ctx: &Context, next: RolloutStatus) {
        let Some(split) = ctx.split() else { return };
        let changed = next.current_revision != next.updated_revision
            && split.stable_revision().as_ref() != Some(&next.current_revision);
        let stable = if changed {
            let kept = self.revisions.list().await.map(|revisions| Kept {
                rollout: next.clone(),
                revisions,
            });
            match kept
                .map_err(|e| ("RevisionNotKept", e.to_string()))
                .and_then(|k| stable(&k, &self.def.name))
            {
                Ok(stable) => stable,
                Err((_, message)) => {
                    tracing::warn!(definition = %self.def.name, "cannot serve the rollout's current revision: {message}");
                    return;
                }
            }
        } else {
            None
        };
        ctx.move_rollout(next.clone(), stable);
        self.count(deps, ctx, &next);
        deps.reports.send(&self.origin, Report::Rollout(next));
    }

    fn count(&self, deps: &Dependencies, ctx: &Context, state: &RolloutStatus) {
        {
            let mut counted = self.counted.lock().expect("counted");
            if !crate::rollout::splits(state) && counted.as_ref() == Some(state) {
                return;
            }
            *counted = Some(state.clone());
        }
        let definition = metrics::definition(&self.def.name);
        let step = match state.phase {
            RolloutPhase::Progressing | RolloutPhase::Paused => i64::from(state.step) + 1,
            RolloutPhase::Complete | RolloutPhase::RolledBack => 0,
        };
        deps.metrics.rollout_step.get_or_create(&definition).set(step);
        let uids = ctx.parent_uids();
        let on_updated = uids.iter().filter(|u| crate::rollout::on_updated(state, u)).count();
        let mut counts = vec![(&state.updated_revision, on_updated)];
        if state.current_revision != state.updated_revision {
            counts.push((&state.current_revision, uids.len() - on_updated));
        }
        for (revision, n) in counts {
            let labels = RevisionLabels {
                definition: self.def.name.clone(),
                revision: revision.clone(),
            };
            deps.metrics.rollout_parents.get_or_create(&labels).set(n as i64);
            let mut set = self.labels.lock().expect("labels");
            if !set.contains(&labels) {
                set.push(labels);
            }
        }
    }
}

/// How long the rollout's step has lasted.
fn elapsed(state: &RolloutStatus) -> Duration {
    let started = state
        .step_started_at
        .as_deref()
        .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok());
    started
        .and_then(|t| k8s_openapi::jiff::Timestamp::now().duration_since(t).try_into().ok())
        .unwrap_or_default()
}
