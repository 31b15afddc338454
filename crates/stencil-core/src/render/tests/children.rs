//! What a child becomes: its namespace, labels and owner reference, where it may go,
//! how many documents it may render, and how children appear to each other.

use super::*;

#[test]
fn a_child_gets_the_parent_namespace_labels_and_a_controller_reference() {
    let def = compile(&child("cm", CM), "");
    let out = Inputs::new().run(&def, &parent()).unwrap();
    let obj = &out.children[0].object;
    assert_eq!(obj["metadata"]["namespace"], "team");
    assert_eq!(obj["data"]["size"], "3");
    let labels = &obj["metadata"]["labels"];
    assert_eq!(labels["stencil.dev/child"], "cm");
    assert_eq!(labels["stencil.dev/parent-uid"], "uid-1");
    assert_eq!(labels["stencil.dev/definition"], "widgets.example.com");
    assert_eq!(labels["app.kubernetes.io/managed-by"], "stencil");
    assert!(
        labels.get("stencil.dev/shard").is_none(),
        "an unsharded parent's child has no shard"
    );
    let owner = &obj["metadata"]["ownerReferences"][0];
    assert_eq!(
        owner,
        &json!({"apiVersion": "example.com/v1", "kind": "Widget", "name": "w1",
        "controller": true, "blockOwnerDeletion": true, "uid": "uid-1"})
    );
}

#[test]
fn a_child_carries_its_parents_shard() {
    let def = compile(&child("cm", CM), "");
    let mut p = parent();
    p["metadata"]["labels"] = json!({"stencil.dev/shard": "stencil-1", "team": "a"});
    let out = Inputs::new().run(&def, &p).unwrap();
    let labels = &out.children[0].object["metadata"]["labels"];
    assert_eq!(labels["stencil.dev/shard"], "stencil-1");
    assert!(labels.get("team").is_none(), "only the shard label is copied");
}

#[test]
fn a_cluster_scoped_child_gets_no_namespace_and_may_not_set_one() {
    let ns = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: x";
    let def = compile(&child("ns", ns), "");
    let out = Inputs::new().run(&def, &parent()).unwrap();
    assert_eq!(out.children[0].object["metadata"].get("namespace"), None);
    // A namespaced parent cannot own a cluster-scoped child.
    assert_eq!(out.children[0].object["metadata"].get("ownerReferences"), None);
    let def = compile(&child("ns", &format!("{ns}\n  namespace: y")), "");
    let err = Inputs::new().run(&def, &parent()).unwrap_err();
    assert!(
        err.to_string()
            .contains("Namespace is cluster-scoped; remove metadata.namespace"),
        "{err}"
    );
}

#[test]
fn another_namespace_needs_allowed_namespaces() {
    let other = format!("{CM}\n").replace("metadata:\n", "metadata:\n  namespace: shared\n");
    let def = compile(&child("cm", &other), "");
    let err = Inputs::new().run(&def, &parent()).unwrap_err();
    assert!(err.to_string().contains("outside the parent's namespace"), "{err}");
    assert!(err.to_string().starts_with("w.yaml:"), "{err}");

    let def = compile(&child("cm", &other), "  allowedNamespaces: [shared]\n");
    let out = Inputs::new().run(&def, &parent()).unwrap();
    let meta = &out.children[0].object["metadata"];
    assert_eq!(meta["namespace"], "shared");
    // An ownerReference cannot cross namespaces; the labels lead back to the parent.
    assert_eq!(meta.get("ownerReferences"), None);
    assert_eq!(meta["labels"]["stencil.dev/parent-namespace"], "team");

    // A Stencil that serves only some namespaces refuses a child outside them: it could
    // neither watch nor prune it there.
    let inputs = Inputs::new();
    let served = ["team".to_string(), "web".to_string()];
    let err = render(
        &def,
        RenderInput {
            served: &served,
            ..inputs.input(&parent())
        },
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("`shared`, which this Stencil does not serve (--namespace team,web)"),
        "{err}"
    );
    let served = ["team".to_string(), "shared".to_string()];
    assert!(
        render(
            &def,
            RenderInput {
                served: &served,
                ..inputs.input(&parent())
            }
        )
        .is_ok()
    );
}

#[test]
fn a_cluster_scoped_parent_owns_children_in_any_namespace_and_must_name_it() {
    let mut p = parent();
    p["metadata"].as_object_mut().unwrap().remove("namespace");
    let def = compile(&child("cm", CM), "");
    let err = Inputs::new().run(&def, &p).unwrap_err();
    assert!(err.to_string().contains("set metadata.namespace"), "{err}");
    let def = compile(
        &child("cm", &CM.replace("metadata:\n", "metadata:\n  namespace: anywhere\n")),
        "",
    );
    let out = Inputs::new().run(&def, &p).unwrap();
    assert_eq!(out.children[0].object["metadata"]["ownerReferences"][0]["uid"], "uid-1");
}

#[test]
fn a_single_child_may_not_render_two_documents_but_a_collection_may() {
    let two = "{% for i in parent.spec.items %}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{{ i }}\n{% endfor %}";
    let def = compile(&child("cms", two), "");
    let err = Inputs::new().run(&def, &parent()).unwrap_err();
    assert!(err.to_string().contains("set `collection: true`"), "{err}");

    let def = compile(&format!("{}      collection: true\n", child("cms", two)), "");
    let out = Inputs::new().run(&def, &parent()).unwrap();
    let names: Vec<&Value> = out.children.iter().map(|c| &c.object["metadata"]["name"]).collect();
    assert_eq!(names, vec!["cm-a", "cm-b"]);
}

#[test]
fn children_appear_in_the_context_as_objects_or_lists() {
    let echo = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: echo\ndata:\n  single: {{ children.one.metadata.name }}\n  many: {{ children.many | length | quote }}";
    let children = format!(
        "{}{}{}      collection: true\n",
        child("echo", echo),
        child("one", CM),
        child("many", &CM.replace("-cm", "-many"))
    );
    let def = compile(&children, "");
    let cm = |n: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": n, "namespace": "team"}});
    let inputs = Inputs::new().observe("one", cm("first")).observe("many", cm("w1-many"));
    let out = inputs.run(&def, &parent()).unwrap();
    let echo = out.children.iter().find(|c| c.child == "echo").unwrap();
    assert_eq!(echo.object["data"], json!({"single": "first", "many": "1"}));
}

#[test]
fn one_object_rendered_by_two_children_or_twice_by_one_is_an_error_naming_both() {
    let other = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: w1-cm\ndata:\n  size: other";
    let def = compile(&format!("{}{}", child("cm", CM), child("copy", other)), "");
    let err = Inputs::new().run(&def, &parent()).unwrap_err().to_string();
    assert!(
        err.contains("renders ConfigMap team/w1-cm, which child `cm` renders too") && err.contains("copy"),
        "{err}"
    );
    let twice =
        "{% for i in parent.spec.items %}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: same\n{% endfor %}";
    let def = compile(&format!("{}      collection: true\n", child("cms", twice)), "");
    let err = Inputs::new().run(&def, &parent()).unwrap_err().to_string();
    assert!(err.contains("renders ConfigMap team/same twice"), "{err}");
}

#[test]
fn a_child_the_garbage_collector_must_not_take_carries_no_owner_reference() {
    let plain = compile(&child("cm", CM), "");
    let out = Inputs::new().run(&plain, &parent()).unwrap();
    assert!(
        out.children[0].object["metadata"]["ownerReferences"].is_array(),
        "positive control"
    );
    let orphan = compile(&format!("{}      deletionPolicy: Orphan\n", child("cm", CM)), "");
    let out = Inputs::new().run(&orphan, &parent()).unwrap();
    assert_eq!(
        out.children[0].object["metadata"].get("ownerReferences"),
        None,
        "an Orphan child outlives a foreground deletion"
    );
    let other = CM.replace("-cm", "-other");
    let waves = compile(
        &format!("{}{}      dependsOn: [cm]\n", child("cm", CM), child("other", &other)),
        "",
    );
    let out = Inputs::new().run(&waves, &parent()).unwrap();
    assert_eq!(
        out.children[0].object["metadata"].get("ownerReferences"),
        None,
        "Stencil orders this teardown, not the garbage collector"
    );
}

#[test]
fn a_decorator_renders_nothing_for_an_object_it_does_not_match() {
    let decorate = "  decorate:\n    annotationSelector: {matchLabels: {decorate: \"yes\"}}\n";
    let def = compile(&child("cm", CM), decorate);
    let out = Inputs::new().run(&def, &parent()).unwrap();
    assert!(out.children.is_empty());
    let mut annotated = parent();
    annotated["metadata"]["annotations"] = json!({"decorate": "yes"});
    let out = Inputs::new().run(&def, &annotated).unwrap();
    assert_eq!(out.children.len(), 1);
    assert_eq!(
        out.children[0].object["metadata"]["ownerReferences"][0]["blockOwnerDeletion"], false,
        "a decorator needs no write on its parent's finalizers"
    );
}
