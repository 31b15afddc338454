//! The compact schema's expansion: kro's lines mean what they mean in kro, Stencil's
//! additions expand to what the API server expects, and every mistake is refused at its
//! field with what to write instead.

use serde_json::{Value, json};

use super::*;
use crate::structural::{apply_defaults, violations};

/// What `spec` (YAML) expands to, with `types` (YAML) if given.
fn expanded(spec: &str, types: Option<&str>) -> Result<Value, Vec<CompactError>> {
    let spec: Value = crate::yaml::document(spec).unwrap();
    let types: Option<Value> = types.map(|t| crate::yaml::document(t).unwrap());
    expand(Compact {
        spec: Some(&spec),
        status: None,
        types: types.as_ref(),
    })
}

/// The schema `spec` (YAML) expands to.
fn spec_schema(spec: &str, types: Option<&str>) -> Value {
    expanded(spec, types).unwrap_or_else(|e| panic!("{}", describe(&e)))
}

/// The error `spec` (YAML) gives, the first when there are several.
fn spec_error(spec: &str, types: Option<&str>) -> CompactError {
    expanded(spec, types).expect_err("the schema is refused").remove(0)
}

/// A parent's spec as the API server would store it under `root`: defaulted, then
/// checked.
fn admitted(root: &Value, spec: Value) -> (Value, Vec<String>) {
    let mut parent = json!({"spec": spec});
    apply_defaults(root, &mut parent);
    let problems = violations(root, &parent);
    (parent["spec"].clone(), problems)
}

const KRO_EXAMPLE: &str = r#"
name: string | required=true immutable=true description="My Name"
replicas: integer | default=1 minimum=1 maximum=100
image: string | required=true
values: object | required=true
ingress:
  enabled: boolean | default=false
  host: string | default="example.com"
  path: string | default="/"
ports: "[]integer"
env: "map[string]myType"
"#;

const KRO_TYPES: &str = r#"
myType:
  value1: string | required=true
  value2: integer | default=42
"#;

/// Expands the golden `compact` schema (YAML with `spec`, `status`, `types`) and checks it
/// against the hand-checked `openapi`.
fn assert_golden(name: &str, compact: &str, openapi: &str) {
    let compact: Value = crate::yaml::document(compact).unwrap();
    let expected: Value = crate::yaml::document(openapi).unwrap();
    let got = expand(Compact {
        spec: compact.get("spec"),
        status: compact.get("status"),
        types: compact.get("types"),
    })
    .unwrap_or_else(|e| panic!("{name}: {}", describe(&e)));
    assert!(
        got == expected,
        "{name}.yaml no longer expands to {name}.openapi.yaml; it gives:\n{}",
        crate::yaml::to_string(&got).unwrap()
    );
}

#[test]
fn every_type_and_marker_expands_to_its_golden_openapi() {
    assert_golden(
        "every-marker",
        include_str!("golden/every-marker.yaml"),
        include_str!("golden/every-marker.openapi.yaml"),
    );
    assert_golden(
        "kro-web-application",
        include_str!("golden/kro-web-application.yaml"),
        include_str!("golden/kro-web-application.openapi.yaml"),
    );
}

#[test]
fn kros_example_expands_as_kro_expands_it() {
    let root = spec_schema(KRO_EXAMPLE, Some(KRO_TYPES));
    assert_eq!(
        root["required"],
        json!(["spec"]),
        "a spec with required fields is required"
    );
    let spec = &root["properties"]["spec"];
    assert_eq!(spec["required"], json!(["name", "image", "values"]));
    let p = &spec["properties"];
    assert_eq!(
        p["name"],
        json!({"type": "string", "description": "My Name",
            "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "is immutable"}]})
    );
    assert_eq!(
        p["replicas"],
        json!({"type": "integer", "default": 1, "minimum": 1, "maximum": 100})
    );
    assert_eq!(
        p["values"],
        json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
    );
    assert_eq!(
        p["ingress"]["default"],
        json!({"enabled": false, "host": "example.com", "path": "/"}),
        "defaulted fields and none required: the fields' defaults"
    );
    assert_eq!(p["ports"], json!({"type": "array", "items": {"type": "integer"}}));
    let my_type = &p["env"]["additionalProperties"];
    assert_eq!(my_type["required"], json!(["value1"]));
    assert_eq!(
        my_type.get("default"),
        None,
        "a required field keeps the object undefaulted"
    );
}

#[test]
fn a_left_out_object_gets_its_fields_defaults_as_the_api_server_would() {
    let root = spec_schema(KRO_EXAMPLE, Some(KRO_TYPES));
    let (stored, problems) = admitted(&root, json!({"name": "a", "image": "nginx", "values": {}}));
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(
        stored["ingress"],
        json!({"enabled": false, "host": "example.com", "path": "/"})
    );
    assert_eq!(stored["replicas"], 1);
    let (_, problems) = admitted(
        &root,
        json!({"name": "a", "image": "nginx", "values": {}, "replicas": 0}),
    );
    assert!(problems.iter().any(|p| p.contains("replicas")), "{problems:?}");
}

#[test]
fn kubernetes_types_expand_to_what_the_api_server_expects() {
    let root = spec_schema(
        "size: quantity | default=1Gi\ntimeout: duration | default=30s\nname: dns-label\nhost: dns-subdomain",
        None,
    );
    let spec = &root["properties"]["spec"];
    let size = &spec["properties"]["size"];
    assert_eq!(size["x-kubernetes-int-or-string"], true);
    assert_eq!(size["default"], "1Gi");
    assert_eq!(spec["properties"]["name"]["maxLength"], 63);
    assert_eq!(spec["properties"]["host"]["maxLength"], 253);
    let (stored, problems) = admitted(&root, json!({"name": "web", "host": "a.example.com"}));
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(stored["timeout"], "30s");
    let (_, problems) = admitted(&root, json!({"size": "1GB", "timeout": "30", "name": "Web"}));
    assert_eq!(problems.len(), 3, "{problems:?}");
}

#[test]
fn a_quantity_default_that_is_a_number_stays_a_number() {
    let root = spec_schema("cpu: quantity | default=2", None);
    assert_eq!(root["properties"]["spec"]["properties"]["cpu"]["default"], 2);
}

#[test]
fn a_status_mapping_gets_the_fields_stencil_writes_and_no_status_takes_any() {
    let status: Value = crate::yaml::document("phase: string\nendpoint: string").unwrap();
    let compact = Compact {
        status: Some(&status),
        ..Compact::default()
    };
    let root = expand(compact).unwrap();
    let status = &root["properties"]["status"]["properties"];
    assert_eq!(status["phase"], json!({"type": "string"}));
    assert_eq!(status["conditions"]["x-kubernetes-list-map-keys"], json!(["type"]));
    assert_eq!(status["observedGeneration"]["type"], "integer");
    assert_eq!(root.get("required"), None);
    let open = expand(Compact::default()).unwrap();
    assert_eq!(
        open["properties"]["status"]["x-kubernetes-preserve-unknown-fields"],
        true
    );
}

#[test]
fn a_status_must_declare_stencils_own_fields_as_stencil_writes_them() {
    for (line, expect) in [
        ("conditions: string", "status.conditions"),
        ("observedGeneration: string", "status.observedGeneration"),
    ] {
        let status: Value = crate::yaml::document(line).unwrap();
        let compact = Compact {
            status: Some(&status),
            ..Compact::default()
        };
        assert_eq!(expand(compact).unwrap_err()[0].path, expect);
    }
    let status: Value = crate::yaml::document("conditions: conditions\nobservedGeneration: integer").unwrap();
    let compact = Compact {
        status: Some(&status),
        ..Compact::default()
    };
    assert!(expand(compact).is_ok());
}

#[test]
fn an_objects_self_line_carries_its_markers() {
    let root = spec_schema(
        r#"
storage:
  $self: required=true description="Where the data lives" validation="self.min <= self.max" message="min exceeds max"
  min: integer
  max: integer
"#,
        None,
    );
    assert_eq!(root["properties"]["spec"]["required"], json!(["storage"]));
    let storage = &root["properties"]["spec"]["properties"]["storage"];
    assert_eq!(storage["description"], "Where the data lives");
    assert_eq!(
        storage["x-kubernetes-validations"],
        json!([{"rule": "self.min <= self.max", "message": "min exceeds max"}])
    );
}

#[test]
fn transition_rules_say_what_may_change() {
    let root = spec_schema(
        r#"
version: string | monotonic=true pattern="^[0-9]+\.[0-9]+$"
replicas: integer | monotonic=true
size: quantity | monotonic=true
owner: string | transition="self == oldSelf || oldSelf == ''" message="the owner is set once"
"#,
        None,
    );
    let p = &root["properties"]["spec"]["properties"];
    let rule = |f: &str| {
        p[f]["x-kubernetes-validations"][0]["rule"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(rule("version").contains("semver(self, true).compareTo(semver(oldSelf, true)) >= 0"));
    assert_eq!(rule("replicas"), "self >= oldSelf");
    assert!(rule("size").starts_with("quantity(string(self))"));
    assert_eq!(
        p["owner"]["x-kubernetes-validations"][0]["message"],
        "the owner is set once"
    );
}

#[test]
fn named_types_may_use_each_other_and_an_alias_may_be_required() {
    let types = r#"
Address: {street: string, city: string | default=Paris}
Person:
  name: string | required=true
  home: Address
Id: string | required=true pattern="^[a-z]+$"
"#;
    let root = spec_schema("people: \"[]Person | maxItems=3\"\nid: Id", Some(types));
    let spec = &root["properties"]["spec"];
    assert_eq!(spec["required"], json!(["id"]), "required by its type");
    let person = &spec["properties"]["people"]["items"];
    assert_eq!(person["properties"]["home"]["properties"]["city"]["default"], "Paris");
    assert_eq!(spec["properties"]["people"]["maxItems"], 3);
}

#[test]
fn a_map_or_object_may_bound_its_number_of_keys() {
    let root = spec_schema("content: map[string]string | minProperties=1 maxProperties=64", None);
    let content = &root["properties"]["spec"]["properties"]["content"];
    assert_eq!(
        (content["minProperties"].clone(), content["maxProperties"].clone()),
        (json!(1), json!(64))
    );
    assert_eq!(content["additionalProperties"]["type"], "string");
}

#[test]
fn a_cycle_among_types_is_refused_naming_it() {
    let types = "Person: {employer: Company}\nCompany: {staff: \"[]Person\"}";
    let e = spec_error("boss: Person", Some(types));
    assert!(e.message.contains("Person → Company → Person"), "{e}");
}

#[test]
fn an_unknown_type_is_refused_with_the_types_there_are() {
    let e = spec_error("a: strng", Some("Person: {name: string}"));
    assert_eq!(e.path, "spec.a");
    assert!(
        e.message.contains("unknown type `strng`") && e.message.contains("defines Person"),
        "{e}"
    );
}

#[test]
fn an_error_inside_a_named_type_points_at_the_type() {
    let e = spec_error("p: Person", Some("Person: {age: integer | minLength=1}"));
    assert_eq!(e.path, "types.Person.age");
    assert!(e.message.contains("minLength applies to strings"), "{e}");
}

#[test]
fn markers_that_do_not_fit_are_refused_at_their_field() {
    for (line, expect) in [
        ("integer | minLength=1", "minLength applies to strings"),
        ("string | minimum=1", "minimum applies to integers and numbers"),
        ("string | maxItems=1", "maxItems applies to lists"),
        ("string | maxProperties=1", "maxProperties applies to objects and maps"),
        ("string | colour=red", "unknown marker `colour`"),
        ("integer | default=many", "`many` is not an integer"),
        ("string | enum=\"a,b\" default=c", "not one of the enum"),
        (
            "string | pattern=\"^[a-z]+$\" default=ABC",
            "does not match the pattern",
        ),
        ("\"[]string | listMapKey=name\"", "listMapKey needs listType=map"),
        ("\"[]string | uniqueItems=true listType=map\"", "already a set"),
        ("string | pattern=\"(\"", "not a regular expression"),
        ("object | monotonic=true", "monotonic applies to"),
        ("string | message=\"why\"", "message follows"),
        ("boolean | enum=\"true\"", "enum applies to strings and integers"),
        ("\"[]string | default={}\"", "is not a list"),
    ] {
        let e = spec_error(&format!("f: {line}"), None);
        assert_eq!(e.path, "spec.f", "{line}");
        assert!(e.message.contains(expect), "{line}: {e}");
    }
}

#[test]
fn shapes_that_are_not_fields_are_refused() {
    assert!(spec_error("f: 3", None).message.contains("not 3"));
    assert!(spec_error("f: {}", None).message.contains("write `object`"));
    assert!(
        spec_error("f: {$self: \"string | required=true\", a: string}", None)
            .message
            .contains("`$self` describes")
    );
    let not_fields: Value = json!(["a"]);
    let e = expand(Compact {
        spec: Some(&not_fields),
        ..Compact::default()
    })
    .unwrap_err();
    assert_eq!(e[0].path, "spec");
}

#[test]
fn every_bad_field_is_reported_and_a_bad_named_type_once() {
    let errors = expanded(
        "a: strng
b: Person
c: Person
d: integer | minimum=x",
        Some("Person: {age: integer | minLength=1}"),
    )
    .unwrap_err();
    let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, ["spec.a", "types.Person.age", "spec.d"]);
}
