//! Rolling a definition edit out, with no client and no clock: what a revision is and is
//! called, which parents render which revision, and how a rollout moves from step to step.
//!
//! Which parents a step moves is a function of the parent's UID and the revision alone
//! (a hash percentile under the step's percent), so the choice survives a restart and
//! needs no write to any parent; a larger percent only adds parents. The rollout's state
//! lives on the definition's status ([`RolloutStatus`]); time reaches these functions
//! as the time elapsed in a step, measured by the caller.

mod members;
mod progress;
mod revision;

pub use members::{ShareReport, across, report_annotation};
pub use progress::{Command, CommandError, Decision, Health, UNDONE, begin, command, decide, settle};
pub use revision::{REVISION_HASH_LEN, revision_hash, revision_name, revision_object};

use crate::definition::{RolloutPhase, RolloutStatus};

/// How finely parents are ranked: a percent is 100 of these.
const BUCKETS: u64 = 10_000;

/// Where `uid` falls for `revision`, in `0..10_000`.
fn bucket(revision: &str, uid: &str) -> u64 {
    crate::digest::pair(revision, uid) % BUCKETS
}

/// Whether the parent `uid` is among the first `percent` of parents for `revision`.
pub fn chosen(revision: &str, uid: &str, percent: u8) -> bool {
    bucket(revision, uid) < u64::from(percent.min(100)) * BUCKETS / 100
}

/// The revision the parent `uid` renders while the rollout stands at `status`.
pub fn revision_for<'s>(status: &'s RolloutStatus, uid: &str) -> &'s str {
    if on_updated(status, uid) {
        &status.updated_revision
    } else {
        &status.current_revision
    }
}

/// Whether the parent `uid` renders the updated revision: every parent once the rollout is
/// complete, none once rolled back, and in between those its step (or a superseded
/// revision's step) chose.
pub fn on_updated(status: &RolloutStatus, uid: &str) -> bool {
    match status.phase {
        RolloutPhase::Complete => true,
        RolloutPhase::RolledBack => false,
        RolloutPhase::Progressing | RolloutPhase::Paused => {
            chosen(&status.updated_revision, uid, status.percent)
                || status.carried.iter().any(|c| chosen(&c.revision, uid, c.percent))
        }
    }
}

/// Whether two revisions are served at once: a rollout in progress or paused with some
/// parents moved.
pub fn splits(status: &RolloutStatus) -> bool {
    matches!(status.phase, RolloutPhase::Progressing | RolloutPhase::Paused)
        && status.current_revision != status.updated_revision
}

#[cfg(test)]
mod tests;
