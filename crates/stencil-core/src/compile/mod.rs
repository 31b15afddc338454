//! Compiles OperatorDefinitions, purely: parses files (several YAML documents each),
//! validates every definition, and compiles its templates and JSONPath rules once. All
//! errors of a file are reported, each with file, line and column.

pub mod cel_object;
mod compiled;
mod diagnostic;
mod document;
mod expand;
mod field;
pub mod functions;
mod kinds;
pub(crate) mod names;
mod object_stage;
mod order;
mod position;
mod reads;
pub mod rules;
mod schema;
mod selectors;
mod stages;
pub mod templates;
mod validate;

pub use compiled::CompiledDefinition;
pub use diagnostic::{Diagnostic, Diagnostics};
pub use kinds::scopes;
pub use position::FieldPosition;
pub(crate) use templates::{template_message, template_position};
pub use validate::RESERVED_STATUS_FIELDS;
pub use validate::{is_dns_label, is_identifier, is_kind};

use crate::definition::OperatorDefinition;
use crate::gvk::Gvk;
use document::Locator;
use field::Field;
use stages::{Compilation, decorate_matchers, sibling_reads};

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
    /// An apiVersion is neither `group/version` nor a bare core version.
    #[error(transparent)]
    ApiVersion(#[from] crate::gvk::ApiVersionError),
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
    /// A line of a compact schema is wrong; the diagnostic's field says which.
    #[error("{}", .0.message)]
    Schema(#[source] crate::compact_schema::CompactError),
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

/// Compiles one definition in stages (checks, templates, rules, the rest), gathering
/// every problem before it answers.
fn compile_with(resource: &OperatorDefinition, locator: &Locator) -> Result<CompiledDefinition, Diagnostics> {
    let (spec, expansion_problems) = expand::expand_schemas(&resource.spec);
    let spec = spec.as_ref();
    let mut c = Compilation::new(resource, spec, locator);
    for (field, error) in expansion_problems {
        c.report(field, error, None);
    }
    if c.name.is_empty() {
        c.report(
            Field::Definition,
            CompileError::Invalid("metadata.name is required".into()),
            None,
        );
    }
    let parent = match Gvk::parse(&spec.parent.api_version, &spec.parent.kind) {
        Ok(gvk) => Some(gvk),
        Err(e) => {
            c.report(Field::Parent, CompileError::ApiVersion(e), None);
            None
        }
    };
    let child_kinds = c.children();
    let reads = sibling_reads(spec, &c.objects);
    let order = validate::check(spec, parent.as_ref(), &reads, &mut |f, e, i| c.report(f, e, i));
    c.lookups();
    c.shared_status_and_conversions();
    let rules = c.rules();
    let annotations = resource.metadata.annotations.as_ref();
    let Compilation {
        name,
        mut errors,
        env,
        origins,
        objects,
        ..
    } = c;
    errors.sort_by_key(|d| (d.line, d.column));
    match (errors.is_empty(), parent, order) {
        (true, Some(parent), Some(orders)) => Ok(CompiledDefinition {
            name,
            source: locator.file().to_string(),
            spec: spec.clone(),
            parent,
            order: orders.children,
            finalize_order: orders.finalize,
            until: rules.until,
            env,
            origins,
            objects,
            ready_rules: rules.ready,
            include_rules: rules.include,
            field_rules: rules.fields,
            condition_rules: rules.conditions,
            child_kinds,
            reads,
            decorate: decorate_matchers(spec),
            allow_breaking_changes: annotations
                .and_then(|a| a.get(crate::labels::ALLOW_BREAKING_CHANGES))
                .is_some_and(|v| v == "true"),
            paused: crate::labels::paused(annotations),
        }),
        _ => Err(Diagnostics(errors)),
    }
}

#[cfg(test)]
mod tests;
