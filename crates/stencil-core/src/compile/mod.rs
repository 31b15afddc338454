//! Compiles OperatorDefinitions, purely: parses files (several YAML documents each),
//! validates every definition, and compiles its templates and JSONPath rules once. All
//! errors of a file are reported, each with file, line and column.

mod compiled;
mod diagnostic;
mod document;
pub mod functions;
mod kinds;
pub(crate) mod names;
mod order;
mod position;
mod reads;
pub mod rules;
mod schema;
mod selectors;
pub mod templates;
mod validate;

use std::collections::BTreeMap;

pub use compiled::CompiledDefinition;
pub use diagnostic::{Diagnostic, Diagnostics};
pub use kinds::scopes;
pub use position::FieldPosition;
pub(crate) use templates::{template_message, template_position};
pub use validate::RESERVED_STATUS_FIELDS;
pub use validate::{is_dns_label, is_kind};

use crate::definition::OperatorDefinition;
use crate::gvk::Gvk;
use crate::selector::Matcher;
use compiled::CRD_ORIGIN;
use document::{Field, Locator};
use rules::Rule;

/// Why a definition does not compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompileError {
    /// The YAML is malformed, has an unknown field or a value of the wrong type. The
    /// diagnostic carries its position; the message says the rest.
    #[error("{}", .0.message)]
    Yaml(#[source] crate::yaml::YamlError),
    /// The document is not an OperatorDefinition.
    #[error("expected apiVersion stencil.dev/v1alpha1 and kind OperatorDefinition, found {api_version} {kind}")]
    NotADefinition {
        /// The document's apiVersion.
        api_version: String,
        /// The document's kind.
        kind: String,
    },
    /// A field holds a value Stencil cannot use.
    #[error("{0}")]
    Invalid(String),
    /// Two entries share a name.
    #[error("`{0}` is defined twice")]
    Duplicate(String),
    /// `dependsOn` names a child that does not exist.
    #[error("dependsOn names `{0}`, which is not a child of this definition")]
    UnknownDependency(String),
    /// `dependsOn` forms a cycle.
    #[error("dependsOn forms a cycle: {0}")]
    Cycle(String),
    /// `spec.crd` does not agree with the parent or is not a valid CRD.
    #[error("crd: {0}")]
    Crd(String),
    /// A template does not parse.
    #[error("template: {0}")]
    Template(String),
    /// A rule does not parse.
    #[error(transparent)]
    Rule(#[from] rules::RuleError),
}

/// Compiles every definition in a file. Returns the definitions that compiled and the
/// errors of those that did not; one bad definition does not hide the others.
pub fn compile_file(file: &str, text: &str) -> (Vec<CompiledDefinition>, Diagnostics) {
    let mut compiled = Vec::new();
    let mut errors = Vec::new();
    for doc in document::read(file, text) {
        match doc {
            Ok((resource, locator)) => match compile_with(&resource, &locator) {
                Ok(def) => compiled.push(def),
                Err(mut d) => errors.append(&mut d.0),
            },
            Err(d) => errors.push(*d),
        }
    }
    (compiled, Diagnostics(errors))
}

/// Compiles a definition read from the cluster; positions are relative to each template.
///
/// # Errors
///
/// Every problem of the definition, each with its field and position.
pub fn compile_resource(resource: &OperatorDefinition) -> Result<CompiledDefinition, Diagnostics> {
    let name = resource.metadata.name.clone().unwrap_or_default();
    compile_with(resource, &Locator::detached(format!("OperatorDefinition/{name}")))
}

fn compile_with(resource: &OperatorDefinition, locator: &Locator) -> Result<CompiledDefinition, Diagnostics> {
    let name = resource.metadata.name.clone().unwrap_or_default();
    let spec = &resource.spec;
    let mut errors = Vec::new();
    let mut report = |field: Field, error: CompileError, inner: Option<(u64, u64)>| {
        let origin = locator.origin(&field);
        let (line, column) = origin.position(inner);
        errors.push(Diagnostic {
            file: origin.file.clone(),
            line,
            column,
            definition: (!name.is_empty()).then(|| name.clone()),
            field: field.path(spec),
            error,
        });
    };

    if name.is_empty() {
        report(
            Field::Definition,
            CompileError::Invalid("metadata.name is required".into()),
            None,
        );
    }
    let parent = match Gvk::parse(&spec.parent.api_version, &spec.parent.kind) {
        Ok(gvk) => Some(gvk),
        Err(e) => {
            report(Field::Parent, CompileError::Invalid(e.to_string()), None);
            None
        }
    };
    let order = validate::check(spec, parent.as_ref(), &mut report);

    let mut env = templates::environment();
    let mut origins = BTreeMap::new();
    origins.insert(CRD_ORIGIN.to_string(), locator.origin(&Field::Crd));
    let allow_breaking_changes = resource
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(crate::labels::ALLOW_BREAKING_CHANGES))
        .is_some_and(|v| v == "true");
    let paused = crate::labels::paused(resource.metadata.annotations.as_ref());
    let mut template =
        |tname: String, source: &str, field: Field, report: &mut dyn FnMut(Field, CompileError, Option<(u64, u64)>)| {
            let origin = locator.origin(&field);
            match env.add_template_owned(tname.clone(), source.to_string()) {
                Ok(()) => {
                    origins.insert(tname, origin);
                }
                Err(e) => {
                    let inner = template_position(&e, source);
                    report(field, CompileError::Template(template_message(&e)), inner);
                }
            }
        };
    let mut child_kinds = Vec::new();
    let mut identities: BTreeMap<String, &str> = BTreeMap::new();
    let n = spec.children.len();
    for (i, child) in spec.children.iter().chain(&spec.finalize.children).enumerate() {
        let tname = if i < n {
            names::child(&child.name)
        } else {
            names::finalize_child(&child.name)
        };
        template(tname, &child.template, Field::ChildTemplate(i), &mut report);
        if let Some(identity) = kinds::fixed_identity(&child.template) {
            match identities.get(identity.as_str()) {
                // A second entry of the same name is reported as such.
                Some(first) if *first == child.name => {}
                Some(first) => report(
                    Field::ChildTemplate(i),
                    CompileError::Invalid(format!(
                        "renders the same object as child `{first}` (the same kind, name and namespace): one object comes from one child, or the two overwrite each other on every pass"
                    )),
                    None,
                ),
                None => {
                    identities.insert(identity, &child.name);
                }
            }
        }
        match kinds::declared_kinds(&child.template) {
            Ok(k) => {
                if let Some(problem) = kinds::recreate_problem(child, &k) {
                    report(Field::ChildUpdatePolicy(i), problem, None);
                }
                if let Some(problem) = kinds::second_version(&child_kinds, &k) {
                    report(Field::ChildTemplate(i), problem, None);
                }
                child_kinds.push(k);
            }
            Err((e, line)) => {
                report(
                    Field::ChildTemplate(i),
                    CompileError::Template(e.to_string()),
                    Some((line, 1)),
                );
                child_kinds.push(Vec::new());
            }
        }
    }
    for (i, lookup) in spec.lookups.iter().enumerate() {
        if let Some(name_template) = &lookup.name_template {
            template(
                names::lookup_name(&lookup.name),
                name_template,
                Field::LookupNameTemplate(i),
                &mut report,
            );
        }
        for (path, value) in lookup.selector.iter().flat_map(crate::selector::values) {
            if crate::selector::is_template(value) {
                template(
                    names::lookup_selector(&lookup.name, &path),
                    value,
                    Field::LookupSelector(i),
                    &mut report,
                );
            }
        }
        if let Some(ns) = &lookup.namespace_template
            && ns.trim() != "*"
        {
            template(
                names::lookup_namespace(&lookup.name),
                ns,
                Field::LookupNamespaceTemplate(i),
                &mut report,
            );
        }
    }
    if let Some(status) = &spec.status.template {
        template(names::STATUS.to_string(), status, Field::StatusTemplate, &mut report);
    }
    for (i, version) in spec.crd.iter().flat_map(|c| c.versions.iter()).enumerate() {
        if let Some(conversion) = &version.conversion {
            let to = names::to_storage(&version.name);
            template(to, &conversion.to_storage, Field::Conversion(i, true), &mut report);
            let from = names::from_storage(&version.name);
            template(from, &conversion.from_storage, Field::Conversion(i, false), &mut report);
        }
    }

    let mut rule = |source: &str, field: Field, report: &mut dyn FnMut(Field, CompileError, Option<(u64, u64)>)| {
        match Rule::compile(source) {
            Ok(r) => {
                let name = field.path(spec).unwrap_or_default();
                origins.insert(name.clone(), locator.origin(&field));
                Some(r.named(name))
            }
            Err(e) => {
                let inner = Some((e.line, e.column));
                report(field, CompileError::Rule(e), inner);
                None
            }
        }
    };
    let ready_rules: Vec<Option<Rule>> = spec
        .children
        .iter()
        .chain(&spec.finalize.children)
        .enumerate()
        .map(|(i, c)| {
            c.ready_when
                .as_deref()
                .and_then(|r| rule(r, Field::ChildReadyWhen(i), &mut report))
        })
        .collect();
    let field_rules: Vec<(String, Rule)> = spec
        .status
        .fields
        .iter()
        .filter_map(|(k, r)| rule(r, Field::StatusValue(k.clone()), &mut report).map(|r| (k.clone(), r)))
        .collect();
    let condition_rules: Vec<Rule> = spec
        .status
        .conditions
        .iter()
        .enumerate()
        .filter_map(|(i, c)| rule(&c.when, Field::Condition(i), &mut report))
        .collect();

    let names: Vec<&str> = spec
        .children
        .iter()
        .chain(&spec.finalize.children)
        .map(|c| c.name.as_str())
        .collect();
    let reads = spec
        .children
        .iter()
        .chain(&spec.finalize.children)
        .map(|c| reads::sibling_reads(&c.template, &c.name, &names))
        .collect();
    let until = spec
        .finalize
        .until
        .as_deref()
        .and_then(|r| rule(r, Field::FinalizeUntil, &mut report));

    // The selectors were checked by `validate::check`; a bad one has been reported.
    let decorate = spec.decorate.as_ref().map(|d| {
        let parse = |s: &Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>| {
            s.as_ref().and_then(|s| Matcher::new(s).ok())
        };
        let mut labels = d.selector.clone();
        if !d.include_stencil_children {
            labels = Some(crate::selector::without_label(labels, crate::labels::PARENT_UID));
        }
        (parse(&labels), parse(&d.annotation_selector))
    });
    errors.sort_by_key(|d| (d.line, d.column));
    match (errors.is_empty(), parent, order) {
        (true, Some(parent), Some((order, finalize_order))) => Ok(CompiledDefinition {
            name,
            source: locator.file().to_string(),
            spec: spec.clone(),
            parent,
            order,
            finalize_order,
            until,
            env,
            origins,
            ready_rules,
            field_rules,
            condition_rules,
            child_kinds,
            reads,
            decorate,
            allow_breaking_changes,
            paused,
        }),
        _ => Err(Diagnostics(errors)),
    }
}

#[cfg(test)]
mod tests;
