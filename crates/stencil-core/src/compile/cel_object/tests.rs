use serde_json::json;

use super::*;

fn deployment() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "${schema.metadata.name}-web", "labels": "${schema.spec.labels}"},
        "spec": {
            "replicas": "${schema.spec.replicas}",
            "paused": "${has(schema.spec.paused) ? schema.spec.paused : omit()}",
            "ports": [{"port": 80}, "${schema.spec.extra}"],
        },
    })
}

fn render(object: &Value, context: &Value) -> Result<Value, ObjectError> {
    compile(object).unwrap().render(&|name| context.get(name))
}

#[test]
fn each_expression_gives_its_value_with_its_type_and_omit_leaves_a_field_out() {
    let schema = json!({"schema": {"metadata": {"name": "blog"},
        "spec": {"replicas": 2, "labels": {"app": "blog"}, "extra": {"port": 443}}}});
    let want = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "blog-web", "labels": {"app": "blog"}},
        "spec": {"replicas": 2, "ports": [{"port": 80}, {"port": 443}]},
    });
    assert_eq!(render(&deployment(), &schema), Ok(want));
}

#[test]
fn a_failure_names_the_field_and_a_parse_error_every_field() {
    let err = render(
        &deployment(),
        &json!({"schema": {"metadata": {"name": "blog"}, "spec": {}}}),
    )
    .unwrap_err();
    assert_eq!(err.path, "metadata.labels");
    assert!(matches!(err.error, CelError::Missing { .. }), "{err}");
    let broken = json!({"a": "${1 +}", "b": ["ok", "${(}"]});
    let paths: Vec<String> = compile(&broken).unwrap_err().into_iter().map(|e| e.path).collect();
    assert_eq!(paths, ["a", "b[1]"]);
}

#[test]
fn the_kind_and_identity_are_read_from_literal_fields() {
    let node = compile(&deployment()).unwrap();
    assert_eq!(node.variables().into_iter().collect::<Vec<_>>(), ["schema"]);
    assert_eq!(
        node.expression_paths(),
        [
            "metadata.name",
            "metadata.labels",
            "spec.replicas",
            "spec.paused",
            "spec.ports[1]"
        ]
    );
    assert_eq!(declared_kind(&deployment()).unwrap().kind, "Deployment");
    assert!(
        declared_kind(&json!({"apiVersion": "${x}", "kind": "A"}))
            .unwrap_err()
            .contains("literal")
    );
    assert!(
        declared_kind(&json!({"kind": "A"}))
            .unwrap_err()
            .contains("no apiVersion")
    );
    assert_eq!(fixed_identity(&deployment()), None);
    let fixed = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}});
    assert_eq!(fixed_identity(&fixed).as_deref(), Some("v1\nConfigMap\na\n"));
}
