//! Render tests of what reads a collection and of the status rules: aggregates,
//! expression rules and their errors, latched conditions, a child that waits for a whole
//! collection.

use serde_json::{Value, json};

use super::*;

/// A Job-like definition: `replicas` Pods as a collection, `Complete` once
/// `spec.completions` of them succeeded, latched.
fn job(latch: bool) -> CompiledDefinition {
    let pods = "{% for i in range(parent.spec.size) %}\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: {{ parent.metadata.name }}-{{ i }}\nspec:\n  containers: [{name: c, image: busybox}]\n{% endfor %}";
    let body: String = pods.lines().map(|l| format!("        {l}\n")).collect();
    let children = format!("    - name: pods\n      collection: true\n      template: |\n{body}");
    let status = format!(
        "  status:\n    fields:\n      succeeded: \"{{{{ children.pods | selectattr('status.phase', 'eq', 'Succeeded') | list | length }}}}\"\n      phases: $.children.pods[*].status.phase\n    conditions:\n      - type: Complete\n        latch: {latch}\n        when: \"{{{{ children.pods | selectattr('status.phase', 'eq', 'Succeeded') | list | length >= parent.spec.size }}}}\"\n        reason: AllSucceeded\n"
    );
    compile(&children, &status)
}

fn pod(i: usize, phase: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("w1-{i}"), "namespace": "team"},
        "status": {"phase": phase}})
}

fn with_status(mut parent: Value, status: &Value) -> Value {
    parent["status"] = status.clone();
    parent
}

#[test]
fn an_expression_field_and_condition_aggregate_a_collection() {
    let def = job(false);
    let inputs = Inputs::new()
        .observe("pods", pod(0, "Succeeded"))
        .observe("pods", pod(1, "Running"))
        .observe("pods", pod(2, "Succeeded"));
    let status = inputs.run(&def, &parent()).unwrap().status;
    assert_eq!(status["succeeded"], 2);
    assert_eq!(status["phases"], json!(["Succeeded", "Running", "Succeeded"]));
    assert_eq!(condition(&status, "Complete")["status"], "False");

    let done = Inputs::new()
        .observe("pods", pod(0, "Succeeded"))
        .observe("pods", pod(1, "Succeeded"))
        .observe("pods", pod(2, "Succeeded"));
    let status = done.run(&def, &parent()).unwrap().status;
    assert_eq!(status["succeeded"], 3);
    assert_eq!(condition(&status, "Complete")["status"], "True");
    assert_eq!(condition(&status, "Complete")["reason"], "AllSucceeded");
}

#[test]
fn a_latched_condition_stays_true_until_the_generation_moves() {
    let def = job(true);
    let all = |n: usize| (0..n).fold(Inputs::new(), |i, n| i.observe("pods", pod(n, "Succeeded")));
    let first = all(3).run(&def, &parent()).unwrap().status;
    assert_eq!(condition(&first, "Complete")["status"], "True");

    // A Pod is deleted afterwards: the rule no longer holds, the condition stays.
    let after = all(2).run(&def, &with_status(parent(), &first)).unwrap().status;
    let kept = condition(&after, "Complete");
    assert_eq!(
        (kept["status"].as_str(), kept["reason"].as_str()),
        (Some("True"), Some("AllSucceeded"))
    );
    assert_eq!(after["succeeded"], 2);

    // So does a render that fails.
    let failure = RenderFailure(Vec::new());
    let failed = failure_status(&with_status(parent(), &after), &failure, &def.latched_conditions());
    assert_eq!(condition(&failed, "Complete")["status"], "True");

    // A spec change (a new generation) evaluates it afresh.
    let mut edited = with_status(parent(), &after);
    edited["metadata"]["generation"] = json!(8);
    let fresh = all(2).run(&def, &edited).unwrap().status;
    assert_eq!(condition(&fresh, "Complete")["status"], "False");

    // Without latch the same deletion turns it False.
    let unlatched = all(2).run(&job(false), &with_status(parent(), &first)).unwrap().status;
    assert_eq!(condition(&unlatched, "Complete")["status"], "False");
}

#[test]
fn a_status_rule_that_fails_is_a_render_error_in_its_field() {
    let extra = "  status:\n    conditions:\n      - type: Odd\n        when: \"{{ parent.metadata.name | regex_match('(') }}\"\n";
    let def = compile(&child("cm", CM), extra);
    let err = Inputs::new().run(&def, &parent()).unwrap_err().to_string();
    assert!(err.contains("status.conditions[Odd].when"), "{err}");
    assert!(err.contains("invalid regular expression"), "{err}");
}

#[test]
fn an_expression_ready_rule_reads_the_objects_fields() {
    let ready = "{{ data.size | int(default=0) >= 3 }}";
    let body = format!("{CM}\n");
    let entry = format!("{}      readyWhen: \"{ready}\"\n", child("cm", &body));
    let def = compile(&entry, "");
    let live = |size: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "w1-cm", "namespace": "team"}, "data": {"size": size}})
    };
    let out = Inputs::new().observe("cm", live("3")).run(&def, &parent()).unwrap();
    assert_eq!(condition(&out.status, "Ready")["status"], "True");
    let out = Inputs::new().observe("cm", live("x")).run(&def, &parent()).unwrap();
    assert_eq!(condition(&out.status, "Ready")["status"], "False");
}

/// A pool: one Pod per item, and a summary ConfigMap, declared first, that reads them.
fn pool() -> CompiledDefinition {
    let summary = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ parent.metadata.name }}-summary\ndata:\n  pods: {{ children.pods | map(attribute='metadata.name') | join(',') | quote }}";
    let pods = "{% for item in parent.spec['items'] %}\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: {{ parent.metadata.name }}-{{ item }}\nspec:\n  containers: [{name: c, image: busybox}]\n{% endfor %}";
    let body: String = pods.lines().map(|l| format!("        {l}\n")).collect();
    let children = format!(
        "{}    - name: pods\n      collection: true\n      template: |\n{body}",
        child("summary", summary)
    );
    compile(&children, "")
}

fn member(item: &str, ready: bool) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("w1-{item}"), "namespace": "team"},
        "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}})
}

#[test]
fn a_reader_of_a_collection_waits_until_every_member_exists_and_is_ready() {
    let def = pool();
    assert!(def.hints().is_empty(), "{:?}", def.hints());
    let names = |out: &RenderOutput| out.children.iter().map(|c| c.child.clone()).collect::<Vec<_>>();

    let out = Inputs::new().run(&def, &parent()).unwrap();
    assert_eq!(names(&out), ["pods", "pods"]);
    assert_eq!(out.waiting[0].child, "summary");
    assert_eq!(out.waiting[0].on, ["pods"]);

    let one = Inputs::new().observe("pods", member("a", true));
    assert_eq!(one.run(&def, &parent()).unwrap().waiting.len(), 1);
    let unready = Inputs::new()
        .observe("pods", member("a", true))
        .observe("pods", member("b", false));
    assert_eq!(unready.run(&def, &parent()).unwrap().waiting.len(), 1);

    let all = Inputs::new()
        .observe("pods", member("a", true))
        .observe("pods", member("b", true));
    let out = all.run(&def, &parent()).unwrap();
    assert!(out.waiting.is_empty(), "{:?}", out.waiting);
    let summary = out.children.iter().find(|c| c.child == "summary").unwrap();
    assert_eq!(summary.object["data"]["pods"], "w1-a,w1-b");
}

#[test]
fn an_empty_collection_is_complete() {
    let mut empty = parent();
    empty["spec"]["items"] = json!([]);
    let out = Inputs::new().run(&pool(), &empty).unwrap();
    assert!(out.waiting.is_empty(), "{:?}", out.waiting);
    assert_eq!(out.children[0].object["data"]["pods"], "");
}
