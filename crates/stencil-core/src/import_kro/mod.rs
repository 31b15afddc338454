//! kro's ResourceGraphDefinitions translated into OperatorDefinitions, purely: the
//! schema to the parent's CRD in the compact form (SimpleSchema is its syntax), each
//! resource to a child written as an object (`readyWhen`, `includeWhen` and `forEach`
//! kept, its references to other resources made `dependsOn`), each `externalRef` to a
//! lookup, and the schema's status to status fields, all in CEL as kro wrote them. What
//! Stencil cannot express is refused with the RGD's file, line and the feature's name,
//! and nothing of that RGD is written.

mod locate;
mod resources;
mod schema;
mod write;

use serde_json::{Map, Value};

use locate::Lines;

/// One RGD, translated.
#[derive(Debug, Clone, PartialEq)]
pub struct Translation {
    /// The OperatorDefinition's name, `<plural>.<group>`: its CRD's name under kro too.
    pub name: String,
    /// The OperatorDefinition as YAML, with a comment at each choice the translation made.
    pub text: String,
}

/// Why an RGD, or a file, was not translated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ImportError {
    /// The RGD uses something Stencil cannot express.
    #[error("{file}:{line}: {feature}: {why}")]
    Refused {
        /// The file.
        file: String,
        /// 1-based line of the feature in the file.
        line: u64,
        /// The feature, named as kro names it (`resources[vpc].externalRef.metadata.selector`).
        feature: String,
        /// Why, and what to do.
        why: String,
    },
    /// The file is not YAML, or holds no ResourceGraphDefinition.
    #[error("{file}:{line}: {message}")]
    Unreadable {
        /// The file.
        file: String,
        /// 1-based line, 0 when unknown.
        line: u64,
        /// What was wrong.
        message: String,
    },
}

/// What one RGD's translation found wrong, before the file and line are known.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Refusal {
    /// Where: a resource's id, or `None` for the RGD itself.
    pub resource: Option<String>,
    /// The key under it (`externalRef.metadata.selector`, `schema.metadata`).
    pub feature: String,
    /// Why.
    pub why: String,
}

impl Refusal {
    pub(crate) fn of(resource: Option<&str>, feature: &str, why: impl Into<String>) -> Refusal {
        Refusal {
            resource: resource.map(str::to_string),
            feature: feature.to_string(),
            why: why.into(),
        }
    }
}

const API_VERSION: &str = "kro.run/v1alpha1";
const KIND: &str = "ResourceGraphDefinition";

/// Translates every ResourceGraphDefinition in `text` (the file `file`); other documents
/// are passed over.
///
/// # Errors
///
/// The file does not parse or holds no RGD; or an RGD is refused: every refusal of
/// every RGD, each at its line. Then nothing is translated, so nothing half-done is
/// written.
pub fn import(file: &str, text: &str) -> Result<Vec<Translation>, Vec<ImportError>> {
    let documents: Vec<Value> = crate::yaml::documents(text).map_err(|e| {
        vec![ImportError::Unreadable {
            file: file.to_string(),
            line: e.line,
            message: e.message,
        }]
    })?;
    let lines = Lines::new(text);
    let rgds: Vec<&Value> = documents.iter().filter(|d| is_rgd(d)).collect();
    if rgds.is_empty() {
        return Err(vec![ImportError::Unreadable {
            file: file.to_string(),
            line: 0,
            message: format!("no {KIND} ({API_VERSION}) in the file"),
        }]);
    }
    let mut translations = Vec::new();
    let mut errors = Vec::new();
    for rgd in rgds {
        let name = rgd
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        match translate(file, name, rgd) {
            Ok(t) => translations.push(t),
            Err(refusals) => errors.extend(refusals.into_iter().map(|r| ImportError::Refused {
                file: file.to_string(),
                line: lines.of(name, r.resource.as_deref(), &r.feature),
                feature: match &r.resource {
                    Some(id) => format!("resources[{id}].{}", r.feature),
                    None => r.feature,
                },
                why: r.why,
            })),
        }
    }
    if errors.is_empty() {
        Ok(translations)
    } else {
        Err(errors)
    }
}

fn is_rgd(document: &Value) -> bool {
    document.get("apiVersion").and_then(Value::as_str) == Some(API_VERSION)
        && document.get("kind").and_then(Value::as_str) == Some(KIND)
}

/// The RGD `rgd_name` as an OperatorDefinition, checked by compiling it.
fn translate(file: &str, rgd_name: &str, rgd: &Value) -> Result<Translation, Vec<Refusal>> {
    let mut refusals = Vec::new();
    let empty = Map::new();
    let spec = rgd.get("spec").and_then(Value::as_object).unwrap_or(&empty);
    for key in spec.keys().filter(|k| !matches!(k.as_str(), "schema" | "resources")) {
        refusals.push(Refusal::of(None, &format!("spec.{key}"), "Stencil has no such field"));
    }
    let parent = schema::translate(spec.get("schema"), &mut refusals);
    let graph = resources::translate(spec.get("resources"), &mut refusals);
    if graph.children.is_empty() {
        let why = "the RGD creates no resource, and a definition has at least one child; its CRD alone can be installed as it is";
        refusals.push(Refusal::of(None, "spec.resources", why));
    }
    let Some(parent) = parent else {
        return Err(refusals);
    };
    if !refusals.is_empty() {
        return Err(refusals);
    }
    let text = write::definition(file, rgd_name, &parent, &graph);
    let (_, diagnostics) = crate::compile::compile_file(file, &text);
    if !diagnostics.0.is_empty() {
        return Err(diagnostics.0.iter().map(refusal_of).collect());
    }
    Ok(Translation {
        name: parent.definition_name(),
        text,
    })
}

/// A problem of the translated definition as a refusal of the RGD: a schema line Stencil
/// reads otherwise is named as kro names it; anything else is the translation's fault.
fn refusal_of(d: &crate::compile::Diagnostic) -> Refusal {
    let field = d.field.as_deref().unwrap_or_default();
    match field.split_once("].schema.") {
        Some((version, path)) if version.starts_with("spec.crd.versions[") => {
            Refusal::of(None, &format!("schema.{path}"), d.error.to_string())
        }
        _ => Refusal::of(
            None,
            "spec",
            format!(
                "the translation does not compile ({field}: {}); please report it",
                d.error
            ),
        ),
    }
}

#[cfg(test)]
mod tests;
