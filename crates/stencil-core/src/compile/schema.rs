//! Checks that an OpenAPI v3 schema is structural, as the API server requires of CRDs:
//! every node has a type (or is int-or-string or preserves unknown fields), no `$ref`,
//! and `properties` and `additionalProperties` are not combined.

use serde_json::Value;

/// Each problem as a path suffix plus a message, e.g. `.properties.spec: no type`.
pub(crate) fn structural_problems(schema: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        problems.push(": the root must have type: object".to_string());
    }
    walk(schema, "", &mut problems);
    problems
}

fn walk(node: &Value, path: &str, problems: &mut Vec<String>) {
    let Some(map) = node.as_object() else {
        problems.push(format!("{path}: a schema must be a mapping"));
        return;
    };
    let flag = |k: &str| map.get(k).and_then(Value::as_bool).unwrap_or(false);
    if map.contains_key("$ref") {
        problems.push(format!("{path}: $ref is not allowed in a CRD schema"));
    }
    let typed = map.get("type").and_then(Value::as_str).is_some_and(|t| !t.is_empty());
    if !typed && !flag("x-kubernetes-int-or-string") && !flag("x-kubernetes-preserve-unknown-fields") {
        problems.push(format!("{path}: every schema node needs a type (or x-kubernetes-int-or-string / x-kubernetes-preserve-unknown-fields)"));
    }
    if map.contains_key("properties")
        && map
            .get("additionalProperties")
            .is_some_and(|a| a != &Value::Bool(false))
    {
        problems.push(format!(
            "{path}: properties and additionalProperties cannot be combined"
        ));
    }
    if map.get("type").and_then(Value::as_str) == Some("array") && !map.contains_key("items") {
        problems.push(format!("{path}: an array needs items"));
    }
    if let Some(props) = map.get("properties").and_then(Value::as_object) {
        for (k, v) in props {
            walk(v, &format!("{path}.properties.{k}"), problems);
        }
    }
    if let Some(items) = map.get("items") {
        walk(items, &format!("{path}.items"), problems);
    }
    if let Some(extra) = map.get("additionalProperties").filter(|a| a.is_object()) {
        walk(extra, &format!("{path}.additionalProperties"), problems);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn accepts_a_structural_schema() {
        let schema = json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {"port": {"x-kubernetes-int-or-string": true},
                "tags": {"type": "array", "items": {"type": "string"}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}}}}}});
        assert!(structural_problems(&schema).is_empty());
    }

    #[test]
    fn names_each_non_structural_node() {
        let schema = json!({"type": "object", "properties": {"spec": {"properties": {"x": {"$ref": "#/a"}}}, "list": {"type": "array"}}});
        let problems = structural_problems(&schema);
        assert!(
            problems
                .iter()
                .any(|p| p.starts_with(".properties.spec: every schema node needs a type")),
            "{problems:?}"
        );
        assert!(
            problems
                .iter()
                .any(|p| p.contains(".properties.spec.properties.x: $ref")),
            "{problems:?}"
        );
        assert!(
            problems
                .iter()
                .any(|p| p.contains(".properties.list: an array needs items")),
            "{problems:?}"
        );
    }
}
