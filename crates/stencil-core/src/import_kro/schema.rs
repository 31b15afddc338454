//! An RGD's `spec.schema` as the parent: its kind and group, its CRD in the compact form
//! (kro's SimpleSchema lines are that form's syntax) and its status as CEL status fields.

use serde_json::{Map, Value, json};

use super::Refusal;
use crate::cel_dialect;

/// kro's group when the schema names none.
const DEFAULT_GROUP: &str = "kro.run";

/// The parent an RGD declares.
#[derive(Debug, Clone)]
pub(crate) struct Parent {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    /// The parent's CRD, as `spec.crd`.
    pub crd: Value,
    /// `status.<name>` and the CEL rule that computes it.
    pub status_fields: Vec<(String, String)>,
}

impl Parent {
    /// `<plural>.<group>`: the CRD's name, the same under kro.
    pub(crate) fn definition_name(&self) -> String {
        format!("{}.{}", self.plural, self.group)
    }
}

/// The parent `schema` declares; `None` when it cannot be read at all.
pub(super) fn translate(schema: Option<&Value>, refusals: &mut Vec<Refusal>) -> Option<Parent> {
    let Some(schema) = schema.and_then(Value::as_object) else {
        refusals.push(Refusal::of(None, "spec.schema", "the RGD has no schema"));
        return None;
    };
    let allowed = [
        "apiVersion",
        "kind",
        "group",
        "spec",
        "types",
        "status",
        "scope",
        "additionalPrinterColumns",
        "shortNames",
        "categories",
    ];
    for key in schema.keys().filter(|k| !allowed.contains(&k.as_str())) {
        let why = match key.as_str() {
            "metadata" => {
                "labels and annotations on the CRD: Stencil writes the CRD with its own; add yours with a decorator or after the takeover"
            }
            _ => "Stencil has no such schema field",
        };
        refusals.push(Refusal::of(None, &format!("schema.{key}"), why));
    }
    let text = |key: &str| schema.get(key).and_then(Value::as_str).map(str::to_string);
    let (Some(kind), Some(version)) = (text("kind"), text("apiVersion")) else {
        refusals.push(Refusal::of(
            None,
            "spec.schema",
            "the schema needs `kind` and `apiVersion`",
        ));
        return None;
    };
    let group = text("group").unwrap_or_else(|| DEFAULT_GROUP.to_string());
    let plural = plural(&kind.to_lowercase());
    let status_fields = status_fields(schema.get("status"), refusals);
    Some(Parent {
        crd: crd(schema, &plural, &version),
        group,
        version,
        kind,
        plural,
        status_fields,
    })
}

/// The CRD in the compact form, with kro's printer columns when the RGD names none.
fn crd(schema: &Map<String, Value>, plural: &str, version: &str) -> Value {
    let mut names = json!({"plural": plural});
    for key in ["shortNames", "categories"] {
        if let Some(v) = schema.get(key) {
            names[key] = v.clone();
        }
    }
    let mut compact = Map::new();
    compact.insert("spec".into(), schema.get("spec").cloned().unwrap_or_else(|| json!({})));
    if let Some(types) = schema.get("types") {
        compact.insert("types".into(), types.clone());
    }
    let columns = schema
        .get("additionalPrinterColumns")
        .cloned()
        .unwrap_or_else(kro_columns);
    let mut crd = json!({
        "names": names,
        "versions": [{"name": version, "served": true, "storage": true,
            "schema": compact, "additionalPrinterColumns": columns}],
    });
    if let Some(scope) = schema.get("scope") {
        crd["scope"] = scope.clone();
    }
    crd
}

/// The columns kro gives an instance CRD: its state, its Ready condition, its age.
fn kro_columns() -> Value {
    json!([
        {"name": "State", "type": "string", "jsonPath": ".status.state"},
        {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ])
}

/// Each top-level field of kro's status as a CEL rule: a lone expression as it is, text
/// around expressions as a concatenation, a mapping as a CEL map.
fn status_fields(status: Option<&Value>, refusals: &mut Vec<Refusal>) -> Vec<(String, String)> {
    let Some(status) = status.and_then(Value::as_object) else {
        return Vec::new();
    };
    let mut fields = Vec::new();
    for (name, value) in status {
        if matches!(name.as_str(), "conditions" | "state") {
            let why = "kro reserves it; Stencil writes `conditions` itself and keeps kro's `state` through the status template";
            refusals.push(Refusal::of(None, &format!("schema.status.{name}"), why));
            continue;
        }
        match cel_value(value) {
            Ok(expression) => fields.push((name.clone(), format!("${{{expression}}}"))),
            Err(why) => refusals.push(Refusal::of(None, &format!("schema.status.{name}"), why)),
        }
    }
    fields
}

/// `value`, with its `${...}` strings, as one CEL expression.
pub(super) fn cel_value(value: &Value) -> Result<String, String> {
    match value {
        Value::String(text) => string_expression(text),
        Value::Object(members) => {
            let entries: Result<Vec<String>, String> = members
                .iter()
                .map(|(k, v)| Ok(format!("{}: {}", quoted(k), cel_value(v)?)))
                .collect();
            Ok(format!("{{{}}}", entries?.join(", ")))
        }
        Value::Array(items) => {
            let items: Result<Vec<String>, String> = items.iter().map(cel_value).collect();
            Ok(format!("[{}]", items?.join(", ")))
        }
        other => Ok(other.to_string()),
    }
}

/// A string with `${...}` segments as one CEL expression: a lone one as it is, text and
/// expressions joined with `+`, each expression through `string()`.
fn string_expression(text: &str) -> Result<String, String> {
    let segments = cel_dialect::segments(text).map_err(|e| e.to_string())?;
    match segments.as_slice() {
        [cel_dialect::Segment::Expression(e)] => Ok(e.clone()),
        segments => Ok(segments
            .iter()
            .map(|s| match s {
                cel_dialect::Segment::Text(t) => quoted(t),
                cel_dialect::Segment::Expression(e) => format!("string({e})"),
            })
            .collect::<Vec<_>>()
            .join(" + ")),
    }
}

/// `text` as a CEL string literal.
fn quoted(text: &str) -> String {
    serde_json::to_string(text).expect("a string serializes")
}

/// English plurals as kro forms its CRDs' (the lower-cased kind through Go's `flect`):
/// the common rules, which cover kinds such as `Policy`, `Ingress`, `Mesh` and `Proxy`.
pub(super) fn plural(singular: &str) -> String {
    const IRREGULAR: [(&str, &str); 6] = [
        ("person", "people"),
        ("child", "children"),
        ("index", "indices"),
        ("status", "statuses"),
        ("data", "data"),
        ("series", "series"),
    ];
    for (one, many) in IRREGULAR {
        if let Some(stem) = singular.strip_suffix(one) {
            return format!("{stem}{many}");
        }
    }
    let consonant_y = singular.ends_with('y') && !singular[..singular.len() - 1].ends_with(['a', 'e', 'i', 'o', 'u']);
    if consonant_y {
        format!("{}ies", &singular[..singular.len() - 1])
    } else if ["s", "x", "z", "ch", "sh"].iter().any(|e| singular.ends_with(e)) {
        format!("{singular}es")
    } else {
        format!("{singular}s")
    }
}
