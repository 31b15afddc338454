//! Which objects are a CompositeController parent's children, by the ControllerRef rules
//! metacontroller follows: an object the parent controls and whose labels match its
//! selector is its child; one it controls whose labels stopped matching is released; an
//! object nobody controls whose labels match is adopted, unless either is being deleted.
//! The selector is the parent's `spec.selector`, or with `generateSelector` a
//! `controller-uid` label that every desired child gets.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::Value;

use crate::selector::Matcher;

/// The label that ties a child to its parent under `generateSelector`.
pub const CONTROLLER_UID: &str = "controller-uid";

/// Why a parent's children cannot be told.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ClaimError {
    /// The parent has no usable `spec.selector`.
    #[error("spec.selector {0}")]
    Selector(String),
    /// A desired child would not be the parent's child once created.
    #[error("the labels of desired child {0} do not match the parent's selector, so it would be orphaned at once")]
    Unmatched(String),
}

/// The parent's selector: its `spec.selector`, or with `generate` its `controller-uid`.
///
/// # Errors
///
/// Without `generate`, the parent has no `spec.selector`, an empty one (it would select
/// everything), or one that does not parse.
pub fn parent_selector(parent: &Value, generate: bool) -> Result<Matcher, ClaimError> {
    let selector = if generate {
        LabelSelector {
            match_labels: Some(BTreeMap::from([(CONTROLLER_UID.to_string(), uid(parent).to_string())])),
            match_expressions: None,
        }
    } else {
        let written = parent
            .pointer("/spec/selector")
            .ok_or_else(|| ClaimError::Selector("is missing: a parent names its children's labels there".into()))?;
        let selector: LabelSelector = serde_json::from_value(written.clone())
            .map_err(|e| ClaimError::Selector(format!("is not a label selector: {e}")))?;
        let empty = |v: &Option<_>| v.as_ref().is_none_or(|m: &BTreeMap<String, String>| m.is_empty());
        if empty(&selector.match_labels) && selector.match_expressions.as_ref().is_none_or(Vec::is_empty) {
            return Err(ClaimError::Selector(
                "must have matchLabels, matchExpressions or both: an empty one would select every object".into(),
            ));
        }
        selector
    };
    Matcher::new(&selector).map_err(|e| ClaimError::Selector(e.to_string()))
}

/// Gives each desired child the `controller-uid` label under `generate`, and checks that
/// every one matches `selector`.
///
/// # Errors
///
/// A desired child's labels do not match: it would be released as soon as it exists.
pub fn label_desired(
    parent: &Value,
    selector: &Matcher,
    generate: bool,
    desired: &mut [Value],
) -> Result<(), ClaimError> {
    for child in desired.iter_mut() {
        if generate && let Some(meta) = child["metadata"].as_object_mut() {
            let labels = meta.entry("labels").or_insert(Value::Null);
            if !labels.is_object() {
                *labels = Value::Object(Default::default());
            }
            if let Value::Object(labels) = labels {
                labels.entry(CONTROLLER_UID).or_insert_with(|| uid(parent).into());
            }
        }
        if !selector.matches(labels(child).as_ref()) {
            return Err(ClaimError::Unmatched(describe(child)));
        }
    }
    Ok(())
}

/// The candidates sorted by what the parent does with them.
#[derive(Debug, Default, PartialEq)]
pub struct Claims {
    /// Its children: controlled by it, labels matching.
    pub owned: Vec<Value>,
    /// Controlled by nobody, labels matching: to be given the parent's controller
    /// reference, then children.
    pub adopt: Vec<Value>,
    /// Controlled by it, labels no longer matching: to lose its reference.
    pub release: Vec<Value>,
}

/// Sorts `candidates` (objects of the child kinds where the parent's children live) for
/// `parent` by `selector`. A parent being deleted adopts nothing.
pub fn claim(parent: &Value, selector: &Matcher, candidates: &[Value]) -> Claims {
    let parent_uid = uid(parent);
    let parent_leaving = parent.pointer("/metadata/deletionTimestamp").is_some();
    let mut claims = Claims::default();
    for object in candidates {
        let matches = selector.matches(labels(object).as_ref());
        match controller_uid(object) {
            Some(owner) if owner == parent_uid && matches => claims.owned.push(object.clone()),
            Some(owner) if owner == parent_uid => claims.release.push(object.clone()),
            Some(_) => {}
            None => {
                let leaving = object.pointer("/metadata/deletionTimestamp").is_some();
                if matches && !leaving && !parent_leaving {
                    claims.adopt.push(object.clone());
                }
            }
        }
    }
    claims
}

/// The uid of the object's controller, from its controller ownerReference.
pub fn controller_uid(object: &Value) -> Option<&str> {
    object
        .pointer("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
        .and_then(|r| r.get("uid"))
        .and_then(Value::as_str)
}

fn uid(object: &Value) -> &str {
    object
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn labels(object: &Value) -> Option<BTreeMap<String, String>> {
    serde_json::from_value(object.pointer("/metadata/labels")?.clone()).ok()
}

fn describe(object: &Value) -> String {
    let field = |p: &str| object.pointer(p).and_then(Value::as_str).unwrap_or_default();
    match field("/metadata/namespace") {
        "" => format!("{} {}", field("/kind"), field("/metadata/name")),
        ns => format!("{} {ns}/{}", field("/kind"), field("/metadata/name")),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parent(selector: Value) -> Value {
        json!({"metadata": {"name": "p", "namespace": "ns", "uid": "P"}, "spec": {"selector": selector}})
    }

    fn pod(name: &str, app: &str, controller: Option<&str>) -> Value {
        let mut o = json!({"kind": "Pod", "metadata": {"name": name, "namespace": "ns", "labels": {"app": app}}});
        if let Some(uid) = controller {
            o["metadata"]["ownerReferences"] = json!([{"uid": uid, "controller": true}]);
        }
        o
    }

    #[test]
    fn children_are_claimed_adopted_and_released_by_the_controller_ref_rules() {
        let p = parent(json!({"matchLabels": {"app": "web"}}));
        let selector = parent_selector(&p, false).unwrap();
        let mine = pod("mine", "web", Some("P"));
        let orphan = pod("orphan", "web", None);
        let strayed = pod("strayed", "db", Some("P"));
        let theirs = pod("theirs", "web", Some("Q"));
        let unrelated = pod("unrelated", "db", None);
        let claims = claim(
            &p,
            &selector,
            &[mine.clone(), orphan.clone(), strayed.clone(), theirs, unrelated],
        );
        assert_eq!(
            claims,
            Claims {
                owned: vec![mine],
                adopt: vec![orphan.clone()],
                release: vec![strayed]
            }
        );
        let mut leaving = p.clone();
        leaving["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z".into();
        assert!(claim(&leaving, &selector, &[orphan]).adopt.is_empty());
    }

    #[test]
    fn a_parent_without_a_selector_or_with_an_empty_one_claims_nothing() {
        let none = json!({"metadata": {"uid": "P"}, "spec": {}});
        assert!(
            parent_selector(&none, false)
                .unwrap_err()
                .to_string()
                .contains("missing")
        );
        let empty = parent(json!({}));
        assert!(
            parent_selector(&empty, false)
                .unwrap_err()
                .to_string()
                .contains("every object")
        );
        assert!(parent_selector(&none, true).is_ok(), "a generated selector needs none");
    }

    #[test]
    fn a_generated_selector_labels_every_desired_child_with_the_parents_uid() {
        let p = json!({"metadata": {"name": "p", "uid": "P"}});
        let selector = parent_selector(&p, true).unwrap();
        let mut desired = vec![
            json!({"kind": "Job", "metadata": {"name": "j"}}),
            json!({"kind": "Job", "metadata": {"name": "k", "labels": null}}),
        ];
        label_desired(&p, &selector, true, &mut desired).unwrap();
        assert_eq!(desired[0]["metadata"]["labels"][CONTROLLER_UID], "P");
        assert_eq!(desired[1]["metadata"]["labels"][CONTROLLER_UID], "P");
    }

    #[test]
    fn a_desired_child_that_would_be_orphaned_at_once_is_refused() {
        let p = parent(json!({"matchLabels": {"app": "web"}}));
        let selector = parent_selector(&p, false).unwrap();
        let mut desired = vec![pod("x", "db", None)];
        let err = label_desired(&p, &selector, false, &mut desired).unwrap_err();
        assert_eq!(err, ClaimError::Unmatched("Pod ns/x".into()));
    }
}
