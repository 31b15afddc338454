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

#[test]
fn for_each_renders_one_object_per_combination_first_dimension_outermost() {
    let entries: Vec<BTreeMap<String, String>> = vec![
        [("zone".to_string(), "${schema.spec.zones}".to_string())].into(),
        [("i".to_string(), "${lists.range(2)}".to_string())].into(),
    ];
    let child = ObjectChild {
        object: compile(&json!({"metadata": {"name": "${zone + '-' + string(i)}"}, "size": "${schema.spec.size}"}))
            .unwrap(),
        for_each: compile_for_each(&entries).unwrap(),
    };
    assert_eq!(child.variables().into_iter().collect::<Vec<_>>(), ["schema"]);
    let context = json!({"schema": {"spec": {"zones": ["a", "b"], "size": 3}}});
    let names: Vec<Value> = child
        .render(&|name| context.get(name))
        .unwrap()
        .into_iter()
        .map(|o| o["metadata"]["name"].clone())
        .collect();
    assert_eq!(names, [json!("a-0"), json!("a-1"), json!("b-0"), json!("b-1")]);
    let empty = json!({"schema": {"spec": {"zones": [], "size": 3}}});
    assert_eq!(child.render(&|name| empty.get(name)).unwrap(), Vec::<Value>::new());
    let not_a_list = json!({"schema": {"spec": {"zones": "a", "size": 3}}});
    let err = child.render(&|name| not_a_list.get(name)).unwrap_err();
    assert_eq!(err.path, "forEach[0]");
    assert!(err.to_string().contains("not a list"), "{err}");
}

#[test]
fn a_for_each_entry_is_one_variable_and_one_expression() {
    let entry = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    };
    let errors = compile_for_each(&[
        entry(&[("a", "${[1]}"), ("b", "${[2]}")]),
        entry(&[("1x", "${[1]}")]),
        entry(&[("c", "plain")]),
        entry(&[("d", "${[1}")]),
    ])
    .unwrap_err();
    let paths: Vec<&str> = errors.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(paths, ["forEach[0]", "forEach[1]", "forEach[2]", "forEach[3]"]);
}
