//! A sharded rollout's health across the ring: each member reports how its own share of
//! the moved parents is doing ([`ShareReport`]), for the step it saw; the leader judges the
//! step on the sum ([`across`]), and a member whose report is not of that step holds it
//! as a parent not Ready yet would. So a leader whose own share moved no parent never
//! advances on time alone while another member's moved parents fail.

use serde::{Deserialize, Serialize};

use super::Health;
use crate::definition::RolloutStatus;

/// One member's health of its share of a step: the step named by the updated revision
/// and the time it began, as the member read them from the saved state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShareReport {
    /// The revision the step moves parents to.
    pub revision: String,
    /// When the step began (`stepStartedAt` of the saved state).
    pub step_started_at: String,
    /// The member's parents on the updated revision.
    pub moved: usize,
    /// Of those, the ones found Ready.
    pub ready: usize,
    /// The first of them that failed, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<(String, String)>,
    /// The first of them not Ready yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<String>,
}

impl ShareReport {
    /// `health` of a member's share, reported for the step `status` is at.
    pub fn of(status: &RolloutStatus, health: &Health) -> ShareReport {
        ShareReport {
            revision: status.updated_revision.clone(),
            step_started_at: step_of(status),
            moved: health.moved,
            ready: health.ready,
            failed: health.failed.clone(),
            pending: health.pending.clone(),
        }
    }

    /// Whether this report is of the step `status` is at.
    pub fn of_step(&self, status: &RolloutStatus) -> bool {
        self.revision == status.updated_revision && self.step_started_at == step_of(status)
    }
}

/// The annotation on a member's Lease that carries its report for `definition`: a
/// digest of the name, since a definition's name may be longer than an annotation's.
pub fn report_annotation(definition: &str) -> String {
    format!(
        "rollout.{}/{:016x}",
        crate::labels::GROUP,
        crate::digest::pair("rollout", definition)
    )
}

fn step_of(status: &RolloutStatus) -> String {
    status.step_started_at.clone().unwrap_or_default()
}

/// The health of the step `status` is at over the whole ring: `own` (the leader's share,
/// counted where it runs) and each other member's report, if it has one. A member with
/// no report of this step is named in [`Health::unheard`].
pub fn across<'a>(
    status: &RolloutStatus,
    own: Health,
    members: impl IntoIterator<Item = (&'a str, Option<&'a ShareReport>)>,
) -> Health {
    let mut health = own;
    for (member, report) in members {
        let Some(report) = report.filter(|r| r.of_step(status)) else {
            health.unheard.get_or_insert_with(|| member.to_string());
            continue;
        };
        health.moved += report.moved;
        health.ready += report.ready;
        if health.failed.is_none() {
            health.failed = report.failed.clone();
        }
        if health.pending.is_none() {
            health.pending = report.pending.clone();
        }
    }
    health
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::definition::RolloutPhase;

    fn status(started: &str) -> RolloutStatus {
        RolloutStatus {
            current_revision: "w-1".into(),
            updated_revision: "w-2".into(),
            phase: RolloutPhase::Progressing,
            step: 0,
            percent: 20,
            step_started_at: Some(started.into()),
            carried: Vec::new(),
            message: None,
        }
    }

    fn health(moved: usize, ready: usize, failed: Option<&str>) -> Health {
        Health {
            moved,
            ready,
            failed: failed.map(|p| (p.to_string(), "RenderFailed".to_string())),
            pending: (ready < moved).then(|| "W pending".to_string()),
            unheard: None,
        }
    }

    #[test]
    fn the_ring_sums_its_members_and_the_first_failure_anywhere_counts() {
        let step = status("t1");
        let b = ShareReport::of(&step, &health(3, 1, Some("W b/broken")));
        let c = ShareReport::of(&step, &health(2, 2, None));
        let sum = across(&step, health(0, 0, None), [("b", Some(&b)), ("c", Some(&c))]);
        assert_eq!((sum.moved, sum.ready), (5, 3));
        assert_eq!(sum.failed.unwrap().0, "W b/broken");
        assert_eq!(sum.pending.as_deref(), Some("W pending"));
        assert_eq!(sum.unheard, None);
    }

    #[test]
    fn a_member_silent_or_reporting_another_step_is_unheard() {
        let earlier = ShareReport::of(&status("t1"), &health(1, 1, None));
        let now = status("t2");
        let sum = across(&now, health(0, 0, None), [("b", Some(&earlier)), ("c", None)]);
        assert_eq!(sum.unheard.as_deref(), Some("b"));
        assert_eq!((sum.moved, sum.ready), (0, 0), "a stale report counts nothing");
        let mut other = now.clone();
        other.updated_revision = "w-3".into();
        let of_other = ShareReport::of(&other, &health(1, 1, None));
        assert!(!of_other.of_step(&now), "another revision's step");
    }

    #[test]
    fn each_definition_has_its_own_annotation_within_the_length_kubernetes_allows() {
        let long = format!("{}.example.org", "x".repeat(200));
        let key = report_annotation(&long);
        assert!(key.rsplit('/').next().unwrap().len() <= 63, "{key}");
        assert_ne!(key, report_annotation("databases.example.org"));
    }

    #[test]
    fn a_report_reads_back_as_written() {
        let report = ShareReport::of(&status("t1"), &health(2, 1, Some("W x")));
        let text = serde_json::to_string(&report).unwrap();
        assert_eq!(serde_json::from_str::<ShareReport>(&text).unwrap(), report);
    }
}
