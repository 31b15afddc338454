//! The plan of writes for a hook's answer: creates, the update methods, deletions of what
//! the answer leaves out, a taken-over child's last-applied annotation, and answers that
//! are refused whole.

use serde_json::{Value, json};

use super::*;

fn parent() -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Thing",
        "metadata": {"name": "p", "namespace": "ns", "uid": "P"}})
}

fn kinds(method: UpdateMethod) -> Vec<ChildKind> {
    vec![ChildKind {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        namespaced: true,
        method,
    }]
}

fn cm(name: &str, value: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"v": value}})
}

fn live(name: &str, value: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"),
            "ownerReferences": [{"uid": "P", "controller": true}]},
        "data": {"v": value}})
}

fn run(method: UpdateMethod, owned: &[Value], desired: Vec<Value>) -> Vec<Write> {
    let parent = parent();
    let owner = Owner {
        parent: &parent,
        decorator: None,
    };
    plan(&owner, &kinds(method), owned, desired).unwrap()
}

#[test]
fn a_new_child_is_created_in_the_parents_namespace_with_its_controller_reference() {
    let writes = run(UpdateMethod::OnDelete, &[], vec![cm("a", "1")]);
    let [Write::Create(child)] = writes.as_slice() else {
        panic!("{writes:?}")
    };
    assert_eq!(child["metadata"]["namespace"], "ns");
    let reference = &child["metadata"]["ownerReferences"][0];
    assert_eq!(
        (reference["uid"].as_str(), reference["controller"].as_bool()),
        (Some("P"), Some(true))
    );
    assert_eq!(reference["kind"], "Thing");
}

#[test]
fn each_method_treats_a_changed_child_its_own_way() {
    let owned = [live("a", "1")];
    assert!(run(UpdateMethod::OnDelete, &owned, vec![cm("a", "2")]).is_empty());
    assert!(matches!(
        run(UpdateMethod::InPlace, &owned, vec![cm("a", "2")])[..],
        [Write::Apply(_)]
    ));
    let writes = run(UpdateMethod::Recreate, &owned, vec![cm("a", "2")]);
    let [Write::Recreate(old)] = writes.as_slice() else {
        panic!("{writes:?}")
    };
    assert_eq!(old["metadata"]["uid"], "uid-a", "the live child is deleted by its uid");
    assert!(
        run(UpdateMethod::Recreate, &owned, vec![cm("a", "1")]).is_empty(),
        "unchanged"
    );
}

#[test]
fn an_owned_child_the_answer_leaves_out_is_deleted_unless_it_is_going() {
    let mut going = live("b", "1");
    going["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z".into();
    let writes = run(UpdateMethod::InPlace, &[live("a", "1"), going], vec![]);
    assert!(
        matches!(&writes[..], [Write::Delete(d)] if d["metadata"]["name"] == "a"),
        "{writes:?}"
    );
}

#[test]
fn a_child_metacontroller_applied_loses_its_last_applied_annotation_first() {
    let mut taken = live("a", "1");
    taken["metadata"]["annotations"] = json!({(LAST_APPLIED): "{}"});
    let writes = run(UpdateMethod::InPlace, &[taken], vec![cm("a", "1")]);
    assert!(matches!(&writes[..], [Write::Forget(_)]), "{writes:?}");
}

#[test]
fn a_decorators_attachment_carries_the_controllers_name() {
    let parent = parent();
    let owner = Owner {
        parent: &parent,
        decorator: Some("svc-per-pod"),
    };
    let writes = plan(&owner, &kinds(UpdateMethod::OnDelete), &[], vec![cm("a", "1")]).unwrap();
    let [Write::Create(child)] = writes.as_slice() else {
        panic!("{writes:?}")
    };
    assert_eq!(child["metadata"]["annotations"][DECORATOR_CONTROLLER], "svc-per-pod");
}

#[test]
fn an_answer_stencil_cannot_follow_whole_is_refused() {
    let parent = parent();
    let owner = Owner {
        parent: &parent,
        decorator: None,
    };
    let kinds = kinds(UpdateMethod::InPlace);
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}});
    assert_eq!(
        plan(&owner, &kinds, &[], vec![secret]),
        Err(PlanError::UnknownKind("Secret s".into()))
    );
    assert_eq!(
        plan(&owner, &kinds, &[], vec![cm("a", "1"), cm("a", "2")]),
        Err(PlanError::Twice("ConfigMap ns/a".into()))
    );
    let unnamed = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}});
    assert_eq!(
        plan(&owner, &kinds, &[], vec![unnamed]),
        Err(PlanError::Unnamed("ConfigMap".into()))
    );
}
