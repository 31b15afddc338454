//! One test per class of compile error, each checking the message and its position.

use super::*;

const GOOD: &str = r#"apiVersion: stencil.dev/v1alpha1
kind: OperatorDefinition
metadata:
  name: widgets.example.com
spec:
  parent:
    apiVersion: example.com/v1
    kind: Widget
  children:
    - name: config
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata:
          name: {{ parent.metadata.name }}
"#;

fn errors(text: &str) -> Vec<Diagnostic> {
    let (defs, diags) = compile_file("w.yaml", text);
    assert!(
        defs.is_empty() || !diags.0.is_empty(),
        "expected errors, got a definition"
    );
    assert!(!diags.0.is_empty(), "expected errors");
    diags.0
}

fn one_error(text: &str) -> Diagnostic {
    let mut all = errors(text);
    assert_eq!(all.len(), 1, "{all:#?}");
    all.remove(0)
}

#[test]
fn a_good_definition_compiles() {
    let (defs, diags) = compile_file("w.yaml", GOOD);
    assert!(diags.0.is_empty(), "{diags}");
    assert_eq!(defs[0].name, "widgets.example.com");
    assert_eq!(defs[0].parent.kind, "Widget");
}

#[test]
fn malformed_yaml_is_reported_at_its_line() {
    let d = one_error(&GOOD.replace("    kind: Widget", "    kind: [Widget"));
    assert!(matches!(d.error, CompileError::Yaml(_)), "{d}");
    assert!(d.line >= 8, "{d}");
}

#[test]
fn an_unknown_field_is_an_error() {
    let d = one_error(&GOOD.replace("  children:", "  childs: []\n  children:"));
    assert!(d.to_string().contains("childs"), "{d}");
    assert_eq!(d.line, 9, "{d}");
}

#[test]
fn an_unknown_field_in_a_child_is_an_error() {
    let d = one_error(&GOOD.replace("      template: |", "      readyWhenn: $.x\n      template: |"));
    assert!(d.to_string().contains("readyWhenn"), "{d}");
}

#[test]
fn a_document_of_another_kind_is_rejected() {
    let d = one_error(&GOOD.replace("kind: OperatorDefinition", "kind: Operator"));
    assert!(matches!(d.error, CompileError::NotADefinition { .. }), "{d}");
}

#[test]
fn a_bad_parent_api_version_is_rejected() {
    let d = one_error(&GOOD.replace("apiVersion: example.com/v1", "apiVersion: example.com/v1/x"));
    assert_eq!(d.field.as_deref(), Some("spec.parent"));
    assert!(d.to_string().contains("is not an apiVersion"), "{d}");
}

#[test]
fn duplicate_child_names_are_rejected() {
    let twice = format!("{GOOD}{}", &GOOD[GOOD.find("    - name: config").unwrap()..]);
    let d = one_error(&twice);
    assert_eq!(d.error, CompileError::Duplicate("child config".into()));
    assert_eq!(d.line, 16, "{d}");
}

#[test]
fn a_child_name_must_be_an_identifier() {
    let d = one_error(&GOOD.replace("name: config", "name: my-config"));
    assert!(d.to_string().contains("try `my_config`"), "{d}");
}

#[test]
fn an_unknown_dependency_is_rejected() {
    let d = one_error(&GOOD.replace("      template: |", "      dependsOn: [missing]\n      template: |"));
    assert_eq!(d.error, CompileError::UnknownDependency("missing".into()));
    assert_eq!(d.field.as_deref(), Some("children[config].dependsOn"));
}

#[test]
fn a_dependency_cycle_is_named() {
    let text = format!(
        "{}{}",
        GOOD.replace("      template: |", "      dependsOn: [other]\n      template: |"),
        "    - name: other\n      dependsOn: [config]\n      template: \"apiVersion: v1\\nkind: ConfigMap\\n\"\n"
    );
    let d = one_error(&text);
    assert_eq!(d.error, CompileError::Cycle("config -> other -> config".into()));
}

#[test]
fn a_template_syntax_error_points_into_the_file() {
    let d = one_error(&GOOD.replace("{{ parent.metadata.name }}", "{{ parent.metadata.name }"));
    assert!(matches!(d.error, CompileError::Template(_)), "{d}");
    assert_eq!(d.line, 15, "{d}");
    assert!(d.column > 10, "{d}");
    assert_eq!(d.field.as_deref(), Some("children[config].template"));
    assert!(d.to_string().starts_with("w.yaml:15:"), "{d}");
}

#[test]
fn a_jsonpath_syntax_error_points_into_the_file() {
    let text = format!("{GOOD}  status:\n    fields:\n      ready: '$.children.config[?@.x ==]'\n");
    let d = one_error(&text);
    assert!(matches!(d.error, CompileError::Rule(_)), "{d}");
    assert_eq!(d.line, 18, "{d}");
    assert_eq!(d.field.as_deref(), Some("status.fields.ready"));
}

#[test]
fn reserved_condition_types_are_rejected() {
    let text = format!("{GOOD}  status:\n    conditions:\n      - type: Ready\n        when: $.x\n");
    let d = one_error(&text);
    assert!(d.to_string().contains("written by Stencil"), "{d}");
}

#[test]
fn a_crd_that_disagrees_with_the_parent_is_rejected() {
    let crd = "  crd:\n    names: {plural: widgets}\n    versions:\n      - name: v2\n        served: true\n        storage: true\n        schema:\n          openAPIV3Schema: {type: object}\n  children:";
    let d = one_error(&GOOD.replace("  children:", crd));
    assert_eq!(
        d.error,
        CompileError::Crd("the parent's version v1 is not among the CRD's versions".into())
    );
}

#[test]
fn a_crd_needs_exactly_one_storage_version_and_a_structural_schema() {
    // Two versions, neither storing (a lone version stores without saying so).
    let crd = "  crd:\n    names: {plural: widgets}\n    versions:\n      - name: v1\n        served: true\n        schema:\n          openAPIV3Schema: {type: object, properties: {spec: {description: untyped}}}\n      - name: v2\n        schema:\n          openAPIV3Schema: {type: object, properties: {spec: {description: untyped}}}\n  children:";
    let all = errors(&GOOD.replace("  children:", crd));
    let text: Vec<String> = all.iter().map(ToString::to_string).collect();
    assert!(
        text.iter().any(|t| t.contains("exactly one version must have storage")),
        "{text:#?}"
    );
    assert!(
        text.iter()
            .any(|t| t.contains(".properties.spec: every schema node needs a type")),
        "{text:#?}"
    );
}

#[test]
fn every_error_of_a_file_is_reported() {
    let bad = GOOD
        .replace("{{ parent.metadata.name }}", "{% if %}")
        .replace("      template: |", "      readyWhen: 'nope'\n      template: |");
    let second = GOOD
        .replace("widgets.example.com", "gadgets.example.com")
        .replace("name: config", "name: a-b");
    let all = errors(&format!("{bad}---\n{second}"));
    assert_eq!(all.len(), 3, "{all:#?}");
    assert!(
        all.iter()
            .any(|d| d.definition.as_deref() == Some("gadgets.example.com"))
    );
}

#[test]
fn a_good_definition_beside_a_bad_one_still_compiles() {
    let bad = GOOD
        .replace("widgets.example.com", "bad.example.com")
        .replace("kind: Widget", "kind: widget");
    let (defs, diags) = compile_file("w.yaml", &format!("{GOOD}---\n{bad}"));
    assert_eq!(defs.len(), 1);
    assert_eq!(diags.0.len(), 1, "{diags}");
    assert_eq!(diags.0[0].line, 23, "{diags}");
}

#[test]
fn a_cluster_resource_reports_positions_inside_the_template() {
    let (defs, _) = compile_file("w.yaml", GOOD);
    let mut resource = OperatorDefinition::new("widgets.example.com", defs[0].spec.clone());
    resource.spec.children[0].template = "apiVersion: v1\nkind: X\nname: {{ a }".into();
    let d = compile_resource(&resource).unwrap_err().0.remove(0);
    assert_eq!(d.file, "OperatorDefinition/widgets.example.com");
    assert_eq!(d.line, 3, "{d}");
}

#[test]
fn a_child_kind_must_be_literal() {
    let d = one_error(&GOOD.replace("kind: ConfigMap", "kind: {{ parent.spec.kind }}"));
    assert!(d.to_string().contains("kind must be literal"), "{d}");
    assert_eq!(d.line, 13, "{d}");
}

const FINALIZE: &str = r#"  finalize:
    until: $.children.backup.status.succeeded
    children:
      - name: backup
        template: |
          apiVersion: batch/v1
          kind: Job
          metadata:
            name: {{ parent.metadata.name }}-backup
"#;

#[test]
fn finalize_children_compile_after_the_children() {
    let (defs, diags) = compile_file("w.yaml", &format!("{GOOD}{FINALIZE}"));
    assert!(diags.0.is_empty(), "{diags}");
    let def = &defs[0];
    assert_eq!(def.finalize_order(), &[1]);
    assert_eq!(def.entry(1).name, "backup");
    assert!(def.is_finalize(1) && !def.is_finalize(0));
    assert_eq!(def.template_name(1), "finalize.children[backup].template");
    assert_eq!(
        def.all_child_kinds().len(),
        2,
        "the Job kind is watched and granted too"
    );
    assert!(def.until().is_some());
    assert_eq!(def.spec.finalize.timeout_seconds, 600);
}

#[test]
fn a_finalize_child_shares_the_names_of_the_children() {
    let d = one_error(&format!("{GOOD}{}", FINALIZE.replace("name: backup", "name: config")));
    assert_eq!(d.error, CompileError::Duplicate("child config".into()));
    assert_eq!(d.field.as_deref(), Some("finalize.children[config].name"));
}

#[test]
fn a_finalize_template_error_is_located_in_the_file() {
    let d = one_error(&format!("{GOOD}{}", FINALIZE.replace("}}-backup", "-backup")));
    assert!(matches!(d.error, CompileError::Template(_)), "{d}");
    assert_eq!(d.field.as_deref(), Some("finalize.children[backup].template"));
    assert_eq!(d.line, 24, "{d}");
}

#[test]
fn a_bad_until_rule_is_located() {
    let d = one_error(&format!("{GOOD}{}", FINALIZE.replace("until: $.", "until: .")));
    assert!(matches!(d.error, CompileError::Rule(_)), "{d}");
    assert_eq!(d.field.as_deref(), Some("finalize.until"));
    assert_eq!(d.line, 17, "{d}");
    assert_eq!(d.column, 12, "{d}");
}

#[test]
fn an_inherited_finalizer_is_a_qualified_name_stencil_may_take_over() {
    let with = |names: &str| format!("{GOOD}  finalize:\n    inheritFinalizers: [{names}]\n");
    let (defs, diags) = compile_file("w.yaml", &with("kro.run/finalizer"));
    assert!(diags.0.is_empty(), "{diags:?}");
    assert_eq!(defs[0].spec.finalize.inherit_finalizers, ["kro.run/finalizer"]);
    for (name, why) in [
        ("finalizer", "not a qualified finalizer name"),
        ("Kro.run/x", "not a qualified finalizer name"),
        ("stencil.dev/finalizer", "Stencil's own"),
        ("kubernetes.io/pvc-protection", "belongs to Kubernetes"),
    ] {
        let d = one_error(&with(name));
        assert_eq!(d.field.as_deref(), Some("finalize.inheritFinalizers"), "{d}");
        assert_eq!((d.line, d.column), (17, 24), "{d}");
        assert!(d.to_string().contains(why), "{name}: {d}");
    }
}

#[test]
fn finalize_children_and_children_cannot_depend_on_each_other() {
    let text = format!(
        "{}{}",
        GOOD.replace("      template: |", "      dependsOn: [backup]\n      template: |"),
        FINALIZE.replace(
            "        template: |",
            "        dependsOn: [config]\n        template: |"
        )
    );
    let all = errors(&text);
    assert_eq!(all.len(), 2, "{all:#?}");
    assert!(
        all[0].to_string().contains("`backup` is a finalize child"),
        "{}",
        all[0]
    );
    assert!(
        all[1]
            .to_string()
            .contains("may depend only on other finalize children"),
        "{}",
        all[1]
    );
    assert_eq!(all[1].field.as_deref(), Some("finalize.children[backup].dependsOn"));
}

#[test]
fn finalized_is_a_condition_stencil_writes() {
    let text = format!("{GOOD}  status:\n    conditions:\n      - type: Finalized\n        when: $.parent\n");
    let d = one_error(&text);
    assert!(d.to_string().contains("written by Stencil"), "{d}");
}

const DECORATOR: &str = r#"apiVersion: stencil.dev/v1alpha1
kind: OperatorDefinition
metadata:
  name: ns-defaults.example.com
spec:
  parent:
    apiVersion: v1
    kind: Namespace
  decorate:
    selector:
      matchExpressions: [{key: example.com/team, operator: Exists}]
  children:
    - name: quota
      template: |
        apiVersion: v1
        kind: ResourceQuota
        metadata:
          name: q
          namespace: {{ parent.metadata.name }}
"#;

#[test]
fn a_decorator_compiles_with_its_selector_sent_to_the_server() {
    let (defs, diags) = compile_file("d.yaml", DECORATOR);
    assert!(diags.0.is_empty(), "{diags}");
    assert_eq!(
        defs[0].parent_label_query(),
        Some("example.com/team,!stencil.dev/parent-uid")
    );
    let team = std::collections::BTreeMap::from([("example.com/team".to_string(), "a".to_string())]);
    assert!(defs[0].decorates(Some(&team), None));
    assert!(!defs[0].decorates(None, None));
}

#[test]
fn a_decorator_leaves_stencil_children_alone_unless_it_opts_in() {
    let child = std::collections::BTreeMap::from([
        ("example.com/team".to_string(), "a".to_string()),
        (crate::labels::PARENT_UID.to_string(), "uid".to_string()),
    ]);
    let (defs, _) = compile_file("d.yaml", DECORATOR);
    assert!(
        !defs[0].decorates(Some(&child), None),
        "a Stencil child is not decorated"
    );
    let opted = DECORATOR.replace("  decorate:\n", "  decorate:\n    includeStencilChildren: true\n");
    let (defs, diags) = compile_file("d.yaml", &opted);
    assert!(diags.0.is_empty(), "{diags}");
    assert!(defs[0].decorates(Some(&child), None));
    assert_eq!(defs[0].parent_label_query(), Some("example.com/team"));
    let all = DECORATOR.replace(
        "    selector:\n      matchExpressions: [{key: example.com/team, operator: Exists}]\n",
        "    annotationSelector: {matchLabels: {example.com/decorate: \"yes\"}}\n",
    );
    let (defs, diags) = compile_file("d.yaml", &all);
    assert!(diags.0.is_empty(), "{diags}");
    assert_eq!(
        defs[0].parent_label_query(),
        Some("!stencil.dev/parent-uid"),
        "an annotation-only decorator still leaves children out on the server"
    );
}

#[test]
fn a_decorator_with_a_status_is_an_error() {
    let d = one_error(&DECORATOR.replace(
        "  children:",
        "  status:\n    fields:\n      x: $.parent.metadata.name\n  children:",
    ));
    assert!(d.to_string().contains("no status"), "{d}");
    assert_eq!(d.field.as_deref(), Some("spec.decorate"), "{d}");
}

#[test]
fn a_decorator_with_a_crd_or_a_finalize_step_is_an_error() {
    let with_step = DECORATOR.replace(
        "  children:",
        "  finalize:\n    until: $.parent.metadata.name\n  children:",
    );
    assert!(one_error(&with_step).to_string().contains("no finalize step"));
    let with_crd = GOOD.replace(
        "  children:",
        "  decorate: {}\n  crd:\n    names: {plural: widgets}\n    versions:\n      - name: v1\n        served: true\n        storage: true\n        schema:\n          openAPIV3Schema: {type: object}\n  children:",
    );
    assert!(
        errors(&with_crd)
            .iter()
            .any(|d| d.to_string().contains("remove spec.crd"))
    );
}

#[test]
fn a_decorator_selector_with_an_unknown_operator_is_an_error() {
    let d = one_error(&DECORATOR.replace("operator: Exists", "operator: Maybe"));
    assert!(d.to_string().contains("`Maybe`"), "{d}");
}

const SELECTOR_LOOKUP: &str = "  lookups:\n    - name: namespaces\n      apiVersion: v1\n      kind: Namespace\n      selector: {matchLabels: {team: \"{{ parent.spec.team }}\"}}\n  children:";

#[test]
fn a_lookup_takes_a_name_or_a_selector() {
    let (defs, diags) = compile_file("w.yaml", &GOOD.replace("  children:", SELECTOR_LOOKUP));
    assert!(diags.0.is_empty(), "{diags}");
    assert_eq!(defs.len(), 1);
    let both = SELECTOR_LOOKUP.replace("      selector:", "      nameTemplate: x\n      selector:");
    let d = one_error(&GOOD.replace("  children:", &both));
    assert!(d.to_string().contains("not both"), "{d}");
    assert_eq!(d.field.as_deref(), Some("lookups[namespaces].selector"), "{d}");
    let neither = "  lookups:\n    - name: n\n      apiVersion: v1\n      kind: Namespace\n  children:";
    assert!(
        one_error(&GOOD.replace("  children:", neither))
            .to_string()
            .contains("set nameTemplate")
    );
}

#[test]
fn a_templated_selector_value_that_does_not_parse_is_located() {
    let bad = SELECTOR_LOOKUP.replace("{{ parent.spec.team }}", "{{ parent.spec.team ");
    let d = one_error(&GOOD.replace("  children:", &bad));
    assert!(matches!(d.error, CompileError::Template(_)), "{d}");
    assert!(d.line >= 13, "{d}");
}

#[test]
fn every_namespace_needs_a_selector() {
    let named = "  lookups:\n    - name: s\n      apiVersion: v1\n      kind: Secret\n      nameTemplate: s\n      namespaceTemplate: \"*\"\n  children:";
    let d = one_error(&GOOD.replace("  children:", named));
    assert!(d.to_string().contains("needs a selector"), "{d}");
}

#[test]
fn a_scale_subresource_takes_simple_paths_under_spec_and_status() {
    let crd = |spec: &str, status: &str| {
        GOOD.replace(
            "  children:",
            &format!("  crd:\n    names: {{plural: widgets}}\n    versions:\n      - name: v1\n        served: true\n        storage: true\n        scale: {{specReplicasPath: '{spec}', statusReplicasPath: '{status}'}}\n        schema:\n          openAPIV3Schema: {{type: object}}\n  children:"),
        )
    };
    let (defs, diags) = compile_file("w.yaml", &crd(".spec.replicas", ".status.replicas"));
    assert!(diags.0.is_empty(), "{diags}");
    let generated = crate::crd::parent_crd(&defs[0], None).unwrap().unwrap();
    let scale = generated.spec.versions[0]
        .subresources
        .as_ref()
        .unwrap()
        .scale
        .as_ref()
        .unwrap();
    assert_eq!(scale.spec_replicas_path, ".spec.replicas");
    let d = one_error(&crd(".status.replicas", ".status.replicas"));
    assert!(d.to_string().contains("specReplicasPath"), "{d}");
    let d = one_error(&crd(".spec.replicas", ".status.items[0]"));
    assert!(d.to_string().contains("statusReplicasPath"), "{d}");
}

fn two_versions(old: &str) -> String {
    GOOD.replace(
        "  children:",
        &format!(
            "  crd:\n    names: {{plural: widgets}}\n    versions:\n      - name: v1\n        storage: true\n        schema:\n          openAPIV3Schema: {{type: object, properties: {{spec: {{type: object}}}}}}\n      - name: v1alpha1\n        schema:\n          openAPIV3Schema: {{type: object}}\n{old}  children:"
        ),
    )
}

#[test]
fn versions_that_differ_need_conversion_templates_checked_where_they_are_written() {
    let d = one_error(&two_versions(""));
    assert!(d.to_string().contains("versions[v1alpha1].schema differs"), "{d}");
    let good =
        two_versions("        conversion:\n          toStorage: 'spec: {}'\n          fromStorage: 'spec: {}'\n");
    let (defs, diags) = compile_file("w.yaml", &good);
    assert!(diags.0.is_empty(), "{diags}");
    assert!(defs[0].converts());
    assert_eq!(defs[0].storage_version(), Some("v1"));
    let broken = two_versions(
        "        conversion:\n          toStorage: 'spec: {{ object.spec'\n          fromStorage: 'spec: {}'\n",
    );
    let d = one_error(&broken);
    assert_eq!(
        d.field.as_deref(),
        Some("spec.crd.versions[v1alpha1].conversion.toStorage")
    );
    let line = broken.lines().position(|l| l.contains("toStorage")).unwrap() + 1;
    assert_eq!(d.line as usize, line, "{d}");
}

#[test]
fn the_storage_version_takes_no_conversion() {
    let text = two_versions("        conversion: {toStorage: 'spec: {}', fromStorage: 'spec: {}'}\n").replace(
        "        storage: true\n",
        "        storage: true\n        conversion: {toStorage: 'spec: {}', fromStorage: 'spec: {}'}\n",
    );
    let d = one_error(&text);
    assert!(d.to_string().contains("is the storage version"), "{d}");
}

/// `GOOD` with its child a PersistentVolumeClaim under `extra` child fields.
fn claim(extra: &str) -> String {
    GOOD.replace("      template: |", &format!("{extra}      template: |"))
        .replace("        kind: ConfigMap", "        kind: PersistentVolumeClaim")
}

#[test]
fn recreating_a_claim_needs_an_acknowledgement_of_data_loss() {
    let d = one_error(&claim("      updatePolicy: Recreate\n"));
    let said = d.to_string();
    assert!(
        said.contains("PersistentVolumeClaim") && said.contains("acknowledgeDataLoss: true"),
        "{said}"
    );
    assert_eq!(d.line, 11, "located at the updatePolicy line: {d}");
    let (defs, diags) = compile_file(
        "w.yaml",
        &claim("      updatePolicy: Recreate\n      acknowledgeDataLoss: true\n"),
    );
    assert!(diags.0.is_empty() && defs.len() == 1, "{diags}");
    let (_, diags) = compile_file(
        "w.yaml",
        &GOOD.replace("      template: |", "      updatePolicy: Recreate\n      template: |"),
    );
    assert!(diags.0.is_empty(), "a ConfigMap may be recreated freely: {diags}");
}

#[test]
fn an_acknowledgement_without_recreate_is_an_error() {
    let d = one_error(&claim("      acknowledgeDataLoss: true\n"));
    assert!(d.to_string().contains("only to updatePolicy: Recreate"), "{d}");
}

#[test]
fn two_children_that_always_render_one_object_are_an_error() {
    let copy = GOOD.replace("  children:\n", "  children:\n    - name: copy\n      template: |\n        apiVersion: v1\n        kind: ConfigMap\n        metadata:\n          name: {{ parent.metadata.name }}\n");
    let d = one_error(&copy);
    assert!(d.to_string().contains("renders the same object as child `copy`"), "{d}");
    assert_eq!(d.field.as_deref(), Some("children[config].template"), "{d}");
}

#[test]
fn rollout_steps_that_do_not_rise_are_reported_at_the_rollout() {
    let text = GOOD.replace(
        "  children:",
        "  rollout:\n    strategy: Immediate\n    steps: [{percent: 50}, {percent: 20}]\n  children:",
    );
    let d = one_error(&text);
    assert!(
        d.to_string()
            .contains("steps[1].percent must be above the step before (50), got 20"),
        "{d}"
    );
    assert_eq!(d.line, 10, "{d}");
}

/// A definition whose one child is written as an object, with `field: value` lines
/// added under its ConfigMap's `data`.
fn object_child(data: &str) -> String {
    format!(
        "{}    - name: config\n      object:\n        apiVersion: v1\n        kind: ConfigMap\n        metadata:\n          name: ${{schema.metadata.name}}\n        data:\n{data}",
        GOOD.split("    - name: config").next().unwrap()
    )
}

#[test]
fn an_object_child_compiles_and_a_cel_error_points_into_the_file() {
    let (defs, diags) = compile_file("w.yaml", &object_child("          a: x\n"));
    assert!(diags.0.is_empty(), "{diags:?}");
    assert_eq!(defs[0].child_kinds[0][0].kind, "ConfigMap");
    let d = one_error(&object_child("          a: x\n          b: ${schema.spec.(}\n"));
    assert_eq!(d.field.as_deref(), Some("children[config].object.data.b"), "{d}");
    assert!(d.to_string().starts_with("w.yaml:18:"), "{d}");
    assert!(d.to_string().contains("schema.spec.("), "{d}");
}

#[test]
fn an_object_child_names_its_kind_literally_and_has_no_template_too() {
    let templated = object_child("          a: x\n").replace("kind: ConfigMap", "kind: ${schema.spec.kind}");
    let d = one_error(&templated);
    assert!(d.to_string().contains("kind must be literal text"), "{d}");
    let both = object_child("          a: x\n").replace("      object:", "      template: 'kind: A'\n      object:");
    assert!(
        errors(&both)
            .iter()
            .any(|d| d.to_string().contains("both a template and an object"))
    );
}

#[test]
fn a_cel_readiness_rule_that_reads_beyond_its_object_is_refused() {
    let text = object_child("          a: x\n").replace(
        "      object:",
        "      readyWhen: ${config.data.a == schema.spec.a}\n      object:",
    );
    let d = one_error(&text);
    assert_eq!(d.field.as_deref(), Some("children[config].readyWhen"), "{d}");
    assert!(d.to_string().contains("`schema` is not in its scope"), "{d}");
}

#[test]
fn an_include_rule_that_reads_a_sibling_needs_it_in_depends_on() {
    let text = format!(
        "{}    - name: extra\n      includeWhen: ${{config.data.a == 'x'}}\n      template: \"apiVersion: v1\\nkind: Secret\\n\"\n",
        object_child("          a: x\n")
    );
    let d = one_error(&text);
    assert_eq!(d.field.as_deref(), Some("children[extra].includeWhen"), "{d}");
    assert!(d.to_string().contains("without `dependsOn: [config]`"), "{d}");
    let listed = text.replace("      includeWhen:", "      dependsOn: [config]\n      includeWhen:");
    let (_, diags) = compile_file("w.yaml", &listed);
    assert!(diags.0.is_empty(), "{diags:?}");
}

#[test]
fn a_template_the_engine_cannot_compile_is_an_error_not_a_panic() {
    // Found by the fuzzer: minijinja's parser takes `import ... as` with an expression
    // after `as`, and its code generator then panics.
    let broken = GOOD.replace(
        "        apiVersion: v1\n",
        "        {%- import \"other\" as h % parent.metadata.name %}\n        apiVersion: v1\n",
    );
    let d = one_error(&broken);
    assert!(matches!(d.error, CompileError::Template(_)), "{d}");
    assert!(d.to_string().contains("import ... as NAME"), "{d}");
    assert_eq!(d.line, 12, "the template field's line: {d}");
}
