//! How a rollout moves: a new revision begins one ([`begin`]), the health of the moved
//! parents and the time spent in the step decide the next move ([`decide`], carried out
//! by [`settle`]), and `stencil rollout` changes it by hand ([`command`]).

use std::time::Duration;

use crate::definition::{CarriedShare, OnFailure, RolloutPhase, RolloutSpec, RolloutStatus, RolloutStrategy};

/// How the parents on the updated revision are doing, as the controller saw their last
/// passes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Health {
    /// Parents the rollout moved to the updated revision.
    pub moved: usize,
    /// Of those, how many a pass with the updated revision found Ready.
    pub ready: usize,
    /// The first moved parent that failed (its render or a write failed, or it went from
    /// Ready to not Ready on the updated revision): the parent, and why.
    pub failed: Option<(String, String)>,
    /// The first moved parent that is not Ready yet.
    pub pending: Option<String>,
    /// A member of a sharded ring that has not reported on this step yet: its share is
    /// not known to be Ready.
    pub unheard: Option<String>,
}

/// What a rollout does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Nothing, until the step has lasted this long or a parent's health changes (none:
    /// until something else happens, such as a command or an edit).
    Wait(Option<Duration>),
    /// Move to the next step.
    Advance,
    /// Every parent is on the updated revision and Ready: it becomes the current one.
    Complete,
    /// A moved parent failed, or was not Ready in time.
    Fail {
        /// The parent.
        parent: String,
        /// What was wrong.
        message: String,
    },
}

/// The rollout after the definition's revision `revision` was accepted, from where the
/// rollout stood (`previous`, none for a definition seen for the first time) at `now`
/// (RFC 3339).
///
/// The first revision, an `Immediate` strategy and an edit back to the current revision
/// complete at once. The revision a rollout already rolls out changes nothing (a restart
/// rebuilds the rollout from the status). Any other revision starts at the first step;
/// the parents a rollout in progress had moved ride along ([`RolloutStatus::carried`]).
pub fn begin(spec: &RolloutSpec, previous: Option<&RolloutStatus>, revision: &str, now: &str) -> RolloutStatus {
    let complete = |revision: &str| RolloutStatus {
        current_revision: revision.to_string(),
        updated_revision: revision.to_string(),
        phase: RolloutPhase::Complete,
        step: 0,
        percent: 100,
        step_started_at: None,
        carried: Vec::new(),
        message: None,
    };
    let Some(previous) = previous.filter(|p| !p.current_revision.is_empty()) else {
        return complete(revision);
    };
    if previous.updated_revision == revision {
        return previous.clone();
    }
    if spec.strategy == RolloutStrategy::Immediate || previous.current_revision == revision {
        return complete(revision);
    }
    let mut carried = Vec::new();
    if matches!(previous.phase, RolloutPhase::Progressing | RolloutPhase::Paused) {
        carried.extend(previous.carried.iter().cloned());
        carried.push(CarriedShare {
            revision: previous.updated_revision.clone(),
            percent: previous.percent,
        });
    }
    RolloutStatus {
        current_revision: previous.current_revision.clone(),
        updated_revision: revision.to_string(),
        phase: RolloutPhase::Progressing,
        step: 0,
        percent: spec.effective_steps()[0].percent,
        step_started_at: Some(now.to_string()),
        carried,
        message: None,
    }
}

/// What the rollout at `status` does next, given the health of its moved parents and how
/// long its step has lasted.
///
/// A step with a failed parent fails. A step whose moved parents are all Ready advances
/// (or completes, at 100 percent) once its pause has passed; one with a parent not Ready,
/// or a member of the ring that has not reported on it, fails at
/// `progressDeadlineSeconds`. Only a rollout in progress moves; a definition
/// switched to `Immediate` completes its rollout.
pub fn decide(spec: &RolloutSpec, status: &RolloutStatus, health: &Health, elapsed: Duration) -> Decision {
    match status.phase {
        RolloutPhase::Complete | RolloutPhase::RolledBack => return Decision::Wait(None),
        _ if spec.strategy == RolloutStrategy::Immediate => return Decision::Complete,
        RolloutPhase::Paused => return Decision::Wait(None),
        RolloutPhase::Progressing => {}
    }
    if let Some((parent, message)) = &health.failed {
        return Decision::Fail {
            parent: parent.clone(),
            message: message.clone(),
        };
    }
    let steps = spec.effective_steps();
    let step = steps[(status.step as usize).min(steps.len() - 1)];
    if health.ready >= health.moved && health.unheard.is_none() {
        let pause = Duration::from_secs(step.pause_seconds.into());
        return match pause.checked_sub(elapsed).filter(|left| !left.is_zero()) {
            Some(_) => Decision::Wait(Some(pause)),
            None if status.percent >= 100 => Decision::Complete,
            None => Decision::Advance,
        };
    }
    let deadline = Duration::from_secs(spec.progress_deadline_seconds.into());
    if elapsed >= deadline {
        let seconds = spec.progress_deadline_seconds;
        return match (&health.pending, &health.unheard) {
            (None, Some(member)) => Decision::Fail {
                parent: format!("member {member}"),
                message: format!("reported nothing on the step {seconds}s after it began"),
            },
            (pending, _) => Decision::Fail {
                parent: pending.clone().unwrap_or_default(),
                message: format!(
                    "not Ready {seconds}s after the step moved it ({} of {} moved parents Ready)",
                    health.ready, health.moved
                ),
            },
        };
    }
    Decision::Wait(Some(deadline))
}

/// The rollout at `status` after `decision`, taken at `now` (RFC 3339). A failure rolls
/// the moved parents back or pauses them, as `onFailure` says.
pub fn settle(spec: &RolloutSpec, status: &RolloutStatus, decision: &Decision, now: &str) -> RolloutStatus {
    let mut next = status.clone();
    match decision {
        Decision::Wait(_) => {}
        Decision::Advance => {
            let steps = spec.effective_steps();
            let step = (status.step as usize + 1).min(steps.len() - 1);
            next.step = step as u32;
            next.percent = steps[step].percent.max(status.percent);
            next.step_started_at = Some(now.to_string());
            next.message = None;
        }
        Decision::Complete => {
            next = begin(&RolloutSpec::default(), None, &status.updated_revision, now);
        }
        Decision::Fail { parent, message } => {
            next.message = Some(format!("{parent}: {message}"));
            match spec.on_failure {
                OnFailure::Rollback => roll_back(&mut next),
                OnFailure::Pause => next.phase = RolloutPhase::Paused,
            }
        }
    }
    next
}

fn roll_back(status: &mut RolloutStatus) {
    status.phase = RolloutPhase::RolledBack;
    status.percent = 0;
    status.carried.clear();
    status.step_started_at = None;
}

/// How the message of a rollout rolled back by `undo` begins (a failed one names a
/// parent instead).
pub const UNDONE: &str = "undone by `stencil rollout undo`";

/// What `stencil rollout` asks of a rollout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Go to the next step now, whatever the pause; resumes a paused rollout.
    Promote,
    /// Hold the rollout where it is.
    Pause,
    /// Let a paused rollout go on; its step starts again.
    Resume,
    /// Return every parent to the revision before the one it renders: during a rollout,
    /// the current one; after it, `previous`. Repeatable: each undo after a rollout steps
    /// one revision further back.
    Undo {
        /// The revision before the one parents render now, if history holds it.
        previous: Option<String>,
    },
}

/// Why a command does not apply to the rollout as it stands.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    /// Promote, pause or resume with no rollout in progress.
    #[error("no rollout is in progress (the rollout is {0:?})")]
    NotInProgress(RolloutPhase),
    /// Resume of a rollout that is not paused.
    #[error("the rollout is not paused")]
    NotPaused,
    /// Undo with nothing before the current revision.
    #[error("there is no earlier revision to return to")]
    NothingToUndo,
}

/// The rollout at `status` after `command`, given at `now` (RFC 3339).
///
/// # Errors
///
/// [`CommandError`] when the command does not apply: promote or pause with no rollout in
/// progress, resume of a rollout that is not paused, undo with no earlier revision.
pub fn command(
    spec: &RolloutSpec,
    status: &RolloutStatus,
    command: &Command,
    now: &str,
) -> Result<RolloutStatus, CommandError> {
    let running = matches!(status.phase, RolloutPhase::Progressing | RolloutPhase::Paused);
    match command {
        Command::Promote if running => {
            let decision = if status.percent >= 100 {
                Decision::Complete
            } else {
                Decision::Advance
            };
            let mut next = settle(spec, status, &decision, now);
            if next.phase == RolloutPhase::Paused {
                next.phase = RolloutPhase::Progressing;
            }
            Ok(next)
        }
        Command::Pause if running => Ok(RolloutStatus {
            phase: RolloutPhase::Paused,
            message: Some("paused by `stencil rollout pause`".into()),
            ..status.clone()
        }),
        Command::Resume if status.phase == RolloutPhase::Paused => Ok(RolloutStatus {
            phase: RolloutPhase::Progressing,
            step_started_at: Some(now.to_string()),
            message: None,
            ..status.clone()
        }),
        Command::Resume if running => Err(CommandError::NotPaused),
        Command::Undo { .. } if running => {
            let mut next = status.clone();
            next.message = Some(UNDONE.into());
            roll_back(&mut next);
            Ok(next)
        }
        Command::Undo { previous } => {
            let previous = previous
                .as_deref()
                .filter(|p| *p != status.current_revision)
                .ok_or(CommandError::NothingToUndo)?;
            // The updated revision stays the newest one, which keeps this state: a second
            // undo reads it there and steps back once more, and a restart rebuilds it.
            let mut next = status.clone();
            next.current_revision = previous.to_string();
            next.message = Some(format!("{UNDONE}: {} returned to {previous}", status.current_revision));
            roll_back(&mut next);
            Ok(next)
        }
        Command::Promote | Command::Pause | Command::Resume => Err(CommandError::NotInProgress(status.phase)),
    }
}
