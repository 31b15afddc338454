use serde_json::{Value, json};

use super::*;

fn website() -> CompiledDefinition {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../operators/website.yaml");
    let (mut defs, diags) = crate::compile::compile_file(path, &std::fs::read_to_string(path).unwrap());
    assert!(diags.0.is_empty(), "{diags}");
    defs.remove(0)
}

fn v1() -> Value {
    json!({
        "apiVersion": "examples.stencil.dev/v1",
        "kind": "Website",
        "metadata": {"name": "docs", "namespace": "web", "uid": "u1", "labels": {"team": "a"}},
        "spec": {
            "content": {"index.html": "hi"},
            "replicas": 2,
            "domains": ["docs.example.com", "www.docs.example.com"],
            "tls": true,
            "ingressClassName": "nginx"
        },
        "status": {"url": "https://docs.example.com"}
    })
}

#[test]
fn a_version_converts_down_and_back_without_loss() {
    let def = website();
    let old = convert(&def, &v1(), "v1alpha1").unwrap();
    assert_eq!(old["apiVersion"], "examples.stencil.dev/v1alpha1");
    assert_eq!(old["spec"]["domain"], "docs.example.com");
    assert!(old["spec"].get("tls").is_none());
    assert!(old["spec"].get("ingressClassName").is_none());
    assert_eq!(old["status"], v1()["status"]);
    assert!(old["metadata"]["annotations"][CONVERSION_DATA].is_string());

    let mut relabelled = old.clone();
    relabelled["metadata"]["labels"]["tier"] = json!("web");
    let back = convert(&def, &relabelled, "v1").unwrap();
    let mut expected = v1();
    expected["metadata"]["labels"]["tier"] = json!("web");
    assert_eq!(back, expected);
}

#[test]
fn a_change_made_through_the_old_version_wins_and_the_rest_survives() {
    let def = website();
    let mut old = convert(&def, &v1(), "v1alpha1").unwrap();
    old["spec"]["domain"] = json!("shop.example.com");
    let back = convert(&def, &old, "v1").unwrap();
    // The one limit: the domain changed through v1alpha1 replaces the list it stood for.
    assert_eq!(back["spec"]["domains"], json!(["shop.example.com"]));
    assert_eq!(back["spec"]["ingressClassName"], "nginx");
    assert_eq!(back["spec"]["tls"], true, "{back}");
}

#[test]
fn a_lossless_trip_adds_no_annotation_and_a_shared_schema_only_relabels() {
    let def = website();
    let mut plain = v1();
    for key in ["ingressClassName", "tls"] {
        plain["spec"].as_object_mut().unwrap().remove(key);
    }
    plain["spec"]["domains"] = json!(["docs.example.com"]);
    let old = convert(&def, &plain, "v1alpha1").unwrap();
    assert!(old["metadata"].get("annotations").is_none(), "{old}");
    let beta = convert(&def, &v1(), "v1beta1").unwrap();
    assert_eq!(beta["apiVersion"], "examples.stencil.dev/v1beta1");
    assert_eq!(beta["spec"], v1()["spec"]);
    let spoke_to_spoke = convert(&def, &old, "v1beta1").unwrap();
    assert_eq!(spoke_to_spoke["spec"], plain["spec"]);
}

#[test]
fn an_unknown_version_or_kind_is_refused() {
    let def = website();
    let e = convert(&def, &v1(), "v2").unwrap_err();
    assert!(
        e.to_string().contains("examples.stencil.dev/v2 is not a version"),
        "{e}"
    );
    let mut other = v1();
    other["apiVersion"] = json!("apps/v1");
    assert!(matches!(
        convert(&def, &other, "v1alpha1"),
        Err(ConvertError::UnknownVersion { .. })
    ));
    other["apiVersion"] = json!("examples.stencil.dev/v1");
    other["kind"] = json!("Blog");
    assert!(matches!(
        convert(&def, &other, "v1alpha1"),
        Err(ConvertError::Malformed { .. })
    ));
}

#[test]
fn a_failing_template_names_the_object_and_the_line() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../operators/website.yaml");
    let text = std::fs::read_to_string(path).unwrap().replace(
        "domain: {{ object.spec.domains[0] | tojson }}",
        "domain: {{ object.spec.nope.x }}",
    );
    let (defs, diags) = crate::compile::compile_file("website.yaml", &text);
    assert!(diags.0.is_empty(), "{diags}");
    let e = convert(&defs[0], &v1(), "v1alpha1").unwrap_err().to_string();
    let line = text.lines().position(|l| l.contains("object.spec.nope")).unwrap() + 1;
    assert!(e.contains("Website web/docs"), "{e}");
    assert!(e.contains(&format!("website.yaml:{line}:")), "{e}");
    assert!(e.contains("conversion.fromStorage"), "{e}");
}

#[test]
fn a_template_that_renders_metadata_is_refused() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../operators/website.yaml");
    let text = std::fs::read_to_string(path).unwrap().replacen(
        "          fromStorage: |\n            spec:",
        "          fromStorage: |\n            metadata: {name: x}\n            spec:",
        1,
    );
    let (defs, diags) = crate::compile::compile_file("website.yaml", &text);
    assert!(diags.0.is_empty(), "{diags}");
    let e = convert(&defs[0], &v1(), "v1alpha1").unwrap_err().to_string();
    assert!(e.contains("renders `metadata`"), "{e}");
}

#[test]
fn a_converted_object_the_target_schema_refuses_names_the_object_version_and_path() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../operators/website.yaml");
    let text = std::fs::read_to_string(path).unwrap().replacen(
        "              domains: [{{ object.spec.domain | tojson }}]",
        "              domains: {{ object.spec.domain | tojson }}",
        1,
    );
    assert!(text.contains("domains: {{ object.spec.domain | tojson }}"));
    let (defs, diags) = crate::compile::compile_file("website.yaml", &text);
    assert!(diags.0.is_empty(), "{diags}");
    let old = json!({"apiVersion": "examples.stencil.dev/v1alpha1", "kind": "Website",
        "metadata": {"name": "blog", "namespace": "web"},
        "spec": {"content": {"index.html": "hi"}, "domain": "blog.example.com"}});
    let e = convert(&defs[0], &old, "v1").unwrap_err().to_string();
    assert!(e.contains("Website web/blog to v1"), "{e}");
    assert!(e.contains(".spec.domains"), "{e}");
    assert!(e.contains("conversion.toStorage"), "{e}");
}
