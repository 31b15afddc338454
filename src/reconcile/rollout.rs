//! The controller's side of a rollout: while two revisions are served, which one each
//! parent renders; what the passes of the parents on the updated revision say of its
//! health; and which parents to look at again when the rollout moves.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use kube::api::DynamicObject;
use serde_json::Value;

use super::Context;
use crate::compile::CompiledDefinition;
use crate::definition::RolloutStatus;
use crate::rollout::{Health, on_updated};

/// Two revisions served at once: the current one, which parents the rollout did not move
/// render, and the updated one (the controller's own definition).
pub struct Split {
    stable: Arc<CompiledDefinition>,
    state: RwLock<RolloutStatus>,
    /// The last pass of each parent on the updated revision, by UID.
    passes: Mutex<HashMap<String, Pass>>,
}

/// What a parent's last pass on the updated revision found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Outcome {
    /// The parent is Ready.
    Ready,
    /// Its children are on their way (not ready yet, or held back by `dependsOn`).
    Pending,
    /// Its render or a write failed, or a child is another's or cannot change: why.
    Failed(String),
}

#[derive(Debug, Clone)]
struct Pass {
    revision: String,
    outcome: Outcome,
    /// It was Ready on this revision once: going not Ready now is a regression.
    was_ready: bool,
}

/// What a status written on a parent says of it: Ready, on its way (its children are
/// not ready yet, or wait for others), or failed for another reason, with its message.
pub(super) fn outcome_of(status: &Value) -> Outcome {
    let ready = status["conditions"]
        .as_array()
        .and_then(|all| all.iter().find(|c| c["type"] == "Ready"));
    match ready {
        Some(c) if c["status"] == "True" => Outcome::Ready,
        Some(c) if !matches!(c["reason"].as_str(), Some("ChildrenNotReady" | "Waiting")) => {
            Outcome::Failed(c["message"].as_str().unwrap_or_default().to_string())
        }
        _ => Outcome::Pending,
    }
}

impl Split {
    /// `stable` (the definition at the current revision) served beside the controller's
    /// own, as `state` says.
    pub fn new(stable: Arc<CompiledDefinition>, state: RolloutStatus) -> Self {
        Split {
            stable,
            state: RwLock::new(state),
            passes: Mutex::new(HashMap::new()),
        }
    }

    /// Where the rollout stands.
    pub fn state(&self) -> RolloutStatus {
        self.state.read().expect("rollout state").clone()
    }
}

fn uid(parent: &DynamicObject) -> &str {
    parent.metadata.uid.as_deref().unwrap_or_default()
}

impl Context {
    /// The definition `parent` renders: the controller's own, or while a rollout has not
    /// moved the parent, the current revision's.
    pub(super) fn def_for(&self, parent: &DynamicObject) -> Arc<CompiledDefinition> {
        match &self.rollout {
            Some(split) if !on_updated(&split.state.read().expect("rollout state"), uid(parent)) => {
                split.stable.clone()
            }
            _ => self.def.clone(),
        }
    }

    /// Records what a pass of `parent` found, when it rendered the updated revision of a
    /// rollout.
    pub(super) fn passed(&self, parent: &DynamicObject, outcome: Outcome) {
        let Some(split) = &self.rollout else { return };
        let state = split.state.read().expect("rollout state");
        if !on_updated(&state, uid(parent)) {
            return;
        }
        let mut passes = split.passes.lock().expect("rollout passes");
        let pass = passes.entry(uid(parent).to_string()).or_insert_with(|| Pass {
            revision: state.updated_revision.clone(),
            outcome: Outcome::Pending,
            was_ready: false,
        });
        if pass.revision != state.updated_revision {
            pass.revision = state.updated_revision.clone();
            pass.was_ready = false;
        }
        pass.was_ready |= outcome == Outcome::Ready;
        pass.outcome = outcome;
    }

    /// How the parents on the updated revision are doing, while a rollout serves two.
    pub fn rollout_health(&self) -> Option<Health> {
        let split = self.rollout.as_ref()?;
        let state = split.state();
        let passes = split.passes.lock().expect("rollout passes");
        let mut health = Health::default();
        let moved = self.parents.scan_metadata(|m| {
            let uid = m.uid.clone()?;
            let name = match &m.namespace {
                Some(ns) => format!(
                    "{} {ns}/{}",
                    self.def.parent.kind,
                    m.name.as_deref().unwrap_or_default()
                ),
                None => format!("{} {}", self.def.parent.kind, m.name.as_deref().unwrap_or_default()),
            };
            on_updated(&state, &uid).then_some((uid, name))
        });
        for (uid, name) in moved {
            health.moved += 1;
            let pass = passes.get(&uid).filter(|p| p.revision == state.updated_revision);
            match pass.map(|p| (&p.outcome, p.was_ready)) {
                Some((Outcome::Ready, _)) => health.ready += 1,
                Some((Outcome::Failed(why), _)) => {
                    health.failed.get_or_insert((name, why.clone()));
                }
                Some((Outcome::Pending, true)) => {
                    let why = "was Ready on the updated revision and is not any more".to_string();
                    health.failed.get_or_insert((name, why));
                }
                Some((Outcome::Pending, false)) | None => {
                    health.pending.get_or_insert(name);
                }
            }
        }
        Some(health)
    }

    /// Moves the rollout to `next`, and asks for a pass of every parent whose revision
    /// changed with it.
    pub fn move_rollout(&self, next: RolloutStatus) {
        let Some(split) = &self.rollout else { return };
        let before = std::mem::replace(&mut *split.state.write().expect("rollout state"), next.clone());
        let changed = self.parents.scan_metadata(|m| {
            let uid = m.uid.as_deref()?;
            (on_updated(&before, uid) != on_updated(&next, uid)).then(|| self.parents.key_of(m))
        });
        for parent in changed {
            self.nudge(parent);
        }
    }

    /// The rollout this controller serves, if it serves two revisions.
    pub fn split(&self) -> Option<&Arc<Split>> {
        self.rollout.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ready(status: &str, reason: &str) -> Value {
        json!({"conditions": [{"type": "Ready", "status": status, "reason": reason, "message": "m"}]})
    }

    #[test]
    fn a_status_is_ready_on_its_way_or_failed() {
        assert_eq!(outcome_of(&ready("True", "AllChildrenReady")), Outcome::Ready);
        assert_eq!(outcome_of(&ready("False", "ChildrenNotReady")), Outcome::Pending);
        assert_eq!(outcome_of(&ready("False", "Waiting")), Outcome::Pending);
        assert_eq!(outcome_of(&json!({})), Outcome::Pending);
        for reason in ["Conflict", "Immutable", "RenderFailed", "ApplyFailed"] {
            assert_eq!(
                outcome_of(&ready("False", reason)),
                Outcome::Failed("m".into()),
                "{reason}"
            );
        }
    }
}
