//! Whether an existing object is Stencil's to write, purely: the controller asks before it
//! applies over an object, and `stencil render`/`stencil test` ask about the observed
//! objects they are given. An object is ours when it carries this parent's
//! `stencil.dev/parent-uid` label and no other controller's ownerReference; anything
//! else is never written, pruned or deleted, unless the child says `adopt: IfUnowned`
//! and nobody controls the object.

use serde_json::Value;

use crate::definition::Adopt;
use crate::labels;
use crate::object_key::ObjectKey;
use crate::render::RenderOutput;

/// What to do with an existing object of a desired child's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OwnershipVerdict {
    /// There is none: create it.
    Absent,
    /// It is this parent's: bring it in line.
    Ours,
    /// Nobody controls it and the child may adopt it: take it over.
    Adopt,
    /// Someone else holds it: leave it alone and say who.
    Conflict(String),
}

/// Judges the live object (if any) that a desired child of the parent with `parent_uid`
/// would write for the definition named `definition`. Another decorator's child of the
/// same parent (two decorators of one object) is that decorator's. A composite parent has
/// one definition, so a child of its UID labelled with another definition's name is its
/// own, left by the definition under an earlier name: the apply relabels it.
pub fn judge(
    live: Option<&Value>,
    parent_uid: &str,
    definition: &str,
    decorator: bool,
    adopt: Adopt,
) -> OwnershipVerdict {
    let Some(live) = live else {
        return OwnershipVerdict::Absent;
    };
    let what = ObjectKey::of_value(live).map_or_else(|| "the object".to_string(), |k| k.to_string());
    let label = |key: &str| {
        live.pointer(&format!("/metadata/labels/{}", key.replace('/', "~1")))
            .and_then(Value::as_str)
    };
    let controller = live
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .and_then(|refs| refs.iter().find(|r| r.get("controller") == Some(&Value::Bool(true))));
    let controlled_by_other = controller.filter(|r| r.get("uid").and_then(Value::as_str) != Some(parent_uid));
    let other_definition = label(labels::DEFINITION).filter(|d| *d != crate::labels::label_value(definition));
    match (label(labels::PARENT_UID), controlled_by_other) {
        (Some(uid), _) if uid == parent_uid && decorator && other_definition.is_some() => {
            OwnershipVerdict::Conflict(format!(
                "{what} belongs to definition {} of the same parent; it keeps the object until it lets it go",
                other_definition.unwrap_or_default()
            ))
        }
        (Some(uid), None) if uid == parent_uid => OwnershipVerdict::Ours,
        (Some(uid), _) if uid != parent_uid => {
            let parent = match (label(labels::PARENT_NAMESPACE), label(labels::PARENT_NAME)) {
                (Some(ns), Some(name)) => format!("{ns}/{name}"),
                (None, Some(name)) => name.to_string(),
                _ => format!("uid {uid}"),
            };
            let definition = label(labels::DEFINITION).unwrap_or("another definition");
            OwnershipVerdict::Conflict(format!(
                "{what} belongs to parent {parent} of {definition}; it keeps the object until it lets it go"
            ))
        }
        (_, Some(owner)) => {
            let kind = owner.get("kind").and_then(Value::as_str).unwrap_or("?");
            let name = owner.get("name").and_then(Value::as_str).unwrap_or("?");
            OwnershipVerdict::Conflict(format!(
                "{what} exists and is controlled by {kind} {name}; Stencil leaves it alone"
            ))
        }
        _ if adopt == Adopt::IfUnowned => OwnershipVerdict::Adopt,
        _ => OwnershipVerdict::Conflict(format!(
            "{what} exists and was not created by Stencil ({}); set `adopt: IfUnowned` on the child to take it over",
            managers(live)
        )),
    }
}

/// Settles a render against `existing` objects that are not among the parent's observed
/// children (offline: the objects given to `stencil render` and `stencil test` without a
/// `stencil.dev/child` label): each desired object that one of them names is a conflict
/// (and the parent not Ready), or an adoption, as the controller would decide.
pub fn settle(out: &mut RenderOutput, existing: &[Value], parent_uid: &str, definition: &str, decorator: bool) {
    let mut conflicts = Vec::new();
    for child in &out.children {
        let Some(key) = ObjectKey::of_value(&child.object) else {
            continue;
        };
        let Some(live) = existing.iter().find(|o| ObjectKey::of_value(o).as_ref() == Some(&key)) else {
            continue;
        };
        match judge(Some(live), parent_uid, definition, decorator, child.adopt) {
            OwnershipVerdict::Conflict(message) => conflicts.push(message),
            OwnershipVerdict::Adopt => out.adoptions.push(key.to_string()),
            OwnershipVerdict::Absent | OwnershipVerdict::Ours => {}
        }
    }
    if !conflicts.is_empty() {
        out.status = crate::render::not_ready(&out.status, "Conflict", &conflicts.join("; "));
        out.conflicts = conflicts;
    }
}

/// Who wrote an object, from its managed fields.
pub fn managers(live: &Value) -> String {
    let mut names: Vec<&str> = live
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(|m| {
            m.iter()
                .filter_map(|e| e.get("manager").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    names.dedup();
    if names.is_empty() {
        "no field manager recorded".into()
    } else {
        format!("field managers: {}", names.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cm(labels: Value, owners: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "orders-config", "namespace": "shop",
            "labels": labels, "ownerReferences": owners,
            "managedFields": [{"manager": "kubectl-client-side-apply"}, {"manager": "helm"}]}})
    }

    #[test]
    fn a_missing_object_is_created() {
        assert_eq!(judge(None, "p", "shop", false, Adopt::Never), OwnershipVerdict::Absent);
    }

    #[test]
    fn an_object_with_this_parents_label_is_ours() {
        let live = cm(
            json!({labels::PARENT_UID: "p"}),
            json!([{"uid": "p", "controller": true, "kind": "Shop", "name": "s"}]),
        );
        assert_eq!(
            judge(Some(&live), "p", "shop", false, Adopt::Never),
            OwnershipVerdict::Ours
        );
    }

    #[test]
    fn a_hand_made_object_is_a_conflict_naming_its_managers_unless_adoptable() {
        let live = cm(json!({}), json!([]));
        let OwnershipVerdict::Conflict(message) = judge(Some(&live), "p", "shop", false, Adopt::Never) else {
            panic!()
        };
        assert!(message.contains("ConfigMap shop/orders-config"), "{message}");
        assert!(message.contains("kubectl-client-side-apply, helm"), "{message}");
        assert_eq!(
            judge(Some(&live), "p", "shop", false, Adopt::IfUnowned),
            OwnershipVerdict::Adopt
        );
    }

    #[test]
    fn an_object_another_controller_controls_is_never_adopted() {
        let live = cm(
            json!({}),
            json!([{"uid": "rs", "controller": true, "kind": "ReplicaSet", "name": "web-1"}]),
        );
        let OwnershipVerdict::Conflict(message) = judge(Some(&live), "p", "shop", false, Adopt::IfUnowned) else {
            panic!()
        };
        assert!(message.contains("controlled by ReplicaSet web-1"), "{message}");
    }

    #[test]
    fn another_parents_object_stays_with_it() {
        let live = cm(
            json!({labels::PARENT_UID: "q", labels::PARENT_NAME: "first", labels::PARENT_NAMESPACE: "shop", labels::DEFINITION: "shops"}),
            json!([{"uid": "q", "controller": true, "kind": "Shop", "name": "first"}]),
        );
        let OwnershipVerdict::Conflict(message) = judge(Some(&live), "p", "shop", false, Adopt::IfUnowned) else {
            panic!()
        };
        assert!(message.contains("parent shop/first of shops"), "{message}");
    }

    #[test]
    fn a_child_of_this_parent_left_by_a_renamed_definition_is_ours_but_another_decorators_is_not() {
        let live = cm(
            json!({labels::PARENT_UID: "p", labels::DEFINITION: "shops-old"}),
            json!([{"uid": "p", "controller": true, "kind": "Shop", "name": "s"}]),
        );
        assert_eq!(
            judge(Some(&live), "p", "shops", false, Adopt::Never),
            OwnershipVerdict::Ours
        );
        let OwnershipVerdict::Conflict(message) = judge(Some(&live), "p", "shops", true, Adopt::Never) else {
            panic!("two decorators of one object keep their own children")
        };
        assert!(message.contains("definition shops-old of the same parent"), "{message}");
    }

    #[test]
    fn our_label_on_an_object_another_controller_took_is_a_conflict() {
        let live = cm(
            json!({labels::PARENT_UID: "p"}),
            json!([{"uid": "x", "controller": true, "kind": "Other", "name": "o"}]),
        );
        assert!(matches!(
            judge(Some(&live), "p", "shop", false, Adopt::IfUnowned),
            OwnershipVerdict::Conflict(_)
        ));
    }
}
