//! What a template may not do: fail without the author's message, run without end, grow
//! without bound, read files or the environment, or render something other than an
//! object; and what it always does: give the same output for the same inputs.

use super::*;

#[test]
fn required_fails_the_render_with_the_authors_message_and_position() {
    let def = compile(
        &child(
            "cm",
            &CM.replace(
                "parent.spec.size | quote",
                "parent.spec.owner | required('spec.owner is required')",
            ),
        ),
        "",
    );
    let err = Inputs::new().run(&def, &parent()).unwrap_err();
    let RenderError::Template { at, message, .. } = &err.0[0] else {
        panic!("{err}")
    };
    assert!(message.contains("spec.owner is required"), "{message}");
    assert_eq!((at.file.as_str(), at.line), ("w.yaml", 17), "{err}");
    assert_eq!(at.field, "children[cm].template");
}

#[test]
fn the_fuel_limit_stops_a_runaway_template() {
    // range() refuses a billion items outright; nested loops under that cap run out of fuel.
    let def = compile(
        &child(
            "cm",
            "{% for i in range(1000000000) %}{{ i }}{% endfor %}\napiVersion: v1\nkind: ConfigMap",
        ),
        "",
    );
    let err = Inputs::new().run(&def, &parent()).unwrap_err().to_string();
    assert!(
        err.contains("range has too many elements") && err.contains("children[cm].template"),
        "{err}"
    );
    let nested = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}\napiVersion: v1\nkind: ConfigMap";
    let def = compile(&child("cm", nested), "");
    let err = Inputs::new().run(&def, &parent()).unwrap_err().to_string();
    assert!(
        err.contains("engine ran out of fuel") && err.contains("w.yaml:12:"),
        "{err}"
    );
}

#[test]
fn rendered_output_is_size_limited() {
    let big = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n  x: {{ 'x' * 1100000 }}";
    let def = compile(&child("cm", big), "");
    let err = Inputs::new().run(&def, &parent()).unwrap_err();
    assert!(matches!(err.0[0], RenderError::TooLarge { .. }), "{err}");
}

#[test]
fn templates_cannot_read_files_or_the_environment() {
    for (reach, expect) in [
        ("{% include '/etc/hostname' %}", "not found"),
        ("{% import '/etc/hostname' as h %}", "not found"),
        ("{{ env.HOME }}", "undefined"),
        ("{{ getenv('HOME') }}", "unknown function"),
    ] {
        let template = format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  x: \"{reach}\"");
        let text = bare_definition(WIDGET, &child("cm", &template), "");
        let (defs, diags) = compile_file("w.yaml", &text);
        let message = match defs.first() {
            Some(def) => Inputs::new().run(def, &parent()).unwrap_err().to_string(),
            None => diags.to_string(),
        };
        assert!(message.contains(expect), "{reach}: {message}");
    }
}

#[test]
fn output_that_is_not_an_object_is_rejected() {
    for (template, expect) in [
        ("- a\n- b", "must be a YAML mapping"),
        ("kind: ConfigMap\nmetadata:\n  name: x", "apiVersion is missing"),
        ("apiVersion: v1\nkind: ConfigMap", "has no metadata.name"),
        ("a: [1", "not valid YAML"),
        (
            "apiVersion: v1\n{{ \"kind\" }}: Secret\nmetadata:\n  name: s",
            "v1/Secret is not among the kinds",
        ),
    ] {
        // The declaration the compiler needs, rendered away so only `template` is output.
        let declared = format!("{{% if false %}}\napiVersion: v1\nkind: ConfigMap\n{{% endif %}}\n{template}");
        let def = compile(&child("cm", &declared), "");
        let err = Inputs::new().run(&def, &parent()).unwrap_err();
        assert!(err.to_string().contains(expect), "{template}: {err}");
    }
}

#[test]
fn the_same_inputs_give_byte_identical_output() {
    let def = compile(&child("cm", CM), "");
    let a = serde_json::to_string(&Inputs::new().run(&def, &parent()).unwrap().to_json()).unwrap();
    let b = serde_json::to_string(&Inputs::new().run(&def, &parent()).unwrap().to_json()).unwrap();
    assert_eq!(a, b);
}
