//! A parent as the API server would admit it, purely: its CRD version's structural
//! defaults applied, then the schema's checks (type, enum, bounds, lengths, pattern,
//! required) reported by path. `stencil render` and `stencil test` run it before they
//! render, so an offline render sees what the cluster would store, and a template needs
//! no `| default(...)` copy of a schema default.

use serde_json::{Map, Value};

use crate::compile::CompiledDefinition;

/// The schema of the CRD version a parent is written in, when the definition installs
/// its CRD and lists that version.
pub fn schema_of<'a>(def: &'a CompiledDefinition, parent: &Value) -> Option<(&'a str, &'a Value)> {
    let crd = def.spec.crd.as_ref()?;
    let version = parent
        .get("apiVersion")
        .and_then(Value::as_str)
        .and_then(|av| av.rsplit('/').next())?;
    crd.versions
        .iter()
        .find(|v| v.name == version)
        .map(|v| (v.name.as_str(), &v.schema.open_api_v3_schema))
}

/// Applies the schema's defaults to `value`: an absent field (or a null one that may not
/// be null) gets its default, and defaults apply inside what was defaulted.
pub fn apply_defaults(schema: &Value, value: &mut Value) {
    match value {
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            for (key, prop) in props.into_iter().flatten() {
                let missing = match map.get(key) {
                    None => true,
                    Some(Value::Null) => prop.get("nullable") != Some(&Value::Bool(true)),
                    Some(_) => false,
                };
                if missing && let Some(default) = prop.get("default") {
                    map.insert(key.clone(), default.clone());
                }
                if let Some(child) = map.get_mut(key) {
                    apply_defaults(prop, child);
                }
            }
            if let Some(extra) = schema.get("additionalProperties").filter(|s| s.is_object()) {
                for (key, child) in map.iter_mut() {
                    if !props.is_some_and(|p| p.contains_key(key)) {
                        apply_defaults(extra, child);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = schema.get("items") {
                for v in items {
                    apply_defaults(item, v);
                }
            }
        }
        _ => {}
    }
}

/// Everything in `value` the schema refuses, each as `path: what is wrong`.
pub fn violations(schema: &Value, value: &Value) -> Vec<String> {
    let mut out = Vec::new();
    check(schema, value, "", &mut out);
    out
}

/// Everything in a status that `schema` (the CRD version's root) refuses or would drop:
/// a field of the wrong type or out of bounds, or a field a declared status does not
/// name (the API server prunes it). A status that keeps unknown fields drops none.
pub fn status_violations(schema: &Value, status: &Value) -> Vec<String> {
    let Some(declared) = schema.pointer("/properties/status") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    check(declared, status, ".status", &mut out);
    let keeps_any = declared.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    if let (Some(fields), Some(Value::Object(named)), false) =
        (status.as_object(), declared.get("properties"), keeps_any)
    {
        for key in fields.keys().filter(|k| !named.contains_key(*k)) {
            out.push(format!(
                ".status.{key}: not declared in the schema's status, so the API server would drop it"
            ));
        }
    }
    out
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn check(schema: &Value, value: &Value, path: &str, out: &mut Vec<String>) {
    let at = if path.is_empty() { "." } else { path };
    let int_or_string = schema.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
    if value.is_null() {
        if schema.get("nullable") != Some(&Value::Bool(true)) && schema.get("type").is_some() {
            out.push(format!("{at}: must not be null"));
        }
        return;
    }
    if let Some(want) = schema.get("type").and_then(Value::as_str) {
        let got = kind_of(value);
        let fits = got == want
            || (want == "number" && got == "integer")
            || (int_or_string && matches!(got, "integer" | "string"));
        if !fits {
            out.push(format!("{at}: must be {want}, got {got}"));
            return;
        }
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        let list: Vec<String> = allowed.iter().map(Value::to_string).collect();
        out.push(format!("{at}: {value} is not one of {}", list.join(", ")));
    }
    bounds(schema, value, at, out);
    match value {
        Value::Object(map) => object(schema, map, path, out),
        Value::Array(items) => {
            if let Some(item) = schema.get("items") {
                for (i, v) in items.iter().enumerate() {
                    check(item, v, &format!("{path}[{i}]"), out);
                }
            }
        }
        _ => {}
    }
}

/// Numeric bounds, lengths and the pattern.
fn bounds(schema: &Value, value: &Value, at: &str, out: &mut Vec<String>) {
    let num = |k: &str| schema.get(k).and_then(Value::as_f64);
    let count = |k: &str| schema.get(k).and_then(Value::as_u64);
    if let Some(n) = value.as_f64() {
        let exclusive = |k: &str| schema.get(k) == Some(&Value::Bool(true));
        if let Some(min) = num("minimum")
            && (n < min || (exclusive("exclusiveMinimum") && n == min))
        {
            out.push(format!("{at}: {n} is less than the minimum {min}"));
        }
        if let Some(max) = num("maximum")
            && (n > max || (exclusive("exclusiveMaximum") && n == max))
        {
            out.push(format!("{at}: {n} is more than the maximum {max}"));
        }
    }
    let size = match value {
        Value::String(s) => Some((s.chars().count() as u64, "Length", "characters")),
        Value::Array(a) => Some((a.len() as u64, "Items", "items")),
        Value::Object(o) => Some((o.len() as u64, "Properties", "properties")),
        _ => None,
    };
    if let Some((n, suffix, unit)) = size {
        if let Some(min) = count(&format!("min{suffix}"))
            && n < min
        {
            out.push(format!("{at}: has {n} {unit}, fewer than {min}"));
        }
        if let Some(max) = count(&format!("max{suffix}"))
            && n > max
        {
            out.push(format!("{at}: has {n} {unit}, more than {max}"));
        }
    }
    if let (Some(s), Some(pattern)) = (value.as_str(), schema.get("pattern").and_then(Value::as_str)) {
        match regex::Regex::new(pattern) {
            Ok(re) if !re.is_match(s) => out.push(format!("{at}: {s:?} does not match the pattern {pattern}")),
            _ => {}
        }
    }
}

fn object(schema: &Value, map: &Map<String, Value>, path: &str, out: &mut Vec<String>) {
    for key in schema.get("required").and_then(Value::as_array).into_iter().flatten() {
        if let Some(k) = key.as_str()
            && !map.contains_key(k)
        {
            out.push(format!("{path}.{k}: is required"));
        }
    }
    let props = schema.get("properties").and_then(Value::as_object);
    let extra = schema.get("additionalProperties").filter(|s| s.is_object());
    for (key, v) in map {
        let child = format!("{path}.{key}");
        match (props.and_then(|p| p.get(key)), extra) {
            (Some(s), _) | (None, Some(s)) => check(s, v, &child, out),
            (None, None) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {"spec": {"type": "object", "required": ["content"],
            "properties": {
                "replicas": {"type": "integer", "minimum": 0, "maximum": 50, "default": 2},
                "image": {"type": "string", "default": "nginx", "maxLength": 8},
                "tier": {"type": "string", "enum": ["gold", "silver"]},
                "name": {"type": "string", "pattern": "^[a-z]+$"},
                "port": {"x-kubernetes-int-or-string": true},
                "quota": {"type": "object", "default": {}, "properties": {"cpu": {"type": "string", "default": "4"}}},
                "content": {"type": "object", "additionalProperties": {"type": "string"}},
                "hosts": {"type": "array", "maxItems": 2, "items": {"type": "object",
                    "properties": {"tls": {"type": "boolean", "default": false}}}}}}}})
    }

    #[test]
    fn defaults_fill_absent_fields_and_apply_inside_what_they_add() {
        let mut parent = json!({"spec": {"content": {}, "hosts": [{}, {"tls": true}]}});
        apply_defaults(&schema(), &mut parent);
        assert_eq!(parent["spec"]["replicas"], 2);
        assert_eq!(parent["spec"]["image"], "nginx");
        assert_eq!(
            parent["spec"]["quota"],
            json!({"cpu": "4"}),
            "a default {{}} gets its own defaults"
        );
        assert_eq!(parent["spec"]["hosts"], json!([{"tls": false}, {"tls": true}]));
        assert!(parent["spec"].get("tier").is_none(), "no default, nothing added");
        let mut set = json!({"spec": {"replicas": 5}});
        apply_defaults(&schema(), &mut set);
        assert_eq!(set["spec"]["replicas"], 5, "a value given is kept");
    }

    #[test]
    fn every_violation_is_named_by_path() {
        let parent = json!({"spec": {"replicas": 51, "image": "a-long-image", "tier": "bronze", "name": "Web",
            "port": "http", "content": {"index.html": 3}, "hosts": [{}, {}, {"tls": "yes"}]}});
        let all = violations(&schema(), &parent).join("\n");
        for expected in [
            ".spec.replicas: 51 is more than the maximum 50",
            ".spec.image: has 12 characters, more than 8",
            ".spec.tier: \"bronze\" is not one of \"gold\", \"silver\"",
            ".spec.name: \"Web\" does not match the pattern ^[a-z]+$",
            ".spec.content.index.html: must be string, got integer",
            ".spec.hosts: has 3 items, more than 2",
            ".spec.hosts[2].tls: must be boolean, got string",
        ] {
            assert!(all.contains(expected), "missing `{expected}` in:\n{all}");
        }
        assert!(!all.contains(".spec.port"), "int-or-string takes a string: {all}");
        let missing = violations(&schema(), &json!({"spec": {}})).join("\n");
        assert!(missing.contains(".spec.content: is required"), "{missing}");
    }
}
