//! The definition's helpers: macros and variables every template may import by name,
//! evaluated in the importing template's context, with their failures placed in
//! `spec.helpers`.

use super::*;

/// `spec.helpers` with a labels macro, a port variable and a macro that fails without
/// `spec.owner` (on line 12 of the definition).
const HELPERS: &str = r#"  helpers: |
    {%- macro labels() %}{app: {{ parent.metadata.name }}, size: {{ parent.spec.size | quote }}}{% endmacro %}
    {%- set port = 80 if parent.spec.size < 5 else 443 %}
    {%- macro owner() %}{{ parent.spec.owner | required('spec.owner is required') }}{% endmacro %}
"#;

fn configmap(data: &str) -> String {
    format!(
        "{{%- import \"helpers\" as h %}}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{{{ parent.metadata.name }}}}
  labels: {{{{ h.labels() }}}}
data:
  {data}"
    )
}

#[test]
fn imported_macros_and_variables_see_the_parent() {
    let def = compile(&child("cm", &configmap("port: {{ h.port | quote }}")), HELPERS);
    let out = Inputs::new().run(&def, &parent()).unwrap();
    let cm = &out.children[0].object;
    assert_eq!(cm["metadata"]["labels"]["app"], "w1");
    assert_eq!(cm["metadata"]["labels"]["size"], "3");
    assert_eq!(cm["data"]["port"], "80");
}

#[test]
fn a_failure_inside_a_helper_is_placed_in_the_helpers() {
    let def = compile(&child("cm", &configmap("owner: {{ h.owner() }}")), HELPERS);
    let err = Inputs::new().run(&def, &parent()).unwrap_err();
    let RenderError::Template { at, message, .. } = &err.0[0] else {
        panic!("{err}")
    };
    assert!(message.contains("spec.owner is required"), "{message}");
    assert_eq!(
        (at.file.as_str(), at.line, at.field.as_str()),
        ("w.yaml", 12, "helpers"),
        "{err}"
    );
}

#[test]
fn importing_helpers_that_are_not_there_is_a_compile_error() {
    let text = bare_definition(WIDGET, &child("cm", &configmap("a: b")), "");
    let (_, diags) = compile_file("w.yaml", &text);
    let message = diags.to_string();
    assert!(message.contains("no `spec.helpers`"), "{message}");
    assert!(message.contains("w.yaml:12:9:"), "{message}");
}

#[test]
fn a_child_reads_what_its_imported_helpers_read() {
    let helpers = "  helpers: |\n    {%- set db_host = children.db.metadata.name %}\n";
    let app = configmap("host: {{ h.db_host }}");
    let def = compile(&format!("{}{}", child("db", CM), child("app", &app)), helpers);
    assert_eq!(def.reads(1), ["db"]);
    assert!(def.reads(0).is_empty());
}
