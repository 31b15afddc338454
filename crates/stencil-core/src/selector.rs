//! Label selectors as definitions write them (`decorate.selector`,
//! `decorate.annotationSelector`, `lookups[].selector`), purely: their templated values,
//! parsing into a matcher, matching a map of labels or annotations, and the query string
//! the API server takes.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use kube::core::{Selector, SelectorExt as _};

/// A selector that Kubernetes would refuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SelectorError(String);

/// Every value of a selector, with its path inside the selector (`matchLabels.team`,
/// `matchExpressions[0].values[1]`), in a stable order.
pub fn values(sel: &LabelSelector) -> Vec<(String, &str)> {
    let mut out = Vec::new();
    for (k, v) in sel.match_labels.iter().flatten() {
        out.push((format!("matchLabels.{k}"), v.as_str()));
    }
    for (i, e) in sel.match_expressions.iter().flatten().enumerate() {
        for (j, v) in e.values.iter().flatten().enumerate() {
            out.push((format!("matchExpressions[{i}].values[{j}]"), v.as_str()));
        }
    }
    out
}

/// Whether a value is a template rather than literal text.
pub fn is_template(value: &str) -> bool {
    value.contains("{{") || value.contains("{%")
}

/// The selector with each value at a path in `rendered` replaced by its rendering.
pub fn with_values(sel: &LabelSelector, rendered: &BTreeMap<String, String>) -> LabelSelector {
    let mut out = sel.clone();
    for (k, v) in out.match_labels.iter_mut().flatten() {
        if let Some(r) = rendered.get(&format!("matchLabels.{k}")) {
            *v = r.clone();
        }
    }
    for (i, e) in out.match_expressions.iter_mut().flatten().enumerate() {
        for (j, v) in e.values.iter_mut().flatten().enumerate() {
            if let Some(r) = rendered.get(&format!("matchExpressions[{i}].values[{j}]")) {
                *v = r.clone();
            }
        }
    }
    out
}

/// A parsed selector: what it matches, and its query form.
#[derive(Debug, Clone)]
pub struct Matcher {
    selector: Selector,
    query: String,
}

impl PartialEq for Matcher {
    fn eq(&self, other: &Self) -> bool {
        self.query == other.query
    }
}

impl Eq for Matcher {}

impl std::hash::Hash for Matcher {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.query.hash(state);
    }
}

impl Matcher {
    /// Parses a selector; an operator Kubernetes does not know, or values where an
    /// operator takes none, is an error naming the expression.
    ///
    /// # Errors
    ///
    /// An expression with an unknown operator, or with values where its operator takes none.
    pub fn new(sel: &LabelSelector) -> Result<Matcher, SelectorError> {
        for (i, e) in sel.match_expressions.iter().flatten().enumerate() {
            let n = e.values.as_ref().map_or(0, Vec::len);
            match (e.operator.as_str(), n) {
                ("In" | "NotIn", 0) => {
                    return Err(SelectorError(format!(
                        "matchExpressions[{i}] ({} {}) needs at least one value",
                        e.key, e.operator
                    )));
                }
                ("Exists" | "DoesNotExist", 1..) => {
                    return Err(SelectorError(format!(
                        "matchExpressions[{i}] ({} {}) takes no values",
                        e.key, e.operator
                    )));
                }
                ("In" | "NotIn" | "Exists" | "DoesNotExist", _) => {}
                (op, _) => {
                    return Err(SelectorError(format!(
                        "matchExpressions[{i}] has operator `{op}`; use In, NotIn, Exists or DoesNotExist"
                    )));
                }
            }
        }
        let selector = Selector::try_from(sel.clone()).map_err(|e| SelectorError(e.0))?;
        let query = selector.to_string();
        Ok(Matcher { selector, query })
    }

    /// Whether a map of labels (or annotations) matches; an absent map is empty.
    pub fn matches(&self, map: Option<&BTreeMap<String, String>>) -> bool {
        match map {
            Some(m) => self.selector.matches(m),
            None => self.selector.matches(&BTreeMap::new()),
        }
    }

    /// The selector as the API server's `labelSelector` parameter; empty selects all.
    pub fn query(&self) -> &str {
        &self.query
    }
}

/// `selector` (or one that selects everything) narrowed to objects without label `key`.
pub fn without_label(selector: Option<LabelSelector>, key: &str) -> LabelSelector {
    let mut selector = selector.unwrap_or_default();
    selector
        .match_expressions
        .get_or_insert_with(Vec::new)
        .push(LabelSelectorRequirement {
            key: key.to_string(),
            operator: "DoesNotExist".to_string(),
            values: None,
        });
    selector
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sel(labels: &[(&str, &str)], exprs: &[(&str, &str, &[&str])]) -> LabelSelector {
        LabelSelector {
            match_labels: (!labels.is_empty())
                .then(|| labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
            match_expressions: (!exprs.is_empty()).then(|| {
                exprs
                    .iter()
                    .map(|(k, op, vs)| LabelSelectorRequirement {
                        key: k.to_string(),
                        operator: op.to_string(),
                        values: (!vs.is_empty()).then(|| vs.iter().map(|v| v.to_string()).collect()),
                    })
                    .collect()
            }),
        }
    }

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn labels_and_expressions_must_all_hold() {
        let m = Matcher::new(&sel(
            &[("team", "blue")],
            &[("tier", "In", &["web", "db"]), ("legacy", "DoesNotExist", &[])],
        ))
        .unwrap();
        assert!(m.matches(Some(&map(&[("team", "blue"), ("tier", "db")]))));
        assert!(!m.matches(Some(&map(&[("team", "blue"), ("tier", "cache")]))));
        assert!(!m.matches(Some(&map(&[("team", "blue"), ("tier", "db"), ("legacy", "")]))));
        assert!(!m.matches(None));
        assert_eq!(m.query(), "team=blue,tier in (db,web),!legacy");
    }

    #[test]
    fn an_empty_selector_matches_everything() {
        let m = Matcher::new(&LabelSelector::default()).unwrap();
        assert!(m.matches(None));
        assert_eq!(m.query(), "");
    }

    #[test]
    fn operators_and_their_values_are_checked() {
        assert!(Matcher::new(&sel(&[], &[("a", "In", &[])])).is_err());
        assert!(Matcher::new(&sel(&[], &[("a", "Exists", &["x"])])).is_err());
        let e = Matcher::new(&sel(&[], &[("a", "Maybe", &["x"])])).unwrap_err();
        assert!(e.to_string().contains("Maybe"), "{e}");
    }

    #[test]
    fn templated_values_are_replaced_by_path() {
        let s = sel(
            &[("team", "{{ parent.spec.team }}")],
            &[("env", "In", &["prod", "{{ x }}"])],
        );
        let vals = values(&s);
        assert_eq!(
            vals.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>(),
            [
                "matchLabels.team",
                "matchExpressions[0].values[0]",
                "matchExpressions[0].values[1]"
            ]
        );
        let rendered = BTreeMap::from([
            ("matchLabels.team".to_string(), "blue".to_string()),
            ("matchExpressions[0].values[1]".to_string(), "dev".to_string()),
        ]);
        let out = with_values(&s, &rendered);
        assert_eq!(Matcher::new(&out).unwrap().query(), "team=blue,env in (dev,prod)");
    }
}
