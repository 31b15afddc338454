//! Render is deterministic and never panics, whatever the parent's spec holds.

use proptest::prelude::*;

use super::*;

fn arbitrary_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "[a-z0-9 :{}%-]{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-z]{1,6}", inner, 0..5).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn render_is_deterministic_and_never_panics(spec in arbitrary_json(), name in "[a-z0-9.-]{0,20}") {
        let template = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ parent.metadata.name | dns_label }}\ndata:\n  spec: {{ parent.spec | tojson | quote }}\n  sum: {{ parent.spec | tojson | sha256 }}\n{% if parent.spec.a %}  a: {{ parent.spec.a | tojson }}{% endif %}";
        let def = compile(&child("cm", template), "  status:\n    fields:\n      any: $.parent.spec..a\n");
        let p = json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": name, "namespace": "ns"}, "spec": spec});
        let first = Inputs::new().run(&def, &p).map(|o| o.to_json()).map_err(|e| e.to_string());
        let second = Inputs::new().run(&def, &p).map(|o| o.to_json()).map_err(|e| e.to_string());
        prop_assert_eq!(first, second);
    }
}
