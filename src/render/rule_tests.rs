//! Render tests of the status rules: aggregates over a collection, expression rules and
//! their errors, latched conditions.

use serde_json::{Value, json};

use super::tests::{CM, Inputs, child, compile, condition, parent};
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
