//! Conditions, as every status Stencil writes carries them (parents from render and
//! reconcile, OperatorDefinitions from the registry): how one is built, and how a new set
//! keeps each condition's `lastTransitionTime` while its status stays the same.

use serde_json::{Value, json};

/// A condition without a transition time; [`with_times`] adds it when the status is written.
pub fn condition(type_: &str, status: bool, reason: &str, message: &str, generation: Option<i64>) -> Value {
    let mut c =
        json!({"type": type_, "status": if status { "True" } else { "False" }, "reason": reason, "message": message});
    if let Some(g) = generation {
        c["observedGeneration"] = g.into();
    }
    c
}

/// Now, in RFC 3339 to the second, as conditions carry it.
pub fn now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// `next` (a status object) with each condition's `lastTransitionTime` carried over from
/// the condition of the same type in `current` when its status is unchanged, and now
/// otherwise.
pub fn with_times(next: &Value, current: Option<&Value>) -> Value {
    let mut next = next.clone();
    let old: &[Value] = current
        .and_then(|c| c.get("conditions"))
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice);
    if let Some(conditions) = next.get_mut("conditions").and_then(Value::as_array_mut) {
        for c in conditions {
            let time = old
                .iter()
                .find(|o| o.get("type") == c.get("type") && o.get("status") == c.get("status"))
                .and_then(|o| o.get("lastTransitionTime"))
                .cloned()
                .unwrap_or_else(|| now().into());
            c["lastTransitionTime"] = time;
        }
    }
    next
}

/// `conditions` with `update` put in place of the condition of its type (or added),
/// sorted by type, so a writer that owns several conditions sets one without losing the
/// others.
pub fn set(conditions: &mut Vec<Value>, update: Value) {
    conditions.retain(|c| c.get("type") != update.get("type"));
    conditions.push(update);
    conditions.sort_by(|a, b| a["type"].as_str().cmp(&b["type"].as_str()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unchanged_condition_keeps_its_transition_time() {
        let next =
            json!({"conditions": [condition("Ready", true, "R", "", None), condition("A", false, "R", "", None)]});
        let current = json!({"conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
            {"type": "A", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]});
        let next = with_times(&next, Some(&current));
        assert_eq!(next["conditions"][0]["lastTransitionTime"], "2026-01-01T00:00:00Z");
        assert_ne!(next["conditions"][1]["lastTransitionTime"], "2026-01-01T00:00:00Z");
    }

    #[test]
    fn setting_one_condition_keeps_the_others() {
        let mut all = vec![
            condition("Ready", true, "R", "", None),
            condition("Compiled", false, "E", "x", None),
        ];
        set(&mut all, condition("Compiled", true, "Compiled", "", None));
        let types: Vec<_> = all.iter().map(|c| (c["type"].clone(), c["status"].clone())).collect();
        assert_eq!(
            types,
            [(json!("Compiled"), json!("True")), (json!("Ready"), json!("True"))]
        );
    }
}
