//! How a decorator's parents are doing: each pass records its outcome in the ledger, and
//! the definition's status counts them.

use kube::api::DynamicObject;
use serde_json::Value;

use super::context::{Context, ParentKey};
use super::ledger::DecoratorOutcome;
use crate::definition::FailingParent;

/// How a decorator's parents are doing, for its definition's status.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decorated {
    /// Objects decorated now.
    pub parents: usize,
    /// Of those, how many have every child ready.
    pub ready: usize,
    /// The first few that are not.
    pub failing: Vec<FailingParent>,
}

/// How many failing parents a decorator's status lists.
const FAILING_SHOWN: usize = 5;

impl Context {
    /// Records a decorator's outcome for a parent from the status a composite parent
    /// would get.
    pub(super) fn record_outcome(&self, parent: &DynamicObject, status: &Value) {
        let ready = status
            .get("conditions")
            .and_then(Value::as_array)
            .and_then(|c| c.iter().find(|c| c["type"] == "Ready"));
        let outcome = match ready {
            Some(c) if c["status"] == "True" => DecoratorOutcome::Ready,
            Some(c) => DecoratorOutcome::NotReady {
                reason: c["reason"].as_str().unwrap_or_default().to_string(),
                message: c["message"].as_str().unwrap_or_default().to_string(),
            },
            None => DecoratorOutcome::NotReady {
                reason: "Unknown".to_string(),
                message: String::new(),
            },
        };
        self.ledger().outcome(&self.parent_key(parent), outcome);
    }

    /// A decorator's counts for its definition's status; `None` for a composite one.
    pub fn decorated(&self) -> Option<Decorated> {
        if !self.def.spec.is_decorator() {
            return None;
        }
        let parents: Vec<ParentKey> = self
            .parents
            .scan_metadata(|m| self.decorates(m).then(|| self.parents.key_of(m)));
        let ledger = self.ledger();
        let mut failing: Vec<FailingParent> = parents
            .iter()
            .filter_map(|p| {
                let Some(DecoratorOutcome::NotReady { reason, message }) = ledger.outcome_of(p) else {
                    return None;
                };
                let at = p
                    .namespace
                    .as_ref()
                    .map_or_else(|| p.name.clone(), |ns| format!("{ns}/{}", p.name));
                Some(FailingParent {
                    parent: format!("{} {at}", self.def.parent.kind),
                    reason: reason.clone(),
                    message: message.clone(),
                })
            })
            .collect();
        failing.sort_by(|a, b| (&a.parent, &a.reason, &a.message).cmp(&(&b.parent, &b.reason, &b.message)));
        let ready = parents
            .iter()
            .filter(|p| matches!(ledger.outcome_of(p), Some(DecoratorOutcome::Ready)))
            .count();
        failing.truncate(FAILING_SHOWN);
        Some(Decorated {
            parents: parents.len(),
            ready,
            failing,
        })
    }
}
