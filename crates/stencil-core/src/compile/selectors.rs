//! Checks of the parts of a definition that select objects: a lookup's choice between a
//! name and a selector (and its namespace), and a decorator's selectors and what a
//! decorator may not have.

use std::collections::BTreeMap;

use crate::definition::{CrdScope, Decorate, Lookup, OperatorDefinitionSpec};
use crate::selector::{self, Matcher};

/// What is wrong with a lookup's choice between a name and a selector, and its namespace.
pub(super) fn lookup_problems(spec: &OperatorDefinitionSpec, lookup: &Lookup) -> Vec<String> {
    let mut problems = Vec::new();
    let every_namespace = lookup.namespace_template.as_deref().map(str::trim) == Some("*");
    match (&lookup.name_template, &lookup.selector) {
        (Some(_), Some(_)) => problems.push("set nameTemplate or selector, not both".to_string()),
        (None, None) => problems.push("set nameTemplate (one object) or selector (a list of objects)".to_string()),
        (Some(_), None) if every_namespace => {
            problems.push("namespaceTemplate `*` (every namespace) needs a selector, not a nameTemplate".to_string())
        }
        (None, Some(sel)) => {
            // Templated values are checked once rendered; a placeholder stands in here.
            let placeholders: BTreeMap<String, String> = selector::values(sel)
                .into_iter()
                .filter(|(_, v)| selector::is_template(v))
                .map(|(path, _)| (path, "x".to_string()))
                .collect();
            if let Err(e) = Matcher::new(&selector::with_values(sel, &placeholders)) {
                problems.push(format!("selector: {e}"));
            }
        }
        _ => {}
    }
    let namespaced_parent = spec.crd.as_ref().is_some_and(|c| c.scope == CrdScope::Namespaced);
    if every_namespace && namespaced_parent && !spec.allowed_namespaces.iter().any(|a| a == "*") {
        problems.push(
            "namespaceTemplate `*` reads every namespace; a namespaced parent needs spec.allowedNamespaces: [\"*\"] for it"
                .to_string(),
        );
    }
    problems
}

/// What a decorator may not have: it never writes its parent, so it installs no CRD,
/// writes no status and holds no finalizer (so it has no finalize step).
pub(super) fn decorator_problems(spec: &OperatorDefinitionSpec, decorate: &Decorate) -> Vec<String> {
    let mut problems = Vec::new();
    if spec.crd.is_some() {
        problems.push("a decorator decorates objects that exist; remove spec.crd".to_string());
    }
    if !spec.status.is_empty() {
        problems.push(
            "a decorator never writes its parent, so it has no status; remove spec.status (its state is on the definition's status and in events)"
                .to_string(),
        );
    }
    if spec.finalize.has_step() {
        problems.push(
            "a decorator puts no finalizer on its parent, so it has no finalize step; remove finalize.children and finalize.until"
                .to_string(),
        );
    }
    for (what, sel) in [
        ("selector", &decorate.selector),
        ("annotationSelector", &decorate.annotation_selector),
    ] {
        if let Some(sel) = sel
            && let Err(e) = Matcher::new(sel)
        {
            problems.push(format!("{what}: {e}"));
        }
    }
    problems
}
