//! The way back: an `openAPIV3Schema` written in the compact form, when that loses
//! nothing. Each node becomes a line or a mapping of fields; an object or list item that
//! needs markers of its own inside a list becomes a named type. The result is expanded
//! again and must give the schema back exactly; anything else is refused with the first
//! place the two differ, so a rewrite can never change a CRD.

use serde_json::{Map, Value, json};

use super::types;
use super::{Compact, expand};

/// The compact form of a schema: `spec`, `status` and `types` as YAML-ready JSON.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Written {
    /// The spec's fields, if the schema has a spec.
    pub spec: Option<Value>,
    /// The status's fields, if the schema declares any beyond Stencil's own.
    pub status: Option<Value>,
    /// Named types made for list items that carry their own markers.
    pub types: Option<Value>,
}

/// `schema` in the compact form, or why that would not be lossless (what stays expanded).
pub fn compact(schema: &Value) -> Result<Written, String> {
    let mut writer = Writer::default();
    let root = schema.as_object().ok_or("the schema is not a mapping")?;
    let known = ["type", "properties", "required"];
    if let Some(key) = root.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(format!(
            "the root carries `{key}`, which the compact form does not write"
        ));
    }
    let props = root.get("properties").and_then(Value::as_object);
    let field = |name: &str| props.and_then(|p| p.get(name));
    if let Some(key) = props
        .into_iter()
        .flatten()
        .map(|(k, _)| k)
        .find(|k| *k != "spec" && *k != "status")
    {
        return Err(format!("the root's property `{key}` is not spec or status"));
    }
    let spec = field("spec").map(|s| writer.fields(s, "spec")).transpose()?;
    let status = match field("status") {
        Some(s) if s.get("x-kubernetes-preserve-unknown-fields") == Some(&json!(true)) => None,
        Some(s) => Some(writer.fields(&without_stencils_status(s), "status")?),
        None => return Err("the schema has no status; the compact form always gives one".into()),
    };
    let written = Written {
        spec,
        status,
        types: (!writer.types.is_empty()).then(|| Value::Object(writer.types)),
    };
    let again = expand(Compact {
        spec: written.spec.as_ref(),
        status: written.status.as_ref(),
        types: written.types.as_ref(),
    })
    .map_err(|e| format!("the compact form does not expand: {}", super::describe(&e)))?;
    match first_difference(schema, &again, "") {
        None => Ok(written),
        Some(at) => Err(format!("the compact form would change `{at}`")),
    }
}

/// The status without the fields the compact form adds by itself.
fn without_stencils_status(status: &Value) -> Value {
    let mut status = status.clone();
    if let Some(props) = status.get_mut("properties").and_then(Value::as_object_mut) {
        if props.get("conditions") == Some(&types::conditions()) {
            props.remove("conditions");
        }
        if props.get("observedGeneration") == Some(&json!({"type": "integer", "format": "int64"})) {
            props.remove("observedGeneration");
        }
    }
    status
}

#[derive(Default)]
struct Writer {
    types: Map<String, Value>,
}

impl Writer {
    /// An object's fields as a mapping (with `$self` for its own markers).
    fn fields(&mut self, schema: &Value, path: &str) -> Result<Value, String> {
        let node = schema.as_object().ok_or_else(|| format!("{path} is not a mapping"))?;
        let props = node
            .get("properties")
            .and_then(Value::as_object)
            .filter(|p| !p.is_empty())
            .ok_or_else(|| format!("{path} has no properties to write as fields"))?;
        let required: Vec<&str> = node
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut fields = Map::new();
        let own = self.markers(node, &["type", "properties", "required"], path)?;
        if !own.is_empty() {
            fields.insert("$self".into(), own.join(" ").into());
        }
        for (name, prop) in props {
            let field_path = format!("{path}.{name}");
            let mut value = self.field(prop, &field_path)?;
            if required.contains(&name.as_str()) {
                value = mark_required(value);
            }
            fields.insert(name.clone(), value);
        }
        Ok(Value::Object(fields))
    }

    /// A field: a line, or a mapping when it is an object with properties.
    fn field(&mut self, schema: &Value, path: &str) -> Result<Value, String> {
        if schema.get("properties").is_some() {
            return self.fields(schema, path);
        }
        let (ty, skip) = self.type_expr(schema, path)?;
        let node = schema.as_object().ok_or_else(|| format!("{path} is not a mapping"))?;
        let skip: Vec<&str> = skip.iter().map(String::as_str).collect();
        let markers = self.markers(node, &skip, path)?;
        Ok(if markers.is_empty() {
            ty.into()
        } else {
            format!("{ty} | {}", markers.join(" ")).into()
        })
    }

    /// The type expression of `schema` and the keys it accounts for.
    fn type_expr(&mut self, schema: &Value, path: &str) -> Result<(String, Vec<String>), String> {
        for name in ["quantity", "duration", "dns-label", "dns-subdomain", "conditions"] {
            let (built, _) = types::builtin(name).expect("a built-in type");
            if contains(schema, &built) {
                let keys = built.as_object().expect("a schema").keys().cloned().collect();
                return Ok((name.to_string(), keys));
            }
        }
        let keys = |ks: &[&str]| ks.iter().map(|k| k.to_string()).collect();
        let ty = schema.get("type").and_then(Value::as_str).unwrap_or_default();
        Ok(match ty {
            "string" | "integer" | "boolean" | "number" => (ty.to_string(), keys(&["type"])),
            "object" if schema.get("x-kubernetes-preserve-unknown-fields") == Some(&json!(true)) => {
                ("object".into(), keys(&["type", "x-kubernetes-preserve-unknown-fields"]))
            }
            "object" if schema.get("additionalProperties").is_some() => {
                let value = self.element(&schema["additionalProperties"], &format!("{path}.value"))?;
                (format!("map[string]{value}"), keys(&["type", "additionalProperties"]))
            }
            "array" => {
                let item = self.element(&schema["items"], &format!("{path}.item"))?;
                (format!("[]{item}"), keys(&["type", "items"]))
            }
            _ => return Err(format!("{path}: a `{ty}` schema has no compact type")),
        })
    }

    /// A list item or map value: a bare type, or a named type when it needs markers or
    /// fields of its own.
    fn element(&mut self, schema: &Value, path: &str) -> Result<String, String> {
        let written = self.field(schema, path)?;
        match written.as_str() {
            Some(line) if !line.contains('|') => Ok(line.to_string()),
            _ => {
                let name = type_name(path, &self.types);
                self.types.insert(name.clone(), written);
                Ok(name)
            }
        }
    }

    /// The markers for `node`'s keys other than `skip`; an unknown key is refused.
    fn markers(&mut self, node: &Map<String, Value>, skip: &[&str], path: &str) -> Result<Vec<String>, String> {
        let mut out = Vec::new();
        for (key, value) in node.iter().filter(|(k, _)| !skip.contains(&k.as_str())) {
            match key.as_str() {
                "description" | "pattern" => out.push(format!("{key}={}", quote(value.as_str().unwrap_or_default()))),
                "minimum" | "maximum" | "minLength" | "maxLength" | "minItems" | "maxItems" | "minProperties"
                | "maxProperties" => out.push(format!("{key}={value}")),
                "default"
                    if skip.contains(&"properties")
                        && node
                            .get("properties")
                            .and_then(Value::as_object)
                            .and_then(super::fields_default)
                            .as_ref()
                            == Some(value) => {}
                "default" => out.push(format!("default={}", quote(&default_text(value)))),
                "enum" => {
                    let values: Vec<String> = value.as_array().into_iter().flatten().map(default_text).collect();
                    out.push(format!("enum={}", quote(&values.join(","))));
                }
                "x-kubernetes-list-type" => out.push(format!("listType={}", value.as_str().unwrap_or_default())),
                "x-kubernetes-list-map-keys" => {
                    for k in value.as_array().into_iter().flatten() {
                        out.push(format!("listMapKey={}", k.as_str().unwrap_or_default()));
                    }
                }
                "x-kubernetes-validations" => out.extend(rules(value)),
                _ => return Err(format!("{path}: `{key}` has no compact marker")),
            }
        }
        Ok(out)
    }
}

/// The markers of `x-kubernetes-validations`: `immutable=true` for exactly what it
/// expands to, `validation=...` (with its `message`) for any other rule.
fn rules(value: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for rule in value.as_array().into_iter().flatten() {
        if rule == &json!({"rule": "self == oldSelf", "message": "is immutable"}) {
            out.push("immutable=true".into());
            continue;
        }
        out.push(format!(
            "validation={}",
            quote(rule["rule"].as_str().unwrap_or_default())
        ));
        if let Some(message) = rule.get("message").and_then(Value::as_str) {
            out.push(format!("message={}", quote(message)));
        }
    }
    out
}

/// A line made required, or a mapping whose `$self` says so.
fn mark_required(value: Value) -> Value {
    match value {
        Value::String(line) if line.contains('|') => format!("{line} required=true").into(),
        Value::String(line) => format!("{line} | required=true").into(),
        Value::Object(mut fields) => {
            let own = fields.get("$self").and_then(Value::as_str).unwrap_or_default();
            let own = format!("{own} required=true").trim().to_string();
            fields.insert("$self".into(), own.into());
            let mut ordered = Map::new();
            ordered.insert("$self".into(), fields.remove("$self").expect("just inserted"));
            ordered.extend(fields);
            Value::Object(ordered)
        }
        other => other,
    }
}

/// A value as a marker writes it: strings as they are, anything else as JSON.
fn default_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `value` quoted when it must be (spaces, quotes, brackets, backslashes, or empty).
fn quote(value: &str) -> String {
    let plain = !value.is_empty()
        && !value.contains(|c: char| c.is_whitespace() || matches!(c, '"' | '\\' | '[' | ']' | '{' | '}' | '|'));
    if plain {
        return value.to_string();
    }
    format!("\"{}\"", value.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Whether every key of `part` is in `schema` with the same value.
fn contains(schema: &Value, part: &Value) -> bool {
    part.as_object()
        .is_some_and(|p| p.iter().all(|(k, v)| schema.get(k) == Some(v)))
}

/// A type name for the element at `path` (`spec.members.item` → `Member`), unique among
/// `taken`.
fn type_name(path: &str, taken: &Map<String, Value>) -> String {
    let field = path
        .split('.')
        .rev()
        .find(|s| !matches!(*s, "item" | "value"))
        .unwrap_or("Item");
    let singular = field.strip_suffix('s').filter(|s| !s.is_empty()).unwrap_or(field);
    let mut chars = singular.chars();
    let base: String = chars
        .next()
        .map(|c| c.to_ascii_uppercase())
        .into_iter()
        .chain(chars)
        .filter(char::is_ascii_alphanumeric)
        .collect();
    let base = if base.is_empty() { "Item".to_string() } else { base };
    (1..)
        .map(|n| if n == 1 { base.clone() } else { format!("{base}{n}") })
        .find(|name| !taken.contains_key(name))
        .expect("a free name")
}

/// The first path at which `a` and `b` differ, `None` when they are equal.
fn first_difference(a: &Value, b: &Value, path: &str) -> Option<String> {
    match (a, b) {
        // The order of `required` means nothing to the API server.
        (Value::Array(x), Value::Array(y)) if path.ends_with(".required") => {
            let sorted = |v: &Vec<Value>| {
                let mut v: Vec<String> = v.iter().map(Value::to_string).collect();
                v.sort();
                v
            };
            (sorted(x) != sorted(y)).then(|| path.to_string())
        }
        (Value::Object(x), Value::Object(y)) => {
            let keys = x.keys().chain(y.keys().filter(|k| !x.contains_key(*k)));
            for key in keys {
                let here = format!("{path}.{key}");
                match (x.get(key), y.get(key)) {
                    (Some(v), Some(w)) => {
                        if let Some(d) = first_difference(v, w, &here) {
                            return Some(d);
                        }
                    }
                    _ => return Some(here),
                }
            }
            None
        }
        _ if a == b => None,
        _ => Some(if path.is_empty() { ".".into() } else { path.to_string() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(spec: &str, types: Option<&str>) -> (Written, Value) {
        let spec: Value = crate::yaml::document(spec).unwrap();
        let types: Option<Value> = types.map(|t| crate::yaml::document(t).unwrap());
        let schema = expand(Compact {
            spec: Some(&spec),
            status: None,
            types: types.as_ref(),
        })
        .unwrap();
        (compact(&schema).unwrap_or_else(|e| panic!("{e}")), schema)
    }

    #[test]
    fn a_compact_schema_comes_back_as_it_was_written() {
        let spec = r#"
engine: string | required=true enum="postgresql,mysql" immutable=true description="The engine"
replicas: integer | default=1 minimum=1 maximum=10
size: quantity | default=1Gi
tags: "[]string | maxItems=4"
labels: map[string]string
limits:
  $self: validation="self.min <= self.max" message="min exceeds max"
  min: integer | default=1
  max: integer
"#;
        let (written, _) = round_trip(spec, None);
        let fields = written.spec.unwrap();
        assert_eq!(
            fields["engine"],
            "string | enum=postgresql,mysql immutable=true description=\"The engine\" required=true"
        );
        assert_eq!(fields["size"], "quantity | default=1Gi");
        assert_eq!(fields["labels"], "map[string]string");
        assert_eq!(
            fields["limits"]["$self"],
            "validation=\"self.min <= self.max\" message=\"min exceeds max\""
        );
        assert_eq!(written.status, None, "any status stays any status");
    }

    #[test]
    fn list_items_with_markers_become_named_types() {
        let (written, _) = round_trip(
            "members: \"[]Member | listType=map listMapKey=name\"",
            Some("Member: {name: dns-label | required=true, port: integer | minimum=1}"),
        );
        assert_eq!(
            written.spec.unwrap()["members"],
            "[]Member | listType=map listMapKey=name"
        );
        let types = written.types.unwrap();
        assert_eq!(types["Member"]["name"], "dns-label | required=true");
    }

    #[test]
    fn what_the_compact_form_cannot_write_is_refused_with_where() {
        let mut schema = round_trip("a: string", None).1;
        schema["properties"]["spec"]["properties"]["a"]["format"] = json!("email");
        let why = compact(&schema).unwrap_err();
        assert!(why.contains("spec.a: `format` has no compact marker"), "{why}");
        let one_of = json!({"type": "object", "properties": {"spec": {"oneOf": [{"type": "string"}]},
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}});
        assert!(
            compact(&one_of).unwrap_err().contains("spec"),
            "a schema with no compact type"
        );
    }
}
