//! A controller's part in its definition's rollout: which revision each parent renders,
//! what its passes report for the rollout's health, and the moves between steps.

use std::sync::Arc;

use kube::api::DynamicObject;

use super::{Context, uid};
use crate::compile::CompiledDefinition;
use crate::definition::RolloutStatus;
use crate::labels;
use crate::reconcile::revision_split::{Candidate, Outcome, Split, Stable};
use crate::rollout::{Health, revision_for};

impl Context {
    /// The same context serving the revisions of a rollout (none: only its own).
    pub fn rolling(self, split: Option<Arc<Split>>) -> Self {
        Context { rollout: split, ..self }
    }

    /// The definition `parent` renders: the controller's own, or while a rollout has not
    /// moved the parent, the current revision's.
    pub(in crate::reconcile) fn def_for(&self, parent: &DynamicObject) -> Arc<CompiledDefinition> {
        let stable = self.rollout.as_ref().and_then(|split| split.stable_for(uid(parent)));
        stable.unwrap_or_else(|| self.def.clone())
    }

    /// Records what a pass of `parent` found, for the rollout's health.
    pub(in crate::reconcile) fn record_for_rollout(&self, parent: &DynamicObject, outcome: Outcome) {
        if let Some(split) = &self.rollout {
            split.record(uid(parent), outcome);
        }
    }

    /// How the parents on the updated revision are doing. A paused parent is held as it
    /// is: it neither moves nor fails a step.
    pub fn rollout_health(&self) -> Option<Health> {
        let split = self.rollout.as_ref()?;
        let candidates = self.parents.scan_metadata(|m| {
            if labels::paused(m.annotations.as_ref()) {
                return None;
            }
            let namespace = m.namespace.as_ref().map(|ns| format!("{ns}/")).unwrap_or_default();
            Some(Candidate {
                uid: m.uid.clone()?,
                name: format!(
                    "{} {namespace}{}",
                    self.def.parent.kind,
                    m.name.as_deref().unwrap_or_default()
                ),
            })
        });
        Some(split.health(candidates))
    }

    /// Moves the rollout to `next` (with `stable`, the definition of its current revision,
    /// when that changes), and asks for a pass of every parent whose revision changed.
    pub fn move_rollout(&self, next: RolloutStatus, stable: Option<Stable>) {
        let Some(split) = &self.rollout else { return };
        let before = split.move_to(next.clone(), stable);
        let changed = self.parents.scan_metadata(|m| {
            let uid = m.uid.as_deref()?;
            (revision_for(&before, uid) != revision_for(&next, uid)).then(|| self.parents.key_of(m))
        });
        for parent in changed {
            self.nudge(parent);
        }
    }

    /// The rollout this controller serves, when Stencil keeps revisions.
    pub fn split(&self) -> Option<&Arc<Split>> {
        self.rollout.as_ref()
    }
}
