//! Reads definition files: splits a YAML stream into documents, deserializes each into an
//! OperatorDefinition (unknown fields are errors), and keeps the position of every
//! template and rule so later errors can point into the file.

use serde::Deserialize;
use serde_json::Value;
use serde_saphyr::Spanned;

use super::field::Field;
use super::position::FieldPosition;
use super::{CompileError, Diagnostic};
use crate::definition::{OperatorDefinition, OperatorDefinitionSpec};

const API_VERSION: &str = "stencil.dev/v1alpha1";
const KIND: &str = "OperatorDefinition";

/// Where a check reports a problem: the field, the error, and the position inside the
/// field's text (a template's line and column) when it has one.
pub(super) type Report<'a> = &'a mut dyn FnMut(Field, CompileError, Option<(u64, u64)>);

/// Where each field of one definition sits in its file.
#[derive(Debug, Clone)]
pub(crate) struct Locator {
    file: String,
    text: String,
    spans: SpanDoc,
}

impl Locator {
    /// A locator for a definition with no file: every position is relative.
    pub(crate) fn detached(file: String) -> Self {
        Locator {
            file,
            text: String::new(),
            spans: SpanDoc::default(),
        }
    }

    pub(crate) fn file(&self) -> &str {
        &self.file
    }

    /// Where a field's value starts; the document start when the field has no position.
    pub(crate) fn origin(&self, field: &Field) -> FieldPosition {
        let s = &self.spans.spec;
        let child = |i: &usize| {
            s.children
                .get(*i)
                .or_else(|| s.finalize.children.get(*i - s.children.len()))
        };
        let lookup = |i: &usize| s.lookups.get(*i);
        let version = |i: &usize| s.crd.as_ref().and_then(|c| c.value.versions.get(*i));
        if let Field::ChildObject(i, path) = field
            && let Some(object) = child(i).and_then(|c| c.object.as_ref())
            && !self.text.is_empty()
        {
            let (line, column) = match path.as_str() {
                "" => (object.referenced.line(), object.referenced.column()),
                path => key_under(&self.text, object.referenced.line(), path),
            };
            return FieldPosition::of_scalar(&self.file, &self.text, line, column);
        }
        if let Field::Version(i) | Field::Schema(i, _) = field
            && let Some(v) = version(i)
            && !self.text.is_empty()
        {
            let (line, column) = match (field, &v.value.schema) {
                (Field::Schema(_, path), Some(schema)) => key_under(&self.text, schema.referenced.line(), path),
                _ => (v.referenced.line(), v.referenced.column()),
            };
            return FieldPosition::of_scalar(&self.file, &self.text, line, column);
        }
        let at: Option<&Spanned<Value>> = match field {
            Field::Definition => self.spans.metadata.as_ref(),
            Field::Parent => s.parent.as_ref(),
            Field::Crd => {
                return match &s.crd {
                    Some(span) if !self.text.is_empty() => FieldPosition::of_scalar(
                        &self.file,
                        &self.text,
                        span.referenced.line(),
                        span.referenced.column(),
                    ),
                    _ => self.origin(&Field::Definition),
                };
            }
            Field::Decorate => s.decorate.as_ref(),
            Field::AllowedNamespaces => s.allowed_namespaces.as_ref(),
            Field::ResyncSeconds => s.resync_seconds.as_ref(),
            Field::Rollout => s.rollout.as_ref(),
            Field::Helpers => s.helpers.as_ref(),
            Field::ChildName(i) => child(i).and_then(|c| c.name.as_ref()),
            Field::ChildTemplate(i) => child(i).and_then(|c| c.template.as_ref()),
            Field::ChildObject(i, _) => child(i).and_then(|c| c.object.as_ref()),
            Field::ChildUpdatePolicy(i) => child(i).and_then(|c| c.update_policy.as_ref()),
            Field::ChildReadyWhen(i) => child(i).and_then(|c| c.ready_when.as_ref()),
            Field::ChildIncludeWhen(i) => child(i).and_then(|c| c.include_when.as_ref()),
            Field::ChildDependsOn(i) => child(i).and_then(|c| c.depends_on.as_ref()),
            Field::LookupName(i) => lookup(i).and_then(|l| l.name.as_ref()),
            Field::LookupNameTemplate(i) => lookup(i).and_then(|l| l.name_template.as_ref()),
            Field::LookupNamespaceTemplate(i) => lookup(i).and_then(|l| l.namespace_template.as_ref()),
            Field::LookupSelector(i) => lookup(i).and_then(|l| l.selector.as_ref()),
            Field::StatusValue(k) => s.status.fields.get(k),
            Field::Condition(i) => s.status.conditions.get(*i).and_then(|c| c.when.as_ref()),
            Field::StatusTemplate => s.status.template.as_ref(),
            Field::FinalizeUntil => s.finalize.until.as_ref(),
            Field::FinalizeInherit => s.finalize.inherit_finalizers.as_ref(),
            Field::Conversion(i, true) => version(i).and_then(|v| v.value.conversion.to_storage.as_ref()),
            Field::Conversion(i, false) => version(i).and_then(|v| v.value.conversion.from_storage.as_ref()),
            Field::Version(_) | Field::Schema(..) => None,
        };
        match at.or(self.spans.metadata.as_ref()) {
            Some(span) if !self.text.is_empty() => {
                FieldPosition::of_scalar(&self.file, &self.text, span.referenced.line(), span.referenced.column())
            }
            _ => FieldPosition::detached(&self.file),
        }
    }
}

/// Where the key of the dotted `path` sits (line, column), searching down from `line`
/// one segment after the other; the last segment found, or `line` itself, when the
/// text does not say (a flow mapping on one line finds its line all the same).
fn key_under(text: &str, line: u64, path: &str) -> (u64, u64) {
    let lines: Vec<&str> = text.lines().collect();
    let mut at = (line, 1);
    let mut next = line.saturating_sub(1) as usize;
    for segment in path.split('.').filter(|s| !s.is_empty()) {
        let keys = [
            format!("{segment}:"),
            format!("\"{segment}\":"),
            format!("'{segment}':"),
        ];
        let found = lines.iter().enumerate().skip(next).find_map(|(n, l)| {
            keys.iter().find_map(|k| {
                l.match_indices(k.as_str())
                    .find(|(i, _)| l[..*i].trim_end().is_empty() || l[..*i].ends_with(['{', ' ', '-', ',']))
                    .map(|(i, _)| (n, i))
            })
        });
        let Some((n, column)) = found else { break };
        at = (n as u64 + 1, column as u64 + 1);
        next = n;
    }
    at
}

/// The top level of a definition file's document; unknown fields are errors.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Document {
    api_version: String,
    kind: String,
    metadata: kube::core::ObjectMeta,
    spec: OperatorDefinitionSpec,
    #[serde(default)]
    status: Option<Value>,
}

/// The positions of the fields errors point at. Unknown fields are ignored here: the
/// strict parse of [`Document`] has already accepted the document.
#[derive(Deserialize, Default, Debug, Clone)]
#[serde(rename_all = "camelCase", default)]
struct SpanDoc {
    metadata: Option<Spanned<Value>>,
    spec: SpanSpec,
}

#[derive(Deserialize, Default, Debug, Clone)]
#[serde(rename_all = "camelCase", default)]
struct SpanSpec {
    parent: Option<Spanned<Value>>,
    crd: Option<Spanned<SpanCrd>>,
    decorate: Option<Spanned<Value>>,
    allowed_namespaces: Option<Spanned<Value>>,
    resync_seconds: Option<Spanned<Value>>,
    rollout: Option<Spanned<Value>>,
    helpers: Option<Spanned<Value>>,
    children: Vec<SpanChild>,
    lookups: Vec<SpanLookup>,
    status: SpanStatus,
    finalize: SpanFinalize,
}

#[derive(Deserialize, Default, Debug, Clone)]
#[serde(rename_all = "camelCase", default)]
struct SpanCrd {
    versions: Vec<Spanned<SpanVersion>>,
}

#[derive(Deserialize, Default, Debug, Clone)]
#[serde(rename_all = "camelCase", default)]
struct SpanVersion {
    conversion: SpanConversion,
    schema: Option<Spanned<Value>>,
}

#[derive(Deserialize, Default, Debug, Clone)]
#[serde(rename_all = "camelCase", default)]
struct SpanConversion {
    to_storage: Option<Spanned<Value>>,
    from_storage: Option<Spanned<Value>>,
}

#[derive(Deserialize, Default, Debug, Clone)]
#[serde(rename_all = "camelCase", default)]
struct SpanFinalize {
    children: Vec<SpanChild>,
    until: Option<Spanned<Value>>,
    inherit_finalizers: Option<Spanned<Value>>,
}

#[derive(Deserialize, Default, Debug, Clone)]
#[serde(rename_all = "camelCase", default)]
struct SpanChild {
    name: Option<Spanned<Value>>,
    template: Option<Spanned<Value>>,
    object: Option<Spanned<Value>>,
    ready_when: Option<Spanned<Value>>,
    include_when: Option<Spanned<Value>>,
    depends_on: Option<Spanned<Value>>,
    update_policy: Option<Spanned<Value>>,
}

#[derive(Deserialize, Default, Debug, Clone)]
#[serde(rename_all = "camelCase", default)]
struct SpanLookup {
    name: Option<Spanned<Value>>,
    name_template: Option<Spanned<Value>>,
    namespace_template: Option<Spanned<Value>>,
    selector: Option<Spanned<Value>>,
}

#[derive(Deserialize, Default, Debug, Clone)]
#[serde(rename_all = "camelCase", default)]
struct SpanStatus {
    fields: std::collections::BTreeMap<String, Spanned<Value>>,
    conditions: Vec<SpanCondition>,
    template: Option<Spanned<Value>>,
}

#[derive(Deserialize, Default, Debug, Clone)]
#[serde(rename_all = "camelCase", default)]
struct SpanCondition {
    when: Option<Spanned<Value>>,
}

/// One document of a stream: its text padded so that line numbers match the file.
struct Chunk {
    text: String,
}

/// Splits a YAML stream at `---` markers in column 0 (which YAML forbids inside content),
/// padding each document with empty lines so positions stay those of the file.
fn split(text: &str) -> Vec<Chunk> {
    let mut chunks = Vec::new();
    let mut current = String::new();
    let mut lines_before = 0usize;
    let mut has_content = false;
    for (n, line) in text.split_inclusive('\n').enumerate() {
        let is_marker = line.starts_with("---") && line[3..].chars().next().is_none_or(char::is_whitespace);
        if is_marker {
            if has_content {
                chunks.push(Chunk {
                    text: std::mem::take(&mut current),
                });
            }
            lines_before = n + 1;
            current = "\n".repeat(n);
            current.push_str(&line[3..]);
            has_content = !line[3..].trim().is_empty() && !line[3..].trim_start().starts_with('#');
            continue;
        }
        if current.is_empty() {
            current = "\n".repeat(lines_before);
        }
        let trimmed = line.trim();
        if !trimmed.is_empty() && !trimmed.starts_with('#') && trimmed != "..." {
            has_content = true;
        }
        current.push_str(line);
    }
    if has_content {
        chunks.push(Chunk { text: current });
    }
    chunks
}

/// Reads every definition of a file, each either with its locator or as an error.
pub(crate) fn read(file: &str, text: &str) -> Vec<Result<(OperatorDefinition, Locator), Box<Diagnostic>>> {
    split(text)
        .into_iter()
        .map(|chunk| read_one(file, text, &chunk.text))
        .collect()
}

fn read_one(file: &str, whole: &str, chunk: &str) -> Result<(OperatorDefinition, Locator), Box<Diagnostic>> {
    let fail = |line: u64, column: u64, error: CompileError| {
        Box::new(Diagnostic {
            file: file.to_string(),
            line,
            column,
            definition: None,
            field: None,
            error,
        })
    };
    // Another kind of object is said to be one before its fields are held to a
    // definition's: "found v1 ConfigMap", not "unknown field `data`".
    let loose: Value = crate::yaml::document(chunk).map_err(|e| fail(e.line, e.column, CompileError::Yaml(e)))?;
    let text = |key: &str| loose.get(key).and_then(Value::as_str).unwrap_or_default().to_string();
    let (api_version, kind) = (text("apiVersion"), text("kind"));
    if !kind.is_empty() && (api_version != API_VERSION || kind != KIND) {
        // A chunk keeps the lines before it as blank lines, so this is the file's line.
        let line = chunk
            .lines()
            .position(|l| l.starts_with("kind:"))
            .map_or(1, |i| i as u64 + 1);
        return Err(fail(line, 1, CompileError::NotADefinition { api_version, kind }));
    }
    let doc: Document = crate::yaml::document(chunk).map_err(|e| fail(e.line, e.column, CompileError::Yaml(e)))?;
    let spans: SpanDoc = crate::yaml::document(chunk).map_err(|e| fail(e.line, e.column, CompileError::Yaml(e)))?;
    let locator = Locator {
        file: file.to_string(),
        text: whole.to_string(),
        spans,
    };
    if doc.api_version != API_VERSION || doc.kind != KIND {
        let origin = locator.origin(&Field::Definition);
        return Err(fail(
            origin.line,
            1,
            CompileError::NotADefinition {
                api_version: doc.api_version,
                kind: doc.kind,
            },
        ));
    }
    let mut resource = OperatorDefinition::new(doc.metadata.name.as_deref().unwrap_or_default(), doc.spec);
    resource.metadata = doc.metadata;
    if let Some(status) = doc.status {
        resource.status = serde_json::from_value(status).ok();
    }
    Ok((resource, locator))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_keeps_line_numbers() {
        let chunks = split("a: 1\n---\nb: 2\n--- # c\n\n---\nc: 3\n");
        assert_eq!(chunks.len(), 3);
        assert_eq!(chunks[1].text.lines().position(|l| l == "b: 2"), Some(2));
        assert_eq!(chunks[2].text.lines().position(|l| l == "c: 3"), Some(6));
    }

    #[test]
    fn a_leading_marker_is_not_an_empty_document() {
        assert_eq!(split("---\na: 1\n").len(), 1);
        assert_eq!(split("# just a comment\n").len(), 0);
    }
}
