//! Whether a live object already holds what Stencil would apply: the test that lets the
//! steady state make zero writes.

use serde_json::Value;
use sha2::{Digest as _, Sha256};

use crate::labels;

/// An impossible resourceVersion: server-side apply with it creates an absent object and
/// refuses (409) to write any existing one, so an object made between the read and the
/// create is never written.
pub const CREATE_ONLY: &str = "9223372036854775807";

/// A stable hash of a desired object, stored on the child as an annotation.
pub fn desired_hash(desired: &Value) -> String {
    let text = serde_json::to_string(desired).unwrap_or_default();
    Sha256::digest(text.as_bytes())
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `desired` with the applied-hash annotation set.
pub fn with_hash(mut desired: Value) -> (Value, String) {
    let hash = desired_hash(&desired);
    if let Some(meta) = desired.get_mut("metadata").and_then(Value::as_object_mut) {
        let annotations = meta
            .entry("annotations")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Some(a) = annotations.as_object_mut() {
            a.insert(labels::APPLIED_HASH.into(), hash.clone().into());
        }
    }
    (desired, hash)
}

/// The hash annotation of a live object.
pub fn live_hash(live: &Value) -> Option<&str> {
    live.pointer("/metadata/annotations")?
        .get(labels::APPLIED_HASH)?
        .as_str()
}

/// True when every field of `desired` is present with the same value in `live`. Lists
/// must have the same length and match element by element; fields the server adds are
/// ignored. A Secret's write-only `stringData` is not compared (the hash covers it).
pub fn live_contains(live: &Value, desired: &Value) -> bool {
    contains(live, desired, 0, Field::Plain)
}

/// Maps whose values are resource quantities in the built-in kinds (container
/// `requests`/`limits`, ResourceQuota `hard`, LimitRange `max`/`default`/...).
const QUANTITY_MAPS: &[&str] = &[
    "requests",
    "limits",
    "hard",
    "capacity",
    "allocatable",
    "overhead",
    "default",
    "defaultRequest",
    "max",
    "min",
    "maxLimitRequestRatio",
];

/// Fields that are a quantity themselves (`emptyDir.sizeLimit`).
const QUANTITY_FIELDS: &[&str] = &["sizeLimit"];

/// What a value is, as far as the comparison cares.
#[derive(Clone, Copy, PartialEq)]
enum Field {
    Plain,
    /// A map of quantities.
    Quantities,
    /// One quantity, which the API server stores in canonical form.
    Quantity,
}

fn contains(live: &Value, desired: &Value, depth: usize, field: Field) -> bool {
    match (live, desired) {
        // A null states no opinion (typed objects serialize absent optional fields so).
        (_, Value::Null) => true,
        (Value::Object(l), Value::Object(d)) => d.iter().all(|(k, dv)| {
            if depth == 0 && k == "stringData" {
                return true;
            }
            let inner = if field == Field::Quantities || QUANTITY_FIELDS.contains(&k.as_str()) {
                Field::Quantity
            } else if QUANTITY_MAPS.contains(&k.as_str()) {
                Field::Quantities
            } else {
                Field::Plain
            };
            l.get(k).map_or(dv.is_null(), |lv| contains(lv, dv, depth + 1, inner))
        }),
        (Value::Array(l), Value::Array(d)) => {
            l.len() == d.len() && l.iter().zip(d).all(|(a, b)| contains(a, b, depth + 1, Field::Plain))
        }
        (Value::Number(l), Value::Number(d)) => l.as_f64() == d.as_f64(),
        (Value::String(l), d) if field == Field::Quantity => d.as_str() == Some(l) || crate::quantity::same(l, d),
        _ => live == desired,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_the_server_adds_do_not_count_but_changed_ones_do() {
        let desired = json!({"spec": {"ports": [{"port": 80}], "selector": {"app": "a"}}});
        let live = json!({"spec": {"ports": [{"port": 80, "protocol": "TCP"}], "selector": {"app": "a"}, "clusterIP": "10.0.0.1"}});
        assert!(live_contains(&live, &desired));
        let edited = json!({"spec": {"ports": [{"port": 81, "protocol": "TCP"}], "selector": {"app": "a"}}});
        assert!(!live_contains(&edited, &desired));
        let extra_port = json!({"spec": {"ports": [{"port": 80}, {"port": 81}], "selector": {"app": "a"}}});
        assert!(!live_contains(&extra_port, &desired));
    }

    #[test]
    fn a_quantity_the_server_canonicalised_is_the_same_but_other_strings_are_compared_as_written() {
        let desired = json!({"spec": {"containers": [{"resources": {"limits": {"cpu": "1000m", "memory": "1024Mi"},
            "requests": {"cpu": 0.5}}}], "volumes": [{"emptyDir": {"sizeLimit": "1024Ki"}}]}});
        let live = json!({"spec": {"containers": [{"resources": {"limits": {"cpu": "1", "memory": "1Gi"},
            "requests": {"cpu": "500m"}}}], "volumes": [{"emptyDir": {"sizeLimit": "1Mi"}}]}});
        assert!(live_contains(&live, &desired));
        let changed = json!({"spec": {"containers": [{"resources": {"limits": {"cpu": "2", "memory": "1Gi"},
            "requests": {"cpu": "500m"}}}], "volumes": [{"emptyDir": {"sizeLimit": "1Mi"}}]}});
        assert!(!live_contains(&changed, &desired), "a different quantity is drift");
        assert!(
            !live_contains(
                &json!({"spec": {"version": "16.40"}}),
                &json!({"spec": {"version": "16.4"}})
            ),
            "a string outside the quantity fields is compared as written"
        );
    }

    #[test]
    fn a_null_in_desired_states_no_opinion() {
        assert!(live_contains(
            &json!({"status": {"x": 1}}),
            &json!({"status": null, "a": null})
        ));
    }

    #[test]
    fn string_data_is_write_only() {
        let desired = json!({"kind": "Secret", "stringData": {"p": "x"}});
        assert!(live_contains(
            &json!({"kind": "Secret", "data": {"p": "eA=="}}),
            &desired
        ));
    }

    #[test]
    fn the_hash_is_stable_and_lands_in_an_annotation() {
        let (a, h1) = with_hash(json!({"metadata": {"name": "x"}}));
        let (_, h2) = with_hash(json!({"metadata": {"name": "x"}}));
        assert_eq!(h1, h2);
        assert_eq!(live_hash(&a), Some(h1.as_str()));
    }
}
