//! The controller's side of a rollout, split between two revisions: which one each parent
//! renders, and what the passes of the parents on the updated revision say of its
//! health. The controller's [`Context`](super::Context) asks it by parent UID.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use serde_json::Value;

use crate::compile::CompiledDefinition;
use crate::definition::RolloutStatus;
use crate::rollout::{Health, on_updated, splits};

/// A revision served beside the updated one: its name and its definition.
pub type Stable = (String, Arc<CompiledDefinition>);

/// A definition's rollout as its controller serves it: where it stands, and while two
/// revisions are served, the definition at the current one, which parents the rollout
/// did not move render (the updated one is the controller's own definition).
pub struct Split {
    /// Where the rollout stands, and the definition served for its current revision:
    /// one lock, so no pass sees a state with the definition of another.
    serving: RwLock<Serving>,
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

struct Serving {
    state: RolloutStatus,
    /// The current revision's name and definition, when it is not the updated one.
    stable: Option<Stable>,
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
    /// The rollout at `state`, with `stable` (the current revision's name and definition)
    /// when it is not the updated one.
    pub fn new(state: RolloutStatus, stable: Option<Stable>) -> Self {
        Split {
            serving: RwLock::new(Serving { state, stable }),
            passes: Mutex::new(HashMap::new()),
        }
    }

    /// Where the rollout stands.
    pub fn state(&self) -> RolloutStatus {
        self.serving.read().expect("rollout state").state.clone()
    }

    /// The revision whose definition is served beside the updated one, if any.
    pub fn stable_revision(&self) -> Option<String> {
        let serving = self.serving.read().expect("rollout state");
        serving.stable.as_ref().map(|(name, _)| name.clone())
    }
}

/// A parent the rollout may have moved: its UID, and `Kind namespace/name` for messages.
pub(super) struct Candidate {
    pub(super) uid: String,
    pub(super) name: String,
}

impl Split {
    /// The current revision's definition, when the parent `uid` renders it: the rollout
    /// has not moved it. `None`: it renders the updated one.
    pub(super) fn stable_for(&self, uid: &str) -> Option<Arc<CompiledDefinition>> {
        let serving = self.serving.read().expect("rollout state");
        if on_updated(&serving.state, uid) {
            return None;
        }
        serving.stable.as_ref().map(|(_, def)| def.clone())
    }

    /// Records what a pass of parent `uid` found, when it rendered the updated revision
    /// of a rollout that moves (a finished one keeps nothing per parent).
    pub(super) fn record(&self, uid: &str, outcome: Outcome) {
        let serving = self.serving.read().expect("rollout state");
        let state = &serving.state;
        if !splits(state) || !on_updated(state, uid) {
            return;
        }
        let mut passes = self.passes.lock().expect("rollout passes");
        let pass = passes.entry(uid.to_string()).or_insert_with(|| Pass {
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

    /// How the `candidates` the rollout moved to the updated revision are doing.
    pub(super) fn health(&self, candidates: Vec<Candidate>) -> Health {
        let state = self.state();
        let passes = self.passes.lock().expect("rollout passes");
        let mut health = Health::default();
        for Candidate { uid, name } in candidates.into_iter().filter(|c| on_updated(&state, &c.uid)) {
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
        health
    }

    /// Moves the rollout to `next` (with `stable`, the definition of its current
    /// revision, when that changes); returns where it stood before.
    pub(super) fn move_to(&self, next: RolloutStatus, stable: Option<Stable>) -> RolloutStatus {
        let before = {
            let mut serving = self.serving.write().expect("rollout state");
            if stable.is_some() || next.current_revision == next.updated_revision {
                serving.stable = stable;
            }
            std::mem::replace(&mut serving.state, next.clone())
        };
        if !splits(&next) {
            self.passes.lock().expect("rollout passes").clear();
        }
        before
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
