//! Whether a CRD update can lose data, purely: the live CRD against the one a definition
//! would install. A removed property, a changed type, a new required field without a
//! default, a tightened enum, or a stored version that is removed or no longer served is
//! a breaking change; Stencil refuses it unless the definition allows it.

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};

/// Every breaking change from `live` to `desired`, each naming its version and path.
pub fn breaking_changes(live: &CustomResourceDefinition, desired: &CustomResourceDefinition) -> Vec<String> {
    let mut out = Vec::new();
    let stored = live
        .status
        .as_ref()
        .and_then(|s| s.stored_versions.clone())
        .unwrap_or_default();
    for name in &stored {
        match desired.spec.versions.iter().find(|v| &v.name == name) {
            None => out.push(format!(
                "version {name} is removed but objects are still stored at it (status.storedVersions)"
            )),
            Some(v) if !v.served => out.push(format!(
                "version {name} is no longer served but objects are still stored at it (status.storedVersions)"
            )),
            Some(_) => {}
        }
    }
    // Through a conversion webhook a version that stores nothing is a view: its schema
    // can change freely, since the templates decide what it shows of the stored object.
    let webhook = desired
        .spec
        .conversion
        .as_ref()
        .is_some_and(|c| c.strategy == "Webhook");
    for old in &live.spec.versions {
        let Some(new) = desired.spec.versions.iter().find(|v| v.name == old.name) else {
            continue;
        };
        if webhook && !stored.contains(&old.name) {
            continue;
        }
        let schema = |v: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinitionVersion| {
            v.schema.as_ref().and_then(|s| s.open_api_v3_schema.clone())
        };
        if let (Some(a), Some(b)) = (schema(old), schema(new)) {
            compare(&old.name, "", &a, &b, &mut out);
        }
    }
    out
}

fn type_of(s: &JSONSchemaProps) -> Option<&str> {
    s.type_.as_deref()
}

/// Says so when a node gains an enum, or its enum drops values existing objects may hold.
fn enum_narrowed(version: &str, at: &str, old: &JSONSchemaProps, new: &JSONSchemaProps, out: &mut Vec<String>) {
    let Some(new_enum) = &new.enum_ else { return };
    let Some(old_enum) = &old.enum_ else {
        out.push(format!(
            "{version}: {at} gains an enum; existing values may not be in it"
        ));
        return;
    };
    let dropped: Vec<String> = old_enum
        .iter()
        .filter(|v| !new_enum.contains(v))
        .map(|v| serde_json::to_string(&v.0).unwrap_or_default())
        .collect();
    if !dropped.is_empty() {
        out.push(format!("{version}: {at} drops enum values {}", dropped.join(", ")));
    }
}

fn compare(version: &str, path: &str, old: &JSONSchemaProps, new: &JSONSchemaProps, out: &mut Vec<String>) {
    let at = |p: &str| if p.is_empty() { ".".to_string() } else { p.to_string() };
    if let (Some(a), Some(b)) = (type_of(old), type_of(new))
        && a != b
    {
        out.push(format!("{version}: {} changes type from {a} to {b}", at(path)));
        return;
    }
    enum_narrowed(version, &at(path), old, new, out);
    // Unknown fields kept under a node are pruned once it stops preserving them, and a
    // map's entries once it stops allowing them: the API server drops them on the next
    // write, and nothing in the new schema names them.
    if old.x_kubernetes_preserve_unknown_fields == Some(true) && new.x_kubernetes_preserve_unknown_fields != Some(true)
    {
        out.push(format!(
            "{version}: {} stops preserving unknown fields; the API server would prune the fields the schema does not name",
            at(path)
        ));
    }
    let allows = |a: &Option<JSONSchemaPropsOrBool>| match a {
        Some(JSONSchemaPropsOrBool::Bool(b)) => *b,
        Some(JSONSchemaPropsOrBool::Schema(_)) => true,
        None => false,
    };
    if allows(&old.additional_properties) && !allows(&new.additional_properties) {
        out.push(format!(
            "{version}: {} stops allowing additionalProperties; the API server would prune the map's entries",
            at(path)
        ));
    }
    let empty = BTreeMap::new();
    let old_props = old.properties.as_ref().unwrap_or(&empty);
    let new_props = new.properties.as_ref().unwrap_or(&empty);
    let preserves = new.x_kubernetes_preserve_unknown_fields == Some(true);
    for (key, o) in old_props {
        // The API server keeps an object's own apiVersion, kind and metadata whatever the
        // schema says of them (other operators' CRDs spell them out; Stencil's do not).
        if path.is_empty() && ["apiVersion", "kind", "metadata"].contains(&key.as_str()) {
            continue;
        }
        let child = format!("{path}.{key}");
        match new_props.get(key) {
            Some(n) => compare(version, &child, o, n, out),
            None if preserves => {}
            None => out.push(format!(
                "{version}: {child} is removed; the API server would drop its values"
            )),
        }
    }
    let old_required = old.required.clone().unwrap_or_default();
    for key in new.required.iter().flatten() {
        let has_default = new_props.get(key).is_some_and(|p| p.default.is_some());
        if !old_required.contains(key) && !has_default {
            out.push(format!(
                "{version}: {path}.{key} becomes required without a default; existing objects lack it"
            ));
        }
    }
    if let (Some(JSONSchemaPropsOrArray::Schema(o)), Some(JSONSchemaPropsOrArray::Schema(n))) = (&old.items, &new.items)
    {
        compare(version, &format!("{path}[*]"), o, n, out);
    }
    if let (Some(JSONSchemaPropsOrBool::Schema(o)), Some(JSONSchemaPropsOrBool::Schema(n))) =
        (&old.additional_properties, &new.additional_properties)
    {
        compare(version, &format!("{path}.*"), o, n, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd(versions: serde_json::Value, stored: &[&str]) -> CustomResourceDefinition {
        serde_json::from_value(json!({
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget"}, "versions": versions},
            "status": {"storedVersions": stored}
        }))
        .unwrap()
    }

    fn v1(spec: serde_json::Value) -> serde_json::Value {
        json!([{"name": "v1", "served": true, "storage": true,
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec}}}}])
    }

    const BASE: &str = r#"{"type": "object", "required": ["size"], "properties": {
        "size": {"type": "integer"}, "tier": {"type": "string", "enum": ["gold", "silver"]},
        "domains": {"type": "array", "items": {"type": "object", "properties": {"host": {"type": "string"}}}}}}"#;

    fn base() -> serde_json::Value {
        serde_json::from_str(BASE).unwrap()
    }

    #[test]
    fn additions_are_safe() {
        let mut wider = base();
        wider["properties"]["colour"] = json!({"type": "string"});
        wider["properties"]["tier"]["enum"] = json!(["gold", "silver", "bronze"]);
        wider["required"] = json!(["size", "colour"]);
        wider["properties"]["colour"]["default"] = json!("red");
        assert_eq!(
            breaking_changes(&crd(v1(base()), &["v1"]), &crd(v1(wider), &["v1"])),
            Vec::<String>::new()
        );
    }

    #[test]
    fn each_breaking_change_names_its_path() {
        let mut narrow = base();
        narrow["properties"]["domains"]["items"]["properties"] = json!({});
        narrow["properties"]["size"]["type"] = json!("string");
        narrow["properties"]["tier"]["enum"] = json!(["gold"]);
        narrow["properties"]["owner"] = json!({"type": "string"});
        narrow["required"] = json!(["size", "owner"]);
        let changes = breaking_changes(&crd(v1(base()), &["v1"]), &crd(v1(narrow), &["v1"]));
        let all = changes.join("\n");
        assert!(all.contains("v1: .spec.domains[*].host is removed"), "{all}");
        assert!(
            all.contains("v1: .spec.size changes type from integer to string"),
            "{all}"
        );
        assert!(all.contains("v1: .spec.tier drops enum values \"silver\""), "{all}");
        assert!(
            all.contains("v1: .spec.owner becomes required without a default"),
            "{all}"
        );
        assert_eq!(changes.len(), 4, "{all}");
    }

    #[test]
    fn a_node_that_stops_preserving_unknown_fields_or_a_map_that_closes_is_breaking() {
        let mut open = base();
        open["properties"]["extra"] = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
        open["properties"]["labels"] = json!({"type": "object", "additionalProperties": {"type": "string"}});
        let mut closed = open.clone();
        closed["properties"]["extra"] = json!({"type": "object"});
        closed["properties"]["labels"] = json!({"type": "object"});
        let changes = breaking_changes(&crd(v1(open.clone()), &["v1"]), &crd(v1(closed), &["v1"]));
        let all = changes.join("\n");
        assert!(all.contains("v1: .spec.extra stops preserving unknown fields"), "{all}");
        assert!(
            all.contains("v1: .spec.labels stops allowing additionalProperties"),
            "{all}"
        );
        assert_eq!(changes.len(), 2, "{all}");
        let still_open = breaking_changes(&crd(v1(open.clone()), &["v1"]), &crd(v1(open), &["v1"]));
        assert!(still_open.is_empty(), "{still_open:?}");
    }

    #[test]
    fn an_objects_own_type_and_metadata_are_kept_whatever_the_schema_says() {
        let spelled_out = json!([{"name": "v1", "served": true, "storage": true,
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                "apiVersion": {"type": "string"}, "kind": {"type": "string"},
                "metadata": {"type": "object", "properties": {"name": {"type": "string"}}},
                "spec": base()}}}}]);
        let changes = breaking_changes(&crd(spelled_out, &["v1"]), &crd(v1(base()), &["v1"]));
        assert!(changes.is_empty(), "{changes:?}");
        let nested = json!({"type": "object", "properties": {"metadata": {"type": "string"}}});
        let changes = breaking_changes(&crd(v1(nested), &["v1"]), &crd(v1(base()), &["v1"]));
        assert!(
            changes.iter().any(|c| c.contains(".spec.metadata is removed")),
            "only the object's own: {changes:?}"
        );
    }

    #[test]
    fn a_stored_version_may_not_go_or_stop_being_served() {
        let two = json!([
            {"name": "v1alpha1", "served": true, "storage": false, "schema": {"openAPIV3Schema": {"type": "object"}}},
            {"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object"}}}]);
        let only_v1 =
            json!([{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object"}}}]);
        let live = crd(two.clone(), &["v1alpha1", "v1"]);
        let changes = breaking_changes(&live, &crd(only_v1.clone(), &[]));
        assert!(changes[0].contains("version v1alpha1 is removed"), "{changes:?}");
        let mut unserved = two.clone();
        unserved[0]["served"] = json!(false);
        assert!(breaking_changes(&live, &crd(unserved, &[]))[0].contains("no longer served"));
        // Once nothing is stored at it, the version may go.
        assert!(breaking_changes(&crd(two, &["v1"]), &crd(only_v1, &[])).is_empty());
    }
}
