//! Render tests: one per rule of the renderer, plus a property test that render is
//! deterministic and never panics on arbitrary parents.

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::compile::compile_file;

pub(super) fn compile(children: &str, extra: &str) -> CompiledDefinition {
    let text = format!(
        "apiVersion: stencil.dev/v1alpha1\nkind: OperatorDefinition\nmetadata:\n  name: widgets.example.com\nspec:\n  parent:\n    apiVersion: example.com/v1\n    kind: Widget\n{extra}  children:\n{children}"
    );
    let (mut defs, diags) = compile_file("w.yaml", &text);
    assert!(diags.0.is_empty(), "{diags}");
    defs.remove(0)
}

pub(super) fn child(name: &str, template: &str) -> String {
    let body: String = template.lines().map(|l| format!("        {l}\n")).collect();
    format!("    - name: {name}\n      template: |\n{body}")
}

pub(super) fn parent() -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w1", "namespace": "team", "uid": "uid-1", "generation": 7},
        "spec": {"size": 3, "items": ["a", "b"]}})
}

pub(super) struct Inputs {
    observed: BTreeMap<String, Vec<Value>>,
    lookups: BTreeMap<String, Value>,
    scopes: Scopes,
}

impl Inputs {
    pub(super) fn new() -> Self {
        Inputs {
            observed: BTreeMap::new(),
            lookups: BTreeMap::new(),
            scopes: Scopes::default(),
        }
    }
    pub(super) fn observe(mut self, child: &str, obj: Value) -> Self {
        self.observed.entry(child.into()).or_default().push(obj);
        self
    }
    fn input<'a>(&'a self, parent: &'a Value) -> RenderInput<'a> {
        RenderInput {
            parent,
            observed: &self.observed,
            lookups: &self.lookups,
            scopes: &self.scopes,
            served: &[],
        }
    }
    pub(super) fn run(&self, def: &CompiledDefinition, parent: &Value) -> Result<RenderOutput, RenderFailure> {
        render(def, self.input(parent))
    }
}

pub(super) const CM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ parent.metadata.name }}-cm\ndata:\n  size: {{ parent.spec.size | quote }}";

pub(super) fn condition<'a>(status: &'a Value, t: &str) -> &'a Value {
    status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == t)
        .unwrap_or_else(|| panic!("no condition {t} in {status}"))
}

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
        let text = format!(
            "apiVersion: stencil.dev/v1alpha1\nkind: OperatorDefinition\nmetadata:\n  name: widgets.example.com\nspec:\n  parent:\n    apiVersion: example.com/v1\n    kind: Widget\n  children:\n{}",
            child("cm", &template)
        );
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
fn a_missing_lookup_holds_every_child_back_and_a_present_one_is_readable() {
    let lookups = "  lookups:\n    - name: settings\n      apiVersion: v1\n      kind: ConfigMap\n      nameTemplate: '{{ parent.metadata.name }}-settings'\n";
    let def = compile(
        &child(
            "cm",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  tier: {{ lookups.settings.data.tier }}",
        ),
        lookups,
    );
    let scopes = Scopes::default();
    let requests = lookup_requests(&def, &parent(), &scopes).unwrap();
    assert_eq!(requests[0].target, Target::Name("w1-settings".into()));
    assert_eq!(requests[0].namespace.as_deref(), Some("team"));

    let out = Inputs::new().run(&def, &parent()).unwrap();
    assert!(out.children.is_empty());
    assert_eq!(out.waiting[0].on, vec!["lookups.settings".to_string()]);

    let settings = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "w1-settings", "namespace": "team"}, "data": {"tier": "gold"}});
    let mut inputs = Inputs::new();
    inputs.lookups = match_lookups(&requests, &[settings]);
    let out = inputs.run(&def, &parent()).unwrap();
    assert_eq!(out.children[0].object["data"]["tier"], "gold");
}

#[test]
fn a_lookup_outside_the_parent_namespace_is_refused() {
    let lookups = "  lookups:\n    - name: s\n      apiVersion: v1\n      kind: Secret\n      nameTemplate: s\n      namespaceTemplate: kube-system\n";
    let def = compile(&child("cm", CM), lookups);
    let err = lookup_requests(&def, &parent(), &Scopes::default()).unwrap_err();
    assert!(err.to_string().contains("spec.allowedNamespaces"), "{err}");
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

#[test]
fn the_same_inputs_give_byte_identical_output() {
    let def = compile(&child("cm", CM), "");
    let a = serde_json::to_string(&Inputs::new().run(&def, &parent()).unwrap().to_json()).unwrap();
    let b = serde_json::to_string(&Inputs::new().run(&def, &parent()).unwrap().to_json()).unwrap();
    assert_eq!(a, b);
}

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

#[test]
fn reading_through_a_child_that_does_not_exist_yet_waits_for_it() {
    let app = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  host: {{ children.db.data.host }}";
    let guarded = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: guarded\ndata:\n  host: {{ children.db.data.host if children.db is defined else 'none' }}";
    let def = compile(
        &format!("{}{}{}", child("app", app), child("guarded", guarded), child("db", CM)),
        "",
    );
    assert_eq!(def.reads(0), ["db"]);
    assert!(
        def.hints()[0].contains("children[app].template reads children.db without `dependsOn: [db]`"),
        "{:?}",
        def.hints()
    );
    let out = Inputs::new().run(&def, &parent()).unwrap();
    assert_eq!(
        out.waiting,
        vec![Waiting {
            child: "app".into(),
            on: vec!["db".into()]
        }]
    );
    let names: Vec<&Value> = out.children.iter().map(|c| &c.object["metadata"]["name"]).collect();
    assert_eq!(
        names,
        ["guarded", "w1-cm"],
        "the others render; a guarded read does not wait"
    );
    let db = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "w1-cm", "namespace": "team"}, "data": {"host": "db.team"}});
    let out = Inputs::new().observe("db", db).run(&def, &parent()).unwrap();
    assert!(out.waiting.is_empty());
    assert_eq!(out.children[0].object["data"]["host"], "db.team");
}

#[test]
fn a_failure_that_is_not_a_missing_child_still_fails_the_render() {
    let app = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  host: {{ children.db.data.host }}{{ required(parent.spec.nothing, 'set it') }}";
    let def = compile(&format!("{}{}", child("app", app), child("db", CM)), "");
    let db = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "w1-cm", "namespace": "team"}, "data": {"host": "h"}});
    assert!(Inputs::new().observe("db", db).run(&def, &parent()).is_err());
}

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

fn namespace(name: &str, team: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {"team": team}}})
}

#[test]
fn a_selector_lookup_is_a_sorted_list_of_matches_with_templated_values() {
    let lookups = "  allowedNamespaces: [\"*\"]\n  lookups:\n    - name: nss\n      apiVersion: v1\n      kind: Namespace\n      selector: {matchLabels: {team: \"{{ parent.spec.items[0] }}\"}}\n";
    let def = compile(
        &child(
            "cm",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  names: {{ lookups.nss | map(attribute='metadata.name') | join(',') | quote }}",
        ),
        lookups,
    );
    let requests = lookup_requests(&def, &parent(), &Scopes::default()).unwrap();
    let Target::Selector(m) = &requests[0].target else {
        panic!("{requests:?}")
    };
    assert_eq!(m.query(), "team=a", "the value was rendered over the parent");
    assert_eq!(requests[0].namespace, None, "Namespace is cluster-scoped");
    let found = [namespace("zeta", "a"), namespace("alpha", "a"), namespace("beta", "b")];
    let mut inputs = Inputs::new();
    inputs.lookups = match_lookups(&requests, &found);
    let out = inputs.run(&def, &parent()).unwrap();
    assert_eq!(out.children[0].object["data"]["names"], "alpha,zeta");
}

#[test]
fn an_empty_selector_lookup_never_holds_the_parent_back() {
    let lookups = "  lookups:\n    - name: peers\n      apiVersion: v1\n      kind: ConfigMap\n      selector: {matchLabels: {peer: \"yes\"}}\n";
    let def = compile(
        &child(
            "cm",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  peers: {{ lookups.peers | length | quote }}",
        ),
        lookups,
    );
    let requests = lookup_requests(&def, &parent(), &Scopes::default()).unwrap();
    assert_eq!(
        requests[0].namespace.as_deref(),
        Some("team"),
        "the parent's namespace by default"
    );
    let mut inputs = Inputs::new();
    inputs.lookups = match_lookups(&requests, &[]);
    let out = inputs.run(&def, &parent()).unwrap();
    assert!(out.waiting.is_empty(), "{:?}", out.waiting);
    assert_eq!(out.children[0].object["data"]["peers"], "0");
}

#[test]
fn every_namespace_is_refused_to_a_confined_namespaced_parent() {
    let lookups = "  lookups:\n    - name: all\n      apiVersion: v1\n      kind: ConfigMap\n      selector: {}\n      namespaceTemplate: \"*\"\n";
    let def = compile(&child("cm", CM), lookups);
    let err = lookup_requests(&def, &parent(), &Scopes::default()).unwrap_err();
    assert!(err.to_string().contains("allowedNamespaces"), "{err}");
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
