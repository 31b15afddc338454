//! Golden cases for `stencil test`: a parent plus observed objects and lookups in, the
//! expected children, waiting list and status out, compared with a readable diff.
//!
//! A case is a file `NAME.case.yaml` beside `NAME.expected.yaml`:
//!
//! ```yaml
//! definition: ../../operators/database.yaml   # relative to the case file
//! definitionName: databases.stencil.dev       # when the file holds several
//! parent: {...}                               # or parentFile: path
//! observed: [...]                             # objects carrying stencil.dev/child
//! lookups: [...]
//! convertTo: v1alpha1                         # instead: the parent converted, and back
//! ```
//!
//! A case with `convertTo` expects `{converted: ...}`, the parent at that version, and
//! fails when converting it back loses a field.
//!
//! In an expected file the string `<any>` matches any value, for output that is random
//! by design (`random_password`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use crate::compile::CompiledDefinition;
use crate::render::{self, RenderInput};
use crate::{labels, yaml};

/// The wildcard an expected file may hold in place of any value.
pub const ANY: &str = "<any>";

/// Why a case could not be run (as opposed to running and not matching).
#[derive(Debug, thiserror::Error)]
pub enum CaseError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A file is not the YAML it should be.
    #[error("{path}:{source}")]
    Yaml {
        /// The file.
        path: String,
        /// Where and why.
        source: yaml::YamlError,
    },
    /// The case's definition file did not compile or does not hold the named definition.
    #[error("{0}")]
    Definition(String),
    /// The case's inputs are inconsistent.
    #[error("{path}: {message}")]
    Input {
        /// The case file.
        path: String,
        /// What to fix.
        message: String,
    },
    /// The render failed.
    #[error("{0}")]
    Render(#[from] render::RenderFailure),
    /// The conversion failed.
    #[error("{0}")]
    Convert(#[from] crate::convert::ConvertError),
    /// Converting the parent there and back loses fields.
    #[error("{path}: a round trip through {version} loses {}", fields.join(", "))]
    Lossy {
        /// The case file.
        path: String,
        /// The version converted to.
        version: String,
        /// The paths lost.
        fields: Vec<String>,
    },
}

/// The inputs of a case file.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Case {
    definition: PathBuf,
    #[serde(default)]
    definition_name: Option<String>,
    #[serde(default)]
    parent: Option<Value>,
    #[serde(default)]
    parent_file: Option<PathBuf>,
    #[serde(default)]
    observed: Vec<Value>,
    #[serde(default)]
    lookups: Vec<Value>,
    #[serde(default)]
    convert_to: Option<String>,
}

/// The outcome of one case.
#[derive(Debug)]
pub enum Outcome {
    /// The render matched the expected file.
    Passed,
    /// It did not; the diff is expected → actual.
    Failed(String),
    /// The expected file was written.
    Updated,
}

/// Observed objects as the controller would see them around a parent.
#[derive(Debug, Default)]
pub struct Observed {
    /// The parent's children by child name: objects with a `stencil.dev/child` label and
    /// no other parent's `stencil.dev/parent-uid`.
    pub children: BTreeMap<String, Vec<Value>>,
    /// Every other object: made by hand, by another controller, or another parent's. A
    /// desired object that one of them names is a conflict or an adoption.
    pub existing: Vec<Value>,
}

/// Splits observed objects into the parent's children and objects that are not its own.
pub fn split_observed(objects: Vec<Value>, parent: &Value) -> Observed {
    let uid = parent.pointer("/metadata/uid").and_then(Value::as_str);
    let mut observed = Observed::default();
    for obj in objects {
        let label = |key: &str| {
            obj.pointer("/metadata/labels")
                .and_then(|l| l.get(key))
                .and_then(Value::as_str)
        };
        let theirs = label(labels::PARENT_UID).is_some_and(|p| Some(p) != uid);
        match label(labels::CHILD) {
            Some(child) if !theirs => {
                let child = child.to_string();
                observed.children.entry(child).or_default().push(obj);
            }
            _ => observed.existing.push(obj),
        }
    }
    observed
}

/// Picks the one definition a command means: the named one, or the only one.
pub fn pick<'a>(
    defs: &'a [CompiledDefinition],
    name: Option<&str>,
    file: &str,
) -> Result<&'a CompiledDefinition, String> {
    match name {
        Some(n) => defs
            .iter()
            .find(|d| d.name == n)
            .ok_or_else(|| format!("{file}: no definition named {n}")),
        None if defs.len() == 1 => Ok(&defs[0]),
        None => Err(format!("{file} holds {} definitions; name one", defs.len())),
    }
}

fn read(path: &Path) -> Result<String, CaseError> {
    std::fs::read_to_string(path).map_err(|source| CaseError::Io {
        path: path.display().to_string(),
        source,
    })
}

fn parse<T: serde::de::DeserializeOwned>(path: &Path, text: &str) -> Result<T, CaseError> {
    yaml::document(text).map_err(|source| CaseError::Yaml {
        path: path.display().to_string(),
        source,
    })
}

/// Every `*.case.yaml` file at or below `dir`, sorted.
pub fn find_cases(dir: &Path) -> Result<Vec<PathBuf>, CaseError> {
    let is_case = |name: &str| name.ends_with(".case.yaml");
    let files = crate::source::files::files_below(dir, &is_case).map_err(|e| CaseError::Io {
        path: e.path,
        source: e.source,
    })?;
    Ok(files
        .into_iter()
        .filter(|f| f.to_string_lossy().ends_with(".case.yaml"))
        .collect())
}

/// The expected-output file beside a case file.
pub fn expected_path(case: &Path) -> PathBuf {
    let name = case.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    case.with_file_name(name.replace(".case.yaml", ".expected.yaml"))
}

/// Renders a case and returns the output as `stencil render -o json` would.
pub fn render_case(case_path: &Path) -> Result<Value, CaseError> {
    let case: Case = parse(case_path, &read(case_path)?)?;
    let dir = case_path.parent().unwrap_or(Path::new("."));
    let def_path = dir.join(&case.definition);
    let loaded = crate::source::files::load(std::slice::from_ref(&def_path))
        .map_err(|e| CaseError::Definition(e.to_string()))?;
    if !loaded.diagnostics.is_empty() {
        let lines: Vec<String> = loaded.diagnostics.iter().map(ToString::to_string).collect();
        return Err(CaseError::Definition(lines.join("\n")));
    }
    let def = pick(
        &loaded.definitions,
        case.definition_name.as_deref(),
        &def_path.display().to_string(),
    )
    .map_err(CaseError::Definition)?;
    let input_error = |message: String| CaseError::Input {
        path: case_path.display().to_string(),
        message,
    };
    let parent = match (case.parent, case.parent_file) {
        (Some(p), None) => p,
        (None, Some(f)) => {
            let path = dir.join(f);
            parse(&path, &read(&path)?)?
        }
        _ => return Err(input_error("give exactly one of parent and parentFile".into())),
    };
    if let Some(version) = &case.convert_to {
        let (converted, lost) = round_trip(def, &parent, version)?;
        if !lost.is_empty() {
            return Err(CaseError::Lossy {
                path: case_path.display().to_string(),
                version: version.clone(),
                fields: lost,
            });
        }
        return Ok(serde_json::json!({ "converted": converted }));
    }
    let observed = split_observed(case.observed, &parent);
    Ok(render_offline(def, &loaded.definitions, &parent, &observed, &case.lookups)?.to_json())
}

/// The offline render `stencil render` and `stencil test` share: the parent gets its CRD's
/// structural defaults and is checked against the schema, as the API server would;
/// lookups are answered from `lookup_objects`, scopes come from the definitions loaded
/// beside `def`, and
/// desired objects that `observed.existing` names are settled as the controller would
/// (a conflict, or an adoption); a parent being deleted also shows its finalize step.
pub fn render_offline(
    def: &CompiledDefinition,
    loaded: &[CompiledDefinition],
    parent: &Value,
    observed: &Observed,
    lookup_objects: &[Value],
) -> Result<render::RenderOutput, render::RenderFailure> {
    let mut admitted = parent.clone();
    if let Some((version, schema)) = crate::structural::schema_of(def, parent) {
        crate::structural::apply_defaults(schema, &mut admitted);
        let problems = crate::structural::violations(schema, &admitted);
        if !problems.is_empty() {
            let version = version.to_string();
            return Err(render::RenderFailure(vec![render::RenderError::Schema {
                version,
                problems,
            }]));
        }
    }
    let parent = &admitted;
    let scopes = crate::compile::scopes(loaded);
    let requests = render::lookup_requests(def, parent, &scopes)?;
    let lookups = render::match_lookups(&requests, lookup_objects);
    let input = RenderInput {
        parent,
        observed: &observed.children,
        lookups: &lookups,
        scopes: &scopes,
        served: &[],
    };
    let mut out = render::render(def, input)?;
    if def.spec.finalize.has_step() && parent.pointer("/metadata/deletionTimestamp").is_some() {
        out.finalize = Some(render::render_finalize(def, input)?);
    }
    let uid = parent
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default();
    crate::ownership::settle(&mut out, &observed.existing, uid, &def.name, def.spec.is_decorator());
    Ok(out)
}

/// `object` converted to `version`, and the fields that converting it back to its own
/// version would lose (none, when the conversion is lossless).
pub fn round_trip(
    def: &CompiledDefinition,
    object: &Value,
    version: &str,
) -> Result<(Value, Vec<String>), crate::convert::ConvertError> {
    let converted = crate::convert::convert(def, object, version)?;
    let own = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .and_then(|v| v.rsplit_once('/'))
        .map_or("", |(_, v)| v);
    let back = crate::convert::convert(def, &converted, own)?;
    Ok((converted, crate::convert::lost_fields(object, &back)))
}

/// Runs one case against its expected file, or rewrites that file when `update` is set.
pub fn run_case(case_path: &Path, update: bool) -> Result<Outcome, CaseError> {
    let actual = render_case(case_path)?;
    let expected_file = expected_path(case_path);
    let actual_text = yaml::to_string(&actual).map_err(|e| CaseError::Definition(e.to_string()))?;
    if update {
        std::fs::write(&expected_file, &actual_text).map_err(|source| CaseError::Io {
            path: expected_file.display().to_string(),
            source,
        })?;
        return Ok(Outcome::Updated);
    }
    let expected_text = read(&expected_file)?;
    let expected: Value = parse(&expected_file, &expected_text)?;
    if matches(&expected, &actual) {
        return Ok(Outcome::Passed);
    }
    let expected_canonical = yaml::to_string(&expected).unwrap_or(expected_text);
    let diff = similar::TextDiff::from_lines(&expected_canonical, &actual_text)
        .unified_diff()
        .context_radius(3)
        .header(&expected_file.display().to_string(), "rendered")
        .to_string();
    Ok(Outcome::Failed(diff))
}

/// Whether `actual` matches `expected`, where `<any>` in expected matches anything.
pub fn matches(expected: &Value, actual: &Value) -> bool {
    match (expected, actual) {
        (Value::String(s), _) if s == ANY => true,
        (Value::Object(e), Value::Object(a)) => {
            e.len() == a.len() && e.iter().all(|(k, v)| a.get(k).is_some_and(|av| matches(v, av)))
        }
        (Value::Array(e), Value::Array(a)) => e.len() == a.len() && e.iter().zip(a).all(|(x, y)| matches(x, y)),
        _ => expected == actual,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn any_matches_any_value_but_nothing_else_is_loose() {
        assert!(matches(
            &json!({"a": "<any>", "b": [1]}),
            &json!({"a": {"x": 1}, "b": [1]})
        ));
        assert!(!matches(&json!({"a": "<any>"}), &json!({"a": 1, "b": 2})));
        assert!(!matches(&json!([1, 2]), &json!([1])));
    }

    #[test]
    fn objects_without_the_child_label_or_of_another_parent_are_not_children() {
        let parent = json!({"metadata": {"name": "p", "uid": "mine"}});
        let child =
            json!({"kind": "Secret", "metadata": {"name": "s", "labels": {"stencil.dev/child": "credentials"}}});
        let theirs = json!({"kind": "Secret", "metadata": {"name": "t",
            "labels": {"stencil.dev/child": "credentials", "stencil.dev/parent-uid": "other"}}});
        let hand_made = json!({"kind": "Secret", "metadata": {"name": "h"}});
        let observed = split_observed(vec![child, theirs, hand_made], &parent);
        assert_eq!(observed.children["credentials"].len(), 1);
        assert_eq!(observed.existing.len(), 2);
    }

    fn website() -> CompiledDefinition {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/operators/website.yaml");
        let (mut defs, diags) = crate::compile::compile_file(path, &std::fs::read_to_string(path).unwrap());
        assert!(diags.0.is_empty(), "{diags}");
        defs.remove(0)
    }

    #[test]
    fn an_offline_parent_gets_its_schema_defaults_as_the_api_server_gives_them() {
        let text = r#"apiVersion: stencil.dev/v1alpha1
kind: OperatorDefinition
metadata: {name: widgets.example.com}
spec:
  parent: {apiVersion: example.com/v1, kind: Widget}
  crd:
    names: {plural: widgets}
    versions:
      - name: v1
        served: true
        storage: true
        schema:
          openAPIV3Schema:
            type: object
            properties:
              spec:
                type: object
                default: {}
                properties:
                  size: {type: integer, default: 3}
  children:
    - name: cm
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata:
          name: {{ parent.metadata.name }}
        data:
          size: {{ parent.spec.size | quote }}
"#;
        let (defs, diags) = crate::compile::compile_file("w.yaml", text);
        assert!(diags.0.is_empty(), "{diags}");
        // No spec at all: the API server would store spec.size = 3, and so does the render.
        let parent =
            json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "n"}});
        let out = render_offline(&defs[0], &defs, &parent, &Observed::default(), &[]).unwrap();
        assert_eq!(out.children[0].object["data"]["size"], "3");
    }

    #[test]
    fn an_offline_parent_that_breaks_its_schema_is_refused_with_the_path() {
        let def = website();
        let parent = json!({"apiVersion": "examples.stencil.dev/v1", "kind": "Website",
            "metadata": {"name": "docs", "namespace": "web"}, "spec": {"replicas": 99}});
        let err = render_offline(&def, std::slice::from_ref(&def), &parent, &Observed::default(), &[]).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("schema of v1"), "{text}");
        assert!(
            text.contains(".spec.replicas: 99 is more than the maximum 50"),
            "{text}"
        );
        assert!(text.contains(".spec.content: is required"), "{text}");
    }
}
