//! The finalize step: its children render only while the parent is deleted, and the step
//! ends when `until` holds or, without it, when its children are ready.

use super::*;

const JOB: &str =
    "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {{ parent.metadata.name }}-backup\nspec:\n  template: {}";

fn finalize_section(until: Option<&str>) -> String {
    let body: String = JOB.lines().map(|l| format!("          {l}\n")).collect();
    let until = until.map(|u| format!("    until: {u}\n")).unwrap_or_default();
    format!("  finalize:\n{until}    children:\n      - name: backup\n        template: |\n{body}")
}

impl Inputs {
    fn finalize(&self, def: &CompiledDefinition, parent: &Value) -> FinalizeOutput {
        render_finalize(def, self.input(parent)).unwrap()
    }
}

fn job(status: Value) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "w1-backup", "namespace": "team", "labels": {"stencil.dev/child": "backup"}},
        "status": status})
}

#[test]
fn finalize_children_render_only_in_the_finalize_step_and_end_it_when_until_holds() {
    let def = compile(
        &child("cm", CM),
        &finalize_section(Some("$.children.backup.status.succeeded")),
    );
    let out = Inputs::new().run(&def, &parent()).unwrap();
    assert_eq!(out.children.len(), 1, "the ordinary render has no finalize child");
    let step = Inputs::new().finalize(&def, &parent());
    assert_eq!(step.children.len(), 1);
    assert_eq!(step.children[0].object["kind"], "Job");
    assert_eq!(
        step.children[0].object["metadata"]["labels"]["stencil.dev/child"],
        "backup"
    );
    assert!(step.pending.as_deref().unwrap().contains("finalize.until"), "{step:?}");
    let running = Inputs::new().observe("backup", job(json!({"active": 1})));
    assert!(running.finalize(&def, &parent()).pending.is_some());
    let done = Inputs::new().observe("backup", job(json!({"succeeded": 1})));
    let step = done.finalize(&def, &parent());
    assert_eq!(step.pending, None);
    assert_eq!(step.to_json()["done"], true);
}

#[test]
fn without_until_the_finalize_step_ends_when_its_children_are_ready() {
    let def = compile(&child("cm", CM), &finalize_section(None));
    let running = Inputs::new().observe("backup", job(json!({"active": 1})));
    let pending = running.finalize(&def, &parent()).pending.unwrap();
    assert!(pending.contains("backup (Job w1-backup"), "{pending}");
    let complete = json!({"conditions": [{"type": "Complete", "status": "True"}]});
    let done = Inputs::new().observe("backup", job(complete));
    assert_eq!(done.finalize(&def, &parent()).pending, None);
}
