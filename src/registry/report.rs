//! What the registry and the controllers say about a definition ([`Report`]), and how
//! each report changes the definition's status and the log.

use serde_json::{Value, json};

use crate::conditions::{condition, set};
use crate::reconcile::Decorated;
use crate::source::Origin;

/// One thing to say about a definition.
#[derive(Debug, Clone, PartialEq)]
pub enum Report {
    /// The current version compiled (`Compiled=True`, clearing an earlier error).
    Compiled,
    /// The current version does not compile.
    CompileError {
        /// The diagnostics, with file, line and column.
        message: String,
        /// Whether the last good version keeps running.
        running: bool,
    },
    /// Another definition serves the parent kind.
    Conflict {
        /// Names the kind and the holder.
        message: String,
    },
    /// The controller cannot start yet.
    Waiting {
        /// `Waiting`, `Forbidden`, `NotServed` or `WatchFailed`.
        reason: &'static str,
        /// Why.
        message: String,
    },
    /// The controller runs.
    Serving {
        /// Kinds watched, as `apiVersion/kind`.
        watched: Vec<String>,
        /// Parents served.
        parents: usize,
        /// Why it cannot do its job, if it cannot: a failing watch or a refused request.
        problem: Option<String>,
        /// A decorator's counts.
        decorated: Option<Decorated>,
        /// The CRD change of the newest version, refused as breaking; the version
        /// before it serves.
        refused: Option<String>,
    },
    /// Where the storage-version migration of the definition's CRD stands.
    Migration(crate::migrate::Progress),
    /// The storage-version migration failed; it is retried when the definition restarts.
    MigrationFailed {
        /// Why.
        message: String,
    },
    /// Where the definition's rollout stands, its revisions kept.
    Rollout(crate::definition::RolloutStatus),
    /// The definition's revision could not be kept.
    RevisionFailed {
        /// Why.
        message: String,
    },
    /// The definition is gone: forget it.
    Removed,
}

impl Report {
    /// Applies this report to a definition's status object.
    pub(super) fn apply(&self, status: &mut Value) {
        let mut conditions: Vec<Value> = status["conditions"].as_array().cloned().unwrap_or_default();
        let last_error = match self {
            Report::Serving {
                watched,
                parents,
                problem,
                decorated,
                refused,
            } => {
                status["watchedKinds"] = json!(watched);
                status["parentCount"] = json!(parents);
                if let Some(d) = decorated {
                    status["decoratedParents"] = json!(d.parents);
                    status["readyParents"] = json!(d.ready);
                    status["failingParents"] = json!(d.failing);
                }
                serving(&mut conditions, refused.as_deref(), problem.as_deref())
            }
            Report::Migration(progress) => {
                status["storedVersions"] = json!(progress.stored_versions);
                if progress.through.is_none() {
                    status["migratedObjects"] = json!(progress.migrated);
                }
                let (done, message) = (progress.done(), progress.message());
                let reason = if done { "Done" } else { "Migrating" };
                set(&mut conditions, condition("Migrated", done, reason, &message, None));
                LastError::Kept
            }
            Report::Rollout(rollout) => {
                status["rollout"] = json!(rollout);
                let (reason, message) = rollout_condition(rollout);
                let done = rollout.phase == crate::definition::RolloutPhase::Complete;
                set(&mut conditions, condition("Rollout", done, reason, &message, None));
                LastError::Kept
            }
            other => other.conditions_only(&mut conditions),
        };
        status["conditions"] = Value::Array(conditions);
        match last_error {
            LastError::Set(message) => status["lastError"] = message.into(),
            LastError::Cleared => {
                if let Some(map) = status.as_object_mut() {
                    map.remove("lastError");
                }
            }
            LastError::Kept => {}
        }
    }

    /// Applies a report that sets conditions alone.
    fn conditions_only(&self, conditions: &mut Vec<Value>) -> LastError {
        let (changes, message) = match self {
            Report::Compiled => (vec![condition("Compiled", true, "Compiled", "", None)], None),
            Report::CompileError { message, running } => {
                let note = if *running {
                    "the last good version keeps running"
                } else {
                    "not started"
                };
                let text = format!("{message} ({note})");
                (
                    vec![condition("Compiled", false, "CompileError", &text, None)],
                    Some(message),
                )
            }
            Report::Conflict { message } => (
                vec![
                    condition("Ready", false, "Conflict", message, None),
                    condition("Conflict", true, "ParentKindTaken", message, None),
                ],
                Some(message),
            ),
            Report::Waiting { reason, message } => {
                (vec![condition("Ready", false, reason, message, None)], Some(message))
            }
            Report::MigrationFailed { message } => (
                vec![condition("Migrated", false, "Failed", message, None)],
                Some(message),
            ),
            Report::RevisionFailed { message } => (
                vec![condition("Rollout", false, "RevisionNotKept", message, None)],
                Some(message),
            ),
            Report::Serving { .. } | Report::Migration(_) | Report::Rollout(_) | Report::Removed => (Vec::new(), None),
        };
        for change in changes {
            set(conditions, change);
        }
        message.map_or(LastError::Kept, |m| LastError::Set(m.clone()))
    }

    pub(super) fn log(&self, origin: &Origin) {
        match self {
            Report::CompileError { message, .. } => tracing::error!(definition = %origin, "{message}"),
            Report::Conflict { message } => tracing::warn!(definition = %origin, "conflict: {message}"),
            Report::Waiting { message, .. } => tracing::info!(definition = %origin, "waiting: {message}"),
            Report::Serving { problem: Some(p), .. } => tracing::warn!(definition = %origin, "{p}"),
            Report::MigrationFailed { message } | Report::RevisionFailed { message } => {
                tracing::warn!(definition = %origin, "{message}")
            }
            Report::Rollout(r) => tracing::info!(definition = %origin, "{}", rollout_condition(r).1),
            Report::Compiled | Report::Serving { problem: None, .. } | Report::Migration(_) | Report::Removed => {}
        }
    }
}

/// What a report does to the status's `lastError`.
enum LastError {
    /// Leaves it as it is.
    Kept,
    /// Removes it: the definition serves as it should.
    Cleared,
    /// Sets it.
    Set(String),
}

/// The conditions of a running controller: no conflict, and `Ready` unless its newest
/// version's CRD change was refused or it cannot do its job.
fn serving(conditions: &mut Vec<Value>, refused: Option<&str>, problem: Option<&str>) -> LastError {
    set(conditions, condition("Conflict", false, "NoConflict", "", None));
    match (refused, problem) {
        (Some(message), _) => {
            let text = format!("{message} (the last good version keeps serving)");
            set(
                conditions,
                condition("Ready", false, "BreakingSchemaChange", &text, None),
            );
            LastError::Set(message.to_string())
        }
        (None, None) => {
            set(
                conditions,
                condition("Ready", true, "Serving", "the definition is running", None),
            );
            LastError::Cleared
        }
        (None, Some(p)) => {
            set(conditions, condition("Ready", false, "Failing", p, None));
            LastError::Set(p.to_string())
        }
    }
}

/// The `Rollout` condition's reason and message for a rollout.
pub(super) fn rollout_condition(rollout: &crate::definition::RolloutStatus) -> (&'static str, String) {
    use crate::definition::RolloutPhase;
    let why = rollout.message.as_deref().map(|m| format!(": {m}")).unwrap_or_default();
    match rollout.phase {
        RolloutPhase::Complete => (
            "Complete",
            format!("every parent renders revision {}", rollout.current_revision),
        ),
        RolloutPhase::Progressing => (
            "Progressing",
            format!(
                "step {}: {} % of parents on revision {}, the others on {}",
                rollout.step + 1,
                rollout.percent,
                rollout.updated_revision,
                rollout.current_revision
            ),
        ),
        RolloutPhase::Paused => (
            "Paused",
            format!(
                "held at {} % of parents on revision {}{why}",
                rollout.percent, rollout.updated_revision
            ),
        ),
        RolloutPhase::RolledBack => (
            "Failed",
            format!(
                "every parent renders revision {}, not {}{why}",
                rollout.current_revision, rollout.updated_revision
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status_of(reports: &[Report]) -> Value {
        let mut status = json!({});
        for r in reports {
            r.apply(&mut status);
        }
        status
    }

    fn cond(status: &Value, type_: &str) -> (String, String) {
        let c = status["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == type_)
            .unwrap_or_else(|| panic!("no {type_} in {status}"));
        (
            c["status"].as_str().unwrap().into(),
            c["reason"].as_str().unwrap().into(),
        )
    }

    #[test]
    fn a_good_version_clears_compiled_false() {
        let error = Report::CompileError {
            message: "f.yaml:3:1: bad".into(),
            running: true,
        };
        let s = status_of(std::slice::from_ref(&error));
        assert_eq!(cond(&s, "Compiled"), ("False".into(), "CompileError".into()));
        assert_eq!(s["lastError"], "f.yaml:3:1: bad");
        let s = status_of(&[error, Report::Compiled]);
        assert_eq!(cond(&s, "Compiled"), ("True".into(), "Compiled".into()));
    }

    #[test]
    fn a_compile_error_keeps_ready_and_serving_clears_the_error() {
        let serving = Report::Serving {
            watched: vec!["v1/ConfigMap".into()],
            parents: 2,
            problem: None,
            decorated: None,
            refused: None,
        };
        let s = status_of(&[
            serving.clone(),
            Report::CompileError {
                message: "bad".into(),
                running: true,
            },
        ]);
        assert_eq!(cond(&s, "Ready"), ("True".into(), "Serving".into()));
        assert_eq!(cond(&s, "Compiled").0, "False");
        let s = status_of(&[Report::Compiled, serving]);
        assert!(s.get("lastError").is_none(), "{s}");
        assert_eq!(s["parentCount"], 2);
    }

    #[test]
    fn a_forbidden_watch_is_ready_false_with_its_reason() {
        let s = status_of(&[Report::Waiting {
            reason: "Forbidden",
            message: "forbidden to list and watch secrets".into(),
        }]);
        assert_eq!(cond(&s, "Ready"), ("False".into(), "Forbidden".into()));
    }
}
