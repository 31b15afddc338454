//! Which objects a customize hook's rule relates to a parent, purely, as metacontroller
//! selects them: by labels, by namespace and labels, by a namespace selector, or by
//! namespace and names, where a v1 customize hook of a namespaced parent sees only its
//! own namespace and a v2 one sees every namespace and cluster-scoped objects. The same
//! test picks the objects a sync is sent and the parents a related object's change wakes.

use std::collections::BTreeMap;

use serde_json::Value;

use super::api::HookVersion;
use super::hook::RelatedRule;
use crate::selector::{Matcher, SelectorError};

/// A rule that selects nothing Stencil can compute.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RelatedError {
    /// The rule combines fields that exclude each other, or asks what its version forbids.
    #[error("related rule for {resource}: {message}")]
    Rule {
        /// The rule's resource.
        resource: String,
        /// What is wrong.
        message: String,
    },
    /// A selector does not parse.
    #[error("related rule for {resource}: {source}")]
    Selector {
        /// The rule's resource.
        resource: String,
        /// Why the selector does not parse.
        #[source]
        source: SelectorError,
    },
}

/// Where an object and its parent stand.
pub struct Scope<'a> {
    /// The customize hook's version.
    pub version: HookVersion,
    /// The parent's namespace; `None` for a cluster-scoped parent.
    pub parent_namespace: Option<&'a str>,
    /// Whether the rule's kind is namespaced.
    pub related_namespaced: bool,
}

/// Whether `rule` relates `object` to the parent; `namespace_labels` gives the labels of
/// a namespace (for a namespace selector).
///
/// # Errors
///
/// The rule combines `names` with a selector, or `namespace` with `namespaceSelector`; a
/// v1 hook of a namespaced parent names another namespace or a namespace selector; a
/// namespace selector on a cluster-scoped kind; a selector that does not parse.
pub fn selects(
    rule: &RelatedRule,
    scope: &Scope<'_>,
    object: &Value,
    namespace_labels: impl Fn(&str) -> Option<BTreeMap<String, String>>,
) -> Result<bool, RelatedError> {
    let fail = |message: &str| RelatedError::Rule {
        resource: rule.resource.clone(),
        message: message.to_string(),
    };
    let namespace = rule.namespace.as_deref().filter(|ns| !ns.is_empty());
    if !rule.names.is_empty() && (rule.label_selector.is_some() || rule.namespace_selector.is_some()) {
        return Err(fail("names cannot be combined with labelSelector or namespaceSelector"));
    }
    if namespace.is_some() && rule.namespace_selector.is_some() {
        return Err(fail("namespace cannot be combined with namespaceSelector"));
    }
    let own_namespace_only = scope.version == HookVersion::V1 && scope.parent_namespace.is_some();
    let object_namespace = object.pointer("/metadata/namespace").and_then(Value::as_str);
    if own_namespace_only && namespace.is_some_and(|ns| Some(ns) != scope.parent_namespace) {
        return Err(fail(
            "a v1 hook of a namespaced parent relates objects of its own namespace only",
        ));
    }
    if own_namespace_only && scope.related_namespaced && object_namespace != scope.parent_namespace {
        return Ok(false);
    }
    if scope.related_namespaced && namespace.is_some_and(|ns| Some(ns) != object_namespace) {
        return Ok(false);
    }
    if let Some(selector) = &rule.namespace_selector {
        if own_namespace_only {
            return Err(fail("a v1 hook of a namespaced parent cannot use namespaceSelector"));
        }
        if !scope.related_namespaced {
            return Err(fail("namespaceSelector selects namespaced kinds only"));
        }
        let labels = object_namespace.and_then(&namespace_labels);
        if !matcher(rule, selector)?.matches(labels.as_ref()) {
            return Ok(false);
        }
    }
    if !rule.names.is_empty() {
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        return Ok(rule.names.iter().any(|n| n == name));
    }
    match &rule.label_selector {
        Some(selector) => {
            let labels: Option<BTreeMap<String, String>> = object
                .pointer("/metadata/labels")
                .and_then(|l| serde_json::from_value(l.clone()).ok());
            Ok(matcher(rule, selector)?.matches(labels.as_ref()))
        }
        None => Ok(true),
    }
}

fn matcher(
    rule: &RelatedRule,
    selector: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
) -> Result<Matcher, RelatedError> {
    Matcher::new(selector).map_err(|source| RelatedError::Selector {
        resource: rule.resource.clone(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rule(rule: Value) -> RelatedRule {
        serde_json::from_value(rule).unwrap()
    }

    fn object(ns: Option<&str>, name: &str, labels: Value) -> Value {
        let mut o = json!({"metadata": {"name": name, "labels": labels}});
        if let Some(ns) = ns {
            o["metadata"]["namespace"] = ns.into();
        }
        o
    }

    fn scope(version: HookVersion, parent_namespace: Option<&str>) -> Scope<'_> {
        Scope {
            version,
            parent_namespace,
            related_namespaced: true,
        }
    }

    fn no_namespaces(_: &str) -> Option<BTreeMap<String, String>> {
        None
    }

    #[test]
    fn a_v1_hook_of_a_namespaced_parent_sees_its_own_namespace_and_a_v2_one_every_namespace() {
        let by_label = rule(json!({"apiVersion": "v1", "resource": "configmaps",
            "labelSelector": {"matchLabels": {"app": "web"}}}));
        let here = object(Some("shop"), "a", json!({"app": "web"}));
        let there = object(Some("global"), "b", json!({"app": "web"}));
        let other_app = object(Some("shop"), "c", json!({"app": "db"}));
        let v1 = scope(HookVersion::V1, Some("shop"));
        let v2 = scope(HookVersion::V2, Some("shop"));
        assert_eq!(selects(&by_label, &v1, &here, no_namespaces), Ok(true));
        assert_eq!(selects(&by_label, &v1, &there, no_namespaces), Ok(false));
        assert_eq!(selects(&by_label, &v2, &there, no_namespaces), Ok(true));
        assert_eq!(selects(&by_label, &v2, &other_app, no_namespaces), Ok(false));
        let elsewhere = rule(json!({"apiVersion": "v1", "resource": "configmaps", "namespace": "global"}));
        assert!(selects(&elsewhere, &v1, &there, no_namespaces).is_err());
        assert_eq!(selects(&elsewhere, &v2, &there, no_namespaces), Ok(true));
        assert_eq!(selects(&elsewhere, &v2, &here, no_namespaces), Ok(false));
    }

    #[test]
    fn names_pick_objects_within_the_namespace() {
        let named = rule(json!({"apiVersion": "v1", "resource": "configmaps",
            "namespace": "global", "names": ["settings"]}));
        let v2 = scope(HookVersion::V2, None);
        assert_eq!(
            selects(
                &named,
                &v2,
                &object(Some("global"), "settings", json!({})),
                no_namespaces
            ),
            Ok(true)
        );
        assert_eq!(
            selects(&named, &v2, &object(Some("global"), "other", json!({})), no_namespaces),
            Ok(false)
        );
        assert_eq!(
            selects(&named, &v2, &object(Some("shop"), "settings", json!({})), no_namespaces),
            Ok(false)
        );
    }

    #[test]
    fn a_namespace_selector_matches_the_objects_namespace_labels() {
        let by_namespace = rule(json!({"apiVersion": "v1", "resource": "secrets",
            "namespaceSelector": {"matchLabels": {"team": "a"}}}));
        let labels = |ns: &str| (ns == "shop").then(|| BTreeMap::from([("team".to_string(), "a".to_string())]));
        let v2 = scope(HookVersion::V2, None);
        assert_eq!(
            selects(&by_namespace, &v2, &object(Some("shop"), "s", json!({})), labels),
            Ok(true)
        );
        assert_eq!(
            selects(&by_namespace, &v2, &object(Some("other"), "s", json!({})), labels),
            Ok(false)
        );
        let v1 = scope(HookVersion::V1, Some("shop"));
        assert!(selects(&by_namespace, &v1, &object(Some("shop"), "s", json!({})), labels).is_err());
    }

    #[test]
    fn rules_that_combine_what_excludes_each_other_are_errors() {
        let v2 = scope(HookVersion::V2, None);
        let o = object(Some("shop"), "a", json!({}));
        for bad in [
            json!({"apiVersion": "v1", "resource": "configmaps", "names": ["a"], "labelSelector": {}}),
            json!({"apiVersion": "v1", "resource": "configmaps", "namespace": "a", "namespaceSelector": {}}),
        ] {
            assert!(selects(&rule(bad), &v2, &o, no_namespaces).is_err());
        }
        let cluster = Scope {
            related_namespaced: false,
            ..scope(HookVersion::V2, None)
        };
        let ns_selector = rule(json!({"apiVersion": "v1", "resource": "nodes", "namespaceSelector": {}}));
        assert!(selects(&ns_selector, &cluster, &object(None, "n", json!({})), no_namespaces).is_err());
    }

    #[test]
    fn a_rule_without_selectors_relates_every_object_of_its_kind_in_reach() {
        let all = rule(json!({"apiVersion": "v1", "resource": "namespaces"}));
        let cluster = Scope {
            related_namespaced: false,
            ..scope(HookVersion::V1, Some("shop"))
        };
        assert_eq!(
            selects(&all, &cluster, &object(None, "any", json!({})), no_namespaces),
            Ok(true)
        );
    }
}
