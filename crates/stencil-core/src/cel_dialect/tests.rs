use serde_json::json;

use super::*;

fn eval(text: &str, variables: Value) -> Result<Value, CelError> {
    parse(text)?.evaluate(variables.as_object().unwrap())
}

/// Each text evaluates to its value over `schema()`.
fn assert_cases(cases: &[(&str, Value)]) {
    for (text, want) in cases {
        assert_eq!(eval(text, schema()).as_ref(), Ok(want), "{text}");
    }
}

fn schema() -> Value {
    json!({"schema": {"spec": {"name": "web", "replicas": 3, "tags": ["a", "b"], "env": {"mode": "prod"}}}})
}

#[test]
fn a_lone_expression_keeps_its_type() {
    assert_eq!(eval("${schema.spec.replicas}", schema()), Ok(json!(3)));
    assert_eq!(eval("${schema.spec.tags}", schema()), Ok(json!(["a", "b"])));
    assert_eq!(eval("${schema.spec.replicas > 2}", schema()), Ok(json!(true)));
}

#[test]
fn expressions_within_text_are_joined_as_strings() {
    assert_eq!(
        eval("${schema.spec.name}-${schema.spec.replicas}.svc", schema()),
        Ok(json!("web-3.svc"))
    );
    assert_eq!(eval("no expression", schema()), Ok(json!("no expression")));
}

#[test]
fn braces_and_quotes_inside_an_expression_do_not_end_it() {
    assert_eq!(eval("${{'a': '}'}['a']}", schema()), Ok(json!("}")));
    assert_eq!(eval("${\"x\" + '}'}", schema()), Ok(json!("x}")));
}

#[test]
fn the_functions_kro_examples_use_are_there() {
    let cases = [
        ("${has(schema.spec.env.mode)}", json!(true)),
        ("${has(schema.spec.missing)}", json!(false)),
        ("${schema.spec.?missing.orValue('none')}", json!("none")),
        ("${schema.spec.name.split('e')}", json!(["w", "b"])),
        ("${schema.spec.tags.join(',')}", json!("a,b")),
        ("${string(schema.spec.replicas)}", json!("3")),
        ("${schema.spec.tags.exists(t, t == 'b')}", json!(true)),
        ("${schema.spec.tags.all(t, size(t) == 1)}", json!(true)),
        ("${schema.spec.tags.map(t, t + t)}", json!(["aa", "bb"])),
        ("${schema.spec.tags.filter(t, t != 'a')}", json!(["b"])),
        ("${size(schema.spec.tags)}", json!(2)),
        ("${'WeB'.lowerAscii()}", json!("web")),
        ("${schema.spec.name.matches('^w')}", json!(true)),
        ("${schema.spec.name.substring(1)}", json!("eb")),
        ("${base64.encode(b'web')}", json!("d2Vi")),
    ];
    assert_cases(&cases);
}

#[test]
fn kros_hashes_give_what_go_gives() {
    let cases = [
        (
            "${base64.encode(hash.sha256('web'))}",
            json!("S15X9usvQrkDmz0eE5KSlfIxdJxRDL40HNaANtmvl+I="),
        ),
        ("${base64.encode(hash.md5('web'))}", json!("JWel7JcF63rCyYQDPgYYnQ==")),
        ("${base64.encode(hash.fnv64a('web'))}", json!("XqDhGUhyHvE=")),
    ];
    assert_cases(&cases);
}

#[test]
fn errors_say_where_and_what() {
    assert_eq!(
        eval("name: ${schema.spec.name", schema()),
        Err(CelError::Unclosed { column: 7 })
    );
    let Err(CelError::Parse { column, expression, .. }) = eval("a ${schema.spec.(}", schema()) else {
        panic!("a parse error")
    };
    assert_eq!((column, expression.as_str()), (3, "schema.spec.("));
    let Err(CelError::Evaluate { expression, .. }) = eval("${schema.spec.missing}", schema()) else {
        panic!("an evaluation error")
    };
    assert_eq!(expression, "schema.spec.missing");
}
