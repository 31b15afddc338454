//! Structural checks of a definition's spec that need no template or rule compiled: names,
//! dependencies (ordered by `order`), conditions, namespaces and agreement between
//! `spec.crd` and the parent.

use std::collections::BTreeSet;

use super::document::Report;
use super::field::Field;
use super::order::dependency_order;
use super::selectors::{decorator_problems, lookup_problems};
use super::{CompileError, schema};
use crate::definition::{CrdScope, OperatorDefinitionSpec};
use crate::gvk::Gvk;

/// Condition types Stencil writes itself.
pub const RESERVED_CONDITIONS: &[&str] = &["Finalized", "Ready", "Reconciling", "Stalled"];

/// Status keys Stencil writes itself.
pub const RESERVED_STATUS_FIELDS: &[&str] = &["conditions", "observedGeneration"];

/// The order children are applied in, and finalize children run in.
pub(super) struct Orders {
    /// Indices into `children`, each after what it depends on.
    pub(super) children: Vec<usize>,
    /// Indices of `finalize.children` (numbered after `children`), likewise.
    pub(super) finalize: Vec<usize>,
}

/// Runs every check, reporting each problem; returns the dependency orders when the
/// dependencies are sound.
pub(crate) fn check(
    spec: &OperatorDefinitionSpec,
    parent: Option<&Gvk>,
    reads: &[Vec<String>],
    report: Report<'_>,
) -> Option<Orders> {
    check_parent(spec, parent, report);
    check_children(spec, report);
    check_lookups(spec, report);
    if let Some(decorate) = &spec.decorate {
        for problem in decorator_problems(spec, decorate) {
            report(Field::Decorate, CompileError::Invalid(problem), None);
        }
    }
    check_conditions(spec, report);
    check_status_fields(spec, report);
    check_settings(spec, report);
    for name in &spec.finalize.inherit_finalizers {
        if let Some(problem) = inherited_finalizer_problem(name) {
            report(Field::FinalizeInherit, CompileError::Invalid(problem), None);
        }
    }
    if let (Some(crd), Some(parent)) = (&spec.crd, parent) {
        for problem in crd_problems(crd, parent) {
            report(Field::Crd, CompileError::Crd(problem), None);
        }
        for (i, problem) in version_problems(crd) {
            report(Field::Version(i), CompileError::Crd(problem), None);
        }
    }
    let n = spec.children.len();
    let children = dependency_order(&spec.children, &spec.finalize.children, 0, reads, report);
    let finalize = dependency_order(&spec.finalize.children, &spec.children, n, reads, report);
    Some(Orders {
        children: children?,
        finalize: finalize?,
    })
}

/// The parent's kind is CamelCase, and there is a child to render.
fn check_parent(spec: &OperatorDefinitionSpec, parent: Option<&Gvk>, report: Report<'_>) {
    if let Some(parent) = parent
        && !is_kind(&parent.kind)
    {
        let message = format!("kind `{}` must be CamelCase, e.g. `Database`", parent.kind);
        report(Field::Parent, CompileError::Invalid(message), None);
    }
    if spec.children.is_empty() {
        let message = "spec.children must list at least one child".to_string();
        report(Field::Definition, CompileError::Invalid(message), None);
    }
}

/// Children and finalize children have plain names, unique across both lists: the
/// `stencil.dev/child` label tells their objects apart.
fn check_children(spec: &OperatorDefinitionSpec, report: Report<'_>) {
    let mut seen = BTreeSet::new();
    for (i, child) in spec.children.iter().chain(&spec.finalize.children).enumerate() {
        if !is_identifier(&child.name) {
            let hint = identifier_hint("child", &child.name);
            report(Field::ChildName(i), CompileError::Invalid(hint), None);
        }
        if !seen.insert(child.name.as_str()) {
            let what = format!("child {}", child.name);
            report(Field::ChildName(i), CompileError::Duplicate(what), None);
        }
    }
}

/// Lookups have unique plain names, a valid apiVersion and a selector that can match.
fn check_lookups(spec: &OperatorDefinitionSpec, report: Report<'_>) {
    let mut seen = BTreeSet::new();
    for (i, lookup) in spec.lookups.iter().enumerate() {
        if !is_identifier(&lookup.name) {
            let hint = identifier_hint("lookup", &lookup.name);
            report(Field::LookupName(i), CompileError::Invalid(hint), None);
        }
        if !seen.insert(lookup.name.as_str()) {
            let what = format!("lookup {}", lookup.name);
            report(Field::LookupName(i), CompileError::Duplicate(what), None);
        }
        if let Err(e) = Gvk::parse(&lookup.api_version, &lookup.kind) {
            report(Field::LookupName(i), CompileError::ApiVersion(e), None);
        }
        for problem in lookup_problems(spec, lookup) {
            report(Field::LookupSelector(i), CompileError::Invalid(problem), None);
        }
    }
}

/// Status conditions are the author's (not Stencil's), CamelCase and unique.
fn check_conditions(spec: &OperatorDefinitionSpec, report: Report<'_>) {
    let mut seen = BTreeSet::new();
    for (i, condition) in spec.status.conditions.iter().enumerate() {
        let t = condition.type_.as_str();
        if RESERVED_CONDITIONS.contains(&t) {
            let message = format!("condition type `{t}` is written by Stencil; choose another name");
            report(Field::Condition(i), CompileError::Invalid(message), None);
        } else if !is_kind(t) {
            let message = format!("condition type `{t}` must be CamelCase, e.g. `Available`");
            report(Field::Condition(i), CompileError::Invalid(message), None);
        }
        if !seen.insert(t) {
            report(
                Field::Condition(i),
                CompileError::Duplicate(format!("condition {t}")),
                None,
            );
        }
    }
}

/// Status fields are the author's (not Stencil's) and have plain names.
fn check_status_fields(spec: &OperatorDefinitionSpec, report: Report<'_>) {
    for key in spec.status.fields.keys() {
        let field = || Field::StatusValue(key.clone());
        if RESERVED_STATUS_FIELDS.contains(&key.as_str()) {
            let message = format!("status.{key} is written by Stencil; choose another name");
            report(field(), CompileError::Invalid(message), None);
        } else if !is_identifier(key) {
            let message = format!("status field `{key}` must be a plain name such as `readyReplicas`");
            report(field(), CompileError::Invalid(message), None);
        }
    }
}

/// Allowed namespaces, resync, rollout and the finalize timeout hold usable values.
fn check_settings(spec: &OperatorDefinitionSpec, report: Report<'_>) {
    for ns in &spec.allowed_namespaces {
        if ns != "*" && !is_dns_label(ns) {
            let message = format!("`{ns}` is not a namespace name (or `*`)");
            report(Field::AllowedNamespaces, CompileError::Invalid(message), None);
        }
    }
    if let Some(seconds) = spec.resync_seconds
        && seconds < 10
    {
        let message = format!("resyncSeconds must be at least 10, got {seconds}");
        report(Field::ResyncSeconds, CompileError::Invalid(message), None);
    }
    for problem in crate::definition::rollout_problems(&spec.rollout) {
        report(
            Field::Rollout,
            CompileError::Invalid(format!("rollout: {problem}")),
            None,
        );
    }
    if spec.finalize.timeout_seconds == 0 {
        let message = "finalize.timeoutSeconds must be at least 1".to_string();
        report(Field::FinalizeUntil, CompileError::Invalid(message), None);
    }
}

/// Why a finalizer cannot be inherited: it is not a qualified name (`domain/name`, as
/// the API server expects of a controller's finalizer), it is Stencil's own, or it
/// belongs to Kubernetes, whose controllers still act on it.
fn inherited_finalizer_problem(name: &str) -> Option<String> {
    let segment_ok = |s: &str| {
        !s.is_empty()
            && s.len() <= 63
            && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            && s.starts_with(|c: char| c.is_ascii_alphanumeric())
            && s.ends_with(|c: char| c.is_ascii_alphanumeric())
    };
    let qualified = name
        .split_once('/')
        .filter(|(domain, rest)| domain.len() <= 253 && domain.split('.').all(is_dns_label) && segment_ok(rest));
    let Some((domain, _)) = qualified else {
        return Some(format!(
            "`{name}` is not a qualified finalizer name (`example.org/finalizer`)"
        ));
    };
    if name == crate::labels::FINALIZER {
        return Some(format!("`{name}` is Stencil's own finalizer"));
    }
    if domain == "kubernetes.io" || domain.ends_with(".kubernetes.io") || domain.ends_with(".k8s.io") {
        return Some(format!(
            "`{name}` belongs to Kubernetes, whose controllers remove it themselves"
        ));
    }
    None
}

/// What the API server would refuse in a scale subresource: paths are JSON paths of the
/// form `.spec.replicas`, the spec one under `.spec` and the others under `.status`
/// (or `.spec` for the selector).
fn scale_problems(
    version: &str,
    scale: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceSubresourceScale,
) -> Vec<String> {
    let mut problems = Vec::new();
    let mut check = |field: &str, path: &str, roots: &[&str]| {
        let simple = path.len() > 1
            && path[1..]
                .split('.')
                .all(|s| !s.is_empty() && !s.contains(['[', ']', '*']));
        if !roots.iter().any(|r| path.starts_with(r)) || !simple {
            problems.push(format!(
                "versions[{version}].scale.{field} `{path}` must be a simple path under {}, e.g. `{}replicas`",
                roots.join(" or "),
                roots[0]
            ));
        }
    };
    check("specReplicasPath", &scale.spec_replicas_path, &[".spec."]);
    check("statusReplicasPath", &scale.status_replicas_path, &[".status."]);
    if let Some(path) = &scale.label_selector_path {
        check("labelSelectorPath", path, &[".status.", ".spec."]);
    }
    problems
}

/// What is wrong with `spec.crd` for this parent.
fn crd_problems(crd: &crate::definition::CrdSpec, parent: &Gvk) -> Vec<String> {
    let mut problems = Vec::new();
    if parent.group.is_empty() || !parent.group.contains('.') {
        problems.push(format!(
            "the parent's group `{}` cannot hold a CRD; use a domain you own, e.g. `myapp.example.com`",
            parent.group
        ));
    }
    if !is_dns_label(&crd.names.plural) {
        problems.push(format!(
            "names.plural `{}` must be a lower-case DNS label",
            crd.names.plural
        ));
    }
    if let Some(singular) = &crd.names.singular
        && !is_dns_label(singular)
    {
        problems.push(format!("names.singular `{singular}` must be a lower-case DNS label"));
    }
    let storage = crd.versions.iter().filter(|v| v.storage).count();
    if storage != 1 {
        problems.push(format!("exactly one version must have storage: true, found {storage}"));
    }
    match crd.versions.iter().find(|v| v.name == parent.version) {
        None => problems.push(format!(
            "the parent's version {} is not among the CRD's versions",
            parent.version
        )),
        Some(v) if !v.served => problems.push(format!("the parent's version {} is not served", parent.version)),
        Some(_) => {}
    }
    if crd.scope == CrdScope::Cluster && crd.names.plural == "namespaces" {
        problems.push("a cluster-scoped kind cannot be called namespaces".to_string());
    }
    problems
}

/// What is wrong with each version of `spec.crd`, by index: a name listed twice, storage
/// without serving, a schema that is not structural, its scale subresource, and its
/// conversion (the storage version is the hub, and any other version whose schema
/// differs from it converts).
fn version_problems(crd: &crate::definition::CrdSpec) -> Vec<(usize, String)> {
    let hub = crd.versions.iter().filter(|v| v.storage).collect::<Vec<_>>();
    let hub = match hub.as_slice() {
        [hub] => Some(*hub),
        _ => None,
    };
    let mut names = BTreeSet::new();
    let mut problems = Vec::new();
    for (i, v) in crd.versions.iter().enumerate() {
        let mut say = |problem: String| problems.push((i, problem));
        if !names.insert(v.name.as_str()) {
            say(format!("version {} is listed twice", v.name));
        }
        if v.storage && !v.served {
            say(format!("version {} stores objects but is not served", v.name));
        }
        // A schema that is missing or did not expand is reported where it is written.
        let schema = Some(&v.schema.open_api_v3_schema).filter(|s| !s.is_null());
        for issue in schema.into_iter().flat_map(schema::structural_problems) {
            say(format!("versions[{}].schema.openAPIV3Schema{issue}", v.name));
        }
        for problem in v.scale.iter().flat_map(|scale| scale_problems(&v.name, scale)) {
            say(problem);
        }
        match hub {
            Some(hub) if hub.name == v.name && v.conversion.is_some() => say(format!(
                "versions[{}] is the storage version, which others convert to and from; it takes no conversion",
                v.name
            )),
            Some(hub) if hub.name != v.name && v.conversion.is_none() && v.schema != hub.schema => say(format!(
                "versions[{}].schema differs from the storage version {}'s; give it conversion.toStorage and conversion.fromStorage templates, or the same schema",
                v.name, hub.name
            )),
            _ => {}
        }
    }
    problems
}

/// A name usable as `children.<name>` in templates and JSONPath, and as a variable.
pub fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn identifier_hint(what: &str, name: &str) -> String {
    format!(
        "{what} name `{name}` must be an identifier (letters, digits, `_`), since templates read it as `{what}s.<name>`; try `{}`",
        name.replace(|c: char| !c.is_ascii_alphanumeric(), "_")
    )
}

/// A CamelCase kind name, e.g. `Database`.
pub fn is_kind(s: &str) -> bool {
    s.chars().next().is_some_and(|c| c.is_ascii_uppercase()) && s.chars().all(|c| c.is_ascii_alphanumeric())
}

/// An RFC 1123 label: lower-case alphanumerics and '-', 1 to 63 characters.
pub fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}
