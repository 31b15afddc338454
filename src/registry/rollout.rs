//! The registry's side of a rollout: before a definition's controller starts, its
//! revision is kept and the rollout to it read ([`prepare`]); while it runs, the leader
//! moves the rollout step by step on the health of the moved parents ([`Driver`]), and a
//! replica that does not lead follows what the leader saved.

use std::sync::Arc;
use std::time::Duration;

use super::shell::Shell;
use super::status::Report;
use crate::compile::CompiledDefinition;
use crate::definition::{OperatorDefinition, RolloutPhase, RolloutStatus, RolloutStrategy};
use crate::metrics::{self, RevisionLabels};
use crate::reconcile::{Context, Split};
use crate::revisions::{Kept, Revisions};
use crate::rollout::{Decision, decide, settle};
use crate::source::Origin;

/// What the controller of a definition serves: its own revision alone, or two.
pub(super) enum Prepared {
    /// Every parent renders the definition (no revisions kept, or the rollout complete).
    One,
    /// A rollout serves two revisions.
    Two(Arc<Split>),
}

/// Keeps the definition's revision (the leader) or reads it (a replica that does not
/// lead), and builds what the controller serves. `Err` says why it must wait: a canary
/// definition is not served before its rollout is known, so no parent takes the edit
/// early; an immediate one serves even when its revision cannot be kept, and says so.
pub(super) async fn prepare(
    shell: &Shell,
    origin: &Origin,
    def: &CompiledDefinition,
) -> Result<Prepared, (&'static str, String)> {
    let Some(home) = &shell.home else {
        return Ok(Prepared::One);
    };
    let canary = def.spec.rollout.strategy == RolloutStrategy::Canary;
    let revisions = Revisions::new(&shell.client, home, &def.name);
    let kept = if shell.leadership.now() {
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
        Ok(None) => return Ok(Prepared::One),
        Err(e) if canary => return Err(("RevisionNotKept", format!("{e}; a Canary rollout waits for it"))),
        Err(e) => {
            let message = format!("{e}; the definition serves on, without its revision history");
            shell.reports.send(origin, Report::RevisionFailed { message });
            return Ok(Prepared::One);
        }
    };
    shell.reports.send(origin, Report::Rollout(kept.rollout.clone()));
    let rollout = &kept.rollout;
    if rollout.current_revision == rollout.updated_revision {
        return Ok(Prepared::One);
    }
    let stable = stable(&kept, &def.name)?;
    Ok(Prepared::Two(Arc::new(Split::new(Arc::new(stable), kept.rollout))))
}

/// The definition at the rollout's current revision.
fn stable(kept: &Kept, name: &str) -> Result<CompiledDefinition, (&'static str, String)> {
    let current = &kept.rollout.current_revision;
    let spec = kept
        .spec(current)
        .ok_or_else(|| ("RevisionNotKept", format!("revision {current} is not kept any more")))?;
    let resource = OperatorDefinition::new(name, spec.clone());
    crate::compile::compile_resource(&resource).map_err(|d| {
        (
            "RevisionInvalid",
            format!("revision {current} does not compile any more: {d}"),
        )
    })
}

/// Moves one definition's rollout: the leader decides and saves each step, a replica
/// that does not lead reads what was saved.
pub(super) struct Driver {
    revisions: Revisions,
    def: Arc<CompiledDefinition>,
    origin: Origin,
    /// The state last counted in the metrics.
    counted: std::sync::Mutex<Option<RolloutStatus>>,
}

/// How often a rollout looks at its moved parents.
pub(super) const TICK: Duration = Duration::from_secs(1);

impl Driver {
    /// The driver of `def`'s rollout, if its controller serves two revisions.
    pub(super) fn new(shell: &Shell, origin: &Origin, def: &Arc<CompiledDefinition>, ctx: &Context) -> Option<Self> {
        ctx.split()?;
        let home = shell.home.as_ref()?;
        Some(Driver {
            revisions: Revisions::new(&shell.client, home, &def.name),
            def: def.clone(),
            origin: origin.clone(),
            counted: std::sync::Mutex::new(None),
        })
    }

    /// One look: the leader decides the next move and, when there is one, saves it
    /// before the parents follow; a replica that does not lead follows the saved state.
    pub(super) async fn tick(&self, shell: &Shell, ctx: &Context) {
        let Some(split) = ctx.split() else { return };
        let state = split.state();
        let moving = matches!(state.phase, RolloutPhase::Progressing | RolloutPhase::Paused);
        {
            let mut counted = self.counted.lock().expect("counted");
            if !moving && counted.as_ref() == Some(&state) {
                // Complete or rolled back: nothing moves until the next edit.
                return;
            }
            *counted = Some(state.clone());
        }
        self.count(shell, ctx, &state);
        let next = if shell.leadership.now() {
            let Some(health) = ctx.rollout_health() else { return };
            let decision = decide(&self.def.spec.rollout, &state, &health, elapsed(&state));
            if matches!(decision, Decision::Wait(_)) {
                return;
            }
            let next = settle(&self.def.spec.rollout, &state, &decision, &crate::conditions::now());
            if let Err(e) = self.revisions.save(&state.updated_revision, &next).await {
                tracing::warn!(definition = %self.def.name, error = %e, "could not save the rollout's next step; trying again");
                return;
            }
            tracing::info!(definition = %self.def.name, ?decision, "rollout moved");
            next
        } else {
            match self.revisions.read(&self.def.spec).await {
                Ok(Some(kept)) if kept.rollout != state => kept.rollout,
                _ => return,
            }
        };
        ctx.move_rollout(next.clone());
        shell.reports.send(&self.origin, Report::Rollout(next));
    }

    fn count(&self, shell: &Shell, ctx: &Context, state: &RolloutStatus) {
        let definition = metrics::definition(&self.def.name);
        let step = match state.phase {
            RolloutPhase::Progressing | RolloutPhase::Paused => i64::from(state.step) + 1,
            RolloutPhase::Complete | RolloutPhase::RolledBack => 0,
        };
        shell.metrics.rollout_step.get_or_create(&definition).set(step);
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
            shell.metrics.rollout_parents.get_or_create(&labels).set(n as i64);
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
