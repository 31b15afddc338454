//! Changes the API server cannot make in place: reading its refusal of an immutable field,
//! and the kinds whose objects hold data that recreating them would destroy. The
//! controller and `stencil diff` decide from here what an edit of the parent may do to a
//! live child; nothing here talks to a cluster.

use kube::core::Status;

use crate::gvk::Gvk;

/// Kinds whose deletion destroys data that no template can render back: a claim's volume
/// (with a `Delete` reclaim policy), a volume, and a namespace with everything in it.
/// `updatePolicy: Recreate` on a child of these kinds needs `acknowledgeDataLoss: true`.
pub const DATA_KINDS: &[(&str, &str)] = &[
    ("", "PersistentVolumeClaim"),
    ("", "PersistentVolume"),
    ("", "Namespace"),
];

/// True when deleting an object of `gvk` destroys data (see [`DATA_KINDS`]).
pub fn holds_data(gvk: &Gvk) -> bool {
    DATA_KINDS
        .iter()
        .any(|(group, kind)| gvk.group == *group && gvk.kind == *kind)
}

/// When the API server refused a write because it would change a field that cannot
/// change after creation, the fields it names and why, in one line; `None` for any other
/// answer. It reads the `Invalid` status the server sends: a 422 whose message or causes
/// say the field is immutable (a Job's template, an immutable Secret) or that updates to
/// it are forbidden (a StatefulSet's selector, a claim's storage class).
pub fn refusal(status: &Status) -> Option<String> {
    if status.code != 422 {
        return None;
    }
    let says = |text: &str| {
        let text = text.to_ascii_lowercase();
        text.contains("immutable") || (text.contains("updates to") && text.contains("forbidden"))
    };
    let causes: Vec<String> = status
        .details
        .iter()
        .flat_map(|d| &d.causes)
        .filter(|c| says(&c.message))
        .map(|c| {
            if c.field.is_empty() {
                c.message.clone()
            } else {
                format!("{}: {}", c.field, c.message)
            }
        })
        .collect();
    if !causes.is_empty() {
        return Some(causes.join("; "));
    }
    says(&status.message).then(|| status.message.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn invalid(message: &str, causes: &[(&str, &str)]) -> Status {
        let causes: Vec<_> = causes
            .iter()
            .map(|(field, message)| json!({"reason": "FieldValueForbidden", "field": field, "message": message}))
            .collect();
        serde_json::from_value(json!({"status": "Failure", "reason": "Invalid", "code": 422,
            "message": message, "details": {"causes": causes}}))
        .expect("a Status")
    }

    #[test]
    fn a_claims_spec_refusal_names_the_field() {
        let status = invalid(
            "PersistentVolumeClaim \"data\" is invalid: spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims",
            &[(
                "spec",
                "Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims",
            )],
        );
        let said = refusal(&status).expect("an immutable refusal");
        assert!(said.starts_with("spec: Forbidden: spec is immutable"), "{said}");
    }

    #[test]
    fn a_statefulset_refusal_says_updates_are_forbidden() {
        let status = invalid(
            "StatefulSet.apps \"web\" is invalid: spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
            &[],
        );
        assert!(refusal(&status).is_some_and(|s| s.contains("updates to statefulset spec")));
    }

    #[test]
    fn a_value_the_schema_refuses_is_not_an_immutable_field() {
        let status = invalid(
            "ConfigMap \"c\" is invalid: data[bad key]: Invalid value: \"bad key\": a valid config key must consist of alphanumeric characters",
            &[("data[bad key]", "Invalid value: \"bad key\"")],
        );
        assert_eq!(refusal(&status), None);
        let conflict: Status = serde_json::from_value(
            json!({"status": "Failure", "reason": "Conflict", "code": 409, "message": "immutable"}),
        )
        .unwrap();
        assert_eq!(refusal(&conflict), None, "only a 422 is a refusal");
    }

    #[test]
    fn claims_volumes_and_namespaces_hold_data() {
        assert!(holds_data(&Gvk::parse("v1", "PersistentVolumeClaim").unwrap()));
        assert!(holds_data(&Gvk::parse("v1", "Namespace").unwrap()));
        assert!(!holds_data(&Gvk::parse("v1", "ConfigMap").unwrap()));
        assert!(!holds_data(
            &Gvk::parse("example.org/v1", "PersistentVolumeClaim").unwrap()
        ));
    }
}
