//! The `spec.rollout` part of a definition: how an accepted edit reaches the parents,
//! all at once or a share at a time.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How an accepted edit of the definition reaches its parents.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RolloutSpec {
    /// `Immediate` (the default) renders every parent with the new version at once;
    /// `Canary` moves a growing share of parents through `steps`.
    #[serde(default)]
    pub strategy: RolloutStrategy,
    /// With `Canary`: the share of parents on the new version at each step, in percent,
    /// increasing. A last step of 100 is implied when the list does not end with it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<RolloutStep>,
    /// How long the parents a step moved have to become Ready before the rollout fails.
    #[serde(default = "default_progress_deadline")]
    #[schemars(range(min = 1))]
    pub progress_deadline_seconds: u32,
    /// What a failed rollout does: `Rollback` (the default) returns the moved parents to
    /// the previous version; `Pause` leaves them and waits for a new edit or a command.
    #[serde(default)]
    pub on_failure: OnFailure,
}

/// Whether an edit reaches every parent at once or a step at a time.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum RolloutStrategy {
    /// Every parent renders the new version at once.
    #[default]
    Immediate,
    /// A share of parents at a time, each step gated on their health.
    Canary,
}

/// One step of a canary rollout.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RolloutStep {
    /// The share of parents on the new version once this step starts, 1 to 100.
    #[schemars(range(min = 1, max = 100))]
    pub percent: u8,
    /// How long the step holds before the next one may start, once its parents are Ready.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub pause_seconds: u32,
}

/// What a canary rollout does when a parent it moved fails.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum OnFailure {
    /// The moved parents return to the previous version.
    #[default]
    Rollback,
    /// The moved parents stay; the rollout waits for a new edit or `stencil rollout`.
    Pause,
}

/// `revisionHistoryLimit` unless set.
pub const DEFAULT_REVISION_HISTORY_LIMIT: u32 = 5;

/// `rollout.progressDeadlineSeconds` unless set: ten minutes, as a Deployment's.
pub const DEFAULT_PROGRESS_DEADLINE_SECONDS: u32 = 600;

fn default_progress_deadline() -> u32 {
    DEFAULT_PROGRESS_DEADLINE_SECONDS
}

impl Default for RolloutSpec {
    fn default() -> Self {
        RolloutSpec {
            strategy: RolloutStrategy::Immediate,
            steps: Vec::new(),
            progress_deadline_seconds: DEFAULT_PROGRESS_DEADLINE_SECONDS,
            on_failure: OnFailure::Rollback,
        }
    }
}

impl Default for RolloutStep {
    fn default() -> Self {
        RolloutStep {
            percent: 100,
            pause_seconds: 0,
        }
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl RolloutSpec {
    /// Whether this is the default: every parent takes an edit at once.
    pub fn is_default(&self) -> bool {
        *self == RolloutSpec::default()
    }

    /// The steps a canary rollout takes, ending at 100 percent: those written, and a
    /// final 100 when the last written step is below it. Empty for `Immediate`.
    pub fn effective_steps(&self) -> Vec<RolloutStep> {
        if self.strategy == RolloutStrategy::Immediate {
            return Vec::new();
        }
        let mut steps = self.steps.clone();
        if steps.last().is_none_or(|s| s.percent < 100) {
            steps.push(RolloutStep::default());
        }
        steps
    }
}

/// Where a definition's rollout stands, on its status: the revision every parent not
/// moved renders, the one being rolled out, and the step.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStatus {
    /// The revision parents render unless the rollout moved them: the last one completed.
    pub current_revision: String,
    /// The newest accepted revision; the current one when no rollout runs.
    pub updated_revision: String,
    /// Where the rollout is.
    #[serde(default)]
    pub phase: RolloutPhase,
    /// The step it is at, counted from 0, among the steps (with the implied last 100).
    #[serde(default)]
    pub step: u32,
    /// The share of parents on the updated revision, in percent.
    #[serde(default)]
    pub percent: u8,
    /// When the step started, in RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_started_at: Option<String>,
    /// Revisions a newer edit superseded during their rollout: the parents they had moved
    /// render the updated revision from its first step.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub carried: Vec<CarriedShare>,
    /// Why the rollout failed or paused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The share of parents a superseded revision had moved.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CarriedShare {
    /// The superseded revision.
    pub revision: String,
    /// Its share when it was superseded, in percent.
    pub percent: u8,
}

/// Where a rollout is.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum RolloutPhase {
    /// Every parent renders the current revision, which is the updated one.
    #[default]
    Complete,
    /// Steps advance as their parents become Ready.
    Progressing,
    /// Held where it is: by a command, or by a failure under `onFailure: Pause`.
    Paused,
    /// A moved parent failed, or `undo` was asked: every parent renders the current
    /// revision and the updated one waits for the next edit.
    RolledBack,
}

/// Why a rollout strategy cannot be followed.
pub fn rollout_problems(spec: &RolloutSpec) -> Vec<String> {
    let mut problems = Vec::new();
    if spec.strategy == RolloutStrategy::Canary && spec.steps.iter().all(|s| s.percent >= 100) {
        problems.push("a Canary rollout needs a step below 100 percent, such as `steps: [{percent: 20}]`".into());
    }
    let mut last = 0;
    for (i, step) in spec.steps.iter().enumerate() {
        if !(1..=100).contains(&step.percent) {
            problems.push(format!("steps[{i}].percent must be 1 to 100, got {}", step.percent));
        } else if step.percent <= last {
            problems.push(format!(
                "steps[{i}].percent must be above the step before ({last}), got {}",
                step.percent
            ));
        }
        last = last.max(step.percent);
    }
    if spec.progress_deadline_seconds == 0 {
        problems.push("progressDeadlineSeconds must be at least 1".into());
    }
    problems
}
