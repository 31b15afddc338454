//! What a DecoratorController does with one object, purely: whether a resource rule's
//! label and annotation selectors match it, which objects are its attachments (its
//! controller reference and the controller's annotation on them), and the metadata patch
//! that gives it the labels and annotations the hook answered (a `null` removes one),
//! none when it holds them already.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::DECORATOR_CONTROLLER;
use super::api::DecoratorResourceRule;
use super::claim::controller_uid;
use super::hook::SyncResponse;
use crate::selector::{Matcher, SelectorError};

/// Whether `object` matches both of `rule`'s selectors (an absent one matches all).
///
/// # Errors
///
/// A selector does not parse.
pub fn matches(rule: &DecoratorResourceRule, object: &Value) -> Result<bool, SelectorError> {
    let map = |key: &str| -> Option<BTreeMap<String, String>> {
        serde_json::from_value(object.pointer(&format!("/metadata/{key}"))?.clone()).ok()
    };
    if let Some(selector) = &rule.label_selector
        && !Matcher::new(selector)?.matches(map("labels").as_ref())
    {
        return Ok(false);
    }
    if let Some(selector) = &rule.annotation_selector
        && !Matcher::new(&selector.as_label_selector())?.matches(map("annotations").as_ref())
    {
        return Ok(false);
    }
    Ok(true)
}

/// The attachments of `target` by DecoratorController `controller` among `candidates`:
/// controlled by the target and annotated with the controller's name.
pub fn attachments_of(controller: &str, target: &Value, candidates: &[Value]) -> Vec<Value> {
    let uid = target.pointer("/metadata/uid").and_then(Value::as_str);
    candidates
        .iter()
        .filter(|c| controller_uid(c).is_some() && controller_uid(c) == uid)
        .filter(|c| {
            c.pointer("/metadata/annotations")
                .and_then(|a| a.get(DECORATOR_CONTROLLER))
                .and_then(Value::as_str)
                == Some(controller)
        })
        .cloned()
        .collect()
}

/// The merge patch that gives `target` the answer's labels and annotations, or `None`
/// when it holds them already.
pub fn metadata_patch(target: &Value, answer: &SyncResponse) -> Option<Value> {
    let mut metadata = Map::new();
    for (key, wanted) in [("labels", &answer.labels), ("annotations", &answer.annotations)] {
        let current = target.pointer(&format!("/metadata/{key}")).and_then(Value::as_object);
        let changes: Map<String, Value> = wanted
            .iter()
            .filter(|(k, v)| current.and_then(|c| c.get(*k)).and_then(Value::as_str) != v.as_deref())
            .map(|(k, v)| (k.clone(), v.clone().map_or(Value::Null, Value::from)))
            .collect();
        if !changes.is_empty() {
            metadata.insert(key.into(), Value::Object(changes));
        }
    }
    (!metadata.is_empty()).then(|| json!({"metadata": metadata}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(rule: Value) -> DecoratorResourceRule {
        serde_json::from_value(rule).unwrap()
    }

    #[test]
    fn an_object_must_match_both_selectors() {
        let r = rule(json!({"apiVersion": "apps/v1", "resource": "statefulsets",
            "labelSelector": {"matchLabels": {"app": "db"}},
            "annotationSelector": {"matchExpressions": [{"key": "ports", "operator": "Exists"}]}}));
        let both = json!({"metadata": {"labels": {"app": "db"}, "annotations": {"ports": "80"}}});
        let labels_only = json!({"metadata": {"labels": {"app": "db"}}});
        assert!(matches(&r, &both).unwrap());
        assert!(!matches(&r, &labels_only).unwrap());
        let any = rule(json!({"apiVersion": "v1", "resource": "pods"}));
        assert!(matches(&any, &json!({"metadata": {}})).unwrap());
    }

    #[test]
    fn attachments_are_controlled_by_the_target_and_carry_the_controllers_name() {
        let target = json!({"metadata": {"uid": "T"}});
        let attached = |uid: &str, name: &str| {
            json!({"metadata": {"ownerReferences": [{"uid": uid, "controller": true}],
                "annotations": {(DECORATOR_CONTROLLER): name}}})
        };
        let mine = attached("T", "svc");
        let others = attached("T", "other");
        let elsewhere = attached("U", "svc");
        assert_eq!(
            attachments_of("svc", &target, &[mine.clone(), others, elsewhere]),
            [mine]
        );
    }

    #[test]
    fn the_metadata_patch_sets_and_removes_only_what_differs() {
        let target = json!({"metadata": {"labels": {"a": "1", "b": "2"}}});
        let answer = SyncResponse {
            labels: BTreeMap::from([
                ("a".into(), Some("1".into())),
                ("b".into(), None),
                ("c".into(), Some("3".into())),
            ]),
            ..SyncResponse::default()
        };
        assert_eq!(
            metadata_patch(&target, &answer),
            Some(json!({"metadata": {"labels": {"b": null, "c": "3"}}}))
        );
        let settled = json!({"metadata": {"labels": {"a": "1", "c": "3"}}});
        assert_eq!(metadata_patch(&settled, &answer), None);
    }
}
