//! When children are ready and what the parent's status says: dependencies wait for
//! readiness, `readyWhen` rules, status fields and the failure status.

use super::*;

#[test]
fn a_dependent_child_waits_until_its_dependency_is_observed_and_ready() {
    let deploy = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nspec:\n  replicas: 1";
    let children = format!("{}{}      dependsOn: [app]\n", child("app", deploy), child("cm", CM));
    let def = compile(&children, "");
    let out = Inputs::new().run(&def, &parent()).unwrap();
    assert_eq!(out.children.len(), 1);
    assert_eq!(
        out.waiting,
        vec![Waiting {
            child: "cm".into(),
            on: vec!["app".into()]
        }]
    );
    let ready = condition(&out.status, "Ready");
    assert_eq!(ready["status"], "False");
    assert_eq!(ready["reason"], "Waiting");
    assert!(ready["message"].as_str().unwrap().contains("cm (on app)"), "{ready}");
    assert_eq!(condition(&out.status, "Reconciling")["status"], "True");

    let live = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "team"},
        "spec": {"replicas": 1}, "status": {"updatedReplicas": 1, "availableReplicas": 1,
        "conditions": [{"type": "Available", "status": "True"}]}});
    let out = Inputs::new().observe("app", live).run(&def, &parent()).unwrap();
    assert!(out.waiting.is_empty());
    assert_eq!(out.children.len(), 2);
}

#[test]
fn ready_is_true_only_when_every_child_is_observed_and_ready() {
    let def = compile(&child("cm", CM), "");
    let live = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "w1-cm", "namespace": "team"}});
    let out = Inputs::new().observe("cm", live).run(&def, &parent()).unwrap();
    let ready = condition(&out.status, "Ready");
    assert_eq!(ready["status"], "True");
    assert_eq!(ready["observedGeneration"], 7);
    assert_eq!(out.status["observedGeneration"], 7);
    assert!(
        out.status["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["type"] != "Reconciling")
    );
}

#[test]
fn ready_when_can_compare_two_fields() {
    let rule = "      readyWhen: '$[?$.status.ready == $.spec.want]'\n";
    let cr = "apiVersion: example.com/v1\nkind: Backup\nmetadata:\n  name: b\nspec:\n  want: 2";
    let def = compile(&format!("{}{rule}", child("backup", cr)), "");
    let live = |ready: i64| {
        json!({"apiVersion": "example.com/v1", "kind": "Backup",
        "metadata": {"name": "b", "namespace": "team"}, "spec": {"want": 2}, "status": {"ready": ready}})
    };
    let out = Inputs::new().observe("backup", live(1)).run(&def, &parent()).unwrap();
    assert_eq!(condition(&out.status, "Ready")["status"], "False");
    assert!(
        condition(&out.status, "Ready")["message"]
            .as_str()
            .unwrap()
            .contains("readyWhen")
    );
    let out = Inputs::new().observe("backup", live(2)).run(&def, &parent()).unwrap();
    assert_eq!(condition(&out.status, "Ready")["status"], "True");
}

#[test]
fn status_fields_conditions_and_template_are_written() {
    let extra = "  status:\n    fields:\n      size: $.parent.spec.size\n      items: $.parent.spec.items[*]\n      absent: $.parent.spec.nothing\n    conditions:\n      - type: Big\n        when: '$[?$.parent.spec.size > 2]'\n      - type: Huge\n        when: '$[?$.parent.spec.size > 100]'\n    template: |\n      summary: {{ parent.metadata.name }} is {{ 'ready' if ready else 'not ready' }}\n";
    let def = compile(&child("cm", CM), extra);
    let out = Inputs::new().run(&def, &parent()).unwrap();
    let s = &out.status;
    assert_eq!(s["size"], 3);
    assert_eq!(s["items"], json!(["a", "b"]));
    assert_eq!(s.get("absent"), None);
    assert_eq!(s["summary"], "w1 is not ready");
    assert_eq!(condition(s, "Big")["status"], "True");
    assert_eq!(condition(s, "Big")["reason"], "RuleSatisfied");
    assert_eq!(condition(s, "Huge")["status"], "False");
}

#[test]
fn the_failure_status_is_stalled_and_not_ready() {
    let def = compile(&child("cm", "apiVersion: v1\nkind: ConfigMap\n{{ nope.x }}"), "");
    let err = Inputs::new().run(&def, &parent()).unwrap_err();
    let status = failure_status(&parent(), &err, &[]);
    assert_eq!(condition(&status, "Ready")["status"], "False");
    assert_eq!(condition(&status, "Stalled")["status"], "True");
    assert_eq!(condition(&status, "Stalled")["reason"], "RenderFailed");
    assert_eq!(status["observedGeneration"], 7);
}
