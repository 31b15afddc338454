//! What becomes of one existing child under its kind's update method, purely: a child
//! is changed only when it no longer holds every field the hook's answer sets, so a field
//! another manager set out of band is no change; `OnDelete` never touches an existing
//! child, `InPlace` applies the answer, `Recreate` deletes the child for the next pass
//! to create anew.

use serde_json::Value;

use super::api::UpdateMethod;
use crate::applied::live_contains;

/// What to do with one desired child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildAction {
    /// It does not exist: create it.
    Create,
    /// Leave it as it is.
    Keep,
    /// Apply the desired object over it.
    Apply,
    /// Delete it (with its uid as precondition); a later pass creates it anew.
    Recreate,
}

/// The action for a child desired as `desired` and found as `live`, under `method`.
/// Rolling methods act as their immediate forms here; the rollout's pace is the caller's.
pub fn decide(method: UpdateMethod, live: Option<&Value>, desired: &Value) -> ChildAction {
    let Some(live) = live else {
        return ChildAction::Create;
    };
    if method == UpdateMethod::OnDelete || live_contains(live, desired) {
        return ChildAction::Keep;
    }
    match method {
        UpdateMethod::InPlace | UpdateMethod::RollingInPlace => ChildAction::Apply,
        UpdateMethod::Recreate | UpdateMethod::RollingRecreate => ChildAction::Recreate,
        UpdateMethod::OnDelete => ChildAction::Keep,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn live() -> Value {
        json!({"metadata": {"name": "c", "annotations": {"by-hand": "yes"}}, "data": {"a": "1"}})
    }

    #[test]
    fn an_absent_child_is_created_whatever_the_method() {
        for method in [UpdateMethod::OnDelete, UpdateMethod::InPlace, UpdateMethod::Recreate] {
            assert_eq!(decide(method, None, &json!({})), ChildAction::Create);
        }
    }

    #[test]
    fn a_field_set_out_of_band_is_no_change() {
        let desired = json!({"metadata": {"name": "c"}, "data": {"a": "1"}});
        for method in [UpdateMethod::InPlace, UpdateMethod::Recreate] {
            assert_eq!(decide(method, Some(&live()), &desired), ChildAction::Keep);
        }
    }

    #[test]
    fn a_changed_answer_is_applied_recreated_or_left_by_method() {
        let desired = json!({"metadata": {"name": "c"}, "data": {"a": "2"}});
        let live = live();
        assert_eq!(decide(UpdateMethod::OnDelete, Some(&live), &desired), ChildAction::Keep);
        assert_eq!(decide(UpdateMethod::InPlace, Some(&live), &desired), ChildAction::Apply);
        assert_eq!(
            decide(UpdateMethod::Recreate, Some(&live), &desired),
            ChildAction::Recreate
        );
    }
}
