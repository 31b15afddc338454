//! The CRDs Stencil produces, the verdict of an update, and whose a live CRD is.

use super::*;
use serde_json::Value;

#[test]
fn the_chart_ships_the_generated_crd() {
    let generated = crate::yaml::to_stream(&[serde_json::to_value(operator_definition_crd()).unwrap()]).unwrap();
    let shipped = include_str!("../../../../charts/stencil/crds/operatordefinitions.stencil.dev.yaml");
    assert!(
        shipped == generated,
        "charts/stencil/crds/operatordefinitions.stencil.dev.yaml is stale; run `make chart`"
    );
}

#[test]
fn the_operator_definition_crd_is_cluster_scoped_with_status() {
    let crd = operator_definition_crd();
    assert_eq!(crd.metadata.name.as_deref(), Some("operatordefinitions.stencil.dev"));
    assert_eq!(crd.spec.scope, "Cluster");
    assert_eq!(crd.spec.names.short_names, Some(vec!["opdef".to_string()]));
    let v = &crd.spec.versions[0];
    assert!(v.subresources.as_ref().and_then(|s| s.status.as_ref()).is_some());
    let schema = serde_json::to_value(v.schema.as_ref().unwrap()).unwrap();
    assert_eq!(
        schema.pointer("/openAPIV3Schema/properties/spec/properties/children/items/properties/template/type"),
        Some(&Value::from("string"))
    );
}

#[test]
fn a_crd_is_ours_when_stencil_installed_it_or_its_owner_handed_it_over() {
    let mut live: CustomResourceDefinition = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "versions": [],
            "names": {"plural": "widgets", "kind": "Widget"}}}))
    .unwrap();
    assert!(!is_ours(&live), "a CRD without Stencil's label is not ours");
    live.metadata.annotations = Some([(labels::ADOPT_CRD.to_string(), "true".to_string())].into());
    assert!(is_ours(&live), "handed over");
    live.metadata.annotations = None;
    live.metadata.labels = Some([(labels::MANAGED_BY.to_string(), labels::MANAGED_BY_VALUE.to_string())].into());
    assert!(is_ours(&live), "installed by Stencil");
}

#[test]
fn the_verdict_creates_skips_updates_or_refuses() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../operators/website.yaml");
    let (defs, diags) = crate::compile::compile_file(path, &std::fs::read_to_string(path).unwrap());
    assert!(diags.0.is_empty(), "{diags}");
    let def = &defs[0];
    let (desired, v) = verdict(def, None, None).unwrap().unwrap();
    assert_eq!(v, CrdVerdict::Create);
    let mut live: CustomResourceDefinition = serde_json::from_value(desired).unwrap();
    assert_eq!(
        verdict(def, Some(&live), None).unwrap().unwrap().1,
        CrdVerdict::Unchanged
    );
    if let Some(a) = live.metadata.annotations.as_mut() {
        a.clear();
    }
    assert_eq!(verdict(def, Some(&live), None).unwrap().unwrap().1, CrdVerdict::Update);
    let schema = live.spec.versions[2]
        .schema
        .as_mut()
        .unwrap()
        .open_api_v3_schema
        .as_mut()
        .unwrap();
    schema
        .properties
        .as_mut()
        .unwrap()
        .get_mut("spec")
        .unwrap()
        .properties
        .as_mut()
        .unwrap()
        .insert(
            "legacy".into(),
            JSONSchemaProps {
                type_: Some("string".into()),
                ..Default::default()
            },
        );
    let CrdVerdict::Breaking(changes) = verdict(def, Some(&live), None).unwrap().unwrap().1 else {
        panic!("a property the definition drops is breaking")
    };
    assert!(changes[0].contains("v1: .spec.legacy is removed"), "{changes:?}");
}

#[test]
fn the_crd_records_every_child_kind_the_definition_ever_wrote() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../operators/website.yaml");
    let (defs, diags) = crate::compile::compile_file(path, &std::fs::read_to_string(path).unwrap());
    assert!(diags.0.is_empty(), "{diags}");
    let def = &defs[0];
    let (desired, _) = verdict(def, None, None).unwrap().unwrap();
    let record = desired
        .pointer("/metadata/annotations/stencil.dev~1child-kinds")
        .and_then(Value::as_str)
        .unwrap()
        .to_string();
    assert!(record.contains("apps/v1/Deployment"), "{record}");
    let mut live: CustomResourceDefinition = serde_json::from_value(desired).unwrap();
    // An earlier version wrote CronJobs and Deployments at an older apiVersion.
    let older = format!("{record},batch/v1/CronJob,apps/v1beta1/Deployment, not a kind");
    live.metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert(labels::CHILD_KINDS.into(), older);
    let kinds: Vec<String> = child_kinds(def, Some(&live)).iter().map(Gvk::to_string).collect();
    assert!(kinds.contains(&"batch/v1/CronJob".to_string()), "{kinds:?}");
    assert!(kinds.contains(&"apps/v1/Deployment".to_string()), "{kinds:?}");
    assert!(
        !kinds.iter().any(|k| k.contains("v1beta1")),
        "one version per kind: {kinds:?}"
    );
    assert_eq!(
        verdict(def, Some(&live), None).unwrap().unwrap().1,
        CrdVerdict::Update,
        "the record is rewritten in its normal form"
    );
}

#[test]
fn a_live_crd_carries_the_definition_whose_versions_it_has() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../operators/website.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    let compile = |text: &str| {
        let (mut defs, diags) = crate::compile::compile_file(path, text);
        assert!(diags.0.is_empty(), "{diags}");
        defs.remove(0)
    };
    let def = compile(&text);
    let (desired, _) = verdict(&def, None, None).unwrap().unwrap();
    let live: CustomResourceDefinition = serde_json::from_value(desired).unwrap();
    assert!(carries(&live, &def));
    let retemplated = compile(&text.replace("domain: {{ object.spec.domains[0] | tojson }}", "domain: x"));
    assert!(
        carries(&live, &retemplated),
        "templates are not part of what a CRD carries"
    );
    let renamed = compile(&text.replace("domains", "hosts"));
    assert!(!carries(&live, &renamed), "a schema the CRD does not have");
    let mut moved = live.clone();
    for v in &mut moved.spec.versions {
        v.storage = v.name == "v1beta1";
    }
    assert!(!carries(&moved, &def), "another storage version");
}
