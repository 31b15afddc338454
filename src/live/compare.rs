//! How `stencil diff` compares a live object with what would replace it: keys in order,
//! without what the server or Stencil's bookkeeping changes on every write, as YAML, and
//! a unified diff of the two.

use serde_json::Value;

use crate::labels;

/// `value` with every mapping's keys in order, so two objects that differ only in the
/// order the server or the renderer wrote their keys compare equal.
fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            Value::Object(keys.into_iter().map(|k| (k.clone(), sorted(&map[k]))).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// An object without what the server or Stencil's bookkeeping changes on every write,
/// as YAML, for a readable diff.
pub(super) fn comparable(obj: &Value) -> String {
    let mut obj = obj.clone();
    if let Some(map) = obj.as_object_mut() {
        map.remove("status");
    }
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        for k in [
            "managedFields",
            "resourceVersion",
            "generation",
            "uid",
            "creationTimestamp",
        ] {
            meta.remove(k);
        }
        if let Some(a) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
            a.remove(labels::APPLIED_HASH);
            if a.is_empty() {
                meta.remove("annotations");
            }
        }
    }
    crate::yaml::to_string(&sorted(&obj)).unwrap_or_default()
}

/// A status without transition times, as YAML.
pub(super) fn comparable_status(status: Option<&Value>) -> String {
    let mut status = status.cloned().unwrap_or(Value::Null);
    if let Some(conditions) = status.get_mut("conditions").and_then(Value::as_array_mut) {
        for c in conditions {
            if let Some(c) = c.as_object_mut() {
                c.remove("lastTransitionTime");
            }
        }
    }
    crate::yaml::to_string(&sorted(&status)).unwrap_or_default()
}

/// A unified diff from `live` to `new`, or `None` when they are the same.
pub(super) fn unified(live: &str, new: &str) -> Option<String> {
    (live != new).then(|| {
        similar::TextDiff::from_lines(live, new)
            .unified_diff()
            .context_radius(3)
            .header("live", "new")
            .to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bookkeeping_fields_do_not_count_as_changes() {
        let live = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "resourceVersion": "1", "uid": "u", "annotations": {labels::APPLIED_HASH: "old"}},
            "data": {"k": "v"}});
        let mut after = live.clone();
        after["metadata"]["resourceVersion"] = "2".into();
        after["metadata"]["annotations"][labels::APPLIED_HASH] = "new".into();
        assert_eq!(unified(&comparable(&live), &comparable(&after)), None);
        after["data"]["k"] = "w".into();
        let diff = unified(&comparable(&live), &comparable(&after)).unwrap();
        assert!(diff.contains("-  k: v") && diff.contains("+  k: w"), "{diff}");
    }
}
