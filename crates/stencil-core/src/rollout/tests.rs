use std::time::Duration;

use super::*;
use crate::definition::{OnFailure, OperatorDefinitionSpec, RolloutSpec, RolloutStep, RolloutStrategy};

const NOW: &str = "2026-12-05T00:00:00Z";
const LATER: &str = "2026-12-05T00:10:00Z";

fn uids(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("9c1f0e2a-{i:04}-4b1e-8d2c-{:012x}", i * 7919))
        .collect()
}

fn canary(steps: &[(u8, u32)], on_failure: OnFailure) -> RolloutSpec {
    RolloutSpec {
        strategy: RolloutStrategy::Canary,
        steps: steps
            .iter()
            .map(|&(percent, pause_seconds)| RolloutStep { percent, pause_seconds })
            .collect(),
        progress_deadline_seconds: 60,
        on_failure,
    }
}

/// A rollout of `b` over `a` begun at the first step of `spec`.
fn rolling(spec: &RolloutSpec) -> RolloutStatus {
    let settled = begin(spec, None, "a", NOW);
    begin(spec, Some(&settled), "b", NOW)
}

fn healthy(moved: usize) -> Health {
    Health {
        moved,
        ready: moved,
        ..Health::default()
    }
}

#[test]
fn a_step_chooses_about_its_share_and_a_larger_one_only_adds_parents() {
    let all = uids(2000);
    let at = |p| {
        all.iter()
            .filter(|u| chosen("rev-1", u, p))
            .cloned()
            .collect::<Vec<_>>()
    };
    let (ten, fifty, hundred) = (at(10), at(50), at(100));
    assert!((150..=250).contains(&ten.len()), "10 % of 2000 chose {}", ten.len());
    assert!(
        (900..=1100).contains(&fifty.len()),
        "50 % of 2000 chose {}",
        fifty.len()
    );
    assert_eq!(hundred.len(), 2000);
    assert!(ten.iter().all(|u| fifty.contains(u)), "advancing swapped parents");
    assert!(at(0).is_empty());
}

#[test]
fn the_choice_depends_on_the_revision_and_nothing_else() {
    let all = uids(500);
    let first: Vec<bool> = all.iter().map(|u| chosen("rev-1", u, 20)).collect();
    let again: Vec<bool> = all.iter().map(|u| chosen("rev-1", u, 20)).collect();
    let other: Vec<bool> = all.iter().map(|u| chosen("rev-2", u, 20)).collect();
    assert_eq!(first, again);
    assert_ne!(first, other, "another revision should move other parents first");
}

#[test]
fn the_first_revision_and_an_immediate_edit_complete_at_once() {
    let first = begin(&canary(&[(20, 0)], OnFailure::Rollback), None, "a", NOW);
    assert_eq!(
        (first.phase, first.current_revision.as_str()),
        (RolloutPhase::Complete, "a")
    );
    let edit = begin(&RolloutSpec::default(), Some(&first), "b", NOW);
    assert_eq!(edit.phase, RolloutPhase::Complete);
    assert_eq!(
        (edit.current_revision.as_str(), edit.updated_revision.as_str()),
        ("b", "b")
    );
    assert!(all_on(&edit, "b"));
}

fn all_on(status: &RolloutStatus, revision: &str) -> bool {
    uids(200).iter().all(|u| revision_for(status, u) == revision)
}

#[test]
fn a_canary_edit_starts_at_the_first_step_and_a_restart_keeps_it() {
    let spec = canary(&[(20, 120)], OnFailure::Rollback);
    let status = rolling(&spec);
    assert_eq!(status.phase, RolloutPhase::Progressing);
    assert_eq!((status.step, status.percent), (0, 20));
    assert!(splits(&status));
    let on_b = uids(1000).iter().filter(|u| revision_for(&status, u) == "b").count();
    assert!(
        (150..=250).contains(&on_b),
        "{on_b} of 1000 on the new revision at 20 %"
    );
    assert_eq!(
        begin(&spec, Some(&status), "b", LATER),
        status,
        "the same revision again"
    );
}

#[test]
fn a_step_advances_after_its_pause_once_every_moved_parent_is_ready() {
    let spec = canary(&[(20, 120)], OnFailure::Rollback);
    let status = rolling(&spec);
    let pause = Duration::from_secs(120);
    assert_eq!(
        decide(&spec, &status, &healthy(4), Duration::from_secs(30)),
        Decision::Wait(Some(pause))
    );
    let waiting = Health {
        moved: 4,
        ready: 3,
        pending: Some("App ns/a".into()),
        ..Health::default()
    };
    let deadline = Duration::from_secs(60);
    assert_eq!(
        decide(&spec, &status, &waiting, Duration::from_secs(30)),
        Decision::Wait(Some(deadline))
    );
    let decision = decide(&spec, &status, &healthy(4), pause);
    assert_eq!(decision, Decision::Advance);
    let next = settle(&spec, &status, &decision, LATER);
    assert_eq!(
        (next.step, next.percent, next.step_started_at.as_deref()),
        (1, 100, Some(LATER))
    );
    let done = settle(&spec, &next, &decide(&spec, &next, &healthy(10), Duration::ZERO), LATER);
    assert_eq!(done.phase, RolloutPhase::Complete);
    assert_eq!(done.current_revision, "b");
    assert!(all_on(&done, "b"));
}

#[test]
fn a_failed_parent_rolls_the_moved_parents_back_or_pauses_them() {
    let failing = Health {
        moved: 4,
        ready: 2,
        failed: Some(("App ns/x".into(), "render failed".into())),
        ..Health::default()
    };
    let spec = canary(&[(20, 0)], OnFailure::Rollback);
    let status = rolling(&spec);
    let decision = decide(&spec, &status, &failing, Duration::from_secs(1));
    let back = settle(&spec, &status, &decision, LATER);
    assert_eq!(back.phase, RolloutPhase::RolledBack);
    assert_eq!(back.message.as_deref(), Some("App ns/x: render failed"));
    assert!(all_on(&back, "a"), "every parent returns to the current revision");
    assert!(!splits(&back));

    let spec = canary(&[(20, 0)], OnFailure::Pause);
    let status = rolling(&spec);
    let held = settle(&spec, &status, &decide(&spec, &status, &failing, Duration::ZERO), LATER);
    assert_eq!(held.phase, RolloutPhase::Paused);
    assert_eq!(held.percent, 20, "the moved parents stay");
    assert_eq!(
        decide(&spec, &held, &healthy(4), Duration::from_secs(999)),
        Decision::Wait(None)
    );
}

#[test]
fn a_step_not_ready_by_the_deadline_fails_naming_a_parent() {
    let spec = canary(&[(20, 0)], OnFailure::Rollback);
    let status = rolling(&spec);
    let slow = Health {
        moved: 3,
        ready: 1,
        pending: Some("App ns/slow".into()),
        ..Health::default()
    };
    let Decision::Fail { parent, message } = decide(&spec, &status, &slow, Duration::from_secs(60)) else {
        panic!("the deadline has passed");
    };
    assert_eq!(parent, "App ns/slow");
    assert!(message.contains("60s") && message.contains("1 of 3"), "{message}");
}

#[test]
fn a_step_with_an_unheard_member_waits_and_fails_at_the_deadline_naming_it() {
    let spec = canary(&[(20, 0), (100, 0)], OnFailure::Rollback);
    let status = rolling(&spec);
    let unheard = Health {
        unheard: Some("stencil-1".into()),
        ..Health::default()
    };
    assert!(
        matches!(
            decide(&spec, &status, &unheard, Duration::from_secs(5)),
            Decision::Wait(_)
        ),
        "no moved parent here, but a member not heard from: the step waits"
    );
    let Decision::Fail { parent, message } = decide(&spec, &status, &unheard, Duration::from_secs(60)) else {
        panic!("the deadline has passed");
    };
    assert_eq!(parent, "member stencil-1");
    assert!(message.contains("reported nothing"), "{message}");
}

#[test]
fn an_edit_during_a_rollout_supersedes_it_and_takes_its_parents_along() {
    let spec = canary(&[(20, 0)], OnFailure::Rollback);
    let b = rolling(&spec);
    let c = begin(&spec, Some(&b), "c", LATER);
    assert_eq!((c.current_revision.as_str(), c.updated_revision.as_str()), ("a", "c"));
    assert_eq!((c.step, c.percent), (0, 20));
    let all = uids(1000);
    for u in &all {
        if revision_for(&b, u) == "b" {
            assert_eq!(
                revision_for(&c, u),
                "c",
                "a parent on the abandoned revision moves first"
            );
        }
        assert_ne!(revision_for(&c, u), "b", "nobody stays on the abandoned revision");
    }
    // An edit back to the current revision ends the rollout.
    let back = begin(&spec, Some(&c), "a", LATER);
    assert!(all_on(&back, "a") && back.carried.is_empty());
}

#[test]
fn commands_promote_pause_resume_and_undo() {
    let spec = canary(&[(20, 600), (50, 600)], OnFailure::Rollback);
    let status = rolling(&spec);
    let promoted = command(&spec, &status, &Command::Promote, LATER).expect("promote");
    assert_eq!((promoted.step, promoted.percent), (1, 50));
    let paused = command(&spec, &promoted, &Command::Pause, LATER).expect("pause");
    assert_eq!(paused.phase, RolloutPhase::Paused);
    assert_eq!(
        command(&spec, &promoted, &Command::Resume, LATER),
        Err(CommandError::NotPaused)
    );
    let resumed = command(&spec, &paused, &Command::Resume, LATER).expect("resume");
    assert_eq!(resumed.phase, RolloutPhase::Progressing);
    let undone = command(&spec, &resumed, &Command::Undo { previous: None }, LATER).expect("undo");
    assert!(all_on(&undone, "a"));

    let complete = settle(&spec, &resumed, &Decision::Complete, LATER);
    assert_eq!(
        command(&spec, &complete, &Command::Pause, LATER),
        Err(CommandError::NotInProgress(RolloutPhase::Complete))
    );
    assert_eq!(
        command(&spec, &complete, &Command::Undo { previous: None }, LATER),
        Err(CommandError::NothingToUndo)
    );
    let undo = Command::Undo {
        previous: Some("a".into()),
    };
    let back = command(&spec, &complete, &undo, LATER).expect("undo after completion");
    assert!(all_on(&back, "a"));
    assert_eq!(back.updated_revision, "b");
    // A restart with the spec still at `b` keeps the undo.
    assert_eq!(begin(&spec, Some(&back), "b", LATER), back);
}

#[test]
fn the_revision_hash_ignores_how_the_edit_rolls_out() {
    let yaml = |extra: &str| {
        format!(
            "parent: {{apiVersion: example.org/v1, kind: App}}\n{extra}children:\n  - name: cm\n    template: 'kind: ConfigMap'\n"
        )
    };
    let spec = |text: &str| -> OperatorDefinitionSpec { crate::yaml::document(text).expect("spec") };
    let plain = revision_hash(&spec(&yaml("")));
    assert_eq!(plain.len(), REVISION_HASH_LEN);
    let with_rollout = spec(&yaml("rollout: {strategy: Canary, steps: [{percent: 20}]}\n"));
    assert_eq!(revision_hash(&with_rollout), plain);
    assert_ne!(revision_hash(&spec(&yaml("resyncSeconds: 60\n"))), plain);
    let object = revision_object("apps.example.org", "stencil", &with_rollout, 3);
    assert_eq!(object["metadata"]["name"], format!("apps.example.org-{plain}"));
    assert_eq!(object["revision"], 3);
    assert_eq!(object["data"]["spec"]["rollout"]["strategy"], "Canary");
    let long = "x".repeat(300);
    assert_eq!(revision_name(&long, &plain).len(), 253);
}
