//! The first compile stage: each CRD version's compact schema expanded into its OpenAPI
//! v3 schema ([`crate::compact_schema`]), so every later stage, and everything that reads
//! the compiled definition (the CRD, offline defaults, the breaking-change guard,
//! conversion), sees one form; a lone version made the storage version; and a compact
//! status checked against the status fields the definition writes, which the API server
//! would otherwise drop without a word.

use std::borrow::Cow;

use serde_json::Value;

use super::CompileError;
use super::field::Field;
use crate::compact_schema::{Compact, expand};
use crate::definition::{CrdVersion, OperatorDefinitionSpec};

/// `spec` with every compact schema expanded, and the problems found on the way; `spec`
/// itself when no version is compact.
pub(super) fn expand_schemas(
    spec: &OperatorDefinitionSpec,
) -> (Cow<'_, OperatorDefinitionSpec>, Vec<(Field, CompileError)>) {
    let Some(crd) = &spec.crd else {
        return (Cow::Borrowed(spec), Vec::new());
    };
    let mut problems = Vec::new();
    for (i, v) in crd.versions.iter().enumerate() {
        if !v.schema.is_compact() && v.schema.open_api_v3_schema.is_null() {
            let why = "a version's schema is `openAPIV3Schema`, or the compact `spec` (with `status` and `types`)";
            problems.push((Field::Schema(i, String::new()), CompileError::Invalid(why.into())));
        }
    }
    let lone_unstored = matches!(crd.versions.as_slice(), [v] if !v.storage);
    if !lone_unstored && !crd.versions.iter().any(|v| v.schema.is_compact()) {
        return (Cow::Borrowed(spec), problems);
    }
    let mut expanded = spec.clone();
    let versions = &mut expanded.crd.as_mut().expect("the spec has a crd").versions;
    if let [lone] = versions.as_mut_slice() {
        // One version is the storage version; saying so adds nothing.
        lone.storage = true;
    }
    for (i, v) in versions.iter_mut().enumerate() {
        if v.schema.is_compact() {
            problems.extend(expand_version(i, v));
            problems.extend(undeclared_status(spec, i, v));
        }
    }
    (Cow::Owned(expanded), problems)
}

/// Expands version `i`'s compact schema in place; every bad field is a problem.
fn expand_version(i: usize, v: &mut CrdVersion) -> Vec<(Field, CompileError)> {
    if !v.schema.open_api_v3_schema.is_null() {
        let why = "write the schema as `openAPIV3Schema` or in the compact form (`spec`, `status`, `types`), not both";
        return vec![(Field::Schema(i, String::new()), CompileError::Invalid(why.into()))];
    }
    let compact = Compact {
        spec: v.schema.spec.as_ref(),
        status: v.schema.status.as_ref(),
        types: v.schema.types.as_ref(),
    };
    match expand(compact) {
        Ok(schema) => {
            v.schema.open_api_v3_schema = schema;
            v.schema.spec = None;
            v.schema.status = None;
            v.schema.types = None;
            Vec::new()
        }
        Err(errors) => errors
            .into_iter()
            .map(|e| (Field::Schema(i, e.path.clone()), CompileError::Schema(e)))
            .collect(),
    }
}

/// The status fields the definition writes that version `i`'s compact status does not
/// declare (the version was expanded in `v`; `spec` still holds its compact status).
fn undeclared_status(spec: &OperatorDefinitionSpec, i: usize, v: &CrdVersion) -> Vec<(Field, CompileError)> {
    let declared = v.schema.open_api_v3_schema.pointer("/properties/status/properties");
    let compact_status = spec
        .crd
        .as_ref()
        .and_then(|c| c.versions.get(i))
        .and_then(|v| v.schema.status.as_ref());
    let (Some(Value::Object(declared)), Some(_)) = (declared, compact_status) else {
        return Vec::new();
    };
    spec.status
        .fields
        .keys()
        .filter(|k| !declared.contains_key(*k))
        .map(|k| {
            let why = format!(
                "version {} declares no status field `{k}`, so the API server would drop what this rule writes; add `{k}: <type>` to its schema's status",
                v.name
            );
            (Field::StatusValue(k.clone()), CompileError::Invalid(why))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::compile::{CompileError, compile_file};

    /// A definition whose CRD's v1 schema is `schema` (indented under `schema:`), with a
    /// status field `phase`.
    fn definition(schema: &str) -> String {
        let schema: String = schema.lines().map(|l| format!("          {l}\n")).collect();
        format!(
            r#"apiVersion: stencil.dev/v1alpha1
kind: OperatorDefinition
metadata:
  name: databases.example.com
spec:
  parent:
    apiVersion: example.com/v1
    kind: Database
  crd:
    names: {{plural: databases}}
    versions:
      - name: v1
        served: true
        storage: true
        schema:
{schema}  status:
    fields:
      phase: $.parent.spec.engine
  children:
    - name: config
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata:
          name: {{{{ parent.metadata.name }}}}
"#
        )
    }

    const COMPACT: &str = r#"spec:
  engine: string | required=true enum="postgresql,mysql" immutable=true
  replicas: integer | default=1 minimum=1 maximum=10
  storage:
    size: quantity | default=1Gi
status:
  phase: string"#;

    /// Where line `n` (1-based) of [`definition`]'s schema sits in the file.
    const SCHEMA_LINE: u64 = 16;

    #[test]
    fn a_compact_schema_compiles_to_the_openapi_a_crd_holds() {
        let (defs, diags) = compile_file("d.yaml", &definition(COMPACT));
        assert!(diags.0.is_empty(), "{diags}");
        let schema = &defs[0].spec.crd.as_ref().unwrap().versions[0].schema;
        assert!(!schema.is_compact(), "the compiled definition holds one form");
        let spec = &schema.open_api_v3_schema["properties"]["spec"];
        assert_eq!(spec["required"], json!(["engine"]));
        assert_eq!(spec["properties"]["engine"]["enum"], json!(["postgresql", "mysql"]));
        assert_eq!(spec["properties"]["storage"]["default"], json!({"size": "1Gi"}));
        let crd = crate::crd::parent_crd(&defs[0], None).unwrap().expect("a CRD");
        let v1 = &crd.spec.versions[0];
        let openapi = v1.schema.as_ref().unwrap().open_api_v3_schema.as_ref().unwrap();
        assert_eq!(openapi.required, Some(vec!["spec".to_string()]));
    }

    #[test]
    fn a_bad_line_is_reported_at_its_file_line_and_column() {
        for (line, bad, expect) in [
            (2, "  engine: strng", "unknown type `strng`"),
            (3, "  replicas: integer | minimum=one", "`one` is not a number"),
            (3, "  replicas: string | maxItems=3", "maxItems applies to lists"),
            (3, "  replicas: integer | default=many", "`many` is not an integer"),
            (5, "    size: quantity | monotonic=maybe", "not true or false"),
        ] {
            let mut text: Vec<&str> = COMPACT.lines().collect();
            text[line - 1] = bad;
            let (_, diags) = compile_file("d.yaml", &definition(&text.join("\n")));
            assert_eq!(diags.0.len(), 1, "{bad}: {diags}");
            let d = &diags.0[0];
            assert!(matches!(d.error, CompileError::Schema(_)), "{d}");
            assert!(d.to_string().contains(expect), "{bad}: {d}");
            assert_eq!(d.line, SCHEMA_LINE + line as u64 - 1, "{bad}: {d}");
            let key = bad.trim_start().split(':').next().unwrap();
            assert_eq!(d.column, bad.find(key).unwrap() as u64 + 11, "{bad}: {d}");
        }
    }

    #[test]
    fn every_bad_line_of_a_version_is_reported_at_its_line() {
        let bad = COMPACT
            .replace("string | required=true", "strng | required=true")
            .replace("minimum=1", "minimum=one");
        let (_, diags) = compile_file("d.yaml", &definition(&bad));
        let lines: Vec<u64> = diags.0.iter().map(|d| d.line).collect();
        assert_eq!(lines, [SCHEMA_LINE + 1, SCHEMA_LINE + 2], "{diags}");
    }

    #[test]
    fn a_status_field_the_schema_does_not_declare_is_refused() {
        let (_, diags) = compile_file(
            "d.yaml",
            &definition(&COMPACT.replace("  phase: string", "  endpoint: string")),
        );
        assert_eq!(diags.0.len(), 1, "{diags}");
        let message = diags.0[0].to_string();
        assert!(message.contains("declares no status field `phase`"), "{message}");
    }

    #[test]
    fn a_lone_version_is_the_storage_version_without_saying_so() {
        let lone = definition(COMPACT).replace("        storage: true\n", "");
        let (defs, diags) = compile_file("d.yaml", &lone);
        assert!(diags.0.is_empty(), "{diags}");
        let crd = crate::crd::parent_crd(&defs[0], None).unwrap().expect("a CRD");
        assert!(crd.spec.versions[0].storage);
        let two = lone.replace(
            "      - name: v1\n",
            "      - name: v2\n        schema:\n          spec: {a: string}\n      - name: v1\n",
        );
        let (_, diags) = compile_file("d.yaml", &two);
        assert!(diags.to_string().contains("storage"), "{diags}");
    }

    #[test]
    fn both_forms_or_neither_are_refused() {
        let both = format!("openAPIV3Schema: {{type: object}}\n{COMPACT}");
        let (_, diags) = compile_file("d.yaml", &definition(&both));
        assert!(diags.to_string().contains("not both"), "{diags}");
        let (_, diags) = compile_file("d.yaml", &definition("{}"));
        assert!(
            diags.to_string().contains("a version's schema is `openAPIV3Schema`"),
            "{diags}"
        );
    }

    #[test]
    fn a_version_problem_is_reported_at_its_version() {
        let two = definition(COMPACT).replace(
            "      - name: v1\n",
            "      - name: v2\n        served: true\n        storage: false\n        schema:\n          spec: {a: string}\n      - name: v1\n",
        );
        let (_, diags) = compile_file("d.yaml", &two);
        let d = diags
            .0
            .iter()
            .find(|d| d.to_string().contains("differs from the storage version"));
        assert_eq!(d.map(|d| d.line), Some(12), "{diags}");
    }
}
